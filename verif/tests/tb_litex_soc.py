"""cocotb testbench of the LiteX SoC of docs/examples/litex_soc.py (docs/integration.md): the
core's registers and GEMM passes, driven as software would, over the SoC's Wishbone bus (LiteX
interconnect, LiteX's Wishbone -> AXI-Lite converter, the core's AXI4-Lite slave).

The core's streams are the SoC's ports under the core's names: the project's stream library
(verif/tb/axis.py) drives A and B with random idle cycles and C with random
back-pressure, and every C element of every tile, each tile's dense/sparse decision and every
event counter are checked against the golden model (golden/core.py). Expected register values
are the specification's (docs/registers.md), not read from the build.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from spartan_rtl.golden.core import EVENT_COUNTERS, CoreModel
from spartan_rtl.golden.formats import random_elements, tile_to_beats
from spartan_rtl.tb.axis import Beat, Bench, check_sequence, read_int

#: docs/examples/litex_soc.py: where the core's registers sit on the SoC bus.
SPARTAN_BASE = 0x4000_0000
#: docs/registers.md: the offsets used here, ID = 0x5350 'SP', block 0x01 (core), version
#: 0x01, and THRESHOLD's reset value.
REGS = {"ID": 0x00, "CTRL": 0x04, "THRESHOLD": 0x08}
ID = 0x5350_0102
THRESHOLD_RESET = 0x80
#: Cycles a bus access may take before the testbench gives up (LiteX's own bus timeout is
#: 10**6 cycles; the core answers within a few).
ACCESS_TIMEOUT = 100
STREAM_INPUTS = ("s_axis_a_tdata", "s_axis_a_tvalid", "s_axis_a_tlast", "s_axis_b_tdata",
                 "s_axis_b_tvalid", "s_axis_b_tlast", "m_axis_c_tready")


class WishboneMaster:
    """Classic Wishbone cycles on the ``wb_*`` pins (byte address in, word address out), with
    random idle cycles before each. Drives after falling edges, samples in ReadOnly (the
    timing discipline of verif/tb/axis.py, docs/verification.md)."""

    def __init__(self, dut, rng, idle):
        self.dut, self.rng, self.idle = dut, rng, idle
        for name in ("cyc", "stb", "we", "adr", "dat_w", "sel", "cti", "bte"):
            getattr(dut, f"wb_{name}").value = 0

    async def access(self, address, value=None, sel=0xF):
        """One read (``value`` None) or write; returns ``(dat_r, err)``."""
        dut = self.dut
        while self.rng.random() < self.idle:
            await FallingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.wb_adr.value = address >> 2
        dut.wb_we.value = value is not None
        dut.wb_dat_w.value = 0 if value is None else value
        dut.wb_sel.value = sel
        dut.wb_cyc.value = dut.wb_stb.value = 1
        for _ in range(ACCESS_TIMEOUT):
            await ReadOnly()
            if read_int(dut.wb_ack) or read_int(dut.wb_err):
                result = (read_int(dut.wb_dat_r), read_int(dut.wb_err))
                break
            await FallingEdge(dut.clk)
        else:
            raise AssertionError(f"no ack or err from {address:#x} after {ACCESS_TIMEOUT} cycles")
        await FallingEdge(dut.clk)
        dut.wb_cyc.value = dut.wb_stb.value = dut.wb_we.value = 0
        return result


class SocTB:
    """Clock, reset, the bus master and the core's streams on the SoC."""

    def __init__(self, dut):
        self.dut = dut
        self.bench = Bench(dut)
        self.rng, self.p = self.bench.rng, self.bench.manifest["params"]
        self.regs = {r["name"]: r["offset"] for r in self.bench.manifest["registers"]}

    async def start(self):
        dut = self.dut
        for name in STREAM_INPUTS:
            getattr(dut, name).value = 0
        self.bus = WishboneMaster(dut, self.rng, idle=0.3)
        dut.rst.value = 1
        for _ in range(3):
            await FallingEdge(dut.clk)
        dut.rst.value = 0
        # LiteX's CRG holds the system reset one cycle longer (its power-on-reset register).
        await FallingEdge(dut.clk)
        self.a = self.bench.source("s_axis_a", idle=0.3)
        self.b = self.bench.source("s_axis_b", idle=0.3)
        self.c = self.bench.sink("m_axis_c", backpressure=0.3)

    async def write(self, offset, value, sel=0xF):
        """Returns Wishbone ``err``: the converter answers the core's SLVERR with it."""
        return (await self.bus.access(SPARTAN_BASE + offset, int(value), sel))[1]

    async def read(self, offset):
        return await self.bus.access(SPARTAN_BASE + offset)


