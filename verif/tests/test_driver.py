"""The C driver (sw/spartan_core.c) end to end on the Verilated core.

The driver is compiled on its own with ``gcc -std=c99 -Wall -Wextra -Werror -pedantic`` against
the header `spartan generate core` wrote, then linked into verif/tests/driver_harness.cpp, which
Verilator builds around the generated Verilog (``--cc --exe --build``). The harness runs a
script: the driver's calls over AXI4-Lite (its rd/wr hooks are bus transactions) and the A/B
tiles on the streams, with random idle cycles, back-pressure and AXI4-Lite delays. Every C
element, every event counter and every density-table entry it prints is compared with
golden/core.py, which follows the same script here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from spartan_rtl.golden.core import EVENT_COUNTERS, CoreModel
from spartan_rtl.golden.formats import random_elements
from spartan_rtl.hw.core import BLOCK
from verif.tests.c_driver import DriverScript, build_harness, check_two_renamed_drivers

HARNESS = Path(__file__).with_name("driver_harness.cpp")
#: Small enough to build in about a minute: 2 A beats per row, 4 table entries (2 layers).
CONFIG = dict(lanes=4, width=8, k=16, n=16, k_par=1, n_par=16, table_depth=4)
#: Percent of cycles a source idles before offering a beat / a sink refuses one.
IDLE_PERCENT, STALL_PERCENT = 30, 30


@pytest.fixture(scope="module")
def harness():
    """The harness executable for CONFIG, built once per source state (sim_build/driver/)."""
    return build_harness(BLOCK, CONFIG, HARNESS, "spartan_core")


class Script(DriverScript):
    """The harness script and, step by step, what golden/core.py expects it to print."""

    def __init__(self, params, seed):
        super().__init__(params, CoreModel(params),
                         f"config {params['lanes']} {params['width']} {params['acc_width']} "
                         f"{params['k']} {params['n']} {seed} {IDLE_PERCENT} {STALL_PERCENT}")
        self.c = []          # expected C of every tile, in order
        self.decisions = []  # per pass: the model's sparse/dense choice of each tile

    def layer(self, base, tiles, b_raw):
        self.model.table_base = base
        self.command(f"layer {base} {tiles}")
        self.model.load_b(b_raw)
        self.command("b " + " ".join(str(int(x)) for x in b_raw.reshape(-1)))

    def run_pass(self, tiles):
        self.model.pass_start()
        self.command("pass")
        decisions = []
        for a_raw in tiles:
            c, sparse = self.model.run_tile(a_raw)
            self.c.append(c)
            decisions.append(sparse)
            elements = " ".join(str(int(x)) for x in a_raw.reshape(-1))
            self.command(f"tile {a_raw.shape[0]} {elements}")
        self.command("drain")
        self.decisions.append(decisions)
        self.read_counters()



def _scenario(seed):
    """Two layers with their own table slices and B; sparsity flips between passes, so each
    pass's decisions are the previous pass's measurements; a forced-sparse pass; CLEAR and
    FORGET in between."""
    p = BLOCK.resolve(CONFIG)
    rng = np.random.default_rng(seed)
    s = Script(p, seed)

    def tiles(*densities, rows=3):
        return [random_elements(rng, (rows, p["k"]), p["width"], d) for d in densities]

    def b():
        return random_elements(rng, (p["k"], p["n"]), p["width"], 0.9)

    s.command("init")
    s.command("reset_values")
    s.command("errors")
    s.threshold(0xC0)  # sparse iff at most 75 % nonzero
    s.clear()
    s.forget()
    s.layer(0, 2, b())
    s.run_pass(tiles(0.2, 0.95))   # no history: dense, dense
    s.read_table(0, 2)
    s.run_pass(tiles(0.95, 0.1))   # from the last pass: sparse, dense
    s.read_table(0, 2)
    s.layer(2, 2, b())
    s.run_pass(tiles(0.3, 0.3, rows=2))  # entries 2, 3 empty: dense
    s.read_table(2, 2)
    s.layer(0, 2, b())
    s.run_pass(tiles(0.5, 0.5))    # layer 0 again, from its pass 2: dense, sparse
    s.mode(2)
    s.run_pass(tiles(1.0, 0.0))    # forced sparse
    s.mode(0)
    s.clear()
    s.read_counters()
    s.forget()
    s.read_table(0, 4)
    return s


def _parse(text):
    out = {"c": [], "counters": [], "entries": [], "reset": None, "errors": None, "cycles": None}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "c":
            out["c"].append([int(x) for x in rest.split()[1:]])
        elif kind in ("counters", "reset", "errors"):
            values = dict(item.split("=") for item in rest.split())
            values = {k: int(v) for k, v in values.items()}
            if kind == "counters":
                out["counters"].append(values)
            else:
                out[kind] = values
        elif kind == "entry":
            out["entries"].append([int(x) for x in rest.split()])
        elif kind == "cycles":
            out["cycles"] = int(rest)
    return out


@pytest.mark.cocotb  # a Verilator build: not part of `make test-fast`
@pytest.mark.parametrize("seed", [1, 2])
def test_driver_end_to_end(harness, tmp_path, seed):
    script = _scenario(seed)
    # The scenario does what it says (independent of the model): decisions lag one pass.
    assert script.decisions == [[False, False], [True, False], [False, False], [False, True],
                                [True, True]]
    (tmp_path / "script.txt").write_text("\n".join(script.lines) + "\n")
    result = subprocess.run([str(harness), str(tmp_path / "script.txt"),
                             str(tmp_path / "out.txt")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    out = _parse((tmp_path / "out.txt").read_text())

    # Reset values through the driver: THRESHOLD 0x80, MODE auto, tile 0, counters 0.
    assert out["reset"] == dict(threshold=0x80, mode=0, tile=0, tiles_dense=0, tiles_sparse=0,
                                macs_done=0, busy_cycles=0)
    depth = CONFIG["table_depth"]
    assert out["errors"] == dict(threshold_256=-2, mode_3=-2, layer_past_end=-2,
                                 layer_base_past_end=-2, entry_past_end=-2,
                                 read_layer_past_end=-2, init_wrong_base=-1,
                                 layer_whole_table=0, depth=depth)

    assert len(out["c"]) == len(script.c)
    for index, (got, want) in enumerate(zip(out["c"], script.c)):
        want = [int(x) for x in want.reshape(-1)]
        assert got == want, f"tile {index}: C differs at element " \
                            f"{next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)}"

    assert len(out["counters"]) == len(script.counters)
    previous_cycles = 0
    for index, (got, want) in enumerate(zip(out["counters"], script.counters)):
        for name in EVENT_COUNTERS:
            assert got[name] == want[name], \
                f"read {index}: {name} = {got[name]}, expected {want[name]}"
        assert got["STALL_CYCLES"] <= got["BUSY_CYCLES"] <= got["CYCLES"], got
        if index < len(script.counters) - 1:  # (the last read follows a CLEAR)
            assert got["CYCLES"] > previous_cycles and got["BUSY_CYCLES"] > 0, got
            previous_cycles = got["CYCLES"]
    assert out["counters"][-1]["TILES_DENSE"] == out["counters"][-1]["TILES_SPARSE"] == 0
    assert out["counters"][-1]["CYCLES"] < 50  # only the CLEAR and a read since

    entries = iter(out["entries"])
    for base, expected, threshold in script.tables:
        for t, want in enumerate(expected):
            index, valid, nnz, elems, sparse = next(entries)
            assert index == base + t
            if want is None:
                assert valid == 0 and sparse == 0, (index, valid, sparse)
            else:
                assert (valid, nnz, elems) == (1, *want), (index, valid, nnz, elems, want)
                assert sparse == int(nnz * 256 <= threshold * elems)
    assert next(entries, None) is None

    # The driver's prediction from the table equals what the next pass of that layer did.
    predicted = [[e[4] for e in out["entries"][0:2]], [e[4] for e in out["entries"][2:4]]]
    assert predicted[0] == [int(d) for d in script.decisions[1]]
    assert predicted[1] == [int(d) for d in script.decisions[3]]


def test_two_renamed_drivers_in_one_program(tmp_path):
    """Two cores of different table depths generated as ``foo`` and ``bar``: their drivers and
    register headers (renamed after the tops, include guards too) compile into one C and one
    C++ program, each with its own constants and functions."""
    check_two_renamed_drivers(
        tmp_path, BLOCK, [CONFIG, {**CONFIG, "table_depth": 8}],
        "    struct foo_entry e = {1, 10, 100};\n"
        "    struct bar_entry f = {1, 10, 100};\n"
        f"    return FOO_TABLE_DEPTH == {CONFIG['table_depth']} && BAR_TABLE_DEPTH == 8\n"
        "        && FOO__REGS__ID__ID_reset == BAR__REGS__ID__ID_reset\n"
        "        && foo_entry_sparse(&e, 128) == 1 && bar_entry_sparse(&f, 0) == 0 ? 0 : 1;\n")
