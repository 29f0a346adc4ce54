"""Estimate benchmark (``spartan bench estimate``): the answers of issue 6 from the cycle model.

* **networks**: AlexNet, VGG-16, ResNet-18 conv layers (golden/networks.py: ImageNet shapes,
  batch 1, densities = midpoints of the authors' bands) on unstructured random masks; forward
  and weight-gradient GEMMs (golden/estimate.py states the mapping); per-layer and whole-network
  speedup of the adaptive core over dense, beside the paper and the ideal 1/density.
  Per layer, GEMM and tile shape, ``SAMPLES`` random tiles are timed (``QUICK_SAMPLES`` with
  ``--quick``) and their mean scaled to the layer's tile count.
* **profiling**: software profiling cycles (read-back + reduction) against the monitor's.
* **traces**: ``spartan estimate`` on every committed real trace (data/traces/).
* **rtl**: tiles sampled from the real traces run through the GEMM RTL in Verilator
  (verif/tb_estimate.py): cycles against the model (error), results against the golden GEMM.
"""

from __future__ import annotations

import json
from pathlib import Path

from golden import estimate, networks, traces
from verif import runner

SAMPLES = 32
QUICK_SAMPLES = 4
#: Tiles drawn per layer, per GEMM and per trace file for the RTL comparison, and their rows.
RTL_PER_LAYER, RTL_ROWS = 2, 32
TRACES = sorted(Path(__file__).resolve().parent.parent.glob("data/traces/*.npz"))
TARGET_FRACTION_OF_IDEAL = 0.85


def _bar(total, desc):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="layer", leave=False)


def _network_figures(opts, samples):
    out = {}
    for name in networks.NETWORKS:
        table = networks.layers(name)
        with _bar(len(table), name) as bar:
            layers = estimate.estimate_network(name, opts, samples=samples,
                                               progress=lambda _: bar.update())
        total = estimate.totals(layers)
        out[name] = {"layers": [layer.as_dict() for layer in layers], "total": total,
                     "paper": networks.PAPER["speedup"][name],
                     "ideal": networks.ideal_speedup(name),
                     "fraction_of_ideal": total["speedup"] / networks.ideal_speedup(name)}
    return out


def _trace_figures(opts, files):
    out = {}
    for path in files:
        trace = traces.load(path)
        with _bar(len(trace.layers), path.name) as bar:
            layers = estimate.estimate_trace(trace, opts, progress=lambda _: bar.update())
        out[path.name] = {"meta": trace.meta, "layers": [layer.as_dict() for layer in layers],
                          "total": estimate.totals(layers)}
    return out


def _rtl_figures(opts, files, per_layer):
    specs = estimate.sample_trace_tiles(files, per_layer=per_layer, rows=RTL_ROWS,
                                        k=opts.timing.k)
    test_dir = runner.run("gemm", "verif.tb_estimate", None, sim="verilator", name="estimate",
                          testcase="trace_tiles_vs_model", args={"tiles": specs})
    records = json.loads((test_dir / "rtl_model.json").read_text())["records"]
    errors = [abs(r["rtl_cycles"] - r["model_cycles"]) / r["rtl_cycles"] for r in records]
    return {"tiles": len(specs), "rows": RTL_ROWS, "records": records,
            "max_error": max(errors), "exact": sum(e == 0 for e in errors),
            "rtl_cycles": sum(r["rtl_cycles"] for r in records),
            "model_cycles": sum(r["model_cycles"] for r in records)}


def run(quick=False):
    opts = estimate.Options()
    files = TRACES[-1:] if quick else TRACES
    return {
        "options": {"timing": opts.timing.__dict__, "rows": opts.rows,
                    "threshold": opts.threshold,
                    "samples": QUICK_SAMPLES if quick else SAMPLES},
        "networks": _network_figures(opts, QUICK_SAMPLES if quick else SAMPLES),
        "traces": _trace_figures(opts, files),
        "rtl": _rtl_figures(opts, files, 1 if quick else RTL_PER_LAYER),
        "paper_profiling_reduction": networks.PAPER["profiling_overhead_reduction"],
        "target_fraction_of_ideal": TARGET_FRACTION_OF_IDEAL,
    }


def summary_rows(figures):
    """``(network, speedup, paper, ideal, fraction, worst-layer profiling reduction)``."""
    return [(name, f["total"]["speedup"], f["paper"], f["ideal"], f["fraction_of_ideal"],
             f["total"]["profiling"]["min_layer_reduction_stats"],
             f["total"]["profiling"]["min_layer_reduction_registers"])
            for name, f in figures["networks"].items()]


def report(figures):
    o = figures["options"]
    t = o["timing"]
    lines = [f"estimate: conv layers, forward + weight-gradient GEMMs, GEMM k={t['k']} "
             f"n={t['n']} k_par={t['k_par']} n_par={t['n_par']}, tiles of {o['rows']} rows, "
             f"THRESHOLD={o['threshold']:#x}, {o['samples']} random tiles per layer/GEMM/shape",
             f"  {'network':<9} {'speedup':>8} {'paper':>6} {'ideal':>6} {'of ideal':>9} "
             f"{'prof.red (stats / regs, worst layer)':>37}"]
    for name, s, paper, ideal, frac, red_s, red_r in summary_rows(figures):
        ok = "ok" if frac >= figures["target_fraction_of_ideal"] else "BELOW"
        lines.append(f"  {name:<9} {s:>7.2f}x {paper:>5.2f}x {ideal:>5.2f}x {frac:>8.1%} {ok:<5} "
                     f"{red_s:>12.1f}x / {red_r:.1f}x")
    lines.append(f"  (target: >= {figures['target_fraction_of_ideal']:.0%} of ideal; paper's "
                 f"profiling reduction {figures['paper_profiling_reduction']}x)")
    lines.append("  real traces (data/traces):")
    for name, f in figures["traces"].items():
        tot = f["total"]
        per = ", ".join(f"{la['name']} {la['speedup']:.2f}x/{la['ideal']:.2f}x"
                        for la in f["layers"])
        lines.append(f"    {name}: {tot['speedup']:.2f}x (ideal {tot['ideal']:.2f}x); {per}")
    r = figures["rtl"]
    lines.append(f"  model vs RTL (Verilator, {len(r['records'])} real-trace tiles of <= "
                 f"{r['rows']} rows, sparse and dense forms): {r['exact']} exact, max error "
                 f"{r['max_error']:.2%}; cycles RTL {r['rtl_cycles']} model {r['model_cycles']}; "
                 f"results exact (scoreboard)")
    return "\n".join(lines)
