"""``<top>.ipxact.xml``: the IP-XACT component (IEEE 1685-2014) of a generated top, for
packaging tools (Kactus2, and any tool reading IEEE 1685-2014) and IP catalogues.

Everything comes from the manifest (``doc``, :func:`spartan_rtl.hw.emit.manifest`), whose
``ports`` are the top's own signature, so the component, the instantiation template and the
constraints list the same ports as the Verilog:

* **ports**: every port of the top, with its direction and ``[width-1:0]`` vector;
* **bus interfaces**, by the port names of docs/interfaces.md: each ``s_axis_*``/``m_axis_*``
  stream an AXI4-Stream slave/master, ``s_axil_*`` an AXI4-Lite slave (with the register map),
  ``m_axi_*`` an AXI4 master (with a 32-bit address space); the standard ARM VLNVs
  (:data:`BUS_TYPES`) and logical ports (the port's suffix in capitals: ``TDATA``, ``ARADDR``);
  every interface maps ``ACLK`` to the clock and ``ARESETn`` to the reset. The default reset
  ``rst`` is active high, ``ARESETn`` active low: that port map has IEEE 1685-2014's
  ``invert="true"``, which says exactly this; with ``--axi-names`` the reset is ``aresetn``,
  active low, mapped plainly;
* **memory map** (the core and the engine): PeakRDL's export of the register map, unchanged
  (:mod:`spartan_rtl.hw.registers`), referenced by the AXI4-Lite slave;
* **model**: view ``rtl`` instantiating module ``<top>`` (Verilog) from file set ``rtl``, and
  view ``simulation`` adding ``sim_models`` where vendor primitives need their models;
* **file sets**: every other file of the generation with its IP-XACT file type.

``verif/tests/test_ipxact.py`` validates components against the IEEE 1685-2014 schema
(verif/schemas/ipxact-1685-2014) and compares their ports with the Verilog's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import NamedTuple

from .. import __version__
from .ip import STREAM_SUFFIXES, one_line_description

__all__ = ["NAMESPACE", "VENDOR", "LIBRARY", "BUS_TYPES", "BusInterface", "file_name",
           "bus_interfaces", "component"]

NAMESPACE = "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"

#: VLNV vendor and library of every component (the register export's too).
VENDOR = "spartan-rtl"
LIBRARY = "spartan"

#: ``kind: (bus definition name, version)``, vendor ``amba.com``, library ``AMBA4``; each
#: abstraction definition is ``<name>_rtl`` of the same version (ARM's AMBA 4 IP-XACT set).
BUS_TYPES = {
    "axis": ("AXI4Stream", "r0p0_1"),
    "axil": ("AXI4-Lite", "r0p0_0"),
    "axi": ("AXI4", "r0p0_0"),
}
_AMBA = {"vendor": "amba.com", "library": "AMBA4"}

#: Port-name prefix of each memory-mapped bus: ``(kind, mode)``.
_MEMORY_BUSES = {"s_axil": ("axil", "slave"), "m_axi": ("axi", "master")}

#: The AXI4 master's address space.
_ADDRESS_SPACE = "m_axi"

#: The file sets, in the component's order.
_FILE_SETS = ("rtl", "sim_models", "waivers", "constraints", "driver", "documentation")

# File name ending -> (file set, IP-XACT file type, the ``user`` type for ``user`` files).
# Checked in order: ``_inst.v`` before ``.v``.
_FILE_KINDS = (
    ("_inst.v", "documentation", "user", "verilogInstantiationTemplate"),
    (".v", "rtl", "verilogSource", None),
    (".vlt", "waivers", "user", "verilatorConfig"),
    (".sdc", "constraints", "SDC", None),
    (".xdc", "constraints", "user", "xdc"),
    (".h", "driver", "cSource", None),
    (".c", "driver", "cSource", None),
    (".json", "documentation", "user", "json"),
    (".core", "documentation", "user", "fusesocCore"),
    (".f", "documentation", "user", "fileList"),
    (".rdl", "documentation", "user", "systemRDL"),
    (".md", "documentation", "user", "markdown"),
)


def file_name(top):
    return f"{top}.ipxact.xml"


def _q(tag):
    return f"{{{NAMESPACE}}}{tag}"


def _sub(parent, tag, text=None, **attrs):
    element = ET.SubElement(parent, _q(tag), attrs)
    if text is not None:
        element.text = str(text)
    return element


class BusInterface(NamedTuple):
    name: str           # the ports' common prefix: s_axis_a, s_axil, m_axi
    kind: str           # a key of BUS_TYPES
    mode: str           # master or slave
    ports: dict         # logical port -> physical port, clock and reset not included
    description: str


def bus_interfaces(doc):
    """The top's :class:`BusInterface` list (module docstring)."""
    ports = [p["name"] for p in doc["ports"]]
    out = []
    for name, stream in doc["streams"].items():
        role = "slave: into the block" if stream["dir"] == "in" else "master: out of the block"
        mapping = {signal.upper(): f"{name}_{signal}" for signal in STREAM_SUFFIXES
                   if f"{name}_{signal}" in ports}
        out.append(BusInterface(
            name, "axis", "slave" if stream["dir"] == "in" else "master", mapping,
            f"AXI4-Stream {role}; payload tdata[{stream['beat_bits'] - 1}:0] of "
            f"{stream['tdata_width']} bits (fields in {doc['top']}.json)"))
    for prefix, (kind, mode) in _MEMORY_BUSES.items():
        mapping = {p[len(prefix) + 1:].upper(): p for p in ports if p.startswith(prefix + "_")}
        if mapping:
            role = "AXI4-Lite register slave" if kind == "axil" else "AXI4 memory master"
            out.append(BusInterface(prefix, kind, mode, mapping, role))
    return out


