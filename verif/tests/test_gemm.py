"""Tile sparse GEMM: parameter checks, golden-model self-checks, amaranth.sim unit tests, and
the cocotb testbench in Verilator and Icarus over a covering set of configurations."""

import random

import numpy as np
import pytest

from spartan_rtl import runner
from spartan_rtl.golden.compactor import encode_tile
from spartan_rtl.golden.formats import from_signed, random_elements, to_signed, unpack_beat
from spartan_rtl.golden.gemm import (
    GemmTiming,
    compute_bound_cycles,
    gemm,
    is_compute_bound,
    row_passes,
    simulate,
)
from spartan_rtl.hw.gemm import BLOCK, SparseGemm
from verif.tests.amsim import put_stream
from verif.tests.amsim import simulate as am_simulate
from verif.tests.helpers import config_id

# (k_par, n_par, K, N, width, acc_width) varied together with lanes, signedness and banking.
CONFIGS = [
    dict(),  # the defaults: lanes 8, width 8, signed, acc 32, K=N=64, k_par 1, n_par 64
    # the broadcast datapath (k_par 1) with column groups and a row of 6 beats, and dense-only
    dict(lanes=4, width=6, signed=False, acc_width=12, k=24, n=16, k_par=1, n_par=8),
    dict(lanes=2, width=8, signed=True, acc_width=20, k=16, n=8, k_par=1, n_par=8, sparse=False),
    dict(lanes=4, width=8, signed=True, acc_width=16, k=32, n=16, k_par=8, n_par=8, b_banks=8),
    dict(lanes=4, width=6, signed=False, acc_width=12, k=24, n=8, k_par=2, n_par=4, b_banks=2),
    dict(lanes=2, width=16, signed=True, acc_width=40, k=16, n=32, k_par=16, n_par=2, b_banks=4),
    dict(lanes=8, width=3, signed=False, acc_width=64, k=16, n=16, k_par=2, n_par=8,
         sparse=False),
    # ECP5 MULT18X18D slices (through their simulation model): the widest signed operands,
    # and unsigned ones with sums narrower than a product (wrapping)
    dict(lanes=4, width=18, signed=True, acc_width=40, k=16, n=16, n_par=8, multiplier="ecp5"),
    dict(lanes=4, width=6, signed=False, acc_width=10, k=24, n=16, n_par=8, sparse=False,
         multiplier="ecp5"),
    # K = 128: the loader counts a row's nonzeros in 8 chunks of 16 mask bits
    dict(lanes=8, width=8, signed=True, acc_width=32, k=128, n=16, n_par=16),
    # two weight sets: each tile its own chunk, loaded while the tile before computes
    dict(lanes=4, width=6, signed=True, acc_width=14, k=24, n=16, n_par=8, weight_sets=2),
    dict(lanes=4, width=8, signed=False, acc_width=20, k=16, n=16, n_par=16, sparse=False,
         weight_sets=2),
]


