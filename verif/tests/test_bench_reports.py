"""Every block benchmark's report (``spartan bench``, and docs/results.md, which prints the
same text under the benchmark's name) says which block and configuration its rows come from.
The figures are hand-made in the shape each ``run`` returns: no simulation here (the estimate
benchmark's report is tested in test_estimate.py)."""

import pytest

from spartan_rtl import bench
from spartan_rtl.hw import blocks

MONITOR = blocks.get("monitor").resolve()
GEMM = blocks.get("gemm").resolve()
CORE = blocks.get("core").resolve()
ENGINE = blocks.get("engine").resolve()


def monitor_figures():
    return {"params": MONITOR, "rows": [{"density": 0.5, "beats": 496, "cycles": 496,
                                         "beats_per_cycle": 1.0}]}


def compactor_figures():
    configs = [{"lanes": 8, "width": 8, "number_format": "int", "cols": 64},
               {"lanes": 16, "width": 16, "number_format": "fp", "cols": 256}]
    row = {"density": 0.5, "input_beats": 500, "input_beats_per_cycle": 1.0,
           "data_beats_per_cycle": 0.5, "mask_beats_per_cycle": 0.125,
           "compression_ratio": 1.6, "first_mask_latency": 2}
    return {"beats": 500, "configs": [{"params": p, "compactor": [row],
                                       "expander": [{"output_beats_per_cycle": 1.0}]}
                                      for p in configs]}


def gemm_figures():
    sparse = {"nnz": 2048, "cycles": 700, "passes": 640, "model_cycles": 700,
              "conflict_cycles": 0, "useful_macs": 131072, "ideal_passes": 600,
              "partial_passes": 40}
    dense = {"cycles": 1200, "model_cycles": 1200, "useful_macs": 262144}
    large = dict(GEMM, k=128, n=128, n_par=128)
    return {name: {"params": p, "rows": 64, "results": [{"sparse": sparse, "dense": dense}]}
            for name, p in (("defaults", GEMM), ("large broadcast", large))}


def core_figures():
    counters = {"MACS_DONE": 1, "MACS_SKIPPED": 0, "STALL_CYCLES": 0, "CONFLICT_CYCLES": 0}
    return {"params": dict(CORE, table_depth=32), "densities": [0.5], "rows": 16,
            "threshold": 0xC0, "speedup_auto_vs_dense": 1.5, "mean_density": 0.5,
            "passes": [{"pass": name, "cycles": 100, "sparse_tiles": 1, "counters": counters}
                       for name in ("dense", "auto")]}


def engine_figures():
    counters = {"A_WORDS": 1, "B_WORDS": 1, "C_WORDS": 1}
    return {"params": ENGINE, "dense_utilisation": 0.9, "slow_memory_loss": 0.1,
            "runs": [{"name": "dense utilisation", "op": 0, "M": 128, "K": 256, "N": 128,
                      "a_density": 0.5, "cycles": 1000, "counters": counters}],
            "sparse": [{"density": 0.3, "K": 256, "dense_cycles": 1000, "sparse_cycles": 500,
                        "speedup": 2.0, "ideal": 3.3, "of_ideal": 0.6, "read_words": 400,
                        "bus_bound": 1.0}]}


GEMM_KEYS = ("k", "n", "lanes", "k_par", "n_par", "b_banks")

#: benchmark -> (its figures, per table the block and the parameters its heading must name:
#: ``(block, {name: value})``, in the report's order)
CASES = {
    "monitor": (monitor_figures, [("monitor", MONITOR)]),
    "compactor": (compactor_figures, [("compactor / expander", c["params"])
                                      for c in compactor_figures()["configs"]]),
    "gemm": (gemm_figures, [("gemm", {key: f["params"][key] for key in GEMM_KEYS})
                            for f in gemm_figures().values()]),
    "core": (core_figures, [("core", {key: value for key, value in core_figures()["params"].items()
                                      if key in (*GEMM_KEYS, "table_depth")})]),
    "engine": (engine_figures, [("engine", {key: ENGINE[key] for key in (
        "lanes", "k", "n", "n_par", "acc_rows", "data_width")})]),
}


def heading_line(lines, block, params):
    """The index of the first line that starts with ``block`` and names every parameter."""
    return next((i for i, line in enumerate(lines) if line.strip().startswith(block)
                 and all(f"{key}={value}" in line for key, value in params.items())), None)


def test_every_block_benchmark_is_covered():
    assert set(CASES) == set(bench.BENCHES) - {"estimate"}


@pytest.mark.parametrize("name", CASES)
def test_report_names_block_and_configuration(name, tmp_path, monkeypatch):
    make_figures, headings = CASES[name]
    figures = make_figures()
    text = bench.module(name).report(figures)
    found = [heading_line(text.splitlines(), block, params) for block, params in headings]
    assert None not in found, (headings, text)
    assert found == sorted(found) and found[0] <= 1    # each above its own rows, in order
    # docs/results.md prints the same text under the benchmark's name.
    from verif.flows import results as results_page
    monkeypatch.setattr(results_page, "SYNTH_JSON", tmp_path / "absent.json")
    page = results_page.markdown({name: figures})
    assert f"### {name}\n\n```text\n{text}\n```" in page
