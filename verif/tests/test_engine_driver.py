"""The layer engine's C driver (sw/spartan_engine.c) end to end on the Verilated engine.

As verif/tests/test_driver.py does for the core: the driver is compiled on its own with
``gcc -std=c99 -Wall -Wextra -Werror -pedantic`` against the header `spartan generate engine`
wrote, then linked into verif/tests/engine_driver_harness.cpp, which Verilator builds around
the generated Verilog. The harness's AXI4-Lite master carries the driver's register accesses;
its AXI4 memory model (INCR bursts, random wait cycles on every channel) holds the matrices,
checks the engine's AXI4 rules and where it reads and writes, and compares every result
element with its own reference (plain loops from docs/engine.md). Here, what it prints is
checked again against golden/engine.py: the result, ERR_CODE of every descriptor, TILE, every
event counter, the bus-word counters against the beats the memory saw, and the density table.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from spartan_rtl.golden.core import EVENT_COUNTERS
from spartan_rtl.golden.engine import EngineModel, dims, layer, result_shape
from spartan_rtl.golden.formats import random_elements
from spartan_rtl.hw.engine import BLOCK
from verif.tests.c_driver import DriverScript, build_harness, check_two_renamed_drivers

HARNESS = Path(__file__).with_name("engine_driver_harness.cpp")
#: Small enough to build quickly: a 32-bit bus of 4 lanes, k = 16, n = 8, 16 rows of partial
#: sums, bursts of at most 4 beats, 64 table entries (test_engine.py's second configuration).
CONFIG = dict(lanes=4, width=8, data_width=32, k=16, n=8, n_par=8, acc_rows=16, max_burst=4,
              table_depth=64, max_tile_elems=4096)
#: Percent of cycles each channel's ready (or a response's valid) waits.
WAIT_PERCENT = 30


@pytest.fixture(scope="module")
def harness():
    """The harness executable for CONFIG, built once per source state
    (sim_build/engine_driver/)."""
    return build_harness(BLOCK, CONFIG, HARNESS, "spartan_engine")


def _row_bytes(cols, size, word):
    return -(-cols * size // word) * word


class Script(DriverScript):
    """The harness script and, layer by layer, what golden/engine.py expects it to print."""

    def __init__(self, params, seed):
        super().__init__(params, EngineModel(dict(params)),
                         f"config {params['lanes']} {params['width']} {int(params['signed'])} "
                         f"{params['acc_width']} {params['data_width']} {params['max_burst']} "
                         f"{seed} {WAIT_PERCENT}")
        self.word = params["data_width"] // 8
        self.layers = []    # per layer command: what to expect
        self.tiles = []     # expected value of each "tiles"

    def table_base(self, value):
        self.model.table_base = value
        self.command(f"table_base {value}")

    def fill(self, addr, stride, matrix):
        rows, cols = matrix.shape
        assert stride >= cols * self.p["width"] // 8
        self.command(f"fill {addr} {stride} {rows} {cols} "
                     + " ".join(str(int(x)) for x in matrix.reshape(-1)))

    def layer(self, op, M, K, N, a, b, a_at, b_at, c_at, *, busy=False, fault=False,
              override=None):
        """One layer (``a_at`` etc.: (address, stride)); ``override`` changes descriptor
        fields (a refused descriptor). ``fault``: a memory error is expected (the model cannot
        say where the layer stopped; clear and forget after it)."""
        desc = dict(OP=op, M=M, K=K, N=N, A_ADDR=a_at[0], A_STRIDE=a_at[1], B_ADDR=b_at[0],
                    B_STRIDE=b_at[1], C_ADDR=c_at[0], C_STRIDE=c_at[1])
        desc.update(override or {})
        expect = dict(desc=desc, busy=busy, fault=fault, op=desc["OP"])
        if fault:
            expect.update(code=None, result=None)
        else:
            result = self.model.start(desc, a, b)
            expect.update(code=self.model.err_code, result=result, tile=self.model.tile)
            if result is not None:
                assert (layer(op, a, b, self.p) == result).all()
                expect["shape"] = result_shape(op, M, K, N)
                rows, cols = expect["shape"]
                expect["c_words"] = rows * _row_bytes(cols, self.p["acc_width"] // 8,
                                                      self.word) // self.word
        self.layers.append(expect)
        fields = [desc[f] for f in ("OP", "M", "K", "N", "A_ADDR", "A_STRIDE", "B_ADDR",
                                    "B_STRIDE", "C_ADDR", "C_STRIDE")]
        self.command(("busy_layer " if busy else "layer ") + " ".join(str(f) for f in fields))

    def layer_tiles(self, op, M, K, N):
        Mo, Ki, No = dims(op, M, K, N)
        p = self.p
        self.tiles.append(-(-Mo // p["acc_rows"]) * -(-Ki // p["k"]) * -(-No // p["n"]))
        self.command(f"tiles {op} {M} {K} {N} {p['k']} {p['n']} {p['acc_rows']}")


def _scenario(seed):
    """Each OP at M=5, K=70, N=9 (no dimension a multiple of k, n or lanes; K's 5 chunks and N's
    2), the forward layer twice in auto mode (the second decided by the first's table), a forced
    sparse layer with more rows than acc_rows; operands crossing 4 KB boundaries, strides with
    gaps; refused descriptors of every check; a second START while a layer runs; the interrupt;
    read and write errors, then a good layer."""
    p = BLOCK.resolve(CONFIG)
    rng = np.random.default_rng(seed)
    s = Script(p, seed)
    W = p["width"]

    def matrix(rows, cols, density=0.9, column_densities=None):
        if column_densities is None:
            return random_elements(rng, (rows, cols), W, density)
        k = p["k"]
        return np.concatenate([random_elements(rng, (rows, min(k, cols - c)), W, d)
                               for c, d in zip(range(0, cols, k), column_densities)], axis=1)

    M, K, N = 5, 70, 9
    # X's inner chunks of k = 16: dense, sparse, empty, dense, and 6 columns + 10 of padding.
    x = matrix(M, K, column_densities=[0.95, 0.2, 0.0, 0.9, 1.0])
    w = matrix(K, N, 0.8)
    dy = matrix(M, N, 0.5)
    # (address, stride): X's rows (70 bytes, 72 in words) with a gap, the first across 4 KB;
    # dX's rows (280 bytes) across a 4 KB boundary; dW's rows tight.
    X, Wt, DY = (0x3FE0, 80), (0x8000, 12), (0x10000, 16)
    Y, DX, DW = (0xC000, 40), (0x14F00, 288), (0x20000, 36)

    s.command("init")
    s.command("reset_values")
    s.command("errors")
    for op in range(3):
        s.layer_tiles(op, M, K, N)
    s.threshold(0xC0)  # sparse iff at most 75 % nonzero
    s.clear()
    s.forget()
    s.fill(*X, x)
    s.fill(*Wt, w)
    s.fill(*DY, dy)
    s.table_base(0)
    s.layer(0, M, K, N, x, w, X, Wt, Y)         # no history: every tile dense
    s.read_table(0, 10)
    s.read_counters()
    s.layer(0, M, K, N, x, w, X, Wt, Y)         # decided by the first layer's measurements
    s.read_table(0, 10)
    s.read_counters()
    s.table_base(16)
    s.layer(1, M, K, N, dy, w, DY, Wt, DX)      # dX = dY . W^T
    s.read_table(16, 9)
    s.table_base(32)
    s.layer(2, M, K, N, x, dy, X, DY, DW)       # dW = X^T . dY
    s.read_table(32, 10)
    s.read_counters()

    # Forced sparse, M = 37 > acc_rows: three row groups, tight strides.
    x2, w2 = matrix(37, 20, 0.4), matrix(20, 9, 0.9)
    X2, W2, Y2 = (0x30000, 20), (0x31000, 12), (0x32000, 36)
    s.fill(*X2, x2)
    s.fill(*W2, w2)
    s.mode(2)
    s.table_base(48)
    s.layer(0, 37, 20, 9, x2, w2, X2, W2, Y2)
    s.read_table(48, 12)
    s.read_counters()
    s.mode(0)

    # Refused descriptors: ERR_CODE, nothing read or written, TILE and the counters as before.
    for override in (dict(M=0), dict(OP=3), dict(K=65536), dict(A_ADDR=X[0] + 2),
                     dict(B_STRIDE=8), dict(C_ADDR=0xFFFF_FFF0), dict(C_ADDR=Wt[0] + 0x100)):
        s.layer(0, M, K, N, x, w, X, Wt, Y, override=override)
    s.read_counters()

    # A second START while the layer runs: the driver refuses it, the layer is unaffected.
    s.table_base(0)
    s.layer(0, M, K, N, x, w, X, Wt, Y, busy=True)
    s.read_counters()

    # The interrupt: high while DONE and IRQ_EN.
    s.command("irq_en 1")
    s.layer(1, M, K, N, dy, w, DY, Wt, DX)
    s.command("irq_en 0")
    s.command("irq")

    # A read error in W, then a write error in dW; then a good layer.
    s.command(f"fault_read {Wt[0] + 3 * Wt[1]} {Wt[0] + 4 * Wt[1]}")
    s.layer(1, M, K, N, dy, w, DY, Wt, DX, fault=True)
    s.command("fault_clear")
    s.command(f"fault_write {DW[0] + 40 * DW[1]} {DW[0] + 41 * DW[1]}")
    s.layer(2, M, K, N, x, dy, X, DY, DW, fault=True)
    s.command("fault_clear")
    s.clear()
    s.forget()
    s.layer(2, M, K, N, x, dy, X, DY, DW)
    s.read_counters()
    return s


def _parse(text):
    out = {"layers": [], "c": [], "counters": [], "entries": [], "tiles": [], "irq": [],
           "reset": None, "errors": None, "cycles": None}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "c":
            out["c"].append([int(x) for x in rest.split()])
        elif kind in ("layer", "counters", "reset", "errors"):
            values = {k: int(v) for k, v in (item.split("=") for item in rest.split())}
            if kind == "layer":
                out["layers"].append(values)
            elif kind == "counters":
                out["counters"].append(values)
            else:
                out[kind] = values
        elif kind == "entry":
            out["entries"].append([int(x) for x in rest.split()])
        elif kind in ("tiles", "irq"):
            out[kind].append(int(rest))
        elif kind == "cycles":
            out["cycles"] = int(rest)
    return out


@pytest.mark.cocotb  # a Verilator build: not part of `make test-fast`
@pytest.mark.parametrize("seed", [1, 2])
def test_engine_driver_end_to_end(harness, tmp_path, seed):
    script = _scenario(seed)
    (tmp_path / "script.txt").write_text("\n".join(script.lines) + "\n")
    result = subprocess.run([str(harness), str(tmp_path / "script.txt"),
                             str(tmp_path / "out.txt")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    out = _parse((tmp_path / "out.txt").read_text())
    depth = CONFIG["table_depth"]

    # Reset values through the driver: THRESHOLD 0x80, MODE auto, nothing run, irq low.
    assert out["reset"] == dict(threshold=0x80, mode=0, table_base=0, tile=0, busy=0, done=0,
                                code=0, irq=0, tiles_dense=0, layer_cycles=0, a_words=0,
                                c_words=0)
    assert out["errors"] == dict(threshold_256=-2, mode_3=-2, table_base_depth=-2,
                                 entry_past_end=-2, entries_past_end=-2, op_4=-2,
                                 done_after_op_4=0, init_wrong_base=-1, table_base_last=0,
                                 table_base_read=depth - 1, depth=depth)
    assert out["tiles"] == script.tiles == [10, 9, 10]

    assert len(out["layers"]) == len(script.layers)
    results = iter(out["c"])
    previous = None   # the last accepted layer's printout
    for index, (got, want) in enumerate(zip(out["layers"], script.layers)):
        where = f"layer {index} ({want['desc']})"
        assert got["busy"] == 0, where
        if want["fault"]:
            assert got["code"] == (8 if want["op"] == 1 else 9), (where, got)
            continue
        assert got["code"] == want["code"], (where, got)
        assert got["tile"] == want["tile"], (where, got)
        assert got["irq"] == int(want["op"] == 1 and index == len(script.layers) - 4), \
            (where, got)
        if want["code"]:
            # Refused: the bus never offered anything (the harness checks memory), so the
            # bus-word counters still describe the last accepted layer (or were zeroed).
            assert got["valid_cycles"] == got["ar"] == got["aw"] == 0, (where, got)
            for name in ("a_words", "b_words", "c_words"):
                assert got[name] in (previous[name], 0), (where, name, got, previous)
            continue
        rows, cols = want["shape"]
        values = next(results)
        assert values == [int(v) for v in want["result"].reshape(-1)], where
        assert len(values) == rows * cols
        for name in ("a", "b", "c"):
            assert got[f"{name}_words"] == got[f"seen_{name}"], (where, name, got)
        assert got["c_words"] == want["c_words"], (where, got)
        assert 0 < got["layer_cycles"] <= got["seen_cycles"], (where, got)
        if want["busy"]:
            assert (got["busy_seen"], got["second"]) == (1, -3), (where, got)
        previous = got
    assert next(results, None) is None
    assert out["irq"] == [0]   # IRQ_EN 0 again: irq low though DONE is still set

    assert len(out["counters"]) == len(script.counters)
    for index, (got, want) in enumerate(zip(out["counters"], script.counters)):
        for name in EVENT_COUNTERS:
            assert got[name] == want[name], \
                f"read {index}: {name} = {got[name]}, expected {want[name]}"
        assert got["STALL_CYCLES"] <= got["BUSY_CYCLES"] <= got["CYCLES"], got

    entries = iter(out["entries"])
    for base, expected, threshold in script.tables:
        for t, want in enumerate(expected):
            index, valid, nnz, elems, sparse = next(entries)
            assert index == base + t
            assert want is not None, f"the model recorded nothing in entry {index}"
            assert (valid, nnz, elems) == (1, *want), (index, valid, nnz, elems, want)
            assert sparse == int(nnz * 256 <= threshold * elems)
    assert next(entries, None) is None

    # The scenario does what it says: the second forward layer mixes dense and sparse tiles
    # (counters 0 and 1 are after the first and second forward layers).
    first, second = out["counters"][0], out["counters"][1]
    assert first["TILES_SPARSE"] == 0 and first["TILES_DENSE"] == 10
    assert 0 < second["TILES_SPARSE"] < 10


def test_two_renamed_drivers_in_one_program(tmp_path):
    """Two engines of different table depths generated as ``foo`` and ``bar``: their drivers and
    register headers (renamed after the tops, include guards too) compile into one C and one
    C++ program, each with its own constants and functions."""
    check_two_renamed_drivers(
        tmp_path, BLOCK, [CONFIG, {**CONFIG, "table_depth": 16}],
        f"    return FOO_TABLE_DEPTH == {CONFIG['table_depth']} && BAR_TABLE_DEPTH == 16\n"
        "        && foo_layer_tiles(FOO_OP_WGRAD, 5, 70, 9, 16, 8, 16) == 10\n"
        "        && bar_layer_tiles(3, 5, 70, 9, 16, 8, 16) == 0 ? 0 : 1;\n")
