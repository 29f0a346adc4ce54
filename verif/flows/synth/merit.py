"""The figure of merit of a block with a dense-only twin (the GEMM, the layer engine) against
that twin: cycles from the block's cycle model (one GEMM tile of random masks; one engine layer
of random operands), throughput per 1000 LUT, per DSP and per transistor; and the targets of
issue #12 checked on a report."""

from __future__ import annotations

from .families import ASIC
from .place import normalised
from .sizing import _tag, pair_key

#: Figure of merit: one tile of this many rows, unstructured random masks at these densities.
TILE_ROWS = 64
DENSITIES = (0.3, 0.5, 0.7)
MASK_SEED = 2021


def random_masks(k, density, rows=TILE_ROWS, seed=MASK_SEED):
    """``rows`` row masks of ``k`` bits, each bit set independently with probability
    ``density`` (unstructured sparsity), and the fraction actually set."""
    import numpy as np
    bits = np.random.default_rng(seed).random((rows, k)) < density
    masks = [sum(1 << int(j) for j in np.flatnonzero(row)) for row in bits]
    return masks, float(bits.mean())


def model_cycles(params, densities=DENSITIES, rows=TILE_ROWS, seed=MASK_SEED, block="gemm"):
    """Cycles of the work the figure of merit times, at each density, from ``block``'s cycle
    model (the dense-only build's timing treats everything as dense), with its dense-equivalent
    ``macs``. The GEMM: one tile of ``rows`` random masks. The engine: one forward layer of
    :func:`engine_layer` with a random ``X`` (each element nonzero with probability =
    density), forced sparse (golden/engine_timing.py, equal to the RTL's by the engine's
    tests)."""
    if block == "engine":
        return engine_model_cycles(params, densities, seed)
    from spartan_rtl.golden.gemm import GemmTiming, simulate
    timing = GemmTiming.of(params)
    points = []
    for density in densities:
        masks, actual = random_masks(params["k"], density, rows, seed)
        points.append({"density": density, "actual": round(actual, 4),
                       "cycles": simulate([masks], timing)[0].cycles})
    return {"rows": rows, "mask_seed": seed, "macs": rows * params["k"] * params["n"],
            "points": points}


def engine_layer(params):
    """``(M, K, N)`` of the engine's figure-of-merit layer: the benchmark's dense-utilisation
    layer (verif/tb/bench_engine.py), a whole row group (``acc_rows``), ``K = 4k``, ``N = 2n``."""
    return params["acc_rows"], 4 * params["k"], 2 * params["n"]


def engine_model_cycles(params, densities=DENSITIES, seed=MASK_SEED):
    import numpy as np

    from spartan_rtl.golden import engine_timing as et
    M, K, N = engine_layer(params)
    timing = et.EngineTiming.of(params)
    rng = np.random.default_rng(seed)
    points = []
    for density in densities:
        x = rng.random((M, K)) < density
        points.append({"density": density, "actual": round(float(x.mean()), 4),
                       "cycles": et.layer_cycles(0, x, M, K, N, timing,
                                                 mode=2)["layer_cycles"]})
    return {"layer": [M, K, N], "mask_seed": seed, "macs": M * K * N, "points": points}


def figure_of_merit(sparse, dense):
    """The GEMM ``sparse`` entry against its dense-only ``dense`` twin (entries of one FPGA
    family, both placed, with their ``model`` cycles): per density the cycle speedup, the
    effective throughput (dense-equivalent GMAC/s) of each, per 1000 LUT and per DSP, and the
    sparse/dense ratios (the iso-area gains; ``None`` where a build has no DSP)."""
    def macs(entry):
        return entry["model"]["macs"]

    def ratio(a, b):
        return a / b if a is not None and b else None

    points = []
    for ps, pd in zip(sparse["model"]["points"], dense["model"]["points"]):
        gmacs = [macs(e) / p["cycles"] * e["fmax_mhz"] / 1e3
                 for e, p in ((sparse, ps), (dense, pd))]
        per_klut = [g / (e["lut"] / 1e3) for g, e in zip(gmacs, (sparse, dense))]
        per_dsp = [g / e["dsp"] if e["dsp"] else None for g, e in zip(gmacs, (sparse, dense))]
        points.append({"density": ps["density"], "actual": ps["actual"],
                       "cycles": [ps["cycles"], pd["cycles"]],
                       "speedup": pd["cycles"] / ps["cycles"],
                       "gmacs": gmacs, "per_klut": per_klut, "per_dsp": per_dsp,
                       "gain_lut": ratio(*per_klut), "gain_dsp": ratio(*per_dsp)})
    return {"macs_per_cycle": [e["params"]["k_par"] * e["params"]["n_par"]
                               for e in (sparse, dense)],
            "lut_ratio": sparse["lut"] / dense["lut"], "ff_ratio": sparse["ff"] / dense["ff"],
            "points": points}


