"""The answer of ``spartan explore`` as text and as a picture (docs/explore.md#the-answer):
the ranking by the cycle model, the placed candidates with their training steps per second,
the Pareto fronts against LUT and DSP, the best build that fits and the command that
generates it."""

from __future__ import annotations

import os

__all__ = ["pareto", "model_errors", "format_answer", "answer_json", "answers_markdown", "plot",
           "TOP_RANKED"]

#: Candidates of the cycle model's ranking shown.
TOP_RANKED = 10


def pareto(placed, cost):
    """The members of ``placed`` (fitting :class:`~spartan_rtl.explore.Placed`) that no other
    beats: none has at most their ``cost`` and more steps per second, or less ``cost`` and as
    many. Cheapest first."""
    front = []
    for p in sorted(placed, key=lambda p: (p.netlist[cost], -p.steps_per_s)):
        if not front or p.steps_per_s > front[-1].steps_per_s:
            front.append(p)
    return front


def _ranking_lines(answer):
    lines = [f"  {'rank':>4}  {'candidate':<44} {'step cycles':>12} {'dense':>12} "
             f"{'speedup':>8}"]
    for i, (c, cyc) in enumerate(answer.ranked[:TOP_RANKED], 1):
        lines.append(f"  {i:>4}  {c.label:<44} {cyc['adaptive_cycles']:>12} "
                     f"{cyc['dense_cycles']:>12} "
                     f"{cyc['dense_cycles'] / cyc['adaptive_cycles']:>7.2f}x")
    return lines


def _placed_lines(answer):
    fitting = answer.fitting_candidates
    fronts = {"L": pareto(fitting, "lut"), "D": pareto(fitting, "dsp")}
    best = answer.best
    lines = [f"  {'':2}{'candidate':<44} {'LUT':>6} {'FF':>6} {'BRAM':>4} {'DSP':>4} "
             f"{'Fmax MHz':>9} {'steps/s':>8} {'dense':>8} {'front':>5}"]
    for p in sorted(answer.placed, key=lambda p: -(p.steps_per_s or 0)):
        n = p.netlist
        mark = "* " if p is best else "  "
        if not p.fits:
            lines.append(f"  {mark}{p.candidate.label:<44} {n['lut']:>6} {n['ff']:>6} "
                         f"{n['bram']:>4} {n['dsp']:>4}  does not fit: {p.reason}")
            continue
        front = "".join(k for k, members in fronts.items() if p in members) or "-"
        lines.append(f"  {mark}{p.candidate.label:<44} {n['lut']:>6} {n['ff']:>6} "
                     f"{n['bram']:>4} {n['dsp']:>4} {p.fmax_mhz:>9.1f} {p.steps_per_s:>8.1f} "
                     f"{p.dense_steps_per_s:>8.1f} {front:>5}")
    return lines


def _default_text(default, reason, over_default, device):
    """The default build's figures (its :func:`answer_json` entry, or None) and the best
    build's gain over it, or why it was not placed: for the text answer and the table."""
    if default is None:
        return f"not placed: {reason}"
    if not default["fits"]:
        return f"does not fit {device}: {default['reason']}"
    text = (f"{default['steps_per_s']:.1f} steps/s ({default['fmax_mhz']:.1f} MHz, "
            f"{default['adaptive_cycles']} cycles a step)")
    return text + (f"; the best is {over_default:.2f}x that" if over_default else "")


def _default_line(answer, device):
    return "  default build (spartan generate engine): " + _default_text(
        _placed_json(answer.default), answer.default_reason, answer.over_default, device)


def _verdict_lines(answer, device):
    best, dense = answer.best, answer.dense_best
    if best is None:
        return [f"  no placed candidate fits {device} within the budget",
                _default_line(answer, device)]
    return [f"  best that fits {device}: {best.candidate.label}: {best.steps_per_s:.1f} "
            f"training steps/s ({best.fmax_mhz:.1f} MHz mean over the seeds, "
            f"{best.cycles['adaptive_cycles']} cycles a step)",
            f"  speedup over the best dense-only build that fits: {answer.speedup:.2f}x "
            f"(dense-only: {dense.candidate.label}{_dense_kind(answer)}: "
            f"{dense.dense_steps_per_s:.1f} steps/s, {dense.cycles['dense_cycles']} cycles "
            f"from the model at its measured Fmax)",
            _default_line(answer, device),
            f"  generate it: {best.generate_command}"]


