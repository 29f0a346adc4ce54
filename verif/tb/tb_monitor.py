"""cocotb testbench of the sparsity monitor (``spartan_monitor``), against golden/monitor.py.

Every test: random idle cycles on ``s_axis``, random back-pressure on ``m_axis`` and
``m_axis_stats`` independently, the ``threshold`` input changing every cycle (so the sampling
on a tile's first beat is checked), data compared beat for beat, every statistics record
compared with the golden model, and the "never throttles" promise checked every cycle.
"""

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from spartan_rtl.golden.formats import pack_beat, random_elements
from spartan_rtl.golden.monitor import tile_stats
from spartan_rtl.tb.axis import (
    Beat,
    Bench,
    check_sequence,
    decode,
    read_int,
    stream_fields,
    test_args,
)
from spartan_rtl.tb.profile import SATURATE, Profile, Waiver


class MonitorTB:
    def __init__(self, dut):
        self.dut = dut
        self.args = test_args()
        self.bench = Bench(dut)
        doc = self.bench.manifest
        p = doc["params"]
        self.lanes, self.width = p["lanes"], p["width"]
        self.number_format, self.max_tile_elems = p["number_format"], p["max_tile_elems"]
        self.depth = doc["stats_buffer_records"]
        self.fields = stream_fields(doc, "m_axis_stats")
        self.rng = self.bench.rng
        self.np_rng = np.random.default_rng(self.bench.seed)
        self.tiles = []
        self.threshold_at = {}
        self.fixed_threshold = None

    async def start(self, *, idle=0.3, data_backpressure=0.3, stats_backpressure=0.5):
        await self.bench.reset()
        b = self.bench
        self.src = b.source("s_axis", idle=idle)
        self.data = b.sink("m_axis", backpressure=data_backpressure)
        self.stats = b.sink("m_axis_stats", backpressure=stats_backpressure)
        self._tasks = [cocotb.start_soon(self._drive_threshold()),
                       cocotb.start_soon(self._check_never_throttles())]

    def stop(self):
        for part in (self.src, self.data, self.stats):
            part.stop()
        for task in self._tasks:
            task.cancel()

    async def _drive_threshold(self):
        while True:
            await FallingEdge(self.bench.clk)
            value = self.fixed_threshold
            if value is None:
                value = self.rng.choice([0, 255, self.rng.randrange(256)])
            self.dut.threshold.value = value
            self.threshold_at[self.bench.cycle] = value

    async def _check_never_throttles(self):
        """``s_axis_tready`` is high in every cycle where ``m_axis_tready`` is high and the
        statistics buffer has room (occupancy from transfers seen at the ports)."""
        seen_beats = seen_records = tiles_done = records = 0
        while True:
            await FallingEdge(self.bench.clk)
            await ReadOnly()
            now = self.bench.cycle
            # Count transfers of earlier cycles only (this cycle's may be appended meanwhile).
            sent, sent_cycles = self.src.sent, self.src.sent_cycles
            while seen_beats < len(sent_cycles) and sent_cycles[seen_beats] < now:
                tiles_done += sent[seen_beats].last
                seen_beats += 1
            taken = self.stats.beat_cycles
            while seen_records < len(taken) and taken[seen_records] < now:
                records += 1
                seen_records += 1
            room = tiles_done - records < self.depth
            if read_int(self.dut.m_axis_tready) and room:
                assert read_int(self.dut.s_axis_tready), f"s_axis throttled in cycle {now}"

    def tile(self, beats, density=None, raw=None):
        """Queue one tile of ``beats`` beats (random at ``density``, or ``raw`` elements)."""
        if raw is None:
            if density is None:
                density = self.rng.choice([0.0, 1.0, self.rng.random()])
            raw = random_elements(self.np_rng, (beats, self.lanes), self.width, density,
                                  self.number_format)
        raw = np.asarray(raw, dtype=np.uint64).reshape(-1, self.lanes)
        self.tiles.append(raw)
        self.src.send([Beat(pack_beat(row, self.width), int(i == len(raw) - 1))
                       for i, row in enumerate(raw)])

    async def finish(self, timeout=None):
        total = sum(len(t) for t in self.tiles)
        timeout = timeout or 20 * total + 1000
        await self.bench.drain({self.data: total, self.stats: len(self.tiles)}, timeout=timeout)
        self.check()

    def check(self):
        check_sequence("m_axis", self.data.beats, self.src.sent)
        expected, first = [], 0
        for raw in self.tiles:
            threshold = self.threshold_at[self.src.sent_cycles[first]]
            s = tile_stats(raw, threshold, width=self.width, number_format=self.number_format,
                           max_tile_elems=self.max_tile_elems)
            expected.append(dict(nnz=s.nnz, elems=s.elems, zero_beats=s.zero_beats,
                                 sparse=s.sparse))
            first += len(raw)
        got = [decode(b.data, self.fields) for b in self.stats.beats]
        check_sequence("m_axis_stats", got, expected)


