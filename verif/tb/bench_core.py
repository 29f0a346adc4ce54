"""Core benchmark: one layer of 16 tiles at a ReLU-like density mix, cycles in auto mode after
a warm-up pass against forced dense, in Verilator (the same run, so the ratio is exact)."""

from __future__ import annotations

import json

import numpy as np

from spartan_rtl import runner
from spartan_rtl.tb.benchmark import SEED, block_config

#: Densities (nonzero share) of the layer's 16 tiles: ReLU outputs mostly 25-70 % dense, with
#: a few nearly dense and nearly empty tiles.
DENSITIES = [0.25, 0.35, 0.45, 0.55, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9, 0.95, 0.05, 0.3, 0.45, 0.6, 0.35]
THRESHOLD = 0xC0  # sparse iff density <= 75 %


def run(quick=False):
    rows = 16 if quick else 64
    test_dir = runner.run("core", "spartan_rtl.tb.tb_core", None, sim="verilator", name="bench",
                          testcase="bench_layer",
                          seed=SEED, args={"bench": {"rows": rows, "densities": DENSITIES,
                                          "threshold": THRESHOLD}})
    figures = json.loads((test_dir / "bench.json").read_text())
    by = {p["pass"]: p for p in figures["passes"]}
    figures["speedup_auto_vs_dense"] = by["dense"]["cycles"] / by["auto"]["cycles"]
    figures["mean_density"] = float(np.mean(DENSITIES))
    return figures


def report(f):
    config = block_config("core", f["params"], ("lanes", "k", "n", "k_par", "n_par",
                                                 "b_banks", "table_depth"))
    lines = [f"{config}: one layer of {len(f['densities'])} tiles x {f['rows']} rows, "
             f"THRESHOLD={f['threshold']:#x}",
             f"  {'pass':<8} {'cycles':>8} {'sparse tiles':>13} {'MACS_DONE':>10} "
             f"{'MACS_SKIPPED':>13} {'STALL':>6} {'CONFLICT':>9}"]
    for p in f["passes"]:
        c = p["counters"]
        lines.append(f"  {p['pass']:<8} {p['cycles']:>8} {p['sparse_tiles']:>13} "
                     f"{c['MACS_DONE']:>10} {c['MACS_SKIPPED']:>13} {c['STALL_CYCLES']:>6} "
                     f"{c['CONFLICT_CYCLES']:>9}")
    lines.append(f"  speedup auto vs dense: {f['speedup_auto_vs_dense']:.2f}x "
                 f"(mean density {f['mean_density']:.2f}, ideal {1 / f['mean_density']:.2f}x)")
    return "\n".join(lines)
