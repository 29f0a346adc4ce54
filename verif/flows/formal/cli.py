"""``python -m verif.flows.formal``: the command line (usage in the package's docstring)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .checks import CHECKS
from .report import MARKDOWN_PATH, markdown
from .run import BUILD, SOLVERS, run_check


def main(argv=None):
    # The description is the package docstring's first line, the flow's one-line summary.
    summary = sys.modules[__package__].__doc__.split("\n")[0]
    ap = argparse.ArgumentParser(prog="python -m verif.flows.formal", description=summary)
    ap.add_argument("checks", nargs="*",
                    help=f"checks to run (default: all of {', '.join(CHECKS)})")
    ap.add_argument("--depth", type=int,
                    help="override every check's BMC and cover depth (a proof keeps its k)")
    ap.add_argument("--solver", choices=SOLVERS, default="yices", help="SMT solver (default yices)")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/formal.md")
    ap.add_argument("--workdir", type=Path, default=BUILD,
                    help=f"where the SymbiYosys runs and results.json go (default {BUILD})")
    args = ap.parse_args(argv)
    unknown = [c for c in args.checks if c not in CHECKS]
    if unknown:
        print(f"check must be one of {', '.join(CHECKS)}, not {unknown[0]!r}", file=sys.stderr)
        return 2
    results = [run_check(CHECKS[name], args.depth, solver=args.solver, workdir=args.workdir)
               for name in (args.checks or CHECKS)]
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if not args.checks and not args.no_docs:
        MARKDOWN_PATH.write_text(markdown(results))
    return 0 if all(r["status"] in ("PASS", "PROVEN") for r in results) else 1
