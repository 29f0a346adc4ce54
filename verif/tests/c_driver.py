"""What the C drivers' tests share (verif/tests/test_driver.py: the core's sw/spartan_core.c;
test_engine_driver.py: the engine's sw/spartan_engine.c): the driver compiled on its own with
strict C99 warnings and linked into a Verilated harness built once per source state, the
harness script with the register commands both drivers take, and the check that a block
generated under other names: two of them in one program."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from spartan_rtl import runner, toolchain
from spartan_rtl.hw.emit import generate
from verif.flows import ROOT

SW = ROOT / "sw"
HERE = Path(__file__).parent
#: The AXI4-Lite master both harnesses carry the driver's register accesses on.
AXIL_MASTER = HERE / "axil_master.h"
C_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def compiler():
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("a C compiler (gcc) is needed to build the driver")
    return cc


def build_harness(block, config, harness, driver):
    """``harness`` (a .cpp in this folder) Verilated around ``block`` at ``config`` and linked
    with ``sw/<driver>.c``: built once per source state, in sim_build/<harness name>/."""
    params = block.resolve(config)
    h = hashlib.sha256(json.dumps(params, sort_keys=True).encode())
    h.update(runner._source_digest(block).encode())
    for path in (harness, AXIL_MASTER, SW / f"{driver}.c", SW / f"{driver}.h"):
        h.update(path.read_bytes())
    build = runner.sim_build() / harness.stem.replace("_harness", "") / \
        f"verilator-{h.hexdigest()[:12]}"
    build.mkdir(parents=True, exist_ok=True)
    exe = build / "obj" / "harness"
    with open(build / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            rtl = build / "rtl"
            generate(block, config, rtl)
            driver_o = build / f"{driver}.o"
            subprocess.run([compiler(), *C_FLAGS, "-I", str(SW), "-I", str(rtl), "-c",
                            str(SW / f"{driver}.c"), "-o", str(driver_o)], check=True)
            cmd = ["verilator", "--cc", "--exe", "--build", "--build-jobs", "2",
                   *toolchain.VERILATOR_WAIVERS, "--top-module", block.top, "-Mdir",
                   str(build / "obj"), "-o", "harness", "-CFLAGS", f"-I{SW} -I{rtl}",
                   str(rtl / f"{block.top}.v"), str(harness), str(driver_o)]
            result = subprocess.run(cmd, env=toolchain.sim_env(), capture_output=True, text=True)
            if result.returncode:
                pytest.fail(f"Verilator build of {harness.name} failed:\n"
                            + (result.stdout + result.stderr)[-4000:])
    return exe


def check_two_renamed_drivers(tmp_path, block, configs, user_main):
    """Two configurations of ``block`` generated as ``foo`` and ``bar`` (``configs``: their
    parameters) ship their drivers renamed (foo.h/foo.c, bar.h/bar.c) with their register
    headers: both drivers build, a C file and a C++ file that include both headers compile
    and link with both (``user_main``: the body of ``main``, which may use FOO_*/BAR_* and
    foo_*/bar_*; it must return 0), and the programs run."""
    objects = []
    for name, values in zip(("foo", "bar"), configs):
        generate(block, values, tmp_path, name=name)
        objects.append(tmp_path / f"{name}.o")
        subprocess.run([compiler(), *C_FLAGS, "-I", str(tmp_path), "-c",
                        str(tmp_path / f"{name}.c"), "-o", str(objects[-1])], check=True)
    source = f'#include "foo.h"\n#include "bar.h"\nint main(void) {{\n{user_main}}}\n'
    (tmp_path / "user.c").write_text(source)
    (tmp_path / "user.cpp").write_text(source.replace("(void)", "()"))
    cxx = shutil.which("g++") or shutil.which("c++")
    assert cxx, "a C++ compiler (g++) is needed"
    for tool, flags, main in ((compiler(), C_FLAGS, "user.c"),
                              (cxx, ["-Wall", "-Wextra", "-Werror"], "user.cpp")):
        exe = tmp_path / f"{main}.exe"
        subprocess.run([tool, *flags, "-I", str(tmp_path), str(tmp_path / main), *map(str, objects),
                        "-o", str(exe)], check=True)
        subprocess.run([str(exe)], check=True)


class DriverScript:
    """A harness script (one command a line, after the ``config`` line) and what the golden
    ``model`` expects of the commands both drivers take: THRESHOLD, MODE, CLEAR, FORGET, the
    counters and the density table."""

    def __init__(self, params, model, config_line):
        self.p = params
        self.model = model
        self.lines = [config_line]
        self.counters = []   # expected event counters at each "counters"
        self.tables = []     # (base, [(nnz, elems) or None], threshold) at each "table"

    def command(self, text):
        self.lines.append(text)

    def threshold(self, value):
        self.model.threshold = value
        self.command(f"threshold {value}")

    def mode(self, value):
        self.model.mode = value
        self.command(f"mode {value}")

    def clear(self):
        self.model.clear()
        self.command("clear")

    def forget(self):
        self.model.forget()
        self.command("forget")

    def read_counters(self):
        self.counters.append(dict(self.model.counters))
        self.command("counters")

    def read_table(self, base, count):
        self.tables.append((base, [self.model.table.get(base + t) for t in range(count)],
                            self.model.threshold))
        self.command(f"table {base} {count}")
