"""``python -m verif.flows.synth``: the command line (usage in the package's docstring)."""

from __future__ import annotations

import sys

from spartan_rtl import jobs
from verif.flows import ROOT
from verif.flows.job_options import Parser, add_executor_options, positive, store_path

from . import tools
from .families import ASIC, FAMILIES, SynthError
from .place import SEEDS, TARGET_MHZ
from .report import JSON_PATH, MARKDOWN_PATH, merge
from .synthesis import JOBS, run


def _parser():
    # The description is the package docstring's first line, the flow's one-line summary.
    parser = Parser(prog="python -m verif.flows.synth",
                     description=sys.modules[__package__].__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="*", metavar="BLOCK", help="default: every block")
    parser.add_argument("--families", default=f"ice40,ecp5,{ASIC}",
                        help=f"comma-separated: ice40,ecp5,{ASIC} ({ASIC}: the GEMM's ASIC proxy)")
    parser.add_argument("--seeds", type=positive("--seeds"), default=SEEDS,
                        help=f"placement seeds 1..N per size (default {SEEDS})")
    add_executor_options(parser, ROOT, JOBS, "tool runs")
    parser.add_argument("--freq", type=float, default=TARGET_MHZ, help="clock constraint, MHz")
    parser.add_argument("--defaults-only", action="store_true",
                        help="only the default size (and its dense-only twin)")
    parser.add_argument("--set", action="append", metavar="NAME=VALUE",
                        help="with one BLOCK: synthesise this one size instead of the declared "
                             "ones (repeatable)")
    parser.add_argument("--render-only", action="store_true",
                        help="run no tool: drop undeclared sizes and rewrite the Markdown page")
    parser.add_argument("--json", default=str(JSON_PATH), help="results JSON (merged)")
    parser.add_argument("--markdown", default=str(MARKDOWN_PATH), help="Markdown page")
    return parser


def main(argv=None):
    from spartan_rtl.hw import blocks
    from spartan_rtl.usage import UsageError, parse_sets
    parser = _parser()
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in (*FAMILIES, ASIC):
            parser.error(f"--families must be a list of {', '.join((*FAMILIES, ASIC))}, "
                         f"not {f!r}")
    if not args.freq > 0:
        parser.error(f"--freq must be a positive number of MHz, not {args.freq!r}")
    explicit = None
    try:
        for name in args.blocks:
            blocks.get(name)
        if args.set:
            if len(args.blocks) != 1:
                raise UsageError("--set must go with exactly one BLOCK, not "
                                 f"{len(args.blocks)}")
            block = blocks.get(args.blocks[0])
            explicit = parse_sets(block, args.set)
            block.resolve(explicit)
    except (UsageError, ValueError, TypeError) as e:
        parser.error(str(e))
    store = store_path(parser, args)
    # Without the tools every build would be kept in the store as failed; a scheduler's
    # workers have their own.
    local = not (args.render_only or jobs.scheduler_address(args.scheduler))
    missing = tools.missing_tools(families) if local else []
    if missing:
        parser.error(f"the synthesis tools must be installed (`make synth` installs them), "
                     f"not found: {', '.join(missing)}")
    if args.render_only:
        merge([], args.json, args.markdown)
        return 0
    try:
        _, failures = run(args.blocks, families, args.freq, args.defaults_only, args.seeds,
                          args.jobs, explicit, args.json, args.markdown,
                          scheduler=args.scheduler, store_path=store,
                          retry_failed=args.retry_failed)
    except jobs.SchedulerUnreachable as e:
        parser.error(str(e))
    except SynthError as e:
        print(f"synth: error: {e}", file=sys.stderr)
        return 1
    if failures:
        print(f"synth: {len(failures)} build(s) failed, listed above and in {args.markdown}",
              file=sys.stderr)
        return 1
    return 0
