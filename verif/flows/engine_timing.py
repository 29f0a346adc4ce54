"""The layer engine's cycle model (golden/engine_timing.py) against the RTL: whole layers in
Verilator with a zero-wait memory, ``LAYER_CYCLES`` and the bus counters against the model.

    python -m verif.flows.engine_timing [--quick] [--json OUT] [--layers N] [--seed S]

Two configurations: the small one (lanes 4, k 16, n 8, acc_rows 16: many steps per layer,
the short compactor pipeline) with ``--layers`` random layers (every OP, MODE 1 dense and 2
sparse, densities 0.1 to 0.9, some empty rows, dimensions 1 to 59), and the defaults with a
fixed list that covers every OP and mode, several row groups and column chunks, and the
results FIFO's waits (single-chunk row groups at low density, where the writer sets the
pace). The operands are generated here and written to a ``.npz`` that
verif/tb/tb_engine_timing.py reads, so the model sees the very matrices the RTL computed;
every layer is also checked like every layer of the engine's testbench (results, memory,
counters). Prints the error table; ``--json`` writes every layer's figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from spartan_rtl import runner
from spartan_rtl.golden import engine as golden
from spartan_rtl.golden import engine_timing as et
from spartan_rtl.golden.formats import random_elements

#: The small configuration (the engine testbench's second, so its build is shared).
SMALL = dict(lanes=4, width=8, data_width=32, k=16, n=8, n_par=8, acc_rows=16, max_burst=4,
             table_depth=64, max_tile_elems=4096)
#: Layers at the defaults: ``(OP, M, K, N, density, MODE)``.
DEFAULT_LAYERS = [
    (0, 241, 4, 113, 0.5, 1), (1, 195, 81, 56, 0.3, 1), (2, 134, 293, 7, 0.5, 1),
    (0, 108, 2, 57, 0.1, 2), (1, 193, 95, 107, 0.3, 2), (2, 90, 166, 18, 0.7, 2),
    (0, 600, 64, 64, 0.1, 2), (0, 530, 100, 64, 0.2, 2), (1, 600, 70, 60, 0.1, 2),
    (2, 64, 600, 64, 0.1, 2), (1, 520, 60, 130, 0.3, 2), (2, 300, 520, 70, 0.2, 2),
    (0, 530, 64, 64, 0.9, 1), (0, 299, 89, 120, 0.5, 2),
]
QUICK_DEFAULT_LAYERS = [DEFAULT_LAYERS[i] for i in (0, 4, 6, 9)]


def operands(rng, op, M, K, N, density, empty_rows=0.0, width=8):
    sa, sb, _ = golden.operand_shapes(op, M, K, N)
    a = random_elements(rng, sa, width, density)
    if empty_rows:
        a[rng.random(sa[0]) < empty_rows] = 0
    return a, random_elements(rng, sb, width, 0.9)


def random_layers(rng, count, max_dim=60):
    """``count`` random small layers: ``[(OP, M, K, N, density, MODE, empty_rows)]``."""
    out = []
    for _ in range(count):
        op, mode = int(rng.integers(3)), int(rng.choice([1, 2]))
        density = float(rng.choice([0.1, 0.2, 0.3, 0.5, 0.7, 0.9]))
        M, K, N = (int(x) for x in rng.integers(1, max_dim, 3))
        out.append((op, M, K, N, density, mode, 0.3 if rng.random() < 0.2 else 0.0))
    return out


def measure(config, specs, *, seed=2021, name="timing", probe=False, workdir=None):
    """Run ``specs`` (``(OP, M, K, N, density, MODE[, empty_rows])``) on the RTL; returns
    ``(params, [(spec, layer as run, RTL figures)])``."""
    rng = np.random.default_rng(seed)
    layers = []
    for spec in specs:
        op, M, K, N, density, mode = spec[:6]
        a, b = operands(rng, op, M, K, N, density, spec[6] if len(spec) > 6 else 0.0)
        layers.append({"op": op, "mode": mode, "a": a, "b": b})
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "layers.npz"
        out = Path(tmp) / "timing.json"
        et.write_layers(path, layers)
        runner.run("engine", "spartan_rtl.tb.tb_engine_timing", config, sim="verilator",
                   name=name, testcase="timing_layers", seed=seed,
                   args={"layers": str(path), "out": str(out), "probe": probe})
        doc = json.loads(out.read_text())
    return doc["params"], list(zip(specs, layers, doc["layers"]))


def compare(params, runs):
    """Per layer: the RTL's ``LAYER_CYCLES`` and words against the model's."""
    t = et.EngineTiming.of(params)
    rows = []
    for spec, layer, rtl in runs:
        model = et.layer_cycles(layer["op"], layer["a"], rtl["M"], rtl["K"], rtl["N"], t,
                                mode=layer["mode"])
        rows.append({"op": layer["op"], "mode": layer["mode"], "M": rtl["M"], "K": rtl["K"],
                     "N": rtl["N"], "density": spec[4], "steps": model["steps"],
                     "rtl_cycles": rtl["LAYER_CYCLES"], "model_cycles": model["layer_cycles"],
                     "error": rtl["LAYER_CYCLES"] - model["layer_cycles"],
                     "words_error": [rtl[w] - model[w] for w in ("A_WORDS", "B_WORDS",
                                                                  "C_WORDS")],
                     "model": model})
    return rows


def table(label, rows):
    lines = [f"{label}: {len(rows)} layers"]
    errors = np.array([r["error"] for r in rows])
    rel = np.array([r["error"] / r["rtl_cycles"] for r in rows])
    steps = np.array([r["steps"] for r in rows])
    words_exact = sum(not any(r["words_error"]) for r in rows)
    lines.append(f"  words (A, B, C) exact on {words_exact}/{len(rows)} layers")
    lines.append(f"  LAYER_CYCLES exact on {(errors == 0).sum()}/{len(rows)}; error (RTL - model) "
                 f"min {errors.min()}, max {errors.max()}, mean |error| {abs(errors).mean():.1f} "
                 f"cycles, max |error| {100 * abs(rel).max():.3f} %, max |error| per step "
                 f"{abs(errors / steps).max():.2f} cycles")
    by = {}
    for r in rows:
        by.setdefault((r["op"], r["mode"]), []).append(r)
    lines.append(f"  {'OP':>2} {'MODE':>4} {'layers':>6} {'exact':>5} errors (cycles: layers)")
    for (op, mode), group in sorted(by.items()):
        c = Counter(r["error"] for r in group)
        spread = ", ".join(f"{e}: {n}" for e, n in sorted(c.items()))
        lines.append(f"  {op:>2} {mode:>4} {len(group):>6} {c.get(0, 0):>5} {spread}")
    return "\n".join(lines)


def run(quick=False, layers=40, seed=2021):
    rng = np.random.default_rng(seed)
    small = random_layers(rng, 8 if quick else layers)
    out = {}
    params, runs = measure(SMALL, small, seed=seed, name="timing_small")
    out["small"] = {"params": params, "rows": compare(params, runs)}
    params, runs = measure({}, QUICK_DEFAULT_LAYERS if quick else DEFAULT_LAYERS, seed=seed,
                           name="timing_defaults")
    out["defaults"] = {"params": params, "rows": compare(params, runs)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--layers", type=int, default=40, help="random small layers (default 40)")
    ap.add_argument("--seed", type=int, default=2021)
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    out = run(args.quick, args.layers, args.seed)
    for label, res in out.items():
        print(table(label, res["rows"]))
        for r in res["rows"]:
            print(f"    OP {r['op']} MODE {r['mode']} {r['M']:>4}x{r['K']:>4}x{r['N']:>4} "
                  f"d {r['density']:.1f} steps {r['steps']:>3}: RTL {r['rtl_cycles']:>7} "
                  f"model {r['model_cycles']:>7} ({r['error']:+d})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=int))
    return 0


if __name__ == "__main__":
    sys.exit(main())
