"""cocotb testbench of the Spartan core (``spartan_core``), driven by cocotbext-axi: an
``AxiLiteMaster`` on the registers, ``AxiStreamSource``s on ``A`` and ``B`` and an
``AxiStreamSink`` on ``C``, each with a random pause generator (idle cycles on every input
channel, back-pressure on every output channel, AXI4-Lite channels included).

Checked against golden/core.py: every ``C`` element of every tile, the per-tile mode (from the
``TILES_*`` counters after every tile group), every event counter, and the timing counters
against what the ports show (``BUSY_CYCLES`` exactly, ``CYCLES`` within the bus latency,
``STALL_CYCLES`` zero with ``C`` always ready), and which tiles a register write decides
(``writes_between_tiles``, against the rule in docs/interfaces.md).
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiResp,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamSink,
    AxiStreamSource,
)

from spartan_rtl.golden.core import EVENT_COUNTERS, CoreModel
from spartan_rtl.golden.formats import random_elements
from spartan_rtl.tb import tb_gemm
from spartan_rtl.tb.axis import (
    Bench,
    manifest,
    pack_bytes,
    pauses,
    read_int,
    test_args,
    unpack_bytes,
)
from spartan_rtl.tb.profile import SATURATE, Profile, Waiver

COUNTERS = ("CYCLES", "BUSY_CYCLES", "STALL_CYCLES") + EVENT_COUNTERS


class CoreTB:
    def __init__(self, dut):
        self.dut = dut
        self.args = test_args()
        # The shared bench: clock, cycle count, the manifest, the seeded generator and the
        # reset every testbench uses.
        self.bench = Bench(dut)
        self.doc = self.bench.manifest
        self.p = self.doc["params"]
        self.regs = {r["name"]: r for r in self.doc["registers"]}
        self.rng = self.bench.rng
        self.np_rng = np.random.default_rng(cocotb.RANDOM_SEED)
        self.model = CoreModel(dict(self.p))
        self.cycle = 0
        # Seen at the ports: tile starts and ends, C beats, the first cycle of each write
        # response (the cycle after the write was accepted).
        self.events = {"a_first": [], "c_last": [], "c_beats": 0, "b_first": []}
        self.mid = {"a": False, "b": 0, "c": False}

    async def start(self, *, idle=0.3, backpressure=0.3, bus_idle=0.3):
        dut, p = self.dut, self.p
        await self.bench.reset()
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        # 8-bit byte lanes, not one per element: tdata is padded to whole bytes, which need
        # not be whole elements; pack_bytes/unpack_bytes place the lanes and the pad bits.
        self.a = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_a"), dut.clk, dut.rst)
        self.b = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_b"), dut.clk, dut.rst)
        self.c = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_c"), dut.clk, dut.rst)
        for source in (self.a, self.b):
            source.set_pause_generator(pauses(self.rng, idle))
        self.c.set_pause_generator(pauses(self.rng, backpressure))
        for channel in (self.axil.write_if.aw_channel, self.axil.write_if.w_channel,
                        self.axil.read_if.ar_channel):
            channel.set_pause_generator(pauses(self.rng, bus_idle))
        for channel in (self.axil.write_if.b_channel, self.axil.read_if.r_channel):
            channel.set_pause_generator(pauses(self.rng, bus_idle))
        self.model = CoreModel(dict(p))
        self.events = {"a_first": [], "c_last": [], "c_beats": 0, "b_first": []}
        cocotb.start_soon(self._watch_ports())

    async def _watch_ports(self):
        """Record the cycles of tile starts (first A beat) and ends (last C beat), and where
        each stream is in its packet (``self.mid``: A and C part-way through a tile, B the
        beats of the packet so far). A reset puts every stream back between packets."""
        dut = self.dut
        b_offered = False    # a write response offered last cycle and not taken
        while True:
            await FallingEdge(dut.clk)
            await ReadOnly()
            self.cycle += 1
            if read_int(dut.rst):
                self.mid = {"a": False, "b": 0, "c": False}
                b_offered = False
                continue
            if read_int(dut.s_axil_bvalid) and not b_offered:
                self.events["b_first"].append(self.cycle)
            b_offered = bool(read_int(dut.s_axil_bvalid)) and not read_int(dut.s_axil_bready)
            if read_int(dut.s_axis_a_tvalid) and read_int(dut.s_axis_a_tready):
                if not self.mid["a"]:
                    self.events["a_first"].append(self.cycle)
                self.mid["a"] = not read_int(dut.s_axis_a_tlast)
            if read_int(dut.s_axis_b_tvalid) and read_int(dut.s_axis_b_tready):
                self.mid["b"] = 0 if read_int(dut.s_axis_b_tlast) else self.mid["b"] + 1
            if read_int(dut.m_axis_c_tvalid) and read_int(dut.m_axis_c_tready):
                self.mid["c"] = not read_int(dut.m_axis_c_tlast)
                self.events["c_beats"] += 1
                if not self.mid["c"]:
                    self.events["c_last"].append(self.cycle)

    async def reset(self, when=lambda: True, what="the reset point", timeout=50000):
        """Reset the running DUT at the first falling edge at which ``when()`` holds (the port
        records then hold every transfer up to the last rising edge, and no later one). The
        sources drop their queues; the cocotbext-axi drivers watch ``rst`` and drop what they
        hold, so the reset edge sees no transfer. After each reset edge every output ``valid``
        (``C``, and the bus's ``B`` and ``R``) must be low. The model is reset too (the
        weights survive). ``self.mid_at_reset``: where each stream was."""
        dut = self.dut
        for _ in range(timeout):
            await FallingEdge(dut.clk)
            if when():
                break
        else:
            raise AssertionError(f"timed out after {timeout} cycles waiting for {what}")
        self.mid_at_reset = dict(self.mid)
        self.a.clear()
        self.b.clear()
        dut.rst.value = 1
        for edge in range(3):
            await FallingEdge(dut.clk)
            for name in ("m_axis_c_tvalid", "s_axil_bvalid", "s_axil_rvalid"):
                assert read_int(getattr(dut, name)) == 0, f"{name} high after reset edge {edge + 1}"
        dut.rst.value = 0
        self.model.reset()
        self.events = {"a_first": [], "c_last": [], "c_beats": 0, "b_first": []}

    def busy_cycles_from_ports(self, since, until):
        """Cycles in (since, until] in which a tile was in flight: after its first A transfer,
        up to and including its last C transfer."""
        busy = 0
        for cycle in range(since + 1, until + 1):
            started = sum(1 for c in self.events["a_first"] if c < cycle)
            ended = sum(1 for c in self.events["c_last"] if c < cycle)
            busy += started > ended
        return busy

    # --- registers --------------------------------------------------------------------------
    async def write(self, name, value, expect=AxiResp.OKAY):
        resp = await self.axil.write(self.regs[name]["offset"], int(value).to_bytes(4, "little"))
        assert resp.resp == expect, f"write {name}: {resp.resp}, expected {expect}"

    async def read(self, name_or_offset, expect=AxiResp.OKAY):
        offset = self.regs[name_or_offset]["offset"] if isinstance(name_or_offset, str) \
            else name_or_offset
        resp = await self.axil.read(offset, 4)
        assert resp.resp == expect, f"read {name_or_offset}: {resp.resp}, expected {expect}"
        return int.from_bytes(resp.data, "little")

    async def ctrl(self, *, mode=None, pass_start=False, clear=False, forget=False):
        if mode is not None:
            self.model.mode = mode
        value = self.model.mode | pass_start << 2 | clear << 3 | forget << 4
        await self.write("CTRL", value)
        if pass_start:
            self.model.pass_start()
        if clear:
            self.model.clear()
        if forget:
            self.model.forget()

    async def set_threshold(self, value):
        self.model.threshold = value
        await self.write("THRESHOLD", value)

    async def counters(self):
        return {name: await self.read(name) for name in COUNTERS}

    # --- streams ----------------------------------------------------------------------------
    async def load_b(self, b_raw=None):
        p = self.p
        if b_raw is None:
            b_raw = random_elements(self.np_rng, (p["k"], p["n"]), p["width"], 0.9)
        self.model.load_b(b_raw)
        await self.b.send(AxiStreamFrame(self._pack("s_axis_b", b_raw.reshape(-1))))
        await self.b.wait()

    def _pack(self, stream, elements):
        """Frame bytes of ``elements`` on input ``stream``, random pad bits included."""
        return pack_bytes(elements, self.p["lanes"], self.p["width"],
                          self.doc["streams"][stream]["tdata_width"], self.rng)

    def random_tile(self, rows, density):
        p = self.p
        return random_elements(self.np_rng, (rows, p["k"]), p["width"], density)

    async def send_tiles(self, tiles, short_beats=()):
        """Queue every tile on ``A``; returns the model's ``C`` and decision for each.
        ``short_beats[i]``: cut tile ``i``'s last row short by that many beats (a malformed
        tile)."""
        expected, decisions = [], []
        for index, a_raw in enumerate(tiles):
            short = short_beats[index] if index < len(short_beats) else 0
            c, sparse = self.model.run_tile(a_raw, short_beats=short)
            expected.append(c)
            decisions.append(sparse)
            elements = a_raw.reshape(-1)
            await self.a.send(AxiStreamFrame(
                self._pack("s_axis_a", elements[:len(elements) - short * self.p["lanes"]])))
        return expected, decisions

    def check_c(self, index, frame, c):
        p = self.p
        got = np.array(unpack_bytes(frame.tdata, p["lanes"], p["acc_width"],
                                    self.doc["streams"]["m_axis_c"]["tdata_width"], "m_axis_c"),
                       dtype=np.uint64)
        want = c.reshape(-1)
        assert got.size == want.size, f"tile {index}: {got.size} C elements, expected {want.size}"
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"tile {index}: C[{bad[0] // self.p['n']}, {bad[0] % self.p['n']}]"
                               f" = {got[bad[0]]:#x}, expected {want[bad[0]]:#x}")

    async def run_tiles(self, tiles, short_beats=()):
        """Send every tile, receive every C tile, compare each with the model; returns the
        per-tile decisions the model made. ``short_beats`` as for :meth:`send_tiles`."""
        expected, decisions = await self.send_tiles(tiles, short_beats)
        for index, c in enumerate(expected):
            self.check_c(index, await self.c.recv(), c)
        assert self.c.empty(), "C beats beyond the last tile"
        return decisions

    async def check_counters(self, since_cycle=None, until_cycle=None, stalls_zero=False):
        got = await self.counters()
        for name in EVENT_COUNTERS:
            assert got[name] == self.model.counters[name], \
                f"{name} = {got[name]}, expected {self.model.counters[name]}"
        if since_cycle is not None:
            busy = self.busy_cycles_from_ports(since_cycle, until_cycle or self.cycle)
            assert got["BUSY_CYCLES"] == busy, \
                f"BUSY_CYCLES = {got['BUSY_CYCLES']}, ports say {busy}"
        assert got["STALL_CYCLES"] <= got["BUSY_CYCLES"] <= got["CYCLES"]
        if stalls_zero:
            assert got["STALL_CYCLES"] == 0, got["STALL_CYCLES"]
        return got


@cocotb.test()
async def registers(dut):
    """ID, reset values, read/write fields, w1p fields reading 0, byte strobes, read-only
    registers ignoring writes, SLVERR on unmapped addresses, the table window, the generator's
    parameters in the CONFIG registers."""
    tb = CoreTB(dut)
    await tb.start()
    assert await tb.read("ID") == tb.doc["id"]
    assert await tb.read("THRESHOLD") == 0x80
    assert await tb.read("CTRL") == 0
    await tb.write("THRESHOLD", 0x1234_56C3)
    assert await tb.read("THRESHOLD") == 0xC3
    await tb.write("CTRL", 0b1_1110)  # MODE 2, PASS_START, CLEAR, FORGET
    assert await tb.read("CTRL") == 2
    # Byte strobes: write only byte 1 of TABLE_BASE.
    resp = await tb.axil.write(tb.regs["TABLE_BASE"]["offset"] + 1, b"\x05")
    assert resp.resp == AxiResp.OKAY
    assert await tb.read("TABLE_BASE") == 0x0500
    await tb.write("TABLE_BASE", 0)
    await tb.write("ID", 0)  # read-only: ignored
    assert await tb.read("ID") == tb.doc["id"]
    for offset in (0x44, 0x200, 0x0FFC, 0x1000 + 8 * tb.p["table_depth"], 0xFFFC):
        assert await tb.read(offset, expect=AxiResp.SLVERR) == 0
        resp = await tb.axil.write(offset, b"\x01\x00\x00\x00")
        assert resp.resp == AxiResp.SLVERR, (hex(offset), resp.resp)
    # An empty table reads as invalid zeros.
    assert await tb.read(0x1000) == 0 and await tb.read(0x1004) == 0
    await expect_config(tb)


#: A text parameter's values in the order its ``CONFIG_*`` register numbers them
#: (docs/interfaces.md).
CONFIG_CHOICES = {"multiplier": ("inferred", "ecp5")}


async def expect_config(tb, without=()):
    """Every generator parameter but those ``without`` one reads back from its
    ``CONFIG_<NAME>`` register (a flag as 0 or 1, a choice as its index), and the word after
    the last one answers SLVERR."""
    shown = [(name, value) for name, value in tb.p.items() if name not in without]
    for i, (name, value) in enumerate(shown):
        expected = CONFIG_CHOICES[name].index(value) if name in CONFIG_CHOICES else int(value)
        assert await tb.read(f"CONFIG_{name.upper()}") == expected, name
        assert tb.regs[f"CONFIG_{name.upper()}"]["offset"] == 0x100 + 4 * i, name
    assert await tb.read(0x100 + 4 * len(shown), expect=AxiResp.SLVERR) == 0


@cocotb.test()
async def every_register_written(dut):
    """A write to every register and to the first and last table-window word answers OKAY;
    read-only registers and the window ignore it (rw registers get their value back)."""
    tb = CoreTB(dut)
    await tb.start()
    before = {name: await tb.read(name) for name in tb.regs}
    for name, reg in tb.regs.items():
        await tb.write(name, 0 if reg["access"] == "ro" else before[name])
    for offset in (0x1000, 0x1000 + 8 * tb.p["table_depth"] - 4):
        resp = await tb.axil.write(offset, b"\x01\x00\x00\x00")
        assert resp.resp == AxiResp.OKAY, (hex(offset), resp.resp)
        assert await tb.read(offset) == 0
    for name in ("ID", "CTRL", "THRESHOLD", "TILE", "TABLE_BASE", "CONFIG_K"):
        assert await tb.read(name) == before[name], name


def route_rows(np_rng, lanes, k, width):
    """One row per shift ``s`` < ``lanes``: columns below ``s`` zero, every other column
    nonzero. Column ``j`` then has rank ``j - s`` and travels in data lane ``(j - s) % lanes``:
    together, every (lane, column) pair a sparse row can produce (a column's rank is at most
    its index, so lane ``l`` never carries a column below ``l``)."""
    a = random_elements(np_rng, (lanes, k), width, 1.0)
    for s in range(lanes):
        a[s, :s] = 0
    return a


@cocotb.test()
async def lane_routes(dut):
    """Forced sparse: the rows of :func:`route_rows` (every column through every data lane
    it can take) and their mirror images (ranks counted from the other end)."""
    tb = CoreTB(dut)
    await tb.start()
    p = tb.p
    await tb.load_b()
    await tb.ctrl(mode=2, clear=True, pass_start=True)
    a = route_rows(tb.np_rng, p["lanes"], p["k"], p["width"])
    assert await tb.run_tiles([a, a[:, ::-1].copy()]) == [True, True]
    await tb.check_counters()


@cocotb.test()
async def adaptive_passes(dut):
    """Several passes over a layer whose sparsity changes between passes: decisions follow
    the table one pass later; results and counters match the model throughout."""
    tb = CoreTB(dut)
    await tb.start()
    p = tb.p
    tiles, rows = tb.args.get("tiles", 8), tb.args.get("rows", 3)
    await tb.ctrl(mode=0, clear=True, forget=True)
    await tb.set_threshold(tb.args.get("threshold", 0x60))  # sparse iff density <= 37.5 %
    await tb.load_b()
    start = tb.cycle
    plan = [
        [0.9 if t % 2 else 0.1 for t in range(tiles)],
        [0.1 if t % 2 else 0.9 for t in range(tiles)],   # flips: decisions lag one pass
        [0.0 if t % 3 == 0 else 0.3 for t in range(tiles)],
    ]
    previous = None
    for densities in plan:
        await tb.ctrl(pass_start=True)
        decisions = await tb.run_tiles([tb.random_tile(rows, d) for d in densities])
        # Independent of the model's arithmetic: no history means dense; afterwards a tile is
        # sparse iff it was sparse enough (<= 37.5 %, far from 0.1/0.3 and 0.9) last pass.
        assert decisions == ([False] * tiles if previous is None else
                             [t < p["table_depth"] and d < 0.375 for t, d in enumerate(previous)])
        previous = densities
        got = await tb.check_counters(start, tb.cycle)
    assert got["TILES_SPARSE"] > 0 and got["TILES_DENSE"] > 0
    # The table window shows the last pass's measurements.
    for t in range(min(tiles, p["table_depth"])):
        nnz_valid = await tb.read(0x1000 + 8 * t)
        elems = await tb.read(0x1000 + 8 * t + 4)
        assert nnz_valid >> 31 == 1
        assert (nnz_valid & 0x7FFF_FFFF, elems) == tb.model.table[t]


@cocotb.test()
async def forced_modes_and_b_reload(dut):
    """Force dense and force sparse on the same tiles; reload B between layers; TABLE_BASE
    gives the second layer its own table region; an all-zero and a dense tile."""
    tb = CoreTB(dut)
    await tb.start()
    rows = tb.args.get("rows", 3)
    await tb.ctrl(clear=True, forget=True)
    await tb.load_b()
    tiles = [tb.random_tile(rows, d) for d in (0.0, 0.2, 0.7, 1.0)]
    for mode, expected in ((1, [False] * 4), (2, [True] * 4), (0, [True, True, False, False])):
        await tb.ctrl(mode=mode, pass_start=True)
        assert await tb.run_tiles(tiles) == expected  # threshold 0x80: sparse iff <= 50 %
        await tb.check_counters()
    await tb.load_b()  # a new layer
    await tb.write("TABLE_BASE", 16 % tb.p["table_depth"])
    tb.model.table_base = 16 % tb.p["table_depth"]
    await tb.ctrl(mode=0, pass_start=True)
    await tb.run_tiles([tb.random_tile(rows, 0.3) for _ in range(3)])
    await tb.check_counters()


@cocotb.test()
async def writes_between_tiles(dut):
    """``THRESHOLD``, ``TABLE_BASE`` and ``CTRL.MODE`` written again and again while short
    tiles stream: each tile is decided by the values in force when its first ``A`` beat is
    taken, i.e. by every write accepted before that cycle (docs/core.md: a write just before a
    tile makes the tile wait for the decision). Checked through ``TILES_SPARSE``/
    ``TILES_DENSE`` against the rule, worked from the first pass's table entries, with the
    values alternating so that a tile decided on a stale value would be counted on the other
    side. ``TABLE_BASE`` alternates between the first pass's entries and the table's end (no
    entry: dense); it runs through all of the decision's stages."""
    tb = CoreTB(dut)
    await tb.start()
    p = tb.p
    tiles = min(tb.args.get("tiles", 8) * 4, p["table_depth"])
    await tb.ctrl(mode=0, clear=True, forget=True)
    await tb.set_threshold(0x80)
    await tb.load_b()
    await tb.ctrl(pass_start=True)
    layer = [tb.random_tile(1, 0.3) for _ in range(tiles)]
    await tb.run_tiles(layer)
    entries = [tb.model.table[t] for t in range(tiles)]
    before = await tb.counters()
    await tb.ctrl(pass_start=True)
    state = {"MODE": 0, "THRESHOLD": 0x80, "TABLE_BASE": 0}
    # (the first cycle a tile may see it, register, value): a write's response rises the
    # cycle after the write was accepted, the first cycle a tile start must honour it.
    timeline = [(0, name, value) for name, value in state.items()]
    streaming = True

    async def keep_writing():
        while streaming:
            for _ in range(tb.rng.randrange(0, 6)):
                await FallingEdge(dut.clk)
            draw = tb.rng.random()
            if draw < 0.4:
                name = "THRESHOLD"
                state[name] = 0x20 if state[name] != 0x20 else 0xE0   # 12.5 % / 87.5 %
                await tb.write(name, state[name])
            elif draw < 0.7:
                name = "TABLE_BASE"
                state[name] = p["table_depth"] - state[name]
                await tb.write(name, state[name])
            else:
                name = "MODE"
                state[name] = tb.rng.choice([m for m in (0, 1, 2) if m != state[name]])
                await tb.write("CTRL", state[name])
            timeline.append((tb.events["b_first"][-1], name, state[name]))

    writer = cocotb.start_soon(keep_writing())
    first = len(tb.events["a_first"])
    expected_c, _ = await tb.send_tiles(layer)
    for index, c in enumerate(expected_c):
        tb.check_c(index, await tb.c.recv(), c)
    streaming = False
    await writer
    starts = tb.events["a_first"][first:first + tiles]
    sparse = []
    raced = 0
    for t, start in enumerate(starts):
        now = {}
        for cycle, name, value in timeline:
            if cycle <= start:
                now[name] = value
        raced += any(0 <= start - cycle < 8 for cycle, _, _ in timeline[len(state):])
        nnz, elems = entries[t]
        sparse.append(now["MODE"] == 2 or (now["MODE"] == 0 and now["TABLE_BASE"] == 0
                                           and nnz * 256 <= now["THRESHOLD"] * elems))
    got = await tb.counters()
    assert raced > 0, "no tile started within 8 cycles of a write"
    assert (got["TILES_SPARSE"] - before["TILES_SPARSE"],
            got["TILES_DENSE"] - before["TILES_DENSE"]) == (sum(sparse), tiles - sum(sparse)), \
        f"sparse/dense tiles {got['TILES_SPARSE'] - before['TILES_SPARSE']}/" \
        f"{got['TILES_DENSE'] - before['TILES_DENSE']}, expected {sum(sparse)}/" \
        f"{tiles - sum(sparse)} ({raced} tiles started within 8 cycles of a write)"


