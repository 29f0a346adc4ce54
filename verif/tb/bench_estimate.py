"""Estimate benchmark (``spartan bench estimate``): issues 6 and 16 from the cycle model.

* **networks**: AlexNet, VGG-16, ResNet-18 conv layers (golden/networks.py: ImageNet shapes,
  batch 1, input densities = midpoints of the authors' bands, output-error densities derived
  from what follows each conv) on unstructured random masks; the three GEMMs of a training
  step (spartan_rtl/estimate.py states the mapping); per-GEMM, whole-step and forward-only
  speedups of the adaptive core over dense, beside the paper and the ideal bound of each GEMM.
  Per layer, GEMM and tile shape, ``SAMPLES`` random tiles are timed (``QUICK_SAMPLES`` with
  ``--quick``) and their mean scaled to the layer's tile count.
* **profiling**: software profiling cycles (read-back + reduction) against the monitor's.
* **traces**: ``spartan estimate`` on every committed real trace (data/traces/): measured input
  and output-error densities, every GEMM; the weight gradient on the hypothetical two-sided
  datapath (:func:`spartan_rtl.estimate.two_sided`).
* **last pass**: per consecutive pair of saved epochs, the decisions taken from the earlier one
  against each tile's own density (:func:`spartan_rtl.estimate.last_pass`).
* **rtl**: tiles sampled from the real traces (every streamed operand, output errors included)
  run through the GEMM RTL in Verilator (verif/tb/tb_estimate.py): cycles against the model
  (error), results against the golden GEMM.
"""

from __future__ import annotations

import json

from spartan_rtl import estimate, runner, shipped
from spartan_rtl.golden import networks, traces
from spartan_rtl.tb.benchmark import SEED

SAMPLES = 32
QUICK_SAMPLES = 4
#: Tiles drawn per layer, per streamed operand and per trace file for the RTL comparison, and
#: their rows.
RTL_PER_LAYER, RTL_ROWS = 2, 32
#: The recorded activation traces: the source tree's data/traces/, or from the wheel its one
#: sample (digits_cnn_epoch15.npz: the quick run's traces; no last-pass rows, they need two).
TRACE_DIR = shipped("traces")
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
        ideal = networks.ideal_speedup(name)
        out[name] = {"layers": [layer.as_dict() for layer in layers], "total": total,
                     "paper": networks.PAPER["speedup"][name], "ideal": ideal,
                     "gemm_ideal": {g: networks.ideal_speedup(name, (g,))
                                    for g in estimate.GEMMS},
                     "fraction_of_ideal": total["speedup"] / ideal,
                     "structure": [{"name": g.name, "after": g.after,
                                    "dy_density": g.dy_density, "dy_basis": g.dy_basis}
                                   for g in table]}
    return out


def _trace_figures(opts, files):
    out = {}
    for path in files:
        trace = traces.load(path)
        with _bar(2 * len(trace.layers), path.name) as bar:
            layers = estimate.estimate_trace(trace, opts, progress=lambda _: bar.update())
            two = {}
            for layer in trace.layers:
                if layer.dy is not None:
                    two[layer.name] = estimate.two_sided(estimate.nonzero(layer.a),
                                                         estimate.nonzero(layer.dy), opts)
                bar.update()
        out[path.name] = {"meta": trace.meta, "layers": [layer.as_dict() for layer in layers],
                          "total": estimate.totals(layers), "two_sided": two}
    return out


def _last_pass_figures(opts, files):
    out = []
    for before, after in zip(files, files[1:]):
        prev, cur = traces.load(before), traces.load(after)
        if any(layer.dy is None for layer in (*prev.layers, *cur.layers)):
            continue
        with _bar(len(cur.layers), f"{before.name} -> {after.name}") as bar:
            rows = estimate.last_pass(prev, cur, opts, progress=lambda _: bar.update())
        out.append({"previous": before.name, "current": after.name,
                    "previous_epoch": prev.meta.get("epoch"),
                    "current_epoch": cur.meta.get("epoch"), "rows": rows,
                    "decisions": sum(r["decisions"] for r in rows),
                    "differ": sum(r["differ"] for r in rows),
                    "oracle_cycles": sum(r["oracle_cycles"] for r in rows),
                    "last_pass_cycles": sum(r["last_pass_cycles"] for r in rows)})
    return out


def _rtl_figures(opts, files, per_layer):
    specs = estimate.sample_trace_tiles(files, per_layer=per_layer, rows=RTL_ROWS,
                                        k=opts.timing.k)
    test_dir = runner.run("gemm", "spartan_rtl.tb.tb_estimate", None, sim="verilator",
                          name="estimate", testcase="trace_tiles_vs_model", seed=SEED,
                          args={"tiles": specs})
    records = json.loads((test_dir / "rtl_model.json").read_text())["records"]
    errors = [abs(r["rtl_cycles"] - r["model_cycles"]) / r["rtl_cycles"] for r in records]
    return {"tiles": len(specs), "rows": RTL_ROWS, "records": records,
            "max_error": max(errors), "exact": sum(e == 0 for e in errors),
            "rtl_cycles": sum(r["rtl_cycles"] for r in records),
            "model_cycles": sum(r["model_cycles"] for r in records)}


