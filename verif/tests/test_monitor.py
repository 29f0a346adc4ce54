"""Sparsity monitor: parameter checks, amaranth.sim unit tests, and the cocotb testbench in
Verilator and Icarus over a covering set of configurations."""

import random

import numpy as np
import pytest
from amaranth.hdl import Shape

from spartan_rtl import runner
from spartan_rtl.golden.formats import random_elements
from spartan_rtl.golden.monitor import TileStats, tile_stats
from spartan_rtl.hw.monitor import BLOCK, SparsityMonitor
from verif.tests.amsim import get_stream, put_stream, simulate
from verif.tests.helpers import config_id

# lanes {1,4,8,16} x width {8,16,32} x both formats, covered pairwise rather than in full.
CONFIGS = [
    dict(lanes=1, width=8, number_format="int", max_tile_elems=300),
    dict(lanes=4, width=16, number_format="fp", max_tile_elems=1000),
    dict(lanes=8, width=8, number_format="int"),  # the defaults, max_tile_elems 65536
    dict(lanes=16, width=32, number_format="fp", max_tile_elems=4096),
    dict(lanes=8, width=32, number_format="int", max_tile_elems=250),
    dict(lanes=16, width=16, number_format="int", max_tile_elems=2048),
    dict(lanes=4, width=8, number_format="fp", max_tile_elems=64),
]


# --- parameters -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, message", [
    (dict(lanes=3), ValueError, "lanes must be a power of two from 1 to 64, not 3"),
    (dict(lanes=128), ValueError, "lanes must be a power of two from 1 to 64, not 128"),
    (dict(lanes="8"), TypeError, "lanes must be a power of two from 1 to 64, not '8'"),
    (dict(lanes=True), TypeError, "lanes must be a power of two from 1 to 64, not True"),
    (dict(width=0), ValueError, "width must be an integer from 1 to 64, not 0"),
    (dict(width=65), ValueError, "width must be an integer from 1 to 64, not 65"),
    (dict(number_format="bf16"), ValueError,
     "number_format must be one of 'int' or 'fp', not 'bf16'"),
    (dict(number_format="fp", width=1), ValueError,
     "width must be at least 2 for number_format 'fp', not 1"),
    (dict(max_tile_elems=0), ValueError,
     "max_tile_elems must be an integer from 1 to 4294967296, not 0"),
])
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error) as info:
        SparsityMonitor(**kwargs)
    assert str(info.value) == message


def test_properties():
    monitor = SparsityMonitor(lanes=4, width=16, number_format="fp", max_tile_elems=100)
    assert (monitor.lanes, monitor.width, monitor.number_format, monitor.max_tile_elems) == \
        (4, 16, "fp", 100)
    with pytest.raises(AttributeError):
        monitor.lanes = 8