@cocotb.test()
async def reset_between_passes(dut):
    """A reset between passes: counters and history are gone, the core works as new."""
    tb = CoreTB(dut)
    await tb.start()
    rows = tb.args.get("rows", 3)
    await tb.load_b()
    await tb.ctrl(pass_start=True)
    await tb.run_tiles([tb.random_tile(rows, 0.1) for _ in range(3)])
    await tb.reset()
    await tb.load_b()
    await tb.ctrl(mode=0, pass_start=True)
    decisions = await tb.run_tiles([tb.random_tile(rows, 0.1) for _ in range(3)])
    assert decisions == [False] * 3
    got = await tb.check_counters()
    assert got["TILES_DENSE"] == 3


@cocotb.test()
async def malformed_tile(dut):
    """A tile whose tlast comes mid-row: the row is padded with zeros (C as for the padded
    tile), A_ERRORS counts it, the monitor measures what was sent, and the next tile is fine."""
    tb = CoreTB(dut)
    await tb.start()
    rows = tb.args.get("rows", 3)
    await tb.load_b()
    await tb.ctrl(mode=2, clear=True, pass_start=True)
    tiles = [tb.random_tile(rows, 0.6) for _ in range(3)]
    await tb.run_tiles(tiles, short_beats=(0, 1, 0))
    got = await tb.check_counters()
    assert got["A_ERRORS"] == 1