def trace_files():
    return sorted(TRACE_DIR.glob("*.npz"))


def run(quick=False):
    opts = estimate.Options()
    traces_all = trace_files()
    files = traces_all[-1:] if quick else traces_all
    return {
        "options": {"timing": opts.timing.__dict__, "rows": opts.rows,
                    "threshold": opts.threshold,
                    "samples": QUICK_SAMPLES if quick else SAMPLES},
        "networks": _network_figures(opts, QUICK_SAMPLES if quick else SAMPLES),
        "traces": _trace_figures(opts, files),
        "last_pass": _last_pass_figures(opts, traces_all[-2:] if quick else traces_all),
        "rtl": _rtl_figures(opts, files, 1 if quick else RTL_PER_LAYER),
        "paper_profiling_reduction": networks.PAPER["profiling_overhead_reduction"],
        "target_fraction_of_ideal": TARGET_FRACTION_OF_IDEAL,
    }


def summary_rows(figures):
    """``(network, whole step, paper, ideal, fraction, forward only, worst-layer profiling
    reduction (stats beat, AXI4-Lite reads))``."""
    return [(name, f["total"]["speedup"], f["paper"], f["ideal"], f["fraction_of_ideal"],
             f["total"]["gemms"]["forward"]["speedup"],
             f["total"]["profiling"]["min_layer_reduction_stats"],
             f["total"]["profiling"]["min_layer_reduction_registers"])
            for name, f in figures["networks"].items()]


def _gemm_cells(total, ideals=None):
    return ", ".join(f"{g} {v['speedup']:.2f}x/{(ideals or {}).get(g, v['ideal']):.2f}x"
                     for g, v in total["gemms"].items())


def report(figures):
    o = figures["options"]
    t = o["timing"]
    lines = [f"estimate: conv layers, the three GEMMs of a training step, GEMM k={t['k']} "
             f"n={t['n']} k_par={t['k_par']} n_par={t['n_par']}, tiles of {o['rows']} rows, "
             f"THRESHOLD={o['threshold']:#x}, {o['samples']} random tiles per layer/GEMM/shape",
             f"  {'network':<9} {'step':>7} {'paper':>6} {'ideal':>6} {'of ideal':>9} "
             f"{'fwd only':>9}  per GEMM speedup/ideal; prof.red (stats / regs, worst layer)"]
    for name, s, paper, ideal, frac, fwd, red_s, red_r in summary_rows(figures):
        f = figures["networks"][name]
        ok = "ok" if frac >= figures["target_fraction_of_ideal"] else "BELOW"
        lines.append(f"  {name:<9} {s:>6.2f}x {paper:>5.2f}x {ideal:>5.2f}x {frac:>8.1%} {ok:<5}"
                     f"{fwd:>5.2f}x  {_gemm_cells(f['total'], f['gemm_ideal'])}; "
                     f"{red_s:.1f}x / {red_r:.1f}x")
    lines.append(f"  (target: >= {figures['target_fraction_of_ideal']:.0%} of ideal; paper's "
                 f"profiling reduction {figures['paper_profiling_reduction']}x)")
    lines.append("  real traces (data/traces/; from the wheel, its sample): whole step (ideal), "
                 "per GEMM; per layer density A / dY, step speedup; wgrad two-sided gain (cycle "
                 "model / MAC bound)")
    for name, f in figures["traces"].items():
        tot = f["total"]
        per = ", ".join(
            f"{la['name']} {la['density']:.2f}/"
            + ("-" if la["dy_density"] is None else f"{la['dy_density']:.2f}")
            + f" {la['speedup']:.2f}x"
            + (f" 2s {f['two_sided'][la['name']]['gain']:.3f}x/"
               f"{f['two_sided'][la['name']]['mac_bound_gain']:.2f}x"
               if la["name"] in f["two_sided"] else "")
            for la in f["layers"])
        lines.append(f"    {name}: {tot['speedup']:.2f}x ({tot['ideal']:.2f}x); "
                     f"{_gemm_cells(tot)}; {per}")
    for lp in figures.get("last_pass", []):
        lines.append(f"  last pass {lp['previous']} -> {lp['current']}: {lp['differ']} of "
                     f"{lp['decisions']} decisions differ from the oracle, cycles "
                     f"{lp['last_pass_cycles'] / lp['oracle_cycles'] - 1:+.3%}")
    r = figures["rtl"]
    lines.append(f"  model vs RTL (Verilator, {len(r['records'])} real-trace tiles of <= "
                 f"{r['rows']} rows, every streamed operand, sparse and dense forms): "
                 f"{r['exact']} exact, max error "
                 f"{r['max_error']:.2%}; cycles RTL {r['rtl_cycles']} model {r['model_cycles']}; "
                 f"results exact (scoreboard)")
    return "\n".join(lines)
