"""Cycle model of the layer engine (``spartan_engine``, docs/engine.md): ``LAYER_CYCLES`` of a
whole layer with a zero-wait memory, its breakdown, and the bus words of every operand.

Written from the engine's RTL (hw/engine.py, hw/engine_dma.py, hw/engine_buffers.py, the core's
``tile_datapath``) and the GEMM's cycle model (golden/gemm.py), and checked against the RTL
(verif/tests/test_engine_timing.py, verif/flows/engine_timing.py for the full error table).
Times are cycles counted by ``LAYER_CYCLES``: 0 is the first cycle after the descriptor checks
(``LAYER_CYCLES`` is cleared as they pass; START to DONE is :data:`CHECK_CYCLES` more).

Bus words (exact; ``A_WORDS``, ``B_WORDS``, ``C_WORDS``)
    Every step reads its ``B`` chunk and its ``A`` tile, only inside the matrices, whole bus
    words of ``lanes`` elements; each result row is written once, ``ceil(nv*acc_bytes/bus
    bytes)`` words. With ``(Mo, Ki, No)`` the result rows, inner dimension and result columns
    and ``mv``, ``kv``, ``nv`` the valid rows, inner elements and columns of a step:

        A words = sum over steps of mv * ceil(kv/lanes)   (OP 0, 1: rows of X or dY)
                                    kv * ceil(mv/lanes)   (OP 2: rows of X, read for Xᵀ)
        B words = sum over steps of kv * ceil(nv/lanes)   (OP 0, 2: rows of W or dY)
                                    nv * ceil(kv/lanes)   (OP 1: rows of W, read for Wᵀ)
        C words = sum over row groups of mv * ceil(nv*acc_width/data_width)

Cycles: one step ``s`` (``B`` chunk, ``A`` tile, ``C`` tile) after another at the core
    B load        ``k*n/lanes`` beats into the GEMM, one a cycle from memory (OP 0, 2); OP 1's
                  ``Wᵀ`` comes out of the transposer, three beats every four cycles:
                  ``X + (X-1)//3`` cycles for ``X`` beats.
    start         ``b_first(0)`` = :data:`FIRST_AR` + the memory's read latency (OP 0, 2); OP 1
                  first writes the chunk into the transposer (``k*n/lanes`` beats) and reads
                  it out :data:`TRANSPOSE_TURN` cycles after its last write.
    turn-around   ``b_first(s) = c_last(s-1) + 1``: B chunk ``s`` is offered the cycle after
                  tile ``s-1``'s last ``C`` beat (counted, registered). OP 1: not before the
                  transposer holds it: ``a_last(s-1) + k*n/lanes + TRANSPOSE_TURN`` (the reader
                  reaches chunk ``s`` only after tile ``s-1``'s last ``A`` beat).
    A start       ``a_first(s) = b_last(s) + 1`` (OP 0, 1); OP 2 first writes the ``Xᵀ`` block
                  (``k*acc_rows/lanes`` beats, whatever ``mv``) into the transposer:
                  ``b_last(s) + k*acc_rows/lanes + TRANSPOSE_TURN``. Step 0 may wait for its
                  reads: the reader's address side spends 2 cycles a burst.
    tile          ``a_first`` to the last ``C`` beat: the rows' beats at one a cycle (OP 2:
                  three in four, out of the transposer), each row's mask through the compactor
                  (:attr:`EngineTiming.mask_latency`), then golden/gemm.py's rules: the
                  loader (mask, gap, ``ceil(nnz/lanes)`` data beats), one pass per nonzero
                  (dense row: ``k``; an empty row one pass), and the output: with the
                  broadcast datapath's single output entry a row's result waits for the last
                  one's credit, ``issue_to_push + 1 + n_par/lanes`` cycles after its last pass.
                  The first rows are stepped exactly (their masks arrive as the input
                  streams); from then on each row costs ``max(passes, that credit floor)``
                  (the loads and the input keep ahead: checked, see :func:`tile_profile`), and
                  the last ``C`` beat leaves ``issue_to_push + n_par/lanes`` after the last
                  row's last pass.
    results       the last inner chunk's ``C`` beats go through the accumulator into the
                  ``results`` FIFO (one row group deep, readable :data:`ACC_TO_WRITER` cycles
                  after the beat) and out to the writer, one bus word a cycle
                  (``lanes*acc_width/data_width`` words a ``C`` beat, the padding columns'
                  words dropped in a cycle each). The next row group's last chunk can put a
                  beat in only while the FIFO has room: at low density, when a row group is one
                  inner chunk, the writer sets the pace (``n*acc_width/data_width`` cycles a
                  row against the GEMM's credit floor).
    drain         after the last ``C`` beat, the writer's backlog and the last write's
                  response (:data:`WRITE_RESPONSE` cycles), then ``BUSY`` falls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .gemm import GemmTiming

__all__ = ["EngineTiming", "CHECK_CYCLES", "FIRST_AR", "TRANSPOSE_TURN", "ACC_TO_WRITER",
           "WRITE_RESPONSE", "dims", "words", "row_nnz", "layer_cycles", "layer_cycles_nnz",
           "tile_profile", "write_layers", "read_layers"]

#: Cycles ``BUSY`` is high before ``LAYER_CYCLES`` restarts from 0: the descriptor checks
#: (CHECK_FIELDS, 16 SPAN steps, END, CHECK_REGIONS; hw/engine.py). START to DONE is
#: ``LAYER_CYCLES + CHECK_CYCLES``.
CHECK_CYCLES = 19
#: The first read burst's AR transfer, cycles after ``LAYER_CYCLES``' first cycle (the
#: sequencer's command through its queue, the burst walker's size register).
FIRST_AR = 4
#: A block's last beat written into the transposer to its first beat read out.
TRANSPOSE_TURN = 4
#: A ``C`` beat's transfer to its first word offered to the writer (accumulator's two stages,
#: the results FIFO).
ACC_TO_WRITER = 4
#: The last write's last W beat to ``BUSY`` falling (the response, then the idle check).
WRITE_RESPONSE = 4
#: Rows of a tile stepped exactly before the closed form takes over.
START_ROWS = 6


def _cdiv(a, b):
    return -(-a // b)


@dataclass(frozen=True)
class EngineTiming:
    """The engine parameters its cycles depend on, and the memory's read latency."""

    lanes: int = 8
    width: int = 8
    k: int = 64
    n: int = 64
    k_par: int = 1
    n_par: int = 64
    b_banks: int = 1
    acc_rows: int = 256
    acc_width: int = 32
    data_width: int = 64
    max_burst: int = 16
    #: AR transfer to its first R beat: 2 for cocotbext-axi's AxiRam, the testbench's memory.
    read_latency: int = 2

    FIELDS = ("lanes", "width", "k", "n", "k_par", "n_par", "b_banks", "acc_rows", "acc_width",
              "data_width", "max_burst")

    @classmethod
    def of(cls, params, **kwargs):
        return cls(**{f: params[f] for f in cls.FIELDS if f in params}, **kwargs)

    @classmethod
    def default(cls, **overrides):
        """The engine block's defaults (hw/engine.py), with ``overrides``."""
        from spartan_rtl.hw.engine import BLOCK
        p = BLOCK.resolve({})
        p.update(overrides)
        if "lanes" in overrides or "width" in overrides:
            p.setdefault("data_width", p["lanes"] * p["width"])
            p["data_width"] = p["lanes"] * p["width"]
        return cls.of(p)

    @property
    def gemm(self):
        return GemmTiming(lanes=self.lanes, k=self.k, n=self.n, k_par=self.k_par,
                          n_par=self.n_par, b_banks=self.b_banks, sparse=True)

    @property
    def beats_per_row(self):
        """``A`` beats of one tile row."""
        return self.k // self.lanes

    @property
    def mask_latency(self):
        """The compactor: a row's last input beat to its mask (docs/compactor.md)."""
        return 7 if self.lanes >= 8 else 2

    @property
    def words_per_c_beat(self):
        return self.lanes * self.acc_width // self.data_width

    @property
    def bus_bytes(self):
        return self.data_width // 8

    @property
    def b_beats(self):
        """``B`` chunk beats into the GEMM."""
        return self.k * self.n // self.lanes

    @property
    def credit_floor(self):
        """Cycles between two passes that each need the output entry (single-entry FIFO)."""
        g = self.gemm
        if g.fifo_depth == 1:
            return g.issue_to_push + 1 + g.n_par // self.lanes
        return max(g.n_par // self.lanes, _cdiv(g.issue_to_push + 1 + g.n_par // self.lanes,
                                                g.fifo_depth))


