"""``spartan sim BLOCK``: run a block's standard stimulus with waves on and leave, in one
directory, the waveform, a GTKWave save file with the block's streams grouped, the manifest and
the simulation log::

    spartan sim monitor                      # -> waves/monitor/dump.vcd, monitor.gtkw, ...
    gtkwave waves/monitor/dump.vcd waves/monitor/monitor.gtkw
    spartan waves waves/monitor/dump.vcd -o monitor.png

The standard stimulus is the block's own testbench test (``verif/tb/tb_<block>.py``), by default
the test and arguments its profile names (``PROFILE.stimulus``, by default ``random_traffic``);
a block without one gets the generic manifest-driven stimulus of :mod:`spartan_rtl.tb.tb_streams`.
The testbench's scoreboard runs as in ``make test``: a failure still leaves the waveform. The last
line printed is the verdict: ``PASS``, or ``FAIL <reason>`` with exit status 1.

FST: the simulators here write VCD (Verilator's FST writer needs liblz4-dev at build time, and
``spartan waves`` reads VCD); ``--waves fst`` converts the VCD with GTKWave's ``vcd2fst`` and
keeps only the FST. Without ``vcd2fst`` it is a one-line error (exit 2) before anything runs.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

__all__ = ["stimulus", "write_gtkw", "add_parser", "cmd_sim"]

GENERIC = ("spartan_rtl.tb.tb_streams", "random_streams", {"beats": 120})
#: ``--sim`` -> the simulator's name in what ``spartan sim`` says.
SIMULATORS = {"verilator": "Verilator", "icarus": "Icarus Verilog"}


def stimulus(block_name, test=None):
    """``(module, test, args)`` of a block's standard stimulus, as its profile declares it
    (verif/tb/profile.py), or of another cocotb ``test`` of its testbench."""
    import importlib

    from .tb import profile
    plan = profile.of(block_name)
    if test == "generic" or (test is None and plan.stimulus is None):
        return GENERIC
    if test is not None:
        found = getattr(importlib.import_module(plan.module), test, None) if plan.module else None
        if not type(found).__module__.startswith("cocotb"):
            raise ValueError(f"--test must be a cocotb test of verif/tb/tb_{block_name}.py or "
                             f"'generic', not {test!r}")
        return (plan.module, test, {})
    name, args = plan.stimulus
    return (plan.module, name, dict(args))


def stream_members(doc):
    """``[(stream, dir, [port, ...])]`` from a manifest: inputs first, members ordered data,
    valid, ready, last, user."""
    ports = {p["name"] for p in doc["ports"]}
    out = []
    for name, s in doc["streams"].items():
        members = [f"{name}_{m}" for m in ("tdata", "tvalid", "tready", "tlast", "tuser")
                   if f"{name}_{m}" in ports]
        out.append((name, s["dir"], members))
    return sorted(out, key=lambda x: (x[1] != "in", x[0]))


def write_gtkw(path, dump, doc, shown=None):
    """A GTKWave save file (pyvcd's ``GTKWSave``) for ``dump`` (a VCD): clock and reset, then
    one expanded group per stream (data in hex; valid, ready, last, user), then the other
    ports. ``shown``: the waveform file the save file opens, if not ``dump`` (the FST made
    from it)."""
    from vcd.gtkw import GTKWSave

    from .vcd import header
    refs = header(dump).vars
    with open(path, "w") as f:
        save = GTKWSave(f)
        save.comment(f"spartan sim {doc['block']}: streams grouped (data, valid, ready, last, "
                     f"user)")
        save.dumpfile(str(Path(shown or dump).resolve()))
        save.savefile(str(Path(path).resolve()))
        save.timestart(0)
        save.size(1600, 900)
        save.sst_expanded(True)
        save.signals_width(300)

        def trace(name):
            var = refs.get(name)
            if var is not None:
                save.trace(var.ref, datafmt="bin" if var.width == 1 else "hex")

        trace("clk")
        trace("rst")
        grouped = {"clk", "rst"}
        for name, direction, members in stream_members(doc):
            with save.group(f"{name} ({direction})"):
                for member in members:
                    trace(member)
            grouped.update(members)
        for port in doc["ports"]:
            if port["name"] not in grouped:
                trace(port["name"])


def add_parser(sub):
    from spartan_rtl.usage import add_param_options
    p = sub.add_parser("sim", help="run a block's standard stimulus and keep its waveform",
                       description="Simulate BLOCK with its standard stimulus; write DIR/dump.vcd "
                       "(or .fst), DIR/<block>.gtkw, the manifest and sim.log.")
    p.add_argument("block")
    add_param_options(p)
    p.add_argument("--seed", type=int, metavar="N", help="random seed (default: a fresh one, "
                   "printed so the run can be repeated)")
    p.add_argument("--cycles", type=int, metavar="N",
                   help="stop the stimulus after N clock cycles (the scoreboard then does not run)")
    p.add_argument("--waves", choices=("vcd", "fst"), default="vcd",
                   help="waveform format (fst needs vcd2fst from GTKWave)")
    p.add_argument("--sim", choices=tuple(SIMULATORS), default="verilator")
    p.add_argument("--test", metavar="NAME",
                   help="another cocotb test of verif/tb/tb_<block>.py, or 'generic'")
    p.add_argument("-o", "--output", metavar="DIR", help="output directory (default waves/BLOCK)")
    p.set_defaults(func=cmd_sim)
    return p


def cmd_sim(args):
    from spartan_rtl.hw import blocks, emit
    from spartan_rtl.usage import UsageError, as_usage, block_values

    from . import runner, toolchain

    # Every input, the output folder included, is checked before the build: a mistake costs
    # nothing and leaves nothing.
    block = as_usage(blocks.get, args.block)
    values = block_values(block, args.config, args.set)
    if args.seed is not None and not 0 <= args.seed < 2 ** 32:
        raise UsageError(f"--seed must be an integer from 0 to {2 ** 32 - 1}, not {args.seed}")
    if args.cycles is not None and not 1 <= args.cycles <= 2 ** 31:
        raise UsageError(f"--cycles must be a positive integer up to {2 ** 31}, "
                         f"not {args.cycles}")
    if args.waves == "fst" and shutil.which("vcd2fst") is None:
        raise UsageError("--waves fst needs vcd2fst (GTKWave: apt-get install gtkwave); "
                         "use --waves vcd")
    if args.sim == "icarus" and not toolchain.icarus_available():
        raise UsageError(toolchain.ICARUS_HINT)
    out = Path(args.output or Path("waves") / block.name)
    as_usage(emit.check_outputs, [out / name for name in (
        "dump.vcd", "dump.fst", "sim.log", f"{block.top}.json", f"{block.name}.gtkw")], "-o")
    module, test, test_args = as_usage(stimulus, block.name, args.test)
    if args.cycles:
        test_args["max_cycles"] = args.cycles
    seed = args.seed if args.seed is not None else random.randrange(2 ** 31)

    # cocotb's runner logs build notes ("Skipping compilation ...") on the terminal; the
    # simulation's own log is in sim.log.
    logging.disable(logging.WARNING)
    # Said before each step and timed after it: a first Verilator build takes half a minute.
    print(f"building {block.name} with {SIMULATORS[args.sim]} ...", flush=True)
    started = time.monotonic()
    # One build, passed on: the build directory is named by a hash of the generator's source.
    try:
        built = runner.build(block.name, values, sim=args.sim, waves=True)
    except (SystemExit, RuntimeError, subprocess.CalledProcessError) as e:
        return _fail(f"building {block.name} for {args.sim} failed ({e}); see build.log under "
                     f"sim_build/{block.name}/")
    build_dir, doc, _ = built
    print(f"built in {time.monotonic() - started:.1f} s ({_shown_path(build_dir)})", flush=True)
    name = f"sim-{os.getpid()}"  # concurrent runs of one configuration stay apart
    run_dir = build_dir / "runs" / name
    shutil.rmtree(run_dir, ignore_errors=True)
    failure = None
    print(f"running {block.name}: {module}.{test} ({args.sim}, seed {seed}"
          + (f", {args.cycles} cycles max: the scoreboard does not run" if args.cycles else "")
          + ") ...", flush=True)
    started = time.monotonic()
    try:
        runner.run(block.name, module, values, sim=args.sim, name=name, testcase=test,
                   seed=seed, waves=True, args=test_args, built=built)
    except AssertionError as e:
        failure = (str(e).splitlines() or ["the testbench failed"])[0]
    print(f"ran in {time.monotonic() - started:.1f} s", flush=True)
    dump = run_dir / "dump.vcd"
    if not dump.exists():
        return _fail(f"the simulation left no waveform ({failure or 'no dump.vcd'}); "
                     f"log {run_dir / 'sim.log'}")
    out.mkdir(parents=True, exist_ok=True)
    vcd = out / "dump.vcd"
    shutil.move(str(dump), vcd)
    (out / "dump.fst").unlink(missing_ok=True)  # a previous run's, now stale
    shutil.copy(run_dir / "sim.log", out / "sim.log")
    shutil.rmtree(run_dir, ignore_errors=True)
    (out / f"{doc['top']}.json").write_text((build_dir / f"{doc['top']}.json").read_text())
    gtkw = out / f"{block.name}.gtkw"
    final = vcd
    if args.waves == "fst":
        final = out / "dump.fst"
        subprocess.run(["vcd2fst", str(vcd), str(final)], check=True, capture_output=True)
        write_gtkw(gtkw, vcd, doc, shown=final)
        vcd.unlink()
    else:
        write_gtkw(gtkw, vcd, doc)
    print(f"waveform: {final}")
    print(f"gtkwave:  gtkwave {final} {gtkw}")
    if args.waves == "vcd":
        print(f"picture:  spartan waves {final} -o {out / (block.name + '.png')}")
        print(f"report:   spartan waves {final} --streams")
    if failure:
        return _fail(f"the testbench failed: {failure} (log {out / 'sim.log'})")
    print("PASS")
    return 0


def _shown_path(path):
    """``path`` relative to the working directory when it is below it (``sim_build/...``)."""
    try:
        return Path(path).relative_to(Path.cwd())
    except ValueError:
        return path


def _fail(reason):
    """The verdict line of a run that did not pass: ``FAIL <reason>``, last, exit status 1."""
    print(f"FAIL {reason}", flush=True)
    return 1
