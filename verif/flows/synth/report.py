"""The report: entries merged into ``docs/synth.json`` (one per block, size and family) and
rendered to ``docs/synth.md`` (:func:`markdown`), the summary docs/results.md shows
(:func:`merit_summary_markdown`), and the progress lines a run prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from verif.flows import ROOT

from .families import ASIC, FAMILIES
from .merit import (
    DENSITIES,
    TARGET_FAMILY,
    _find,
    _seeds,
    asic_merit,
    figure_of_merit,
    model_cycles,
    targets,
    twin_pairs,
)
from .place import TARGET_MHZ, normalised
from .sizing import _tag, pair_key, sizes
from .tools import _lock, tool_versions

JSON_PATH = ROOT / "docs" / "synth.json"
MARKDOWN_PATH = ROOT / "docs" / "synth.md"


def _family_order(family):
    order = [*FAMILIES, ASIC]
    return order.index(family) if family in order else len(order)


def merge(fresh, json_path=JSON_PATH, markdown_path=MARKDOWN_PATH, freq=TARGET_MHZ, keep=None,
          failed=()):
    """Merge entries into ``json_path`` (one per block, size and family) and rewrite
    ``markdown_path``, under a lock, re-reading the file: another run may have merged its
    blocks meanwhile. Entries of sizes no longer declared (nor in ``keep``, ``{(block, size
    tag): parameters}``), or whose parameters the size no longer resolves to, are dropped.
    ``failed``: records of jobs that failed (:meth:`Build.failure`), kept under ``failures``
    in place of the block, size and family's entry until an entry replaces them."""
    from spartan_rtl.hw import blocks
    with _lock(".merge"):
        doc = json.loads(Path(json_path).read_text()) if Path(json_path).exists() else {}
        declared = {(b.name, _tag(s)): b.resolve(s) for b in blocks.BLOCKS.values()
                    for s in sizes(b)}
        declared.update(keep or {})

        def current(records):
            kept = {}
            for r in records:
                if declared.get((r["block"], r["size"])) == r["params"]:
                    kept[(r["block"], r["size"], r["family"])] = r
                else:   # said, not silent: a parameter added since drops its block's rows
                    print(f"synth: dropped {r['block']} {r['size']} ({r['family']}) from "
                          f"{json_path}: {_stale(r, declared.get((r['block'], r['size'])))}",
                          file=sys.stderr)
            return kept

        runs, failures = current(normalised(doc)["runs"]), current(doc.get("failures", []))
        for r in fresh:
            failures.pop((r["block"], r["size"], r["family"]), None)
        for f in failed:
            runs.pop((f["block"], f["size"], f["family"]), None)
        runs.update({(r["block"], r["size"], r["family"]): r for r in fresh})
        failures.update({(f["block"], f["size"], f["family"]): f for f in failed})
        # The cycles of a figure of merit come from the block's cycle model, not from the
        # tools: worked out at every merge (a re-render too), so a model's change reaches
        # the page without a synthesis.
        for r in runs.values():
            if "sparse" in r["params"]:
                r["model"] = model_cycles(r["params"], block=r["block"])
        order = list(blocks.BLOCKS)

        def report_order(r):
            return (order.index(r["block"]) if r["block"] in order else len(order),
                    r.get("size_index", 0), _family_order(r["family"]))

        # With nothing fresh (a re-render) the record keeps the tools and clock it was made with.
        doc = {"tools": tool_versions() if fresh else doc.get("tools", tool_versions()),
               "target_mhz": freq if fresh else doc.get("target_mhz", freq),
               "runs": sorted(runs.values(), key=report_order)}
        if failures:
            doc["failures"] = sorted(failures.values(), key=report_order)
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
        if markdown_path:
            Path(markdown_path).write_text(markdown(doc, page=True))
    return doc


def _stale(record, declared):
    """Why a stored entry no longer stands for its size: the size is gone, or the parameters
    it resolves to now differ (``name: now vs recorded``)."""
    if declared is None:
        return "size no longer declared"
    params = record["params"]
    return "parameters differ: " + ", ".join(
        f"{k}: {declared.get(k, 'absent')} vs {params.get(k, 'absent')}"
        for k in sorted(set(declared) | set(params)) if declared.get(k) != params.get(k))


def _fmt_fmax(r):
    if not r["fits"]:
        return "does not fit"
    return f"{r['fmax_mhz']:.1f}" if r["fmax_mhz"] is not None else "untimed"


