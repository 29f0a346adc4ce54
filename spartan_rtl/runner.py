"""Build and run a block's cocotb testbench in Verilator or Icarus, one build per configuration.

A configuration is (block, parameters, simulator, waves, the generator's source). Its hash
names the build directory under ``sim_build/``; a finished build leaves a stamp and is reused by
every later test of the same configuration (and is safe to share between pytest-xdist
workers: a file lock serialises the first build).

The testbench reads everything it needs from the environment the runner sets:
``SPARTAN_MANIFEST`` (path of the block's manifest JSON) and ``SPARTAN_ARGS`` (a JSON object of
test arguments chosen by the caller).

Builds go under ``sim_build/`` of the working directory (``SPARTAN_SIM_BUILD`` names another),
never into the installed package. Failures are exceptions of this module: a missing simulator
(:class:`SimulatorMissing`) and a failed or unfinished simulation (:class:`SimulationFailed`);
the pytest suite turns the first into a skip (verif/tests/conftest.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path

from . import hw, toolchain

#: The generator's sources, hashed into each build's name.
HW_DIR = Path(hw.__file__).resolve().parent
ALL_SIMS = ("verilator", "icarus")
TIMESCALE = ("1ns", "1ps")
#: Verilator coverage builds (``SPARTAN_COVERAGE=1``, ``make coverage``): line (statement
#: blocks and branches) and toggle coverage. ``--coverage-underscore`` stays off, so Yosys'
#: ``_NNN_`` temporaries are not toggle points. Each run writes its ``.dat`` file under
#: COVERAGE_RAW/<block>/ (verif/flows/coverage.py merges them).
COVERAGE_ARGS = ("--coverage-line", "--coverage-toggle")
COVERAGE_RAW = Path("build") / "coverage" / "raw"

__all__ = ["run", "build", "sims", "waves_requested", "ALL_SIMS", "SimulatorMissing",
           "SimulationFailed"]


class SimulatorMissing(RuntimeError):
    """The simulator a run asks for is not installed."""


class SimulationFailed(AssertionError):
    """A simulation did not finish, ran no test, or a cocotb test failed; the message quotes
    the end of the simulation log."""


def sim_build():
    """Root of the build directories: ``SPARTAN_SIM_BUILD`` or ``sim_build`` here."""
    return Path(os.environ.get("SPARTAN_SIM_BUILD") or "sim_build").resolve()


def sims():
    """Simulators to run: both, or the one named by ``SIM``."""
    chosen = os.environ.get("SIM")
    if chosen:
        if chosen not in ALL_SIMS:
            raise ValueError(f"SIM must be one of {', '.join(ALL_SIMS)}, not {chosen!r}")
        return (chosen,)
    return ALL_SIMS


def waves_requested():
    return os.environ.get("WAVES", "") not in ("", "0")


def coverage_requested(sim="verilator"):
    """``SPARTAN_COVERAGE=1`` builds Verilator with coverage (Icarus runs are unchanged)."""
    return sim == "verilator" and os.environ.get("SPARTAN_COVERAGE", "") not in ("", "0")


def _hw_file(name):
    """The file of ``hw`` module ``name`` (dotted below ``hw``: ``core``, ``gemm.parts``; a
    package is its ``__init__.py``), or ``None`` when there is no such module."""
    path = HW_DIR.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _hw_modules():
    """Every ``hw`` module, dotted below ``hw`` (``core``, ``gemm``, ``gemm.parts``)."""
    paths = (p.relative_to(HW_DIR).with_suffix("") for p in HW_DIR.rglob("*.py")
             if "__pycache__" not in p.parts and p != HW_DIR / "__init__.py")
    return {".".join(p.parent.parts if p.name == "__init__" else p.parts) for p in paths}


def _hw_dependencies(module):
    """``hw`` modules (dotted below ``hw``) that ``module`` (one of them) imports, directly or
    not, ``module`` included; importing a subpackage's module imports the subpackage too."""
    import ast
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        path = _hw_file(name)
        package = parts if path.name == "__init__.py" else parts[:-1]   # what ``.`` is
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not 1 <= node.level <= len(package) + 1:
                continue
            base = package[:len(package) + 1 - node.level]
            targets = ([[*base, *node.module.split(".")]] if node.module
                       else [[*base, alias.name] for alias in node.names])
            for target in targets:
                todo += [".".join(target[:i]) for i in range(1, len(target) + 1)
                         if _hw_file(".".join(target[:i]))]
    return seen


def _source_digest(block):
    """Hash of the generator source this block's Verilog depends on (its module, what that
    imports within ``hw``, and the emitter): editing one block rebuilds only its users. A block
    defined outside ``hw`` (a test harness) hashes its own file and every ``hw`` module."""
    import sys
    hw_prefix = __package__ + ".hw."
    h = hashlib.sha256()
    if block.build.__module__.startswith(hw_prefix):
        module = block.build.__module__[len(hw_prefix):]
        names = _hw_dependencies(module) | _hw_dependencies("emit")
    else:
        h.update(Path(sys.modules[block.build.__module__].__file__).read_bytes())
        names = _hw_modules()
    for name in sorted(names):
        h.update(name.encode())
        h.update(_hw_file(name).read_bytes())
    return h.hexdigest()


def _require(sim):
    if sim == "icarus" and not toolchain.icarus_available():
        raise SimulatorMissing(toolchain.ICARUS_HINT)