def asic_merit(sparse, dense):
    """The ASIC proxy of a GEMM size against its twin: the ratios of transistors, flip-flops
    and memory bits, and per density the gain in throughput per transistor at the same clock
    (cycles from the model)."""
    def ratio(key):
        return sparse[key] / dense[key] if dense[key] else None

    gains = [(pd["cycles"] / ps["cycles"]) * (dense["transistors"] / sparse["transistors"])
             for ps, pd in zip(sparse["model"]["points"], dense["model"]["points"])]
    return {"transistor_ratio": ratio("transistors"), "ff_ratio": ratio("ffs"),
            "memory_ratio": ratio("memory_bits"),
            "points": [{"density": p["density"], "gain_transistor": g}
                       for p, g in zip(sparse["model"]["points"], gains)]}


def twin_pairs(runs, family):
    """``[(sparse entry, dense-only entry)]`` of ``family``: every sparse size whose twin is
    in ``runs``. FPGA pairs must both be placed, on the same device."""
    found = {}
    for r in runs:
        if r["family"] == family and "sparse" in r["params"] and "model" in r:
            found[(r["block"], pair_key(r["changed"]), r["params"]["sparse"])] = r
    pairs = []
    for (block, key, sparse), r in found.items():
        dense = found.get((block, key, False))
        if not sparse or dense is None:
            continue
        if family != ASIC and not (r["fits"] and dense["fits"] and r["device"] == dense["device"]
                                   and r["fmax_mhz"] and dense["fmax_mhz"]):
            continue
        pairs.append((r, dense))
    return pairs


#: Timing targets of issue #12 (ECP5, mean over seeds): (block, overrides, MHz, what).
FMAX_TARGETS = (
    *((b, changed, 150.0, f"{b} at {_tag(changed)}") for b in ("monitor", "compactor", "expander")
      for changed in ({}, {"lanes": 16})),
    ("core", {}, 125.0, "core at defaults"),
    ("gemm", {"sparse": False}, 150.0, "dense-only gemm at defaults"),
    ("gemm", {}, 125.0, "sparse gemm at defaults"),
)
#: The sparse GEMM at twice the default's MACs/cycle (issue #12: k_par=4,n_par=32 when the
#: defaults were k_par=4,n_par=16) must reach this too.
DOUBLE_GEMM_MHZ = 125.0
TARGET_FAMILY = "ecp5"


def _find(runs, block, changed, family):
    from spartan_rtl.hw import blocks
    want = blocks.get(block).resolve(changed)
    return next((r for r in runs if r["block"] == block and r["family"] == family
                 and r["params"] == want), None)


