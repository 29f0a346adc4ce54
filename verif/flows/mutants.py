"""Fault injection: mutants of each block's emitted Verilog, run against a fast subset of its
regression, to show that the tests can fail (``make mutants`` writes docs/mutants.md).

A mutant is the block's Verilog at its default parameters (exactly what ``spartan generate``
writes) with ONE line changed by one of five operators:

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
tests on the default configuration (its profile's ``mutant_tests``, verif/tb/profile.py). It is
*killed* when a test fails or when the run exceeds 3x the clean design's time, and at least 60 s
more (a hang; the machine is shared). The clean design runs first through the same subset and must
pass, otherwise the campaign stops. A run of some blocks keeps the other blocks' results in
build/mutants/.

    python -m verif.flows.mutants [BLOCK ...] [--max N] [--seed S] [--jobs J]
    python -m verif.flows.mutants --rerun-survivors [BLOCK ...]   # after adding tests for survivors
    python -m verif.flows.mutants --report-only                   # rewrite docs/mutants.md

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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from spartan_rtl.tb import profile

ROOT = Path(__file__).resolve().parents[2]
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

def rtl(block_name):
    """The block's Verilog at its default parameters, as ``spartan generate`` writes it."""
    from spartan_rtl.hw import blocks
    from spartan_rtl.hw.emit import elaborate, to_verilog
    block = blocks.get(block_name)
    _, _, top = elaborate(block, block.resolve(None))
    return to_verilog(top, block.top)


def _worker(block_name, directory, seed):
    """In a child process: build ``directory``/top.v, run the subset, write result.json.
    Writes ``built`` when the build is done, so the parent can time the tests alone."""
    import cocotb_tools.runner as cocotb_runner

    from spartan_rtl import runner
    cocotb_runner.MAX_PARALLEL_BUILD_JOBS = 1  # the campaign runs its own jobs in parallel
    # Unoptimised C++: the build (not the seconds of simulation) is most of a mutant's time,
    # and -O0 halves it. Never a coverage build.
    os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + " " + O0).strip()
    os.environ.pop("SPARTAN_COVERAGE", None)
    directory = Path(directory)
    result = {"built": False, "passed": False, "error": ""}
    plan = profile.of(block_name)
    tb, (testcase, args) = plan.module, plan.mutant_tests
    t0 = time.monotonic()
    try:
        built = runner.build(block_name, None, sim="verilator", verilog=directory / "top.v",
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
        runner.run(block_name, tb, None, sim="verilator", name="mutant", testcase=testcase,
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


def campaign(blocks, count=None, seed=1, jobs=2, log=print):
    """Run every block's mutants; returns the results dict written to build/mutants/."""
    results = {"seed": seed, "blocks": {}}
    old = _previous()
    if old is not None:  # a run of some blocks keeps the others' results (same seed only)
        if old.get("seed") == seed:
            results["blocks"] = {b: r for b, r in old["blocks"].items() if b not in blocks}
    for block in blocks:
        start = time.monotonic()
        text = rtl(block)
        n = profile.of(block).mutants if count is None else count
        mutants = select(text, n, seed, block)
        bdir = OUT / block
        (bdir).mkdir(parents=True, exist_ok=True)
        (bdir / "original.v").write_text(text)
        clean = _evaluate(block, bdir / "clean", text, seed, BUILD_TIMEOUT)
        if clean["status"] != "survived":
            raise SystemExit(f"mutants: the clean {block} fails its own subset "
                             f"({clean['status']}: {clean.get('error')}); fix that first")
        test_timeout = max(3 * clean["test_s"], clean["test_s"] + 60)  # the machine is shared
        log(f"{block}: clean build {clean['build_s']} s, tests {clean['test_s']} s; "
            f"{len(mutants)} mutants (timeout {test_timeout:.0f} s)")

        def one(k_m):
            k, m = k_m
            r = _evaluate(block, bdir / f"m{k:02d}", m.apply(text), seed, test_timeout)
            log(f"  {block} m{k:02d} {r['status']:8s} {m.kind:9s} line {m.line}: {m.what}")
            return {**asdict(m), "index": k, **r}

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            rows = list(pool.map(one, enumerate(mutants)))
        results["blocks"][block] = {"clean": clean, "lines": text.count("\n"),
                                    "sites": len(sites(text)), "mutants": rows,
                                    "wall_s": round(time.monotonic() - start)}
        results["wall_s"] = sum(b.get("wall_s", 0) for b in results["blocks"].values())
        _save(results)
    return results


def rerun_survivors(blocks, seed=1, jobs=2, log=print, only=None):
    """Run the survivors of the last campaign again (after tests were added), from their
    stored Verilog (build/mutants/BLOCK/mNN/top.v): a killed mutant stays killed when tests
    are only added, so this is the cheap way to update the figures."""
    results = _previous()
    for block in blocks:
        b = results["blocks"][block]
        clean = b["clean"]
        test_timeout = max(3 * clean["test_s"], clean["test_s"] + 60)
        todo = [r for r in b["mutants"] if r["status"] == "survived"
                and (only is None or f"m{r['index']:02d}" in only)]
        start = time.monotonic()

        def one(r):
            d = OUT / block / f"m{r['index']:02d}"
            new = _evaluate(block, d, (d / "top.v").read_text(), seed, test_timeout)
            log(f"  {block} m{r['index']:02d} {new['status']:8s} (rerun) {r['what']}")
            r.update(new, rerun=True)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, todo))
        b["rerun_s"] = round(time.monotonic() - start)
        _save(results)
    return results


