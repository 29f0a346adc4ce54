"""Amaranth component -> ``<top>.v``, ``<top>.json`` and the IP files of :mod:`spartan_rtl.hw.ip`,
written atomically as a set.

Verilog goes through RTLIL and the Yosys that ships with Amaranth, with ``proc; flatten; ...;
write_verilog -noattr``: that turns processes into plain ``assign`` statements and registers,
which Icarus evaluates at time 0 (Amaranth's default ``always @*`` output leaves outputs that
depend only on unchanged registers at X in Icarus) and Verilator accepts.

Naming: the top module is ``name`` (default the block's ``spartan_<block>``). Amaranth names
every submodule ``<name>.<path>`` and Yosys flattens them all into the top, so a file holds one
module and two configurations with different names never collide. :func:`to_verilog` checks
it: a module that survived flattening would have to be the escaped ``\\<name>.<path>``
(Amaranth's builtin Yosys has no ``rename`` to give it a plainer name), anything else is a bug.

Stream ``tdata`` ports are whole bytes (:class:`AxisTop` pads them); the manifest gives each
stream's payload width ``beat_bits`` and port width ``tdata_width``, checked against ``ports``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import amaranth
from amaranth._toolchain.yosys import find_yosys
from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, ResetSignal, Shape, Signal

from .. import __version__
from . import ip, ipxact, registers
from .axis import AxisTop, stream_fields

__all__ = ["elaborate", "to_verilog", "manifest", "generate", "write_atomically",
           "check_outputs", "OutputError", "FILE_MODE"]

_YOSYS_PASSES = "proc\nflatten\nopt -fast\nwreduce\nopt_clean -purge\nwrite_verilog -noattr\n"

#: Every generated file: readable by all, whatever the umask (they are build products that
#: other users and tools read; docs/interfaces.md#the-generated-files).
FILE_MODE = 0o644


def _yosys():
    return find_yosys(lambda ver: ver >= (0, 40))


def elaborate(block, values=None):
    """Check ``values``, build the component and its AXI-named top. Returns (params, inner, top)."""
    params = block.resolve(values)
    inner = block.build(**params)
    return params, inner, AxisTop(inner)


class AxiClockTop(Elaboratable):
    """``top`` with AXI clock and reset names: ``aclk`` drives the ``sync`` domain and the
    synchronous, active-low ``aresetn`` is inverted into its reset. Nothing else changes."""

    def __init__(self, top):
        names = ip.ClockNames(axi_names=True)
        self.top = top
        self.aclk = Signal(name=names.clock)
        self.aresetn = Signal(name=names.reset, init=1)

    def ports(self):
        top_ports = [getattr(self.top, n) for n in self.top.signature.members]
        return [self.aclk, self.aresetn] + top_ports

    def elaborate(self, platform):
        # The top's own module, not a submodule of a new one: internal names stay
        # ``core.<signal>`` as with the default names (waveforms, lint waivers).
        m = self.top.elaborate(platform)
        self.top._MustUse__used = True   # elaborated here, by hand: what Fragment.get records
        m.domains.sync = ClockDomain("sync")
        m.d.comb += [ClockSignal("sync").eq(self.aclk), ResetSignal("sync").eq(~self.aresetn)]
        return m


def module_names(verilog):
    """The modules a generated file declares (our own Yosys output: ``module <name>(``, an
    escaped ``\\name`` for a submodule)."""
    return re.findall(r"^module\s+(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)\s*\(", verilog, re.M)


def to_verilog(top, name, *, ports=None):
    """Verilog of ``top`` as module ``name``, every other module (none: all is flattened)
    named ``\\<name>.<path>``. ``ports``: the top's ports when ``top`` is no component
    (:class:`AxiClockTop`)."""
    text = rtlil.convert(top, name=name, ports=ports, emit_src=False)
    # Written twice to stdout (the builtin Yosys writes no files): without attributes, then
    # with them, for the memories' promises (:func:`keep_memory_attributes`).
    script = f"read_rtlil <<rtlil\n{text}\nrtlil\n{_YOSYS_PASSES}write_verilog\n"
    both = _yosys().run(["-q", "-"], script, ignore_warnings=True)
    header = both.split("\n", 1)[0]
    second = both.index(header, len(header))
    verilog = keep_memory_attributes(both[:second], both[second:])
    modules = module_names(verilog)
    if name not in modules or any(m != name and not m.startswith(f"\\{name}.") for m in modules):
        raise RuntimeError(f"Yosys wrote modules {modules} for top {name!r}")
    return verilog


#: Attributes of a memory that the Verilog keeps: they tell a synthesis tool what the design
#: promises (``no_rw_check``: no read meets a write of the same word in one cycle, see
#: :data:`spartan_rtl.hw.elements.NO_RW_CHECK`), and simulators ignore them.
KEPT_MEMORY_ATTRIBUTES = ("no_rw_check",)

_ATTRIBUTE_LINE = re.compile(r"\s*\(\*\s*(\S+)\s*=.*\*\)\s*$")


def keep_memory_attributes(verilog, with_attributes):
    """``verilog`` (written ``-noattr``) with the :data:`KEPT_MEMORY_ATTRIBUTES` of each memory
    found in ``with_attributes`` (the same design written with every attribute), each on its
    own line before the memory's declaration: nothing else changes."""
    lines = with_attributes.split("\n")
    plain = verilog.split("\n")
    insert = {}
    for i, line in enumerate(lines):
        match = _ATTRIBUTE_LINE.match(line)
        if not match or match.group(1) not in KEPT_MEMORY_ATTRIBUTES:
            continue
        j = i + 1
        while _ATTRIBUTE_LINE.match(lines[j]):
            j += 1
        declaration = lines[j]
        if not declaration.lstrip().startswith("reg ") or not declaration.rstrip().endswith("];"):
            raise RuntimeError(f"attribute {match.group(1)} of {declaration.strip()!r}: "
                               f"not a memory")
        at = [k for k, other in enumerate(plain) if other == declaration]
        if len(at) != 1:
            raise RuntimeError(f"memory {declaration.strip()!r} found {len(at)} times")
        insert.setdefault(at[0], []).append(line)
    out = []
    for k, line in enumerate(plain):
        out += insert.get(k, [])
        out.append(line)
    return "\n".join(out)


def _ports(top):
    ports = []
    for name, member in top.signature.members.items():
        ports.append({"name": name, "dir": "in" if member.flow == amaranth.lib.wiring.In else "out",
                      "width": Shape.cast(member.shape).width})
    return ports


def _check_padding(doc):
    """Each stream's ``tdata`` port in ``ports`` is whole bytes and the next byte above the
    payload, as its ``tdata_width`` says: the top (:class:`AxisTop`) and the manifest's
    ``streams`` (:func:`stream_fields`) are built apart, and a disagreement is a bug."""
    widths = {p["name"]: p["width"] for p in doc["ports"]}
    for name, s in doc["streams"].items():
        port = widths[f"{name}_tdata"]
        if port % 8 or port != s["tdata_width"] or not s["beat_bits"] <= port < s["beat_bits"] + 8:
            raise RuntimeError(f"{name}_tdata is {port} bits for a {s['beat_bits']}-bit payload "
                               f"(tdata_width {s['tdata_width']})")


def generator_versions():
    return {"project_version": __version__, "amaranth": metadata.version("amaranth"),
            "yosys": ".".join(map(str, _yosys().version()))}


def manifest(block, params, inner, top, *, name=None, clock_mhz=100.0, axi_names=False):
    """The manifest (docs/interfaces.md#the-manifest). Returns ``(doc, extra_files)``: a block
    may ship more files beside its Verilog (the core's register header), named relative to the
    output folder."""
    info = dict(block.info(inner))
    extra_files = info.pop("extra_files", {})
    top_name = name or block.top
    regmap, driver = info.pop("regmap", None), info.pop("c_driver", None)
    if regmap is not None:   # named after the top: macros, address map, component
        extra_files.update(registers.render(regmap, top_name))
    if driver is not None:
        extra_files.update(ip.c_driver(driver, top_name))
    clock = ip.ClockNames(axi_names)
    doc = {
        "block": block.name,
        "top": top_name,
        "summary": block.summary,
        "params": params,
        "ports": [{"name": clock.clock, "dir": "in", "width": 1},
                  {"name": clock.reset, "dir": "in", "width": 1}] + _ports(top),
        "streams": stream_fields(inner),
    }
    for key in ("registers",):
        if key in info:
            doc[key] = info.pop(key)
    doc["latency_cycles"] = info.pop("latency_cycles")
    doc["throughput_beats_per_cycle"] = info.pop("throughput_beats_per_cycle")
    doc.update(info)
    doc.setdefault("sim_models", [])   # vendor primitives' simulation models (hw/ecp5.py)
    doc["clock"] = clock.manifest(clock_mhz)
    doc["generator"] = generator_versions()
    _check_padding(doc)
    return doc, extra_files


# --- output paths: checked before any work, written as one set ---------------------------

class OutputError(ValueError):
    """An output path that cannot be written: a user error, named in the usual form."""


def _limits(existing):
    try:
        return os.pathconf(existing, "PC_NAME_MAX"), os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 255, 4096


def _nearest_existing(path):
    """The deepest existing ancestor of ``path`` (or ``path``), and the parts below it."""
    path = Path(os.path.abspath(path))
    missing = []
    while not os.path.lexists(path):
        missing.append(path.name)
        path = path.parent
    return path, list(reversed(missing))


# A staged name is ``<existing>/.spartan-XXXXXXXX/<relative path>``: this much longer.
_STAGING_EXTRA = len("/.spartan-") + 8 + 8


def check_outputs(paths, option="-o"):
    """Raise :class:`OutputError` unless every file of ``paths`` can be written: no part of the
    way is a file, no target is a directory, names fit the file system, and the deepest
    existing folder accepts a new entry (probed by creating and removing one, which also
    answers for read-only mounts and for root). Changes nothing."""
    for p in paths:
        try:
            if "\0" in str(p):
                raise ValueError
            os.fsencode(str(p))
        except (ValueError, UnicodeError):
            raise OutputError(f"{option} must be a path the file system can store (no NUL "
                              f"characters, encodable names), not {str(p)!r}") from None
    paths = [Path(os.path.abspath(p)) for p in paths]
    root = Path(os.path.commonpath([p.parent for p in paths]))
    base, _ = _nearest_existing(root)
    if not base.is_dir():
        raise OutputError(f"{option} must be a directory or a path where one can be created, "
                          f"not {str(root)!r} ({str(base)!r} is a file)")
    name_max, path_max = _limits(base)
    for p in paths:
        for part in p.parts:
            if len(os.fsencode(part)) > name_max:
                raise OutputError(f"{option} must be a path whose every name has at most "
                                  f"{name_max} bytes, not {str(root)!r}")
        if len(os.fsencode(str(p))) + _STAGING_EXTRA >= path_max:
            raise OutputError(f"{option} must be a path shorter than {path_max - 100} bytes, "
                              f"not {str(root)[:60]!r}... ({len(str(root))} characters)")
        parent, _ = _nearest_existing(p.parent)
        if not parent.is_dir():
            raise OutputError(f"{option} must be a directory or a path where one can be "
                              f"created, not {str(p.parent)!r} ({str(parent)!r} is a file)")
        if os.path.lexists(p) and (p.is_dir() or not (p.is_file() or p.is_symlink())):
            raise OutputError(f"{option} must be a folder where {p.name} can be written, not "
                              f"{str(p.parent)!r} ({p.name} there is no regular file)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".spartan-probe-", dir=base))
    except OSError as e:
        raise OutputError(f"{option} must be a writable directory, not {str(root)!r} "
                          f"({str(base)!r}: {e.strerror})") from None


def write_atomically(files, option="-o"):
    """Write every ``{path: text}`` or none, leaving the file system as it was on failure.

    All files are staged in one temporary folder inside the deepest existing folder (same file
    system, so renames are atomic), each written ``FILE_MODE`` (new folders get the usual
    mode the umask leaves; only the staging folder itself is private, and it is never kept). Then
    each folder that does not exist yet appears with one rename of its staged copy (files inside),
    and each file in an existing folder replaces its target with one rename, after a hard link (or
    copy) of the old file is kept; if any step fails, the new folders are removed and the old files
    restored."""
    files = {Path(os.path.abspath(p)): text for p, text in files.items()}
    check_outputs(files, option)
    root = Path(os.path.commonpath([p.parent for p in files]))
    base, _ = _nearest_existing(root)
    staging = Path(tempfile.mkdtemp(prefix=".spartan-", dir=base))
    backups = None  # old versions of replaced files, until all is in place
    created, replaced = [], []   # new folders renamed into place; (target, backup or None)
    try:
        new_roots = {}
        for path, text in files.items():
            staged = staging / path.relative_to(base)
            staged.parent.mkdir(parents=True, exist_ok=True)
            with open(staged, "w") as f:
                f.write(text)
            os.chmod(staged, FILE_MODE)
            folder, missing = _nearest_existing(path.parent)
            if missing:  # the file goes in with the first folder that does not exist yet
                new_roots[folder / missing[0]] = staging / (folder / missing[0]).relative_to(base)
        backups = Path(tempfile.mkdtemp(prefix=".spartan-old-", dir=base))
        for i, path in enumerate(files):
            if _nearest_existing(path.parent)[1]:
                continue
            backup = None
            if os.path.lexists(path):
                backup = backups / str(i)
                try:
                    os.link(path, backup, follow_symlinks=False)
                except OSError:
                    shutil.copy2(path, backup, follow_symlinks=False)
            os.replace(staging / path.relative_to(base), path)
            replaced.append((path, backup))
        for target, staged_dir in new_roots.items():
            if os.path.lexists(target):
                raise FileExistsError(errno.EEXIST, "appeared while writing", str(target))
            os.rename(staged_dir, target)
            created.append(target)
    except BaseException as e:
        for target in created:
            shutil.rmtree(target, ignore_errors=True)
        for path, backup in reversed(replaced):
            if backup is None:
                path.unlink(missing_ok=True)
            else:
                os.replace(backup, path)
        if isinstance(e, OSError):  # a full disk, a folder removed meanwhile: not a bug
            raise OutputError(f"{option} must be a directory where the files can be written, "
                              f"not {str(root)!r} ({e.strerror or e})") from e
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if backups is not None:
            shutil.rmtree(backups, ignore_errors=True)


def generate(block, values=None, out_dir="rtl_out", *, name=None, clock_mhz=100.0,
             axi_names=False, core_vlnv=None):
    """Generate the file set of one configuration in ``out_dir``
    (:func:`spartan_rtl.hw.ip.output_names`: ``<top>.v`` first, the manifest, block extras such as
    the core's C header, the instantiation template, FuseSoC core, file list, SDC, XDC and IP-XACT
    component); returns their paths.

    ``name`` is the top module (default ``block.top``); ``axi_names`` gives ``aclk`` and an
    active-low ``aresetn``; ``core_vlnv`` overrides the FuseSoC core's name (its generator).
    Parameters, ``name``, ``clock_mhz`` and the output paths are all checked before the block
    is built; nothing is written unless everything is."""
    top_name = ip.check_name(name if name is not None else block.top, "name")
    clock_mhz = ip.check_clock_mhz(clock_mhz, "clock_mhz")
    out_dir = Path(out_dir)
    params = block.resolve(values)
    check_outputs([out_dir / f for f in ip.output_names(top_name)])
    params, inner, top = elaborate(block, params)
    if axi_names:
        wrapper = AxiClockTop(top)
        verilog = to_verilog(wrapper, top_name, ports=wrapper.ports())
    else:
        verilog = to_verilog(top, top_name)
    doc, extra_files = manifest(block, params, inner, top, name=top_name, clock_mhz=clock_mhz,
                                axi_names=axi_names)
    command = ip.regenerate_command(block.name, params, name=top_name, default_name=block.top,
                                    clock_mhz=clock_mhz, axi_names=axi_names, out_dir=out_dir)
    # The register map's own IP-XACT export becomes part of the whole component.
    register_export = extra_files.pop(ipxact.file_name(top_name), None)
    names = ip.output_names(top_name, extra_files)
    texts = {f"{top_name}.v": ip.header(doc, command) + verilog,
             f"{top_name}.json": json.dumps(doc, indent=2) + "\n",
             **extra_files,
             f"{top_name}_inst.v": ip.instance_template(doc, command),
             f"{top_name}.core": ip.fusesoc_core(doc, command, names, core_vlnv=core_vlnv),
             f"{top_name}.f": ip.file_list(doc),
             f"{top_name}.vlt": ip.lint_waivers([f"{top_name}.v", f"*/{top_name}.v"],
                                                f"Lint waivers of {top_name}.v", doc),
             f"{top_name}.sdc": ip.sdc(doc, command),
             f"{top_name}.xdc": ip.xdc(doc, command),
             ipxact.file_name(top_name): ipxact.component(doc, names, register_export)}
    files = {out_dir / n: texts[n] for n in names}
    write_atomically(files)
    return list(files)
