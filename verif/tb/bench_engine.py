"""Layer engine benchmark (docs/engine.md, "Performance"): whole layers on the RTL in Verilator
with a zero-wait memory, each result checked; cycles from the engine's own ``LAYER_CYCLES``.

* Dense-mode MAC utilisation over a layer with ``K = 4k`` and ``N = 2n``: the layer's
  multiply-accumulates over ``LAYER_CYCLES x`` the MACs the array does per cycle.
* Sparse speedup over the same engine forced dense, by density of the streamed operand, against
  the ideal ``1/density`` (the MAC share the zeros leave).
* The same dense layer with every memory channel paused at random (half the cycles): the loss.
  (cocotbext-axi's RAM answers the cycle after a request; the issue's 20-cycle read latency is
  not modelled.)
* The three OPs at density 0.5, dense and sparse.
"""

from __future__ import annotations

import json

from spartan_rtl import runner
from spartan_rtl.bench import SEED

DENSITIES = (0.1, 0.3, 0.5, 0.7)


def _runs(p, quick):
    k, n = p["k"], p["n"]
    rows = 128 if quick else 256   # 256 = acc_rows: a whole row group per step
    dense = dict(op=0, M=rows, K=4 * k, N=2 * n, density=0.5)
    runs = [dict(dense, mode=1, name="dense utilisation")]
    runs.append(dict(dense, mode=1, mem_idle=0.5, name="dense, memory paused 50 %"))
    sweep = dict(op=0, M=rows, K=4 * k, N=n)
    for d in DENSITIES:
        runs += [dict(sweep, density=d, mode=1, name=f"density {d} dense"),
                 dict(sweep, density=d, mode=2, name=f"density {d} sparse")]
    if not quick:
        for op in (1, 2):
            layer = dict(op=op, M=rows, K=2 * k, N=2 * n, density=0.5)
            runs += [dict(layer, mode=1, name=f"OP {op} dense"),
                     dict(layer, mode=2, name=f"OP {op} sparse")]
    return runs


def run(quick=False):
    from spartan_rtl.hw import blocks
    p = blocks.get("engine").resolve({})
    runs = _runs(p, quick)
    test_dir = runner.run("engine", "spartan_rtl.tb.tb_engine", None, sim="verilator",
                          name="bench", testcase="bench_layers", seed=SEED,
                          args={"bench": {"runs": runs}})
    figures = json.loads((test_dir / "bench.json").read_text())
    by = {r["name"]: r for r in figures["runs"]}
    macs_per_cycle = p["k_par"] * p["n_par"]
    util = by["dense utilisation"]
    util_macs = util["M"] * util["K"] * util["N"]
    figures["dense_utilisation"] = util_macs / macs_per_cycle / util["cycles"]
    figures["slow_memory_loss"] = 1 - util["cycles"] / by["dense, memory paused 50 %"]["cycles"]
    figures["sparse"] = []
    for d in DENSITIES:
        dense, sparse = by[f"density {d} dense"], by[f"density {d} sparse"]
        ideal = 1 / sparse["a_density"]
        speedup = dense["cycles"] / sparse["cycles"]
        figures["sparse"].append({"density": sparse["a_density"], "dense_cycles": dense["cycles"],
                                  "sparse_cycles": sparse["cycles"], "speedup": speedup,
                                  "ideal": ideal, "of_ideal": speedup / ideal})
    return figures


def report(f):
    p = f["params"]
    lines = [f"engine: whole layers, defaults (lanes={p['lanes']}, k={p['k']}, n={p['n']}, "
             f"n_par={p['n_par']}, acc_rows={p['acc_rows']}, data_width={p['data_width']}), "
             f"zero-wait memory unless paused",
             f"  {'layer':<28} {'OP':>2} {'M':>5} {'K':>5} {'N':>5} {'density':>7} "
             f"{'cycles':>8} {'A words':>8} {'B words':>8} {'C words':>8}"]
    for r in f["runs"]:
        c = r["counters"]
        lines.append(f"  {r['name']:<28} {r['op']:>2} {r['M']:>5} {r['K']:>5} {r['N']:>5} "
                     f"{r['a_density']:>7.3f} {r['cycles']:>8} {c['A_WORDS']:>8} "
                     f"{c['B_WORDS']:>8} {c['C_WORDS']:>8}")
    lines.append(f"  dense-mode MAC utilisation: {100 * f['dense_utilisation']:.1f} % "
                 f"(target 95 %)")
    lines.append(f"  memory paused 50 % of cycles on every channel: "
                 f"{100 * f['slow_memory_loss']:.1f} % slower")
    lines.append(f"  {'density':>8} {'dense':>8} {'sparse':>8} {'speedup':>8} {'ideal':>6} "
                 f"{'of ideal':>9}")
    for s in f["sparse"]:
        lines.append(f"  {s['density']:>8.3f} {s['dense_cycles']:>8} {s['sparse_cycles']:>8} "
                     f"{s['speedup']:>7.2f}x {s['ideal']:>5.2f}x {100 * s['of_ideal']:>8.1f} %")
    return "\n".join(lines)