def targets(doc):
    """``[(target, measured, status)]`` for the targets of issue #12 items 2-3, status one of
    ``met``, ``NOT met``, ``not measured``."""
    runs = normalised(doc)["runs"]
    rows = []

    def check(what, value, ok, shown):
        rows.append((what, shown if value is not None else "n/a",
                     "not measured" if value is None else "met" if ok else "NOT met"))

    from spartan_rtl.hw import blocks
    timed = [(f"{what} >= {mhz:g} MHz", _find(runs, block, changed, TARGET_FAMILY), mhz)
             for block, changed, mhz, what in FMAX_TARGETS]
    default = blocks.get("gemm").resolve()
    double = [r for r in runs if r["block"] == "gemm" and r["family"] == TARGET_FAMILY
              and r["params"]["sparse"] and r["params"]["k_par"] * r["params"]["n_par"]
              == 2 * default["k_par"] * default["n_par"]]
    what = "sparse gemm at twice the default MACs/cycle"
    timed += [(f"{what} ({r['size']}) >= {DOUBLE_GEMM_MHZ:g} MHz", r, DOUBLE_GEMM_MHZ)
              for r in double] or [(f"{what} >= {DOUBLE_GEMM_MHZ:g} MHz", None, DOUBLE_GEMM_MHZ)]
    for label, r, mhz in timed:
        value = r["fmax_mhz"] if r and r["fits"] else None
        check(label, value, value is not None and value >= mhz,
              f"{value:.1f} MHz (min {r['fmax_min']:.1f}, {_seeds(len(r['seeds']))})"
              if value is not None else None)
    sparse = _find(runs, "gemm", {}, TARGET_FAMILY)
    dense = _find(runs, "gemm", {"sparse": False}, TARGET_FAMILY)
    pair = next(((s, d) for s, d in twin_pairs(runs, TARGET_FAMILY)
                 if s is sparse and d is dense), None)
    fom = figure_of_merit(*pair) if pair else None
    for key, limit in (("lut", 0.25), ("ff", 0.35)):
        extra = fom[f"{key}_ratio"] - 1 if fom else None
        check(f"sparse {key.upper()} <= +{limit:.0%} over dense-only at defaults", extra,
              extra is not None and extra <= limit, f"{extra:+.1%}" if fom else None)
    by_density = {p["density"]: p for p in fom["points"]} if fom else {}
    for key, density, limit in (("gain_lut", 0.5, 1.5), ("gain_lut", 0.7, 1.1),
                                ("gain_dsp", 0.5, 1.8)):
        value = by_density[density][key] if density in by_density else None
        per = "LUT" if key == "gain_lut" else "DSP"
        check(f"iso-area gain per {per} >= {limit}x at density {density}", value,
              value is not None and value >= limit, f"{value:.2f}x" if value is not None else None)
    for density in DENSITIES:
        p = by_density.get(density)
        bound = 0.9 / p["actual"] if p else None
        check(f"cycle speedup >= 0.9 x 1/density at {density}", p and p["speedup"],
              p is not None and p["speedup"] >= bound,
              f"{p['speedup']:.2f}x (bound {bound:.2f}x at actual density {p['actual']:.3f})"
              if p else None)
    _engine_targets(runs, check)
    return rows


def _engine_targets(runs, check):
    """Issue #22 item 7: the engine at its defaults fits an LFE5U-45F, its Fmax, and its gain
    per LUT against its dense-only twin at density 0.5."""
    engine = _find(runs, "engine", {}, TARGET_FAMILY)
    placed = engine if engine and engine["fits"] else None
    fits = placed and placed["device"].startswith("LFE5U-45F")
    check("engine at defaults fits an LFE5U-45F", placed and placed["device"], fits,
          f"{placed['device']}, {placed['lut']} LUT4" if placed else None)
    value = placed["fmax_mhz"] if placed else None
    check("engine at defaults >= 110 MHz", value, value is not None and value >= 110.0,
          f"{value:.1f} MHz (min {placed['fmax_min']:.1f}, {_seeds(len(placed['seeds']))})"
          if placed else None)
    twin = _find(runs, "engine", {"sparse": False}, TARGET_FAMILY)
    pair = next(((s, d) for s, d in twin_pairs(runs, TARGET_FAMILY)
                 if s is engine and d is twin), None)
    point = next((q for q in figure_of_merit(*pair)["points"] if q["density"] == 0.5),
                 None) if pair else None
    gain = point["gain_lut"] if point else None
    check("engine iso-area gain per LUT >= 1.5x at density 0.5 (against its dense-only twin)",
          gain, gain is not None and gain >= 1.5, f"{gain:.2f}x" if gain is not None else None)


def _seeds(count):
    return f"{count} seed" + ("" if count == 1 else "s")
