"""The estimator (spartan_rtl/estimate.py), ``spartan estimate`` and the estimate benchmark's
report.

The GEMM's timing is not restated here: single tiles are timed through golden/gemm.py's API
(:func:`spartan_rtl.estimate.tile_cycles` on hand-made masks, at the block's defaults), and
the tests pin what the estimator does with them: which operand each GEMM streams, how a layer is cut
into tiles and chunks, which tiles run sparse, which form the weight gradient takes per slice, what
a two-sided datapath would drop and what deciding from an earlier pass costs, all on hand-worked
masks.
"""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from spartan_rtl import estimate as est
from spartan_rtl import runner
from spartan_rtl.golden import traces
from spartan_rtl.golden.gemm import compute_bound_cycles, is_compute_bound, simulate
from verif.flows import ROOT

TRACE_FILES = sorted((ROOT / "data" / "traces").glob("*.npz"))
OPTS = est.Options()
T = OPTS.timing
B_LOAD = T.k * T.n // T.lanes          # one resident chunk: k x n elements, lanes per beat


def rows_with(nnz_per_row, rows, cols=64, seed=0):
    rng = np.random.default_rng(seed)
    bits = np.zeros((rows, cols), dtype=bool)
    for r in range(rows):
        bits[r, rng.choice(cols, nnz_per_row, replace=False)] = True
    return bits


def cycles(bits):
    """One tile's cycles, through the cycle model's API."""
    return est.tile_cycles(est.pack_rows(bits), T)


def dense(rows, cols):
    return cycles(np.ones((rows, cols), bool))


