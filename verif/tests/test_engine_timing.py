"""The layer engine's cycle model (golden/engine_timing.py): unit checks of its parts against
golden/gemm.py and by counting, the engine figures of ``spartan estimate``, and the model
against the RTL (verif/tb/tb_engine_timing.py) on a handful of layers in Verilator.

The full error table (many more layers, both configurations) is the developer flow
``python -m verif.flows.engine_timing``; docs/engine.md, "Cycle model", quotes it.
"""

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from spartan_rtl import estimate as est
from spartan_rtl.golden import engine as golden
from spartan_rtl.golden import engine_timing as et
from spartan_rtl.golden import traces
from spartan_rtl.golden.gemm import compute_bound_cycles, simulate
from verif.flows import ROOT

TRACE = sorted((ROOT / "data" / "traces").glob("*.npz"))[-1]
#: The engine testbench's small configuration (verif/tests/test_engine.py: the build is
#: shared) and the defaults.
SMALL = dict(lanes=4, width=8, data_width=32, k=16, n=8, n_par=8, acc_rows=16, max_burst=4,
             table_depth=64, max_tile_elems=4096)
T_SMALL = et.EngineTiming.of(SMALL)
T_DEFAULT = et.EngineTiming()


def _mask(rng, shape, density):
    return rng.random(shape) < density


# --- words: exact, by walking the engine's loops ----------------------------------------------

