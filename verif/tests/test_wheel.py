"""The installed product: the wheel holds one namespace (``spartan_rtl``) and no tests, and each
``spartan`` command works from a fresh virtual environment outside the source tree.

With runtime dependencies only, ``generate``, ``list``, ``estimate``, ``fusesoc-library`` (its
generator run by FuseSoC) and ``--version`` work, and ``sim``, ``bench`` and a ``waves``
picture name the extra they need in one line (exit 2). With the ``sim`` extra, ``sim``,
``bench`` (``estimate`` on the sample trace the wheel ships) and ``waves --text``/``--streams``
run; a picture still names the ``waves`` extra, and runs once it is installed. Everything is
written into the working directory only. Packages come from PyPI through pip's cache (the
project's own venv was installed from the same index).
"""

import json
import re
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from verif.flows import ROOT

#: The sample trace the wheel ships (pyproject.toml), as installed.
SAMPLE_TRACE = Path("spartan_rtl") / "traces" / "digits_cnn_epoch15.npz"


def run(cmd, cwd, ok=True):
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          timeout=900)
    if ok:
        assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # Built from a copy of the tree: setuptools builds in the source tree's build/, and two
    # pytest-xdist workers building there at once collide.
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "sim_build", ".cache", "waves", "rtl_out", "*.egg-info",
        "__pycache__", ".hypothesis", ".pytest_cache"))
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out, source],
        cwd=out)
    (found,) = out.glob("spartan_rtl-*.whl")
    return found


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    where = tmp_path_factory.mktemp("venv")
    venv.create(where / "venv", with_pip=True)
    return where / "venv" / "bin"


def site_packages(bin_):
    return next((bin_.parent / "lib").glob("python3*/site-packages"))


def test_wheel_holds_one_namespace_and_no_tests(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"spartan_rtl"}
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith(".py")}
    assert packages == {"spartan_rtl", "spartan_rtl/hw", "spartan_rtl/hw/gemm",
                        "spartan_rtl/golden", "spartan_rtl/tb", "spartan_rtl/sw",
                        "spartan_rtl/fusesoc"}
    # The FuseSoC generator (script and library core) and one sample trace, small.
    assert {"spartan_rtl/fusesoc/spartan.core", "spartan_rtl/fusesoc/spartan_gen.py"} <= set(names)
    traces = [i for i in zipfile.ZipFile(wheel).infolist() if i.filename.endswith(".npz")]
    assert [i.filename for i in traces] == [SAMPLE_TRACE.as_posix()]
    assert traces[0].file_size < 600_000
    assert not [n for n in names if "/test_" in n or "conftest" in n or "/flows/" in n]
    assert "spartan_rtl/lint_waivers.vlt" in names    # read by every Verilator build
    drivers = {f"spartan_rtl/sw/spartan_{b}.{s}" for b in ("core", "engine") for s in "ch"}
    assert drivers <= set(names)
    assert "spartan_rtl/tb/tb_gemm.py" in names and "spartan_rtl/hw/gemm/__init__.py" in names
    assert "spartan_rtl/hw/gemm/broadcast.py" in names    # a subpackage of hw, listed too


def test_each_command_from_a_fresh_venv(wheel, fresh_venv, tmp_path):
    bin_ = fresh_venv
    run([bin_ / "python", "-m", "pip", "install", "--quiet", wheel], cwd=tmp_path)
    spartan = bin_ / "spartan"
    assert run([spartan, "--version"], tmp_path).stdout.startswith("spartan-rtl ")
    assert "gemm" in run([spartan, "list"], tmp_path).stdout
    listed = run([spartan, "generate", "monitor", "-o", "out"], tmp_path).stdout.split()
    assert sorted(Path(p).name for p in listed) == sorted(
        f"spartan_monitor{s}" for s in (".v", ".json", "_inst.v", ".core", ".f", ".vlt", ".sdc",
                                        ".xdc", ".ipxact.xml"))
    # The sample trace is installed; piped, the estimate prints no progress.
    trace = site_packages(bin_) / SAMPLE_TRACE
    done = run([spartan, "estimate", trace], tmp_path)
    assert done.stdout.startswith(f"estimate: {trace}\n") and "speedup" in done.stdout
    assert done.stderr == ""
    # The C driver comes from the wheel, renamed after the top, and builds beside its header;
    # n_par follows n (8).
    run([spartan, "generate", "core", "--name", "my_core", "--set", "k=8", "--set", "n=8",
         "--set", "table_depth=4", "-o", "drv"], tmp_path)
    assert json.loads((tmp_path / "drv" / "my_core.json").read_text())["params"]["n_par"] == 8
    cc = shutil.which("gcc") or shutil.which("cc")
    run([cc, "-std=c99", "-Wall", "-Werror", "-I", "drv", "-c", "drv/my_core.c", "-o",
         "drv/my_core.o"], tmp_path)
    # Without the extras: one line naming the extra, exit 2, nothing written.
    before = sorted(tmp_path.rglob("*"))
    for cmd, extra in ((["sim", "monitor"], "sim"), (["bench", "monitor"], "sim"),
                       (["waves", "x.vcd", "-o", "x.png"], "waves"),
                       (["fusesoc-library", "lib"], "fusesoc")):
        done = run([spartan, *cmd], tmp_path, ok=False)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and f"'spartan-rtl[{extra}]'" in done.stderr
    assert sorted(tmp_path.rglob("*")) == before
    # The user tools import neither the test suite nor pytest.
    probe = ("import sys, spartan_rtl.cli, spartan_rtl.sim, spartan_rtl.bench, spartan_rtl.runner, "
             "spartan_rtl.waves; print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('verif', 'pytest', 'hw', 'golden')))")
    assert run([bin_ / "python", "-c", probe], tmp_path).stdout.strip() == "[]"