@cocotb.test()
async def registers_over_the_soc_bus(dut):
    """ID and THRESHOLD (reset values, write and read back, byte lanes), a write to read-only
    ID ignored, unmapped offsets of the core's window answered with a bus error."""
    tb = SocTB(dut)
    await tb.start()
    assert tb.regs["ID"] == REGS["ID"] and tb.regs["THRESHOLD"] == REGS["THRESHOLD"]
    assert await tb.read(REGS["ID"]) == (ID, 0)
    assert await tb.read(REGS["THRESHOLD"]) == (THRESHOLD_RESET, 0)
    for value in [0x00, 0xFF] + [tb.rng.getrandbits(32) for _ in range(8)]:
        assert await tb.write(REGS["THRESHOLD"], value) == 0
        assert await tb.read(REGS["THRESHOLD"]) == (value & 0xFF, 0), hex(value)  # 8 bits
    # Wishbone byte selects become AXI4-Lite strobes: only the selected byte is written.
    await tb.write(REGS["THRESHOLD"], 0x5A)
    await tb.write(REGS["THRESHOLD"], 0x0000_C300, sel=0b0010)
    assert await tb.read(REGS["THRESHOLD"]) == (0x5A, 0)
    await tb.write(REGS["THRESHOLD"], 0xFFFF_FFC3, sel=0b0001)
    assert await tb.read(REGS["THRESHOLD"]) == (0xC3, 0)
    assert await tb.write(REGS["ID"], 0) == 0  # read-only: ignored, OKAY
    assert await tb.read(REGS["ID"]) == (ID, 0)
    for offset in (0x200, 0x0FFC, 0x1FFC):   # neither a register nor a table word: SLVERR
        assert (await tb.read(offset))[1] == 1, hex(offset)
        assert await tb.write(offset, 1) == 1, hex(offset)
    assert await tb.read(REGS["ID"]) == (ID, 0)  # the bridge recovers from an error


@cocotb.test()
async def gemm_passes_over_the_soc_bus(dut):
    """Software's sequence (docs/core.md) over the SoC bus: THRESHOLD, CTRL (clear, forget,
    pass start), B, then the same layer's tiles in auto mode for two passes."""
    tb = SocTB(dut)
    await tb.start()
    p, model = tb.p, CoreModel(dict(tb.p))
    np_rng = np.random.default_rng(cocotb.RANDOM_SEED)
    ctrl = tb.regs["CTRL"]
    assert await tb.write(ctrl, 0b1_1000) == 0   # MODE auto, CLEAR, FORGET (docs/registers.md)
    model.clear()
    model.forget()
    assert await tb.write(REGS["THRESHOLD"], 0x60) == 0  # sparse iff density <= 37.5 %
    model.threshold = 0x60
    b_raw = random_elements(np_rng, (p["k"], p["n"]), p["width"], 0.9)
    model.load_b(b_raw)
    tb.b.send(Beat(data, last) for data, last in tile_to_beats(b_raw, p["lanes"], p["width"]))
    densities = [0.1, 0.9, 0.0, 0.6]
    decisions, expected = [], []
    for _ in range(2):
        await tb.bench.wait_until(lambda: tb.b.idle_now and tb.a.idle_now
                                  and len(tb.c.beats) == len(expected),
                                  timeout=20_000, what="the previous pass")
        assert await tb.write(ctrl, 0b100) == 0  # PASS_START
        model.pass_start()
        for density in densities:
            a_raw = random_elements(np_rng, (2, p["k"]), p["width"], density)
            c_raw, sparse = model.run_tile(a_raw)
            decisions.append(sparse)
            expected += [Beat(d, last) for d, last in tile_to_beats(c_raw, p["lanes"],
                                                                    p["acc_width"])]
            tb.a.send(Beat(d, last) for d, last in tile_to_beats(a_raw, p["lanes"], p["width"]))
    await tb.bench.wait_until(lambda: len(tb.c.beats) >= len(expected), timeout=20_000,
                              what="every C beat")
    for _ in range(20):   # nothing more comes
        await FallingEdge(dut.clk)
    check_sequence("m_axis_c", tb.c.beats, expected)
    # No history in the first pass: dense; in the second, sparse where the first was sparse
    # enough (independent of the model's arithmetic).
    assert decisions == [False] * 4 + [d < 0.375 for d in densities], decisions
    for name in EVENT_COUNTERS:
        got, err = await tb.read(tb.regs[name])
        assert (got, err) == (model.counters[name], 0), f"{name} = {got}, expected " \
                                                        f"{model.counters[name]}"
    assert model.counters["TILES_SPARSE"] > 0 and model.counters["TILES_DENSE"] > 0