def _words_by_walking(op, M, K, N, t):
    """A, B, C words from the read and write commands of every step, as the sequencer issues
    them (hw/engine.py): each valid row's words inside the matrix."""
    Mo, Ki, No = et.dims(op, M, K, N)
    L, bus = t.lanes, t.bus_bytes
    a = b = c = 0
    for n0 in range(0, No, t.n):
        nv = min(t.n, No - n0)
        for m0 in range(0, Mo, t.acc_rows):
            mv = min(t.acc_rows, Mo - m0)
            for k0 in range(0, Ki, t.k):
                kv = min(t.k, Ki - k0)
                b += nv * -(-kv // L) if op == 1 else kv * -(-nv // L)
                a += kv * -(-mv // L) if op == 2 else mv * -(-kv // L)
            c += mv * -(-(nv * t.acc_width // 8) // bus)
    return a, b, c


@pytest.mark.parametrize("t", [T_SMALL, T_DEFAULT], ids=["small", "defaults"])
def test_words_are_the_commands_words(t):
    rng = np.random.default_rng(3)
    for _ in range(40):
        op = int(rng.integers(3))
        M, K, N = (int(x) for x in rng.integers(1, 300, 3))
        w = et.words(op, M, K, N, t)
        assert (w["A_WORDS"], w["B_WORDS"], w["C_WORDS"]) == _words_by_walking(op, M, K, N, t)
        assert w["A_BYTES"] == w["A_WORDS"] * t.data_width // 8


def test_row_nnz_matches_the_engines_tiles():
    rng = np.random.default_rng(4)
    for op in range(3):
        M, K, N = 37, 41, 19
        sa, _, _ = golden.operand_shapes(op, M, K, N)
        a = np.where(_mask(rng, sa, 0.4), 3, 0).astype(np.uint64)
        nnz = et.row_nnz(op, a, T_SMALL)
        for _, (nc, mt, kc), block in golden.tile_blocks(op, a, SMALL, M, K, N):
            rows = slice(mt * 16, mt * 16 + block.shape[0])
            assert (nnz[rows, kc] == (block != 0).sum(axis=1)).all()


# --- one tile: golden/gemm.py's rules ---------------------------------------------------------

@pytest.mark.parametrize("t", [T_SMALL, T_DEFAULT], ids=["small", "defaults"])
def test_dense_tile_is_the_gemm_closed_form(t):
    """Dense: the first row's mask after its beats and the compactor, then the GEMM's closed
    form (golden/gemm.py compute_bound_cycles)."""
    for rows in (1, 2, 7, t.acc_rows):
        prof = et.tile_profile(np.zeros((1, rows)), t, sparse=False)
        first_mask = t.beats_per_row - 1 + t.mask_latency
        gemm = compute_bound_cycles([(1 << t.k) - 1] * rows, t.gemm)
        assert prof["c_last"][0] == first_mask + gemm - 1


@pytest.mark.parametrize("t", [T_SMALL, T_DEFAULT], ids=["small", "defaults"])
def test_sparse_tile_is_the_gemm_simulation(t):
    """Sparse rows (the first nonzero, so the input's pace never shows): the same cycles as
    golden/gemm.py's step-by-step simulation with every mask available, from the first
    mask on; the per-row closed form beyond the first rows included."""
    rng = np.random.default_rng(5)
    for density in (0.02, 0.1, 0.3, 0.6, 0.95):
        bits = _mask(rng, (t.acc_rows, t.k), density)
        bits[0, 0] = True
        nnz = bits.sum(axis=1)
        masks = [int("".join("1" if x else "0" for x in row[::-1]), 2) for row in bits]
        prof = et.tile_profile(nnz[None, :], t, sparse=True)
        first_mask = t.beats_per_row - 1 + t.mask_latency
        assert prof["c_last"][0] == first_mask + simulate([masks], t.gemm)[0].cycles - 1


# --- the whole layer --------------------------------------------------------------------------

@pytest.mark.parametrize("t", [T_SMALL, T_DEFAULT], ids=["small", "defaults"])
def test_parts_add_up_and_modes(t):
    rng = np.random.default_rng(6)
    parts = ("checks", "start", "b_load", "a_wait", "tile", "turnaround", "drain")
    for op in range(3):
        for density in (0.05, 0.5):
            M, K, N = (int(x) for x in rng.integers(1, 3 * t.k, 3))
            sa, _, _ = golden.operand_shapes(op, M, K, N)
            a = _mask(rng, sa, density)
            dense = et.layer_cycles(op, a, M, K, N, t, mode=1, per_step=True)
            sparse = et.layer_cycles(op, a, M, K, N, t, mode=2, per_step=True)
            for r in (dense, sparse):
                assert sum(r[p] for p in parts) == r["layer_cycles"]
                assert r["tile"] == r["tile_passes"] + r["tile_other"]
                s = r["per_step"]
                assert s["b_first"][0] == r["checks"] + r["start"]
                assert s["c_last"][-1] + 1 + r["drain"] == r["layer_cycles"]
                span = s["b_last"] - s["b_first"] + 1
                if op == 1:     # Wᵀ, three beats in four: a chunk that follows the one
                    # before in the cadence may take a cycle more
                    assert set(span) <= {t.b_beats + (t.b_beats - 1) // 3 + e for e in (0, 1)}
                else:
                    assert (span == t.b_beats).all()
                # Two weight sets: chunk s loads once C tile s-2 has left, while tile s-1
                # computes; a tile's A follows its chunk.
                assert (s["b_first"][2:] > s["c_last"][:-2]).all()
                assert (s["b_first"][1:] > s["b_last"][:-1]).all()
                assert (s["c_last"] > s["a_first"]).all() and (s["a_first"] > s["b_last"]).all()
                assert r["b_load"] >= span[0] and r["turnaround"] == 0
            assert dense["tiles_dense"] == sparse["tiles_sparse"] == dense["steps"]
            assert {w: dense[w] for w in ("A_WORDS", "B_WORDS", "C_WORDS")} == \
                {w: sparse[w] for w in ("A_WORDS", "B_WORDS", "C_WORDS")}
            assert sparse["tile_passes"] < dense["tile_passes"]
            per_tile = [True, False] * dense["steps"]
            mixed = et.layer_cycles(op, a, M, K, N, t, modes_per_tile=per_tile[:dense["steps"]])
            assert mixed["tiles_sparse"] == -(-dense["steps"] // 2)


def _ones_layer(op, M, K, N, t, **kwargs):
    a = np.ones(golden.operand_shapes(op, M, K, N)[0], bool)
    return et.layer_cycles(op, a, M, K, N, t, mode=1, **kwargs)


def test_dense_step_costs():
    """At the defaults: a dense step after the first costs only its rows at the GEMM's pace
    (256 rows x 64 passes): its B chunk (OP 1: Wᵀ out of the transposer, 682 cycles for 512
    beats; OP 2: after the next Xᵀ block's fill) loads into the second weight set while the
    tile before computes, and its rows follow that tile's without a gap. OP 2 starts with the
    first Xᵀ block's fill (2048 beats: k rows of a full row group's words)."""
    t = T_DEFAULT
    dense = (1 << 64) - 1
    rows = compute_bound_cycles([dense] * 512, t.gemm) - compute_bound_cycles([dense] * 256,
                                                                                 t.gemm)
    assert rows == 256 * 64
    for op in range(3):
        one = _ones_layer(op, *et.dims(op, 256, 64, 64), t)
        two = _ones_layer(op, *et.dims(op, 256, 128, 64), t)
        assert two["layer_cycles"] - one["layer_cycles"] == rows
        assert two["b_load"] == one["b_load"] == (512 + 511 // 3 if op == 1 else 512)
        # the last row's 32 words from ACC_TO_WRITER cycles after its first C beat (7 before
        # the last), then the last burst's response and the idle check
        assert one["drain"] == et.ACC_TO_WRITER - 7 + 32 - 1 + et.WRITE_RESPONSE - 1
    fill = 64 * 256 // 8
    one = _ones_layer(2, *et.dims(2, 256, 64, 64), t)
    assert one["start"] == et.FIRST_AR + t.read_latency + et.READ_SLICE + fill
    # 8 rows of 64 passes a step (Mo = 8, four inner chunks): each step's Xᵀ block fills the
    # transposer after the chunk before (the R stream's order), and its B chunk follows the
    # fill. The block is k rows of the tile's one word (64 beats, not the full row group's
    # 2048), and the tile's 512 cycles are shorter than the fill and the chunk (576 beats):
    # every step waits for its reads.
    short = _ones_layer(2, 256, 8, 64, t, per_step=True)
    steps = short["per_step"]
    assert short["steps"] == 4
    short_fill = 64 * (8 // 8)         # k rows of ceil(mv/lanes) words
    assert (steps["b_first"][1:] - steps["b_last"][:-1] == short_fill + 1).all()
    assert (steps["a_first"] == steps["b_last"] + 1).all()
    gemm_rows = compute_bound_cycles([dense] * 8, t.gemm)
    assert gemm_rows < short_fill + 512
    assert short["a_wait"] >= 3 * (short_fill + 512 - gemm_rows)


def test_short_forward_tiles_wait_for_their_chunk():
    """OP 0 tiles of 20 rows at density 0.1 (about 300 cycles each) are shorter than a B load
    (512): each chunk follows the A tile before it in the R stream, one beat a cycle, and the
    tile waits for its chunk (b_load counts the waits)."""
    t = T_DEFAULT
    a = np.zeros((20, 512), bool)
    a[:, ::10] = True
    r = et.layer_cycles(0, a, 20, 512, 64, t, mode=2, per_step=True)
    s = r["per_step"]
    assert (s["b_first"][1:] == s["b_last"][:-1] + 20 * 8 + 1).all()
    assert (s["a_first"][1:] == s["b_last"][1:] + 1 + et.A_QUEUE_LATENCY).all()
    assert r["b_load"] > 512 + 7 * 100


def test_results_fifo_sets_the_pace_at_low_density():
    """Single-chunk row groups at low density: the writer (32 cycles a row at the defaults)
    is slower than the GEMM (15 a row), so each row group's results wait for the last."""
    t = T_DEFAULT
    a = np.zeros((768, 64), bool)
    a[:, 0] = True                        # one nonzero a row: the GEMM's 15-cycle floor
    r = et.layer_cycles(0, a, 768, 64, 64, t, mode=2)
    assert r["results_stall"] > 0
    assert r["drain"] >= 256 * 32
    assert r["layer_cycles"] >= 3 * 256 * 32


def test_large_layer_is_fast():
    """A VGG-16 conv1_2-sized GEMM (50176 x 576 x 64: 1764 steps) in well under a minute."""
    rng = np.random.default_rng(7)
    m, k, n = 50176, 576, 64
    nnz = est._random_nnz(rng, m, k, 0.6, 64)
    start = time.perf_counter()
    r = et.layer_cycles_nnz(0, nnz, m, k, n, T_DEFAULT, True)
    assert time.perf_counter() - start < 30
    assert r["steps"] == 196 * 9


# --- spartan estimate: the engine's figures ---------------------------------------------------

def test_engine_layer_from_masks():
    rng = np.random.default_rng(8)
    a = _mask(rng, (300, 72), 0.3)
    dy = _mask(rng, (300, 16), 0.1)
    t = T_DEFAULT
    layer = est.engine_layer("c", a, dy, 16, t)
    assert list(layer.gemms) == ["forward", "dgrad", "wgrad"]
    f, d, w = (layer.gemms[g] for g in ("forward", "dgrad", "wgrad"))
    assert (f.op, f.dims, d.op, d.dims) == (0, (300, 72, 16), 1, (300, 16, 72))
    # wgrad: the form with fewer cycles; dY^T here (the sparser operand, fewer rows)
    x_form = est.engine_gemm("wgrad", "wgrad_x", et.row_nnz(2, a, t), (300, 72, 16), t, 0xF0)
    dy_form = est.engine_gemm("wgrad", "wgrad_dy", et.row_nnz(2, dy, t), (300, 16, 72), t,
                              0xF0)
    assert w.adaptive_cycles == min(x_form.adaptive_cycles, dy_form.adaptive_cycles)
    assert w.dense_cycles == min(x_form.dense_cycles, dy_form.dense_cycles)
    for g in layer.gemms.values():
        assert g.speedup > 1
    for g in (f, d):   # wgrad's dense figure may be the other form's
        assert g.adaptive["A_BYTES"] == g.dense["A_BYTES"]
    first = est.engine_layer("c", a, None, 16, t, first=True)
    assert list(first.gemms) == ["forward", "wgrad"] and not first.gemms["wgrad"].measured
    assert first.gemms["wgrad"].operand == "X^T"


def test_engine_threshold_decides_per_tile():
    t = T_DEFAULT
    a = np.ones((512, 64), bool)
    a[256:, 1:] = False                   # the second row group's tile is 1/64 dense
    g = est.engine_gemm("forward", "forward", et.row_nnz(0, a, t), (512, 64, 64), t, 0xF0)
    assert g.adaptive["tiles_sparse"] == 1 and g.dense["tiles_sparse"] == 0


def test_engine_network_and_totals():
    t = T_DEFAULT
    layers = est.engine_network("alexnet", t)
    assert [la.name for la in layers] == ["conv1", "conv2", "conv3", "conv4", "conv5"]
    assert "dgrad" not in layers[0].gemms and "dgrad" in layers[1].gemms
    tot = est.engine_totals(layers)
    assert tot["dense_cycles"] == sum(la.dense_cycles for la in layers)
    assert sum(tot["adaptive_parts"].values()) + sum(
        g.adaptive["checks"] for la in layers for g in la.gemms.values()) == \
        tot["adaptive_cycles"]
    assert 1 < tot["speedup"] < 4
    text = est.format_engine_report(layers, t, 0xF0, core={"speedup": 2.0})
    assert "whole training step on the engine" in text and "the stream core 2.00x" in text


def spartan(*args):
    return subprocess.run([sys.executable, "-m", "spartan_rtl.cli", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_cli_estimate_reports_the_engine(tmp_path):
    out = spartan("estimate", str(TRACE), "--json", str(tmp_path / "e.json"))
    assert out.returncode == 0, out.stderr
    assert "whole training step" in out.stdout and "against forward only" in out.stdout
    assert "estimate on the layer engine" in out.stdout
    assert "whole training step on the engine" in out.stdout
    doc = json.loads((tmp_path / "e.json").read_text())
    names = [la.name for la in traces.load(TRACE).layers]
    assert [la["name"] for la in doc["engine"]["layers"]] == names
    assert list(doc["engine"]["layers"][0]["gemms"]) == ["forward", "wgrad"]
    assert doc["engine"]["params"]["acc_rows"] == 256
    assert doc["engine"]["total"]["speedup"] > 1


def test_cli_estimate_network_and_engine_params():
    out = spartan("estimate", "alexnet", "--samples", "1", "--engine-set", "acc_rows=128")
    assert out.returncode == 0, out.stderr
    assert "estimate: alexnet" in out.stdout and "acc_rows=128" in out.stdout
    bad = spartan("estimate", "alexnet", "--engine-set", "acc_rows=100")
    assert bad.returncode == 2 and "acc_rows must be a power of two" in bad.stderr


# --- the model against the RTL ----------------------------------------------------------------

#: ``(OP, M, K, N, density, MODE)``: every OP and mode, partial chunks everywhere, empty
#: rows; at the defaults, two single-chunk row groups at low density (the results FIFO's
#: waits), a dense dgrad (the transposer's wait for the next Wᵀ chunk) and a wgrad row group
#: of 40 result rows (each Xᵀ block 5 words a row, its fill and chunk longer than the tile).
RTL_LAYERS = {
    "small": (SMALL, [(0, 37, 21, 13, 0.5, 1), (0, 29, 40, 9, 0.2, 2), (1, 21, 19, 17, 0.7, 1),
                      (1, 33, 17, 20, 0.3, 2), (2, 18, 35, 10, 0.5, 1),
                      (2, 40, 19, 9, 0.1, 2)]),
    "defaults": ({}, [(0, 300, 64, 64, 0.1, 2), (1, 70, 65, 20, 0.9, 1),
                      (2, 320, 40, 64, 0.1, 2)]),
    # The dense-only twin: its mask FIFO instead of the compactor, the GEMM's dense-only build;
    # MODE 2 runs dense too. Two column groups (n = 2 n_par): a row's results leave the GEMM a
    # group at a time. The engine testbench's twin build (test_engine.py), shared.
    "twin": (dict(SMALL, sparse=False, n=16), [(0, 37, 21, 13, 0.5, 1), (1, 33, 17, 20, 0.3, 2),
                                               (2, 40, 19, 9, 0.1, 1)]),
    # k = 128: 16 beats a row against the output's 15-cycle floor, so sparse rows wait for
    # their input (the model steps every row; its closed form read these 426 and 2778 short).
    "k128": ({"k": 128}, [(0, 256, 512, 64, 0.1, 2), (2, 130, 300, 70, 0.5, 2)]),
    # The replicated datapath (k_par 2) has one weight set: chunk s waits for C tile s-1, not
    # s-2 (with two sets the model read these layers 20-30 % short). Dense: sparse layers of
    # this datapath are within 0.7 % (docs/engine.md, "Cycle model"), above SPARSE_TOLERANCE.
    "k_par2": (dict(SMALL, k_par=2), [(0, 30, 40, 40, 0.5, 1), (1, 48, 48, 14, 0.2, 1),
                                      (2, 23, 34, 25, 0.2, 1)]),
}
#: How far the model may miss a sparse (MODE 2) layer, as a share of its cycles. Where a
#: bound follows when the core took an A beat (a B chunk's start behind the A queue, OP 0 and
#: 1; the transposer's block freed for the next Xᵀ block, OP 2; an input-bound tile's first
#: beat, k = 128), the model steps the compactor's input admission, exact for dense rows and
#: within tens of cycles for sparse ones; and where a B row is at most two bus words the
#: reader's address side, paced by the memory model's request queue, can add a cycle at a
#: block's start. Up to 0.4 % seen (266 cycles, the k = 128 wgrad layer below; docs/engine.md,
#: "Cycle model"). Every dense layer: exact.
SPARSE_TOLERANCE = 0.005


@pytest.mark.parametrize("sim", ["verilator"])
@pytest.mark.parametrize("which", list(RTL_LAYERS))
def test_model_matches_rtl(which, sim):
    from verif.flows import engine_timing as flow
    config, specs = RTL_LAYERS[which]
    params, runs = flow.measure(config, specs, name=f"model_{which}")
    for row in flow.compare(params, runs):
        what = f"OP {row['op']} MODE {row['mode']} {row['M']}x{row['K']}x{row['N']}"
        assert row["words_error"] == [0, 0, 0], what
        if row["mode"] == 2 and params.get("sparse", True):
            assert abs(row["error"]) <= SPARSE_TOLERANCE * row["rtl_cycles"], \
                f"{what}: RTL {row['rtl_cycles']}, model {row['model_cycles']}"
        else:
            assert row["error"] == 0, \
                f"{what}: RTL {row['rtl_cycles']}, model {row['model_cycles']}"