def test_fusesoc_generator_from_the_wheel(wheel, fresh_venv, tmp_path):
    """With the ``fusesoc`` extra, ``spartan fusesoc-library DIR`` writes the generator library
    for this installation: FuseSoC, from a shell whose PATH has no virtual environment (so
    ``python3`` is not the installation's), runs the installed generator for a user's core."""
    bin_ = fresh_venv
    run([bin_ / "python", "-m", "pip", "install", "--quiet", f"{wheel}[fusesoc]"], cwd=tmp_path)
    written = run([bin_ / "spartan", "fusesoc-library", "lib"], tmp_path).stdout
    assert written == f"{Path('lib') / 'spartan.core'}\n"
    core = (tmp_path / "lib" / "spartan.core").read_text()
    generator = dict(re.findall(r'^    (interpreter|command): "(.*)"$', core, re.M))
    assert generator["interpreter"] == str(bin_ / "python")
    assert Path(generator["command"]) == (site_packages(bin_) / "spartan_rtl" / "fusesoc" /
                                          "spartan_gen.py").resolve()
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "demo.core").write_text(textwrap.dedent("""\
        CAPI=2:
        name: user:demo:mon16:0
        filesets:
          deps: {depend: ["spartan:rtl:generators"]}
        generate:
          mon: {generator: spartan, parameters: {block: gemm, name: g32, params: {k: 32, n: 32}}}
        targets:
          lint:
            filesets: [deps]
            generate: [mon]
            toplevel: g32
            flow: lint
            flow_options: {tool: verilator}
        """))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update({f"XDG_{d}_HOME": str(tmp_path / d.lower()) for d in ("CACHE", "DATA", "CONFIG")})
    done = subprocess.run([bin_ / "fusesoc", "--cores-root", "user", "--cores-root", "lib", "run",
                           "--setup", "--target", "lint", "--build-root", "build",
                           "user:demo:mon16"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads(next((tmp_path / "build").rglob("g32.json")).read_text())
    assert doc["top"] == "g32" and doc["params"]["n_par"] == 32   # n_par follows n


def test_sim_bench_waves_with_extras(wheel, fresh_venv, tmp_path):
    bin_ = fresh_venv
    run([bin_ / "python", "-m", "pip", "install", "--quiet", f"{wheel}[sim]"], cwd=tmp_path)
    # The testbenches import nothing of the test suite (cocotb itself loads pytest).
    probe = ("import sys, spartan_rtl.tb.tb_gemm, spartan_rtl.tb.tb_core; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('verif', 'hw', 'golden')))")
    assert run([bin_ / "python", "-c", probe], tmp_path).stdout.strip() == "[]"
    spartan = bin_ / "spartan"
    done = run([spartan, "sim", "monitor", "--seed", "1", "--cycles", "300"], tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0] == "building monitor with Verilator ..." and lines[-1] == "PASS"
    assert re.fullmatch(r"built in \d+\.\d s \(sim_build/monitor/verilator-\w+\)", lines[1])
    assert lines[2].startswith("running monitor: ") and re.fullmatch(r"ran in \d+\.\d s", lines[3])
    assert (tmp_path / "waves" / "monitor" / "dump.vcd").is_file()
    # The sim extra alone: text and stream report, but no picture (matplotlib is absent).
    assert run([bin_ / "python", "-c", "import matplotlib"], tmp_path, ok=False).returncode == 1
    text = run([spartan, "waves", "waves/monitor/dump.vcd", "--text"], tmp_path).stdout
    assert "s_axis_tvalid" in text
    report = run([spartan, "waves", "waves/monitor/dump.vcd", "--streams"], tmp_path).stdout
    assert "s_axis" in report and "transfer" in report
    done = run([spartan, "waves", "waves/monitor/dump.vcd", "-o", "m.png"], tmp_path, ok=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "needs the 'waves' extra" in done.stderr and not (tmp_path / "m.png").exists()
    run([spartan, "bench", "monitor", "--quick", "--json", "b.json"], tmp_path)
    assert (tmp_path / "b.json").is_file()
    # The estimate benchmark runs on the sample trace the wheel ships.
    done = run([spartan, "bench", "estimate", "--quick", "--json", "e.json"], tmp_path)
    figures = json.loads((tmp_path / "e.json").read_text())["estimate"]
    assert list(figures["traces"]) == ["digits_cnn_epoch15.npz"] and figures["rtl"]["tiles"]
    # With the waves extra, the picture.
    run([bin_ / "python", "-m", "pip", "install", "--quiet", f"{wheel}[waves]"], cwd=tmp_path)
    run([spartan, "waves", "waves/monitor/dump.vcd", "-o", "m.png"], tmp_path)
    assert (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"
    # Builds and outputs in the working directory only.
    assert {p.name for p in tmp_path.iterdir()} == {"waves", "sim_build", "b.json", "e.json",
                                                    "m.png"}
    site = site_packages(bin_) / "spartan_rtl"
    assert not [p for p in site.rglob("*") if p.suffix in (".vcd", ".json", ".log")]
