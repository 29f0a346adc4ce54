"""Layer engine benchmark (docs/engine.md, "Performance"): whole layers on the RTL in Verilator
with a zero-wait memory, each result checked; cycles from the engine's own ``LAYER_CYCLES``.

* Dense-mode MAC utilisation over a layer with ``K = 4k`` and ``N = 2n``: the layer's
  multiply-accumulates over ``LAYER_CYCLES x`` the MACs the array does per cycle.
* Sparse speedup over the same engine forced dense, by density of the streamed operand, against
  the ideal ``1/density`` (the MAC share the zeros leave).
* The same dense layer (and, in the full run, the density-0.3 sparse one) with a slow memory:
  every channel paused at random half the cycles, and each read burst's first beat at least
  20 cycles after its AR (later bursts queue behind it, up to 8): the loss.
* The three OPs at density 0.5, dense and sparse.
* Beside each sparse figure, the read bus's bound: the streamed operand is read dense and
  compacted on chip, so a layer takes at least its ``A`` and ``B`` words (one a cycle); the
  share of the ideal that allows.
"""

from __future__ import annotations

import json

from spartan_rtl import runner
from spartan_rtl.tb.benchmark import SEED

DENSITIES = (0.1, 0.3, 0.5, 0.7)


def _runs(p, quick):
    k, n = p["k"], p["n"]
    rows = 128 if quick else 256   # 256 = acc_rows: a whole row group per step
    dense = dict(op=0, M=rows, K=4 * k, N=2 * n, density=0.5)
    runs = [dict(dense, mode=1, name="dense utilisation")]
    slow = dict(mem_idle=0.5, read_latency=20)
    runs.append(dict(dense, mode=1, **slow, name="dense, slow memory"))
    sweep = dict(op=0, M=rows, K=4 * k, N=n)
    for d in DENSITIES:
        runs += [dict(sweep, density=d, mode=1, name=f"density {d} dense"),
                 dict(sweep, density=d, mode=2, name=f"density {d} sparse")]
    if not quick:
        # A deeper layer (K = 16k = 1024 at the defaults: between VGG-16 conv2's 576 and
        # conv3's 1152): the drain and the first load are the layer's, the B loads the steps'.
        deep = dict(sweep, K=16 * k, density=0.3)
        runs += [dict(deep, mode=1, name="deep 0.3 dense"),
                 dict(deep, mode=2, name="deep 0.3 sparse"),
                 dict(sweep, density=0.3, mode=2, **slow, name="density 0.3 sparse, slow")]
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
    figures["slow_memory_loss"] = 1 - util["cycles"] / by["dense, slow memory"]["cycles"]
    if "density 0.3 sparse, slow" in by:
        figures["slow_memory_loss_sparse"] = (1 - by["density 0.3 sparse"]["cycles"]
                                              / by["density 0.3 sparse, slow"]["cycles"])
    figures["sparse"] = []
    pairs = [(by[f"density {d} dense"], by[f"density {d} sparse"]) for d in DENSITIES]
    if "deep 0.3 dense" in by:
        pairs.append((by["deep 0.3 dense"], by["deep 0.3 sparse"]))
    for dense, sparse in pairs:
        ideal = 1 / sparse["a_density"]
        speedup = dense["cycles"] / sparse["cycles"]
        # The read bus moves one word a cycle, and the streamed operand is read dense (it is
        # compacted on chip): a layer cannot take fewer cycles than its A and B words.
        c = sparse["counters"]
        read_words = c["A_WORDS"] + c["B_WORDS"]
        ideal_cycles = dense["cycles"] / ideal
        figures["sparse"].append({"density": sparse["a_density"], "K": sparse["K"],
                                  "dense_cycles": dense["cycles"],
                                  "sparse_cycles": sparse["cycles"], "speedup": speedup,
                                  "ideal": ideal, "of_ideal": speedup / ideal,
                                  "read_words": read_words,
                                  "bus_bound": min(1.0, ideal_cycles / read_words)})
    return figures


def report(f):
    p = f["params"]
    lines = [f"engine: whole layers, defaults (lanes={p['lanes']}, k={p['k']}, n={p['n']}, "
             f"n_par={p['n_par']}, acc_rows={p['acc_rows']}, data_width={p['data_width']}), "
             f"zero-wait memory unless slow",
             f"  {'layer':<28} {'OP':>2} {'M':>5} {'K':>5} {'N':>5} {'density':>7} "
             f"{'cycles':>8} {'A words':>8} {'B words':>8} {'C words':>8}"]
    for r in f["runs"]:
        c = r["counters"]
        lines.append(f"  {r['name']:<28} {r['op']:>2} {r['M']:>5} {r['K']:>5} {r['N']:>5} "
                     f"{r['a_density']:>7.3f} {r['cycles']:>8} {c['A_WORDS']:>8} "
                     f"{c['B_WORDS']:>8} {c['C_WORDS']:>8}")
    lines.append(f"  dense-mode MAC utilisation: {100 * f['dense_utilisation']:.1f} % "
                 f"(target 95 %)")
    lines.append(f"  slow memory (every channel paused half the cycles, reads answered 20 "
                 f"cycles after their AR): dense {100 * f['slow_memory_loss']:.1f} % slower"
                 + (f", density 0.3 sparse {100 * f['slow_memory_loss_sparse']:.1f} % slower"
                    if "slow_memory_loss_sparse" in f else ""))
    lines.append(f"  {'density':>8} {'K':>5} {'dense':>8} {'sparse':>8} {'speedup':>8} "
                 f"{'ideal':>6} {'of ideal':>9} {'read words':>10} {'bus bound':>9}")
    for s in f["sparse"]:
        lines.append(f"  {s['density']:>8.3f} {s['K']:>5} {s['dense_cycles']:>8} "
                     f"{s['sparse_cycles']:>8} "
                     f"{s['speedup']:>7.2f}x {s['ideal']:>5.2f}x {100 * s['of_ideal']:>8.1f} % "
                     f"{s['read_words']:>10} {100 * s['bus_bound']:>7.1f} %")
    lines.append("  bus bound: the share of the ideal a layer could reach if it took no more "
                 "cycles than its A and B words (one a cycle)")
    return "\n".join(lines)
