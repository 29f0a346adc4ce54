"""cocotb testbench of the compaction engine (``spartan_compactor``), against golden/compactor.py.

Every test: random idle cycles on ``s_axis`` (with garbage ``tdata``/``tuser`` while idle, and
random ``tuser`` on every beat but a tile's first, where it is the bypass flag), random
back-pressure on ``m_axis_mask`` and ``m_axis_data`` independently, every mask and data beat
compared with :func:`spartan_rtl.golden.compactor.encode_stream`, the ``error`` pulses counted, and
the order promise checked: each row's mask transfers on an earlier edge than its first data beat.

The tile generators here (:func:`pattern_tiles`, :func:`random_tile`) also feed the expander and
round-trip testbenches.
"""

import re

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from spartan_rtl.golden.compactor import compression_ratio, encode_stream
from spartan_rtl.golden.formats import is_zero, pack_beat, random_elements
from spartan_rtl.tb.axis import Beat, Bench, check_sequence, read_int, test_args
from spartan_rtl.tb.profile import Profile, Waiver

# --- tiles -----------------------------------------------------------------------------------

def nonzero_values(np_rng, shape, width, number_format):
    return random_elements(np_rng, shape, width, 1.0, number_format)


def pattern_tiles(np_rng, *, lanes, width, cols, number_format, rows=None):
    """``[(name, tile), ...]``: the zero patterns a compactor must get right, each a
    ``rows x cols`` array of raw elements (``rows`` 2, or 1 for rows of over 16 beats)."""
    beats = cols // lanes
    rows = rows or (2 if beats <= 16 else 1)
    shape = (rows, cols)

    def where(keep):
        keep = np.broadcast_to(np.asarray(keep, dtype=bool), shape)
        zero = np.uint64(1 << (width - 1)) if number_format == "fp" else np.uint64(0)
        zeros = np.zeros(shape, dtype=np.uint64)
        if number_format == "fp":  # -0.0 and +0.0 mixed
            zeros = np.where(np_rng.random(shape) < 0.5, zero, zeros)
        return np.where(keep, nonzero_values(np_rng, shape, width, number_format), zeros)

    col = np.arange(cols)
    tiles = [
        ("zeros", where(False)),
        ("one_first_lane", where(col == 0)),
        ("one_last_lane", where(col == lanes - 1)),
        ("one_last_element", where(col == cols - 1)),
        ("last_lane_of_each_beat", where(col % lanes == lanes - 1)),
        ("alternating", where(col % 2 == 0)),
        ("alternating_odd", where(col % 2 == 1)),
        ("all_nonzero", where(True)),
        ("density_1_per_lanes", random_elements(np_rng, shape, width, 1 / lanes, number_format)),
    ]
    # The first s lanes of every beat zero, the others not: lane i of a row's first beat
    # lands in slot i - s, so together these take every lane-to-slot route of the crossbar.
    tiles += [(f"leading_zeros_{s}", where(col % lanes >= s)) for s in range(1, lanes)]
    # nnz an exact multiple of lanes (at random positions), row by row.
    multiple = np.zeros(shape, dtype=bool)
    for r in range(rows):
        k = int(np_rng.integers(1, beats + 1)) * lanes
        multiple[r, np_rng.permutation(cols)[:k]] = True
    tiles.append(("nnz_multiple_of_lanes", where(multiple)))
    # One row per step of density, 10 % to 100 %.
    for d in range(1, 11):
        tiles.append((f"density_{10 * d}", random_elements(np_rng, shape, width, d / 10,
                                                             number_format)))
    if number_format == "fp":
        negative_zero = np.uint64(1 << (width - 1))
        tiles.append(("negative_zero", np.full(shape, negative_zero, dtype=np.uint64)))
        # The smallest magnitudes, either sign: nonzero although only one low bit is set.
        tiny = np.where(col % 2 == 0, np.uint64(1), negative_zero | np.uint64(1))
        tiles.append(("smallest_magnitudes", np.broadcast_to(tiny, shape).copy()))
    return tiles


