"""docs/results.md and its plots (docs/img/results_*.png), rendered by ``make bench`` from the
figures ``spartan bench --json bench.json`` just measured; never edited by hand.

    python -m verif.flows.results bench.json [--out docs/results.md]

:func:`write` takes the benchmark results (``{bench name: figures}``, as ``bench.json`` holds
them) and renders whatever benchmarks are present; the synthesis table comes from
``docs/synth.json`` (written by ``make synth``, committed, so a fresh clone renders it too),
the explorer's answers from ``docs/explore/*.json`` (``spartan explore --json``, committed).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from spartan_rtl import bench as bench_registry
from verif.flows import ROOT

SYNTH_JSON = ROOT / "docs" / "synth.json"
EXPLORE_ANSWERS = ROOT / "docs" / "explore"


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "figure.dpi": 110})
    return plt


def _save(fig, img_dir, name):
    img_dir.mkdir(parents=True, exist_ok=True)
    path = img_dir / name
    fig.tight_layout()
    fig.savefig(path)
    _plt().close(fig)
    return path


_GEMM_COLOURS = {"forward": "tab:blue", "dgrad": "tab:orange", "wgrad": "tab:green",
                 "step": "tab:purple"}


def _gemm_bars(ax, layers, width=0.2):
    """Per layer: a bar per GEMM and one for the whole step, each with its ideal as a tick."""
    for j, g in enumerate([*_GEMM_COLOURS]):
        xs, ys, ideal = [], [], []
        for i, la in enumerate(layers):
            src = la if g == "step" else la["gemms"].get(g)
            if src is None:
                continue
            xs.append(i + (j - 1.5) * width)
            ys.append(src["speedup"])
            ideal.append(src["ideal"])
        ax.bar(xs, ys, width, label=g, color=_GEMM_COLOURS[g])
        ax.scatter(xs, [min(v, 12) for v in ideal], marker="_", s=120, color="black",
                   zorder=3, label="ideal" if g == "step" else None)


def plot_networks(est, img_dir):
    plt = _plt()
    nets = est["networks"]
    fig, axes = plt.subplots(len(nets), 1, figsize=(11, 3.5 * len(nets)))
    for ax, (name, f) in zip(axes, nets.items()):
        layers = f["layers"]
        _gemm_bars(ax, layers)
        ax.axhline(f["total"]["speedup"], color="tab:purple", ls="--", lw=1,
                   label=f"whole step {f['total']['speedup']:.2f}x")
        ax.axhline(f["paper"], color="tab:red", ls=":", lw=1.5, label=f"paper {f['paper']}x")
        ax.set_xticks(range(len(layers)), [la["name"].replace("layer", "L") for la in layers],
                      rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("speedup vs dense")
        ax.set_title(f"{name}: the three GEMMs of each conv layer (ideal capped at 12x)")
        ax.legend(fontsize=7, loc="upper right", ncol=4)
        ax.grid(axis="y", alpha=0.3)
    return _save(fig, img_dir, "results_networks.png")


def plot_traces(est, img_dir):
    plt = _plt()
    traces = est["traces"]
    fig, axes = plt.subplots(1, len(traces), figsize=(3.2 * len(traces) + 1, 3.6), sharey=True,
                             squeeze=False)
    for ax, (fname, f) in zip(axes[0], traces.items()):
        _gemm_bars(ax, f["layers"])
        ax.set_xticks(range(len(f["layers"])), [la["name"] for la in f["layers"]])
        ax.set_title(f"epoch {f['meta'].get('epoch', fname)}: step {f['total']['speedup']:.2f}x",
                     fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("speedup vs dense")
    axes[0][-1].legend(fontsize=7, loc="upper left")
    fig.suptitle("real activations and errors (digits CNN), ideal capped at 12x", fontsize=10)
    return _save(fig, img_dir, "results_traces.png")


def plot_gemm(gemm, img_dir):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, fig_ in gemm.items():
        p = fig_["params"]
        pts = []
        for r in fig_["results"]:
            d = r["sparse"]["nnz"] / (fig_["rows"] * p["k"])
            if d:
                pts.append((d, r["dense"]["cycles"] / r["sparse"]["cycles"]))
        ax.plot(*zip(*pts), marker="o", label=name)
    ds = [d / 100 for d in range(5, 101)]
    ax.plot(ds, [1 / d for d in ds], color="black", ls=":", label="ideal 1/density")
    ax.set_yscale("log")
    ax.set_xlabel("density of the A tile (nonzero share)")
    ax.set_ylabel("speedup, dense / sparse cycles (RTL)")
    ax.set_title("GEMM: one 64-row tile, Verilator")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, img_dir, "results_gemm.png")


def plot_compactor(comp, img_dir):
    plt = _plt()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for entry in comp["configs"]:
        p = entry["params"]
        label = f"lanes={p['lanes']} width={p['width']} cols={p['cols']} {p['number_format']}"
        dens = [c["density"] for c in entry["compactor"]]
        line, = ax.plot(dens, [c["input_beats_per_cycle"] for c in entry["compactor"]],
                        marker="o", label=f"compactor in, {label}")
        ax.plot([e["density"] for e in entry["expander"]],
                [e["output_beats_per_cycle"] for e in entry["expander"]], marker="x", ls="--",
                color=line.get_color(), label=f"expander out, {label}")
        ax2.plot(dens, [c["data_beats_per_cycle"] for c in entry["compactor"]], marker="o",
                 color=line.get_color(), label=f"data out, {label}")
    for a, ylabel, title, loc in (
            (ax, "beats per cycle (line rate 1.0)", "sustained throughput (input always valid)",
             "lower left"),
            (ax2, "compactor data beats per input beat", "ZVC output traffic (masks not included)",
             "upper left")):
        a.set(ylim=(0, 1.1), xlabel="density", ylabel=ylabel, title=title)
        a.legend(fontsize=7, loc=loc)
        a.grid(alpha=0.3)
    return _save(fig, img_dir, "results_compactor.png")


def _fmt(v, digits=2):
    return "inf" if v == math.inf else f"{v:.{digits}f}"


def _gemm_cell(g, ideal=None):
    if g is None:
        return "-"
    return f"{g['speedup']:.2f}x ({_fmt(g['ideal'] if ideal is None else ideal)}x)"


def _network_intro_md(o):
    """What the network-level figures assume: the GEMM, the three GEMMs of a conv layer and
    where their densities come from."""
    t = o["timing"]
    return [
        "## Network-level speedup: the whole training step (issues 6, 16)", "",
        f"Cycle model of golden/gemm.py via spartan_rtl/estimate.py (docs/estimate.md states each "
        f"GEMM's mapping). GEMM at the defaults (k={t['k']}, n={t['n']}, lanes={t['lanes']}, "
        f"k_par={t['k_par']}, n_par={t['n_par']}, b_banks={t['b_banks']}); tiles of "
        f"{o['rows']} rows; THRESHOLD={o['threshold']:#x} (a tile runs sparse iff its density "
        f"<= {o['threshold'] / 256:.2%}). Conv layers of golden/networks.py (ImageNet, batch 1). "
        "Three GEMMs per conv layer: **forward** `Y = A·W` streams the im2col input `A` "
        "(densities = midpoints of the released monitor's bands; first conv dense); **dgrad** "
        "`dA = dY·Wᵀ` streams the output error `dY` (not run for the first layer); **wgrad** "
        "`dW = Aᵀ·dY` streams, per slice of k output positions, `Aᵀ` or `dYᵀ`, whichever has "
        "less work. `dY`'s density is derived from what follows the conv (ReLU: the output's "
        "density; ReLU + max pool: one routed position per nonzero pooled output; batch norm: "
        "dense), the assumption of each number in the per-layer tables. Unstructured random "
        f"masks at those densities; per layer, GEMM and tile shape, {o['samples']} random tiles "
        "are timed and their mean is scaled to the layer's tile count; resident loads "
        f"({t['k']}x{t['n']} per chunk) are charged to both modes. Ideal = MACs / MACs whose "
        "streamed element is nonzero, MAC-weighted. Pooling, normalisation and FC layers are not "
        "counted.", ""]


def _network_table_md(networks, target):
    """One row a network: the whole step against the paper and the ideal, and each GEMM."""
    lines = [
        "| network | whole step | paper | ideal | of ideal | forward only | dgrad | wgrad | "
        f"target >= {target:.0%} of ideal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, f in networks.items():
        frac = f["fraction_of_ideal"]
        g = f["total"]["gemms"]
        lines.append(f"| {name} | **{f['total']['speedup']:.2f}x** | {f['paper']}x | "
                     f"{f['ideal']:.2f}x | {frac:.1%} | "
                     + " | ".join(_gemm_cell(g.get(x), f["gemm_ideal"][x])
                                  for x in ("forward", "dgrad", "wgrad"))
                     + f" | {'met' if frac >= target else 'NOT met'} |")
    return lines


def _network_gaps_md(networks, t, rel):
    """Why the networks stay below the paper or their ideal."""
    above = [n for n, f in networks.items() if f["paper"] > f["ideal"]]
    reached = [n for n, f in networks.items() if f["total"]["speedup"] >= f["paper"]]
    beats = t["n"] // t["lanes"]
    return ["", "Per GEMM: speedup (ideal bound). "
            f"![per-layer speedup]({rel}/results_networks.png)", "",
            "**Gaps that remain.** Networks whose paper figure is above the whole-step ideal of "
            "these densities: " + (", ".join(above) or "none") + "; no core that skips the "
            "zeros of one operand can reach it there. Networks at or above the paper: "
            + (", ".join(reached) or "none") + ". ResNet-18 puts batch normalisation between "
            "every conv and its ReLU: its backward makes `dY` dense, so dgrad gains nothing and "
            "wgrad only the activations' zeros, whatever the paper's simulator assumed. "
            "AlexNet and VGG-16 gain most in the backward GEMMs of the convs before a max pool "
            "(dY about a quarter as dense as the activations), where the GEMM's output, not "
            "its multipliers, sets the pace: `C` is dense, "
            f"{t['n']}/{t['lanes']} = {beats} beats per row and resident chunk, "
            f"so a row runs at most {t['k']}/{beats} = "
            f"{t['k'] / beats:g}x faster than dense however few nonzeros it "
            "has; that, the partial last pass of each row and the per-tile pipeline fill are "
            "the gap to the ideal. The densities themselves are band midpoints, not measured "
            "per layer as in the paper.", ""]


def _network_layers_md(networks):
    """A collapsed per-layer table of each network, with the ``dY`` density's assumption."""
    lines = []
    for name, f in networks.items():
        structure = {s["name"]: s for s in f["structure"]}
        lines += [f"<details><summary>{name}: per layer</summary>", "",
                  "| layer | M x K x N | after | A density | dY density (assumption) | forward | "
                  "dgrad | wgrad (streamed) | step (ideal) |",
                  "|---|---|---|---:|---|---:|---:|---:|---:|"]
        for la in f["layers"]:
            g = la["gemms"]
            s = structure[la["name"]]
            w = g["wgrad"]
            lines.append(f"| {la['name']} | {'x'.join(map(str, la['shape']))} | {s['after']} | "
                         f"{la['density']:.3f} | {s['dy_density']:.4f} ({s['dy_basis']}) | "
                         f"{_gemm_cell(g['forward'])} | {_gemm_cell(g.get('dgrad'))} | "
                         f"{_gemm_cell(w)} {w['operand']} | "
                         f"{la['speedup']:.2f}x ({_fmt(la['ideal'])}x) |")
        lines += ["", "</details>", ""]
    return lines