# --- parameters -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, message", [
    (dict(lanes=3), ValueError, "lanes must be a power of two from 1 to 64, not 3"),
    (dict(width=0), ValueError, "width must be an integer from 1 to 32, not 0"),
    (dict(width=8.0), TypeError, "width must be an integer from 1 to 32, not 8.0"),
    (dict(signed=1), TypeError, "signed must be true or false, not 1"),
    (dict(acc_width=65), ValueError, "acc_width must be an integer from 1 to 64, not 65"),
    (dict(k=60), ValueError, "k must be a multiple of lanes (8), not 60"),
    (dict(n=12), ValueError, "n must be a multiple of lanes (8), not 12"),
    (dict(k_par=3), ValueError, "k_par must be a power of two from 1 to 64, not 3"),
    (dict(k=8, k_par=16), ValueError, "k_par must be at most k (8), not 16"),
    (dict(n_par=4), ValueError, "n_par must be a multiple of lanes (8) dividing n (64), not 4"),
    (dict(n=48, n_par=32), ValueError,
     "n_par must be a multiple of lanes (8) dividing n (48), not 32"),
    (dict(k_par=4, b_banks=8), ValueError,
     "b_banks must be a power of two from 1 to k_par (4), not 8"),
    (dict(b_banks=3), ValueError, "b_banks must be a power of two from 1 to 64, not 3"),
    (dict(weight_sets=3), ValueError, "weight_sets must be an integer from 1 to 2, not 3"),
    (dict(k_par=2, weight_sets=2), ValueError,
     "weight_sets=2 needs k_par 1 (the broadcast datapath), not 2"),
    (dict(multiplier="dsp"), ValueError,
     "multiplier must be one of 'inferred' or 'ecp5', not 'dsp'"),
    (dict(multiplier="ecp5", k_par=2), ValueError,
     "multiplier=ecp5 needs k_par 1 (the broadcast datapath), not 2"),
    (dict(multiplier="ecp5", width=19), ValueError,
     "width must be at most 18 with multiplier=ecp5, not 19"),
])
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error) as info:
        SparseGemm(**kwargs)
    assert str(info.value) == message


def test_properties():
    g = SparseGemm(lanes=4, width=6, signed=False, acc_width=12, k=24, n=8, k_par=8, n_par=4,
                   b_banks=2)
    assert (g.lanes, g.width, g.signed, g.acc_width, g.k, g.n, g.k_par, g.n_par, g.b_banks,
            g.copies) == (4, 6, False, 12, 24, 8, 8, 4, 2, 4)
    with pytest.raises(AttributeError):
        g.k_par = 2


# --- golden model self-checks ------------------------------------------------------------

@pytest.mark.parametrize("signed", [True, False])
def test_golden_gemm_wraps(signed):
    """Against plain Python integers, element by element, with sums that overflow."""
    rng = np.random.default_rng(3)
    width, acc = 8, 13
    a = random_elements(rng, (5, 24), width, 0.7)
    b = random_elements(rng, (24, 6), width, 1.0)
    c = gemm(a, b, width=width, signed=signed, acc_width=acc)
    conv = (lambda r: int(to_signed(r, width))) if signed else int
    for i in range(5):
        for j in range(6):
            exact = sum(conv(a[i, k]) * conv(b[k, j]) for k in range(24))
            assert int(c[i, j]) == exact % (1 << acc)
    # 64-bit elements take the exact (Python integer) path.
    big = np.array([[(1 << 64) - 1, 1 << 63]], dtype=np.uint64)
    col = np.array([[(1 << 64) - 1], [3]], dtype=np.uint64)
    want = ((-1 * -1 + -(1 << 63) * 3) if signed else ((2 ** 64 - 1) ** 2 + 3 * 2 ** 63)) % 2 ** 64
    assert int(gemm(big, col, width=64, signed=signed, acc_width=64)[0, 0]) == want


def test_row_passes():
    t = GemmTiming(lanes=8, k=64, n=64, k_par=8, n_par=8, b_banks=8)
    assert row_passes(0, t) == (1, 0)
    assert row_passes((1 << 64) - 1, t) == (64, 0)          # dense: one pass per group
    same_bank = sum(1 << (8 * i) for i in range(8))        # 8 nonzeros, all in bank 0
    assert row_passes(same_bank, t) == (8 * 8, 8 * 7)
    replicated = GemmTiming(lanes=8, k=64, n=64, k_par=8, n_par=8, b_banks=1)
    assert row_passes(same_bank, replicated) == (8, 0)
    two_copies = GemmTiming(lanes=8, k=64, n=64, k_par=8, n_par=8, b_banks=4)
    assert row_passes(same_bank, two_copies) == (8 * 4, 8 * 3)   # 2 copies: ceil(8/2) passes


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_cycle_model_closed_form(config):
    """The stepped model equals the design document's closed formula on compute-bound tiles
    (dense rows, and rows with enough nonzeros that loads and output keep up)."""
    p = BLOCK.resolve(config)
    t = GemmTiming.of(p)
    rng = np.random.default_rng(5)
    dense = (1 << p["k"]) - 1
    checked = 0
    tiles = [[dense] * rows for rows in (1, 2, 17, 64)]
    for density in (0.3, 0.6, 0.9):
        for _ in range(10):
            tiles.append([int(sum(1 << int(j)
                                  for j in np.flatnonzero(rng.random(p["k"]) < density)))
                          for _ in range(rng.integers(1, 10))])
    for masks in tiles:
        if is_compute_bound(masks, t):
            assert simulate([masks], t)[0].cycles == compute_bound_cycles(masks, t)
            checked += 1
        else:   # outside the premise the formula is a lower bound
            assert simulate([masks], t)[0].cycles >= compute_bound_cycles(masks, t)
    assert checked >= 1


