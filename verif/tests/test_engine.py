"""Layer engine: the golden model on hand-worked examples (docs/engine.md) and the cocotb
testbench (verif/tb/tb_engine.py, cocotbext-axi) in Verilator and Icarus."""

import numpy as np
import pytest

from spartan_rtl import runner
from spartan_rtl.golden import engine as golden
from spartan_rtl.golden.engine import EngineModel, check_descriptor, layer, layer_values, tiles
from spartan_rtl.golden.gemm import gemm
from verif.tests.helpers import config_id

CONFIGS = [
    dict(),  # the defaults: lanes 8, width 8, k = n = 64, acc_rows 256
    dict(lanes=4, width=8, data_width=32, k=16, n=8, n_par=8, acc_rows=16, max_burst=4,
         table_depth=64, max_tile_elems=4096),
    dict(lanes=4, width=16, data_width=64, signed=False, acc_width=32, k=16, n=16, n_par=16,
         acc_rows=32, max_burst=8),
    # The dense-only twin (synthesised beside the engine), with two column groups.
    dict(lanes=4, width=8, data_width=32, k=16, n=16, n_par=8, acc_rows=16, max_burst=4,
         table_depth=64, max_tile_elems=4096, sparse=False),
]


# --- the golden model, worked by hand ---------------------------------------------------------

SIGNED8 = dict(width=8, signed=True, acc_width=32)


def test_golden_layer_forward():
    x = np.array([[1, 2], [3, 4]], dtype=np.uint64)
    w = np.array([[5, 6], [7, 8]], dtype=np.uint64)
    assert layer(0, x, w, SIGNED8).tolist() == [[19, 22], [43, 50]]


def test_golden_layer_signed_and_wrap():
    # 0xFF is -1 in signed 8 bits: -1 * 2 = -2, stored as 0xFFFFFFFE.
    assert layer(0, np.array([[0xFF]]), np.array([[2]]), SIGNED8).tolist() == [[0xFFFF_FFFE]]
    assert layer_values(0, np.array([[0xFF]]), np.array([[2]]), SIGNED8).tolist() == [[-2]]
    # Unsigned: 255 * 2 = 510.
    unsigned = dict(width=8, signed=False, acc_width=32)
    assert layer(0, np.array([[0xFF]]), np.array([[2]]), unsigned).tolist() == [[510]]
    # 16-bit unsigned, 16-bit accumulator: 65535 * 65535 + 65535 * 65535 = 8589672450
    # = 131070 * 65536 + 2, so 2 modulo 2**16.
    u16 = dict(width=16, signed=False, acc_width=16)
    assert layer(0, np.array([[0xFFFF, 0xFFFF]]), np.array([[0xFFFF], [0xFFFF]]),
                 u16).tolist() == [[2]]
    # Signed 16-bit: (-32768) * (-32768) = 2**30; 24-bit accumulator keeps 0.
    s16 = dict(width=16, signed=True, acc_width=24)
    assert layer(0, np.array([[0x8000]]), np.array([[0x8000]]), s16).tolist() == [[0]]
    assert layer(0, np.array([[0x8000]]), np.array([[0x7FFF]]), s16).tolist() == \
        [[(-32768 * 32767) % (1 << 24)]]


def test_golden_layer_dgrad_and_wgrad():
    # dgrad: dY (M=1 x N=2) = [1 2], W (K=3 x N=2) -> dX = dY . W^T (1 x 3).
    dy = np.array([[1, 2]], dtype=np.uint64)
    w = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.uint64)
    assert layer(1, dy, w, SIGNED8).tolist() == [[1, 2, 3]]
    # wgrad: X (M=2 x K=2), dY (M=2 x N=1) = [1, 1]^T -> dW = X^T . dY (2 x 1).
    x = np.array([[1, 2], [3, 4]], dtype=np.uint64)
    dy = np.array([[1], [1]], dtype=np.uint64)
    assert layer(2, x, dy, SIGNED8).tolist() == [[4], [6]]
    # dgrad with a negative gradient: dY = [-1] (0xFF), W = [[3], [-2]] -> dX = [-3, 2].
    assert layer_values(1, np.array([[0xFF]]), np.array([[3], [0xFE]]),
                        SIGNED8).tolist() == [[-3, 2]]
    with pytest.raises(ValueError, match="OP 1: dY"):
        layer(1, np.zeros((2, 3)), np.zeros((2, 4)), SIGNED8)