@cocotb.test()
async def random_traffic(dut):
    """Tiles of random length and density under random idle and back-pressure."""
    tb = MonitorTB(dut)
    await tb.start()
    max_beats = tb.args.get("max_beats", 16)
    for _ in range(tb.args.get("tiles", 40)):
        tb.tile(tb.rng.randint(1, max_beats))
    await tb.finish()


@cocotb.test()
async def edge_tiles(dut):
    """One-beat tiles, all-zero and no-zero tiles, -0 in fp, thresholds 0 and 255, and the
    exact boundary nnz*256 == threshold*elems on both sides."""
    tb = MonitorTB(dut)
    await tb.start(idle=0.2, data_backpressure=0.2, stats_backpressure=0.2)
    lanes = tb.lanes
    for density in (0.0, 1.0):
        tb.tile(1, density)
        tb.tile(3, density)
    if tb.number_format == "fp":
        negative_zero = 1 << (tb.width - 1)
        tb.tile(2, raw=np.full(2 * lanes, negative_zero))
        tb.tile(1, raw=[negative_zero | (i & 1) for i in range(lanes)])
    await tb.finish()

    # Boundary: elems = 256 (a multiple of every lane count), nnz = threshold -> sparse,
    # nnz = threshold + 1 -> dense; and the extremes 0 and 255.
    cases = [(threshold, 256 // lanes, nnz)
             for threshold, nnz in ((0, 0), (0, 1), (255, 255), (255, 256), (100, 100),
                                    (100, 101))]
    # Near-ties: above, threshold * elems is a multiple of 256, so a product a few units off
    # (one more a beat, say) flips no flag. Here it lies ``gap`` (at most the beats) below a
    # multiple of 256: the tile whose nnz * 256 is that multiple is dense, one fewer sparse.
    gap, beats, threshold = min((-(threshold * lanes * beats) % 256, beats, threshold)
                                for beats in range(1, 65) for threshold in range(1, 256)
                                if lanes * beats <= tb.max_tile_elems
                                and 0 < -(threshold * lanes * beats) % 256 <= beats)
    over = (threshold * lanes * beats + gap) // 256
    cases += [(threshold, beats, over), (threshold, beats, over - 1)]
    for threshold, beats, nnz in cases:
        tb.fixed_threshold = threshold
        await FallingEdge(tb.bench.clk)
        flat = np.zeros(lanes * beats, dtype=np.uint64)
        flat[tb.np_rng.permutation(lanes * beats)[:nnz]] = 1
        tb.tile(beats, raw=flat)
        await tb.finish()
    tb.fixed_threshold = None


@cocotb.test()
async def stats_held(dut):
    """``m_axis_stats`` not ready for a long time: the data path runs until the buffer is full
    and only each tile's last beat waits; then everything drains in order."""
    tb = MonitorTB(dut)
    await tb.start(idle=0.1, data_backpressure=0.1)
    tb.stats.hold = True
    for _ in range(tb.depth + 3):
        tb.tile(tb.rng.randint(1, 6))
    full = sum(len(t) for t in tb.tiles[:tb.depth]) + len(tb.tiles[tb.depth]) - 1
    await tb.bench.wait_until(lambda: len(tb.data.beats) >= full, timeout=50 * full + 100,
                              what=f"{full} beats with the statistics output held")
    for _ in range(30):
        await FallingEdge(tb.bench.clk)
    assert len(tb.data.beats) == full, f"{len(tb.data.beats)} beats passed, expected {full}"
    tb.stats.hold = False
    await tb.finish()


@cocotb.test()
async def big_tiles(dut):
    """A tile of exactly max_tile_elems elements, and (when the counters are narrow enough to
    reach it quickly) longer tiles, on which the counters saturate: a 90 % dense one, a fully
    dense one (``nnz`` saturates too) and an all-zero one (``zero_beats`` saturates)."""
    tb = MonitorTB(dut)
    await tb.start(idle=0.05, data_backpressure=0.05, stats_backpressure=0.3)
    beats = -(-tb.max_tile_elems // tb.lanes)
    tb.tile(beats, density=0.5)
    if tb.args.get("overflow", False):
        tb.tile(2 * beats + 1, density=0.9)
        tb.tile(2 * beats + 1, density=1.0)
        tb.tile(2 * beats + 1, density=0.0)
    tb.tile(1)
    await tb.finish()


@cocotb.test()
async def reset_mid_tile(dut):
    """Reset in the middle of a tile: nothing of it is reported; the next tile is clean."""
    tb = MonitorTB(dut)
    await tb.start()
    tb.tile(3)
    first_tile = tb.tiles.pop()
    partial = [Beat(pack_beat(row, tb.width), 0) for row in np.tile(first_tile, (4, 1))]
    tb.src.clear()
    tb.src.send(partial)
    await tb.bench.wait_until(lambda: len(tb.src.sent) >= len(partial) // 2, timeout=2000,
                              what="half of an unfinished tile")
    passed = list(tb.data.beats)
    check_sequence("m_axis before reset", passed, tb.src.sent[:len(passed)])
    tb.stop()
    await tb.start()
    tb.tile(5)
    await tb.finish()


@cocotb.test(skip=test_args().get("beats") is None)
async def throughput(dut):
    """Benchmark (``spartan bench monitor``): input always valid, outputs always ready; the
    cycles from the first to the last beat per density, written to ``throughput.json``."""
    import json
    tb = MonitorTB(dut)
    await tb.start(idle=0.0, data_backpressure=0.0, stats_backpressure=0.0)
    rows = []
    for density in tb.args["densities"]:
        beats = tb.args["beats"]
        start = len(tb.src.sent)
        for _ in range(beats // 16):
            tb.tile(16, density)
        await tb.finish()
        cycles = tb.src.sent_cycles[-1] - tb.src.sent_cycles[start] + 1
        rows.append({"density": density, "beats": len(tb.src.sent) - start, "cycles": cycles,
                     "beats_per_cycle": (len(tb.src.sent) - start) / cycles})
    with open("throughput.json", "w") as f:
        json.dump({"rows": rows}, f)


# --- the verification profile (verif/tb/profile.py) ------------------------------------------

PROFILE = Profile(
    stimulus=("random_traffic", {"tiles": 12, "max_beats": 8}),
    mutants=24,
    mutant_tests=(None, {"tiles": 40, "max_beats": 16, "overflow": True}),
    fuzz_examples=30,
    coverage_waivers=(
        Waiver(SATURATE, lambda p: p["max_tile_elems"] > 4096,
               "counter saturation: needs a tile of more than max_tile_elems elements (here over "
               "4096); big_tiles sends such tiles where max_tile_elems <= 4096 and covers this arm "
               "there"),
        Waiver(SATURATE, lambda p: (p["lanes"], p["width"], p["max_tile_elems"]) == (4, 8, 256),
               "the configuration of the waveform test alone (test_never_throttles_in_waveform: "
               "random_traffic and stats_held, short tiles); the regression's configurations "
               "cover saturation"),
    ),
)