def test_cycle_model_zero_rows_output_bound():
    """All-zero rows issue in one cycle each but their C rows still take n/lanes beats: a tile
    of them is paced by the output, exactly one beat per cycle."""
    t = GemmTiming(lanes=8, k=64, n=64, k_par=4, n_par=16)
    r = simulate([[0] * 20], t)[0]
    assert r.passes == 20 and r.empty_rows == 20 and r.conflict_cycles == 0
    assert r.cycles == 1 + 1 + t.issue_to_push + 20 * 8   # mask, issue, pipeline, 160 beats


# --- amaranth.sim: the component before Verilog --------------------------------------------

def _am_run(config, tiles, b_raw, rng, *, idle=0.3, backpressure=0.3):
    """``b_raw``: one ``B``, complete before the tiles start; or (two weight sets) a list of
    chunks, sent on their own stream as the tiles are, one for each tile."""
    dut = SparseGemm(**config)
    chunks = b_raw if isinstance(b_raw, list) else [b_raw]
    lanes, width, n = dut.lanes, dut.width, dut.n
    result = {}

    def ints(values):
        return [int(x) for x in values]

    encoded = [encode_tile(t, lanes=lanes, width=width, number_format="int",
                           bypass=not dut.sparse) for t in tiles]
    async def b_source(ctx):
        beats = []
        for chunk in chunks:
            flat = chunk.reshape(-1)
            count = len(flat) // lanes
            beats += [{"data": ints(flat[i * lanes:(i + 1) * lanes]), "last": int(i == count - 1)}
                      for i in range(count)]
        await put_stream(ctx, dut.s_axis_b, beats, rng, idle)
        result["b_done"] = True

    async def mask_source(ctx):
        while "b_done" not in result and len(chunks) == 1:
            await ctx.tick()
        await put_stream(ctx, dut.s_axis_a_mask, [
            {"data": mask, "last": last} for e in encoded for mask, last in e.masks], rng, idle)

    async def data_source(ctx):
        await put_stream(ctx, dut.s_axis_a_data, [
            {"data": ints(unpack_beat(d, lanes, width)), "last": last}
            for e in encoded for d, last in e.data], rng, idle)

    async def c_sink(ctx):
        total = sum(len(t) for t in tiles) * n // lanes
        got, conflicts = [], 0
        while len(got) < total:
            ready = rng.random() >= backpressure
            ctx.set(dut.m_axis_c.ready, ready)
            _, _, valid, payload, conflict = await ctx.tick().sample(
                dut.m_axis_c.valid, dut.m_axis_c.payload, dut.stat_conflict)
            conflicts += conflict
            if ready and valid:
                got.append(([int(x) for x in payload.data], payload.last))
        result["c"], result["conflicts"] = got, conflicts

    am_simulate(dut, b_source, mask_source, data_source, c_sink)
    return dut, result


