"""The estimator (golden/estimate.py), ``spartan estimate`` and the estimate benchmark's report.

Hand-checked figures come from the closed formula of docs/gemm.md ("Cycle model") at the
defaults (lanes 8, k = n = 64, k_par 4, n_par 16, b_banks 1, issue_to_push 3):
``cycles = 1 + ceil(nnz_0/8) + sum_i passes_i + 3 + n_par/lanes`` for a tile whose rows have
enough work; a row with ``z`` nonzeros takes ``(64/16) * ceil(z/4)`` passes. So a dense row is
64 passes and a row of 8 nonzeros 8 passes.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from golden import estimate as est
from golden import traces
from golden.gemm import GemmTiming
from verif import runner

ROOT = Path(__file__).resolve().parent.parent
TRACE_FILES = sorted((ROOT / "data" / "traces").glob("*.npz"))
B_LOAD = 64 * 64 // 8          # one B chunk, lanes 8
DENSE_64 = 1 + 8 + 64 * 64 + 3 + 2      # 64 dense rows
EIGHT_64 = 1 + 1 + 64 * 8 + 3 + 2       # 64 rows of 8 nonzeros each


def rows_with(nnz_per_row, rows, cols=64, seed=0):
    rng = np.random.default_rng(seed)
    bits = np.zeros((rows, cols), dtype=bool)
    for r in range(rows):
        bits[r, rng.choice(cols, nnz_per_row, replace=False)] = True
    return bits


# --- single tiles ----------------------------------------------------------------------

def test_tile_cycles_dense_and_eight_per_row():
    t = GemmTiming()
    assert est.tile_cycles([(1 << 64) - 1] * 4, t) == 1 + 8 + 4 * 64 + 3 + 2
    masks = est.pack_rows(rows_with(8, 4))
    assert est.tile_cycles(masks, t) == 1 + 1 + 4 * 8 + 3 + 2


def test_all_zero_tile_is_bound_by_the_output():
    # Each empty row is one pass but still sends a zero row of C: n/lanes = 8 beats.
    cycles = est.tile_cycles([0] * 64, GemmTiming())
    assert 64 * 8 <= cycles <= 64 * 8 + 20


def test_pack_rows_bit_order():
    bits = np.zeros((2, 70), dtype=bool)
    bits[0, 0] = bits[0, 69] = bits[1, 8] = True
    assert est.pack_rows(bits) == [1 | 1 << 69, 1 << 8]


# --- whole GEMMs -----------------------------------------------------------------------

def test_gemm_one_dense_one_sparse_tile():
    bits = np.vstack([np.ones((64, 64), bool), rows_with(8, 64)])
    g = est.estimate_gemm(bits, 64, est.Options())
    assert g.tiles == 2 and g.sparse_tiles == 1 and g.b_load_cycles == B_LOAD
    assert g.dense_cycles == 2 * DENSE_64 + B_LOAD
    assert g.adaptive_cycles == DENSE_64 + EIGHT_64 + B_LOAD
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
    g = est.estimate_gemm(bits, 130, est.Options())   # N 130: 3 chunks of 64
    partial = 1 + 1 + 64 * 8 + 3 + 2   # 8 ones per row, as a row of 8 nonzeros
    assert g.b_load_cycles == 3 * 2 * B_LOAD
    assert g.dense_cycles == 3 * (DENSE_64 + partial) + 6 * B_LOAD
    assert g.adaptive_cycles == g.dense_cycles and g.tiles == 6


def test_row_tiles_split_with_remainder():
    bits = np.ones((100, 64), bool)   # tiles of 64 and 36 rows
    g = est.estimate_gemm(bits, 64, est.Options())
    assert g.tiles == 2
    assert g.dense_cycles == DENSE_64 + (1 + 8 + 36 * 64 + 3 + 2) + B_LOAD


def test_layer_forward_and_wgrad_shapes():
    bits = rows_with(8, 64, cols=128)
    layer = est.estimate_layer("c", bits, 32, est.Options())
    assert layer.gemms["forward"].shape == (64, 128, 32)
    assert layer.gemms["wgrad"].shape == (128, 64, 32)
    assert layer.density == pytest.approx(1 / 16) and layer.ideal == pytest.approx(16)
    assert layer.speedup == pytest.approx(layer.dense_cycles / layer.adaptive_cycles)
    with pytest.raises(ValueError, match="gemm must be one of forward, wgrad, not 'dgrad'"):
        est.estimate_layer("c", bits, 32, est.Options(), gemms=("dgrad",))


def test_random_estimate_dense_equals_exact_and_scales():
    opts = est.Options()
    rng = np.random.default_rng(1)
    # Density 1: every sampled tile is all ones, so sampling is exact.
    g = est.estimate_random(640, 128, 64, 1.0, opts, samples=2, rng=rng)
    exact = est.estimate_gemm(np.ones((640, 128), bool), 64, opts)
    assert (g.dense_cycles, g.adaptive_cycles) == (exact.dense_cycles, exact.adaptive_cycles)
    assert g.sampled_tiles == 2 and g.tiles == 20
    # Density 0.5: speedup between 1 and the ideal 2, and close to it.
    h = est.estimate_random(640, 128, 64, 0.5, opts, samples=4, rng=rng)
    assert 1.6 < h.speedup < 2.0


def test_profiling_cycles():
    p = est.profile_tiles(64, 64, est.Options())
    assert p == {"tiles": 1, "software_cycles": 512 + 3 + 1, "monitor_stats_cycles": 1,
                 "monitor_register_cycles": 8, "reduction_stats": 516,
                 "reduction_registers": 516 / 8}
    q = est.profile_tiles(100, 9, est.Options())   # tiles 64x9 (72 beats) and 36x9 (41 beats)
    assert q["software_cycles"] == (72 + 4) + (41 + 4) and q["tiles"] == 2


def test_quantise_keeps_the_zero_pattern():
    a = np.array([[0.0, -0.0, 1e-9, -1e-9], [2.0, -2.0, 1.0, 0.5]], dtype=np.float32)
    q = est.quantise(a, 8)
    assert q.tolist() == [[0, 0, 1, 255], [127, 129, 64, 32]]
    assert ((q != 0) == est.nonzero(a)).all()


def test_options_checked():
    with pytest.raises(ValueError, match="rows must be a positive integer, not 0"):
        est.Options(rows=0)
    with pytest.raises(ValueError, match="threshold must be an integer 0..255, not 256"):
        est.Options(threshold=256)


def test_network_totals_within_target():
    layers = est.estimate_network("alexnet", est.Options(), samples=2)
    tot = est.totals(layers)
    assert [la.name for la in layers][:2] == ["conv1", "conv2"]
    assert layers[0].speedup == pytest.approx(1.0)   # the dense image: nothing to skip
    assert 0.85 * tot["ideal"] <= tot["speedup"] <= tot["ideal"] * 1.02


# --- command line ----------------------------------------------------------------------

def spartan(*args):
    return subprocess.run([sys.executable, "-m", "hw.cli", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_cli_estimate_committed_trace(tmp_path):
    out = spartan("estimate", str(TRACE_FILES[-1]), "--rows", "128", "--json",
                  str(tmp_path / "e.json"))
    assert out.returncode == 0, out.stderr
    assert "tiles of 128 rows" in out.stdout and "total" in out.stdout
    doc = json.loads((tmp_path / "e.json").read_text())
    names = [la["name"] for la in doc["layers"]]
    assert names == [la.name for la in traces.load(TRACE_FILES[-1]).layers]
    assert set(doc["layers"][0]["gemms"]) == {"forward", "wgrad"}
    assert doc["total"]["speedup"] > 1


def test_cli_estimate_user_file_and_gemm_params(tmp_path):
    path = tmp_path / "mine.npz"
    a = np.zeros((70, 18), np.int8)
    a[::2, ::3] = 5
    traces.save(path, [("c1", a, (4, 2, 3, 3))])
    out = spartan("estimate", str(path), "--set", "k=32", "--set", "k_par=8",
                  "--threshold", "0x80")
    assert out.returncode == 0, out.stderr
    assert "GEMM k=32 n=64 lanes=8 k_par=8" in out.stdout and "THRESHOLD=0x80" in out.stdout


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

def test_bench_report_structure(tmp_path):
    from verif import bench_estimate as be
    from verif import report
    opts = est.Options()
    figures = {"options": {"timing": opts.timing.__dict__, "rows": opts.rows,
                           "threshold": opts.threshold, "samples": 1},
               "networks": be._network_figures(opts, 1),
               "traces": be._trace_figures(opts, TRACE_FILES[-1:]),
               "rtl": {"tiles": 1, "rows": 32, "records": [{"rtl_cycles": 10,
                                                            "model_cycles": 10}],
                       "max_error": 0.0, "exact": 1, "rtl_cycles": 10, "model_cycles": 10},
               "paper_profiling_reduction": 52.5, "target_fraction_of_ideal": 0.85}
    json.dumps(figures)   # bench.json must be able to hold it
    text = be.report(figures)
    for name in ("alexnet", "vgg16", "resnet18", TRACE_FILES[-1].name, "model vs RTL"):
        assert name in text
    written = report.write({"estimate": figures}, tmp_path / "results.md")
    page = (tmp_path / "results.md").read_text()
    assert {p.name for p in written} >= {"results.md", "results_networks.png",
                                         "results_traces.png"}
    for heading in ("# Results", "## Network-level speedup", "## Profiling overhead",
                    "## Real activations", "## Cycle model against the RTL"):
        assert heading in page
    assert "(img/results_networks.png)" in page and (tmp_path / "img").is_dir()


# --- the model against the RTL on real tiles ------------------------------------------------

@pytest.mark.parametrize("sim", runner.sims())
def test_model_matches_rtl_on_real_trace_tiles(sim):
    """Real-trace tiles (forward and weight-gradient operands, every layer, partial chunks)
    through the GEMM: cycles equal the model's, every C element the golden GEMM's."""
    specs = est.sample_trace_tiles([TRACE_FILES[0], TRACE_FILES[-1]], per_layer=1, rows=16,
                                   k=64, seed=7)
    test_dir = runner.run("gemm", "verif.tb_estimate", None, sim=sim, name="estimate",
                          testcase="trace_tiles_vs_model", args={"tiles": specs})
    records = json.loads((test_dir / "rtl_model.json").read_text())["records"]
    assert len(records) == 2 * len(specs)
    assert {r["cols"] for r in records} >= {9, 8, 16, 64}   # partial chunks of K 9, 72, 144


def test_bench_run_json_and_report_rules(tmp_path, monkeypatch):
    """``spartan bench``: figures to JSON; docs/results.md only after a full run of every
    benchmark (``--quick`` never overwrites it) or where ``--report`` says."""
    import types
    from verif import bench, report
    fake = types.ModuleType("fake_bench")
    fake.run = lambda quick: {"quick": quick}
    fake.report = lambda figures: f"fake quick={figures['quick']}"
    monkeypatch.setitem(sys.modules, "fake_bench", fake)
    monkeypatch.setattr(bench, "BENCHES", {"fake": "fake_bench"})
    written = []
    monkeypatch.setattr(report, "write", lambda results, path: written.append(path) or [path])
    out = []
    results = bench.run(quick=True, json_path=tmp_path / "b.json", echo=out.append)
    assert results == {"fake": {"quick": True}}
    assert json.loads((tmp_path / "b.json").read_text()) == results
    assert out == ["fake quick=True"] and written == []
    bench.run(quick=True, echo=out.append, report_path=tmp_path / "r.md")
    bench.run(quick=False, echo=out.append)
    assert written == [tmp_path / "r.md", report.ROOT / "docs" / "results.md"]
    with pytest.raises(ValueError, match="benchmark must be one of fake, not 'nope'"):
        bench.run(["nope"])