def _clock_reset_maps(port_maps, clock):
    _port_map(port_maps, "ACLK", clock["port"])
    # ARESETn is active low; an active-high reset is the same wire, inverted.
    _port_map(port_maps, "ARESETn", clock["reset"], invert=clock["reset_active"] == "high")


def _port_map(port_maps, logical, physical, invert=False):
    port_map = _sub(port_maps, "portMap", **({"invert": "true"} if invert else {}))
    _sub(_sub(port_map, "logicalPort"), "name", logical)
    _sub(_sub(port_map, "physicalPort"), "name", physical)


def _bus_interface(parent, doc, interface, memory_map):
    bus, version = BUS_TYPES[interface.kind]
    element = _sub(parent, "busInterface")
    _sub(element, "name", interface.name)
    _sub(element, "description", interface.description)
    _sub(element, "busType", **_AMBA, name=bus, version=version)
    abstraction = _sub(_sub(element, "abstractionTypes"), "abstractionType")
    _sub(abstraction, "abstractionRef", **_AMBA, name=f"{bus}_rtl", version=version)
    port_maps = _sub(abstraction, "portMaps")
    _clock_reset_maps(port_maps, doc["clock"])
    for logical, physical in interface.ports.items():
        _port_map(port_maps, logical, physical)
    role = _sub(element, interface.mode)
    if interface.kind == "axil" and memory_map is not None:
        _sub(role, "memoryMapRef", memoryMapRef=memory_map)
    elif interface.kind == "axi":
        _sub(role, "addressSpaceRef", addressSpaceRef=_ADDRESS_SPACE)


def _address_spaces(parent, doc):
    """The AXI4 master's view of memory: its whole byte address range, bus-word wide."""
    if "axi" not in doc:
        return
    spaces = _sub(parent, "addressSpaces")
    space = _sub(spaces, "addressSpace")
    _sub(space, "name", _ADDRESS_SPACE)
    _sub(space, "description", "the byte addresses m_axi reads and writes")
    _sub(space, "range", 1 << doc["axi"]["addr_width"])
    _sub(space, "width", doc["axi"]["data_width"])


def _ports(parent, doc):
    ports = _sub(parent, "ports")
    clock = doc["clock"]
    notes = {clock["port"]: "clock, rising edge",
             clock["reset"]: f"synchronous reset, active {clock['reset_active']}"}
    for p in doc["ports"]:
        port = _sub(ports, "port")
        _sub(port, "name", p["name"])
        if p["name"] in notes:
            _sub(port, "description", notes[p["name"]])
        wire = _sub(port, "wire")
        _sub(wire, "direction", p["dir"])
        if p["width"] > 1:
            vector = _sub(_sub(wire, "vectors"), "vector")
            _sub(vector, "left", p["width"] - 1)
            _sub(vector, "right", 0)