def _c_beats(p, tiles, b_per_tile):
    """The golden ``C`` beats (lanes, ``tlast``) of ``tiles``, each times its ``B``."""
    want, lanes = [], p["lanes"]
    for t, b_raw in zip(tiles, b_per_tile):
        flat = gemm(t, b_raw, width=p["width"], signed=p["signed"],
                    acc_width=p["acc_width"]).reshape(-1)
        count = len(flat) // lanes
        want += [([int(x) for x in flat[i * lanes:(i + 1) * lanes]], int(i == count - 1))
                 for i in range(count)]
    return want


@pytest.mark.parametrize("config", [
    dict(lanes=4, width=8, signed=True, acc_width=20, k=16, n=16, k_par=4, n_par=8, b_banks=2),
    dict(lanes=2, width=5, signed=False, acc_width=9, k=12, n=4, k_par=8, n_par=2, b_banks=8),
    dict(lanes=4, width=4, signed=True, acc_width=7, k=8, n=8, k_par=1, n_par=8, b_banks=1),
    dict(lanes=4, width=6, signed=False, acc_width=12, k=24, n=16, k_par=1, n_par=8),
    dict(lanes=2, width=5, signed=True, acc_width=9, k=6, n=4, k_par=1, n_par=2),
    dict(lanes=4, width=8, signed=True, acc_width=20, k=16, n=16, k_par=1, n_par=8,
         sparse=False),
    dict(lanes=4, width=8, signed=True, acc_width=20, k=16, n=16, k_par=4, n_par=8, b_banks=2,
         sparse=False),
    # K over 64: the loader counts a row's nonzeros in 8 chunks of 13 mask bits, the last 9
    dict(lanes=4, width=4, signed=True, acc_width=14, k=100, n=8, k_par=1, n_par=8),
], ids=config_id)
def test_amaranth_sim(config):
    rng = random.Random(2)
    np_rng = np.random.default_rng(2)
    p = BLOCK.resolve(config)
    b_raw = random_elements(np_rng, (p["k"], p["n"]), p["width"], 0.9)
    tiles = [random_elements(np_rng, (m, p["k"]), p["width"], d)
             for m, d in ((5, 0.3), (3, 0.0), (7, 1.0), (6, 0.5), (1, 0.1), (4, 0.7))]
    _, result = _am_run(config, tiles, b_raw, rng)
    assert result["c"] == _c_beats(p, tiles, [b_raw] * len(tiles))
    lanes = p["lanes"]
    timing = GemmTiming.of(p)
    masks = [encode_tile(t, lanes=lanes, width=p["width"], number_format="int",
                         bypass=not p["sparse"]).masks for t in tiles]
    assert result["conflicts"] == sum(row_passes(m, timing)[1] for ms in masks for m, _ in ms)


@pytest.mark.parametrize("config", [
    dict(lanes=4, width=6, signed=True, acc_width=14, k=24, n=16, n_par=8, weight_sets=2),
    dict(lanes=2, width=5, signed=False, acc_width=9, k=6, n=4, n_par=2, weight_sets=2),
    dict(lanes=4, width=8, signed=True, acc_width=20, k=16, n=16, n_par=8, sparse=False,
         weight_sets=2),
], ids=config_id)
@pytest.mark.parametrize("idle", [0.0, 0.4])
def test_amaranth_sim_weight_sets(config, idle):
    """Two weight sets: tile ``t`` multiplies by chunk ``t`` whatever the timing; the chunks
    and the tiles (short and long, empty and dense) race each other on their own streams."""
    rng = random.Random(3)
    np_rng = np.random.default_rng(3)
    p = BLOCK.resolve(config)
    tiles = [random_elements(np_rng, (m, p["k"]), p["width"], d)
             for m, d in ((1, 0.3), (9, 1.0), (2, 0.0), (12, 0.5), (1, 1.0), (3, 0.1), (7, 0.7))]
    chunks = [random_elements(np_rng, (p["k"], p["n"]), p["width"], 0.9) for _ in tiles]
    _, result = _am_run(config, tiles, chunks, rng, idle=idle, backpressure=idle)
    assert result["c"] == _c_beats(p, tiles, chunks)