async def expect_reset_state(tb, measured):
    """The registers as reset leaves them (MODE 0, THRESHOLD 0x80, TABLE_BASE 0, TILE 0, every
    counter 0 bar CYCLES), and the table entries ``measured`` before the reset invalid."""
    assert await tb.read("CTRL") == 0
    assert await tb.read("THRESHOLD") == 0x80
    assert await tb.read("TABLE_BASE") == 0
    assert await tb.read("TILE") == 0
    await tb.check_counters()
    for entry in measured:
        assert await tb.read(0x1000 + 8 * entry) >> 31 == 0, f"entry {entry} valid after reset"


@cocotb.test()
async def reset_mid_packet(dut):
    """A synchronous reset in the middle of a packet of each stream in turn, with tiles in
    flight: ``A`` part-way through a tile, ``C`` part-way through a tile, ``B`` part-way
    through a packet (B is taken between tiles). The ``C`` tiles completed before the reset
    are right; every output ``valid`` is low after the reset edge; nothing of the interrupted
    tiles comes out afterwards; registers, counters and the table's valid bits are as after
    power-up. What survives is the weight buffer: the tiles after the reset are computed with
    the weights it holds (after a cut ``B`` packet, its first beats over the old weights), and
    after a new ``B`` exactly as after power-up, every element against the model."""
    tb = CoreTB(dut)
    await tb.start()
    p = tb.p
    rows = tb.args.get("rows", 3)
    b_cut = tb.rng.randrange(1, p["k"] * p["n"] // p["lanes"])
    done = 0  # C tiles of this case out

    def c_out():
        return len(tb.events["c_last"]) - done

    cases = {  # each once a C tile of the case has left
        "A": lambda: tb.mid["a"] and c_out() >= 1,
        "C": lambda: tb.mid["c"] and c_out() >= 1,
        "B": lambda: tb.mid["b"] >= b_cut,
    }
    await tb.load_b()
    for name, condition in cases.items():
        done = len(tb.events["c_last"])
        # Not the reset values, so that the reset shows; TABLE_BASE 1 (entries 1 to 6).
        await tb.set_threshold(0x40)
        await tb.write("TABLE_BASE", 1 % p["table_depth"])
        tb.model.table_base = 1 % p["table_depth"]
        await tb.ctrl(mode=2, pass_start=True)
        measured = [e for e in range(tb.model.table_base, tb.model.table_base + 6)
                    if e < p["table_depth"]]
        expected, _ = await tb.send_tiles([tb.random_tile(rows, 0.5) for _ in range(6)])
        if name == "B":  # B is taken between tiles: after the first C tile, with A waiting
            for _ in range(50000):
                await FallingEdge(dut.clk)
                if c_out() >= 1:
                    break
            else:
                raise AssertionError("no C tile left in 50000 cycles")
            b_raw = random_elements(tb.np_rng, (p["k"], p["n"]), p["width"], 0.9)
            await tb.b.send(AxiStreamFrame(tb._pack("s_axis_b", b_raw.reshape(-1))))
        await tb.reset(condition, what=f"{name} part-way through a packet")
        index = 0
        while not tb.c.empty():  # the C tiles completed before the reset
            tb.check_c(index, tb.c.recv_nowait(), expected[index])
            index += 1
        assert index < len(expected), "every tile completed before the reset"
        dut._log.info(f"reset with {name} part-way: {index} of {len(expected)} C tiles out "
                      f"before it, B beats of the cut packet {tb.mid_at_reset['b']}")
        if name == "B":  # the beats written before the reset replace the old weights
            tb.model.load_b_packet(b_raw.reshape(-1)[:tb.mid_at_reset["b"] * p["lanes"]])
        since = tb.cycle
        for _ in range(100):
            await FallingEdge(dut.clk)
        assert tb.events["c_beats"] == 0, f"{tb.events['c_beats']} C beats after the reset"
        await expect_reset_state(tb, measured)
        await tb.ctrl(pass_start=True)
        assert await tb.run_tiles([tb.random_tile(rows, 0.3) for _ in range(2)]) == [False] * 2
        await tb.ctrl(mode=2)
        assert await tb.run_tiles([tb.random_tile(rows, 0.3)]) == [True]
        await tb.load_b()  # a new B and a new pass: as after power-up
        await tb.check_counters(since, tb.cycle)
        await tb.ctrl(mode=0, clear=True, forget=True, pass_start=True)
        assert await tb.run_tiles([tb.random_tile(rows, 0.3) for _ in range(2)]) == [False] * 2
        await tb.check_counters()


@cocotb.test()
async def b_wrong_length(dut):
    """``B`` packets shorter and longer than ``k*n/lanes`` beats: each element is written at
    its position counted from ``B[0, 0]`` (row-major), wrapping after ``B``'s last element,
    the positions not reached keep their weights (golden/core.py ``load_b_packet``); the tiles
    after each packet, dense and sparse, are computed with those weights."""
    tb = CoreTB(dut)
    await tb.start()
    p = tb.p
    rows = tb.args.get("rows", 3)
    beats = p["k"] * p["n"] // p["lanes"]
    per_row = p["n"] // p["lanes"]
    await tb.load_b()
    await tb.ctrl(clear=True, pass_start=True)
    # Short: at least a beat, and not a whole number of rows; long: past the end by up to two
    # rows, and twice over.
    lengths = [tb.rng.randrange(1, per_row) if per_row > 1 else 1,
               tb.rng.randrange(beats // 2, beats - 1) | 1,
               beats + tb.rng.randrange(1, 2 * per_row + 1),
               2 * beats + 1]
    for length in lengths:
        packet = random_elements(tb.np_rng, length * p["lanes"], p["width"], 0.9)
        tb.model.load_b_packet(packet)
        await tb.b.send(AxiStreamFrame(tb._pack("s_axis_b", packet)))
        await tb.b.wait()
        for mode in (1, 2):
            await tb.ctrl(mode=mode)
            await tb.run_tiles([tb.random_tile(rows, 0.5) for _ in range(2)])
    await tb.check_counters()


def oversize_plan(p, rows_a):
    """Tiles for :func:`long_tile`, from the monitor's rule (docs/monitor.md): counts are
    ``w = bit_length(max_tile_elems)`` bits, exact up to ``cap = 2**w - 1`` elements and
    saturated at ``cap`` beyond (ZERO_BEATS too, at its own width).
    ``[(rows, nnz, (nnz, elems) in the table, sparse next pass at THRESHOLD 0xC0 = 75 %)]``: a tile
    within ``max_tile_elems`` at 50 %; one of about 1.5 cap elements with 7/8 cap nonzeros (58 %
    really, 7/8 = 87.5 % in saturated counts: dense); the same all nonzero (both counts saturate:
    dense); one of at least 2**w elements with cap/8 nonzeros (sparse either way)."""
    k, cap = p["k"], (1 << p["max_tile_elems"].bit_length()) - 1
    long_rows, over_rows = -(-3 * (cap + 1) // (2 * k)), -(-(cap + 1) // k)
    return [
        (rows_a, rows_a * k // 2, (rows_a * k // 2, rows_a * k), True),
        (long_rows, cap * 7 // 8, (cap * 7 // 8, cap), False),
        (long_rows, long_rows * k, (cap, cap), False),
        (over_rows, cap // 8, (cap // 8, cap), True),
    ]


def oversize_affordable():
    """``long_tile`` only where tiles past the exact range are short (``max_tile_elems`` of at
    most 1023: the second configuration of verif/tests/test_core.py); at the defaults (65536)
    such a tile is 3000 rows."""
    try:
        return manifest()["params"]["max_tile_elems"] < 1024
    except (KeyError, OSError):
        return False


@cocotb.test(skip=not oversize_affordable())
async def long_tile(dut):
    """``A`` tiles longer than ``max_tile_elems``: computed in full like any tile (``C``
    against the model); the monitor's counts saturate, and the table and next pass's decisions
    follow the saturated counts (checked against :func:`oversize_plan`, worked from the
    monitor's rule, not from the model)."""
    tb = CoreTB(dut)
    await tb.start()
    p = tb.p
    rows_a = max(1, p["max_tile_elems"] // p["k"])
    plan = oversize_plan(p, rows_a)
    tiles = []
    for rows, nnz, _, _ in plan:
        tile = np.zeros(rows * p["k"], dtype=np.uint64)
        tile[tb.np_rng.permutation(tile.size)[:nnz]] = random_elements(tb.np_rng, nnz,
                                                                         p["width"], 1.0)
        tiles.append(tile.reshape(rows, p["k"]))
    await tb.load_b()
    await tb.set_threshold(0xC0)
    await tb.ctrl(mode=0, clear=True, forget=True, pass_start=True)
    assert await tb.run_tiles(tiles) == [False] * len(tiles)  # no history: dense
    await tb.check_counters()  # the hardware's decisions: TILES_* and MACS_* per pass
    for t, (_, _, entry, _) in enumerate(plan):
        nnz_valid, elems = await tb.read(0x1000 + 8 * t), await tb.read(0x1000 + 8 * t + 4)
        assert (nnz_valid >> 31, nnz_valid & 0x7FFF_FFFF, elems) == (1, *entry), \
            f"table entry {t}: {nnz_valid:#x}, {elems}, expected {entry}"
    await tb.ctrl(pass_start=True)
    assert await tb.run_tiles(tiles) == [sparse for *_, sparse in plan]
    await tb.check_counters()


@cocotb.test()
async def no_backpressure_no_stalls(dut):
    """With C always ready and rows dense enough that computing a row takes at least as long
    as sending its C row (n/lanes beats), STALL_CYCLES stays 0; BUSY_CYCLES matches the ports.
    (Sparser rows are output-bound: their passes do wait for m_axis_c, and that counts.)"""
    tb = CoreTB(dut)
    await tb.start(idle=0.0, backpressure=0.0)
    rows = tb.args.get("rows", 3)
    await tb.load_b()
    await tb.ctrl(clear=True, pass_start=True)
    start = tb.cycle
    await tb.run_tiles([tb.random_tile(rows, d) for d in (0.6, 0.8, 1.0)])
    await tb.check_counters(start, tb.cycle, stalls_zero=True)


@cocotb.test(skip=test_args().get("bench") is None)
async def bench_layer(dut):
    """Benchmark (``spartan bench core``): one layer of tiles at a realistic density mix,
    inputs always valid and C always ready. Pass 0 warms the table up in auto mode; pass 1 runs
    in auto mode, pass 2 forced dense on the same tiles. Cycles per pass are taken at the ports
    (first A beat to last C beat); results are checked as in every test. Writes bench.json."""
    import json
    tb = CoreTB(dut)
    await tb.start(idle=0.0, backpressure=0.0, bus_idle=0.0)
    args = tb.args["bench"]
    await tb.set_threshold(args["threshold"])
    await tb.load_b()
    tiles = [tb.random_tile(args["rows"], d) for d in args["densities"]]
    passes = []
    for name, mode in (("warm-up", 0), ("auto", 0), ("dense", 1)):
        await tb.ctrl(mode=mode, pass_start=True, clear=True)
        first = len(tb.events["a_first"])
        decisions = await tb.run_tiles(tiles)
        start, end = tb.events["a_first"][first], tb.events["c_last"][-1]
        counters = await tb.check_counters()
        passes.append({"pass": name, "cycles": end - start + 1, "sparse_tiles": sum(decisions),
                       "counters": counters})
    with open("bench.json", "w") as f:
        json.dump({"params": tb.p, "densities": args["densities"], "rows": args["rows"],
                   "threshold": args["threshold"], "passes": passes}, f)


# --- the verification profile (verif/tb/profile.py) ------------------------------------------

PROFILE = Profile(
    stimulus=None,    # no random_traffic test: the generic stimulus
    # Besides the defaults: the quarter-size array (a larger core takes hours to place and
    # route here).
    synth_sizes=({"k_par": 2, "n_par": 8},),
    mutants=6,
    mutate_by_default=False,    # the other blocks joined, slowest to build: only when named
    mutant_tests=(None, {"tiles": 8, "rows": 3}),
    fuzz_examples=6,
    coverage_waivers=tb_gemm.EMBEDDED_WAIVERS + (
        Waiver(r"\? 32'd4294967295 :", None,
               "32-bit statistics counter saturating at 2**32 - 1: over 4e9 events, beyond "
               "simulation"),
        Waiver(SATURATE + r".*=> core\.monitor\.", lambda p: p["max_tile_elems"] > 4096,
               "the embedded monitor's counter saturation: a tile of more than max_tile_elems "
               "(65536) elements; covered in the monitor block's own configurations"),
    ),
)
