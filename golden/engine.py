"""Reference model of the layer engine (``spartan_engine``, docs/engine.md and
docs/interfaces.md#engine): a memory-to-memory GEMM of one training step's layer, with the
core's per-tile dense/sparse decision.

Written from the engine's contract (docs/engine.md), not from the RTL:

Layer (:func:`layer`)
    ``OP`` 0 forward: ``A`` = X (M×K), ``B`` = W (K×N), result Y = X·W (M×N);
    ``OP`` 1 dgrad: ``A`` = dY (M×N), ``B`` = W (K×N), result dX = dY·Wᵀ (M×K);
    ``OP`` 2 wgrad: ``A`` = X (M×K), ``B`` = dY (M×N), result dW = Xᵀ·dY (K×N).
    Elements are ``width``-bit two's complement (``signed``) or unsigned; results are exact sums
    reduced modulo ``2**acc_width`` and stored as ``acc_width/8`` little-endian bytes.

Descriptor (:func:`check_descriptor`)
    At ``CTRL.START`` the first failing check, in this order, refuses the layer: ``BAD_OP`` 1,
    ``BAD_DIM`` 2, ``UNALIGNED`` 3, ``BAD_STRIDE`` 4, ``RANGE`` 5, ``OVERLAP`` 6
    (:data:`ERR_CODES`, the same as ``spartan_rtl.hw.engine_regs.ERR_CODES``). A region is
    ``[ADDR, ADDR + (rows-1)*STRIDE + roundup(row bytes, bus word))``.

Tiles (:func:`tiles`, :func:`tile_blocks`)
    With ``(Mo, Ki, No)`` = (M, K, N) for OP 0, (M, N, K) for OP 1, (K, M, N) for OP 2 (output
    rows, inner dimension, output columns), the engine runs, in this order,
    ``for nc < ceil(No/n): for mt < ceil(Mo/acc_rows): for kc < ceil(Ki/k)`` one tile: rows
    ``mt*acc_rows`` to ``+mv`` (``mv = min(acc_rows, Mo - mt*acc_rows)``) of the ``A`` operand
    (X, dY, or Xᵀ for OP 2) over inner elements ``kc*k`` to ``+k``, zero-padded beyond ``Ki``:
    ``mv`` rows of ``k`` elements, padding counted as zero elements. Tiles are numbered from 0
    at each START; tile ``t`` is decided and measured exactly like the core's tile ``t`` of a
    pass (golden/core.py, docs/interfaces.md#core): entry ``TABLE_BASE + t`` (when below
    ``table_depth``) decides it in auto mode and then holds its ``nnz, elems``.

Counters (:class:`EngineModel`)
    As the core's (golden/core.py): ``TILES_DENSE``/``TILES_SPARSE`` per tile by mode;
    per tile row ``MACS_DONE += popcount*n`` (a dense row ``k*n``), ``MACS_SKIPPED +=
    (k - popcount)*n`` (0 for a dense row); ``ROWS_EMPTY`` all-zero tile rows; ``TILES_BELOW``
    tiles with ``nnz*256 <= THRESHOLD*elems``; ``ZERO_BEATS`` all-zero beats of ``lanes``
    elements of a tile (row-major). The engine's own bus counters (``A_WORDS``, ``B_WORDS``,
    ``C_WORDS``) and ``LAYER_CYCLES`` follow the bus traffic, which the testbench counts at the
    ports instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .core import EVENT_COUNTERS, MODES, CoreModel
from .formats import is_zero, mask, to_signed
from .gemm import GemmTiming, row_passes
from .monitor import tile_stats

__all__ = ["OPS", "ERR_CODES", "MAX_DIM", "MODES", "EVENT_COUNTERS", "layer", "layer_values",
           "result_shape", "operand_shapes", "dims", "check_descriptor", "regions",
           "row_bytes", "a_operand", "tile_blocks", "tiles", "EngineModel", "to_bytes",
           "result_bytes", "matrix_bytes"]

#: ``OP`` values (docs/engine.md).
OPS = {"forward": 0, "dgrad": 1, "wgrad": 2}
#: ``ERR_CODE`` values (docs/engine.md); 0 is no error.
ERR_CODES = {"BAD_OP": 1, "BAD_DIM": 2, "UNALIGNED": 3, "BAD_STRIDE": 4, "RANGE": 5,
             "OVERLAP": 6, "BUSY": 7, "READ_RESP": 8, "WRITE_RESP": 9}
#: Largest ``M``, ``K`` and ``N``.
MAX_DIM = 65535
ADDRESS_SPACE = 1 << 32
DESCRIPTOR_FIELDS = ("OP", "M", "K", "N", "A_ADDR", "A_STRIDE", "B_ADDR", "B_STRIDE",
                     "C_ADDR", "C_STRIDE")


# --- shapes ---------------------------------------------------------------------------------

def operand_shapes(op, M, K, N):
    """``(A shape, B shape, result shape)`` as stored in memory (docs/engine.md,
    "What one START does")."""
    if op == 0:
        return (M, K), (K, N), (M, N)
    if op == 1:
        return (M, N), (K, N), (M, K)
    if op == 2:
        return (M, K), (M, N), (K, N)
    raise ValueError(f"op must be 0, 1 or 2, not {op!r}")


def result_shape(op, M, K, N):
    return operand_shapes(op, M, K, N)[2]


def dims(op, M, K, N):
    """``(Mo, Ki, No)``: output rows, inner dimension, output columns (docs/engine.md,
    "What one START does")."""
    return {0: (M, K, N), 1: (M, N, K), 2: (K, M, N)}[op]


# --- results --------------------------------------------------------------------------------

def _values(raw, width, signed):
    raw = np.asarray(raw, dtype=np.uint64) & np.uint64(mask(width))
    return to_signed(raw, width) if signed else raw.astype(np.int64)


def layer(op, a, b, params):
    """The layer's result as raw ``acc_width``-bit patterns (``np.uint64``), shape
    :func:`result_shape`. ``a``, ``b``: raw ``width``-bit elements as stored at ``A_ADDR`` and
    ``B_ADDR`` (X and W, dY and W, or X and dY for OP 0, 1, 2).

    Exact in int64: products of two elements of at most 16 bits and sums of at most
    ``MAX_DIM`` of them stay below 2**49; the sum is then reduced modulo ``2**acc_width``."""
    width, signed, acc = params["width"], params["signed"], params["acc_width"]
    if width > 16:
        raise ValueError(f"width must be at most 16 for the engine, not {width}")
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"a and b must be matrices, not {a.shape} and {b.shape}")
    va, vb = _values(a, width, signed), _values(b, width, signed)
    if op == 0:
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"OP 0: X (M×K) and W (K×N), not {a.shape} and {b.shape}")
        c = va @ vb
    elif op == 1:
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"OP 1: dY (M×N) and W (K×N), not {a.shape} and {b.shape}")
        c = va @ vb.T
    elif op == 2:
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"OP 2: X (M×K) and dY (M×N), not {a.shape} and {b.shape}")
        c = va.T @ vb
    else:
        raise ValueError(f"op must be 0, 1 or 2, not {op!r}")
    # int64 -> uint64 is two's complement modulo 2**64; then keep acc_width bits.
    return c.astype(np.uint64) & np.uint64(mask(acc))


def layer_values(op, a, b, params):
    """:func:`layer` read back as numbers: ``acc_width``-bit two's complement when ``signed``,
    unsigned otherwise (np.int64; an unsigned 64-bit accumulator is not representable)."""
    raw = layer(op, a, b, params)
    if params["signed"]:
        return to_signed(raw, params["acc_width"])
    if params["acc_width"] >= 64:
        raise ValueError("an unsigned 64-bit result does not fit np.int64: use layer()")
    return raw.astype(np.int64)


# --- memory images --------------------------------------------------------------------------

def _element_bytes(width):
    if width % 8:
        raise ValueError(f"element width must be whole bytes, not {width} bits")
    return width // 8


def to_bytes(raw_row, width):
    """One row of raw ``width``-bit elements as little-endian bytes."""
    nbytes = _element_bytes(width)
    row = np.asarray(raw_row, dtype=np.uint64) & np.uint64(mask(width))
    out = np.zeros((row.size, nbytes), dtype=np.uint8)
    for i in range(nbytes):
        out[:, i] = ((row >> np.uint64(8 * i)) & np.uint64(0xFF)).astype(np.uint8)
    return out.reshape(-1).tobytes()


def matrix_bytes(raw, width):
    """Every row of a matrix as :func:`to_bytes`: ``[bytes of row 0, ...]``."""
    return [to_bytes(row, width) for row in np.asarray(raw, dtype=np.uint64)]


def result_bytes(raw, params):
    """Every result row as stored: ``acc_width/8`` little-endian bytes per element."""
    return matrix_bytes(raw, params["acc_width"])


# --- descriptor -----------------------------------------------------------------------------

def _roundup(value, unit):
    return -(-value // unit) * unit


def row_bytes(op, M, K, N, params):
    """``(A, B, C)`` row bytes: A rows hold K elements (OP 0, 2) or N (OP 1); B rows N
    elements; C rows N (OP 0), K (OP 1), N (OP 2) results of ``acc_width`` bits."""
    width, acc = params["width"], params["acc_width"]
    a_elems = N if op == 1 else K
    c_elems = K if op == 1 else N
    return (-(-a_elems * width // 8), -(-N * width // 8), -(-c_elems * acc // 8))


def regions(desc, params):
    """``{"A": (start, end), "B": ..., "C": ...}`` byte regions of a descriptor (docs/engine.md,
    *Descriptor*): ``[ADDR, ADDR + (rows-1)*STRIDE + roundup(row bytes, bus word))`` with rows
    A: M; B: K (OP 0, 1) or M (OP 2); C: M (OP 0, 1) or K (OP 2)."""
    op, M, K, N = (desc[f] for f in ("OP", "M", "K", "N"))
    word = params["data_width"] // 8
    ra, rb, rc = row_bytes(op, M, K, N, params)
    rows = {"A": M, "B": M if op == 2 else K, "C": K if op == 2 else M}
    size = {"A": ra, "B": rb, "C": rc}
    out = {}
    for name in "ABC":
        start, stride = desc[f"{name}_ADDR"], desc[f"{name}_STRIDE"]
        out[name] = (start, start + (rows[name] - 1) * stride + _roundup(size[name], word))
    return out


def check_descriptor(desc, params):
    """The error code START sets for descriptor ``desc`` (a dict of register values by name:
    OP, M, K, N, A_ADDR, A_STRIDE, B_ADDR, B_STRIDE, C_ADDR, C_STRIDE), 0 when the layer runs.
    The first failing check in this order (docs/engine.md, *Descriptor*): BAD_OP 1 (OP > 2),
    BAD_DIM 2 (M, K or N zero or above 65535), UNALIGNED 3 (an address or stride not a multiple
    of ``data_width/8``), BAD_STRIDE 4 (a stride below its rows' bytes rounded up to bus
    words), RANGE 5 (a region ends beyond 2**32), OVERLAP 6 (C's region meets A's or B's)."""
    missing = [f for f in DESCRIPTOR_FIELDS if f not in desc]
    if missing:
        raise ValueError(f"desc must give {', '.join(missing)}")
    op, M, K, N = (int(desc[f]) for f in ("OP", "M", "K", "N"))
    if not 0 <= op <= 2:
        return ERR_CODES["BAD_OP"]
    if any(not 1 <= d <= MAX_DIM for d in (M, K, N)):
        return ERR_CODES["BAD_DIM"]
    word = params["data_width"] // 8
    if any(int(desc[f]) % word for f in ("A_ADDR", "A_STRIDE", "B_ADDR", "B_STRIDE",
                                         "C_ADDR", "C_STRIDE")):
        return ERR_CODES["UNALIGNED"]
    ra, rb, rc = row_bytes(op, M, K, N, params)
    for name, size in (("A", ra), ("B", rb), ("C", rc)):
        if int(desc[f"{name}_STRIDE"]) < _roundup(size, word):
            return ERR_CODES["BAD_STRIDE"]
    reg = regions({f: int(desc[f]) for f in DESCRIPTOR_FIELDS}, params)
    if any(end > ADDRESS_SPACE for _, end in reg.values()):
        return ERR_CODES["RANGE"]
    c0, c1 = reg["C"]
    for name in "AB":
        s0, s1 = reg[name]
        if c0 < s1 and s0 < c1:
            return ERR_CODES["OVERLAP"]
    return 0


# --- tiles ----------------------------------------------------------------------------------

def a_operand(op, a):
    """The ``A`` operand of the GEMM, ``Mo × Ki``: X (OP 0), dY (OP 1), Xᵀ (OP 2)."""
    a = np.asarray(a, dtype=np.uint64)
    return a.T if op == 2 else a


def tile_blocks(op, a, params, M, K, N):
    """Every tile in the engine's order, as the raw ``mv × k`` block of the ``A`` operand it
    reads (zero-padded beyond ``Ki``): a list of ``(index, (nc, mt, kc), block)``."""
    Mo, Ki, No = dims(op, M, K, N)
    operand = a_operand(op, a)
    if operand.shape != (Mo, Ki):
        raise ValueError(f"OP {op}: the A operand must be {(Mo, Ki)}, not {operand.shape} "
                         f"(a is {np.asarray(a).shape})")
    k, n, rows = params["k"], params["n"], params["acc_rows"]
    out, t = [], 0
    for nc in range(-(-No // n)):
        for mt in range(-(-Mo // rows)):
            mv = min(rows, Mo - mt * rows)
            for kc in range(-(-Ki // k)):
                block = np.zeros((mv, k), dtype=np.uint64)
                part = operand[mt * rows:mt * rows + mv, kc * k:kc * k + k]
                block[:, :part.shape[1]] = part
                out.append((t, (nc, mt, kc), block))
                t += 1
    return out


def _stats(block, threshold, params):
    return tile_stats(block.reshape(-1, params["lanes"]), threshold, width=params["width"],
                      number_format="int", max_tile_elems=params["max_tile_elems"])


def tiles(op, a_matrix, params, M, K, N, threshold=0x80):
    """``[(nnz, elems), ...]`` of every tile in the engine's order (docs/engine.md,
    "What one START does"): what the density table holds for each after the layer. ``a_matrix``
    is the ``A`` operand as stored at ``A_ADDR`` (X, dY, X for OP 0, 1, 2). Counts are the
    monitor's, saturating beyond ``max_tile_elems`` (golden/monitor.py); below that they are
    exact."""
    return [(s.nnz, s.elems) for s in
            (_stats(block, threshold, params) for _, _, block in
             tile_blocks(op, a_matrix, params, M, K, N))]


# --- the engine's state across layers -------------------------------------------------------

@dataclass
class EngineModel(CoreModel):
    """The engine's registers, density table and counters across layers: the core's model
    (golden/core.py: ``mode``, ``threshold``, ``table_base``, ``table``, ``counters``, ``decide``,
    ``clear``, ``forget``) with the layer's tiles generated by the engine itself.

    :meth:`start` is a START: refused (``err_code`` 1 to 6, nothing computed, table and
    counters unchanged) or the whole layer, tile by tile. ``decisions``: per tile of the last
    layer, True for sparse. ``status``: ``{"BUSY", "DONE", "ERR"}`` as after the layer."""

    err_code: int = 0
    done: bool = False
    decisions: list = field(default_factory=list)

    def reset(self):
        """``rst``: every register at its reset value, the table invalid, counters zero."""
        self.__dict__.update(EngineModel(self.params).__dict__)

    def run_block(self, block):
        """One tile (``mv × k`` raw block of the ``A`` operand): decide, count, then record its
        measurement in entry ``TABLE_BASE + t`` (the core's accounting). Returns True when it
        ran sparse.

        The dense-only twin (``sparse`` false) measures and decides nothing: every tile runs
        dense, every row's ``k*n`` MACs are done, the table stays empty, and only the counters
        of the GEMM and the input (``ROWS_EMPTY``) count."""
        if self.params.get("sparse", True):
            return self.account(block)
        p = self.params
        rows = block.shape[0]
        self._add("MACS_DONE", rows * p["k"] * p["n"])
        self._add("CONFLICT_CYCLES", rows * row_passes((1 << p["k"]) - 1, GemmTiming.of(p))[1])
        self._add("ROWS_EMPTY", int(is_zero(block, p["width"], "int").all(axis=1).sum()))
        self._add("TILES_DENSE", 1)
        self.tile += 1
        return False

    def run_layer(self, op, a, b, M, K, N):
        """Every tile of an accepted layer, in order (tiles numbered from 0); returns the
        result (:func:`layer`)."""
        self.tile = 0
        self.decisions = [self.run_block(block)
                          for _, _, block in tile_blocks(op, a, self.params, M, K, N)]
        return layer(op, a, b, self.params)

    def start(self, desc, a=None, b=None):
        """A START with descriptor ``desc`` (register values by name) on operands ``a``, ``b``
        (as stored; may be None for a descriptor expected to be refused). Returns the result,
        or None when refused (``err_code`` says why)."""
        code = check_descriptor(desc, self.params)
        self.err_code, self.done = code, True
        if code:
            return None
        return self.run_layer(int(desc["OP"]), a, b, int(desc["M"]), int(desc["K"]),
                              int(desc["N"]))

    @property
    def status(self):
        """STATUS after the last START finished: ``BUSY | DONE << 1 | ERR << 2``."""
        return int(self.done) << 1 | int(self.err_code != 0) << 2
