"""GEMM benchmark: cycles of a 64-row tile per density, as ZVC rows (sparse) and as all-ones
masks (dense bypass form), in Verilator with inputs always valid and ``m_axis_c`` always ready.

Per density: speedup = dense / sparse cycles, the ideal 1/density (from the tile's actual
nonzero count), their ratio, the cycle model's prediction (must equal the RTL), conflict cycles
and MAC utilisation (useful MACs / (cycles * k_par * n_par)). The sparse cycles are split into
ideal passes (nnz / k_par per column group), passes lost to partial groups, to bank conflicts,
and the rest (pipeline fill, rows waiting for their load or for the output).
"""

from __future__ import annotations

import json

from spartan_rtl import runner
from spartan_rtl.tb.benchmark import SEED, block_config

DENSITIES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
ROWS = 64

#: name -> parameters: the default broadcast datapath, the replicated one it replaced (same 64
#: MACs), a double-size broadcast array, and the replicated one without replication (classic
#: banking) to show what its conflict scheme costs.
CONFIGS = {
    "defaults: broadcast (k_par 1, n_par 64)": {},
    "replicated (k_par 4, n_par 16, b_banks 1)": dict(k_par=4, n_par=16),
    "large broadcast (K=N=128, n_par 128)": dict(k=128, n=128, n_par=128),
    "replicated, banked (k_par 4, n_par 16, b_banks 4)": dict(k_par=4, n_par=16, b_banks=4),
}


def run(quick=False):
    out = {}
    names = list(CONFIGS)[:1] if quick else list(CONFIGS)
    densities = (0.1, 0.3, 0.5, 1.0) if quick else DENSITIES
    for name in names:
        test_dir = runner.run("gemm", "spartan_rtl.tb.tb_gemm", CONFIGS[name], sim="verilator",
                              name="bench", testcase="bench",
                              seed=SEED, args={"bench": list(densities), "rows": ROWS})
        out[name] = json.loads((test_dir / "bench.json").read_text())
    return out


def report(figures):
    lines = [f"gemm: one {ROWS}-row tile per density, inputs always valid, C always ready"]
    for name, fig in figures.items():
        p = fig["params"]
        macs = p["k_par"] * p["n_par"]
        config = block_config("gemm", p, ("k", "n", "lanes", "k_par", "n_par", "b_banks"))
        lines.append(f"  {config}, {name}: {macs} MACs/cycle, "
                     f"{p['k_par'] // p['b_banks']} copies of B")
        lines.append(f"  {'dens':>5} {'sparse':>7} {'dense':>7} {'speedup':>8} {'ideal':>6} "
                     f"{'ratio':>6} {'model':>6} {'confl':>6} {'util_s':>6} {'util_d':>6} "
                     f"| {'ideal':>6} {'partial':>7} {'confl':>6} {'other':>6}")
        for r in fig["results"]:
            s, d = r["sparse"], r["dense"]
            density = s["nnz"] / (fig["rows"] * p["k"])
            speedup = d["cycles"] / s["cycles"]
            ideal = 1 / density if density else float("inf")
            other = s["cycles"] - s["passes"]
            model_ok = "ok" if (s["cycles"], d["cycles"]) == (s["model_cycles"],
                                                              d["model_cycles"]) else "DIFF"
            lines.append(
                f"  {density:>5.2f} {s['cycles']:>7} {d['cycles']:>7} {speedup:>8.2f} "
                f"{ideal:>6.2f} {speedup / ideal:>6.2f} {model_ok:>6} {s['conflict_cycles']:>6} "
                f"{s['useful_macs'] / (s['cycles'] * macs):>6.1%} "
                f"{d['useful_macs'] / (d['cycles'] * macs):>6.1%} "
                f"| {s['ideal_passes']:>6.0f} {s['partial_passes']:>7.0f} "
                f"{s['conflict_cycles']:>6} {other:>6}")
    lines.append("  (util_d counts every MAC of the dense form, zeros included: the datapath's "
                 "utilisation; sparse cycles = ideal + partial + conflict + other)")
    return "\n".join(lines)