def dims(op, M, K, N):
    """``(Mo, Ki, No)``: result rows, inner dimension, result columns."""
    return {0: (M, K, N), 1: (M, N, K), 2: (K, M, N)}[op]


def _parts(total, size):
    """The sizes of ``ceil(total/size)`` chunks: full ones, then the remainder."""
    full, rem = divmod(total, size)
    return [size] * full + ([rem] if rem else [])


def _transposed_span(beats):
    """Cycles the transposer takes to send ``beats`` beats: three every four cycles."""
    return beats + (beats - 1) // 3 if beats else 0


def words(op, M, K, N, t):
    """``{"A_WORDS", "B_WORDS", "C_WORDS"}`` of a layer (the engine's bus counters, exact) and
    the bytes they move (``*_BYTES``: whole bus words)."""
    Mo, Ki, No = dims(op, M, K, N)
    L = t.lanes
    mvs, kvs, nvs = _parts(Mo, t.acc_rows), _parts(Ki, t.k), _parts(No, t.n)
    n_nc, n_mt = len(nvs), len(mvs)
    if op == 2:
        a = n_nc * Ki * sum(_cdiv(mv, L) for mv in mvs)
    else:
        a = n_nc * Mo * sum(_cdiv(kv, L) for kv in kvs)
    if op == 1:
        b = n_mt * No * sum(_cdiv(kv, L) for kv in kvs)
    else:
        b = n_mt * Ki * sum(_cdiv(nv, L) for nv in nvs)
    acc_bytes = t.acc_width // 8
    c = Mo * sum(_cdiv(nv * acc_bytes, t.bus_bytes) for nv in nvs)
    out = {"A_WORDS": a, "B_WORDS": b, "C_WORDS": c}
    out.update({f"{x}_BYTES": out[f"{x}_WORDS"] * t.bus_bytes for x in "ABC"})
    return out