def random_tile(rng, np_rng, *, cols, width, number_format, max_rows=4, lanes=1):
    """A tile of 1 to ``max_rows`` rows (fewer when rows are long: at most 64 beats)."""
    rows = rng.randint(1, max(1, min(max_rows, 64 * lanes // cols)))
    density = rng.choice([0.0, 1.0, 0.5, rng.random(), rng.random() ** 3])
    return random_elements(np_rng, (rows, cols), width, density, number_format)


def tile_beats(tile, *, lanes, width, bypass, rng):
    """Dense ``(tdata, tlast, tuser)`` beats of a tile; ``tuser`` is the bypass flag on the
    first beat and random on the others (the compactor must ignore it there)."""
    flat = np.asarray(tile, dtype=np.uint64).reshape(-1, lanes)
    return [(pack_beat(row, width), int(i == len(flat) - 1),
             int(bypass) if i == 0 else rng.getrandbits(1)) for i, row in enumerate(flat)]


class ErrorCounter:
    """Counts the cycles in which a one-bit output is high."""

    def __init__(self, bench, signal):
        self.bench, self.signal, self.count = bench, signal, 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await FallingEdge(self.bench.clk)
            await ReadOnly()
            self.count += read_int(self.signal)

    def stop(self):
        self._task.cancel()


def mid_packet(beats):
    """True when the last transfer of ``beats`` (a source's ``sent`` or a sink's ``beats``)
    was not a packet's last: the stream is part-way through a packet."""
    return bool(beats) and not beats[-1].last


async def reset_when(bench, condition, *, streams, counters=(), outputs, flags=("error",),
                     cycles=3, timeout=10000, what="the reset point"):
    """Reset the running DUT in the middle of its traffic.

    ``condition()`` is tested just after each falling edge, where the sources' and sinks'
    records hold every transfer up to the last rising edge and no later one. When it holds,
    ``streams`` (the sources and sinks) and ``counters`` stop (a source drops its queue), every
    input goes to 0 and ``rst`` rises for ``cycles`` edges: the reset edge sees no transfer, so
    the DUT is reset in exactly the state the records show. After every reset edge each
    stream of ``outputs`` must have ``tvalid`` low (an AXI4-Stream master drops ``tvalid`` in
    reset), and each one-bit output of ``flags`` must be low. The caller starts new sources
    and sinks afterwards."""
    await FallingEdge(bench.clk)
    await bench.wait_until(condition, timeout=timeout, what=what)
    for stream in list(streams) + list(counters):
        stream.stop()
    for name in bench.inputs():
        getattr(bench.dut, name).value = 0
    bench.dut.rst.value = 1
    for edge in range(cycles):
        await FallingEdge(bench.clk)
        for name in outputs:
            assert read_int(getattr(bench.dut, f"{name}_tvalid")) == 0, \
                f"{name}_tvalid high after reset edge {edge + 1}"
        for name in flags:
            assert read_int(getattr(bench.dut, name)) == 0, \
                f"{name} high after reset edge {edge + 1}"
    bench.dut.rst.value = 0


# --- the compactor bench ---------------------------------------------------------------------

class ZvcTB:
    """What the compactor, expander and round-trip benches share: the bench, the parameters
    from the manifest, seeded random generators, random tiles."""

    def __init__(self, dut):
        self.dut = dut
        self.args = test_args()
        self.bench = Bench(dut)
        p = self.bench.manifest["params"]
        self.lanes, self.width, self.cols = p["lanes"], p["width"], p["cols"]
        self.number_format = p["number_format"]
        self.rng = self.bench.rng
        self.np_rng = np.random.default_rng(self.bench.seed)

    def random_tile(self, **kwargs):
        return random_tile(self.rng, self.np_rng, lanes=self.lanes, cols=self.cols,
                           width=self.width, number_format=self.number_format, **kwargs)

    def pattern_tiles(self):
        return pattern_tiles(self.np_rng, lanes=self.lanes, width=self.width, cols=self.cols,
                             number_format=self.number_format)


class CompactorTB(ZvcTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.beats = []

    async def start(self, *, idle=0.3, mask_backpressure=0.3, data_backpressure=0.3):
        await self.bench.reset()
        self.streams(idle=idle, mask_backpressure=mask_backpressure,
                     data_backpressure=data_backpressure)

    def streams(self, *, idle=0.3, mask_backpressure=0.3, data_backpressure=0.3):
        """New source, sinks and error counter, and an empty record of what was sent."""
        b = self.bench
        self.beats = []
        self.src = b.source("s_axis", idle=idle)
        self.masks = b.sink("m_axis_mask", backpressure=mask_backpressure)
        self.data = b.sink("m_axis_data", backpressure=data_backpressure)
        self.errors = ErrorCounter(b, self.dut.error)

    def send(self, beats):
        self.beats.extend(beats)
        self.src.send([Beat(*b) for b in beats])

    def tile(self, tile, bypass=False):
        self.send(tile_beats(tile, lanes=self.lanes, width=self.width, bypass=bypass,
                             rng=self.rng))

    def expected(self):
        return encode_stream(self.beats, lanes=self.lanes, width=self.width, cols=self.cols,
                             number_format=self.number_format)

    async def finish(self, timeout=None):
        masks, data, _ = self.expected()
        timeout = timeout or 30 * len(self.beats) + 1000
        await self.bench.drain({self.masks: len(masks), self.data: len(data)}, timeout=timeout)
        self.check()

    def check(self):
        masks, data, errors = self.expected()
        check_sequence("m_axis_mask", [(b.data, b.last) for b in self.masks.beats], masks)
        check_sequence("m_axis_data", [(b.data, b.last) for b in self.data.beats], data)
        assert self.errors.count == errors, f"error pulsed {self.errors.count} times, " \
                                            f"expected {errors}"
        # Order: each row's mask leaves on an earlier edge than its first data beat.
        beat = 0
        for row, (mask, _) in enumerate(masks):
            if not mask:
                continue
            nbeats = 1
            while not data[beat + nbeats - 1][1]:
                nbeats += 1
            first_data = self.data.beat_cycles[beat]
            assert self.masks.beat_cycles[row] < first_data, \
                f"row {row}: data beat in cycle {first_data} before its mask " \
                f"(cycle {self.masks.beat_cycles[row]})"
            beat += nbeats


@cocotb.test()
async def patterns(dut):
    """Every zero pattern, compressed and in bypass, interleaved tile by tile."""
    tb = CompactorTB(dut)
    await tb.start()
    for _, tile in tb.pattern_tiles():
        tb.tile(tile, bypass=False)
        tb.tile(tile[:1], bypass=True)
    await tb.finish()


@cocotb.test()
async def random_traffic(dut):
    """Tiles of random length, density and mode under random idle and back-pressure."""
    tb = CompactorTB(dut)
    await tb.start()
    for _ in range(tb.args.get("tiles", 30)):
        tb.tile(tb.random_tile(), bypass=tb.rng.random() < 0.3)
    await tb.finish()


@cocotb.test()
async def malformed(dut):
    """``tlast`` in the middle of a row (compressed and bypass tiles, first row and later
    rows, single-beat tiles): the row is closed with zeros, ``error`` pulses once per such row,
    and the tiles after it are unaffected."""
    tb = CompactorTB(dut)
    await tb.start()
    per_row = tb.cols // tb.lanes
    for case in range(8):
        bypass = bool(case & 1)
        tile = tb.random_tile()
        beats = tile_beats(tile, lanes=tb.lanes, width=tb.width, bypass=bypass, rng=tb.rng)
        if per_row > 1:
            rows_kept = tb.rng.randrange(len(tile))
            cut = rows_kept * per_row + tb.rng.randint(1, per_row - 1)
            beats = beats[:cut]
            tdata, _, tuser = beats[-1]
            beats[-1] = (tdata, 1, tuser)
        tb.send(beats)
        tb.tile(tb.random_tile(), bypass=tb.rng.random() < 0.5)
    await tb.finish()
    _, _, errors = tb.expected()
    assert errors == (8 if per_row > 1 else 0)


def reset_traffic(tb):
    """Tiles for a reset to interrupt (``tb``: a compactor or expander bench, whose ``tile``
    sends one): three rows each (so a tile is a packet of several mask beats), dense enough
    that most rows take several data beats, bypass at random; at least 48 input beats in all,
    so that the input is still busy when the first outputs leave (latency up to 8)."""
    for _ in range(max(2, -(-48 // (3 * tb.cols // tb.lanes)))):
        density = tb.rng.choice([0.6, 1.0])
        tb.tile(random_elements(tb.np_rng, (3, tb.cols), tb.width, density, tb.number_format),
                bypass=tb.rng.random() < 0.3)


async def quiet_after_reset(tb, sinks, counter, cycles):
    """Nothing comes out for ``cycles`` cycles after a reset with no input: nothing of the
    interrupted traffic survives in the pipeline, and ``error`` stays low."""
    for _ in range(cycles):
        await FallingEdge(tb.bench.clk)
    for sink in sinks:
        assert not sink.beats, f"{sink.name}: {len(sink.beats)} beats after the reset"
    assert counter.count == 0, f"error pulsed {counter.count} times after the reset"


@cocotb.test()
async def reset_mid_packet(dut):
    """A synchronous reset in the middle of a packet of each stream in turn: the input part-way
    through a tile, the mask output part-way through a tile, the data output part-way through
    a row (with one beat a row, ``cols`` = ``lanes``, a data row cannot be cut: there the data
    output is reset between rows, traffic still in flight). Every output's ``tvalid`` is low
    after the reset edge; nothing of the interrupted traffic comes out afterwards; the traffic
    sent after the reset is compressed exactly as after power-up (golden model, every beat,
    random idle and back-pressure)."""
    tb = CompactorTB(dut)
    await tb.start()
    per_row = tb.cols // tb.lanes
    latency = tb.bench.manifest["data_latency_cycles"]
    cases = {
        "s_axis": lambda: mid_packet(tb.src.sent) and len(tb.masks.beats) > 0,
        "m_axis_mask": lambda: mid_packet(tb.masks.beats),
        "m_axis_data": lambda: bool(tb.data.beats) and (per_row == 1
                                                        or mid_packet(tb.data.beats)),
    }
    for _ in range(tb.args.get("resets", 2)):
        for name, condition in cases.items():
            reset_traffic(tb)
            await reset_when(tb.bench, condition, streams=(tb.src, tb.masks, tb.data),
                             counters=(tb.errors,), outputs=("m_axis_mask", "m_axis_data"),
                             timeout=40 * len(tb.beats) + 1000,
                             what=f"{name} part-way through a packet")
            tb.streams()
            await quiet_after_reset(tb, (tb.masks, tb.data), tb.errors, 4 * latency + 20)
            for _ in range(4):
                tb.tile(tb.random_tile(), bypass=tb.rng.random() < 0.3)
            await tb.finish()


@cocotb.test()
async def outputs_held(dut):
    """One output held for a long time, then the other: the input stops only when a buffer is
    full, nothing deadlocks or is lost, and everything drains in order afterwards."""
    tb = CompactorTB(dut)
    await tb.start(idle=0.1, mask_backpressure=0.1, data_backpressure=0.1)
    for held in (tb.masks, tb.data, tb.masks):
        held.hold = True
        for _ in range(6):
            tb.tile(tb.random_tile(max_rows=6), bypass=tb.rng.random() < 0.3)
        for _ in range(40 + 4 * tb.cols // tb.lanes):
            await FallingEdge(tb.bench.clk)
        held.hold = False
        await tb.finish()


@cocotb.test()
async def grants_full(dut):
    """The data output held while masks flow, on rows of one data beat each: every mask that
    leaves adds a grant, so the grant FIFO fills and the mask output must wait for the data
    output; then everything drains in order (fault injection found this state unvisited)."""
    tb = CompactorTB(dut)
    await tb.start(idle=0.1, mask_backpressure=0.1, data_backpressure=0.1)
    rows = 12
    tile = np.zeros((rows, tb.cols), dtype=np.uint64)
    tile[np.arange(rows), tb.np_rng.integers(0, tb.cols, rows)] = \
        nonzero_values(tb.np_rng, rows, tb.width, tb.number_format)
    tb.data.hold = True
    tb.tile(tile)
    for _ in range(40 + 4 * rows * tb.cols // tb.lanes):
        await FallingEdge(tb.bench.clk)
    tb.data.hold = False
    await tb.finish()


@cocotb.test(skip=test_args().get("beats") is None)
async def throughput(dut):
    """Benchmark (``spartan bench compactor``): input always valid, both outputs always
    ready; per density, input and output beats per cycle and the compression ratio."""
    import json
    tb = CompactorTB(dut)
    await tb.start(idle=0.0, mask_backpressure=0.0, data_backpressure=0.0)
    rows_per_tile = max(1, 64 // (tb.cols // tb.lanes))
    per_row = tb.cols // tb.lanes
    results = []
    for density in tb.args["densities"]:
        beats_before, masks_before, data_before = len(tb.beats), len(tb.masks.beats), \
            len(tb.data.beats)
        tiles = []
        while (len(tiles) * rows_per_tile * per_row) < tb.args["beats"]:
            tile = random_elements(tb.np_rng, (rows_per_tile, tb.cols), tb.width, density,
                                   tb.number_format)
            tiles.append(tile)
            tb.tile(tile)
        await tb.finish()
        sent = tb.src.sent_cycles[beats_before:]
        n_in = len(tb.beats) - beats_before
        in_cycles = sent[-1] - sent[0] + 1
        data_cycles = [c for c in tb.data.beat_cycles[data_before:]]
        n_data = len(data_cycles)
        mask_cycles = tb.masks.beat_cycles[masks_before:]
        last_out = max(mask_cycles[-1], data_cycles[-1] if data_cycles else 0)
        span = last_out - sent[0] + 1
        whole = np.concatenate(tiles)
        results.append({
            "density": density, "input_beats": n_in, "input_cycles": in_cycles,
            "input_beats_per_cycle": n_in / in_cycles,
            "data_beats": n_data, "mask_beats": len(mask_cycles),
            "data_beats_per_cycle": n_data / span, "mask_beats_per_cycle": len(mask_cycles) / span,
            "measured_density": float(1 - is_zero(whole, tb.width, tb.number_format).mean()),
            "compression_ratio": compression_ratio(whole, lanes=tb.lanes, width=tb.width,
                                                   number_format=tb.number_format),
            "first_mask_latency": tb.masks.beat_cycles[masks_before]
            - tb.src.sent_cycles[beats_before + per_row - 1],
        })
    with open("throughput.json", "w") as f:
        json.dump({"rows": results}, f)


# --- the verification profile (verif/tb/profile.py) ------------------------------------------

def _route_below_lane(text, p):
    """``s2_sel<j> [k] ?``: the compactor crossbar taking lane ``max(0, j-lanes+1) + k`` to
    window position ``j``; True when that lane is below ``j``."""
    m = re.search(r"\\\S*s2_sel(\d+) \[(\d+)\] \?", text)
    if not m or not text.startswith("[cond_then]"):
        return False
    j, k = int(m[1]), int(m[2])
    return max(0, j - p["lanes"] + 1) + k < j


#: Also the round trip's (verif/tb/tb_compactor_roundtrip.py): the same compactor inside.
COVERAGE_WAIVERS = (
    Waiver(_route_below_lane, lambda p: p["cols"] == p["lanes"],
           "cols = lanes: a row is one beat and fill is always 0, so lane i lands at window "
           "position pos[i] <= i: this crossbar arm (lane i to a position j > i) is unreachable"),
    Waiver(r"=> \S*(pending|pending_valid|data_fifo\.w_data|s4_data)$",
           lambda p: p["lanes"] == 1 or p["cols"] == p["lanes"],
           "the second beat of a row end (the pending register) needs leftover elements plus a "
           "new beat's worth: impossible with lanes = 1 (nothing is left over) or cols = lanes "
           "(a row is one beat)"),
)

PROFILE = Profile(mutants=24, mutant_tests=(None, {"tiles": 30}), fuzz_examples=25,
                  coverage_waivers=COVERAGE_WAIVERS)
