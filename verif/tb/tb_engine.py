"""cocotb testbench of the layer engine (``spartan_engine``), driven by cocotbext-axi: an
``AxiLiteMaster`` on the registers and a memory (:class:`EngineRam`, cocotbext-axi's RAM with
error windows and a write log) on the ``m_axi`` master, each channel with a random pause
generator (idle cycles on ``R`` and ``B``, back-pressure on ``AR``, ``AW`` and ``W``, the
AXI4-Lite channels likewise).

Checked against golden/engine.py (written from docs/engine.md): every result element of every
layer; every byte of memory outside the result elements unchanged (row gaps, the operands, the
background around them; the memory's write log shows no write outside the result elements and
each result byte written once); the descriptor checks' error codes; the per-tile decisions
through ``TILES_DENSE``/``TILES_SPARSE``, every event counter, ``TILE`` and every density-table
entry the layer wrote. From the ports, not the model: the AXI4 rules (payload held while
``valid`` waits, INCR bursts of whole bus words, at most ``max_burst`` beats, none across a
4 KiB boundary, ``wlast`` on each burst's last beat, reads inside the operands' regions and
writes inside the result's), every burst complete when ``STATUS.DONE`` is seen,
``A_WORDS``/``B_WORDS``/``C_WORDS`` against the beats seen, ``LAYER_CYCLES`` within the cycles
seen, and ``irq`` (never high with ``IRQ_EN`` 0, high while ``DONE`` and ``IRQ_EN``).

Tests: ``registers``, ``random_layers`` (args ``layers``, ``budget`` in cycles per layer,
``big``, ``edges``), ``numpy_layers``, ``row_patterns``, ``bad_descriptors``, ``table_end``
(a tile one entry past the density table), ``decision_at_a_tie`` (two tiles at and one
nonzero past ``THRESHOLD``), ``decision_writes_during_layer`` (``THRESHOLD``,
``TABLE_BASE`` and ``MODE`` written while tiles start), ``wgrad_full_row_group`` (``Xᵀ``
blocks of the longest rows), ``writes_held`` (the write channels
held until the stall reaches the reader), ``start_while_busy``, ``memory_error``,
``reset_mid_layer``, ``irq``; ``listed_layers`` runs ``args["cases"]`` (``[OP, M, K, N,
density, mode]``) to reproduce a failure. A wrong result leaves
``engine_fail_<cycle>.npz`` (operands, descriptor, memory as filled, expected and read result)
in the run's directory. Other cocotb tests can run layers from NumPy arrays with
:func:`run_layer_numpy`."""

from __future__ import annotations

import copy
import json
import logging
import os
from collections import deque
from dataclasses import dataclass, field

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiResp
from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
from cocotbext.axi.memory import Memory

from spartan_rtl.golden import engine as golden
from spartan_rtl.golden.engine import EngineModel
from spartan_rtl.golden.formats import mask, random_elements, to_signed
from spartan_rtl.hw.core import COUNTERS as core_counters
from spartan_rtl.tb.axis import Bench, manifest, pauses, read_int, test_args
from spartan_rtl.tb.profile import SATURATE, Profile, Waiver
from spartan_rtl.tb.tb_compactor import pattern_tiles
from spartan_rtl.tb.tb_core import expect_config

#: The event counters golden/engine.py models and every layer checks (CONFLICT_CYCLES and
#: A_ERRORS are the core's, which the engine's contract does not define: logged only).
CHECKED_COUNTERS = ("TILES_DENSE", "TILES_SPARSE", "ROWS_EMPTY", "MACS_DONE", "MACS_SKIPPED",
                    "ZERO_BEATS", "TILES_BELOW")
BUS_COUNTERS = ("A_WORDS", "B_WORDS", "C_WORDS")
#: The core's statistics counters (hw/core.py ``COUNTERS``), as registers of the engine.
CORE_COUNTERS = tuple(name for name, _, _ in core_counters)
BUSY, DONE, ERR = 1, 2, 4
RESP = {"SLVERR": AxiResp.SLVERR, "DECERR": AxiResp.DECERR}
TOP = 1 << 32


# --- the memory -------------------------------------------------------------------------------

class _ErrorResp(Exception):
    def __init__(self, resp):
        super().__init__(f"error response {resp}")
        self.resp = resp


def _with_resp(owner, channel, attr):
    """Wrap ``channel.send`` so that a response the RAM model marks SLVERR after an
    :class:`_ErrorResp` carries that exception's response (SLVERR or DECERR)."""
    send = channel.send

    async def send_with_resp(obj):
        pending, owner.pending_resp[attr] = owner.pending_resp[attr], None
        if pending is not None:
            setattr(obj, attr, pending)
        await send(obj)
    channel.send = send_with_resp


class _RamWrite(AxiRamWrite):
    def __init__(self, owner, *args, **kwargs):
        self.owner = owner
        super().__init__(*args, **kwargs)
        _with_resp(owner, self.b_channel, "bresp")

    async def _write(self, address, data):
        resp = self.owner.error_at("write", address, len(data))
        if resp is not None:
            self.owner.pending_resp["bresp"] = resp
            self.owner.refused.append(("write", address, len(data)))
            raise _ErrorResp(resp)
        self.owner.write_log.append((address, len(data)))
        self.write(address % self.size, data)


class _RamRead(AxiRamRead):
    def __init__(self, owner, *args, **kwargs):
        self.owner = owner
        super().__init__(*args, **kwargs)
        _with_resp(owner, self.r_channel, "rresp")
        # The slave takes a burst from its AR queue just before sending its beats: holding it
        # there holds the burst's first beat, while later ARs still queue behind it.
        recv = self.ar_channel.recv

        async def recv_after_latency():
            ar = await recv()
            await owner.after_read_latency()
            return ar
        self.ar_channel.recv = recv_after_latency

    async def _read(self, address, length):
        resp = self.owner.error_at("read", address, length)
        if resp is not None:
            self.owner.pending_resp["rresp"] = resp
            self.owner.refused.append(("read", address, length))
            raise _ErrorResp(resp)
        return self.read(address % self.size, length)


class EngineRam(Memory):
    """cocotbext-axi's ``AxiRam`` (same memory, same channel models) with two additions: error
    windows (``errors``: ``(kind, start, end, resp)``, kind ``"read"`` or ``"write"``: a beat
    touching ``[start, end)`` answers ``resp``, SLVERR or DECERR, and a refused write leaves
    memory as it was) and a log of every write performed (``write_log``: ``(address,
    bytes)`` per run of strobed bytes). cocotbext-axi's own slave answers only SLVERR, and only
    when its memory raises."""

    def __init__(self, bus, clock, reset=None, size=TOP):
        self.errors = []
        self.write_log = []
        self.refused = []
        self.pending_resp = {"bresp": None, "rresp": None}
        self.clock = clock
        #: Cycles from a read burst's AR transfer to its first R beat at the earliest (0: the
        #: model's own, the cycle after); the testbench records each AR in ``ar_cycles``.
        self.read_latency = 0
        self.ar_cycles = deque()
        self.cycle = 0
        super().__init__(size)
        self.write_if = _RamWrite(self, bus.write, clock, reset, True, mem=self.mem)
        self.read_if = _RamRead(self, bus.read, clock, reset, True, mem=self.mem)
        # A memory with a latency takes several bursts' addresses while it works on one.
        self.read_if.ar_channel.queue_occupancy_limit = 8

    async def after_read_latency(self):
        """Return ``read_latency`` cycles after the oldest burst's AR transfer."""
        taken = self.ar_cycles.popleft() if self.ar_cycles else None
        while taken is not None and self.cycle < taken + self.read_latency:
            await RisingEdge(self.clock)

    def error_at(self, kind, address, length):
        for k, start, end, resp in self.errors:
            if k == kind and address < end and start < address + length:
                return resp
        return None

    def channels(self):
        return (self.write_if.aw_channel, self.write_if.w_channel, self.write_if.b_channel,
                self.read_if.ar_channel, self.read_if.r_channel)


# --- one layer --------------------------------------------------------------------------------

@dataclass
class LayerRun:
    """One START: operands, layout, what the model expects, and what the ports showed."""
    op: int
    a: np.ndarray
    b: np.ndarray
    desc: dict
    expect: int                 # the ERR_CODE the model expects at START (0: runs)
    segments: list              # [(start, image as filled)]: the memory the layer may see
    regions: dict               # {"A": (start, end), ...}
    expected: np.ndarray | None = None   # the result (raw), when the layer runs
    tiles: int = 0
    traffic: dict = field(default_factory=dict)   # port counts at START
    start_cycle: int = 0
    done_cycle: int = 0
    counters_before: dict = field(default_factory=dict)