def _profiling_md(est, lanes):
    """The monitor's profiling cost against software's, per network and trace."""
    lines = [
        "## Profiling overhead", "",
        "Per tile of the forward activations (rows x one inner chunk): *software* reads the tile "
        f"back through the same {lanes}-lane port (one beat per cycle) and reduces it "
        f"(adder tree over the lanes + threshold compare, {math.ceil(math.log2(lanes)) + 1} "
        "cycles); the *monitor* measures on the write path at full rate and costs its one stats "
        "beat per tile (the core consumes it into the density table; the host reads nothing). "
        "If a host read the table over AXI4-Lite instead, two reads of 4 cycles per tile.", "",
        "| network | reduction, total (stats beat) | worst layer (stats beat) | worst layer "
        "(AXI4-Lite reads) | paper |", "|---|---:|---:|---:|---:|"]
    figures = [*est["networks"].items(), *est["traces"].items()]
    paper = est["paper_profiling_reduction"]
    for fname, f in figures:
        p = f["total"]["profiling"]
        lines.append(f"| {fname} | {p['reduction_stats']:.0f}x | "
                     f"{p['min_layer_reduction_stats']:.0f}x | "
                     f"{p['min_layer_reduction_registers']:.1f}x | {paper}x |")
    below = {}
    for key in ("reduction_stats", "reduction_registers"):
        below[key] = [f"{fname}/{la['name']} ({la['profiling'][key]:.1f}x)"
                      for fname, f in figures for la in f["layers"] if la["profiling"][key] < paper]
    lines += ["", "Layers below the paper's {}x: with the stats beat: {}; with AXI4-Lite reads: "
              "{} (the overhead is per tile, so layers with small tiles - few columns or few "
              "rows - gain least).".format(paper, ", ".join(below["reduction_stats"]) or "none",
                                           ", ".join(below["reduction_registers"]) or "none"),
              ""]
    return lines