def test_golden_layer_agrees_with_gemm():
    """Cross-check against the GEMM's model (Python integers) on random 16-bit data."""
    rng = np.random.default_rng(1)
    for signed in (True, False):
        p = dict(width=16, signed=signed, acc_width=24)
        x = rng.integers(0, 1 << 16, (5, 7), dtype=np.uint64)
        w = rng.integers(0, 1 << 16, (7, 3), dtype=np.uint64)
        want = gemm(x, w, width=16, signed=signed, acc_width=24)
        assert (layer(0, x, w, p) == want).all()
        assert (layer(1, x, w.T.copy(), p) == want).all()
        assert (layer(2, x.T.copy(), w, p) == want).all()


def test_golden_result_bytes():
    assert golden.to_bytes([0x1234_5678, 1], 32) == bytes([0x78, 0x56, 0x34, 0x12, 1, 0, 0, 0])
    assert golden.to_bytes([0xABCD], 16) == bytes([0xCD, 0xAB])


P64 = dict(data_width=64, width=8, acc_width=32)
# OP 0, M=3, K=10, N=5 on a 64-bit bus: A rows 10 bytes (16 with the word), B rows 5 (8),
# C rows 5 x 4 = 20 (24). A = [0x1000, 0x1030), B (10 rows) = [0x2000, 0x2050),
# C (3 rows) = [0x3000, 0x3048).
GOOD = dict(OP=0, M=3, K=10, N=5, A_ADDR=0x1000, A_STRIDE=16, B_ADDR=0x2000, B_STRIDE=8,
            C_ADDR=0x3000, C_STRIDE=24)


@pytest.mark.parametrize("change, code", [
    ({}, 0),
    ({"OP": 3}, 1),
    ({"OP": 3, "M": 0}, 1),                       # BAD_OP comes first
    ({"M": 0}, 2),
    ({"N": 65536}, 2),
    ({"K": 0x1_0000_0000 - 1}, 2),
    ({"M": 0, "A_ADDR": 0x1004}, 2),              # BAD_DIM before UNALIGNED
    ({"K": 65535}, 4),                            # a legal K whose A rows need 65536 bytes
    ({"A_ADDR": 0x1004}, 3),
    ({"B_STRIDE": 12}, 3),
    ({"C_STRIDE": 20}, 3),                        # unaligned, though also too small
    ({"C_ADDR": 0x3001}, 3),
    ({"A_STRIDE": 8}, 4),
    ({"B_STRIDE": 0}, 4),
    ({"C_STRIDE": 16}, 4),
    ({"M": 1, "C_STRIDE": 16}, 4),                # one row: the stride is still checked
    ({"A_STRIDE": 8, "C_ADDR": 0xFFFF_FFF8}, 4),  # BAD_STRIDE before RANGE
    ({"C_ADDR": 0x1_0000_0000 - 72}, 0),          # ends exactly at 2**32
    ({"C_ADDR": 0x1_0000_0000 - 64}, 5),
    ({"B_ADDR": 0x1_0000_0000 - 80}, 0),
    ({"B_ADDR": 0x1_0000_0000 - 72}, 5),
    ({"A_ADDR": 0xFFFF_FFF8, "C_ADDR": 0xFFFF_FF00}, 5),  # RANGE before OVERLAP
    ({"C_ADDR": 0x1028}, 6),                      # C's first row inside A's last
    ({"C_ADDR": 0x1030}, 0),                      # right after A
    ({"C_ADDR": 0x0FC0}, 6),                      # C = [0xFC0, 0x1008) over A's start
    ({"C_ADDR": 0x0FB8}, 0),                      # C = [0xFB8, 0x1000): touches, no overlap
    ({"C_ADDR": 0x2048}, 6),                      # inside B's last row
    ({"C_ADDR": 0x2050}, 0),
    ({"B_ADDR": 0x1000}, 0),                      # A and B may overlap
])
def test_golden_descriptor_forward(change, code):
    assert check_descriptor({**GOOD, **change}, P64) == code


def test_golden_descriptor_gaps_are_in_the_region():
    """The region runs from the first row to the end of the last: A placed in the gap between
    two of C's rows still overlaps."""
    desc = {**GOOD, "C_ADDR": 0x4000, "C_STRIDE": 0x100, "A_ADDR": 0x4080, "A_STRIDE": 16}
    assert check_descriptor(desc, P64) == 6
    desc["A_ADDR"] = 0x4000 + 2 * 0x100 + 24   # right after C's last row's word
    assert check_descriptor(desc, P64) == 0


