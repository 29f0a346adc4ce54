"""Amaranth component -> ``<top>.v`` + ``<top>.json`` manifest, written atomically.

Verilog goes through RTLIL and the Yosys that ships with Amaranth, with ``proc; opt_clean;
write_verilog -noattr``: that turns processes into plain ``assign`` statements and registers,
which Icarus evaluates at time 0 (Amaranth's default ``always @*`` output leaves outputs that
depend only on unchanged registers at X in Icarus) and Verilator accepts.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib import metadata
from pathlib import Path

import amaranth
from amaranth._toolchain.yosys import find_yosys
from amaranth.back import rtlil
from amaranth.hdl import Shape

from . import __version__
from .axis import AxisTop, stream_fields

__all__ = ["elaborate", "to_verilog", "manifest", "generate", "write_atomically"]

_YOSYS_SCRIPT = "proc\nflatten\nopt -fast\nwreduce\nopt_clean -purge\nwrite_verilog -noattr\n"


def _yosys():
    return find_yosys(lambda ver: ver >= (0, 40))


def elaborate(block, values=None):
    """Check ``values``, build the component and its AXI-named top. Returns (params, inner, top)."""
    params = block.resolve(values)
    inner = block.build(**params)
    return params, inner, AxisTop(inner)


def to_verilog(top, name):
    text = rtlil.convert(top, name=name, emit_src=False)
    script = f"read_rtlil <<rtlil\n{text}\nrtlil\n{_YOSYS_SCRIPT}"
    return _yosys().run(["-q", "-"], script, ignore_warnings=True)


def _ports(top):
    ports = []
    for name, member in top.signature.members.items():
        ports.append({"name": name, "dir": "in" if member.flow == amaranth.lib.wiring.In else "out",
                      "width": Shape.cast(member.shape).width})
    return ports


def manifest(block, params, inner, top):
    """The manifest of SPEC §2. Returns ``(doc, extra_files)``: a block may ship more files
    beside its Verilog (the core's C register header), named relative to the output folder."""
    info = dict(block.info(inner))
    extra_files = info.pop("extra_files", {})
    doc = {
        "block": block.name,
        "top": block.top,
        "params": params,
        "ports": [{"name": "clk", "dir": "in", "width": 1}, {"name": "rst", "dir": "in", "width": 1}]
                 + _ports(top),
        "streams": stream_fields(inner),
    }
    for key in ("registers",):
        if key in info:
            doc[key] = info.pop(key)
    doc["latency_cycles"] = info.pop("latency_cycles")
    doc["throughput_beats_per_cycle"] = info.pop("throughput_beats_per_cycle")
    doc.update(info)
    doc["generator"] = {
        "project_version": __version__,
        "amaranth": metadata.version("amaranth"),
        "yosys": ".".join(map(str, _yosys().version())),
    }
    return doc, extra_files


def write_atomically(files):
    """Write every ``{path: text}`` or none: each goes to a temporary file first, then all
    are renamed into place (a rename within one directory is atomic)."""
    staged = []
    try:
        for path, text in files.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            staged.append((tmp, path))
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)


def generate(block, values=None, out_dir="rtl_out"):
    """Generate ``<top>.v`` and ``<top>.json`` in ``out_dir``; returns their paths."""
    params, inner, top = elaborate(block, values)
    verilog = to_verilog(top, block.top)
    doc, extra_files = manifest(block, params, inner, top)
    out_dir = Path(out_dir)
    files = {out_dir / f"{block.top}.v": verilog,
             out_dir / f"{block.top}.json": json.dumps(doc, indent=2) + "\n"}
    files.update({out_dir / name: text for name, text in extra_files.items()})
    write_atomically(files)
    return list(files)
