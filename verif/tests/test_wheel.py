"""The installed product: the wheel holds one namespace (``spartan_rtl``) and no tests, and each
``spartan`` command works from a fresh virtual environment outside the source tree.

With runtime dependencies only, ``generate``, ``list``, ``estimate`` and ``--version`` work and
``sim``, ``bench`` and ``waves`` name the extra they need in one line (exit 2); with the ``sim``
and ``waves`` extras they run, writing into the working directory only. Packages come from
PyPI through pip's cache (the project's own venv was installed from the same index).
"""

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "data" / "traces" / "digits_cnn_epoch15.npz"


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
        "__pycache__", ".hypothesis", ".pytest_cache", "data"))
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out, source],
        cwd=out)
    (found,) = out.glob("spartan_rtl-*.whl")
    return found


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    where = tmp_path_factory.mktemp("venv")
    venv.create(where / "venv", with_pip=True)
    return where / "venv" / "bin"


def test_wheel_holds_one_namespace_and_no_tests(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"spartan_rtl"}
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith(".py")}
    assert packages == {"spartan_rtl", "spartan_rtl/hw", "spartan_rtl/golden", "spartan_rtl/tb",
                        "spartan_rtl/sw"}
    assert not [n for n in names if "/test_" in n or "conftest" in n or "/flows/" in n]
    assert "spartan_rtl/lint_waivers.vlt" in names    # read by every Verilator build
    drivers = {f"spartan_rtl/sw/spartan_{b}.{s}" for b in ("core", "engine") for s in "ch"}
    assert drivers <= set(names)
    assert "spartan_rtl/tb/tb_gemm.py" in names and "spartan_rtl/hw/gemm.py" in names


def test_each_command_from_a_fresh_venv(wheel, fresh_venv, tmp_path):
    bin_ = fresh_venv
    run([bin_ / "python", "-m", "pip", "install", "--quiet", wheel], cwd=tmp_path)
    spartan = bin_ / "spartan"
    assert run([spartan, "--version"], tmp_path).stdout.startswith("spartan-rtl ")
    assert "gemm" in run([spartan, "list"], tmp_path).stdout
    listed = run([spartan, "generate", "monitor", "-o", "out"], tmp_path).stdout.split()
    assert sorted(Path(p).name for p in listed) == sorted(
        f"spartan_monitor{s}" for s in (".v", ".json", "_inst.v", ".core", ".f", ".vlt", ".sdc",
                                        ".xdc"))
    assert "speedup" in run([spartan, "estimate", TRACE], tmp_path).stdout
    # The C driver comes from the wheel, renamed after the top, and builds beside its header.
    run([spartan, "generate", "core", "--name", "my_core", "--set", "k=8", "--set", "n=8",
         "--set", "n_par=8", "--set", "table_depth=4", "-o", "drv"], tmp_path)
    cc = shutil.which("gcc") or shutil.which("cc")
    run([cc, "-std=c99", "-Wall", "-Werror", "-I", "drv", "-c", "drv/my_core.c", "-o",
         "drv/my_core.o"], tmp_path)
    # Without the extras: one line naming the extra, exit 2, nothing written.
    before = sorted(tmp_path.rglob("*"))
    for cmd, extra in ((["sim", "monitor"], "sim"), (["bench", "monitor"], "sim"),
                       (["waves", "x.vcd", "--text"], "waves")):
        done = run([spartan, *cmd], tmp_path, ok=False)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and f"'spartan-rtl[{extra}]'" in done.stderr
    assert sorted(tmp_path.rglob("*")) == before
    # The user tools import neither the test suite nor pytest.
    probe = ("import sys, spartan_rtl.cli, spartan_rtl.sim, spartan_rtl.bench, spartan_rtl.runner, "
             "spartan_rtl.waves; print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('verif', 'pytest', 'hw', 'golden')))")
    assert run([bin_ / "python", "-c", probe], tmp_path).stdout.strip() == "[]"


def test_sim_bench_waves_with_extras(wheel, fresh_venv, tmp_path):
    bin_ = fresh_venv
    run([bin_ / "python", "-m", "pip", "install", "--quiet", f"{wheel}[sim,waves]"], cwd=tmp_path)
    # The testbenches import nothing of the test suite (cocotb itself loads pytest).
    probe = ("import sys, spartan_rtl.tb.tb_gemm, spartan_rtl.tb.tb_core; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('verif', 'hw', 'golden')))")
    assert run([bin_ / "python", "-c", probe], tmp_path).stdout.strip() == "[]"
    spartan = bin_ / "spartan"
    done = run([spartan, "sim", "monitor", "--seed", "1", "--cycles", "300"], tmp_path)
    assert done.stdout.splitlines()[-1] == "PASS"
    assert (tmp_path / "waves" / "monitor" / "dump.vcd").is_file()
    text = run([spartan, "waves", "waves/monitor/dump.vcd", "--text"], tmp_path).stdout
    assert "s_axis_tvalid" in text
    run([spartan, "bench", "monitor", "--quick", "--json", "b.json"], tmp_path)
    assert (tmp_path / "b.json").is_file()
    # Builds and outputs in the working directory only.
    assert {p.name for p in tmp_path.iterdir()} == {"waves", "sim_build", "b.json"}
    site = next((bin_.parent / "lib").glob("python3*/site-packages/spartan_rtl"))
    assert not [p for p in site.rglob("*") if p.suffix in (".vcd", ".json", ".log")]