def test_golden_descriptor_dgrad_wgrad():
    # OP 1, M=3, K=10, N=5: A = dY rows of N=5 elements (8 bytes), B = W rows of N (8),
    # C = dX rows of K=10 results (40 bytes), M rows.
    d1 = {**GOOD, "OP": 1, "A_STRIDE": 8, "C_STRIDE": 40}
    assert check_descriptor(d1, P64) == 0
    assert check_descriptor({**d1, "C_STRIDE": 32}, P64) == 4
    assert check_descriptor({**GOOD, "OP": 1}, P64) == 4         # C rows of 40 > 24
    # C = [0x3000, 0x3000 + 2*40 + 40 = 0x3078): B at 0x3070 overlaps, 0x3078 does not.
    assert check_descriptor({**d1, "B_ADDR": 0x3070}, P64) == 6
    assert check_descriptor({**d1, "B_ADDR": 0x3078}, P64) == 0
    # OP 2: A = X rows of K=10 (16), B = dY rows of N=5 (8), M=3 rows; C = dW rows of N=5
    # results (24), K=10 rows: [0x3000, 0x3000 + 9*24 + 24 = 0x30F0).
    d2 = {**GOOD, "OP": 2}
    assert check_descriptor(d2, P64) == 0
    assert check_descriptor({**d2, "B_ADDR": 0x30E8}, P64) == 6
    assert check_descriptor({**GOOD, "B_ADDR": 0x30E8}, P64) == 0  # OP 0: C is 3 rows
    # B holds M=3 rows in OP 2: [B, B + 2*8 + 8); 24 bytes below 2**32 fits.
    assert check_descriptor({**d2, "B_ADDR": 0x1_0000_0000 - 24}, P64) == 0
    assert check_descriptor({**GOOD, "B_ADDR": 0x1_0000_0000 - 24}, P64) == 5  # OP 0: 10 rows
    # C holds K=10 rows in OP 2: 240 bytes.
    assert check_descriptor({**d2, "C_ADDR": 0x1_0000_0000 - 240}, P64) == 0
    assert check_descriptor({**d2, "C_ADDR": 0x1_0000_0000 - 232}, P64) == 5


def test_golden_descriptor_16bit_elements():
    # width 16, 32-bit bus (4-byte words): N=3 elements = 6 bytes -> 8; K=3 -> 8.
    p = dict(data_width=32, width=16, acc_width=32)
    desc = dict(OP=0, M=2, K=3, N=3, A_ADDR=0x100, A_STRIDE=8, B_ADDR=0x200, B_STRIDE=8,
                C_ADDR=0x300, C_STRIDE=12)
    assert check_descriptor(desc, p) == 0
    assert check_descriptor({**desc, "A_STRIDE": 4}, p) == 4
    assert check_descriptor({**desc, "A_ADDR": 0x102}, p) == 3


# k = 4, n = 2, acc_rows = 2, two lanes. X (3 x 5):
X = np.array([[1, 0, 0, 2, 3],
              [0, 0, 0, 0, 0],
              [4, 5, 0, 0, 0]], dtype=np.uint64)
SMALL = dict(lanes=2, width=8, signed=True, acc_width=32, k=4, n=2, k_par=1, n_par=2,
             b_banks=1, acc_rows=2, table_depth=8, max_tile_elems=4096, data_width=16)
# OP 0 with N=3: 2 column chunks x (rows 0-1, row 2) x (columns 0-3, column 4 + 3 zeros):
# rows 0-1 cols 0-3 [1 0 0 2 / 0 0 0 0] -> 2 of 8; rows 0-1 col 4 [3 / 0] -> 1 of 8;
# row 2 cols 0-3 [4 5 0 0] -> 2 of 4; row 2 col 4 [0] -> 0 of 4; all again for columns 2.
FORWARD_TILES = [(2, 8), (1, 8), (2, 4), (0, 4)] * 2


def test_golden_tiles_forward_and_dgrad():
    assert tiles(0, X, SMALL, 3, 5, 3) == FORWARD_TILES
    # dgrad with dY = X (M=3 x N=5), K=3: output rows M, inner N, output columns K: the same.
    assert tiles(1, X, SMALL, 3, 3, 5) == FORWARD_TILES
    # N = 2: one column chunk.
    assert tiles(0, X, SMALL, 3, 5, 2) == FORWARD_TILES[:4]


def test_golden_tiles_wgrad():
    # wgrad, N=1: A operand X^T (5 x 3): rows [1 0 4], [0 0 5], [0 0 0], [2 0 0], [3 0 0];
    # rows 0-1 -> 3 of 8 (k = 4 with one pad column), rows 2-3 -> 1 of 8, row 4 -> 1 of 4.
    assert tiles(2, X, SMALL, 3, 5, 1) == [(3, 8), (1, 8), (1, 4)]