def _trace_rows_md(fname, f):
    """A trace's table rows: each layer's GEMMs, then its total."""
    lines = []
    for la in f["layers"]:
        g = la["gemms"]
        dy = "-" if la["dy_density"] is None else f"{la['dy_density']:.3f}"
        lines.append(f"| {fname} | {la['name']} | {'x'.join(map(str, la['shape']))} | "
                     f"{la['density']:.3f} | {dy} | {_gemm_cell(g['forward'])} | "
                     f"{_gemm_cell(g.get('dgrad'))} | {_gemm_cell(g['wgrad'])} "
                     f"{g['wgrad']['operand']} | {la['speedup']:.2f}x ({_fmt(la['ideal'])}x) |")
    tg = f["total"]["gemms"]
    dy = f"{tg['dgrad']['density']:.3f}" if "dgrad" in tg else "-"
    lines.append(f"| {fname} | **total** | | {tg['forward']['density']:.3f} | {dy} | "
                 f"{_gemm_cell(tg['forward'])} | {_gemm_cell(tg.get('dgrad'))} | "
                 f"{_gemm_cell(tg['wgrad'])} | **{f['total']['speedup']:.2f}x** "
                 f"({_fmt(f['total']['ideal'])}x) |")
    return lines


def _traces_md(traces, t, rel):
    """The committed real traces (data/traces) through the same model."""
    lines = ["## Real activations and errors (data/traces)", "",
             "`spartan estimate FILE.npz` on each committed trace (same options): the digits "
             "CNN's probe batch, its im2col inputs `A` and the output errors `dY` measured at the "
             "same point of training (data/traces/README.md). Per GEMM: speedup (ideal).", "",
             "| trace | layer | M x K x N | A density | dY density | forward | dgrad | "
             "wgrad (streamed) | step (ideal) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for fname, f in traces.items():
        lines += _trace_rows_md(fname, f)
    lines += ["", f"![real-trace speedup]({rel}/results_traces.png)", "",
              "conv2's output error is at most a quarter as dense as its input (the 2x2 max pool "
              "routes one position in four), conv3's is its ReLU output's density; conv1's is "
              "its ReLU mask over a dense col2im sum (the first layer runs no dgrad). conv1 "
              f"(K=9, N=8) and every dgrad whose rows are short are bound by the output "
              f"({t['n'] // t['lanes']} `C` beats per row and resident chunk), not by the "
              "multipliers, so they stay far below their ideal.", ""]
    return lines


def _two_sided_md(traces, t):
    """The hypothetical two-sided wgrad datapath on the traces; nothing if none measured it."""
    two = [(fname, name, d) for fname, f in traces.items()
           for name, d in f.get("two_sided", {}).items()]
    if not two:
        return []
    lines = ["## Two-sided skipping in the weight gradient (hypothetical)", "",
             "The core skips a MAC when its streamed element is zero. A two-sided datapath "
             "(docs/estimate.md) would also drop a streamed element whose resident row in "
             "the current resident chunk is all zero; its cycles come from the same cycle "
             "model on the ANDed masks. The MAC-level bound counts only MACs with both "
             "operands nonzero (an element-wise intersection, a different datapath).", "",
             "| trace | layer | wgrad dense | one-sided (the core) | two-sided, row skip | "
             "gain | MAC bound gain |", "|---|---|---:|---:|---:|---:|---:|"]
    for fname, name, d in two:
        lines.append(f"| {fname} | {name} | {d['dense_cycles']:.0f} | "
                     f"{d['one_sided_cycles']:.0f} | {d['two_sided_cycles']:.0f} | "
                     f"{d['gain']:.3f}x | {d['mac_bound_gain']:.2f}x |")
    gains = [d["gain"] for *_, d in two]
    bounds = [d["mac_bound_gain"] for *_, d in two]
    lines += ["", f"Skipping whole zero resident rows gains {min(gains):.3f}x to "
              f"{max(gains):.3f}x in cycles: a resident row is {t['n']} elements wide and "
              "rarely all zero, and the short rows of these layers are bound by the output "
              f"anyway. Skipping every MAC with a zero operand would cut the MACs by "
              f"{min(bounds):.2f}x to {max(bounds):.2f}x, which only a datapath that "
              "intersects the two operands' masks element by element (and an output that "
              "keeps up) could turn into cycles.", ""]
    return lines


def _last_pass_row_md(lp):
    """One pair of saved epochs: decisions, how many differ from the oracle's, the cycles."""
    per = {}
    for r in lp["rows"]:
        d = per.setdefault(r["gemm"], [0, 0, 0, 0])
        d[0] += r["decisions"]
        d[1] += r["differ"]
        d[2] += r["oracle_cycles"]
        d[3] += r["last_pass_cycles"]
    cells = ", ".join(f"{g} {d[1]}/{d[0]} {d[3] / d[2] - 1:+.2%}" for g, d in per.items())
    return (f"| {lp['previous']} -> {lp['current']} | {lp['decisions']} | "
            f"{lp['differ']} | {lp['last_pass_cycles'] / lp['oracle_cycles'] - 1:+.3%}"
            f" | {cells} |")


def _last_pass_md(last_pass, threshold):
    """Deciding each tile from the previous pass's densities against the oracle; nothing if
    not measured."""
    if not last_pass:
        return []
    lines = ["## Deciding from the last pass", "",
             "The core decides each tile (dense or sparse) and, for wgrad, each slice's "
             "streamed operand from the densities the monitor measured in the previous "
             "pass. Here the previous pass is the previous *saved epoch* of the same probe "
             "batch (several hundred steps earlier, so a pessimistic stand-in for one step); "
             "the oracle decides from the tile's own density.", "",
             "| previous -> current | decisions | differ | cycles vs oracle | by GEMM |",
             "|---|---:|---:|---:|---|"]
    lines += [_last_pass_row_md(lp) for lp in last_pass]
    tile_flips = sum(r["differ"] for lp in last_pass for r in lp["rows"]
                     if r["gemm"] != "wgrad")
    lines += ["", f"At THRESHOLD={threshold:#x} a tile runs dense only above "
              f"{threshold / 256:.2%} density; forward and dgrad decisions that differ "
              f"from the oracle: {tile_flips}. wgrad's count includes its choice of streamed "
              "operand per slice, which flips where a slice's two densities are close (and "
              "then costs little, since either choice is about as good).", ""]
    return lines


def _rtl_md(r):
    """The cycle model against the GEMM's RTL on real-trace tiles."""
    kinds = {}
    for rec in r["records"]:
        kinds[rec.get("gemm", "?")] = kinds.get(rec.get("gemm", "?"), 0) + 1
    return ["## Cycle model against the RTL", "",
            f"{len(r['records'])} tiles (<= {r['rows']} rows; streamed operands: "
            + ", ".join(f"{k} {v}" for k, v in kinds.items())
            + "; every layer, partial inner chunks included) cut from the real traces, "
            "quantised to int8 with the zero pattern kept, each in its sparse (ZVC) and dense "
            "form, through the GEMM in Verilator (verif/tb/tb_estimate.py): "
            f"**{r['exact']} of {len(r['records'])} exact, max error {r['max_error']:.2%}** "
            f"(RTL {r['rtl_cycles']} cycles, model {r['model_cycles']}); every C element "
            "equals the golden GEMM, also under random idle cycles and back-pressure.", ""]


def _estimate_md(est, rel):
    """The sections of ``spartan estimate``'s figures (the ``estimate`` benchmark)."""
    o = est["options"]
    t = o["timing"]
    networks = est["networks"]
    return [*_network_intro_md(o),
            *_network_table_md(networks, est["target_fraction_of_ideal"]),
            *_network_gaps_md(networks, t, rel),
            *_network_layers_md(networks),
            *_profiling_md(est, t["lanes"]),
            *_traces_md(est["traces"], t, rel),
            *_two_sided_md(est["traces"], t),
            *_last_pass_md(est.get("last_pass"), o["threshold"]),
            *_rtl_md(est["rtl"])]


def _text_block(title, text):
    return [f"### {title}", "", "```text", text, "```", ""]


def markdown(results, rel="img"):
    lines = ["# Results", "",
             "Generated by `make bench` (`spartan bench`, then verif/flows/results.py) from the "
             "figures it measured; do not edit by hand. The raw figures are in `bench.json`.", ""]
    if "estimate" in results:
        lines += _estimate_md(results["estimate"], rel)
    lines += ["## Block benchmarks (Verilator)", ""]
    if "gemm" in results:
        lines += [f"![GEMM speedup vs density]({rel}/results_gemm.png)", ""]
    if "compactor" in results:
        lines += [f"![compactor throughput]({rel}/results_compactor.png)", ""]
    for name, figures in results.items():
        if name == "estimate":
            continue
        module = bench_registry.module(name)
        lines += _text_block(name, module.report(figures))
    if SYNTH_JSON.exists():
        from verif.flows.synth import markdown as synth_markdown
        doc = json.loads(SYNTH_JSON.read_text())
        lines += [synth_markdown(doc).replace("## Synthesis", "## Synthesis (`make synth`)", 1)]
        from verif.flows.synth import merit_summary_markdown
        lines += [merit_summary_markdown(doc)]
    else:
        lines += ["## Synthesis", "", "docs/synth.json is missing: run `make synth`.", ""]
    lines += explore_md(sorted(EXPLORE_ANSWERS.glob("*.json")))
    return "\n".join(lines).rstrip() + "\n"


def explore_md(paths):
    """The explorer's answers kept in docs/explore/ (``spartan explore --json``) as a table."""
    from spartan_rtl.explore_report import answers_markdown
    return answers_markdown([json.loads(Path(p).read_text()) for p in paths])


def write(results, path=ROOT / "docs" / "results.md"):
    """Render the plots next to ``path`` (``img/``) and write the page; returns written paths."""
    path = Path(path)
    img = path.parent / "img"
    written = []
    if "estimate" in results:
        written += [plot_networks(results["estimate"], img),
                    plot_traces(results["estimate"], img)]
    if "gemm" in results:
        written.append(plot_gemm(results["gemm"], img))
    if "compactor" in results:
        written.append(plot_compactor(results["compactor"], img))
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(markdown(results))
    tmp.replace(path)
    return written + [path]


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(description="render docs/results.md from bench.json")
    parser.add_argument("json", metavar="BENCH.json",
                        help="figures written by spartan bench --json")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results.md"), metavar="FILE.md")
    args = parser.parse_args(argv)
    for path in write(json.loads(Path(args.json).read_text()), args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