# --- the report ----------------------------------------------------------------------------

#: What each survivor says (or which test was added to kill it), by (block, line before,
#: line after), written by hand after reading the survivors of seed 1. A new survivor (or one
#: whose Verilog moved) shows as "not yet explained".
NOTES = {
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
        "the stream core) holds at most one tile here, since each step's tile finishes before "
        "the next step's B chunk loads; so it is never full and the always-on write only "
        "touches the free entry at the write pointer, which its real write then sets.",
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
    ("engine", "if (\\core.transposer.staged.w_port__en )", "if (1'h1)"):
        "equivalent: the transposer issues a bank read only while its `staged` FIFO has room "
        "for it and the one in flight (`staged.level + issued < 3` of 4), so the FIFO's inner "
        "memory (3 entries) never holds more than 2 and the always-on write only touches the "
        "free entry at the write pointer, which the next real write sets.",
    ("engine", "assign _0294_[31:3] = 29'h00000000;", "assign _0294_[31:3] = 29'h1;"):
        "equivalent: bits 31:3 of `STATUS`'s read word, which Yosys keeps as a wire; the "
        "register read multiplexer takes only its bits 2:0 (`{29'h00000000, _0294_[2:0]}`).",
    ("engine", "assign _0560_[16:0] = \\core.desc_n [15:0] + 3'h7;",
     "assign _0560_[16:0] = \\core.desc_n [15:0] + 3'h6;"):
        "`B`'s row bytes rounded up to bus words with one too few added: a row one element "
        "past a word passes with a stride one word short. No refused descriptor had such a "
        "row. Killed by the new case of `bad_descriptors` (tb_engine.py): `N` one element "
        "past a word, `B_STRIDE` a word short.",
    ("engine", "assign _0377_ = \\core.lookup_index  < 9'h100;",
     "assign _0377_ = \\core.lookup_index  < 9'h101;"):
        "a tile whose table entry is exactly `table_depth` (one past the table) read entry 0 "
        "as its own: random layers never had entry 0 valid with such a tile. Killed by the new "
        "`table_end` (tb_engine.py).",
    ("engine", "assign _0314_[0] = \\core.write_cmds.inner_level  + 1'h1;",
     "assign _0314_[0] = \\core.write_cmds.inner_level  - 1'h1;"):
        "equivalent: the write-command queue's inner level is one bit (a two-entry buffered "
        "FIFO keeps one entry inside), and one bit plus one is one bit minus one.",
    ("engine", "assign _2254_ = _2250_ ? _0324_[0] : _2253_;",
     "assign _2254_ = _2250_ ? _2253_ : _0324_[0];"):
        "equivalent: the next level of the writer's one-bit `pending` queue; with the arms "
        "swapped a read gives Yosys' `x` arm (0 in Verilator), which is `level - 1` of a queue "
        "that holds its one entry, and a write gives `level - 1`, the same bit as `level + 1`.",
}


def _diff(m):
    return f"`-{m['before'].strip()}`<br>`+{m['after'].strip()}`".replace("|", "\\|")


def _note(block, r):
    return NOTES.get((block, r["before"].strip(), r["after"].strip()), "not yet explained")


def _md(text):
    """Plain text for a table cell: ``|`` escaped, ``_``/``*`` escaped outside backquotes."""
    parts = text.replace("\n", " ").split("`")
    for k in range(0, len(parts), 2):
        parts[k] = re.sub(r"([_*])", r"\\\1", parts[k])
    return "`".join(parts).replace("|", "\\|")


