"""docs/integration.md, tested: the examples it shows are the files under docs/examples/, run
here. (1) A Verilog design instantiating two generated blocks by their templates, compiled
with their file lists; (2) an Amaranth design with the monitor and compactor inside
(docs/examples/sparse_writer.py) in amaranth.sim against the golden models; (3) the core in a
LiteX SoC (docs/examples/litex_soc.py), its registers and a GEMM pass driven over the SoC's
Wishbone bus in Verilator (skipped, saying so, without the ``integration`` extra); (4) the layer
engine between a CPU's register bus and a memory interconnect (docs/examples/engine_top.v,
linted and compiled) and driven from C (docs/examples/engine_layer.c, compiled against the
generated header; verif/tests/test_engine_driver.py runs the driver itself)."""

import importlib.util
import json
import random
import re

import numpy as np
import pytest
from amaranth.sim import Simulator

from spartan_rtl.golden.compactor import encode_stream
from spartan_rtl.golden.formats import pack_beat, random_elements
from spartan_rtl.golden.monitor import tile_stats
from verif.flows import ROOT
from verif.tests.amsim import get_stream, put_stream, run_with_deadline

DOC = ROOT / "docs" / "integration.md"
EXAMPLES = ROOT / "docs" / "examples"


def load_example(name):
    """Import docs/examples/<name>.py as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"integration_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def doc_blocks():
    """The fenced blocks of docs/integration.md, keyed by the file named on their first line
    (``# file: docs/examples/...`` or ``// file: ...``); that line is not part of the file."""
    blocks = {}
    for body in re.findall(r"^```\w*\n(.*?)^```", DOC.read_text(), re.S | re.M):
        first, _, rest = body.partition("\n")
        named = re.fullmatch(r"(?:#|//) file: (\S+)", first.strip())
        if named:
            blocks[named.group(1)] = rest
    return blocks


@pytest.mark.parametrize("path", ["docs/examples/sparse_writer.py",
                                  "docs/examples/sparse_writer_top.v",
                                  "docs/examples/engine_top.v",
                                  "docs/examples/engine_layer.c"])
def test_doc_shows_the_tested_files(path):
    """The code the doc shows is the code these tests run, character for character."""
    blocks = doc_blocks()
    assert path in blocks, f"docs/integration.md shows no block '# file: {path}'"
    assert blocks[path] == (ROOT / path).read_text(), f"docs/integration.md differs from {path}"


# --- (1) Verilog: two generated blocks under their own names in a design of one's own ---------

def generate(out, block, *args):
    from spartan_rtl import cli
    assert cli.main(["generate", block, *args, "-o", str(out)]) in (0, None)


def test_verilog_top(tmp_path):
    """docs/examples/sparse_writer_top.v with the blocks it names, by their file lists alone:
    Verilator lint -Wall, as docs/integration.md says to run it (each list carries its block's
    waivers, for the generated file only, so a port of the wrong width in the example fails)
    and, where installed, Icarus without a warning."""
    import subprocess

    from spartan_rtl import toolchain

    gen = tmp_path / "gen"
    generate(gen, "monitor", "--name", "wr_mon")
    generate(gen, "compactor", "--name", "wr_cmp")
    top = EXAMPLES / "sparse_writer_top.v"
    result = subprocess.run(
        ["verilator", "--lint-only", "-Wall", "-F", str(gen / "wr_mon.f"),
         "-F", str(gen / "wr_cmp.f"), str(top), "--top-module", "sparse_writer_top"],
        env=toolchain.sim_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if toolchain.icarus_available():
        # Icarus reads a file list's paths from the working directory.
        result = subprocess.run(
            ["iverilog", "-g2012", "-o", str(tmp_path / "top.vvp"), "-s", "sparse_writer_top",
             "-c", "wr_mon.f", "-c", "wr_cmp.f", str(top)], cwd=gen, capture_output=True, text=True)
        assert result.returncode == 0 and "warning" not in result.stderr.lower(), result.stderr


# --- (2) Amaranth: SparseWriter in amaranth.sim, checked against the golden models ------------

def writer_stimulus(rng, np_rng, *, lanes, width, cols, tiles):
    """Random tiles (1-3 rows, densities 0 to 1), each with its own threshold and dense flag."""
    stimulus = []
    for _ in range(tiles):
        rows = rng.randint(1, 3)
        raw = random_elements(np_rng, (rows * cols // lanes, lanes), width,
                              rng.choice([0.0, 0.1, 0.5, 1.0, rng.random()]))
        stimulus.append((raw, rng.randrange(256), int(rng.random() < 0.3)))
    return stimulus


@pytest.mark.parametrize("lanes, width, cols", [(4, 8, 16), (8, 16, 32)])
def test_sparse_writer_amaranth_sim(lanes, width, cols):
    SparseWriter = load_example("sparse_writer").SparseWriter
    rng, np_rng = random.Random(lanes), np.random.default_rng(lanes)
    stimulus = writer_stimulus(rng, np_rng, lanes=lanes, width=width, cols=cols, tiles=10)
    # The golden models, from the specification: one record per tile, the ZVC of the stream.
    want_stats = [tile_stats(raw, threshold, width=width, number_format="int")
                  for raw, threshold, _ in stimulus]
    beats = [(pack_beat(row, width), int(i == len(raw) - 1), dense if i == 0 else 0)
             for raw, _, dense in stimulus for i, row in enumerate(raw)]
    want_masks, want_data, errors = encode_stream(beats, lanes=lanes, width=width, cols=cols,
                                                  number_format="int")
    assert errors == 0

    dut = SparseWriter(lanes=lanes, width=width, cols=cols)
    result = {}

    async def source(ctx):
        for raw, threshold, dense in stimulus:
            # Sampled on the tile's first beat: set before it, after the last tile's end.
            ctx.set(dut.threshold, threshold)
            ctx.set(dut.dense, dense)
            await put_stream(ctx, dut.s_axis, [
                {"data": [int(x) for x in row], "last": int(i == len(raw) - 1)}
                for i, row in enumerate(raw)], rng, idle=0.3)

    async def stats_sink(ctx):
        result["stats"] = await get_stream(ctx, dut.m_axis_stats, len(want_stats), rng, 0.5)

    async def mask_sink(ctx):
        result["masks"] = await get_stream(ctx, dut.m_axis_mask, len(want_masks), rng, 0.3)

    async def data_sink(ctx):
        result["data"] = await get_stream(ctx, dut.m_axis_data, len(want_data), rng, 0.3)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in (source, stats_sink, mask_sink, data_sink):
        sim.add_testbench(bench)
    run_with_deadline(sim, 20 * len(beats) + 200)  # a lost beat fails instead of hanging
    got_stats = [(s.data.nnz, s.data.elems, s.data.zero_beats, s.data.sparse)
                 for s in result["stats"]]
    assert got_stats == [(s.nnz, s.elems, s.zero_beats, s.sparse) for s in want_stats]
    assert [(int(b.data), int(b.last)) for b in result["masks"]] == want_masks
    assert [(pack_beat(list(b.data), width), int(b.last)) for b in result["data"]] == want_data
    # The stimulus covers both kinds of tile and both decisions.
    assert {dense for _, _, dense in stimulus} == {0, 1}
    assert {s.sparse for s in want_stats} == {0, 1}


# --- (3) the core in a LiteX SoC, over the SoC's bus, in Verilator ----------------------------

#: A small core (the SoC's integration is what is tested here; the core's own regression is
#: verif/tests/test_core.py): 4 lanes, 16x16 B, an 8-entry density table.
SOC_CORE = ["--set", "lanes=4", "--set", "k=16", "--set", "n=16", "--set", "n_par=8",
            "--set", "k_par=2", "--set", "table_depth=8"]


def test_litex_soc(tmp_path, monkeypatch):
    pytest.importorskip("litex", reason="LiteX is not installed: pip install -e '.[integration]' "
                                        "(docs/integration.md)")
    from cocotb_tools.runner import get_results, get_runner

    from spartan_rtl import runner, toolchain

    # The user's steps: generate the core, build the SoC around it (docs/integration.md).
    monkeypatch.chdir(tmp_path)  # LiteX writes nothing else, but a stray file lands here
    generate("rtl", "core", *SOC_CORE)
    litex_soc = load_example("litex_soc")
    with pytest.raises(SystemExit) as bad:   # not a core: one line, exit 2, nothing written
        litex_soc.main(["rtl/spartan_core.rdl", "-o", "soc"])
    assert bad.value.code == 2 and not (tmp_path / "soc").exists()
    litex_soc.main(["rtl/spartan_core.v", "-o", "soc"])
    assert sorted(p.name for p in (tmp_path / "soc").iterdir()) == ["spartan_soc.v"]

    toolchain.apply_sim_env()
    sim = get_runner("verilator")
    build = tmp_path / "build"
    # LiteX's Verilog has unused and width-mismatched signals of its own: not the core's.
    sim.build(sources=[tmp_path / "soc" / "spartan_soc.v", tmp_path / "rtl" / "spartan_core.v"],
              hdl_toplevel="spartan_soc", build_dir=build, timescale=runner.TIMESCALE,
              build_args=[*toolchain.VERILATOR_WAIVERS, "-Wno-fatal"],
              log_file=build / "build.log")
    env = {"SPARTAN_MANIFEST": str(tmp_path / "rtl" / "spartan_core.json"), "SPARTAN_ARGS": "{}"}
    # verif.tests.tb_litex_soc is not installed: cocotb's runner passes sys.path on.
    monkeypatch.syspath_prepend(str(ROOT))
    # Outside pytest's view (as spartan_rtl/runner.py does), cocotb's runner returns results.
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    log = build / "sim.log"
    results = sim.test(test_module="verif.tests.tb_litex_soc", hdl_toplevel="spartan_soc",
                       build_dir=build, test_dir=build, extra_env=env,
                       timescale=runner.TIMESCALE, results_xml=str(build / "results.xml"),
                       log_file=log)
    total, failed = get_results(results)
    assert (total, failed) == (2, 0), log.read_text()[-6000:]


# --- (4) the layer engine between a CPU's register bus and a memory interconnect -----------

#: The engine of test_engine_example: small (it is the wiring that is checked), at the default
#: bus width, so that its ports are the ones docs/examples/engine_top.v shows.
EXAMPLE_ENGINE = ["--set", "k=16", "--set", "n=16", "--set", "n_par=16", "--set", "acc_rows=16",
                  "--set", "table_depth=16"]


def test_engine_example(tmp_path):
    """docs/integration.md, the layer engine as a bus master: docs/examples/engine_top.v with a
    generated engine, Verilator lint -Wall of the example from the engine's file list alone (its
    waivers are the generated file's, so a port of the wrong width or an unused one in the
    example fails) and, where installed, Icarus without a warning; docs/examples/engine_layer.c
    and the driver compiled from the generated folder alone."""
    import shutil
    import subprocess

    from spartan_rtl import toolchain

    gen = tmp_path / "gen"
    generate(gen, "engine", *EXAMPLE_ENGINE)
    manifest = json.loads((gen / "spartan_engine.json").read_text())
    assert manifest["params"]["data_width"] == 64
    top = EXAMPLES / "engine_top.v"
    result = subprocess.run(
        ["verilator", "--lint-only", "-Wall", "-F",
         str(gen / "spartan_engine.f"), str(top), "--top-module", "engine_top"],
        env=toolchain.sim_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if toolchain.icarus_available():
        result = subprocess.run(
            ["iverilog", "-g2012", "-o", str(tmp_path / "top.vvp"), "-s", "engine_top",
             "-c", "spartan_engine.f", str(top)], cwd=gen, capture_output=True, text=True)
        assert result.returncode == 0 and "warning" not in result.stderr.lower(), result.stderr
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "a C compiler (gcc) is needed"
    # With the driver and header generated beside the Verilog alone, as the example says.
    for source in (EXAMPLES / "engine_layer.c", gen / "spartan_engine.c"):
        subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                        "-I", str(gen), "-c", str(source),
                        "-o", str(tmp_path / f"{source.stem}.o")],
                       check=True)
