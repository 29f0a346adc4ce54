"""Every generated top's IP-XACT component (``<top>.ipxact.xml``, hw/ipxact.py) is valid
IEEE 1685-2014 and describes the Verilog it ships with.

* valid against the standard's XML schema, vendored verbatim in verif/schemas/ipxact-1685-2014
  (lxml; skipped with the reason when lxml is missing), and the schema rejects a component
  with a port map cut short or an element the standard does not have;
* its ports are the ports of the ``.v`` module header: names, directions, widths;
* each bus interface maps only existing ports, to logical ports of its AMBA abstraction
  definition (ARM's AMBA 4 names, pinned below), with every port the definition requires, in
  the direction the interface's mode gives; every stream and bus port of the Verilog is in
  one interface; ``ACLK`` is the clock, ``ARESETn`` the reset, inverted when it is active
  high; a component with a required port left out fails this check too;
* the register map is the AXI4-Lite slave's memory map, named after the top (``--name``);
* the file sets list every other file of the generation, the Verilog as ``verilogSource``;
  view ``rtl`` instantiates the module from the Verilog alone, view ``simulation`` (vendor
  primitives only) adds their models.

Cases: the core and the engine at their defaults, at a small configuration and through the
CLI with ``--name foo --axi-names``; the other blocks at a small configuration, and the GEMM
with ECP5 multipliers.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from spartan_rtl.hw import blocks, ipxact
from spartan_rtl.hw.emit import generate
from verif.flows import ROOT
from verif.tests.helpers import IP_CONFIGS

SCHEMA = ROOT / "verif" / "schemas" / "ipxact-1685-2014" / "index.xsd"
NS = {"ipxact": "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"}

#: case -> (block, parameters, CLI options or None for a direct ``generate``)
CASES = {
    "core": ("core", {}, None),
    "core_small": ("core", IP_CONFIGS["core"][1], None),
    "core_foo_axi": ("core", IP_CONFIGS["core"][0], ["--name", "foo", "--axi-names"]),
    "engine": ("engine", {}, None),
    "engine_small": ("engine", IP_CONFIGS["engine"][1], None),
    "engine_foo_axi": ("engine", IP_CONFIGS["engine"][0], ["--name", "foo", "--axi-names"]),
    **{block: (block, IP_CONFIGS[block][0], None)
       for block in ("monitor", "compactor", "expander", "gemm")},
    # vendor primitives: their simulation models in a file set and view of their own
    "gemm_ecp5": ("gemm", dict(IP_CONFIGS["gemm"][0], multiplier="ecp5"), None),
}

# The logical ports of ARM's AMBA 4 abstraction definitions (amba.com:AMBA4:<bus>_rtl).
_AXI_CHANNELS = {"AW": ("ID", "ADDR", "LEN", "SIZE", "BURST", "LOCK", "CACHE", "PROT", "QOS",
                        "REGION", "USER", "VALID", "READY"),
                 "W": ("DATA", "STRB", "LAST", "USER", "VALID", "READY"),
                 "B": ("ID", "RESP", "USER", "VALID", "READY"),
                 "AR": ("ID", "ADDR", "LEN", "SIZE", "BURST", "LOCK", "CACHE", "PROT", "QOS",
                        "REGION", "USER", "VALID", "READY"),
                 "R": ("ID", "DATA", "RESP", "LAST", "USER", "VALID", "READY")}
_GLOBAL = {"ACLK", "ACLKEN", "ARESETn"}
LOGICAL = {
    "AXI4": _GLOBAL | {c + s for c, signals in _AXI_CHANNELS.items() for s in signals},
    "AXI4-Lite": _GLOBAL | {"AWADDR", "AWPROT", "AWVALID", "AWREADY", "WDATA", "WSTRB",
                            "WVALID", "WREADY", "BRESP", "BVALID", "BREADY", "ARADDR",
                            "ARPROT", "ARVALID", "ARREADY", "RDATA", "RRESP", "RVALID",
                            "RREADY"},
    "AXI4Stream": _GLOBAL | {"TVALID", "TREADY", "TDATA", "TSTRB", "TKEEP", "TLAST", "TID",
                             "TDEST", "TUSER", "TWAKEUP"},
}
#: Logical ports the definitions make required on the side this project's tops take.
REQUIRED = {
    ("AXI4", "master"): {"AWADDR", "AWPROT", "AWVALID", "AWREADY", "WDATA", "WLAST", "WVALID",
                         "WREADY", "BVALID", "BREADY", "ARADDR", "ARPROT", "ARVALID",
                         "ARREADY", "RDATA", "RVALID", "RREADY"},
    ("AXI4-Lite", "slave"): {"AWADDR", "AWVALID", "AWREADY", "WDATA", "WSTRB", "WVALID",
                             "WREADY", "BVALID", "BREADY", "ARADDR", "ARVALID", "ARREADY",
                             "RDATA", "RVALID", "RREADY"},
    ("AXI4Stream", "slave"): {"TVALID"},
    ("AXI4Stream", "master"): {"TVALID"},
}
BUS_PREFIX = {"AXI4": "m_axi", "AXI4-Lite": "s_axil", "AXI4Stream": None}


def master_direction(logical):
    """A logical port's direction on a master, from the AMBA rules: the clock and reset come
    in; each channel's payload and VALID go with the channel (out on AW, W, AR and a stream,
    in on B and R), its READY against it."""
    if logical in _GLOBAL:
        return "in"
    forward = not logical.startswith(("B", "R"))
    if logical.endswith("READY"):
        forward = not forward
    return "out" if forward else "in"


# --- generation and parsing -----------------------------------------------------------------

@pytest.fixture(scope="module", params=list(CASES))
def generated(request, tmp_path_factory):
    """(folder, top, component root) of one case."""
    block_name, params, cli = CASES[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    if cli is None:
        generate(blocks.get(block_name), params, folder)
        top = blocks.get(block_name).top
    else:
        sets = [a for k, v in params.items() for a in ("--set", f"{k}={v}")]
        run = subprocess.run([sys.executable, "-m", "spartan_rtl.cli", "generate", block_name,
                              *sets, *cli, "-o", str(folder)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        top = cli[cli.index("--name") + 1]
    return folder, top, ET.parse(folder / ipxact.file_name(top)).getroot()


def verilog_ports(text, top):
    """``{name: (dir, width)}`` from the module header and the declarations under it (Yosys
    writes them two spaces in; the functions' arguments further in)."""
    header = re.search(rf"^module {top}\((.*?)\);", text, re.S | re.M)
    names = [n.strip() for n in header.group(1).split(",")]
    declared = {}
    for kind, msb, lsb, name in re.findall(r"^  (input|output) (?:\[(\d+):(\d+)\] )?(\w+);",
                                           text[header.end():], re.M):
        declared[name] = ("in" if kind == "input" else "out", int(msb or 0) - int(lsb or 0) + 1)
    assert sorted(declared) == sorted(names)
    return declared


def component_ports(root):
    ports = {}
    for port in root.findall("ipxact:model/ipxact:ports/ipxact:port", NS):
        left = port.findtext("ipxact:wire/ipxact:vectors/ipxact:vector/ipxact:left", "0", NS)
        right = port.findtext("ipxact:wire/ipxact:vectors/ipxact:vector/ipxact:right", "0", NS)
        ports[port.findtext("ipxact:name", namespaces=NS)] = (
            port.findtext("ipxact:wire/ipxact:direction", namespaces=NS),
            int(left) - int(right) + 1)
    return ports


def interfaces(root):
    """``[(name, bus, mode, {logical: (physical, inverted)})]``."""
    out = []
    for bus_if in root.findall("ipxact:busInterfaces/ipxact:busInterface", NS):
        bus = bus_if.find("ipxact:busType", NS).get("name")
        mode = next(m for m in ("master", "slave") if bus_if.find(f"ipxact:{m}", NS) is not None)
        maps = {}
        for port_map in bus_if.iterfind(".//ipxact:portMap", NS):
            logical = port_map.findtext("ipxact:logicalPort/ipxact:name", namespaces=NS)
            assert logical not in maps, (bus_if, logical)
            maps[logical] = (port_map.findtext("ipxact:physicalPort/ipxact:name", namespaces=NS),
                             port_map.get("invert", "false") == "true")
        out.append((bus_if.findtext("ipxact:name", namespaces=NS), bus, mode, maps))
    return out


def bus_interface_errors(root, verilog):
    """What is wrong with the component's bus interfaces against the Verilog's ports (empty
    when nothing is): the checks of the module docstring."""
    clock, reset = ("aclk", "aresetn") if "aclk" in verilog else ("clk", "rst")
    errors, mapped = [], []
    for name, bus, mode, maps in interfaces(root):
        if maps.pop("ACLK", None) != (clock, False):
            errors.append(f"{name}: ACLK is not {clock}")
        if maps.pop("ARESETn", None) != (reset, reset == "rst"):
            errors.append(f"{name}: ARESETn is not {reset}, inverted when active high")
        prefix = BUS_PREFIX[bus] or name
        for logical, (physical, inverted) in maps.items():
            expected = master_direction(logical)
            if mode == "slave":
                expected = {"in": "out", "out": "in"}[expected]
            if logical not in LOGICAL[bus] or inverted:
                errors.append(f"{name}: {logical} is no plain {bus} port")
            elif physical not in verilog or verilog[physical][0] != expected:
                errors.append(f"{name}: {logical} -> {physical}, no {expected} port of the .v")
            elif physical != f"{prefix}_{logical.lower()}":
                errors.append(f"{name}: {logical} -> {physical}")
        missing = REQUIRED[bus, mode] - set(maps) if (bus, mode) in REQUIRED else {"the mode"}
        if missing:
            errors.append(f"{name}: {bus} {mode} lacks {sorted(missing)}")
        mapped += [physical for physical, _ in maps.values()]
    bus_ports = [p for p in verilog if re.match(r"(s_axis|m_axis|s_axil|m_axi)_", p)]
    if sorted(mapped) != sorted(bus_ports):
        errors.append(f"mapped {sorted(mapped)}, bus ports of the .v {sorted(bus_ports)}")
    return errors


@pytest.fixture(scope="module")
def schema():
    etree = pytest.importorskip(
        "lxml.etree", reason="lxml validates against the IEEE 1685-2014 XSD: "
        "pip install lxml (the test extra)")
    return etree, etree.XMLSchema(etree.parse(str(SCHEMA)))


# --- the tests ------------------------------------------------------------------------------

def test_component_is_valid_ieee_1685_2014(generated, schema):
    etree, xsd = schema
    folder, top, _ = generated
    document = etree.parse(str(folder / ipxact.file_name(top)))
    assert xsd.validate(document), [str(e) for e in xsd.error_log][:5]


def test_component_ports_are_the_verilog_ports(generated):
    folder, top, root = generated
    assert root.findtext("ipxact:name", namespaces=NS) == top
    verilog = verilog_ports((folder / f"{top}.v").read_text(), top)
    assert component_ports(root) == verilog
    sim_models = json.loads((folder / f"{top}.json").read_text())["sim_models"]
    views = {}
    for instance in root.findall(
            "ipxact:model/ipxact:instantiations/ipxact:componentInstantiation", NS):
        assert instance.findtext("ipxact:moduleName", namespaces=NS) == top
        views[instance.findtext("ipxact:name", namespaces=NS)] = [
            ref.text for ref in instance.iterfind("ipxact:fileSetRef/ipxact:localName", NS)]
    expected = {"verilog_rtl": ["rtl"]}
    if sim_models:
        expected["verilog_simulation"] = ["rtl", "sim_models"]
    assert views == expected


def test_bus_interfaces_map_existing_ports_to_amba_ports(generated):
    folder, top, root = generated
    verilog = verilog_ports((folder / f"{top}.v").read_text(), top)
    assert bus_interface_errors(root, verilog) == []
    streams = {p[:-len("_tvalid")] for p in verilog
               if p.startswith(("s_axis", "m_axis")) and p.endswith("_tvalid")}
    assert {name for name, bus, _, _ in interfaces(root) if bus == "AXI4Stream"} == streams


def test_register_map_is_the_axil_slaves_memory_map(generated):
    folder, top, root = generated
    maps = root.findall("ipxact:memoryMaps/ipxact:memoryMap", NS)
    slaves = {name: bus_if for name, bus_if in (
        (b.findtext("ipxact:name", namespaces=NS), b)
        for b in root.findall("ipxact:busInterfaces/ipxact:busInterface", NS))}
    if "s_axil" not in slaves:
        assert maps == []
        return
    (memory_map,) = maps
    assert memory_map.findtext("ipxact:name", namespaces=NS) == top
    assert len(memory_map.findall(".//ipxact:register", NS)) > 10
    ref = slaves["s_axil"].find("ipxact:slave/ipxact:memoryMapRef", NS)
    assert ref.get("memoryMapRef") == top


def test_file_sets_list_every_other_generated_file(generated):
    folder, top, root = generated
    listed = {f.findtext("ipxact:name", namespaces=NS): f.findtext("ipxact:fileType", namespaces=NS)
              for f in root.findall("ipxact:fileSets/ipxact:fileSet/ipxact:file", NS)}
    written = {p.name for p in folder.iterdir()} - {ipxact.file_name(top)}
    assert set(listed) == written
    assert listed[f"{top}.v"] == "verilogSource" and listed[f"{top}.sdc"] == "SDC"
    (rtl,) = [s for s in root.findall("ipxact:fileSets/ipxact:fileSet", NS)
              if s.findtext("ipxact:name", namespaces=NS) == "rtl"]
    assert [f.findtext("ipxact:name", namespaces=NS)
            for f in rtl.findall("ipxact:file", NS)] == [f"{top}.v"]


def test_reset_mapping_follows_axi_names(generated):
    """``rst`` (active high) is ARESETn inverted, ``aresetn`` ARESETn itself: both named in the
    component's description too."""
    folder, top, root = generated
    description = root.findtext("ipxact:description", namespaces=NS)
    resets = {maps["ARESETn"] for _, _, _, maps in interfaces(root)}
    if "input aresetn;" in (folder / f"{top}.v").read_text():
        assert resets == {("aresetn", False)} and "active low" in description
    else:
        assert resets == {("rst", True)} and "active high" in description


# --- the checks can fail ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine_component(tmp_path_factory):
    folder = tmp_path_factory.mktemp("engine_broken")
    generate(blocks.get("engine"), IP_CONFIGS["engine"][1], folder)
    top = blocks.get("engine").top
    verilog = verilog_ports((folder / f"{top}.v").read_text(), top)
    return ET.parse(folder / ipxact.file_name(top)).getroot(), verilog


def _port_map(root, interface, logical):
    for bus_if in root.findall("ipxact:busInterfaces/ipxact:busInterface", NS):
        if bus_if.findtext("ipxact:name", namespaces=NS) == interface:
            maps = bus_if.find(".//ipxact:portMaps", NS)
            for port_map in maps:
                if port_map.findtext("ipxact:logicalPort/ipxact:name", namespaces=NS) == logical:
                    return maps, port_map
    raise AssertionError((interface, logical))


def test_schema_rejects_broken_components(engine_component, schema):
    etree, xsd = schema
    root, _ = engine_component
    assert xsd.validate(etree.fromstring(ET.tostring(root)))
    no_physical = copy.deepcopy(root)
    _, port_map = _port_map(no_physical, "m_axi", "ARADDR")
    port_map.remove(port_map.find("ipxact:physicalPort", NS))
    unknown = copy.deepcopy(root)
    ET.SubElement(unknown.find("ipxact:model", NS), f"{{{NS['ipxact']}}}netlist")
    for broken in (no_physical, unknown):
        assert not xsd.validate(etree.fromstring(ET.tostring(broken)))


@pytest.mark.parametrize("interface,logical,change", [
    ("s_axil", "RVALID", "remove"),         # a required port left out of the map
    ("m_axi", "WLAST", "remove"),
    ("m_axi", "AWLEN", "misspell"),         # a port the Verilog does not have
    ("s_axil", "ARESETn", "invert"),         # the reset's polarity lost
    ("m_axi", "RDATA", "rename_logical"),   # a logical port AXI4 does not have
])
def test_bus_interface_check_rejects_broken_maps(engine_component, interface, logical, change):
    root, verilog = engine_component
    assert bus_interface_errors(root, verilog) == []
    broken = copy.deepcopy(root)
    maps, port_map = _port_map(broken, interface, logical)
    if change == "remove":
        maps.remove(port_map)
    elif change == "misspell":
        port_map.find("ipxact:physicalPort/ipxact:name", NS).text += "_x"
    elif change == "invert":
        port_map.attrib.pop("invert")
    else:
        port_map.find("ipxact:logicalPort/ipxact:name", NS).text = "RDATAX"
    assert bus_interface_errors(broken, verilog)