def report(results):
    rerun = sum(b.get("rerun_s", 0) for b in results["blocks"].values())
    lines = ["<!-- Generated by make mutants (python -m verif.flows.mutants); do not edit. -->",
             "# Fault injection (mutation testing)", "",
             "Generated by `make mutants`. Each mutant is the block's emitted Verilog (default "
             "parameters) with one line changed; it is *killed* when the block's cocotb tests "
             "(default configuration, Verilator) fail or hang (over 3x the clean run's time, "
             "and at least 60 s more). "
             "*Invalid* mutants are those Verilator refuses to build; they do not count. "
             "How it works: docs/verification.md, *Fault injection*.", "",
             f"Seed {results['seed']}; wall time {results.get('wall_s', 0) // 60} min "
             f"{results.get('wall_s', 0) % 60} s, the sum of the blocks' (2 mutants at a time, "
             "on a 2-core machine shared with other jobs; `make mutants` runs the blocks with "
             "mutants in their profile, the core only when named: "
             "`python -m verif.flows.mutants core --max 6`)."
             + (f" The survivors were run again after tests were added for them "
                f"(`--rerun-survivors`, {rerun} s)." if rerun else ""), "",
             "| block | Verilog lines | sites | mutants | invalid | killed | survived "
             "(equivalent) | killed % | killed % of non-equivalent | wall (min) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    total_k = total_v = total_e = 0
    survivors = []
    for block, b in results["blocks"].items():
        rows = b["mutants"]
        invalid = sum(r["status"] == "invalid" for r in rows)
        killed = sum(r["status"] in ("killed", "timeout") for r in rows)
        equivalent = sum(r["status"] == "survived" and _note(block, r).startswith("equivalent")
                         for r in rows)
        valid = len(rows) - invalid
        total_k, total_v, total_e = total_k + killed, total_v + valid, total_e + equivalent
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
    first = sum(r.get("rerun", False) and r["status"] != "survived"
                for b in results["blocks"].values() for r in b["mutants"])
    if first and total_v:
        lines += ["", f"Before the tests added for them: {total_k - first} of {total_v} killed "
                  f"({100 * (total_k - first) / total_v:.1f} %)."]
    lines += ["", "## By kind", "", "| kind | mutants | invalid | killed | survived |",
              "|---|---:|---:|---:|---:|"]
    for kind in KINDS:
        rows = [r for b in results["blocks"].values() for r in b["mutants"] if r["kind"] == kind]
        inv = sum(r["status"] == "invalid" for r in rows)
        kil = sum(r["status"] in ("killed", "timeout") for r in rows)
        lines.append(f"| {kind} | {len(rows)} | {inv} | {kil} | {len(rows) - inv - kil} |")
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
               if r.get("rerun") and r["status"] != "survived"]
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
    """The blocks whose profile asks for mutants by default."""
    from spartan_rtl.hw.blocks import BLOCKS
    return [b for b in BLOCKS if profile.of(b).mutants]


def main(argv=None):
    from spartan_rtl.hw.blocks import BLOCKS
    p = argparse.ArgumentParser(prog="python -m verif.flows.mutants",
                                description=__doc__.split("\n")[0])
    p.add_argument("blocks", nargs="*", metavar="BLOCK",
                   help=f"blocks (default: {' '.join(default_blocks())})")
    p.add_argument("--max", type=int, default=None,
                   help="mutants per block (default: the block's profile)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2, help="mutants run in parallel (default 2)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite docs/mutants.md from the last results (build/mutants/, else "
                        "docs/mutants.json)")
    p.add_argument("--rerun-survivors", action="store_true",
                   help="run only the last campaign's survivors again (after adding tests)")
    p.add_argument("--only", metavar="mNN,...", type=lambda v: set(v.split(",")),
                   help="with --rerun-survivors: only these mutants (the others keep their "
                        "verdicts)")
    p.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        _worker(a.blocks[0], a.worker, a.seed)
        return
    if a.report_only:
        DOC.write_text(report(_previous()))
        return
    blocks = a.blocks or default_blocks()
    for b in blocks:
        if b not in BLOCKS:
            raise SystemExit(f"block must be one of {', '.join(BLOCKS)}, not {b!r}")
    from spartan_rtl import toolchain
    toolchain.apply_sim_env()
    say = lambda s: print(s, flush=True)  # noqa: E731
    if a.rerun_survivors:
        results = rerun_survivors(a.blocks or list(_previous()["blocks"]), a.seed, a.jobs,
                                  log=say, only=a.only)
    else:
        results = campaign(blocks, a.max, a.seed, a.jobs, log=say)
    DOC.write_text(report(results))
    print(f"wrote {DOC.relative_to(ROOT)} and {RECORD.relative_to(ROOT)}; "
          f"campaign wall time {results['wall_s']} s")


if __name__ == "__main__":
    main()