def test_amaranth_sim_signed_extremes():
    """Most negative times most negative, summed over K, wraps as the golden model says."""
    config = dict(lanes=4, width=8, signed=True, acc_width=16, k=8, n=4, k_par=4, n_par=4)
    b_raw = from_signed(np.full((8, 4), -128), 8)
    a_raw = from_signed(np.array([[-128] * 8, [127] * 8, [-1] + [0] * 7]), 8)
    _, result = _am_run(config, [a_raw], b_raw, random.Random(4))
    c = gemm(a_raw, b_raw, width=8, signed=True, acc_width=16)
    assert int(c[0, 0]) == (8 * 128 * 128) % 65536 == 0   # wraps to exactly zero
    assert [r[0] for r in result["c"]] == [[int(x) for x in row] for row in c]


# --- cocotb in Verilator and Icarus --------------------------------------------------------

@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_gemm(config, sim):
    sets = config.get("weight_sets", 1) > 1
    runner.run("gemm", "spartan_rtl.tb.tb_gemm", config, sim=sim, name="regression",
               testcase=["random_traffic", "edge_tiles", "alternating_rows", "reset_mid_tile",
                         "timing"] + (["hidden_loads"] if sets else []),
               args={"tiles": 12, "max_rows": 12, "rows": 9, "long_rows": 70,
                     **({"hidden": [1.0, 0.5, 0.3]} if sets else {})})


def test_packed_temporaries_build_in_verilator():
    """At this size Yosys packs the row loader's temporaries into one vector whose bits feed
    each other; Verilator calls that a circular path (UNOPTFLAT) and refused to build until
    spartan_rtl/lint_waivers.vlt waived it on temporaries. The design must build and pass."""
    runner.run("gemm", "spartan_rtl.tb.tb_gemm", dict(lanes=2, width=5, k=6, n=8, n_par=8),
               sim="verilator", name="packed_temporaries", testcase="random_traffic")


def test_manifest():
    """The manifest describes every stream and every statistics port of the component."""
    from spartan_rtl.hw.emit import elaborate, manifest
    params, inner, top = elaborate(BLOCK, dict(lanes=4, k=16, n=8, k_par=8, n_par=4,
                                               b_banks=2, acc_width=20))
    doc, _ = manifest(BLOCK, params, inner, top)
    streams = doc["streams"]
    assert set(streams) == {"s_axis_b", "s_axis_a_mask", "s_axis_a_data", "m_axis_c"}
    assert streams["m_axis_c"]["fields"][3] == {"name": "lane3", "lsb": 60, "width": 20}
    assert streams["s_axis_a_mask"]["beat_bits"] == 16
    ports = {p["name"] for p in doc["ports"]}
    assert set(doc["stats_ports"]) == {p for p in ports if p.startswith(("stat_", "err_"))}
    assert doc["weight_buffer"] == {"memories": 8, "banks": 2, "copies": 4, "sets": 1,
                                    "word_bits": 32,
                                    "bits": 4 * 16 * 8 * 8}
    assert doc["macs_per_cycle"] == 32


def test_wide_selects_elaborate_at_any_k():
    """k up to 1024 is in the documented range: the one-hot selects are trees, so a 1024-way
    select converts to RTLIL without exhausting Python's recursion limit (a chain of ORs did at
    k >= 320 in the replicated datapath), and the broadcast GEMM at k = 1024 elaborates."""
    from amaranth.back import rtlil
    from amaranth.hdl import Module, Signal

    from spartan_rtl.hw.elements import select_onehot
    from spartan_rtl.hw.emit import elaborate

    m = Module()
    hits, out = Signal(1024), Signal(10)
    m.d.comb += out.eq(select_onehot([j for j in range(1024)], list(hits), 10))
    assert "cell" in rtlil.convert(m, ports=[hits, out])
    _, _, top = elaborate(BLOCK, dict(k=1024))
    assert "module" in rtlil.convert(top, name="g", emit_src=False)
