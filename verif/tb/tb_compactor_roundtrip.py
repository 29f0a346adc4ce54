"""cocotb round trip: compactor -> expander (``spartan_compactor_roundtrip``, a test harness
from :class:`spartan_rtl.hw.expander.RoundTrip`) returns every tile exactly.

Compared with the input itself, not with a golden model: a compressed tile comes back with
its zeros written as all-zero patterns (an ``fp`` -0.0 is a zero, so it returns as +0.0), a
bypass tile comes back bit for bit. Random idle cycles on the input, random back-pressure on
the output; neither block may report an error. A row cut short by ``tlast`` comes back
zero-padded to a full row, with one compactor error.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from spartan_rtl.golden.compactor import canonical
from spartan_rtl.golden.formats import pack_beat
from spartan_rtl.tb.axis import Beat, check_sequence
from spartan_rtl.tb.tb_compactor import ErrorCounter, ZvcTB, tile_beats


class RoundTripTB(ZvcTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.expected = []
        self.expected_errors = 0

    async def start(self):
        await self.bench.reset()
        self.src = self.bench.source("s_axis", idle=0.3)
        self.out = self.bench.sink("m_axis", backpressure=0.3)
        self.compactor_errors = ErrorCounter(self.bench, self.dut.compactor_error)
        self.expander_errors = ErrorCounter(self.bench, self.dut.expander_error)

    def tile(self, tile, bypass=False, cut=None):
        """Send ``tile``; with ``cut``, only its first ``cut`` beats, the last with ``tlast``."""
        tile = np.asarray(tile, dtype=np.uint64)
        beats = tile_beats(tile, lanes=self.lanes, width=self.width, bypass=bypass, rng=self.rng)
        back = tile if bypass else canonical(tile, self.width, self.number_format)
        if cut is not None:
            beats = beats[:cut]
            beats[-1] = (beats[-1][0], 1, beats[-1][2])
            flat = back.reshape(-1).copy()
            flat[cut * self.lanes:] = 0
            rows = -(-cut * self.lanes // self.cols)
            back = flat[:rows * self.cols]
            self.expected_errors += cut % (self.cols // self.lanes) != 0
        self.src.send([Beat(*b) for b in beats])
        flat = np.asarray(back, dtype=np.uint64).reshape(-1, self.lanes)
        self.expected.extend((pack_beat(row, self.width), int(i == len(flat) - 1))
                             for i, row in enumerate(flat))

    async def finish(self):
        n = len(self.expected)
        await self.bench.wait_until(lambda: len(self.out.beats) >= n, timeout=40 * n + 1000,
                                    what=f"{n} beats back")
        for _ in range(10):
            await FallingEdge(self.bench.clk)
        check_sequence("m_axis", [(b.data, b.last) for b in self.out.beats], self.expected)
        assert self.compactor_errors.count == self.expected_errors, \
            f"compactor error pulsed {self.compactor_errors.count} times, " \
            f"expected {self.expected_errors}"
        assert self.expander_errors.count == 0, \
            f"expander error pulsed {self.expander_errors.count} times"


@cocotb.test()
async def round_trip(dut):
    """Pattern tiles and random tiles, compressed and bypass interleaved, plus rows cut short
    by ``tlast``: everything comes back."""
    tb = RoundTripTB(dut)
    await tb.start()
    for _, tile in tb.pattern_tiles():
        tb.tile(tile)
        tb.tile(tile[:1], bypass=True)
    for _ in range(tb.args.get("tiles", 20)):
        tile = tb.random_tile()
        bypass = tb.rng.random() < 0.3
        beats = tile.size // tb.lanes
        cut = tb.rng.randint(1, beats) if tb.rng.random() < 0.2 else None
        tb.tile(tile, bypass=bypass, cut=cut)
    await tb.finish()