def sweep_cycles(bits, out):
    """Hand-cut: every ``rows x k`` tile of ``bits`` timed sparse, times the resident chunks of
    an output ``out`` wide, plus one resident load per (inner chunk, resident chunk)."""
    rows, inner = bits.shape
    tiles = sum(cycles(bits[r:r + OPTS.rows, c:c + T.k]) for c in range(0, inner, T.k)
                for r in range(0, rows, OPTS.rows))
    chunks = -(-out // T.n)
    return chunks * (tiles + -(-inner // T.k) * B_LOAD)


# --- single tiles ----------------------------------------------------------------------

def test_tile_cycles_closed_form_or_simulation():
    full = [(1 << T.k) - 1] * 4
    assert is_compute_bound(full, T)
    assert est.tile_cycles(full, T) == compute_bound_cycles(full, T)
    sparse = est.pack_rows(rows_with(1, 4, T.k))
    assert est.tile_cycles(sparse, T) == simulate([sparse], T)[0].cycles


def test_pack_rows_bit_order():
    bits = np.zeros((2, 70), dtype=bool)
    bits[0, 0] = bits[0, 69] = bits[1, 8] = True
    assert est.pack_rows(bits) == [1 | 1 << 69, 1 << 8]


def test_default_timing_is_the_blocks():
    from spartan_rtl.hw.gemm import BLOCK
    p = BLOCK.resolve()
    assert (T.k, T.n, T.lanes, T.k_par, T.n_par) == (p["k"], p["n"], p["lanes"], p["k_par"],
                                                     p["n_par"])


# --- whole GEMMs -----------------------------------------------------------------------

def test_gemm_one_dense_one_sparse_tile():
    sparse = rows_with(8, 64)
    bits = np.vstack([np.ones((64, 64), bool), sparse])
    g = est.estimate_gemm(bits, 64, OPTS)
    assert g.tiles == 2 and g.sparse_tiles == 1 and g.b_load_cycles == B_LOAD
    assert g.dense_cycles == 2 * dense(64, 64) + B_LOAD
    assert g.adaptive_cycles == dense(64, 64) + cycles(sparse) + B_LOAD
    assert g.density == pytest.approx((64 * 64 + 64 * 8) / (128 * 64))


def test_threshold_decides_per_tile():
    bits = np.vstack([np.ones((64, 64), bool), rows_with(8, 64)])   # densities 1 and 1/8
    # 1/8 = 32/256: sparse at THRESHOLD 32, dense at 31.
    assert est.estimate_gemm(bits, 64, est.Options(threshold=32)).sparse_tiles == 1
    g = est.estimate_gemm(bits, 64, est.Options(threshold=31))
    assert g.sparse_tiles == 0 and g.adaptive_cycles == g.dense_cycles
    # THRESHOLD 255 still keeps the all-ones tile dense (256/256 > 255/256).
    assert est.estimate_gemm(bits, 64, est.Options(threshold=255)).sparse_tiles == 1


def test_n_chunks_repeat_and_partial_inner_chunk_not_charged_padding():
    bits = np.ones((64, 72), bool)   # inner 72 = one chunk of 64 + one of 8 real columns
    g = est.estimate_gemm(bits, 130, OPTS)   # N 130: 3 chunks of 64
    assert g.b_load_cycles == 3 * 2 * B_LOAD
    assert g.dense_cycles == 3 * (dense(64, 64) + dense(64, 8)) + 6 * B_LOAD
    assert g.adaptive_cycles == g.dense_cycles and g.tiles == 6


def test_row_tiles_split_with_remainder():
    g = est.estimate_gemm(np.ones((100, 64), bool), 64, OPTS)   # tiles of 64 and 36 rows
    assert g.tiles == 2
    assert g.dense_cycles == dense(64, 64) + dense(36, 64) + B_LOAD


# --- the three GEMMs of a layer ---------------------------------------------------------

M, K, N = 128, 72, 16


def test_layer_streams_a_forward_and_dy_in_the_data_gradient():
    a = rows_with(9, M, K, seed=1)
    dy = rows_with(2, M, N, seed=2)
    layer = est.estimate_layer("c", a, dy, N, OPTS)
    assert list(layer.gemms) == ["forward", "dgrad", "wgrad"]
    f, d = layer.gemms["forward"], layer.gemms["dgrad"]
    assert (f.shape, f.operand, f.density) == ((M, K, N), "A", pytest.approx(9 / K))
    # dA = dY . W^T: dY (M x N) streamed, W^T resident, the output K = 72 wide: 2 chunks.
    assert (d.shape, d.operand, d.density) == ((M, N, K), "dY", pytest.approx(2 / N))
    assert d.adaptive_cycles == sweep_cycles(dy, K)
    assert f.adaptive_cycles == sweep_cycles(a, N)
    assert layer.dy_density == pytest.approx(2 / N)
    # The step is the sum; its ideal MAC-weighted over the three GEMMs (all M*K*N MACs).
    assert layer.adaptive_cycles == sum(g.adaptive_cycles for g in layer.gemms.values())
    w = layer.gemms["wgrad"]
    assert layer.ideal == pytest.approx(3 / (9 / K + 2 / N + w.density))


def test_first_layer_has_no_data_gradient():
    layer = est.estimate_layer("c", rows_with(9, M, K), rows_with(2, M, N), N, OPTS, first=True)
    assert list(layer.gemms) == ["forward", "wgrad"]


def test_wgrad_streams_the_operand_with_less_work():
    # Per slice of 64 positions: work(A^T) = nnz(A) * ceil(N/64) = nnz(A),
    # work(dY^T) = nnz(dY) * ceil(K/64) = 2 nnz(dY).
    a = rows_with(9, M, K, seed=1)            # 64 * 9 = 576 per slice
    dy = rows_with(2, M, N, seed=2)           # 2 * 64 * 2 = 256 per slice: stream dY^T
    w = est.estimate_wgrad(a, dy, OPTS)
    assert w.operand == "dY^T" and w.shape == (K, M, N)
    assert w.adaptive_cycles == sweep_cycles(dy.T, K)
    dy5 = rows_with(5, M, N, seed=3)          # 2 * 64 * 5 = 640 > 576: stream A^T
    w = est.estimate_wgrad(a, dy5, OPTS)
    assert w.operand == "A^T" and w.adaptive_cycles == sweep_cycles(a.T, N)
    # Useful MACs: per slice the smaller of nnz(A) * N and nnz(dY) * K.
    assert w.density == pytest.approx(min(9 * N, 5 * K) / (K * N))
    # Dense: the cheaper of the two forms run dense.
    assert w.dense_cycles == min(sweep_cycles(np.ones((K, M), bool), N),
                                 sweep_cycles(np.ones((N, M), bool), K))


def test_wgrad_chooses_per_slice_and_ties_stream_a():
    a = np.vstack([rows_with(1, 64, K, seed=4), rows_with(20, 64, K, seed=5)])
    dy = np.vstack([rows_with(8, 64, N, seed=6), rows_with(1, 64, N, seed=7)])
    # Slice 0: 64 vs 2*512 -> A^T; slice 1: 1280 vs 2*64 -> dY^T.
    w = est.estimate_wgrad(a, dy, OPTS)
    assert w.operand == "A^T 1/2, dY^T 1/2"
    assert w.adaptive_cycles == sweep_cycles(a[:64].T, N) + sweep_cycles(dy[64:].T, K)
    # A tie (equal work) streams A^T.
    tie_a, tie_dy = rows_with(2, 64, K, seed=8), rows_with(1, 64, N, seed=9)
    assert est.estimate_wgrad(tie_a, tie_dy, OPTS).operand == "A^T"


def test_trace_without_errors_counts_the_backward_dense():
    a = rows_with(9, M, K, seed=1)
    layer = est.estimate_layer("c", a, None, N, OPTS)
    d, w = layer.gemms["dgrad"], layer.gemms["wgrad"]
    assert not d.measured and d.adaptive_cycles == d.dense_cycles
    assert layer.dy_density is None
    assert w.operand == "A^T" and w.adaptive_cycles == sweep_cycles(a.T, N)


def test_totals_per_gemm_and_whole_step():
    layers = [est.estimate_layer("c1", rows_with(9, M, K), rows_with(2, M, N), N, OPTS,
                                 first=True),
              est.estimate_layer("c2", rows_with(30, M, K), rows_with(4, M, N), N, OPTS)]
    tot = est.totals(layers)
    assert list(tot["gemms"]) == ["forward", "dgrad", "wgrad"]
    assert tot["gemms"]["dgrad"]["adaptive_cycles"] == layers[1].gemms["dgrad"].adaptive_cycles
    assert tot["adaptive_cycles"] == sum(la.adaptive_cycles for la in layers)
    assert tot["speedup"] == pytest.approx(tot["dense_cycles"] / tot["adaptive_cycles"])
    fwd = tot["gemms"]["forward"]
    assert fwd["ideal"] == pytest.approx(2 / (9 / K + 30 / K))


# --- two-sided skipping and deciding from the last pass ----------------------------------

def test_two_sided_drops_elements_whose_resident_row_is_zero():
    a = np.zeros((64, 8), bool)
    a[::2] = True                          # even positions: all 8 inputs nonzero; odd: none
    dy = rows_with(2, 64, 8, seed=10)      # every position: 2 of 8 errors nonzero
    # work(A^T) = 32 * 8 = 256 > work(dY^T) = 64 * 2 = 128: dY^T streamed, A resident. The
    # two-sided datapath drops dY's elements at the odd positions (A's row there is all zero).
    d = est.two_sided(a, dy, OPTS)
    masked = dy.T & a.any(axis=1)[None, :]
    assert d["one_sided_cycles"] == sweep_cycles(dy.T, 8)
    assert d["two_sided_cycles"] == sweep_cycles(masked, 8)
    assert d["gain"] == pytest.approx(d["one_sided_cycles"] / d["two_sided_cycles"])
    # MACs with both operands nonzero: 32 positions x 8 x 2; one-sided useful: 64 x 2 x 8.
    assert (d["two_sided_macs"], d["one_sided_macs"]) == (512, 1024)
    assert d["mac_bound_gain"] == pytest.approx(2.0)


def _trace(a, dy, w_shape):
    return traces.validate({"layers": np.array(["c"]), "a_c": a, "w_shape_c": np.array(w_shape),
                            "dy_c": dy})


def test_last_pass_counts_decisions_that_differ_and_their_cost():
    w_shape = (64, 1, 8, 8)
    # Previous pass: the forward tile was dense (runs dense); now it is 1/8 dense (oracle:
    # sparse). dY is the same in both passes.
    dy = rows_with(4, 64, 64, seed=11).astype(np.float32)
    prev = _trace(np.ones((64, 64), np.float32), dy, w_shape)
    now_a = rows_with(8, 64, 64, seed=12)
    cur = _trace(now_a.astype(np.float32), dy, w_shape)
    rows = {r["gemm"]: r for r in est.last_pass(prev, cur, OPTS)}
    assert set(rows) == {"forward", "wgrad"}             # one layer: the first, no dgrad
    f = rows["forward"]
    assert (f["decisions"], f["differ"]) == (1, 1)
    assert f["oracle_cycles"] == cycles(now_a) + B_LOAD
    assert f["last_pass_cycles"] == dense(64, 64) + B_LOAD
    # wgrad: previous work(A^T) 4096 > work(dY^T) 256 -> dY^T, now 512 > 256 -> dY^T: agree.
    assert rows["wgrad"]["differ"] == 0
    assert rows["wgrad"]["last_pass_cycles"] == rows["wgrad"]["oracle_cycles"]


def test_options_checked():
    with pytest.raises(ValueError, match="rows must be a positive integer, not 0"):
        est.Options(rows=0)
    with pytest.raises(ValueError, match="threshold must be an integer 0..255, not 256"):
        est.Options(threshold=256)


def test_random_estimate_dense_equals_exact_and_scales():
    rng = np.random.default_rng(1)
    # Density 1: every sampled tile is all ones, so sampling is exact.
    g = est.estimate_random(640, 128, 64, 1.0, OPTS, samples=2, rng=rng)
    exact = est.estimate_gemm(np.ones((640, 128), bool), 64, OPTS)
    assert (g.dense_cycles, g.adaptive_cycles) == (exact.dense_cycles, exact.adaptive_cycles)
    assert g.sampled_tiles == 2 and g.tiles == 20
    # Density 0.5: speedup between 1 and the ideal 2.
    h = est.estimate_random(640, 128, 64, 0.5, OPTS, samples=4, rng=rng)
    assert 1.3 < h.speedup < 2.0


def test_profiling_cycles():
    p = est.profile_tiles(64, 64, OPTS)
    reduce = math.ceil(math.log2(T.lanes)) + 1
    beats = 64 * 64 // T.lanes
    assert p == {"tiles": 1, "software_cycles": beats + reduce, "monitor_stats_cycles": 1,
                 "monitor_register_cycles": 8, "reduction_stats": beats + reduce,
                 "reduction_registers": (beats + reduce) / 8}
    q = est.profile_tiles(100, 9, OPTS)   # tiles 64x9 and 36x9
    assert q["software_cycles"] == (-(-64 * 9 // T.lanes) + reduce) + \
        (-(-36 * 9 // T.lanes) + reduce) and q["tiles"] == 2


def test_quantise_keeps_the_zero_pattern():
    a = np.array([[0.0, -0.0, 1e-9, -1e-9], [2.0, -2.0, 1.0, 0.5]], dtype=np.float32)
    q = est.quantise(a, 8)
    assert q.tolist() == [[0, 0, 1, 255], [127, 129, 64, 32]]
    assert ((q != 0) == est.nonzero(a)).all()


def test_network_estimate_gemms_follow_the_structure():
    from spartan_rtl.golden import networks
    layers = est.estimate_network("alexnet", OPTS, samples=2)
    tot = est.totals(layers)
    assert [la.name for la in layers][:2] == ["conv1", "conv2"]
    assert list(layers[0].gemms) == ["forward", "wgrad"] and "dgrad" in layers[1].gemms
    assert layers[0].gemms["forward"].speedup == pytest.approx(1.0)   # the dense image
    # conv1's dY (after a max pool) is far sparser than its dense input: wgrad streams dY^T.
    assert layers[0].gemms["wgrad"].operand == "dY^T"
    assert layers[2].gemms["dgrad"].density == networks.layers("alexnet")[2].dy_density
    fwd = tot["gemms"]["forward"]
    assert 0.85 * fwd["ideal"] <= fwd["speedup"] <= fwd["ideal"] * 1.02
    assert tot["ideal"] == pytest.approx(networks.ideal_speedup("alexnet"))
    assert 1 < tot["speedup"] <= tot["ideal"] * 1.02


# --- command line ----------------------------------------------------------------------

def spartan(*args):
    return subprocess.run([sys.executable, "-m", "spartan_rtl.cli", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_cli_estimate_committed_trace(tmp_path):
    out = spartan("estimate", str(TRACE_FILES[-1]), "--rows", "128", "--json",
                  str(tmp_path / "e.json"))
    assert out.returncode == 0, out.stderr
    assert "tiles of 128 rows" in out.stdout and "total" in out.stdout
    doc = json.loads((tmp_path / "e.json").read_text())
    names = [la["name"] for la in doc["layers"]]
    assert names == [la.name for la in traces.load(TRACE_FILES[-1]).layers]
    assert list(doc["layers"][0]["gemms"]) == ["forward", "wgrad"]      # the first layer
    assert list(doc["layers"][1]["gemms"]) == ["forward", "dgrad", "wgrad"]
    assert list(doc["total"]["gemms"]) == ["forward", "dgrad", "wgrad"]
    assert doc["total"]["speedup"] > 1
    for layer in names[1:]:
        assert f"  {layer:<16} dgrad    dY " in out.stdout
    assert "whole training step" in out.stdout and "against forward only" in out.stdout


def test_cli_estimate_user_file_and_gemm_params(tmp_path):
    path = tmp_path / "mine.npz"
    a = np.zeros((70, 18), np.int8)
    a[::2, ::3] = 5
    traces.save(path, [("c1", a, (4, 2, 3, 3))])
    out = spartan("estimate", str(path), "--set", "k=32", "--set", "k_par=8",
                  "--threshold", "0x80")
    assert out.returncode == 0, out.stderr
    assert "GEMM k=32 n=64 lanes=8 k_par=8" in out.stdout and "THRESHOLD=0x80" in out.stdout
    assert "dense*" in out.stdout      # no output error in this file


def _bad_keys(p):
    np.savez(p, layers=np.array(["c1"]), a_c1=np.ones((4, 9)))


def _bad_dtype(p):
    np.savez(p, layers=np.array(["c1"]), a_c1=np.ones((4, 9), bool),
             w_shape_c1=np.array([2, 1, 3, 3]))


def _bad_shape(p):
    np.savez(p, layers=np.array(["c1"]), a_c1=np.ones((4, 8)), w_shape_c1=np.array([2, 1, 3, 3]))


@pytest.mark.parametrize("write, message", [
    (_bad_keys, "key 'w_shape_c1' must be present (layer 'c1' is listed in 'layers'), not missing"),
    (_bad_dtype, "key 'a_c1' must have a float or integer dtype, not bool"),
    (_bad_shape, "key 'a_c1' must have K = C_in*k_h*k_w = 9 columns (w_shape (2, 1, 3, 3)), "
                 "not 8"),
    (lambda p: p.write_text("not a zip"), "file must be an .npz archive, not unreadable"),
    (lambda p: None, "file must exist, not missing"),
], ids=["keys", "dtype", "shape", "text", "missing"])
def test_cli_estimate_bad_file_one_line_exit_2(tmp_path, write, message):
    path = tmp_path / "bad.npz"
    write(path)
    out = spartan("estimate", str(path), "--json", str(tmp_path / "out.json"))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"spartan: error: {path}: {message}")
    assert out.stderr.count("\n") == 1
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("args, message", [
    (["--set", "k_par=3"], "k_par must be a power of two from 1 to 64, not 3"),
    (["--rows", "0"], "rows must be a positive integer, not 0"),
    (["--threshold", "300"], "threshold must be an integer 0..255, not 300"),
])
def test_cli_estimate_bad_options(args, message):
    out = spartan("estimate", str(TRACE_FILES[0]), *args)
    assert out.returncode == 2 and out.stderr == f"spartan: error: {message}\n"


# --- the benchmark's report ----------------------------------------------------------------

def test_bench_report_structure(tmp_path, monkeypatch):
    from spartan_rtl.tb import bench_estimate as be
    from verif.flows import results as results_page
    opts = est.Options()
    figures = {"options": {"timing": opts.timing.__dict__, "rows": opts.rows,
                           "threshold": opts.threshold, "samples": 1},
               "networks": be._network_figures(opts, 1),
               "traces": be._trace_figures(opts, TRACE_FILES[-1:]),
               "last_pass": be._last_pass_figures(opts, TRACE_FILES[-2:]),
               "rtl": {"tiles": 1, "rows": 32, "records": [{"gemm": "dgrad", "rtl_cycles": 10,
                                                            "model_cycles": 10}],
                       "max_error": 0.0, "exact": 1, "rtl_cycles": 10, "model_cycles": 10},
               "paper_profiling_reduction": 52.5, "target_fraction_of_ideal": 0.85}
    json.dumps(figures)   # bench.json must be able to hold it
    text = be.report(figures)
    for name in ("alexnet", "vgg16", "resnet18", TRACE_FILES[-1].name, "model vs RTL",
                 "last pass", "dgrad"):
        assert name in text
    # The estimate's sections only: the synthesis table is another page's concern.
    monkeypatch.setattr(results_page, "SYNTH_JSON", tmp_path / "absent.json")
    written = results_page.write({"estimate": figures}, tmp_path / "results.md")
    page = (tmp_path / "results.md").read_text()
    assert {p.name for p in written} >= {"results.md", "results_networks.png",
                                         "results_traces.png"}
    for heading in ("# Results", "## Network-level speedup", "## Profiling overhead",
                    "## Real activations", "## Two-sided skipping", "## Deciding from the last",
                    "## Cycle model against the RTL"):
        assert heading in page
    for name in ("alexnet", "vgg16", "resnet18"):
        f = figures["networks"][name]
        assert f"| {name} | **{f['total']['speedup']:.2f}x** | {f['paper']}x |" in page
    assert "(img/results_networks.png)" in page and (tmp_path / "img").is_dir()


# --- the model against the RTL on real tiles ------------------------------------------------

@pytest.mark.parametrize("sim", runner.sims())
def test_model_matches_rtl_on_real_trace_tiles(sim):
    """Real-trace tiles (every streamed operand: A, dY, A^T, dY^T; every layer, partial
    chunks) through the GEMM: cycles equal the model's, every C element the golden GEMM's."""
    specs = est.sample_trace_tiles([TRACE_FILES[0], TRACE_FILES[-1]], per_layer=1, rows=16,
                                   k=64, seed=7)
    test_dir = runner.run("gemm", "spartan_rtl.tb.tb_estimate", None, sim=sim, name="estimate",
                          testcase="trace_tiles_vs_model", args={"tiles": specs})
    records = json.loads((test_dir / "rtl_model.json").read_text())["records"]
    assert len(records) == 2 * len(specs)
    assert {r["gemm"] for r in records} == set(est.OPERANDS)   # output-error tiles included
    assert {r["cols"] for r in records} >= {9, 8, 16, 64}   # partial chunks of K 9, 72, 144


def test_bench_run_json_and_report_rules(tmp_path, monkeypatch):
    """``spartan bench``: figures printed and written to JSON, nothing else; docs/results.md is
    rendered from that JSON by the developer flow (verif/flows/results.py)."""
    import types

    from spartan_rtl import bench
    from verif.flows import results as results_page
    fake = types.ModuleType("fake_bench")
    fake.run = lambda quick: {"quick": quick}
    fake.report = lambda figures: f"fake quick={figures['quick']}"
    monkeypatch.setitem(sys.modules, "fake_bench", fake)
    monkeypatch.setattr(bench, "BENCHES", {"fake": "fake_bench"})
    written = []
    monkeypatch.setattr(results_page, "write", lambda results, path: written.append(path) or [])
    out = []
    results = bench.run(quick=True, json_path=tmp_path / "b.json", echo=out.append)
    assert results == {"fake": {"quick": True}}
    assert json.loads((tmp_path / "b.json").read_text()) == results
    assert out == ["fake quick=True"]
    bench.run(quick=False, echo=out.append)
    assert written == []    # the product never writes the project's docs
    results_page.main([str(tmp_path / "b.json"), "--out", str(tmp_path / "r.md")])
    assert written == [str(tmp_path / "r.md")]
    with pytest.raises(ValueError, match="benchmark must be one of fake, not 'nope'"):
        bench.run(["nope"])
