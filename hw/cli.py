"""``spartan``: the generator's command line (SPEC §3).

Errors in what the user typed print one line on stderr and exit with status 2; nothing is
written. ``sim``, ``waves`` (verif/sim.py, verif/waves.py), ``bench`` and ``estimate`` add
their own parsers here; their work is done in the modules they import on use.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from . import blocks

EXIT_USAGE = 2


class UsageError(Exception):
    """A mistake in what the user asked for: reported in one line, exit status 2."""


def parse_sets(block, items):
    values = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--set must be NAME=VALUE, not {item!r}")
        values[name.strip()] = block.param(name.strip()).parse(text.strip())
    return values


def read_config(path):
    """Parameters from a TOML file: top-level ``name = value`` pairs, and those of a
    ``[params]`` table if there is one (a ``params`` that is no table is an unknown name)."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise UsageError(f"--config must be a readable TOML file, not {str(path)!r} ({e.strerror})")
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--config must be a readable TOML file, not {str(path)!r} ({e})")
    values = dict(doc)
    if isinstance(doc.get("params"), dict):
        values.update(values.pop("params"))
    return values


def block_values(block, config, sets):
    values = read_config(config) if config else {}
    values.update(parse_sets(block, sets))
    return block.resolve(values)


def cmd_list(args):
    for block in blocks.BLOCKS.values():
        print(f"{block.name}  (top {block.top}): {block.summary}")
        for p in block.params:
            default = str(p.default).lower() if p.kind is bool else p.default
            print(f"    {p.name:<16} default {default!s:<8} {p.what}; {p.doc}")
    return 0


def cmd_generate(args):
    from .emit import generate
    block = blocks.get(args.block)
    values = block_values(block, args.config, args.set)
    for path in generate(block, values, args.output):
        print(path)
    return 0


def cmd_bench(args):
    from verif import bench
    bench.run(args.names, quick=args.quick, json_path=args.json, report_path=args.report)
    return 0


def cmd_estimate(args):
    import json
    from golden import estimate, traces
    from golden.gemm import GemmTiming
    timing = GemmTiming.of(block_values(blocks.get("gemm"), args.config, args.set))
    opts = estimate.Options(timing, rows=args.rows, threshold=args.threshold)
    layers = estimate.estimate_trace(traces.load(args.file), opts)
    print(estimate.format_report(layers, opts, f"estimate: {args.file}"))
    if args.json:
        doc = {"file": args.file, "layers": [layer.as_dict() for layer in layers],
               "total": estimate.totals(layers)}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


def number(text):
    """An integer in any base Python reads (``240``, ``0xf0``)."""
    return int(text, 0)


def add_param_options(parser):
    parser.add_argument("--set", action="append", metavar="NAME=VALUE",
                        help="set a parameter (repeatable)")
    parser.add_argument("--config", metavar="FILE.toml", help="parameters from a TOML file")


def build_parser():
    parser = argparse.ArgumentParser(prog="spartan", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the blocks and their parameters").set_defaults(func=cmd_list)
    gen = sub.add_parser("generate", help="write <top>.v and <top>.json")
    gen.add_argument("block")
    add_param_options(gen)
    gen.add_argument("-o", "--output", default="rtl_out", metavar="DIR")
    gen.set_defaults(func=cmd_generate)
    bench = sub.add_parser("bench", help="run benchmarks and print their figures")
    bench.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    bench.add_argument("--quick", action="store_true", help="smaller runs, for CI")
    bench.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    bench.add_argument("--report", metavar="FILE.md", help="also write the Markdown report and "
                       "its plots (default: docs/results.md after a full run of every benchmark)")
    bench.set_defaults(func=cmd_bench)
    est = sub.add_parser("estimate", help="per-layer speedup estimates from an activation trace")
    est.add_argument("file", metavar="FILE.npz", help="trace in golden/traces.py's layout")
    add_param_options(est)  # GEMM parameters (spartan list)
    est.add_argument("--rows", type=int, default=64, help="rows per A tile (default 64)")
    est.add_argument("--threshold", type=number, default=0xF0,
                     help="THRESHOLD register: sparse iff density <= T/256 (default 0xf0)")
    est.add_argument("--json", metavar="OUT", help="also write the estimates as JSON")
    est.set_defaults(func=cmd_estimate)
    from verif import sim, waves  # light imports: simulators and matplotlib load on use
    sim.add_parser(sub)
    waves.add_parser(sub)
    return parser





def main(argv=None):
    parser = build_parser()
    # argparse's own usage errors already exit 2 with a short message.
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ValueError, TypeError) as e:
        print(f"spartan: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