def row_nnz(op, a_matrix, t, M=None, K=None, N=None):
    """Nonzeros of every row of every ``A`` block: ``(Mo, ceil(Ki/k))`` counts of the streamed
    operand (X, dY, Xᵀ for OP 0, 1, 2) per row and inner chunk of ``k`` (``a_matrix`` as stored
    at ``A_ADDR``: raw elements or a boolean mask; nonzero = not 0)."""
    x = np.asarray(a_matrix) != 0
    if op == 2:
        x = x.T
    rows, inner = x.shape
    pad = (-inner) % t.k
    if pad:
        x = np.pad(x, ((0, 0), (0, pad)))
    return x.reshape(rows, -1, t.k).sum(axis=2, dtype=np.int64)


# --- one tile ---------------------------------------------------------------------------------

def _input_times(rows, t, transposed):
    """Cycle (from the tile's first ``A`` beat) of each row's last input beat, unthrottled."""
    last = (np.arange(rows, dtype=np.int64) + 1) * t.beats_per_row - 1
    return last + last // 3 if transposed else last


def tile_profile(nnz, t, *, sparse=True, transposed=False):
    """The GEMM's schedule of tiles with the same number of rows: ``nnz`` is ``(tiles, rows)``
    (nonzeros per row; ignored when dense). Returns a dict of int64 arrays, cycles from each
    tile's first ``A`` beat: ``X`` (tiles, rows) each row's last pass, ``load`` (tiles, rows)
    each row's mask taken by the loader, ``c_last`` (tiles,) the last ``C`` beat, ``beats``
    (tiles, rows) the ``C`` beats of each row's result, ``passes`` (tiles,) issue cycles."""
    g = t.gemm
    nnz = np.atleast_2d(np.asarray(nnz, dtype=np.int64))
    T, R = nnz.shape
    L = t.lanes
    groups = g.col_groups
    if not sparse:
        nnz = np.full((T, R), t.k, dtype=np.int64)
    if g.k_par == 1:
        per_group = np.maximum(nnz, 1)
    else:   # replicated datapath: no bank conflicts counted (b_banks = 1)
        per_group = np.maximum(_cdiv(nnz, g.k_par), 1)
    passes = np.where(nnz == 0, 1, per_group * groups)
    load = np.where(nnz == 0, 1, 1 + g.data_gap + _cdiv(nnz, L))
    beats = np.where(nnz == 0, t.n // L, g.n_par // L)
    floor_after = g.issue_to_push + 1 + beats          # next credit pass, after this row's
    if g.fifo_depth > 1:
        floor_after = np.maximum(beats, _cdiv(floor_after, g.fifo_depth))
    arrive = _input_times(R, t, transposed) + t.mask_latency
    X = np.empty((T, R), dtype=np.int64)
    LS = np.empty((T, R), dtype=np.int64)
    # The first rows, stepped: loader start (mask taken), load end, first pass, last pass.
    r0 = min(R, START_ROWS)
    le_prev = np.full(T, -(1 << 40))
    for i in range(r0):
        ls = np.full(T, arrive[i])
        ls = np.maximum(ls, le_prev + 1)
        if i >= 2:
            ls = np.maximum(ls, X[:, i - 2] + 1)
        le = ls + load[:, i] - 1
        first = le + 1 if i == 0 else np.maximum(le + 1, X[:, i - 1] + 1)
        if i == 0:
            credit = np.full(T, -(1 << 40))
        else:
            credit = X[:, i - 1] + floor_after[:, i - 1]
        empty = nnz[:, i] == 0
        one_group = np.maximum(first + per_group[:, i] - 1, credit)
        rest = (groups - 1) * np.maximum(per_group[:, i], floor_after[:, i])
        X[:, i] = np.where(empty, np.maximum(first, credit), one_group + rest)
        LS[:, i] = ls
        le_prev = le
    if R > r0:
        prev_floor = floor_after[:, r0 - 1:R - 1]
        first_group = np.maximum(per_group[:, r0:], prev_floor)
        rest = (groups - 1) * np.maximum(per_group[:, r0:], floor_after[:, r0:])
        inc = np.where(nnz[:, r0:] == 0, np.maximum(1, prev_floor), first_group + rest)
        X[:, r0:] = X[:, r0 - 1:r0] + np.cumsum(inc, axis=1)
        # The loader takes row i's mask as soon as row i-2 has left its slot.
        LS[:, r0:] = np.maximum(arrive[r0:][None, :], X[:, r0 - 2:R - 2] + 1)
    c_last = X[:, -1] + g.issue_to_push + beats[:, -1]
    return {"X": X, "load": LS, "c_last": c_last, "beats": beats,
            "passes": passes.sum(axis=1)}


# --- operands of the RTL timing runs (verif/tb/tb_engine_timing.py) -------------------------

def write_layers(path, layers):
    """``layers``: ``[{"op", "mode", "a", "b"}, ...]`` (raw elements as stored) to ``path``
    (the operands of verif/tb/tb_engine_timing.py's ``timing_layers``)."""
    arrays = {"count": np.array(len(layers))}
    for i, layer in enumerate(layers):
        arrays[f"op{i}"] = np.array(int(layer["op"]))
        arrays[f"mode{i}"] = np.array(int(layer["mode"]))
        arrays[f"a{i}"] = np.asarray(layer["a"], dtype=np.uint64)
        arrays[f"b{i}"] = np.asarray(layer["b"], dtype=np.uint64)
    np.savez_compressed(path, **arrays)


def read_layers(path):
    """The layers :func:`write_layers` wrote."""
    with np.load(path) as f:
        return [{"op": int(f[f"op{i}"]), "mode": int(f[f"mode{i}"]), "a": f[f"a{i}"],
                 "b": f[f"b{i}"]} for i in range(int(f["count"]))]