def _dense_kind(answer):
    """What the dense-only baseline is: a placed twin, or (no twin fits) a build forced
    dense."""
    return "" if answer.dense_is_twin else " forced dense, MODE 1 (no dense-only twin placed fits)"


def model_errors(checks):
    """``{figure: (count, mean |error|, largest |error|)}`` of ``[(label, figure, predicted,
    measured)]``, the errors relative to the measured."""
    out = {}
    for figure in dict.fromkeys(f for _, f, _, _ in checks):
        errors = [abs(p - m) / m for _, f, p, m in checks if f == figure and m]
        if errors:
            out[figure] = (len(errors), sum(errors) / len(errors), max(errors))
    return out


def _model_lines(answer):
    area = answer.area
    if area is None or not area.fits:
        return ["  area and clock model: no measured rows (make area-model); nothing pruned"]
    fitted = ", ".join(f"{figure.upper().replace('_MHZ', '')} {f.mean_error:.1%} mean, "
                       f"{f.max_error:.1%} largest" for figure, f in area.fits.items())
    lines = [f"  area and clock model (fitted on {max(f.rows for f in area.fits.values())} "
             f"builds; leave-one-out error {fitted}): {answer.pruned} candidates pruned "
             f"before synthesis"]
    for figure, (count, mean, largest) in model_errors(answer.model_checks).items():
        lines.append(f"    {figure.upper().replace('_MHZ', '')} against this sweep's {count} "
                     f"measured: {mean:.1%} mean error, {largest:.1%} largest")
    return lines


def _placed_json(p):
    if p is None:
        return None
    return {"candidate": dict(p.candidate.changed), "label": p.candidate.label,
            "fits": p.fits, "reason": p.reason, "fmax_mhz": p.fmax_mhz,
            "fmax_min_mhz": p.fmax_min, "steps_per_s": p.steps_per_s,
            "dense_steps_per_s": p.dense_steps_per_s,
            **{k: p.netlist[k] for k in ("lut", "ff", "bram", "dsp")},
            "adaptive_cycles": p.cycles["adaptive_cycles"],
            "dense_cycles": p.cycles["dense_cycles"],
            "generate": p.generate_command}


def answer_json(answer, request, trace_name, trace_sha256):
    """The answer as data (``--json``; docs/results.md renders those kept in docs/explore/):
    the request, the top of the ranking, every placed candidate and the verdict."""
    r = request
    return {"trace": trace_name, "trace_sha256": trace_sha256, "device": r.device,
            "budget": {"lut": r.budget.lut, "dsp": r.budget.dsp, "bram": r.budget.bram},
            "seeds": r.seeds, "synth": r.synth, "threshold": r.threshold,
            "candidates": answer.candidates, "refused": answer.invalid,
            "ranked": [{"label": c.label, "adaptive_cycles": cyc["adaptive_cycles"],
                        "dense_cycles": cyc["dense_cycles"]}
                       for c, cyc in answer.ranked[:TOP_RANKED]],
            "placed": [_placed_json(p) for p in answer.placed],
            "best": _placed_json(answer.best), "dense_best": _placed_json(answer.dense_best),
            "dense_best_is_twin": answer.dense_is_twin, "speedup_over_dense": answer.speedup,
            "default": _placed_json(answer.default), "default_reason": answer.default_reason,
            "over_default": answer.over_default,
            "area_model": {"pruned": answer.pruned, "errors": {
                figure: {"count": n, "mean": mean, "largest": largest}
                for figure, (n, mean, largest) in model_errors(answer.model_checks).items()}},
            "failures": [{"kind": k, "label": label, "reason": reason}
                         for k, label, reason in answer.failures]}


def _build_cell(p):
    return (f"{p['label']}: {p['fmax_mhz']:.1f} MHz, {p['steps_per_s']:.1f} steps/s "
            f"(LUT {p['lut']}, DSP {p['dsp']}, BRAM {p['bram']})")


