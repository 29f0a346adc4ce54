"""Spartan core: parameter checks, the register map's single source (manifest, C header
compiled with cc, docs), and the cocotb testbench (cocotbext-axi) in Verilator and Icarus."""

import json
import re
import shutil
import subprocess

import pytest

from hw.core import BLOCK, ID_VALUE, SpartanCore, register_map
from hw.emit import generate
from verif import runner

CONFIGS = [
    dict(),  # the defaults: lanes 8, width 8, k = n = 64, k_par 4, n_par 16, table_depth 64
    dict(lanes=4, width=16, signed=False, acc_width=24, k=32, n=16, k_par=4, n_par=8,
         b_banks=4, table_depth=8),
]


def _id(config):
    return "-".join(f"{k}{v}" for k, v in config.items()) or "defaults"


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(table_depth=3), ValueError, "table_depth must be a power of two from 1 to 1024, not 3"),
    (dict(k=60), ValueError, "k must be a multiple of lanes (8), not 60"),
    (dict(lanes=8, n_par=4), ValueError,
     "n_par must be a multiple of lanes (8) dividing n (64), not 4"),
    (dict(width="8"), TypeError, "width must be an integer from 1 to 32, not '8'"),
])
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error) as info:
        SpartanCore(**kwargs)
    assert str(info.value) == message


def test_register_map_single_source(tmp_path):
    """The manifest, the C header and the docs all come from register_map(); the header
    compiles and its offsets equal the manifest's."""
    paths = generate(BLOCK, {"table_depth": 16}, tmp_path)
    doc = json.loads((tmp_path / "spartan_core.json").read_text())
    header = tmp_path / "spartan_core_regs.h"
    assert header in paths
    regs = {r["name"]: r for r in doc["registers"]}
    for name in ("ID", "CTRL", "THRESHOLD", "CYCLES", "BUSY_CYCLES", "STALL_CYCLES",
                 "TILES_DENSE", "TILES_SPARSE", "ROWS_EMPTY", "MACS_DONE", "MACS_SKIPPED",
                 "CONFLICT_CYCLES", "ZERO_BEATS", "TILES_BELOW", "A_ERRORS", "DENSITY_TABLE"):
        assert name in regs, name
    assert regs["DENSITY_TABLE"]["words"] == 32
    ctrl = {f["name"]: f for f in regs["CTRL"]["fields"]}
    assert (ctrl["MODE"]["lsb"], ctrl["MODE"]["width"], ctrl["PASS_START"]["lsb"],
            ctrl["CLEAR"]["lsb"]) == (0, 2, 2, 3)
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed to check the generated header"
    program = tmp_path / "check.c"
    lines = ['#include <stdio.h>', '#include "spartan_core_regs.h"', "int main(void) {"]
    for name in regs:
        lines.append(f'  printf("{name} %u\\n", (unsigned)SPARTAN_CORE_{name}_OFFSET);')
    lines.append('  printf("ID_VALUE %u\\n", (unsigned)SPARTAN_CORE_ID_VALUE);')
    lines.append('  printf("CTRL_CLEAR_MASK %u\\n", (unsigned)SPARTAN_CORE_CTRL_CLEAR_MASK);')
    lines.append("  return 0;\n}")
    program.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-Wall", "-Werror", "-I", str(tmp_path), "-o", str(tmp_path / "check"),
                    str(program)], check=True)
    out = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True, check=True)
    printed = dict(line.split() for line in out.stdout.splitlines())
    for name, reg in regs.items():
        assert int(printed[name]) == reg["offset"], name
    assert int(printed["ID_VALUE"]) == ID_VALUE == doc["id"]
    assert int(printed["CTRL_CLEAR_MASK"]) == 1 << 3
    # docs/registers.md is the same map's Markdown (regenerate: make docs-registers).
    from pathlib import Path
    committed = (Path(__file__).parent.parent / "docs" / "registers.md").read_text()
    assert committed == register_map(64).markdown("Spartan core registers")


def test_register_map_rejects_overlap():
    from hw.axil import Field, Register, RegisterMap
    a = Register("A", 0x0, "a", (Field("A", 0, 32, "rw", "a"),))
    b = Register("B", 0x0, "b", (Field("B", 0, 32, "rw", "b"),))
    with pytest.raises(ValueError, match="register B must not overlap A, not at 0x0"):
        RegisterMap("x", [a, b])


@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_core(config, sim):
    tiles = 10 if config.get("table_depth", 64) < 10 else 8
    runner.run("core", "verif.tb_core", config, sim=sim, name="regression",
               args={"tiles": tiles, "rows": 3})