def test_stats_width_holds_max_tile():
    for lanes, max_elems in ((1, 1), (8, 65536), (16, 1000), (64, 2 ** 32)):
        layout = BLOCK.build(lanes=lanes, width=8, number_format="int",
                             max_tile_elems=max_elems).m_axis_stats.payload.shape()["data"].shape
        assert (1 << Shape.cast(layout["nnz"].shape).width) - 1 >= max_elems
        assert (1 << Shape.cast(layout["zero_beats"].shape).width) - 1 >= -(-max_elems // lanes)


# --- golden model, on cases worked out by hand from docs/interfaces.md#monitor ----------------

def test_golden_hand_worked():
    tile = [[0, 1, 0, 0], [0, 0, 0, 0], [5, 5, 5, 5]]
    # nnz 5, elems 12: 5*256 = 1280 <= 107*12 = 1284 -> sparse; 106*12 = 1272 -> dense.
    assert tile_stats(tile, 107, width=8, number_format="int") == TileStats(5, 12, 1, 1)
    assert tile_stats(tile, 106, width=8, number_format="int") == TileStats(5, 12, 1, 0)
    # fp16: -0.0 (0x8000) and +0.0 are zero, 0x8001 (a negative subnormal) is not.
    assert tile_stats([[0x8000, 0x0000, 0x8001, 0x3C00]], 0, width=16,
                      number_format="fp") == TileStats(2, 4, 0, 0)
    # int: 0x8000 is a nonzero integer.
    assert tile_stats([[0x8000, 0, 0, 0]], 255, width=16, number_format="int").nnz == 1
    # Threshold 0: sparse only when there is no nonzero at all.
    assert tile_stats([[0, 0]], 0, width=8, number_format="int").sparse == 1
    # max_tile_elems 10, lanes 4: counts are 4 bits (<= 15), zero_beats 2 bits (<= 3).
    assert tile_stats(np.zeros((5, 4)), 0, width=8, number_format="int",
                      max_tile_elems=10) == TileStats(0, 15, 3, 1)


# --- amaranth.sim: the component before Verilog --------------------------------------------

@pytest.mark.parametrize("config", CONFIGS[:4], ids=config_id)
def test_amaranth_sim(config):
    rng = random.Random(1)
    np_rng = np.random.default_rng(1)
    dut = SparsityMonitor(**config)
    lanes, width, fmt = config["lanes"], config["width"], config["number_format"]
    tiles = [random_elements(np_rng, (rng.randint(1, 6), lanes), width, rng.random(), fmt)
             for _ in range(12)]
    beats = [{"data": [int(x) for x in row], "last": int(i == len(t) - 1)}
             for t in tiles for i, row in enumerate(t)]
    threshold = 77
    result = {}

    async def source(ctx):
        ctx.set(dut.threshold, threshold)
        await put_stream(ctx, dut.s_axis, beats, rng)

    async def data_sink(ctx):
        result["data"] = await get_stream(ctx, dut.m_axis, len(beats), rng)

    async def stats_sink(ctx):
        result["stats"] = await get_stream(ctx, dut.m_axis_stats, len(tiles), rng, 0.6)

    simulate(dut, source, data_sink, stats_sink)
    assert [{"data": list(b.data), "last": b.last} for b in result["data"]] == beats
    got = [(s.data.nnz, s.data.elems, s.data.zero_beats, s.data.sparse) for s in result["stats"]]
    want = []
    for t in tiles:
        s = tile_stats(t, threshold, width=width, number_format=fmt,
                       max_tile_elems=config.get("max_tile_elems", 65536))
        want.append((s.nnz, s.elems, s.zero_beats, s.sparse))
    assert got == want


@pytest.mark.parametrize("lanes, documented", [(1, None), (8, 6), (16, 6), (64, None)])
def test_stats_latency(lanes, documented):
    """Into an idle monitor, outputs always ready: a tile's record transfers
    ``stats_latency_cycles`` edges (the manifest's; docs/monitor.md gives 6 for 8 and 16 lanes)
    after the tile's last beat, and every beat passes on the edge it is offered (latency 0)."""
    dut = SparsityMonitor(lanes=lanes, width=8, number_format="int", max_tile_elems=4096)
    info = BLOCK.info(dut)
    beats = 3
    edges = {}

    async def bench(ctx):
        ctx.set(dut.m_axis.ready, 1)
        ctx.set(dut.m_axis_stats.ready, 1)
        await ctx.tick().repeat(2)
        sent, edge = 0, 0
        while "stats" not in edges:
            ctx.set(dut.s_axis.valid, sent < beats)
            ctx.set(dut.s_axis.payload, {"data": [sent] * lanes, "last": sent == beats - 1})
            _, _, ready, out_valid, stats_valid = await ctx.tick().sample(
                dut.s_axis.ready, dut.m_axis.valid, dut.m_axis_stats.valid)
            edge += 1
            if sent < beats:
                assert ready and out_valid, f"beat {sent} not passed on edge {edge}"
                sent += 1
                if sent == beats:
                    edges["last_in"] = edge
            if stats_valid:
                edges["stats"] = edge
            assert edge < 50, f"no record: {edges}"

    simulate(dut, bench)
    assert info["latency_cycles"] == 0
    assert edges["stats"] - edges["last_in"] == info["stats_latency_cycles"]
    if documented is not None:
        assert info["stats_latency_cycles"] == documented


# --- cocotb in Verilator and Icarus --------------------------------------------------------

@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_monitor(config, sim):
    max_elems = config.get("max_tile_elems", 65536)
    # Tiles longer than max_tile_elems saturate the counters; worth the cycles when short.
    overflow = max_elems <= 4096
    runner.run("monitor", "spartan_rtl.tb.tb_monitor", config, sim=sim, name="regression",
               args={"tiles": 40, "max_beats": 16, "overflow": overflow})


# --- the waveform: "never throttles", checked cycle by cycle --------------------------------

@pytest.mark.parametrize("sim", runner.sims())
def test_never_throttles_in_waveform(sim):
    """From the VCD: ``s_axis_tready`` is high in every cycle where ``m_axis_tready`` is high
    and the statistics output has room. Room is reconstructed from the ports alone: records
    waiting = tiles whose last beat went in - records taken from ``m_axis_stats``."""
    from spartan_rtl.vcd import sample_at_rising_edges

    config = dict(lanes=4, width=8, number_format="int", max_tile_elems=256)
    test_dir = runner.run("monitor", "spartan_rtl.tb.tb_monitor", config, sim=sim, name="vcd",
                          waves=True, testcase=["random_traffic", "stats_held"],
                          args={"tiles": 60, "max_beats": 6})
    names = ["s_axis_tvalid", "s_axis_tready", "s_axis_tlast", "m_axis_tready",
             "m_axis_stats_tvalid", "m_axis_stats_tready", "rst"]
    w = sample_at_rising_edges(test_dir / "dump.vcd", names)
    depth = 2  # spartan_rtl.hw.monitor.STATS_DEPTH, as the manifest states it
    waiting, checked, full = 0, 0, 0
    for k in range(len(w["_edges"])):
        v = {n: w[n][k] for n in names}
        if v["rst"] != 0:
            waiting = 0
            continue
        if v["m_axis_tready"] and waiting < depth:
            checked += 1
            assert v["s_axis_tready"] == 1, f"s_axis throttled at {w['_edges'][k]} ps"
        full += waiting >= depth
        waiting += bool(v["s_axis_tvalid"] and v["s_axis_tready"] and v["s_axis_tlast"])
        waiting -= bool(v["m_axis_stats_tvalid"] and v["m_axis_stats_tready"])
    assert checked > 200 and full > 10, (checked, full)