def _answer_row(a):
    best, dense = a["best"], a["dense_best"]
    if best is None:
        best_cell = "no placed candidate fits"
    else:
        # Answers kept before the twins were the baseline say nothing of it: forced dense.
        how = "" if a.get("dense_best_is_twin") else " forced dense"
        best_cell = _build_cell(best) + f"; {a['speedup_over_dense']:.2f}x the best dense-only " \
            f"({dense['label']}{how}, {dense['dense_steps_per_s']:.1f} steps/s)"
    default_cell = _default_text(a["default"], a["default_reason"], a["over_default"],
                                 a["device"])
    placed = sum(p["fits"] for p in a["placed"])
    return (f"| {a['device']} | {a['trace']} | {a['candidates']} ({len(a['placed'])} placed, "
            f"{placed} fit) | {best_cell} | {default_cell} |")


def answers_markdown(answers):
    """A table of answers (:func:`answer_json` documents), one row each, the default build
    beside; nothing for none."""
    if not answers:
        return []
    return ["## Design-space exploration (`spartan explore`)", "",
            "Answers of `spartan explore TRACE --device D --json OUT.json` (docs/explore.md), "
            "kept in docs/explore/: the training step's cycles from the "
            "engine's cycle model on the trace, Fmax from place and route (mean over the "
            "seeds), steps/s = Fmax / cycles a step (every tile sparse or dense as the trace's "
            "density decides).", "",
            "| device | trace | candidates | best that fits | default build |",
            "|---|---|---|---|---|", *(_answer_row(a) for a in answers), ""]


def format_answer(answer, request, trace_name):
    r = request
    lines = [f"explore: {trace_name} on {r.device}: {answer.candidates} candidates "
             f"({answer.invalid} parameter combinations the engine refuses left out); budget "
             f"LUT {r.budget.lut}, DSP {r.budget.dsp}, BRAM {r.budget.bram}",
             "  ranked by the engine's cycle model on the trace: one whole training step "
             f"(forward, dgrad, wgrad), each tile sparse iff its density <= "
             f"{r.threshold}/256", *_ranking_lines(answer), ""]
    if answer.placed:
        lines += [f"placed on {r.device} (speed 6), seeds 1..{r.seeds}, {r.freq_mhz:g} MHz "
                  f"target; steps/s = Fmax / cycles a step; *: best that fits; front: on "
                  f"the Pareto front of steps/s against LUT (L) and DSP (D)",
                  *_placed_lines(answer), *_verdict_lines(answer, r.device)]
    elif r.synth:
        lines.append(f"  no candidate's netlist fits the budget on {r.device}")
    if r.synth:
        lines += _model_lines(answer)
    for kind, label, reason in answer.failures:
        lines.append(f"  failed: {kind} of {label}: {reason}")
    return "\n".join(lines)


def plot(answer, path, device):
    """Steps per second against LUT and against DSP of the placed candidates that fit, the
    Pareto fronts drawn, the best marked, the dense-only twins placed beside; a PNG at
    ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    fitting, twins, best = answer.fitting_candidates, answer.fitting_twins, answer.best
    for ax, cost, name in ((axes[0], "lut", "LUT"), (axes[1], "dsp", "DSP")):
        ax.scatter([p.netlist[cost] for p in fitting], [p.steps_per_s for p in fitting],
                   color="tab:blue", label="placed, fits")
        if twins:
            ax.scatter([p.netlist[cost] for p in twins], [p.steps_per_s for p in twins],
                       marker="x", color="tab:gray", label="dense-only twin")
        front = pareto(fitting, cost)
        ax.step([p.netlist[cost] for p in front], [p.steps_per_s for p in front],
                where="post", color="tab:orange", label="Pareto front")
        if best is not None:
            ax.scatter([best.netlist[cost]], [best.steps_per_s], marker="*", s=250,
                       color="tab:red", label=f"best: {best.candidate.label}", zorder=3)
        points = [p for p in (*fitting, *twins) if p is not best]   # which build each is
        middle = sum(ax.get_xlim()) / 2
        for p in points:
            right = p.netlist[cost] > middle    # written towards the plot's inside
            ax.annotate(p.candidate.label, (p.netlist[cost], p.steps_per_s), fontsize=6,
                        xytext=(-4 if right else 4, 4), textcoords="offset points",
                        ha="right" if right else "left", color="0.3").set_in_layout(False)
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("training steps / s")
    # The legend below the plots: inside, it covered points.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=len(labels))
    fig.suptitle(f"spartan explore on {device}", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    # Whole or not at all: a sweep stopped while drawing leaves no half picture behind.
    staged = f"{path}.partial"
    fig.savefig(staged, dpi=100, format="png")
    plt.close(fig)
    os.replace(staged, path)