class EngineTB:
    def __init__(self, dut):
        self.dut = dut
        self.args = test_args()
        # The shared bench: clock, cycle count, the manifest, the seeded generator.
        self.bench = Bench(dut)
        self.doc = self.bench.manifest
        self.p = self.doc["params"]
        self.regs = {r["name"]: r for r in self.doc["registers"]}
        self.rng = self.bench.rng
        self.np_rng = np.random.default_rng(cocotb.RANDOM_SEED)
        self.word = self.p["data_width"] // 8
        self.acc_bytes = self.p["acc_width"] // 8
        self.model = EngineModel(dict(self.p))
        self.table_offset = self.regs["DENSITY_TABLE"]["offset"]
        self.cycle = 0
        self.irq_en = 0
        self.regions = None          # the running layer's regions: bursts must stay inside
        self._reset_traffic()

    def _reset_traffic(self):
        self.traffic = {"ar": 0, "r": 0, "r_A": 0, "r_B": 0, "aw": 0, "w": 0, "b": 0,
                        "ar_beats": 0, "aw_beats": 0, "first_ar": None, "last_b": None,
                        "last": {},   # the cycle of each channel's last transfer
                        "responses": []}   # (kind, resp) of each error response seen
        self._ar_queue = []          # [region, beats left] per read burst in flight

    async def start(self, *, bus_idle=0.3, mem_idle=0.3, ram_size=TOP):
        dut = self.dut
        await self.bench.reset()
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        for channel in (self.axil.write_if.aw_channel, self.axil.write_if.w_channel,
                        self.axil.read_if.ar_channel, self.axil.write_if.b_channel,
                        self.axil.read_if.r_channel):
            channel.set_pause_generator(pauses(self.rng, bus_idle))
        self.ram = EngineRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=ram_size)
        for channel in self.ram.channels():
            channel.set_pause_generator(pauses(self.rng, mem_idle))
        for prefix in ("s_axil", "m_axi"):   # a line per burst and per reset otherwise
            logging.getLogger(f"cocotb.{dut._name}.{prefix}").setLevel(logging.WARNING)
        self.model = EngineModel(dict(self.p))
        cocotb.start_soon(self._watch_ports())

    # --- the ports ----------------------------------------------------------------------------
    def _held_channels(self):
        """The channels whose payload must hold while ``valid`` waits: the master's AR, AW and
        W and the slave's B and R, as ``(name, valid's name, valid, ready, payload handles)``."""
        dut = self.dut
        channels = []
        for name, prefix, valid, ready, payload in (
                ("ar", "m_axi_", "arvalid", "arready", ("araddr", "arlen", "arsize", "arburst")),
                ("aw", "m_axi_", "awvalid", "awready", ("awaddr", "awlen", "awsize", "awburst")),
                ("w", "m_axi_", "wvalid", "wready", ("wdata", "wstrb", "wlast")),
                ("axil_b", "s_axil_", "bvalid", "bready", ("bresp",)),
                ("axil_r", "s_axil_", "rvalid", "rready", ("rdata", "rresp"))):
            channels.append((name, prefix + valid, getattr(dut, prefix + valid),
                             getattr(dut, prefix + ready),
                             tuple(getattr(dut, prefix + s) for s in payload)))
        return channels

    def _transfers(self, channels, held):
        """This cycle's transfers: ``{channel: its payload, or None}``. A payload waiting for
        ``ready`` is kept in ``held``: it must not change, nor ``valid`` drop, before it goes."""
        fire = {}
        for name, valid_name, valid, ready, payload in channels:
            v = read_int(valid)
            if not v:
                assert name not in held, \
                    f"cycle {self.cycle}: {valid_name} dropped before its transfer"
                fire[name] = None
                continue
            values = tuple(read_int(h) for h in payload)
            if name in held:
                was = held.pop(name)
                assert values == was, \
                    (f"cycle {self.cycle}: {name} payload changed while waiting: "
                     f"{was} -> {values}")
            if read_int(ready):
                fire[name] = values
            else:
                held[name] = values
                fire[name] = None
        return fire

    def _burst_taken(self, kind, addr, length, bsize, burst):
        """An AR or AW burst taken: its shape (INCR, whole words, at most ``max_burst`` beats,
        aligned, inside a 4 KiB page) and region (reads inside the operands, writes inside the
        result), counted. Returns its beats."""
        p, word = self.p, self.word
        t = self.traffic
        beats = length + 1
        what = f"cycle {self.cycle}: {kind.upper()} burst at {addr:#010x}, {beats} beats"
        assert burst == 1, f"{what}: burst type {burst}, expected INCR (1)"
        size = (word - 1).bit_length()
        assert bsize == size, f"{what}: size {bsize}, expected {size} (whole words)"
        assert beats <= p["max_burst"], f"{what}: more than max_burst {p['max_burst']}"
        assert addr % word == 0, f"{what}: not aligned to {word}-byte words"
        assert addr % 4096 + beats * word <= 4096, f"{what}: crosses a 4 KiB boundary"
        end = addr + beats * word
        inside = [n for n, (s, e) in (self.regions or {}).items()
                  if s <= addr and end <= e and (n == "C") == (kind == "aw")]
        assert self.regions is None or inside, \
            (f"{what}: outside the layer's "
             f"{'result region' if kind == 'aw' else 'operand regions'} "
             f"{ {n: (hex(s), hex(e)) for n, (s, e) in (self.regions or {}).items()} }")
        t[kind] += 1
        t[f"{kind}_beats"] += beats
        t["last"][kind] = self.cycle
        if kind == "ar":
            self.ram.ar_cycles.append(self.cycle)
            if t["first_ar"] is None:
                t["first_ar"] = self.cycle
            self._ar_queue.append([inside[0] if inside else "?", beats])
        return beats

    def _match_wlast(self, w_left, w_lasts):
        """``wlast`` exactly on each write burst's last beat: ``w_left``, the beats of each
        burst whose AW was taken, and ``w_lasts``, the ``wlast`` of each W beat not yet
        matched, lose the bursts seen whole. W may lead or follow its AW."""
        while w_left and w_lasts:
            length = w_left[0]
            seen = w_lasts[:length]
            expect = [0] * (length - 1) + [1]
            assert seen == expect[:len(seen)], \
                (f"cycle {self.cycle}: wlast {seen} on the beats of a {length}-beat burst, "
                 f"expected {expect[:len(seen)]}")
            if len(seen) < length:
                break
            del w_lasts[:length]
            w_left.pop(0)

    def _read_beat(self, resp):
        """An R beat taken: counted, against its burst's region."""
        t = self.traffic
        t["r"] += 1
        t["last"]["r"] = self.cycle
        if resp:
            t["responses"].append(("read", resp))
        if self._ar_queue:
            head = self._ar_queue[0]
            key = f"r_{head[0]}"
            t[key] = t.get(key, 0) + 1
            head[1] -= 1
            if head[1] == 0:
                self._ar_queue.pop(0)

    def _write_response(self, resp):
        """A B response taken: counted."""
        t = self.traffic
        t["b"] += 1
        t["last_b"] = t["last"]["b"] = self.cycle
        if resp:
            t["responses"].append(("write", resp))

    async def _watch_ports(self):
        """Every cycle, at the values the next rising edge samples: the AXI4 rules on the
        master's AR, AW and W and the slave's B and R (payload held while valid waits), every
        burst's shape, reads inside the operands and writes inside the result region, the
        traffic counts, and ``irq`` never high with ``IRQ_EN`` 0."""
        dut = self.dut
        held = {}
        channels = self._held_channels()
        rst, irq_h = dut.rst, dut.irq
        rvalid, rready, rresp = dut.m_axi_rvalid, dut.m_axi_rready, dut.m_axi_rresp
        bvalid, bready, bresp = dut.m_axi_bvalid, dut.m_axi_bready, dut.m_axi_bresp
        falling, readonly = FallingEdge(dut.clk), ReadOnly()
        w_left = []   # beats of each write burst whose AW was taken, not yet all seen
        w_lasts = []  # wlast of each W beat not yet matched with its burst
        while True:
            await falling
            await readonly
            self.cycle += 1
            self.ram.cycle = self.cycle
            t = self.traffic
            if read_int(rst):   # bursts cut by the reset: nothing more of them is due
                self.ram.ar_cycles.clear()
                held.clear()
                w_left.clear()
                w_lasts.clear()
                self._ar_queue.clear()
                t["aw"], t["aw_beats"], t["ar_beats"] = t["b"], t["w"], t["r"]
                continue
            if read_int(irq_h) and not self.irq_en:
                raise AssertionError(f"cycle {self.cycle}: irq high with IRQ_EN 0")
            fire = self._transfers(channels, held)
            for kind in ("ar", "aw"):
                if fire[kind] is not None:
                    beats = self._burst_taken(kind, *fire[kind])
                    if kind == "aw":
                        w_left.append(beats)
            if fire["w"] is not None:
                t["w"] += 1
                t["last"]["w"] = self.cycle
                w_lasts.append(fire["w"][2])
            self._match_wlast(w_left, w_lasts)
            if read_int(rvalid) and read_int(rready):
                self._read_beat(read_int(rresp))
            if read_int(bvalid) and read_int(bready):
                self._write_response(read_int(bresp))

    async def hard_reset(self, cycles=3):
        """``rst`` for ``cycles`` cycles with no bus transaction pending on the testbench's
        side; the model as after reset."""
        self.dut.rst.value = 1
        self.irq_en = 0
        await self.wait_cycles(cycles)
        self.dut.rst.value = 0
        self.regions = None
        self.model.reset()
        await self.wait_cycles(2)

    async def wait_cycles(self, cycles):
        for _ in range(cycles):
            await FallingEdge(self.dut.clk)

    # --- registers ----------------------------------------------------------------------------
    async def write(self, name, value, expect=AxiResp.OKAY):
        offset = self.regs[name]["offset"] if isinstance(name, str) else name
        resp = await self.axil.write(offset, (int(value) & 0xFFFF_FFFF).to_bytes(4, "little"))
        assert resp.resp == expect, f"write {name}: {resp.resp}, expected {expect}"

    async def read(self, name, expect=AxiResp.OKAY):
        offset = self.regs[name]["offset"] if isinstance(name, str) else name
        resp = await self.axil.read(offset, 4)
        assert resp.resp == expect, f"read {name}: {resp.resp}, expected {expect}"
        return int.from_bytes(resp.data, "little")

    async def ctrl(self, *, mode=None, start=False, clear=False, forget=False):
        if mode is not None:
            mode = self.doc["modes"][mode] if isinstance(mode, str) else mode
            self.model.mode = mode
        await self.write("CTRL", self.model.mode | start << 2 | clear << 3 | forget << 4)
        if clear:
            self.model.clear()
        if forget:
            self.model.forget()

    async def set_threshold(self, value):
        self.model.threshold = value
        await self.write("THRESHOLD", value)

    async def set_table_base(self, value):
        self.model.table_base = value
        await self.write("TABLE_BASE", value)

    async def set_irq_en(self, value):
        if value:
            self.irq_en = 1   # before: irq may rise as soon as the write lands
        await self.write("IRQ_EN", value)
        self.irq_en = int(value)

    async def read_counters(self, names=CHECKED_COUNTERS):
        return {name: await self.read(name) for name in names}

    async def check_counters(self):
        got = await self.read_counters(CHECKED_COUNTERS + ("CONFLICT_CYCLES", "A_ERRORS"))
        for name in CHECKED_COUNTERS:
            assert got[name] == self.model.counters[name], \
                f"counter {name} = {got[name]}, expected {self.model.counters[name]}"
        self.dut._log.info(f"CONFLICT_CYCLES {got['CONFLICT_CYCLES']} (core's model: "
                           f"{self.model.counters['CONFLICT_CYCLES']}), A_ERRORS "
                           f"{got['A_ERRORS']} (not checked)")
        return got

    async def check_table(self, entries):
        for e in entries:
            nnz_valid = await self.read(self.table_offset + 8 * e)
            elems = await self.read(self.table_offset + 8 * e + 4)
            want = self.model.table.get(e)
            if want is None:
                assert nnz_valid >> 31 == 0, f"density table entry {e} valid, expected invalid"
            else:
                got = (nnz_valid >> 31, nnz_valid & 0x7FFF_FFFF, elems)
                assert got == (1, *want), \
                    (f"density table entry {e}: (VALID, NNZ, ELEMS) = {got}, expected "
                     f"(1, {want[0]}, {want[1]})")

    # --- layout ---------------------------------------------------------------------------------
    def min_stride(self, op, M, K, N):
        ra, rb, rc = golden.row_bytes(op, M, K, N, self.p)
        w = self.word
        return {"A": -(-ra // w) * w, "B": -(-rb // w) * w, "C": -(-rc // w) * w}

    def layout(self, op, M, K, N, pitches=None, addrs=None):
        """Strides (the minimum plus 0 to 3 random words) and addresses: the three regions one
        after another in random order, random word-aligned gaps, from a random base (rows then
        cross 4 KiB boundaries anywhere)."""
        w = self.word
        rows = {"A": M, "B": M if op == 2 else K, "C": K if op == 2 else M}
        strides = self.min_stride(op, M, K, N)
        pitches = dict(pitches or {})
        for name in "ABC":
            if name not in pitches:
                pitches[name] = strides[name] + w * self.rng.choice((0, 0, 1, 3))
        addrs = dict(addrs or {})
        if len(addrs) < 3:
            # From any word of a 4 KiB page: a small layer's rows then straddle a boundary as
            # often as not (coverage found no burst cut at a boundary from the first 64 words).
            cursor = 0x1000_0000 + self.rng.randrange(0, 0x8000_0000, 4096) + \
                w * self.rng.randrange(4096 // w)
            for name in self.rng.sample("ABC", 3):
                if name not in addrs:
                    addrs[name] = cursor
                    cursor += (rows[name] - 1) * pitches[name] + strides[name] + \
                        w * self.rng.randrange(0, 9)
        return pitches, addrs

    def fill(self, a, b, desc):
        """Random background over every region of ``desc`` and 256 bytes around it (one
        segment per cluster of regions), then the operands at their rows. Returns the segments,
        ``[(start, image as filled: np.uint8)]``."""
        reg = golden.regions(desc, self.p)
        spans = sorted((max(0, s - 256), min(TOP, e + 256)) for s, e in reg.values())
        merged = []
        for s, e in spans:
            if merged and s <= merged[-1][1] + 4096:
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            else:
                merged.append((s, e))
        segments = [(s, self.np_rng.integers(0, 256, e - s, dtype=np.uint8)) for s, e in merged]
        for name, matrix in (("A", a), ("B", b)):
            start, stride = desc[f"{name}_ADDR"], desc[f"{name}_STRIDE"]
            for r, row in enumerate(golden.matrix_bytes(matrix, self.p["width"])):
                at = start + r * stride
                for s, image in segments:
                    if s <= at < s + image.size:
                        image[at - s:at - s + len(row)] = np.frombuffer(row, dtype=np.uint8)
        for s, image in segments:
            self.ram.write(s, image.tobytes())
        return segments

    # --- the layer ------------------------------------------------------------------------------
    async def program(self, desc):
        for name in golden.DESCRIPTOR_FIELDS:
            await self.write(name, desc[name])

    async def launch(self, op, a, b, *, pitches=None, addrs=None, mode=None, threshold=None,
                     table_base=None, desc_override=None):
        """Lay out and fill memory, program the descriptor (``desc_override`` replaces
        registers after the layout, for refused descriptors), write ``CTRL.START``. Returns the
        :class:`LayerRun`; the model has run the layer (or refused it)."""
        p = self.p
        a = np.asarray(a, dtype=np.uint64) & np.uint64(mask(p["width"]))
        b = np.asarray(b, dtype=np.uint64) & np.uint64(mask(p["width"]))
        M = a.shape[0]
        K = a.shape[1] if op in (0, 2) else b.shape[0]
        N = b.shape[1]
        shapes = golden.operand_shapes(op, M, K, N)
        assert (a.shape, b.shape) == shapes[:2], \
            f"OP {op}: operands {a.shape} and {b.shape}, expected {shapes[:2]}"
        pitches, addrs = self.layout(op, M, K, N, pitches, addrs)
        desc = {"OP": op, "M": M, "K": K, "N": N}
        for name in "ABC":
            desc[f"{name}_ADDR"], desc[f"{name}_STRIDE"] = addrs[name], pitches[name]
        good = dict(desc)
        desc.update(desc_override or {})
        segments = self.fill(a, b, good)
        if mode is not None:
            await self.ctrl(mode=mode)
        if threshold is not None:
            await self.set_threshold(threshold)
        if table_base is not None:
            await self.set_table_base(table_base)
        await self.program(desc)
        expect = golden.check_descriptor(desc, p)
        run = LayerRun(op, a, b, desc, expect, segments,
                       golden.regions(good, p) if expect == 0 else {})
        run.counters_before = await self.read_counters(BUS_COUNTERS)
        self.ram.write_log.clear()
        self.ram.refused.clear()
        self.regions = run.regions
        self.traffic["first_ar"] = None
        run.traffic = dict(self.traffic)
        run.start_cycle = self.cycle
        await self.write("CTRL", self.model.mode | 1 << 2)
        run.expected = self.model.start(desc, a, b)
        run.tiles = self.model.tile
        if expect == 0 and self.irq_en:
            await FallingEdge(self.dut.clk)
            await ReadOnly()
            assert read_int(self.dut.irq) == 0, "irq high after an accepted START (DONE clear)"
        return run

    async def wait_done(self, run, timeout=None):
        """Poll STATUS (random gaps) until DONE; with IRQ_EN 1 wait for ``irq`` first. Returns
        STATUS."""
        if timeout is None:
            timeout = self.timeout(run)
        deadline = self.cycle + timeout
        if self.irq_en:
            while True:
                await FallingEdge(self.dut.clk)
                await ReadOnly()
                if read_int(self.dut.irq):
                    break
                assert self.cycle < deadline, \
                    f"no irq within {timeout} cycles of START; {self.traffic_since(run)}"
            await FallingEdge(self.dut.clk)
            status = await self.read("STATUS")
            assert status & DONE, f"irq high with STATUS {status:#x} (DONE clear)"
        while True:
            status = await self.read("STATUS")
            if status & DONE:
                break
            assert self.cycle < deadline, \
                (f"STATUS.DONE not set within {timeout} cycles of START (STATUS {status:#x}); "
                 f"{self.traffic_since(run)}")
            await self.wait_cycles(self.rng.randrange(0, 30))
        run.done_cycle = self.cycle
        t = self.traffic
        assert t["b"] == t["aw"], \
            f"DONE with {t['aw'] - t['b']} write bursts unanswered (AW {t['aw']}, B {t['b']})"
        assert t["w"] == t["aw_beats"], \
            f"DONE with {t['aw_beats'] - t['w']} W beats of the write bursts not sent"
        assert t["r"] == t["ar_beats"], \
            f"DONE with {t['ar_beats'] - t['r']} read beats not taken"
        assert status & BUSY == 0, f"STATUS {status:#x}: BUSY with DONE"
        if self.irq_en:
            assert read_int(self.dut.irq) == 1, "irq low with DONE and IRQ_EN"
        return status

    def traffic_since(self, run):
        """The bus since START, for a message: transfers per channel, what is outstanding,
        and how long ago each channel last moved."""
        t, t0 = self.traffic, run.traffic
        d = {k: t[k] - t0.get(k, 0) for k in ("ar", "ar_beats", "r", "aw", "aw_beats", "w", "b")}
        idle = {k: self.cycle - c for k, c in t["last"].items()
                if c is not None and c > run.start_cycle}
        return (f"since START: {d['ar']} AR bursts ({d['ar_beats']} beats), {d['r']} R beats, "
                f"{d['aw']} AW bursts ({d['aw_beats']} beats), {d['w']} W beats, {d['b']} B; "
                f"outstanding {t['ar_beats'] - t['r']} R beats, {t['aw_beats'] - t['w']} W "
                f"beats, {t['aw'] - t['b']} B; cycles since each channel last moved {idle}; "
                f"cycles since START {self.cycle - run.start_cycle}; now "
                + " ".join(f"{c}valid/ready={self._level(f'm_axi_{c}valid')}"
                           f"/{self._level(f'm_axi_{c}ready')}"
                           for c in ("ar", "r", "aw", "w", "b")))

    def _level(self, name):
        return str(getattr(self.dut, name).value)

    def timeout(self, run):
        """Generous: every tile row at k cycles, every word at 20 cycles, and some."""
        p, (M, K, N) = self.p, (run.desc["M"], run.desc["K"], run.desc["N"])
        if run.expect:
            return 5000
        Mo, Ki, No = golden.dims(run.op, M, K, N)
        words = sum(e - s for s, e in run.regions.values()) // self.word
        tiles = run.tiles
        return 20000 + 4 * Mo * -(-Ki // p["k"]) * p["k"] * -(-No // p["n"]) + \
            20 * (words + tiles * p["k"] * p["n"] * p["width"] // 8 // self.word)

    def _where(self, run, addr):
        """Which part of the layout a byte address is in, for messages."""
        for name, (s, e) in run.regions.items() or ():
            if s <= addr < e:
                stride = run.desc[f"{name}_STRIDE"]
                r, off = divmod(addr - s, stride)
                return f"{name} region row {r} byte {off}"
        return "background"

    def result_mask(self, run, start, size):
        """Boolean over ``[start, start + size)``: the bytes of the result elements."""
        out = np.zeros(size, dtype=bool)
        if run.expect:
            return out
        rows, cols = golden.result_shape(run.op, run.desc["M"], run.desc["K"], run.desc["N"])
        for r in range(rows):
            at = run.desc["C_ADDR"] + r * run.desc["C_STRIDE"] - start
            lo, hi = max(at, 0), min(at + cols * self.acc_bytes, size)
            if lo < hi:
                out[lo:hi] = True
        return out

    def read_result(self, run):
        """The result matrix in memory (raw acc_width-bit patterns, np.uint64)."""
        rows, cols = golden.result_shape(run.op, run.desc["M"], run.desc["K"], run.desc["N"])
        out = np.zeros((rows, cols), dtype=np.uint64)
        nb = self.acc_bytes
        for r in range(rows):
            data = np.frombuffer(self.ram.read(run.desc["C_ADDR"] + r * run.desc["C_STRIDE"],
                                               cols * nb), dtype=np.uint8).reshape(cols, nb)
            for i in range(nb):
                out[r] |= data[:, i].astype(np.uint64) << np.uint64(8 * i)
        return out

    def check_memory(self, run, *, results=True, once=True):
        """Every result element (``results``), every other byte of the filled memory unchanged,
        no write outside the result elements, each result byte written once (``once``)."""
        log = list(self.ram.write_log)
        for start, image in run.segments:
            got = np.frombuffer(self.ram.read(start, image.size), dtype=np.uint8)
            in_result = self.result_mask(run, start, image.size)
            outside = np.flatnonzero((got != image) & ~in_result)
            if outside.size:
                at = start + int(outside[0])
                raise AssertionError(
                    f"{outside.size} bytes outside the result elements changed; first at "
                    f"{at:#010x} ({self._where(run, at)}): {got[outside[0]]:#04x}, was "
                    f"{image[outside[0]]:#04x}")
            counts = np.zeros(image.size, dtype=np.int32)
            rest = []
            for addr, length in log:
                if start <= addr and addr + length <= start + image.size:
                    counts[addr - start:addr - start + length] += 1
                else:
                    rest.append((addr, length))
            log = rest
            stray = np.flatnonzero((counts > 0) & ~in_result)
            assert stray.size == 0, \
                (f"{stray.size} bytes written outside the result elements; first at "
                 f"{start + int(stray[0]):#010x} ({self._where(run, start + int(stray[0]))}), "
                 f"its value unchanged only by chance")
            if once and run.expect == 0:
                bad = np.flatnonzero(in_result & (counts != 1))
                assert bad.size == 0, \
                    (f"{bad.size} result bytes not written exactly once; first at "
                     f"{start + int(bad[0]):#010x} ({self._where(run, start + int(bad[0]))}), "
                     f"written {counts[bad[0]]} times")
        assert not log, (f"{len(log)} writes outside the layer's memory; first "
                         f"{log[0][1]} bytes at {log[0][0]:#010x}")
        if results and run.expect == 0:
            res = self.read_result(run)
            wrong = np.argwhere(res != run.expected)
            if wrong.size:
                r, c = (int(x) for x in wrong[0])
                dump = f"engine_fail_{self.cycle}.npz"   # to reproduce outside the simulator
                np.savez(dump, a=run.a, b=run.b, expected=run.expected, got=res,
                         segments=np.array([(s0, img) for s0, img in run.segments], dtype=object),
                         desc=np.array([[k, v] for k, v in run.desc.items()], dtype=object),
                         params=np.array(list(self.p.items()), dtype=object))
                self.dut._log.error(f"operands, expected and read result saved in {dump}")
                raise AssertionError(
                    f"OP {run.op} M={run.desc['M']} K={run.desc['K']} N={run.desc['N']}: "
                    f"{len(wrong)} of {res.size} result elements wrong; first C[{r}, {c}] = "
                    f"{int(res[r, c]):#x}, expected {int(run.expected[r, c]):#x} (at "
                    f"{run.desc['C_ADDR'] + r * run.desc['C_STRIDE'] + c * self.acc_bytes:#010x})"
                    f"; wrong at {[tuple(int(x) for x in w) for w in wrong[:8]]}")
            return res
        return None

    async def check_bus_counters(self, run):
        """``A_WORDS``/``B_WORDS``/``C_WORDS`` against the beats seen at the ports during the
        layer (zeroed by its START: docs/interfaces.md#engine). ``LAYER_CYCLES`` within the
        cycles seen."""
        got = await self.read_counters(BUS_COUNTERS + ("LAYER_CYCLES",))
        t, t0 = self.traffic, run.traffic
        seen = {"A_WORDS": t.get("r_A", 0) - t0.get("r_A", 0),
                "B_WORDS": t.get("r_B", 0) - t0.get("r_B", 0),
                "C_WORDS": t["w"] - t0["w"]}
        for name, beats in seen.items():
            assert got[name] == beats, \
                f"{name} = {got[name]}: the ports saw {beats} beats in this layer"
        span = run.done_cycle - run.start_cycle
        assert 0 < got["LAYER_CYCLES"] <= span, \
            f"LAYER_CYCLES = {got['LAYER_CYCLES']}, START to DONE seen within {span} cycles"
        if t["first_ar"] is not None and t["last_b"] is not None and \
                t["first_ar"] > run.start_cycle:
            busy = t["last_b"] - t["first_ar"]
            assert got["LAYER_CYCLES"] >= busy, \
                f"LAYER_CYCLES = {got['LAYER_CYCLES']}, but the bus was busy {busy} cycles"

    async def finish(self, run, *, expect_code=None, status=None, results=True,
                     bus_counters=True):
        """After START: wait for DONE, then check STATUS, ERR_CODE, memory, counters, TILE,
        the density table and (``bus_counters``) the bus counters. Returns the result read
        from memory."""
        expect_code = run.expect if expect_code is None else expect_code
        got_status = await self.wait_done(run)
        want_status = status if status is not None else DONE | (ERR if expect_code else 0)
        code = await self.read("ERR_CODE")
        assert code == expect_code, \
            (f"ERR_CODE = {code}, expected {expect_code} for descriptor "
             f"{ {k: hex(v) for k, v in run.desc.items()} }")
        assert got_status == want_status, f"STATUS = {got_status:#x}, expected {want_status:#x}"
        self.regions = None
        self.model.err_code = expect_code
        if run.expect:
            t, t0 = self.traffic, run.traffic
            assert (t["ar"], t["aw"], t["w"]) == (t0["ar"], t0["aw"], t0["w"]), \
                (f"refused descriptor (code {run.expect}) but the bus saw "
                 f"{t['ar'] - t0['ar']} reads, {t['aw'] - t0['aw']} writes")
            self.check_memory(run)
            await self.check_counters()
            return None
        res = self.check_memory(run, results=results)
        await self.check_counters()
        tile = await self.read("TILE")
        assert tile == run.tiles, f"TILE = {tile}, expected {run.tiles} tiles in the layer"
        base = self.model.table_base
        await self.check_table([e for e in range(base, base + run.tiles)
                                if e < self.p["table_depth"]])
        if bus_counters:
            await self.check_bus_counters(run)
        return res

    async def run_layer(self, op, a, b, *, pitches=None, addrs=None, mode=None, threshold=None,
                        table_base=None, desc_override=None):
        """One layer from raw operands (as stored): lay out, fill, program, START, wait for
        DONE, check everything. Returns the result read from memory (raw), None if refused."""
        run = await self.launch(op, a, b, pitches=pitches, addrs=addrs, mode=mode,
                                threshold=threshold, table_base=table_base,
                                desc_override=desc_override)
        return await self.finish(run)

    # --- stimulus ---------------------------------------------------------------------------------
    def operand(self, shape, density, empty_rows=0.0):
        a = random_elements(self.np_rng, shape, self.p["width"], density)
        if empty_rows:
            a[self.np_rng.random(shape[0]) < empty_rows] = 0
        return a

    def operands(self, op, M, K, N, density=0.5, empty_rows=0.1):
        sa, sb, _ = golden.operand_shapes(op, M, K, N)
        return self.operand(sa, density, empty_rows), self.operand(sb, 0.9)

    def random_dims(self, op, big_rows=False, budget=None):
        """M, K, N from edge values (1, around lanes, k, n, acc_rows) and random ones, within a
        cycle budget. ``big_rows``: output rows past ``acc_rows`` (two row tiles)."""
        p = self.p
        budget = budget or self.args.get("budget", 30000)
        picks = [1, 2, p["lanes"] - 1, p["lanes"] + 1, p["k"] - 1, p["k"] + 1, p["n"] - 1,
                 p["n"] + 3, 2 * p["k"] + 5]
        picks = [x for x in picks if x >= 1]
        while True:
            dims = [self.rng.choice(picks) if self.rng.random() < 0.6 else
                    self.rng.randint(1, 3 * max(p["k"], p["n"])) for _ in range(3)]
            M, K, N = dims
            if big_rows:
                rows = p["acc_rows"] + self.rng.choice((1, p["lanes"] + 1, 3))
                if op == 2:
                    K = rows
                else:
                    M = rows
            Mo, Ki, No = golden.dims(op, M, K, N)
            cycles = Mo * -(-Ki // p["k"]) * p["k"] * -(-No // p["n"])
            if cycles <= budget:
                return M, K, N


def dims_of(op, Mo, Ki, No):
    """``(M, K, N)`` of the layer whose GEMM has ``Mo`` output rows, inner dimension ``Ki`` and
    ``No`` output columns (the inverse of golden/engine.py ``dims``)."""
    return {0: (Mo, Ki, No), 1: (Mo, No, Ki), 2: (Ki, Mo, No)}[op]


async def run_layer_numpy(tb, op, a, b, *, values=True, **kwargs):
    """Run one layer on the engine from NumPy arrays: ``a``, ``b`` as stored at ``A_ADDR`` and
    ``B_ADDR`` (X and W for OP 0, dY and W for OP 1, X and dY for OP 2), numbers (negative ones
    for signed engines) or raw patterns; the layer is checked against golden/engine.py like every
    layer of this testbench. Returns the result read from memory: numbers (``values``, the
    ``acc_width``-bit sums read as signed when the engine is) or raw patterns. ``kwargs``: as
    :meth:`EngineTB.run_layer` (pitches, addrs, mode, threshold, table_base)."""
    width = tb.p["width"]
    raw = [np.asarray(x).astype(np.int64).astype(np.uint64) & np.uint64(mask(width))
           for x in (a, b)]
    res = await tb.run_layer(op, raw[0], raw[1], **kwargs)
    if res is None or not values:
        return res
    acc = tb.p["acc_width"]
    return to_signed(res, acc) if tb.p["signed"] else res.astype(np.int64)


# --- tests ------------------------------------------------------------------------------------

@cocotb.test()
async def registers(dut):
    """ID, every register's reset value, descriptor registers read back (OP keeps 2 bits),
    read-only registers ignore writes (a write to every register answers OKAY), SLVERR beyond
    the map, an empty table reads invalid, the generator's parameters in the CONFIG registers."""
    tb = EngineTB(dut)
    await tb.start()
    assert await tb.read("ID") == tb.doc["id"]
    await expect_reset_state(tb, entries=range(min(4, tb.p["table_depth"])))
    values = {"OP": 0xFFFF_FFFE, "M": 0x1234_5678, "K": 0xFFFF_FFFF, "N": 7,
              "A_ADDR": 0xDEAD_BEE8, "A_STRIDE": 0x40, "B_ADDR": 0x8, "B_STRIDE": 0x1_0000,
              "C_ADDR": 0xFFFF_FFF8, "C_STRIDE": 0x80}
    for name, value in values.items():
        await tb.write(name, value)
    for name, value in values.items():
        width = tb.regs[name]["width"]
        assert await tb.read(name) == value & mask(width), name
    await tb.write("ID", 0)
    await tb.write("STATUS", 0xFF)
    await tb.write("ERR_CODE", 0xF)
    assert await tb.read("ID") == tb.doc["id"]
    assert await tb.read("STATUS") == 0 and await tb.read("ERR_CODE") == 0
    # A write to every register and to the table's last word answers OKAY: read-only ones
    # ignore it, read/write ones keep the value written back (CTRL reads its MODE alone).
    before = {name: await tb.read(name) for name in tb.regs if name != "CYCLES"}
    for name, reg in tb.regs.items():
        await tb.write(name, 0 if reg["access"] == "ro" else before[name])
    await tb.write(tb.table_offset + 8 * tb.p["table_depth"] - 4, 1)
    for name, value in before.items():
        assert await tb.read(name) == value, name
    assert await tb.read("CYCLES") > 0
    for offset in (0x88, 0x200, tb.table_offset + 8 * tb.p["table_depth"], 0xFFFC):
        assert await tb.read(offset, expect=AxiResp.SLVERR) == 0
        await tb.write(offset, 1, expect=AxiResp.SLVERR)
    await expect_config(tb, without=("sparse",))   # the twin has the engine's map


async def expect_reset_state(tb, entries=()):
    """Every register at its manifest reset value (not CYCLES, which counts on), the table
    ``entries`` invalid, ``irq`` low."""
    for r in tb.doc["registers"]:
        if r["name"] in ("CYCLES", "DENSITY_TABLE") or r.get("reset") is None:
            continue
        got = await tb.read(r["name"])
        assert got == r["reset"], f"{r['name']} = {got:#x} after reset, expected {r['reset']:#x}"
    for e in entries:
        assert await tb.read(tb.table_offset + 8 * e) >> 31 == 0, f"entry {e} valid after reset"
    assert read_int(tb.dut.irq) == 0, "irq high after reset"


@cocotb.test()
async def random_layers(dut):
    """Random layers of all three OPs: M, K, N from 1, non-multiples of lanes, k, n and
    acc_rows (one layer with two row tiles), random pitches with padding words, random layout;
    MODE auto, dense, sparse (and 3, as dense) at random THRESHOLD and TABLE_BASE, some layers
    repeating the last one's operands (auto decisions from its table); a read latency of 0, 3
    or 20 cycles on top of the random pauses. Every result element, memory outside, counters,
    table."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    layers = tb.args.get("layers", 6)
    await tb.ctrl(mode=0, clear=True, forget=True)
    last = None
    big = tb.rng.randrange(layers) if tb.args.get("big", True) else -1
    # First, per OP, a small layer over every loop: one output row, two inner chunks (the last
    # one element), two column chunks (the last one column); then one whose rows and inner
    # dimension fill their chunks exactly (a loop reloaded at its bound: ``left`` = its size),
    # with two column chunks; then random ones.
    edges = [(op, *dims_of(op, 1, p["k"] + 1, p["n"] + 1)) for op in range(3)] \
        + [(0, *dims_of(0, p["acc_rows"], p["k"], p["n"] + 1))] \
        if tb.args.get("edges", True) else []
    for i in range(len(edges) + layers):
        if i < len(edges):
            op, M, K, N = edges[i]
            a, b = tb.operands(op, M, K, N, density=0.7)
        elif last is not None and tb.rng.random() < 0.4:
            op, a, b = last   # the same layer again: the table holds its tiles
            if tb.rng.random() < 0.5:
                a = tb.operand(a.shape, tb.rng.choice((0.05, 0.3, 0.9)), 0.1)
        else:
            op = tb.rng.randrange(3)
            M, K, N = tb.random_dims(op, big_rows=(i - len(edges) == big))
            a, b = tb.operands(op, M, K, N, density=tb.rng.choice((0.0, 0.05, 0.2, 0.5, 0.9, 1.0)))
        mode = tb.rng.choice((0, 0, 0, 1, 2, 3))
        threshold = tb.rng.choice((0, 0x20, 0x80, 0xC0, 0xFF, tb.rng.randrange(256)))
        table_base = tb.rng.choice((0, 0, tb.rng.randrange(p["table_depth"]),
                                    p["table_depth"] - 2 if p["table_depth"] > 2 else 0))
        if last is not None and (op, a.shape) == (last[0], last[1].shape) and tb.rng.random() < 0.7:
            table_base = tb.model.table_base
        if tb.rng.random() < 0.2:
            await tb.ctrl(clear=True)
        if tb.rng.random() < 0.3 or tb.irq_en:
            await tb.set_irq_en(int(tb.rng.random() < 0.5))
        if tb.rng.random() < 0.1:
            await tb.ctrl(forget=True)
        # A memory that answers the cycle after, or later (bursts queue behind the first).
        tb.ram.read_latency = tb.rng.choice((0, 0, 3, 20))
        dut._log.info(f"layer {i}: OP {op}, A {a.shape}, B {b.shape}, MODE {mode}, "
                      f"THRESHOLD {threshold:#x}, TABLE_BASE {table_base}")
        await tb.run_layer(op, a, b, mode=mode, threshold=threshold, table_base=table_base)
        dut._log.info(f"layer {i}: {tb.model.tile} tiles, sparse "
                      f"{sum(tb.model.decisions)}; cycle {tb.cycle}")
        last = (op, a, b)
    got = await tb.read_counters()
    dut._log.info(f"counters at the end: {got}")


@cocotb.test()
async def row_patterns(dut):
    """A forward layer, forced sparse, whose X rows are the compactor's zero patterns (together
    they take every lane-to-slot route of its crossbar), each after a full row, then rows of
    every data-beat count, each after a full row (the GEMM's loader ends a row's load while the
    other slot computes a full one, at every beat position), then a run of one-nonzero rows
    that fills the mask FIFO: every result element. Fault injection on the engine found these
    faults unseen by random layers."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    K, lanes = p["k"], p["lanes"]
    rows = [row for _, tile in pattern_tiles(tb.np_rng, lanes=lanes, width=p["width"], cols=K,
                                              number_format="int") for row in tile]
    for beats in range(1, K // lanes + 1):
        nnz = min(K, (beats - 1) * lanes + tb.rng.randint(1, lanes))
        row = np.zeros(K, dtype=np.uint64)
        row[tb.np_rng.permutation(K)[:nnz]] = random_elements(tb.np_rng, nnz, p["width"], 1.0)
        rows.append(row)
    full = tb.operand((len(rows), K), 1.0)
    a = [r for pair in zip(full, rows) for r in pair]
    # Then a long run of rows of one nonzero each, at random columns: rows arrive faster than
    # the GEMM sends their sums, so the compactor's mask FIFO fills (with masks that differ).
    for _ in range(6 * lanes):
        row = np.zeros(K, dtype=np.uint64)
        row[tb.rng.randrange(K)] = random_elements(tb.np_rng, 1, p["width"], 1.0)[0]
        a.append(row)
    await tb.run_layer(0, np.stack(a), tb.operand((K, p["n"]), 0.9), mode=2)


@cocotb.test(skip=not test_args().get("cases"))
async def listed_layers(dut):
    """Directed layers, to reproduce or probe: ``args["cases"]`` is a list of ``[OP, M, K, N]``
    or ``[OP, M, K, N, density, mode]``; every layer checked as in :func:`random_layers`."""
    tb = EngineTB(dut)
    await tb.start()
    failures = []
    for case in tb.args["cases"]:
        op, M, K, N = case[:4]
        density = case[4] if len(case) > 4 else 0.5
        mode = case[5] if len(case) > 5 else 1
        a, b = tb.operands(op, M, K, N, density=density)
        try:
            await tb.run_layer(op, a, b, mode=mode)
            dut._log.info(f"case {case}: pass")
        except AssertionError as e:
            if not tb.args.get("keep_going"):
                raise
            dut._log.error(f"case {case}: FAIL {e}")
            failures.append(case)
            await tb.hard_reset()   # the engine may be stuck: start the next case afresh
    assert not failures, f"failing cases: {failures}"


@cocotb.test()
async def numpy_layers(dut):
    """:func:`run_layer_numpy` on small numbers, each OP against NumPy's own product of the
    numbers (X·W, dY·Wᵀ, Xᵀ·dY: no wrap at these sizes), not the golden model's."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    lo, hi = (-8, 8) if p["signed"] else (0, 16)
    M, K, N = p["lanes"] + 1, p["k"] + 3, p["n"] - 1 or 1
    x = tb.np_rng.integers(lo, hi, (M, K))
    w = tb.np_rng.integers(lo, hi, (K, N))
    dy = tb.np_rng.integers(lo, hi, (M, N))
    for op, a, b, want in ((0, x, w, x @ w), (1, dy, w, dy @ w.T), (2, x, dy, x.T @ dy)):
        got = await run_layer_numpy(tb, op, a, b, mode=tb.rng.choice((0, 1, 2)))
        assert got.shape == want.shape and (got == want).all(), \
            f"OP {op}: {np.argwhere(got != want)[:4].tolist()} differ from NumPy's product"


def bad_cases(tb, good):
    """``(what, override, code)`` refused descriptors of every code, built from a good layout
    ``good`` (a descriptor dict), each code's case worked from the rules, not from the model;
    the model must agree (checked as each runs)."""
    w, p = tb.word, tb.p
    op, M, K, N = good["OP"], good["M"], good["K"], good["N"]
    regions = golden.regions(good, p)
    strides = tb.min_stride(op, M, K, N)
    a0, a1 = regions["A"]
    c0, c1 = regions["C"]
    c_size = c1 - c0
    # Rows one element past a bus word: their bytes round up to two words, so a stride of one
    # word is short (the rounding is what the check must get right; A and C keep legal strides).
    n_odd = w // (p["width"] // 8) + 1
    odd = tb.min_stride(op, M, K, n_odd)
    return [
        ("OP 3", {"OP": 3}, 1),
        ("OP 3 and M 0", {"OP": 3, "M": 0}, 1),
        ("M 0", {"M": 0}, 2),
        ("K 65536", {"K": 65536}, 2),
        ("N 2**32-1", {"N": 0xFFFF_FFFF}, 2),
        ("N 0 and A_ADDR unaligned", {"N": 0, "A_ADDR": good["A_ADDR"] + 1}, 2),
        ("A_ADDR + 1", {"A_ADDR": good["A_ADDR"] + 1}, 3),
        ("B_ADDR + word/2", {"B_ADDR": good["B_ADDR"] + w // 2}, 3),
        ("C_ADDR + 4", {"C_ADDR": good["C_ADDR"] + 4}, 3 if w > 4 else None),
        ("A_STRIDE + 2", {"A_STRIDE": good["A_STRIDE"] + 2}, 3),
        ("C_STRIDE - 1 (also short)", {"C_STRIDE": strides["C"] - 1}, 3),
        ("A_STRIDE a word short", {"A_STRIDE": strides["A"] - w}, 4),
        ("B_STRIDE 0", {"B_STRIDE": 0}, 4),
        (f"N {n_odd}, B_STRIDE a word short", {"N": n_odd, "A_STRIDE": odd["A"],
                                                "B_STRIDE": odd["B"] - w, "C_STRIDE": odd["C"]}, 4),
        ("C_STRIDE a word short", {"C_STRIDE": strides["C"] - w}, 4),
        ("C_STRIDE short and C past the top", {"C_STRIDE": strides["C"] - w,
                                               "C_ADDR": TOP - w}, 4),
        ("C ends a word past 2**32", {"C_ADDR": TOP - c_size + w}, 5),
        ("C ends at 2**32 exactly: runs", {"C_ADDR": TOP - c_size}, None),
        ("A ends past 2**32, C overlapping it", {"A_ADDR": TOP - w, "C_ADDR": TOP - c_size}, 5),
        ("B_ADDR 2**32 - word", {"B_ADDR": TOP - w}, 5 if regions["B"][1] -
         regions["B"][0] > w else None),
        ("C starts in A's last word", {"C_ADDR": a1 - w}, 6),
        ("C ends in A's first word", {"C_ADDR": a0 - c_size + w}, 6),
        ("C on B", {"C_ADDR": regions["B"][0]}, 6),
    ]


@cocotb.test()
async def bad_descriptors(dut):
    """Each refused START (codes 1 to 6, and their order): STATUS = DONE|ERR, ERR_CODE, no bus
    transfer, memory untouched, counters unchanged; then a good layer runs and clears ERR."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    op = tb.args.get("op", 0)
    M, K, N = 3, p["lanes"] + 1, p["lanes"] - 1 or 1
    a, b = tb.operands(op, M, K, N)
    pitches, addrs = tb.layout(op, M, K, N)
    good = {"OP": op, "M": M, "K": K, "N": N}
    for name in "ABC":
        good[f"{name}_ADDR"], good[f"{name}_STRIDE"] = addrs[name], pitches[name]
    await tb.ctrl(mode=2, clear=True)
    for what, override, code in bad_cases(tb, good):
        if code is None:   # a descriptor that runs: not in the memory we filled
            continue
        model_code = golden.check_descriptor({**good, **override}, p)
        assert model_code == code, f"{what}: the model says {model_code}, the rules {code}"
        if code == 0:
            continue
        dut._log.info(f"refused: {what} -> {code}")
        run = await tb.launch(op, a, b, pitches=pitches, addrs=addrs, desc_override=override)
        await tb.finish(run)
        # a good layer in between now and then: ERR cleared by the accepted START
        if code in (1, 6):
            await tb.run_layer(op, a, b, pitches=pitches, addrs=addrs)
    # C ending exactly at 2**32 runs (nothing wraps): M rows of C at the top of memory.
    top = {"C": TOP - (golden.regions(good, p)["C"][1] - golden.regions(good, p)["C"][0])}
    await tb.run_layer(op, a, b, pitches=pitches, addrs={**addrs, **top})
    await tb.run_layer(op, a, b)


@cocotb.test()
async def start_while_busy(dut):
    """START while a layer runs: ERR_CODE 7 and STATUS.ERR at once, the running layer goes on
    to its end (every result right, nothing else written), DONE then; the next START works."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    op = tb.args.get("op", 0)
    M, K, N = 2 * p["lanes"] + 3, p["k"] + 3, p["n"] + 1
    a, b = tb.operands(op, M, K, N, density=0.7)
    run = await tb.launch(op, a, b, mode=1)
    for _ in range(20000):   # well inside the layer: its first read beats in
        await FallingEdge(dut.clk)
        if tb.traffic["r"] - run.traffic["r"] >= 4:
            break
    status = await tb.read("STATUS")
    assert status & BUSY, f"STATUS {status:#x}: not BUSY after START"
    await tb.write("CTRL", tb.model.mode | 1 << 2)
    status = await tb.read("STATUS")
    code = await tb.read("ERR_CODE")
    assert status & BUSY, f"STATUS {status:#x}: the layer ended before the check (make it longer)"
    assert code == 7, f"ERR_CODE = {code} after START while BUSY, expected 7"
    assert status & (BUSY | ERR | DONE) == BUSY | ERR, \
        f"STATUS {status:#x} after START while BUSY: expected BUSY and ERR"
    await tb.finish(run, expect_code=7, status=DONE | ERR)
    await tb.run_layer(op, a, b, mode=2)
    assert await tb.read("ERR_CODE") == 0


@cocotb.test()
async def memory_error(dut):
    """SLVERR and DECERR on a read of A, a read of B and a write of C: ERR_CODE 8 or 9,
    STATUS = DONE|ERR, BUSY clear, every burst finished, nothing written outside the result
    elements; after each, a good layer runs normally (the table forgotten, counters cleared,
    since the stopped layer's counts depend on where it stopped)."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    cases = [("read", "A", "SLVERR"), ("read", "B", "DECERR"), ("write", "C", "SLVERR"),
             ("write", "C", "DECERR"), ("read", "A", "DECERR")]
    for n, (kind, region, resp) in enumerate(cases):
        op = n % 3
        M, K, N = p["lanes"] + 3, p["k"] + 5, p["n"] - 1
        a, b = tb.operands(op, M, K, N)
        pitches, addrs = tb.layout(op, M, K, N)
        desc = {"OP": op, "M": M, "K": K, "N": N}
        for name in "ABC":
            desc[f"{name}_ADDR"], desc[f"{name}_STRIDE"] = addrs[name], pitches[name]
        s, e = golden.regions(desc, p)[region]
        rows = {"A": M, "B": M if op == 2 else K, "C": K if op == 2 else M}[region]
        at = s + (rows // 2) * desc[f"{region}_STRIDE"]   # the first word of a middle row
        tb.ram.errors = [(kind, at, at + tb.word, RESP[resp])]
        run = await tb.launch(op, a, b, pitches=pitches, addrs=addrs, mode=tb.rng.choice((1, 2)))
        code = 8 if kind == "read" else 9
        status = await tb.wait_done(run)
        assert tb.ram.refused, f"{resp} on {kind} of {region}: the window at {at:#x} never hit"
        seen = set(tb.traffic["responses"])
        tb.traffic["responses"].clear()
        assert seen == {(kind, int(RESP[resp]))}, f"error responses at the ports: {seen}"
        got = await tb.read("ERR_CODE")
        assert got == code, f"{resp} on a {kind} of {region}: ERR_CODE {got}, expected {code}"
        assert status == DONE | ERR, f"{resp} on a {kind} of {region}: STATUS {status:#x}"
        tb.regions = None
        run.expected = None
        tb.check_memory(run, results=False, once=False)
        dut._log.info(f"{resp} on {kind} of {region} at {at:#x}: stopped after "
                      f"{tb.traffic['w'] - run.traffic['w']} W beats, "
                      f"{tb.traffic['r'] - run.traffic['r']} R beats")
        tb.ram.errors = []
        await tb.ctrl(clear=True, forget=True)
        await tb.run_layer(op, a, b, pitches=pitches, addrs=addrs)
        assert await tb.read("ERR_CODE") == 0
    # Stopping early: six column chunks (args "chunks"), each a step that reads A again; the
    # first word of A fails, so the layer must end before writing every chunk's results.
    chunks = tb.args.get("chunks", 6)
    M, K, N = 2, p["lanes"] + 1, (chunks - 1) * p["n"] + 1
    a, b = tb.operands(0, M, K, N)
    pitches, addrs = tb.layout(0, M, K, N)
    tb.ram.errors = [("read", addrs["A"], addrs["A"] + tb.word, AxiResp.SLVERR)]
    run = await tb.launch(0, a, b, pitches=pitches, addrs=addrs, mode=1)
    status = await tb.wait_done(run)
    tb.ram.errors = []
    tb.traffic["responses"].clear()
    assert (status, await tb.read("ERR_CODE")) == (DONE | ERR, 8)
    tb.regions = None
    tb.check_memory(run, results=False, once=False)
    words = M * -(-N * tb.acc_bytes // tb.word)
    written = tb.traffic["w"] - run.traffic["w"]
    dut._log.info(f"read error on A's first word: {written} of {words} result words written")
    assert written < words, \
        (f"a read error on A's first word, in the first of {chunks} column chunks: the layer "
         f"went on to write all {words} result words")
    await tb.ctrl(clear=True, forget=True)
    await tb.run_layer(0, a, b, pitches=pitches, addrs=addrs)


def _built_sparse():
    """Whether the engine under test skips zeros (not the dense-only twin); True outside a
    simulation (the module imported for its profile)."""
    return "SPARTAN_MANIFEST" not in os.environ or manifest()["params"]["sparse"]


@cocotb.test(skip=not _built_sparse())   # the dense-only twin has no table
async def table_end(dut):
    """A tile whose entry ``TABLE_BASE + t`` is exactly ``table_depth``, one past the table,
    while entry 0 holds a sparse measurement: the tile has no entry (dense in auto mode), and
    is not recorded; an index that wrapped would take entry 0's verdict."""
    if not _built_sparse():
        # The dense-only twin has no table. (Skipped by the decorator, but a test named in
        # a filter, as the mutant subset names it, runs anyway.)
        return
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    await tb.ctrl(mode=0, clear=True, forget=True)
    await tb.set_threshold(0xFF)
    M, K, N = 2, 1, 1                        # one tile: its measurement goes to entry 0
    a, b = tb.operands(0, M, K, N, density=0.0)
    await tb.run_layer(0, a, b, table_base=0)
    M, K, N = 2, p["k"] + 1, 1               # two tiles: entries depth - 1 and depth
    a, b = tb.operands(0, M, K, N, density=0.0)
    for _ in range(2):
        await tb.run_layer(0, a, b, table_base=p["table_depth"] - 1)
    assert tb.model.decisions == [True, False], \
        f"the model decided {tb.model.decisions}: the case is not what it tests"


@cocotb.test()
async def wgrad_full_row_group(dut):
    """``OP`` 2 with a full row group of result rows and three inner chunks: each ``Xᵀ``
    block is ``k`` rows of ``acc_rows/lanes`` words, the longest rows the reader reads (its
    bursts of ``max_burst`` beats at the smaller configurations); the last inner chunk one
    position, the second column chunk one column. Sparse, then dense."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    M, K, N = dims_of(2, p["acc_rows"], 2 * p["k"] + 1, p["n"] + 1)
    a, b = tb.operands(2, M, K, N, density=0.3, empty_rows=0.0)
    for mode in (2, 1):
        await tb.run_layer(2, a, b, mode=mode)


@cocotb.test(skip=not _built_sparse())   # the dense-only twin decides nothing
async def decision_at_a_tie(dut):
    """Two tiles of ``acc_rows - 1`` rows (every bit of their ``rows*k`` element count below
    the top one set, at the defaults), the first with exactly ``THRESHOLD/256`` of its elements
    nonzero and the second with one nonzero more, run twice in auto mode: the second run
    decides each from its first run's entry, sparse at the tie (``nnz*256 <= THRESHOLD *
    elems``) and dense one past it. An entry's element count, ``THRESHOLD`` or the nonzero
    count off in any bit moves one of the two decisions; random layers land on such a tie
    only by chance."""
    if not _built_sparse():
        return                               # named in the mutant subset: runs anyway
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    rows, k, threshold = p["acc_rows"] - 1, p["k"], 0x80
    elems = rows * k
    tie = elems * threshold // 256
    assert tie * 256 == elems * threshold, "the tile's element count has no exact tie"
    a = np.zeros((rows, 2 * k), dtype=np.uint64)
    for chunk, nnz in enumerate((tie, tie + 1)):
        block = np.zeros(elems, dtype=np.uint64)
        block[tb.np_rng.choice(elems, nnz, replace=False)] = tb.np_rng.integers(
            1, 1 << p["width"], nnz, dtype=np.uint64)
        a[:, chunk * k:(chunk + 1) * k] = block.reshape(rows, k)
    b = tb.operand((2 * k, 1), 0.9)
    await tb.ctrl(mode=0, clear=True, forget=True)
    for _ in range(2):
        await tb.run_layer(0, a, b, mode=0, threshold=threshold, table_base=0)
    assert tb.model.decisions == [True, False], \
        f"the model decided {tb.model.decisions}: the case is not what it tests"


@cocotb.test(skip=not _built_sparse())   # the dense-only twin decides nothing
async def decision_writes_during_layer(dut):
    """``THRESHOLD``, ``TABLE_BASE`` and ``CTRL.MODE`` (``START`` 0) written again and again
    while a layer of short tiles runs, the second time its operands are seen (the table holds
    the first run's entries): each tile is decided, and its ``TILES_BELOW`` verdict taken, on
    the values in force at its first ``A`` beat into the core, i.e. by every write whose ``B``
    response was offered by that cycle (the core's rule, docs/interfaces.md "Per-tile
    decision"; a tile that would start just after a write waits for the decision). Each
    tile's decision is read at its first beat from the core's ``modes`` FIFO and checked
    against the rule worked by the model from the first run's entries, then every result,
    counter and entry as after any layer. The values alternate so that a tile decided on a
    stale one is decided the other way: ``THRESHOLD`` between 12.5 % and 87.5 % over tiles of
    density 0.2 to 0.8, ``TABLE_BASE`` between the first run's entries and the table's end (no
    entry: dense)."""
    if not _built_sparse():
        return
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    depth = p["table_depth"]
    op = tb.rng.randrange(3)
    chunks = max(1, min(12, depth // 2))         # inner chunks; two column chunks: 2x tiles
    Mo, Ki, No = tb.rng.randint(1, 3), chunks * p["k"] - tb.rng.randrange(p["k"] // 2), p["n"] + 1
    operand = np.concatenate([tb.operand((Mo, p["k"]), tb.rng.uniform(0.2, 0.8))
                              for _ in range(chunks)], axis=1)[:, :Ki]
    M, K, N = dims_of(op, Mo, Ki, No)
    a = operand.T.copy() if op == 2 else operand
    b = tb.operand(golden.operand_shapes(op, M, K, N)[1], 0.9)
    await tb.ctrl(clear=True, forget=True)
    await tb.run_layer(op, a, b, mode=0, threshold=0x80, table_base=0)   # the table's entries
    model = copy.deepcopy(tb.model)
    handles = internal_handles(dut, ["core.modes.w_en", "core.sparse_next"])
    tile_starts, b_first = [], []                # (cycle, sparse) per tile; cycles of B offers

    async def watch():
        cycle, offered = 0, False                # a write response offered and not taken
        while True:
            await FallingEdge(dut.clk)
            await ReadOnly()
            cycle += 1
            bvalid = read_int(dut.s_axil_bvalid)
            if bvalid and not offered:
                b_first.append(cycle)
            offered = bool(bvalid) and not read_int(dut.s_axil_bready)
            if read_int(handles["core.modes.w_en"]):
                tile_starts.append((cycle, bool(read_int(handles["core.sparse_next"]))))

    watcher = cocotb.start_soon(watch())
    run = await tb.launch(op, a, b)
    state = {"MODE": 0, "THRESHOLD": 0x80, "TABLE_BASE": 0}
    timeline = [(0, name, value) for name, value in state.items()]  # (first cycle, reg, value)
    deadline = tb.cycle + tb.timeout(run)
    while len(tile_starts) < run.tiles:
        assert tb.cycle < deadline, \
            f"{len(tile_starts)} of {run.tiles} tiles started {tb.timeout(run)} cycles after START"
        for _ in range(tb.rng.randrange(0, 4)):
            await FallingEdge(dut.clk)
        draw = tb.rng.random()
        if draw < 0.35:
            name = "THRESHOLD"
            state[name] = 0x20 if state[name] != 0x20 else 0xE0
            await tb.write(name, state[name])
        elif draw < 0.8:
            name = "TABLE_BASE"
            state[name] = depth - state[name]
            await tb.write(name, state[name])
        else:
            name = "MODE"
            state[name] = tb.rng.choice([m for m in (0, 1, 2) if m != state[name]])
            await tb.write("CTRL", state[name])
        timeline.append((b_first[-1], name, state[name]))
    assert len(tile_starts) == run.tiles, \
        f"{len(tile_starts)} tile starts seen, the layer has {run.tiles} tiles"
    # The model runs the layer again, each tile on the values in force at its first beat.
    model.tile, model.err_code, model.done = 0, 0, True
    expected, raced = [], 0
    for (start, _), (_, _, block) in zip(tile_starts, golden.tile_blocks(op, run.a, p, M, K, N)):
        now = {name: value for cycle, name, value in timeline if cycle <= start}
        model.mode, model.threshold, model.table_base = (now["MODE"], now["THRESHOLD"],
                                                         now["TABLE_BASE"])
        expected.append(model.run_block(block))
        raced += any(0 <= start - cycle < 8 for cycle, _, _ in timeline[len(state):])
    model.decisions = expected
    model.mode, model.threshold, model.table_base = (state["MODE"], state["THRESHOLD"],
                                                     state["TABLE_BASE"])
    tb.model = model
    got = [sparse for _, sparse in tile_starts]
    dut._log.info(f"OP {op}, {run.tiles} tiles, {len(timeline) - len(state)} writes, {raced} "
                  f"tiles started within 8 cycles of one; sparse {sum(got)}")
    wrong = [t for t in range(run.tiles) if got[t] != expected[t]]
    assert not wrong, \
        (f"tiles {wrong} decided {'sparse' if got[wrong[0]] else 'dense'} (expected the other); "
         f"tile {wrong[0]} started at cycle {tile_starts[wrong[0]][0]}, the writes just before: "
         f"{[w for w in timeline if 0 <= tile_starts[wrong[0]][0] - w[0] < 12]}")
    assert raced > 0, "no tile started within 8 cycles of a write"
    watcher.cancel()
    await tb.finish(run)


@cocotb.test()
async def writes_held(dut):
    """W held while a layer of two row groups computes: the first group's results fill the
    accumulator's results FIFO (a row group deep), the second group's only chunk waits for
    room, and the stall backs up through the register slice on ``C`` (its skid register) into
    the GEMM, the compactor's FIFOs and the reader, until no R beat moves. AW is not held: the
    writer's addresses run ahead until its queue of burst lengths (``lengths``) is full, and
    with rows of ``max_burst + 4`` words that queue holds bursts of two lengths. Then W runs
    again (random pauses) and every result must be right."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    row_words = p["max_burst"] + 4
    M, K = 2 * p["acc_rows"], p["k"]
    N = min(p["n"], row_words * p["data_width"] // p["acc_width"])
    a, b = tb.operands(0, M, K, N, density=0.05, empty_rows=0.0)
    # A memory that takes write addresses well ahead of their data (an interconnect's AW
    # buffer): cocotbext-axi's takes two, and the writer's length queue holds eight.
    tb.ram.write_if.aw_channel.queue_occupancy_limit = 16
    held = (tb.ram.write_if.w_channel,)
    for channel in held:
        channel.clear_pause_generator()
        channel.pause = True
    run = await tb.launch(0, a, b, mode=2)
    last_r = -1
    for _ in range(400):                     # until the reads have stopped: the stall is whole
        await tb.wait_cycles(500)
        if tb.traffic["r"] == last_r:
            break
        last_r = tb.traffic["r"]
    else:
        raise AssertionError("R beats kept moving with the writes held for 200000 cycles")
    assert tb.traffic["w"] == run.traffic["w"], "W beats moved while the channel was held"
    dut._log.info(f"reads stalled after {tb.traffic['r'] - run.traffic['r']} R beats; writes "
                  f"released at cycle {tb.cycle}")
    for channel in held:
        channel.pause = False
        channel.set_pause_generator(pauses(tb.rng, 0.3))
    await tb.finish(run)


def internal_handles(dut, names):
    """Handles of the engine's internal signals ``names`` (as Yosys flattens them: ``core.x``,
    ``core.modes.w_en``), found by walking the top's signals: the simulators spell an escaped
    name differently (Verilator keeps the backslash and the closing space)."""
    found = {h._name.lstrip("\\").rstrip(): h for h in dut}
    missing = sorted(set(names) - set(found))
    assert not missing, f"no signal {missing} in the engine's Verilog"
    return {name: found[name] for name in names}


def counter_handles(dut, names):
    """The registers behind the core's statistics counters ``names`` (``core.NAME_NAME``: the
    field and its register merged by Yosys), for a backdoor write."""
    handles = internal_handles(dut, [f"core.{name}_{name}" for name in names])
    return {name: handles[f"core.{name}_{name}"] for name in names}


@cocotb.test()
async def counters_saturate(dut):
    """The statistics counters stop at 2**32 - 1: a layer's counts reach it in no simulation
    (over 4e9 events), so each counter register, the core's and the engine's own, is written
    through the simulator, mid-layer, to 2**32 - 2. Those that count at least twice after it
    must read 2**32 - 1 (MACS_DONE and MACS_SKIPPED add at least ``n`` a row, CYCLES and
    LAYER_CYCLES one a cycle, the word counters one a bus word, the tiles' count one a tile of
    the layer's three steps), so that every saturating arm is taken, not only reached; the
    others 2**32 - 2 or 2**32 - 1; the results are right."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    near = (1 << 32) - 2
    a, b = tb.operands(0, 4 * p["lanes"], 3 * p["k"], p["n"], density=0.5, empty_rows=0.0)
    run = await tb.launch(0, a, b, mode=2)
    await tb.wait_cycles(40)      # START accepted and its descriptor checks run: counters zeroed
    assert read_int(dut.irq) == 0 and not (await tb.read("STATUS")) & DONE
    names = CORE_COUNTERS + BUS_COUNTERS + ("LAYER_CYCLES",)
    for handle in counter_handles(dut, names).values():
        handle.value = near
    await tb.wait_done(run)
    got = await tb.read_counters(names)
    # Forced sparse: the dense-only twin runs every tile dense and skips nothing.
    counts = {"MACS_DONE", "CYCLES", "LAYER_CYCLES", *BUS_COUNTERS,
              "TILES_SPARSE" if p["sparse"] else "TILES_DENSE"}
    counts |= {"MACS_SKIPPED"} if p["sparse"] else set()
    for name, value in got.items():
        want = (near + 1,) if name in counts else (near, near + 1)
        assert value in want, f"{name} = {value:#x}, expected {' or '.join(map(hex, want))}"
    # The backdoor's values, not the model's counts; the bus counters are checked above.
    tb.model.counters.update({name: got[name] for name in CORE_COUNTERS})
    await tb.finish(run, bus_counters=False)


@cocotb.test()
async def reset_mid_layer(dut):
    """``rst`` in the middle of a layer (once while it reads, once while it writes): every
    valid of the engine low after the reset edge, every register back at its reset value, the
    table invalid, irq low; then layers run correctly."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    for phase in ("r", "w"):
        op = tb.rng.randrange(3)
        M, K, N = p["lanes"] + 5, p["k"] + 7, p["n"] + 2
        a, b = tb.operands(op, M, K, N)
        await tb.set_irq_en(1)
        await tb.set_threshold(0x33)
        await tb.set_table_base(1)
        run = await tb.launch(op, a, b, mode=2)
        for _ in range(100000):
            await FallingEdge(dut.clk)
            if tb.traffic[phase] - run.traffic[phase] >= 3:
                break
        else:
            raise AssertionError(f"no {phase.upper()} beats within 100000 cycles")
        dut.rst.value = 1
        tb.irq_en = 0
        for edge in range(3):
            await FallingEdge(dut.clk)
            for name in ("m_axi_arvalid", "m_axi_awvalid", "m_axi_wvalid", "s_axil_bvalid",
                         "s_axil_rvalid", "irq"):
                assert read_int(getattr(dut, name)) == 0, f"{name} high after reset edge {edge + 1}"
        dut.rst.value = 0
        tb.regions = None
        tb.model.reset()
        after = dict(tb.traffic)
        dut._log.info(f"reset with {phase.upper()} under way at cycle {tb.cycle}")
        await tb.wait_cycles(50)
        for name in ("ar", "aw", "w"):
            assert tb.traffic[name] == after[name], \
                f"{name.upper()} transfers after the reset with no START"
        await expect_reset_state(tb, entries=[e for e in range(1, 1 + run.tiles)
                                              if e < p["table_depth"]])
        await tb.run_layer(op, a, b)
        await tb.run_layer(op, a, b, mode=2, threshold=0x80)


@cocotb.test()
async def irq(dut):
    """``irq`` = STATUS.DONE and IRQ_EN: low with IRQ_EN 0 through a layer (checked every
    cycle), high as soon as IRQ_EN is set with DONE, low when cleared; with IRQ_EN 1 low from
    an accepted START to its end, then high; high after a refused START too."""
    tb = EngineTB(dut)
    await tb.start()
    p = tb.p
    op = tb.args.get("op", 1)
    M, K, N = p["lanes"], p["k"] - 1, p["n"] + 1
    a, b = tb.operands(op, M, K, N)
    await tb.run_layer(op, a, b)       # IRQ_EN 0: the watcher checks irq low every cycle
    assert read_int(dut.irq) == 0
    await tb.set_irq_en(1)
    await tb.wait_cycles(3)
    assert read_int(dut.irq) == 1, "irq low with DONE and IRQ_EN"
    await tb.set_irq_en(0)
    await tb.wait_cycles(3)
    assert read_int(dut.irq) == 0, "irq high with IRQ_EN 0"
    await tb.set_irq_en(1)
    await tb.run_layer(op, a, b)       # irq low after START, high at DONE (wait_done)
    run = await tb.launch(op, a, b, desc_override={"M": 0})
    await tb.finish(run)               # refused: DONE and irq at once
    assert read_int(dut.irq) == 1
    await tb.set_irq_en(0)
    await tb.wait_cycles(2)
    assert read_int(dut.irq) == 0


@cocotb.test(skip="bench" not in test_args())
async def bench_layers(dut):
    """The benchmark's layers (verif/tb/bench_engine.py): ``args["bench"]["runs"]`` is a list
    of ``{"op", "M", "K", "N", "density", "mode", "mem_idle", "read_latency"}``; each layer
    is checked like every other and its ``LAYER_CYCLES`` and counters go to ``bench.json``. A
    memory with ``mem_idle`` 0 and no ``read_latency`` answers at once (zero-wait)."""
    tb = EngineTB(dut)
    runs = tb.args["bench"]["runs"]
    results = []
    await tb.start(bus_idle=0.0, mem_idle=0.0)
    for spec in runs:
        tb.ram.read_latency = spec.get("read_latency", 0)
        for channel in tb.ram.channels():
            if spec.get("mem_idle", 0.0):
                channel.set_pause_generator(pauses(tb.rng, spec["mem_idle"]))
            else:   # (clearing the generator leaves the last pause standing)
                channel.clear_pause_generator()
                channel.pause = False
        a, b = tb.operands(spec["op"], spec["M"], spec["K"], spec["N"],
                           density=spec["density"], empty_rows=0.0)
        await tb.ctrl(mode=spec["mode"], clear=True, forget=True)
        await tb.run_layer(spec["op"], a, b, mode=spec["mode"])
        counters = await tb.read_counters(("LAYER_CYCLES", "A_WORDS", "B_WORDS", "C_WORDS",
                                           "MACS_DONE", "MACS_SKIPPED", "TILES_DENSE",
                                           "TILES_SPARSE"))
        results.append({**spec, "a_density": float(np.count_nonzero(a)) / a.size,
                        "cycles": counters["LAYER_CYCLES"], "counters": counters})
        dut._log.info(f"bench {spec}: {counters['LAYER_CYCLES']} cycles")
    with open("bench.json", "w") as f:
        json.dump({"params": tb.p, "runs": results}, f)


# --- the verification profile (verif/tb/profile.py) -----------------------------------------

PROFILE = Profile(
    stimulus=("random_layers", {"layers": 2, "big": False}),
    # The defaults alone: a place-and-route of the engine on the 45F takes most of an hour here.
    synth_sizes=(),
    mutants=40,
    mutate_by_default=False,    # the largest block: only when named
    # Every loop live at the defaults: the directed layers cross inner chunks and column groups,
    # one random layer has two row groups (``big``), the row patterns reach every crossbar route
    # and loader position, the refused descriptors every check, the table's end is crossed,
    # every register is read, the decision's registers are written while tiles start, and a
    # START while busy is refused (its ERR_CODE). Run by name:
    # ``python -m verif.flows.mutants engine``.
    mutant_tests=(["registers", "random_layers", "row_patterns", "bad_descriptors", "table_end",
                   "decision_at_a_tie", "decision_writes_during_layer", "writes_held",
                   "counters_saturate", "memory_error", "start_while_busy"],
                  {"layers": 3, "big": True}),
    # Beyond the defaults: the dense-only twin (its own A front, the GEMM's dense-only build),
    # and two column groups with row groups of 64 (several of each in the random layers).
    mutant_configs=(("twin", {"sparse": False}), ("live", {"n_par": 32, "acc_rows": 64})),
    fuzz_examples=2,
    coverage_waivers=(
        Waiver(r"acc_cmds\.w_rdy  \? 4'h[0-9a-f] : 4'hx", None,
               "the sequencer's wait on a full accumulator command queue (4 entries): it never "
               "fills, since the sequencer is at most a step ahead of the reader (whose command "
               "queue holds 2) and the reader at most a step ahead of the GEMM (docs/mutants.md, "
               "the note on `acc_cmds.w_port__en`); the wait is there so that a change of those "
               "depths cannot drop a command"),
        Waiver(r"\? 32'd4294967295 :", None,
               "32-bit statistics counter saturating at 2**32 - 1: over 4e9 events, beyond "
               "simulation"),
        Waiver(SATURATE, lambda p: p["acc_rows"] * p["k"] <= p["max_tile_elems"],
               "the embedded monitor's counter saturation: a tile is at most acc_rows x k "
               "elements, which fits max_tile_elems here; covered in the monitor block's own "
               "configurations"),
    ),
)
