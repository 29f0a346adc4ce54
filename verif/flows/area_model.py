"""Measure the builds the area and clock model (spartan_rtl/area_model.py) is fitted on, fit
it, and print how far it misses each row (docs/explore.md#the-area-and-clock-model).

    python -m verif.flows.area_model [--place N] [--device LFE5U-45F] [--jobs N] [--write]

Synthesises (Yosys, ECP5, as ``spartan explore`` does: the same jobs and store keys, so the
two share every netlist) a fixed set of engine builds spread over the explorer's ranges,
sparse and dense-only twins, and places the first ``--place`` of them on ``--device`` (one
seed) for the clock. Prints every figure's fit (terms, coefficients) and its leave-one-out
error, row by row. ``--write`` keeps the rows in docs/area_model.json, which the
explorer's pruning reads.
"""

from __future__ import annotations

import json
import sys

from spartan_rtl import area_model
from spartan_rtl.explore import PLACE_MINUTES, Explorer, Request
from spartan_rtl.explore_jobs import BLOCK, DEVICES, Budget, Candidate

from .job_options import Parser, add_executor_options, executor, positive, store_path
from .synth import ROOT

#: The builds measured: spread over explore_jobs.DEFAULT_RANGES (every value of each
#: parameter at least twice, the smallest and largest corners), dense-only twins at every
#: ``lanes`` (else the fit cannot tell the twins' lane terms from the sparse builds'). The
#: defaults and the smallest come first: ``--place N`` places the first N.
SIZES = [
    {},
    {"sparse": False},
    {"lanes": 4, "k": 32, "n": 16, "n_par": 8, "acc_rows": 64},
    {"lanes": 4, "k": 32, "n": 16, "n_par": 8, "acc_rows": 64, "sparse": False},
    {"lanes": 8, "k": 64, "n": 16, "n_par": 16, "acc_rows": 64},
    {"lanes": 4, "k": 64, "n": 16, "n_par": 16, "acc_rows": 256},
    {"lanes": 16, "k": 32, "n": 16, "n_par": 16, "acc_rows": 256},
    {"lanes": 8, "k": 32, "n": 32, "n_par": 32, "acc_rows": 1024},
    {"lanes": 8, "k": 32, "n": 32, "n_par": 32, "acc_rows": 1024, "sparse": False},
    {"lanes": 4, "k": 128, "n": 32, "n_par": 16, "acc_rows": 256},
    {"lanes": 8, "k": 128, "n": 64, "n_par": 8, "acc_rows": 64},
    {"lanes": 16, "k": 64, "n": 64, "n_par": 32, "acc_rows": 64},
    {"lanes": 16, "k": 64, "n": 64, "n_par": 32, "acc_rows": 64, "sparse": False},
    {"lanes": 4, "k": 32, "n": 64, "n_par": 16, "acc_rows": 1024},
    {"lanes": 8, "k": 128, "n": 32, "n_par": 8, "acc_rows": 256},
    {"lanes": 16, "k": 128, "n": 32, "n_par": 32, "acc_rows": 1024},
    {"lanes": 4, "k": 64, "n": 64, "n_par": 64, "acc_rows": 1024},
    {"lanes": 16, "k": 32, "n": 64, "n_par": 64, "acc_rows": 64},
]


def builds():
    """The :class:`Candidate` of every build of :data:`SIZES`."""
    from spartan_rtl.hw import blocks
    block = blocks.get(BLOCK)
    return [Candidate(tuple(sorted(s.items())), block.resolve(s)) for s in SIZES]


def measure(explorer, cands, place):
    """Rows ``[{"changed", "params", "lut", "ff", "bram", "dsp", "fmax_mhz"}]``: each build's
    netlist, and the first ``place`` builds' Fmax (None where not placed or not fitting)."""
    made = explorer.netlists(cands)
    ok = [c for c in cands if made[c] is not None]
    fmax = {p.candidate: p.fmax_mhz for p in explorer.place(
        {c: made[c] for c in ok[:place]}, {c: {} for c in ok[:place]})}
    return [{"changed": dict(c.changed), "params": c.params,
             **{r: made[c][1][r] for r in area_model.RESOURCES},
             "fmax_mhz": fmax.get(c)} for c in ok]


def report(rows, model):
    """The fits and their leave-one-out errors, as Markdown."""
    lines = [f"{len(rows)} builds measured", "",
             "| figure | rows | terms (coefficient) | mean error | largest error |",
             "|---|---:|---|---:|---:|"]
    for figure, f in model.fits.items():
        terms = ", ".join(f"{t} ({c:.3g})" for t, c in zip(f.terms, f.coefficients))
        lines.append(f"| {figure} | {f.rows} | {terms} | {f.mean_error:.1%} | "
                     f"{f.max_error:.1%} |")
    lines += ["", "| build | " + " | ".join(model.fits) + " |",
              "|---|" + "---:|" * len(model.fits)]
    for i, row in enumerate(rows):
        cells = []
        for figure, f in model.fits.items():
            if row.get(figure) is None:
                cells.append("")
                continue
            # The row predicted by the fit on the others: its leave-one-out error.
            index = [r for r in rows if r.get(figure) is not None].index(row)
            error = f.loo_errors[index] if f.loo_errors else 0.0
            cells.append(f"{row[figure]:.4g} ({error:+.1%})")
        label = " ".join(f"{k}={v}" for k, v in row["changed"].items()) or "defaults"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = Parser(prog="python -m verif.flows.area_model",
                    description=__doc__.split("\n")[0])
    parser.add_argument("--place", type=int, default=0, metavar="N",
                        help="place the first N builds (one seed) for the clock (default 0)")
    parser.add_argument("--device", choices=DEVICES, default="LFE5U-45F")
    parser.add_argument("--place-minutes", type=positive("--place-minutes"),
                        default=PLACE_MINUTES)
    parser.add_argument("--write", action="store_true",
                        help=f"keep the rows in {area_model.DEFAULT_PATH.relative_to(ROOT)}")
    add_executor_options(parser, ROOT, 2, "synthesis and placement runs")
    args = parser.parse_args(argv)
    if not 0 <= args.place <= len(SIZES):
        parser.error(f"--place must be 0..{len(SIZES)}, not {args.place}")
    path = store_path(parser, args)
    huge = Budget(lut=10**9, ff=10**9, dsp=10**9, bram=10**9)
    request = Request(None, "", args.device, huge, {}, seeds=1, synth=0,
                      retry_failed=args.retry_failed, place_minutes=args.place_minutes)
    with executor(parser, args, path) as (client, store):
        explorer = Explorer(client, store, request)
        rows = measure(explorer, builds(), args.place)
    for what, label, reason in explorer.failures:
        print(f"{what} failed: {label}: {reason}", file=sys.stderr)
    print(report(rows, area_model.AreaModel.from_rows(rows)))
    if args.write:
        area_model.DEFAULT_PATH.write_text(json.dumps(
            {"device": args.device, "tools": explorer.synth_tools(), "rows": rows},
            indent=1) + "\n")
        print(f"rows: {area_model.DEFAULT_PATH.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