def _get_runner(sim):
    from cocotb_tools.runner import Icarus, get_runner

    if sim != "icarus":
        return get_runner(sim)

    class IcarusVcd(Icarus):
        """Icarus writing VCD (``dump.vcd`` in the test directory) instead of FST, like
        Verilator, so every waveform tool here reads either simulator's output."""

        def _waves_file(self):
            return "dump.vcd"

        def _test_command(self):
            cmds = super()._test_command()
            if self.waves:
                cmd = ["-vcd" if a == "-fst" else a for a in cmds[0]]
                cmd.append(f"+dumpfile_path={self.test_dir / 'dump.vcd'}")
                cmds = [cmd]
            return cmds

    return IcarusVcd()


def build(block_name, values=None, *, sim="verilator", waves=False, verilog=None, build_dir=None):
    """Generate and compile one configuration (reused when already built).
    Returns ``(build_dir, manifest, runner)``; the runner is ready for ``test()``.
    ``verilog``: compile this Verilog file as the block's top instead of generating it (the
    manifest still comes from ``values``), in ``build_dir``, which it requires (fault injection,
    verif/flows/mutants.py)."""
    from .hw import blocks
    from .hw.emit import elaborate, manifest, to_verilog

    toolchain.apply_sim_env()
    block = blocks.get(block_name)
    params = block.resolve(values)
    config = {"block": block_name, "params": params, "sim": sim, "waves": bool(waves),
              "src": _source_digest(block)}
    # Coverage measures generated blocks: a test's own Verilog (a deliberately broken copy) is
    # built without it, so that its runs add nothing to the block's figures.
    coverage = coverage_requested(sim) and verilog is None
    if coverage:  # its own hash and directory: never mixed with the normal builds
        config["coverage"] = list(COVERAGE_ARGS)
    key = json.dumps(config, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    if verilog is not None and build_dir is None:
        raise ValueError("build_dir must be given with verilog, not None")
    kind = f"{sim}-cov" if coverage else sim   # coverage builds: a directory of their own
    if verilog is None:
        build_dir = sim_build() / block_name / f"{kind}-{digest}"
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp = build_dir / "generated.stamp"
    verilog_path = build_dir / f"{block.top}.v"
    runner = _get_runner(sim)
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if verilog is not None or not stamp.exists():
            _, inner, top = elaborate(block, params)
            verilog_path.write_text(Path(verilog).read_text() if verilog is not None
                                    else to_verilog(top, block.top))
            doc, extra_files = manifest(block, params, inner, top)
            for model in doc["sim_models"]:   # vendor primitives' models (hw/ecp5.py)
                (build_dir / model).write_text(extra_files[model])
            (build_dir / f"{block.top}.json").write_text(json.dumps(doc, indent=2))
            stamp.write_text(key)
        # Incremental: Verilator skips identical inputs and make has nothing to do; Icarus
        # compares the Verilog's timestamp with its output. Either way, well under a second.
        build_args = list(toolchain.VERILATOR_WAIVERS) if sim == "verilator" else []
        if coverage:
            build_args += COVERAGE_ARGS
        models = json.loads((build_dir / f"{block.top}.json").read_text())["sim_models"]
        runner.build(sources=[verilog_path, *(build_dir / f for f in models)],
                     hdl_toplevel=block.top, build_dir=build_dir, build_args=build_args,
                     timescale=TIMESCALE, waves=waves, always=False,
                     log_file=build_dir / "build.log")
    return build_dir, json.loads((build_dir / f"{block.top}.json").read_text()), runner


def run(block_name, tb_module, values=None, *, sim="verilator", name="run", testcase=None,
        seed=None, waves=None, args=None, built=None):
    """Run ``tb_module``'s cocotb tests on one configuration; raise :class:`SimulationFailed`
    if any cocotb test fails. Returns the test directory (``dump.vcd`` is there with waves).
    ``built``: the result of :func:`build` for this configuration, when the caller has it."""
    from cocotb_tools.runner import get_results

    _require(sim)
    waves = waves_requested() if waves is None else waves
    build_dir, doc, runner = built or build(block_name, values, sim=sim, waves=waves)
    test_dir = build_dir / "runs" / name
    test_dir.mkdir(parents=True, exist_ok=True)
    env = {"SPARTAN_MANIFEST": str(build_dir / f"{doc['top']}.json"),
           "SPARTAN_ARGS": json.dumps(args or {})}
    log = test_dir / "sim.log"
    plusargs = []
    if coverage_requested(sim) and build_dir.name.startswith(f"{sim}-cov-"):
        # One file per run: runs of the same name never overwrite.
        raw = COVERAGE_RAW.resolve() / block_name
        raw.mkdir(parents=True, exist_ok=True)
        dat = raw / f"{build_dir.name}-{name}-{os.getpid()}-{time.time_ns()}.dat"
        plusargs.append(f"+verilator+coverage+file+{dat}")
    # Outside pytest's view, cocotb's runner returns the results instead of calling
    # sys.exit() on a failure, so the failure below can quote the simulation log.
    current = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        results = runner.test(test_module=tb_module, hdl_toplevel=doc["top"],
                              build_dir=build_dir, test_dir=test_dir, testcase=testcase,
                              seed=seed, waves=waves, extra_env=env, timescale=TIMESCALE,
                              plusargs=plusargs,
                              results_xml=str(test_dir / "results.xml"), log_file=log)
        total, failed = get_results(results)
    except (SystemExit, RuntimeError) as e:
        raise SimulationFailed(f"simulation of {tb_module} ({sim}) did not finish ({e}):\n"
                               + _tail(log)) from None
    finally:
        if current is not None:
            os.environ["PYTEST_CURRENT_TEST"] = current
    if total == 0:
        raise SimulationFailed(f"no cocotb test ran from {tb_module}")
    if failed:
        raise SimulationFailed(f"{failed} of {total} cocotb tests failed in {tb_module} ({sim}), "
                               f"log {log}:\n" + _tail(log))
    return test_dir


def _tail(path, lines=80):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"