def test_golden_model_counters_forced_modes():
    w = np.ones((5, 3), dtype=np.uint64)
    desc = dict(OP=0, M=3, K=5, N=3, A_ADDR=0x000, A_STRIDE=6, B_ADDR=0x100, B_STRIDE=4,
                C_ADDR=0x200, C_STRIDE=12)
    # Per column chunk, rows popcounts: tile 0 [2, 0], tile 1 [1, 0], tile 2 [2], tile 3 [0].
    sparse = EngineModel(dict(SMALL), mode=2, threshold=0x40)
    result = sparse.start(desc, X, w)
    assert sparse.err_code == 0 and sparse.status == 0b010
    assert result.tolist() == [[6, 6, 6], [0, 0, 0], [9, 9, 9]]
    c = sparse.counters
    assert (c["TILES_SPARSE"], c["TILES_DENSE"]) == (8, 0)
    assert c["MACS_DONE"] == 2 * (2 + 1 + 2 + 0) * 2          # popcounts x n, two chunks
    assert c["MACS_SKIPPED"] == 2 * ((2 + 4) + (3 + 4) + 2 + 4) * 2
    assert c["ROWS_EMPTY"] == 2 * 3
    # All-zero beats of two lanes: [1 0][0 2][0 0][0 0] 2, [3 0][0 0][0 0][0 0] 3,
    # [4 5][0 0] 1, [0 0][0 0] 2.
    assert c["ZERO_BEATS"] == 2 * 8
    # THRESHOLD 0x40 (25 %): 2/8 and 1/8 and 0/4 at or below, 2/4 not.
    assert c["TILES_BELOW"] == 2 * 3
    assert sparse.tile == 8 and sparse.decisions == [True] * 8
    assert sparse.table == {t: FORWARD_TILES[t] for t in range(8)}
    dense = EngineModel(dict(SMALL), mode=1)
    dense.start(desc, X, w)
    assert dense.counters["MACS_DONE"] == 6 * 4 * 2 * 2 and dense.counters["MACS_SKIPPED"] == 0
    assert dense.counters["ROWS_EMPTY"] == 6
    assert (dense.counters["TILES_DENSE"], dense.counters["TILES_SPARSE"]) == (8, 0)


def test_golden_model_auto_decisions_follow_the_table():
    w = np.ones((5, 3), dtype=np.uint64)
    desc = dict(OP=0, M=3, K=5, N=3, A_ADDR=0x000, A_STRIDE=6, B_ADDR=0x100, B_STRIDE=4,
                C_ADDR=0x200, C_STRIDE=12)
    model = EngineModel(dict(SMALL), mode=0, threshold=0x40)
    model.start(desc, X, w)
    assert model.decisions == [False] * 8              # no history: dense
    model.start(desc, X, w)
    # Entry t holds tile t of the last layer: 2/8, 1/8, 2/4, 0/4 (twice); sparse iff at or
    # below 25 %.
    assert model.decisions == [True, True, False, True] * 2
    # TABLE_BASE 2: tile t reads entry 2 + t (the last layer's tile 2 + t); entries 8 and 9
    # are beyond the 8-entry table: dense, and not written.
    model.table_base = 2
    model.start(desc, X, w)
    assert model.decisions == [False, True, True, True, False, True, False, False]
    assert set(model.table) == set(range(8))
    # FORGET: dense again.
    model.forget()
    model.table_base = 0
    model.start(desc, X, w)
    assert model.decisions == [False] * 8


def test_golden_model_refused_and_reset():
    model = EngineModel(dict(SMALL), mode=2)
    bad = dict(OP=0, M=0, K=5, N=3, A_ADDR=0, A_STRIDE=6, B_ADDR=0x100, B_STRIDE=4,
               C_ADDR=0x200, C_STRIDE=12)
    assert model.start(bad) is None
    assert model.err_code == 2 and model.status == 0b110
    assert not any(model.counters.values()) and model.table == {}
    model.table[3] = (1, 2)
    model.threshold, model.table_base = 0x10, 5
    model.reset()
    assert (model.mode, model.threshold, model.table_base, model.tile, model.err_code,
            model.status) == (0, 0x80, 0, 0, 0, 0)
    assert model.table == {}


def test_golden_codes_match_the_register_map():
    from spartan_rtl.hw import engine_regs
    assert golden.ERR_CODES == engine_regs.ERR_CODES
    assert golden.OPS == engine_regs.OPS
    assert golden.MAX_DIM == engine_regs.MAX_DIM


# --- the cocotb testbench -------------------------------------------------------------------

@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_engine(config, sim):
    # Icarus runs about five times slower: fewer random layers there (the directed ones, and
    # every other test, run in both).
    runner.run("engine", "spartan_rtl.tb.tb_engine", config, sim=sim, name="regression",
               args={"layers": 6 if sim == "verilator" else 2})
