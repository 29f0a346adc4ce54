"""cocotb testbench of the expander (``spartan_expander``), against golden/compactor.py.

The ZVC input is made by the golden encoder from the same tiles as the compactor's tests
(:mod:`spartan_rtl.tb.tb_compactor`), compressed and bypass (all-ones masks) interleaved; the
expected output is :func:`spartan_rtl.golden.compactor.expand_stream`. Random idle cycles on
``s_axis_mask`` and ``s_axis_data`` independently, random back-pressure on ``m_axis``, ``error``
pulses counted.
"""

import re

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from spartan_rtl.golden.compactor import encode_stream, expand_stream
from spartan_rtl.tb.axis import Beat, check_sequence, test_args
from spartan_rtl.tb.profile import Profile, Waiver
from spartan_rtl.tb.tb_compactor import (
    ErrorCounter,
    ZvcTB,
    mid_packet,
    quiet_after_reset,
    reset_traffic,
    reset_when,
    tile_beats,
)


class ExpanderTB(ZvcTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.masks, self.data = [], []

    async def start(self, *, mask_idle=0.3, data_idle=0.3, backpressure=0.3):
        await self.bench.reset()
        self.streams(mask_idle=mask_idle, data_idle=data_idle, backpressure=backpressure)

    def streams(self, *, mask_idle=0.3, data_idle=0.3, backpressure=0.3):
        """New sources, sink and error counter, and an empty record of what was sent."""
        b = self.bench
        self.masks, self.data = [], []
        self.mask_src = b.source("s_axis_mask", idle=mask_idle)
        self.data_src = b.source("s_axis_data", idle=data_idle)
        self.out = b.sink("m_axis", backpressure=backpressure)
        self.errors = ErrorCounter(b, self.dut.error)

    def encode(self, tile, bypass=False):
        """The golden ZVC form of ``tile``: ``(masks, data)`` lists of ``(tdata, tlast)``."""
        beats = tile_beats(tile, lanes=self.lanes, width=self.width, bypass=bypass, rng=self.rng)
        masks, data, _ = encode_stream(beats, lanes=self.lanes, width=self.width,
                                       cols=self.cols, number_format=self.number_format)
        return masks, data

    def send(self, masks, data):
        self.masks.extend(masks)
        self.data.extend(data)
        self.mask_src.send([Beat(*m) for m in masks])
        self.data_src.send([Beat(*d) for d in data])

    def tile(self, tile, bypass=False):
        self.send(*self.encode(tile, bypass))

    def expected(self):
        return expand_stream(self.masks, self.data, lanes=self.lanes, width=self.width,
                             cols=self.cols)

    async def finish(self, timeout=None):
        beats, _ = self.expected()
        timeout = timeout or 30 * len(beats) + 1000
        await self.bench.drain({self.out: len(beats)}, timeout=timeout)
        self.check()

    def check(self):
        beats, errors = self.expected()
        check_sequence("m_axis", [(b.data, b.last) for b in self.out.beats], beats)
        assert self.errors.count == errors, f"error pulsed {self.errors.count} times, " \
                                            f"expected {errors}"


@cocotb.test()
async def patterns(dut):
    """Every zero pattern, compressed and as bypass (all-ones masks), interleaved."""
    tb = ExpanderTB(dut)
    await tb.start()
    for _, tile in tb.pattern_tiles():
        tb.tile(tile)
        tb.tile(tile[:1], bypass=True)
    await tb.finish()


@cocotb.test()
async def random_traffic(dut):
    """Tiles of random length, density and mode under random idle and back-pressure."""
    tb = ExpanderTB(dut)
    await tb.start()
    for _ in range(tb.args.get("tiles", 30)):
        tb.tile(tb.random_tile(), bypass=tb.rng.random() < 0.3)
    await tb.finish()


@cocotb.test()
async def malformed(dut):
    """Data ``tlast`` inconsistent with the masks: a missing ``tlast``, an extra one early in a
    row, and (last, as it shifts every later row) one data beat too many. The masks decide
    the output; ``error`` pulses once per inconsistent row."""
    tb = ExpanderTB(dut)
    await tb.start()
    for case in range(6):
        masks, data = tb.encode(tb.random_tile(), bypass=case >= 4)
        if data:
            i = tb.rng.randrange(len(data))
            data[i] = (data[i][0], 1 - data[i][1])  # a tlast missing or one too many
        tb.send(masks, data)
        tb.tile(tb.random_tile())
    await tb.finish()
    # One data beat too many: the masks still decide; rows after it get shifted data.
    masks, data = tb.encode(np.ones((3, tb.cols), dtype=np.uint64))
    data.insert(1, (tb.rng.getrandbits(tb.lanes * tb.width), 1))
    tb.send(masks, data)
    tb.tile(np.ones((2, tb.cols), dtype=np.uint64))
    await tb.finish()
    assert tb.errors.count > 0


@cocotb.test()
async def reset_mid_packet(dut):
    """A synchronous reset in the middle of a packet of each stream in turn: the mask input
    part-way through a tile, the data input part-way through a row (between rows when a row
    is one data beat, ``cols`` = ``lanes``), the output part-way through a tile. ``m_axis_tvalid``
    is low after the reset edge; nothing of the interrupted traffic comes out afterwards; the
    traffic sent after the reset is expanded exactly as after power-up (golden model, every
    beat, random idle and back-pressure)."""
    tb = ExpanderTB(dut)
    await tb.start()
    per_row = tb.cols // tb.lanes
    cases = {
        "s_axis_mask": lambda: mid_packet(tb.mask_src.sent) and len(tb.out.beats) > 0,
        "s_axis_data": lambda: bool(tb.data_src.sent) and (per_row == 1
                                                           or mid_packet(tb.data_src.sent)),
        "m_axis": lambda: mid_packet(tb.out.beats),
    }
    for _ in range(tb.args.get("resets", 2)):
        for name, condition in cases.items():
            reset_traffic(tb)
            await reset_when(tb.bench, condition, streams=(tb.mask_src, tb.data_src, tb.out),
                             counters=(tb.errors,), outputs=("m_axis",),
                             timeout=40 * len(tb.data) + 1000,
                             what=f"{name} part-way through a packet")
            tb.streams()
            await quiet_after_reset(tb, (tb.out,), tb.errors, 4 * per_row + 20)
            for _ in range(4):
                tb.tile(tb.random_tile(), bypass=tb.rng.random() < 0.3)
            await tb.finish()


@cocotb.test()
async def output_held(dut):
    """``m_axis`` held for a long time: the inputs stop, nothing is lost."""
    tb = ExpanderTB(dut)
    await tb.start(mask_idle=0.1, data_idle=0.1, backpressure=0.1)
    tb.out.hold = True
    for _ in range(5):
        tb.tile(tb.random_tile(), bypass=tb.rng.random() < 0.3)
    for _ in range(100):
        await FallingEdge(tb.bench.clk)
    assert len(tb.out.beats) == 0
    tb.out.hold = False
    await tb.finish()


@cocotb.test(skip=test_args().get("beats") is None)
async def throughput(dut):
    """Benchmark (``spartan bench compactor``): masks and data always valid, ``m_axis``
    always ready; output beats per cycle per density."""
    import json

    from spartan_rtl.golden.formats import random_elements
    tb = ExpanderTB(dut)
    await tb.start(mask_idle=0.0, data_idle=0.0, backpressure=0.0)
    per_row = tb.cols // tb.lanes
    rows = -(-tb.args["beats"] // per_row)
    results = []
    for density in tb.args["densities"]:
        before = len(tb.out.beats)
        tile = random_elements(tb.np_rng, (rows, tb.cols), tb.width, density, tb.number_format)
        tb.tile(tile)
        await tb.finish()
        cycles = tb.out.beat_cycles[before:]
        n = len(cycles)
        results.append({"density": density, "output_beats": n,
                        "output_cycles": cycles[-1] - cycles[0] + 1,
                        "output_beats_per_cycle": n / (cycles[-1] - cycles[0] + 1)})
    with open("throughput.json", "w") as f:
        json.dump({"rows": results}, f)


# --- the verification profile (verif/tb/profile.py) ------------------------------------------

def _last_stage_slot(text, p):
    m = re.search(r"=> \S*cmd_stage(\d+)$", text)
    return bool(m) and text.startswith("[cond_then]") and int(m[1]) == p["lanes"] - 1


#: Also the round trip's (verif/tb/tb_compactor_roundtrip.py): the same expander inside.
COVERAGE_WAIVERS = (
    Waiver(r"=> \S*cmd_(out|stage)\d+$", lambda p: p["cols"] == p["lanes"],
           "cols = lanes: a row is one beat and avail returns to 0 at every row end, so avail is "
           "always 0 and nothing is staged (neither pos < avail nor j + need < avail holds)"),
    Waiver(_last_stage_slot, None,
           "staging slot j = lanes - 1 keeps a staged element only if lanes - 1 + need < avail, "
           "but avail <= lanes - 1"),
)

PROFILE = Profile(mutants=24, mutant_tests=(None, {"tiles": 30}), fuzz_examples=25,
                  coverage_waivers=COVERAGE_WAIVERS)
