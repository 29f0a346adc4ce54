"""cocotb round trip: compactor -> expander (``spartan_compactor_roundtrip``, a test harness
defined here, :class:`RoundTrip`) returns every tile exactly.

Compared with the input itself, not with a golden model: a compressed tile comes back with
its zeros written as all-zero patterns (an ``fp`` -0.0 is a zero, so it returns as +0.0), a
bypass tile comes back bit for bit. Random idle cycles on the input, random back-pressure on
the output; neither block may report an error. A row cut short by ``tlast`` comes back
zero-padded to a full row, with one compactor error.
"""

import cocotb
import numpy as np
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spartan_rtl.golden.compactor import canonical
from spartan_rtl.golden.formats import pack_beat
from spartan_rtl.hw.block import Block
from spartan_rtl.hw.compactor import PARAMS, Compactor, check_cols, input_layout
from spartan_rtl.hw.elements import beat_layout
from spartan_rtl.hw.expander import DATA_LATENCY, MASK_LATENCY, Expander
from spartan_rtl.tb import tb_compactor, tb_expander
from spartan_rtl.tb.axis import Beat, check_sequence
from spartan_rtl.tb.profile import Profile
from spartan_rtl.tb.tb_compactor import ErrorCounter, ZvcTB, tile_beats


class RoundTrip(wiring.Component):
    """The harness (never registered for ``spartan generate``; the test adds it to the registry): a
    compactor feeding an expander directly, so a dense stream goes in on ``s_axis`` and comes back
    on ``m_axis``."""

    def __init__(self, *, lanes=8, width=8, number_format="int", cols=64):
        self.compactor = Compactor(lanes=lanes, width=width, number_format=number_format,
                                   cols=cols)
        self.expander = Expander(lanes=lanes, width=width, number_format=number_format,
                                 cols=cols)
        super().__init__({
            "s_axis": In(stream.Signature(input_layout(lanes, width))),
            "m_axis": Out(stream.Signature(beat_layout(lanes, width))),
            "compactor_error": Out(1),
            "expander_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.compactor = c = self.compactor
        m.submodules.expander = e = self.expander
        wiring.connect(m, wiring.flipped(self.s_axis), c.s_axis)
        wiring.connect(m, c.m_axis_mask, e.s_axis_mask)
        wiring.connect(m, c.m_axis_data, e.s_axis_data)
        wiring.connect(m, e.m_axis, wiring.flipped(self.m_axis))
        m.d.comb += [self.compactor_error.eq(c.error), self.expander_error.eq(e.error)]
        return m


ROUNDTRIP_BLOCK = Block(
    name="compactor_roundtrip",
    top="spartan_compactor_roundtrip",
    summary="test harness: compactor -> expander",
    params=PARAMS,
    check=check_cols,
    build=lambda **p: RoundTrip(**p),
    # A row's last input beat to its first output beat: its mask through both, or the data
    # beat made by that input beat through both, whichever is later.
    info=lambda rt: {"latency_cycles": max(rt.compactor.pipeline.mask_latency + MASK_LATENCY,
                                           rt.compactor.pipeline.data_latency + DATA_LATENCY),
                     "throughput_beats_per_cycle": 1.0},
)


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
        await self.bench.drain({self.out: n}, timeout=40 * n + 1000)
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


# --- the verification profile (verif/tb/profile.py) ------------------------------------------

PROFILE = Profile(stimulus=None, mutants=0, coverage_waivers=(tb_compactor.COVERAGE_WAIVERS
                                                             + tb_expander.COVERAGE_WAIVERS))