def _model(parent, doc):
    """View ``rtl`` (the Verilog, what synthesis reads) and, where the Verilog instantiates
    vendor primitives, view ``simulation`` (the Verilog and the primitives' models)."""
    views = {"rtl": ["rtl"]}
    if doc["sim_models"]:
        views["simulation"] = ["rtl", "sim_models"]
    model = _sub(parent, "model")
    view_list = _sub(model, "views")
    instances = _sub(model, "instantiations")
    for view_name, file_sets in views.items():
        view = _sub(view_list, "view")
        _sub(view, "name", view_name)
        _sub(view, "componentInstantiationRef", f"verilog_{view_name}")
        instance = _sub(instances, "componentInstantiation")
        _sub(instance, "name", f"verilog_{view_name}")
        _sub(instance, "language", "verilog")
        _sub(instance, "moduleName", doc["top"])
        for file_set in file_sets:
            _sub(_sub(instance, "fileSetRef"), "localName", file_set)
    _ports(model, doc)


def _file_kind(name, doc):
    if name in doc["sim_models"]:   # vendor primitives' models: simulate, never synthesise
        return "sim_models", "verilogSource", None
    for ending, file_set, file_type, user in _FILE_KINDS:
        if name.endswith(ending):
            return file_set, file_type, user
    raise ValueError(f"no IP-XACT file type for {name!r}")


def _file_sets(parent, doc, files):
    sets = {name: [] for name in _FILE_SETS}
    for name in files:
        file_set, file_type, user = _file_kind(name, doc)
        sets[file_set].append((name, file_type, user))
    element = _sub(parent, "fileSets")
    for set_name, members in sets.items():
        if not members:
            continue
        file_set = _sub(element, "fileSet")
        _sub(file_set, "name", set_name)
        for name, file_type, user in members:
            entry = _sub(file_set, "file")
            _sub(entry, "name", name)
            _sub(entry, "fileType", file_type, **({"user": user} if user else {}))
            if name.endswith(".h"):
                _sub(entry, "isIncludeFile", "true")


def _description(doc):
    clock = doc["clock"]
    return (f"{one_line_description(doc)}. Clock {clock['port']}, rising edge; reset "
            f"{clock['reset']}, synchronous, active {clock['reset_active']}"
            + (" (mapped to each interface's ARESETn inverted)"
               if clock["reset_active"] == "high" else "")
            + f". Generated by spartan-rtl {doc['generator']['project_version']}; do not edit.")


def _memory_maps(register_export):
    """The ``memoryMaps`` element of PeakRDL's component (the register map alone), and the
    name of its memory map."""
    if register_export is None:
        return None, None
    maps = ET.fromstring(register_export).find(_q("memoryMaps"))
    return maps, maps.find(f"{_q('memoryMap')}/{_q('name')}").text


def component(doc, files, register_export=None):
    """The component's XML text. ``files``: every file name of the generation (the component's
    own is left out of its file sets); ``register_export``: PeakRDL's IP-XACT export of the
    register map, whose memory map the component takes over."""
    ET.register_namespace("ipxact", NAMESPACE)
    ET.register_namespace("xsi", _XSI)
    root = ET.Element(_q("component"),
                      {f"{{{_XSI}}}schemaLocation": f"{NAMESPACE} {NAMESPACE}/index.xsd"})
    for tag, text in (("vendor", VENDOR), ("library", LIBRARY), ("name", doc["top"]),
                      ("version", __version__)):
        _sub(root, tag, text)
    memory_maps, memory_map = _memory_maps(register_export)
    interfaces = bus_interfaces(doc)
    if interfaces:
        parent = _sub(root, "busInterfaces")
        for interface in interfaces:
            _bus_interface(parent, doc, interface, memory_map)
    _address_spaces(root, doc)
    if memory_maps is not None:
        root.append(memory_maps)
    _model(root, doc)
    _file_sets(root, doc, [f for f in files if f != file_name(doc["top"])])
    _sub(root, "description", _description(doc))
    ET.indent(root, "  ")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")