def _line(r):
    if r["family"] == ASIC:
        return (f"{r['block']:<10} {r['size']:<20} {ASIC:<16} transistors {r['transistors']} "
                f"FF {r['ffs']} memory bits {r['memory_bits']}")
    fmax = _fmt_fmax(r)
    if r["fits"] and r["fmax_mhz"] is not None:
        fmax += f" mean, {r['fmax_min']:.1f}..{r['fmax_max']:.1f} over {_seeds(len(r['seeds']))}"
    return (f"{r['block']:<10} {r['size']:<20} {r['device'] or r['family']:<16} "
            f"LUT {r['lut']:>6} FF {r['ff']:>6} BRAM {r['bram']:>3} DSP {r['dsp']:>3} "
            f"Fmax {fmax}" + (f"  ({r['reason']})" if r["reason"] else ""))


def _failure_line(f):
    return f"{f['block']:<10} {f['size']:<20} {f['family']:<16} FAILED {f['job']}: {f['reason']}"


def _fpga_runs(doc):
    return [r for r in doc["runs"] if r["family"] in FAMILIES]


def markdown(doc, page=False):
    """The resource table as Markdown (a section of docs/results.md); ``page``: the whole of
    docs/synth.md (critical paths, figure of merit, ASIC proxy and targets as well)."""
    doc = normalised(doc)
    lines = []
    if page:
        lines += ["# Synthesis results", "",
                  "Generated by `make synth` (verif/flows/synth/); do not edit by hand. One "
                  "block: `python -m verif.flows.synth gemm --families ecp5,asic --seeds 3 "
                  "--jobs 2`; one "
                  "size and its dense-only twin: `... gemm --set k_par=2 --set n_par=8`; "
                  "`--render-only` rewrites this page from `docs/synth.json`.", ""]
    tools = ", ".join(f"{k} {v}" for k, v in doc["tools"].items())
    lines += [
        "## Synthesis and place-and-route", "",
        f"Each block in a register harness (four pins; the harness's flip-flops, one per port "
        f"bit, are not counted), Yosys `synth_ice40`/`synth_ecp5` keeping the block's hierarchy, "
        f"nextpnr with a {doc['target_mhz']:g} MHz clock constraint; Fmax is post-route, mean, "
        f"minimum and maximum over the placement seeds (1..N); *logic use* is the device's "
        f"logic cells taken, harness included. iCE40: HX8K (CT256); ECP5: 25F, or 85F where "
        f"the 25F is too small (a GEMM and its dense-only twin on the same device), speed "
        f"grade 6. LUT on ECP5 counts each CCU2C carry cell as two LUT4s. Parameters in "
        f"brackets are the family's own: ECP5 builds take `multiplier=ecp5` where it applies "
        f"(MULT18X18D slices with their own registers, which Yosys does not pack; "
        f"docs/gemm.md). Nor does Yosys pack a flip-flop that takes a DP16KD's read data "
        f"straight into the block RAM's output register; the flow does, before nextpnr, as "
        f"vendor synthesis does (verif/flows/synth/bram_registers.py; the FF column still "
        f"counts those flip-flops). Tools: {tools}.", "",
        "| block | parameters | device | LUT | FF | BRAM | DSP | LUTRAM | Fmax mean (MHz) | "
        "min | max | seeds | logic use |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _fpga_runs(doc):
        util = ""
        for name in ("ICESTORM_LC", "TRELLIS_COMB"):
            if name in r["utilisation"]:
                used, avail = r["utilisation"][name]
                util = f"{100 * used / avail:.1f} %"
        device = r["device"] or r["family"]
        timed = r["fits"] and r["fmax_mhz"] is not None
        fmax = _fmt_fmax(r) if r["fits"] else f"does not fit: {r['reason']}"
        low, high = (f"{r['fmax_min']:.1f}", f"{r['fmax_max']:.1f}") if timed else ("", "")
        lines.append(f"| {r['block']} | {_size_label(r)}{_older_placement(r)} | {device} | "
                     f"{r['lut']} | {r['ff']} | {r['bram']} | {r['dsp']} | {r['lutram']} | "
                     f"{fmax} | {low} | {high} | {len(r['seeds'])} | {util} |")
    if any(_older_placement(r) for r in _fpga_runs(doc)):
        lines += ["", f"{OLDER_PLACEMENT}: placed before the flow moved registers into the "
                  "block RAMs' output registers (the record has no count of them); a rerun "
                  "places it again."]
    if page:
        lines += _failures_md(doc) + _critical_paths_md(doc) + merit_markdown(doc)
        lines += asic_markdown(doc)
        lines += ["", "## Targets (issue #12, ECP5, mean over seeds)", "", *targets_table(doc)]
    return "\n".join(lines) + "\n"


#: Marks a row whose block RAMs were placed without their output registers (an older flow).
OLDER_PLACEMENT = "†"


def _older_placement(run):
    """:data:`OLDER_PLACEMENT` for an ECP5 row with block RAMs placed before the flow's
    ``before_place`` pass (its record has no ``bram_output_registers``), else ``""``."""
    older = (run["family"] == "ecp5" and run["fits"] and run.get("bram")
             and run.get("bram_output_registers") is None)
    return f" {OLDER_PLACEMENT}" if older else ""


def _size_label(run):
    """The size tag, and the family's values in brackets (:func:`family_values`)."""
    values = run.get("family_values") or {}
    extra = ", ".join(f"{k}={v}" for k, v in values.items())
    return f"{run['size']} ({extra})" if extra else run["size"]


def _failures_md(doc):
    """The jobs that failed (a tool's error or time-out), in place of their builds' rows."""
    failures = doc.get("failures") or []
    if not failures:
        return []
    return ["", "### Failed jobs", "",
            "Kept in the store with the reason; `--retry-failed` runs them again.", "",
            "| block | parameters | family | job | reason |", "|---|---|---|---|---|",
            *(f"| {f['block']} | {f['size']} | {f['family']} | {f['job']} | "
              f"{f['reason'].replace('|', '/')} |" for f in failures)]


def _critical_paths_md(doc):
    rows = [f"| {r['block']} | {_size_label(r)} | {r['device']} | {r['critical_path']['seed']} | "
            f"{r['fmax_min']:.1f} | `{r['critical_path']['from']}` | "
            f"`{r['critical_path']['to']}` | {r['critical_path']['delay_ns']} |"
            for r in _fpga_runs(doc) if r["fits"] and r["critical_path"]
            and "seed" in r["critical_path"] and "from" in r["critical_path"]]
    if not rows:
        return []
    return ["", "### Critical paths", "",
            "The slowest seed's slowest register-to-register path (cells as nextpnr names them; "
            "`chain_in`/`chain_out` are the harness).", "",
            "| block | parameters | device | seed | Fmax (MHz) | from | to | delay (ns) |",
            "|---|---|---|---:|---:|---|---|---:|", *rows]


def _pair(a, b, fmt):
    return f"{fmt(a)} / {fmt(b)}" if a is not None and b is not None else "n/a"


def _x(value):
    return f"{value:.2f}x" if value is not None else "n/a"


def merit_work(model):
    """What a figure of merit timed (its ``model``), in words."""
    if "layer" in model:
        M, K, N = model["layer"]
        return (f"one forward layer M x K x N = {M} x {K} x {N} with a random X, forced sparse "
                f"(`golden/engine_timing.py`, equal to the RTL's by the engine's tests)")
    return (f"one tile of {model['rows']} rows of random masks (`golden/gemm.py`, equal to "
            f"the RTL's by the GEMM's tests)")


def merit_markdown(doc):
    """The figure of merit of every size with a dense-only twin (the GEMM's, the engine's)
    against that twin (Markdown lines)."""
    pairs = [p for family in FAMILIES for p in twin_pairs(doc["runs"], family)]
    if not pairs:
        return []
    works = {s["block"]: merit_work(s["model"]) for s, _ in pairs}
    seed = pairs[0][0]["model"]["mask_seed"]
    lines = ["", "## Figure of merit: sparse builds against their dense-only twins", "",
             "Cycles from the block's cycle model, the dense-only twin treating everything "
             "as dense: "
             + "; ".join(f"{block}: {work}" for block, work in works.items())
             + f". Each element or mask bit is nonzero with probability = density (numpy "
             f"`default_rng({seed})`; the actual density in brackets). Effective throughput = "
             f"dense-equivalent MACs / cycles x Fmax mean; the *gain* is sparse / dense-only "
             f"of throughput per 1000 LUT or per DSP (iso-area).",
             "", "| block | parameters | build | device | LUT | FF | BRAM | DSP | "
             "Fmax mean / min (MHz) | MACs/cycle |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for sparse, dense in pairs:
        for name, r in (("sparse", sparse), ("dense-only", dense)):
            lines.append(f"| {r['block']} | {_tag(dict(pair_key(r['changed'])))} | {name} | "
                         f"{r['device']} | {r['lut']} | {r['ff']} | {r['bram']} | {r['dsp']} | "
                         f"{r['fmax_mhz']:.1f} / {r['fmax_min']:.1f} | "
                         f"{r['params']['k_par'] * r['params']['n_par']} |")
    lines += ["", "| block | parameters | density | cycles sparse / dense | cycle speedup | "
              "GMAC/s sparse / dense | GMAC/s per 1000 LUT | gain per LUT | GMAC/s per DSP | "
              "gain per DSP |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for sparse, dense in pairs:
        fom = figure_of_merit(sparse, dense)
        for p in fom["points"]:
            lines.append(
                f"| {sparse['block']} | {_tag(dict(pair_key(sparse['changed'])))} | "
                f"{p['density']} ({p['actual']:.3f}) | {p['cycles'][0]} / {p['cycles'][1]} | "
                f"{p['speedup']:.2f}x | {_pair(*p['gmacs'], lambda v: f'{v:.2f}')} | "
                f"{_pair(*p['per_klut'], lambda v: f'{v:.3f}')} | {_x(p['gain_lut'])} | "
                f"{_pair(*p['per_dsp'], lambda v: f'{v:.3f}')} | {_x(p['gain_dsp'])} |")
    return lines


def asic_markdown(doc):
    """The ASIC proxy of every GEMM size and its twin (Markdown lines)."""
    pairs = twin_pairs(doc["runs"], ASIC)
    if not pairs:
        return []
    header = " | ".join(f"gain per transistor at {d}" for d in DENSITIES)
    lines = ["", "## ASIC proxy (technology-independent)", "",
             "Yosys generic synthesis of the block alone: flattened, multipliers as logic, "
             "memories kept as memories and counted in bits, every flip-flop made a plain D "
             "flip-flop (enables and resets become gates), `abc -g cmos2` (NAND/NOR/NOT) and "
             "`stat -tech cmos` (transistors of the gates and flip-flops; memories excluded). "
             "The gain is sparse / dense-only of throughput per transistor at the same clock "
             "(no timing here), cycles from the model as above.", "",
             f"| parameters | transistors sparse / dense | ratio | flip-flops sparse / dense | "
             f"memory bits sparse / dense | {header} |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(DENSITIES)]
    for sparse, dense in pairs:
        m = asic_merit(sparse, dense)
        gains = " | ".join(_x(p["gain_transistor"]) for p in m["points"])
        lines.append(f"| {_tag(dict(pair_key(sparse['changed'])))} | {sparse['transistors']} / "
                     f"{dense['transistors']} | {_x(m['transistor_ratio'])} | {sparse['ffs']} / "
                     f"{dense['ffs']} | {sparse['memory_bits']} / {dense['memory_bits']} | "
                     f"{gains} |")
    return lines


def targets_table(doc):
    return ["| target | measured | status |", "|---|---|---|",
            *(f"| {what} | {measured} | {status} |" for what, measured, status in targets(doc))]


#: What docs/results.md's summary compares at the defaults, each block with its twin:
#: (block, name, the work its cycles time).
SUMMARY_BLOCKS = (("gemm", "GEMM", "one 64-row tile of random masks"),
                  ("engine", "Layer engine (accumulator memory, transposer and DMA included)",
                   "one forward layer of random X"))


def merit_summary_markdown(doc):
    """The short section docs/results.md shows: the default GEMM's and engine's iso-area gains
    against their dense-only twins on ECP5 (the GEMM's in the ASIC proxy too), and the targets
    of issues #12 and #22."""
    doc = normalised(doc)
    lines = ["## Sparse against dense-only at the same cost (`make synth`)", ""]
    for block, name, work in SUMMARY_BLOCKS:
        sparse = _find(doc["runs"], block, {}, TARGET_FAMILY)
        pair = next(((s, d) for s, d in twin_pairs(doc["runs"], TARGET_FAMILY) if s is sparse),
                    None)
        asic = next(((s, d) for s, d in twin_pairs(doc["runs"], ASIC)
                     if s["params"] == (sparse or {}).get("params")), None)
        if not pair:
            lines += [f"{name} at defaults: no placed pair with its dense-only twin on ECP5 "
                      f"yet.", ""]
            continue
        fom = figure_of_merit(*pair)
        asic_gains = ([p["gain_transistor"] for p in asic_merit(*asic)["points"]] if asic
                      else [None] * len(fom["points"]))
        lines += [f"{name} at defaults beside its dense-only twin on {pair[0]['device']} "
                  f"(LUT {fom['lut_ratio'] - 1:+.0%}, FF {fom['ff_ratio'] - 1:+.0%}; Fmax "
                  f"{pair[0]['fmax_mhz']:.1f} / {pair[1]['fmax_mhz']:.1f} MHz); {work}; "
                  f"details in [synth.md](synth.md).", "",
                  "| density | cycle speedup | gain per LUT | gain per DSP | "
                  "ASIC gain per transistor |", "|---|---:|---:|---:|---:|"]
        for p, g in zip(fom["points"], asic_gains):
            lines.append(f"| {p['density']} | {p['speedup']:.2f}x | {_x(p['gain_lut'])} | "
                         f"{_x(p['gain_dsp'])} | {_x(g)} |")
        lines.append("")
    return "\n".join(lines + targets_table(doc)) + "\n"
