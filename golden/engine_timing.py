"""Cycle model of the layer engine (``spartan_engine``, docs/engine.md): ``LAYER_CYCLES`` of a
whole layer with a zero-wait memory, its breakdown, and the bus words of every operand.

Written from the engine's RTL (hw/engine.py, hw/engine_dma.py, hw/engine_buffers.py, the core's
``tile_datapath``) and the GEMM's cycle model (golden/gemm.py), and checked against the RTL
(verif/tests/test_engine_timing.py, verif/flows/engine_timing.py for the full error table).
``LAYER_CYCLES`` counts every cycle ``BUSY`` is high, START to DONE: the descriptor checks
(:data:`CHECK_CYCLES`), then the layer. Times below are cycles from the first cycle after the
checks.

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

Cycles: the steps ``s`` (``B`` chunk, ``A`` tile, ``C`` tile) overlap. The GEMM holds two
    weight sets: chunk ``s`` loads into set ``s mod 2`` while tile ``s-1`` computes, and tile
    ``s``'s rows follow tile ``s-1``'s in the GEMM as the next rows of one stream.
    B load        ``k*n/lanes`` beats into the GEMM, one a cycle from memory (OP 0, 2); OP 1's
                  ``Wᵀ`` comes out of the transposer, three beats every four cycles:
                  ``X + (X-1)//3`` cycles for ``X`` beats, a chunk ready before the one
                  before it has left continuing that cadence.
    start         ``b_first(0)`` = :data:`FIRST_AR` + the memory's read latency + the reader's
                  :data:`READ_SLICE` (OP 0); OP 1 first writes the chunk into the
                  transposer (``k*n/lanes`` beats) and reads it out :data:`TRANSPOSE_TURN`
                  cycles after its last write; OP 2 first fills the transposer with step 0's
                  ``Xᵀ`` block (``fill = k*ceil(mv/lanes)`` beats: ``k`` rows of the tile's
                  ``mv`` result rows' words).
    chunk s       the latest of: its weight set free, ``C`` tile ``s-2`` gone
                  (``c_last(s-2) + 1``); its place in the reader's R stream, which holds
                  every operand in step order at one beat a cycle: OP 0 after ``A`` tile
                  ``s-1``'s beats, OP 1 its ``Wᵀ`` written into the transposer after them (and
                  into a free block: chunk ``s-2`` read out), OP 2 after step ``s``'s ``Xᵀ``
                  block, which follows chunk ``s-1`` into the block tile ``s-2`` has left (free
                  once the read of its last beat is issued: two cycles after the core took
                  the beat three before it); and (OP 0, 1) the ``A`` queue: a tile's last
                  beat goes in once the beat :data:`A_QUEUE` before it has left for the core
                  (:func:`accept_time`).
    A start       ``a_first(s)``: after chunk ``s`` (:data:`A_QUEUE_LATENCY` more for OP 0,
                  whose ``A`` beats follow the chunk through the queue; OP 2: and
                  :data:`TRANSPOSE_TURN` after its ``Xᵀ`` block's fill), and not before tile
                  ``s-1``'s beats, one a cycle (OP 2: three in four). Step 0 may wait for its
                  reads: the reader's address side spends 2 cycles a burst.
    rows          each row's mask through the compactor (:attr:`EngineTiming.mask_latency`)
                  after its beats, then golden/gemm.py's rules, from where the GEMM stands
                  after the row before (the tile before's last rows included): the loader
                  (mask, gap, ``ceil(nnz/lanes)`` data beats), one pass per nonzero (dense
                  row: ``k``; an empty row one pass), and the output: with the broadcast
                  datapath's single output entry a row's result waits for the last one's
                  credit, ``issue_to_push + 1 + n_par/lanes`` cycles after its last pass. The
                  first :data:`START_ROWS` rows of a tile are stepped exactly; from then on
                  each row costs ``max(passes, that credit floor)``: the next row's load and
                  its input beats stay ahead whenever the floor is at least a row's load
                  (``2 + k/lanes``) and its beats (at the defaults 15 against 10 and 8; in the
                  small configuration 9 against 6 and 4); where it is not (``k = 128`` at 8
                  lanes: 15 against 18 and 16) every row is stepped. The last ``C`` beat of a
                  tile leaves ``issue_to_push + n_par/lanes`` after its last row's last pass.
    admission     where a bound above needs when the core took an ``A`` beat, the compactor's
                  input admission is stepped (:func:`accept_time`) from the rows' nonzero
                  counts: exact for dense rows, within a few cycles for sparse ones (the
                  positions of the nonzeros decide which input beat makes each data beat).
                  It decides a layer's cycles only where a chunk's load outlasts the tile
                  before (short tiles at low density).
    results       the last inner chunk's ``C`` beats go through the accumulator into the
                  ``results`` FIFO (one row group deep, readable :data:`ACC_TO_WRITER` cycles
                  after the beat) and out to the writer, one bus word a cycle
                  (``lanes*acc_width/data_width`` words a ``C`` beat, the padding columns'
                  words dropped in a cycle each). With several column groups (``n > n_par``)
                  a row's beats leave the GEMM an output entry (``n_par/lanes`` beats) at a
                  time, each ``issue_to_push + 1`` cycles after its group's last pass. The
                  next row group's last chunk can put a beat in only while the FIFO has room:
                  its rows' passes wait (and the rows after them) where the writer sets the
                  pace (``n*acc_width/data_width`` cycles a row against the GEMM's credit
                  floor).
    drain         after the last ``C`` beat, the writer's backlog and the last write's
                  response (:data:`WRITE_RESPONSE` cycles), then ``BUSY`` falls.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from .gemm import GemmTiming

__all__ = ["EngineTiming", "CHECK_CYCLES", "FIRST_AR", "READ_SLICE", "TRANSPOSE_TURN",
           "ACC_TO_WRITER", "WRITE_RESPONSE", "LAST_WORD_TO_DONE", "A_QUEUE", "A_QUEUE_LATENCY",
           "dims", "words", "row_nnz", "layer_cycles", "layer_cycles_nnz", "tile_profile",
           "row_beat_nnz", "accept_time", "write_layers", "read_layers"]

#: The descriptor checks after START (CHECK_FIELDS, 16 SPAN steps, END, CHECK_REGIONS,
#: VERDICT; hw/engine.py): ``LAYER_CYCLES`` counts them (it counts every cycle ``BUSY`` is high).
CHECK_CYCLES = 20
#: The first read burst's AR transfer, cycles after the checks (the sequencer's command
#: through its queue, the burst walker's size register).
FIRST_AR = 4
#: The reader's register slice (hw/engine_dma.py): an R word's transfer to its beat offered.
READ_SLICE = 1
#: A block's last beat written into the transposer to its first beat read out.
TRANSPOSE_TURN = 4
#: A ``C`` beat's transfer to its first word offered to the writer (the register slice between
#: the GEMM and the accumulator, the accumulator's three stages, the results FIFO, its output
#: register).
ACC_TO_WRITER = 7
#: The last write's last W beat to ``BUSY`` falling (the response, then the idle check,
#: registered).
WRITE_RESPONSE = 5
#: The writer's last word taken to ``BUSY`` falling (its idle, then the idle check, registered).
LAST_WORD_TO_DONE = 3
#: Rows of a tile stepped exactly before the closed form takes over.
START_ROWS = 6
#: Beats of the A queue between the reader and the core (OP 0, 1; hw/engine.py A_QUEUE).
A_QUEUE = 512
#: An A beat's transfer from the reader to its transfer out of the A queue, at the earliest.
A_QUEUE_LATENCY = 3


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
    #: False: the dense-only twin (no compactor; the GEMM's dense-only build).
    sparse: bool = True

    FIELDS = ("lanes", "width", "k", "n", "k_par", "n_par", "b_banks", "acc_rows", "acc_width",
              "data_width", "max_burst", "sparse")

    @classmethod
    def of(cls, params, **kwargs):
        return cls(**{f: params[f] for f in cls.FIELDS if f in params}, **kwargs)

    @classmethod
    def default(cls, **overrides):
        """The engine block's defaults (hw/engine.py), with ``overrides``."""
        from spartan_rtl.hw.engine import BLOCK
        p = BLOCK.resolve({})
        p.update(overrides)
        if "data_width" not in overrides:
            p["data_width"] = p["lanes"] * p["width"]
        return cls.of(p)

    @property
    def gemm(self):
        return GemmTiming(lanes=self.lanes, k=self.k, n=self.n, k_par=self.k_par,
                          n_par=self.n_par, b_banks=self.b_banks, sparse=self.sparse)

    @property
    def weight_sets(self):
        """The GEMM's weight sets in the engine (hw/engine.py): two in the broadcast datapath,
        one in the replicated (``k_par`` > 1)."""
        return 2 if self.k_par == 1 else 1

    @property
    def beats_per_row(self):
        """``A`` beats of one tile row."""
        return self.k // self.lanes

    @property
    def mask_latency(self):
        """The compactor: a row's last input beat to its mask (docs/compactor.md); the
        twin's mask FIFO: the next edge."""
        if not self.sparse:
            return 1
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


def _streamed(op, a_matrix, t):
    """The streamed operand's nonzeros as the engine's tiles see them: rows of X, dY or Xᵀ
    (OP 0, 1, 2), the inner dimension zero-padded to whole chunks of ``k``."""
    x = np.asarray(a_matrix) != 0
    if op == 2:
        x = x.T
    pad = (-x.shape[1]) % t.k
    return np.pad(x, ((0, 0), (0, pad))) if pad else x


def row_nnz(op, a_matrix, t):
    """Nonzeros of every row of every ``A`` block: ``(Mo, ceil(Ki/k))`` counts of the streamed
    operand (X, dY, Xᵀ for OP 0, 1, 2) per row and inner chunk of ``k`` (``a_matrix`` as stored
    at ``A_ADDR``: raw elements or a boolean mask; nonzero = not 0)."""
    x = _streamed(op, a_matrix, t)
    return x.reshape(x.shape[0], -1, t.k).sum(axis=2, dtype=np.int64)


def row_beat_nnz(op, a_matrix, t):
    """:func:`row_nnz` per input beat: ``(Mo, ceil(Ki/k), k/lanes)`` nonzeros of each beat of
    each row of each ``A`` block (where they are decides when the compactor's data beats are
    made: :func:`accept_time`)."""
    x = _streamed(op, a_matrix, t)
    return x.reshape(x.shape[0], -1, t.beats_per_row, t.lanes).sum(axis=3, dtype=np.int64)


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
    (tiles, rows) the ``C`` beats of each row's last output entry (``n_par/lanes``; an empty
    row's zero token: ``n/lanes``), ``gap`` (tiles, rows) cycles between the last passes of a
    row's column groups (0 for an empty row: one entry), ``passes`` (tiles,) issue cycles.
    Each tile is the layer model's rows (:func:`_block_rows`, :func:`_run_rows`) from an idle
    GEMM."""
    nnz = np.atleast_2d(np.asarray(nnz, dtype=np.int64))
    blocks = [_block_rows(row, t, sparse, transposed) for row in nnz]
    runs = [_run_rows(rows, 0, _IDLE) for rows in blocks]
    X = np.array([x for x, _, _ in runs], dtype=np.int64)
    beats = np.array([rows.beats for rows in blocks], dtype=np.int64)
    return {"X": X, "load": np.array([ls for _, ls, _ in runs], dtype=np.int64),
            "c_last": X[:, -1] + t.gemm.issue_to_push + beats[:, -1], "beats": beats,
            "gap": np.array([rows.gap for rows in blocks], dtype=np.int64),
            "passes": np.array([rows.passes for rows in blocks], dtype=np.int64)}


#: The core's input admission, as the model steps it: ``(write, mask write, read, mask read,
#: data room, mask room)``. A row's data beats and its mask count in their FIFO's level
#: ``write``/``mask write`` cycles after the input beat that makes them (from the next cycle:
#: 0); a data beat leaves ``read`` cycles after the loader takes its row's mask (plus its place
#: in the row), a mask ``mask read`` after; the input is taken while the levels, as of the
#: cycle before, are at most ``data room`` and ``mask room``. The compactor (hw/compactor.py
#: ``room``), short and deep pipeline, fitted to the RTL's beats, every one of a tile's: from
#: the A queue, and from the transposer (OP 2: its data beats leave 2 cycles earlier); the
#: dense-only twin's two-row FIFOs (hw/core.py ``_whole_rows``: ``w_rdy`` at the level itself).
_ADMIT_PARAMS = {("compactor", False): (2, 2, 3, 0, 2, 5),
                 ("compactor", True): (7, 6, 6, 0, 4, 5),
                 ("twin", False): (0, 0, 0, -1, None, 1),
                 ("twin", True): (0, 0, 0, -1, None, 1)}


def _admission(t, transposed):
    """:data:`_ADMIT_PARAMS` of this engine, the rooms in beats and rows."""
    bpr = t.beats_per_row
    write, mask_write, read, mask_read, room, mask_room = _ADMIT_PARAMS[
        ("compactor" if t.sparse else "twin", t.lanes >= 8)]
    if t.sparse and transposed:
        read -= 2 if t.lanes >= 8 else 0
    return (write, mask_write, read, mask_read,
            bpr + room if room is not None else 2 * bpr - 1, mask_room)


#: Rows of a tile's end the admission is stepped over (the rows before are taken as buffered).
ADMIT_ROWS = 8


def _makers(nnz, t, sparse, beat_nnz=None):
    """The input beat (of its row) that makes each of a row's data beats into the compactor's
    FIFO, for rows of ``nnz`` nonzeros: a dense row's beats one for one; a sparse row's data
    beat ``j`` once ``(j+1)*lanes`` of its nonzeros are in (its last at the row's last beat),
    from each beat's nonzeros (``beat_nnz``, rows x ``k/lanes``) or, without them, taking the
    nonzeros as spread evenly. A tuple per row."""
    bpr = t.beats_per_row
    if not sparse:
        return [tuple(range(bpr))] * len(nnz)
    if beat_nnz is None:
        return [_even_makers(int(c), bpr, t.lanes) for c in nnz]
    out = []
    for count, cum in zip((int(c) for c in nnz), np.cumsum(beat_nnz, axis=1)):
        needs = np.minimum((np.arange(_cdiv(count, t.lanes)) + 1) * t.lanes, count)
        made = np.searchsorted(cum, needs)
        made[needs == count] = bpr - 1
        out.append(tuple(int(b) for b in made))
    return out


@functools.lru_cache(maxsize=None)
def _even_makers(count, bpr, lanes):
    """:func:`_makers` of a row of ``count`` nonzeros spread evenly over its beats."""
    out = []
    for j in range(_cdiv(count, lanes)):
        need = (j + 1) * lanes
        out.append(bpr - 1 if need >= count else min(_cdiv(need * bpr, count) - 1, bpr - 1))
    return tuple(out)


_ACCEPT_MEMO = {}


def accept_time(makers, load, t, beat, *, transposed=False):
    """Cycle (from the tile's first ``A`` beat) the tile's ``A`` beat ``beat`` enters the core:
    the input runs at the reader's (or the transposer's) rate until the compactor's FIFOs are
    at their thresholds (``room``: data FIFO at most ``k/lanes + 4`` beats, 2 below 8 lanes;
    mask FIFO at most 5 rows, in the cycle before), then as the loader (``load``: each row's
    mask taken, from the tile's first ``A`` beat) empties them. ``makers``: the input beat
    that makes each of a row's data beats (:func:`_makers`). Stepped over the
    :data:`ADMIT_ROWS` rows up to the beat's (the rows before taken as buffered); remembered,
    since the answer depends only on those rows, their masks' times relative to each other
    and, when it can bind, the input's own pace (the windows of like tiles repeat)."""
    bpr = t.beats_per_row
    R = beat // bpr + 1
    lo = max(0, R - ADMIT_ROWS - 8)
    load = np.asarray(load, dtype=np.int64)
    base = int(load[lo])
    first_x = lo * bpr
    ahead = first_x + (first_x // 3 if transposed else 0) - base
    if ahead < -8 * ADMIT_ROWS * bpr:
        ahead = None            # the input's pace cannot bind: far behind the masks
    key = (t.lanes, bpr, beat - first_x, transposed, ahead, tuple(makers[lo:R]),
           (load[lo:R] - base).tobytes())
    found = _ACCEPT_MEMO.get(key)
    if found is None:
        if len(_ACCEPT_MEMO) > 1 << 16:
            _ACCEPT_MEMO.clear()
        found = _ACCEPT_MEMO[key] = _admit(makers[lo:R], load[lo:R] - base, t, beat - first_x,
                                           first_x, ahead, transposed)
    return found + base


def _admit(makers, load, t, beat, first_x, ahead, transposed):
    """:func:`accept_time` of rows from the tile's beat ``first_x``, all times relative to one
    cycle: the input's unthrottled time of their first beat ``ahead`` (None: it cannot bind)."""
    import bisect
    bpr = t.beats_per_row
    wd1, wm1, rd, md, dd, dm = _admission(t, transposed)
    R = beat // bpr + 1
    nd = np.array([len(m) for m in makers[:R]], dtype=np.int64)
    r0 = max(0, R - ADMIT_ROWS)
    load = np.asarray(load[:R], dtype=np.int64)
    mask_reads = (load + md).tolist()
    # Data beats leave in row order, each row's from rd cycles after its mask.
    starts = np.repeat(load + rd - np.concatenate([[0], np.cumsum(nd)[:-1]]), nd)
    data_reads = (starts + np.arange(int(nd.sum()))).tolist()
    mask_in = [-(1 << 40)] * r0          # cycles from which each mask counts in the level
    data_in = [-(1 << 40)] * int(nd[:r0].sum())
    # The window's first beat waits at least until the rows before it have left room in both
    # FIFOs (a jump over the reads before it, which would otherwise be stepped one by one).
    before_d, before_m = len(data_in) - dd - 1, r0 - dm - 1
    prev = max(data_reads[before_d] + 1 if before_d >= 0 else -(1 << 40),
               mask_reads[before_m] + 1 if before_m >= 0 else -(1 << 40))
    taken = []           # transposed: the window's beats, when taken
    for r in range(r0, R):
        times = []
        for b in range(bpr if r < R - 1 else beat % bpr + 1):
            x = first_x + r * bpr + b
            unthrottled = (-(1 << 40) if ahead is None else
                           ahead + x + x // 3 - first_x - first_x // 3 if transposed else
                           ahead + x - first_x)
            c = max(unthrottled, prev + 1)
            if transposed and len(taken) >= 3:
                # The transposer reads a beat once at most two are out of its banks and not
                # taken: three cycles after the beat three before it was taken, it is out.
                c = max(c, taken[-3] + 4)
            while True:
                gone_d = bisect.bisect_right(data_reads, c - 2)
                gone_m = bisect.bisect_right(mask_reads, c - 2)
                if (bisect.bisect_right(data_in, c - 1) - gone_d <= dd
                        and bisect.bisect_right(mask_in, c - 1) - gone_m <= dm):
                    break
                # Blocked: the levels fall only as the loader reads; jump to the next read.
                nxt = min(data_reads[gone_d] if gone_d < len(data_reads) else 1 << 40,
                          mask_reads[gone_m] if gone_m < len(mask_reads) else 1 << 40)
                c = max(c + 1, nxt + 2)
            times.append(c)
            taken.append(c)
            prev = c
        if r < R - 1:
            for j in makers[r]:
                bisect.insort(data_in, times[j] + wd1)
            mask_in.append(times[-1] + wm1)
    return prev


def _geometry(op, M, K, N, t):
    Mo, Ki, No = dims(op, M, K, N)
    return Mo, Ki, No, _parts(Mo, t.acc_rows), _parts(Ki, t.k), _parts(No, t.n)


def _row_write_cycles(nv, t):
    """Cycles the writer spends on one result row: its words (one a cycle, the padding
    columns' words dropped in a cycle each) or its bursts' addresses (two cycles each)."""
    kept = _cdiv(nv * t.acc_width // 8, t.bus_bytes)
    total = t.n // t.lanes * t.words_per_c_beat
    return max(total, 2 * _cdiv(kept, t.max_burst)), kept, total


def _first_bursts(rows, words, t):
    return rows * _cdiv(words, t.max_burst) if words else 0


def _read_after_bursts(rows, words, t):
    """Step 0: the first beat of a read that follows ``rows`` row reads of ``words`` words
    (their bursts' addresses, two cycles each, go out first)."""
    return FIRST_AR + 2 * _first_bursts(rows, words, t) + 1 + t.read_latency + READ_SLICE


def _xt_fill(mv, t):
    """OP 2: beats of a step's ``Xᵀ`` block into the transposer: ``k`` rows of the words of
    the tile's ``mv`` result rows (the transposer reads out only those columns)."""
    return t.k * _cdiv(mv, t.lanes)


def _b_span(op, t):
    """Cycles of one ``B`` chunk into the GEMM: one beat a cycle, OP 1's out of the
    transposer."""
    return _transposed_span(t.b_beats) if op == 1 else t.b_beats


@dataclass
class _Rows:
    """One ``A`` block's rows as the GEMM takes them, in one mode: what their schedule depends
    on besides when they arrive and where the GEMM stands (:func:`_run_rows`)."""

    nnz: list          # nonzeros of each row (dense: k)
    first: list        # the stepped rows' (per_group, load, rest, floor_after, arrive, empty)
    r0: int            # rows stepped; the rest follow the closed form
    cum: np.ndarray    # rows r0.. : their last pass after row r0-1's (closed form)
    arrive: np.ndarray  # each row's mask at the loader, from the tile's first A beat, unthrottled
    load: np.ndarray   # each row's loader cycles
    floor_after: np.ndarray
    beats: np.ndarray  # C beats of each row's last output entry
    gap: np.ndarray    # cycles between the last passes of a row's column groups
    passes: int        # issue cycles
    sparse: bool
    t: object                 # the EngineTiming
    beat_nnz: object = None   # each row's nonzeros per input beat, where known
    _makers: list = field(default=None, repr=False)

    @property
    def makers(self):
        """Each row's data beats' making input beats (:func:`_makers`), worked out when first
        asked for (only where the admission is stepped)."""
        if self._makers is None:
            self._makers = _makers(self.nnz, self.t, self.sparse, self.beat_nnz)
        return self._makers

    @property
    def rows(self):
        return len(self.nnz)


def _block_rows(nnz, t, sparse, transposed, beat_nnz=None):
    """:class:`_Rows` of a block whose rows have ``nnz`` nonzeros (golden/gemm.py's rules),
    and ``beat_nnz`` per input beat if known."""
    g = t.gemm
    nnz = np.asarray(nnz, dtype=np.int64)
    R, L, groups = nnz.size, t.lanes, g.col_groups
    if not sparse:
        nnz = np.full(R, t.k, dtype=np.int64)
    per_group = np.maximum(nnz, 1) if g.k_par == 1 else np.maximum(_cdiv(nnz, g.k_par), 1)
    passes = np.where(nnz == 0, 1, per_group * groups)
    load = np.where(nnz == 0, 1, 1 + g.data_gap + _cdiv(nnz, L))
    beats = np.where(nnz == 0, t.n // L, g.n_par // L)
    floor_after = g.issue_to_push + 1 + beats
    if g.fifo_depth > 1:
        floor_after = np.maximum(beats, _cdiv(floor_after, g.fifo_depth))
    arrive = _input_times(R, t, transposed) + t.mask_latency
    bpr = t.beats_per_row
    input_cycles = _cdiv(4 * bpr, 3) if transposed else bpr
    ahead = int(floor_after.min()) >= max(1 + g.data_gap + bpr, input_cycles)
    r0 = min(R, START_ROWS) if ahead else R
    rest = (groups - 1) * np.maximum(per_group, floor_after)
    prev_floor = floor_after[r0 - 1:R - 1]
    inc = np.where(nnz[r0:] == 0, np.maximum(1, prev_floor),
                   np.maximum(per_group[r0:], prev_floor) + rest[r0:])
    first = list(zip(*(x[:r0].tolist() for x in (per_group, load, rest, floor_after, arrive,
                                                   nnz == 0))))
    gap = np.where(nnz == 0, 0, np.maximum(per_group, floor_after))
    return _Rows(nnz.tolist(), first, r0, np.cumsum(inc), arrive, load, floor_after, beats,
                 gap, int(passes.sum()), sparse, t, beat_nnz)


#: Where the GEMM stands before a tile: the last two rows' last passes, the loader's last
#: load's end and the last row's credit floor (an idle GEMM: none).
_IDLE = (-(1 << 40), -(1 << 40), -(1 << 40), 0)


def _run_rows(rows, a_first, state):
    """The block's rows after the GEMM's ``state`` (:data:`_IDLE`), its first ``A`` beat at
    ``a_first``: each row's last pass ``X`` and mask taken ``LS`` (absolute), and the state
    after them. The first rows stepped (the loader: its two slots and a row's mask, gap and
    data; a pass per nonzero; the output's credit), the rest by the closed form."""
    x1, x2, le_prev, fl_prev = state
    R, r0 = rows.rows, rows.r0
    X = np.empty(R, dtype=np.int64)
    LS = np.empty(R, dtype=np.int64)
    for i, (pg, load, rest, floor, arrive, empty) in enumerate(rows.first):
        ls = max(a_first + arrive, le_prev + 1, x2 + 1)
        le = ls + load - 1
        first = max(le + 1, x1 + 1)
        credit = x1 + fl_prev
        x = max(first, credit) if empty else max(first + pg - 1, credit) + rest
        X[i], LS[i] = x, ls
        x2, x1, le_prev, fl_prev = x1, x, le, floor
    if R > r0:
        X[r0:] = X[r0 - 1] + rows.cum
        # The loader takes row i's mask as soon as row i-2 has left its slot.
        LS[r0:] = np.maximum(a_first + rows.arrive[r0:], X[r0 - 2:R - 2] + 1)
        x1, x2 = int(X[-1]), int(X[-2])
        le_prev, fl_prev = int(LS[-1] + rows.load[-1] - 1), int(rows.floor_after[-1])
    return X, LS, (x1, x2, le_prev, fl_prev)


def _first_step_times(op, mvs, kvs, nvs, t):
    """Step 0: ``(b_first, a_ready)``, its first ``B`` beat and the earliest its reads let
    its first ``A`` beat come (it also follows the ``B`` chunk's last beat)."""
    L = t.lanes
    start_read = FIRST_AR + t.read_latency + READ_SLICE
    if op == 0:          # the B chunk's bursts, then the A tile's
        return start_read, _read_after_bursts(kvs[0], _cdiv(nvs[0], L), t)
    if op == 1:          # Wᵀ: the chunk goes into the transposer first
        return (start_read + t.b_beats - 1 + TRANSPOSE_TURN,
                _read_after_bursts(min(nvs[0], t.n), _cdiv(kvs[0], L), t))
    # OP 2 reads each step's Xᵀ block (into the transposer's free block) before its B chunk:
    # step 0 starts with it.
    fill_end = start_read + _xt_fill(mvs[0], t) - 1
    return (max(fill_end + 1, _read_after_bursts(kvs[0], _cdiv(mvs[0], L), t)),
            fill_end + TRANSPOSE_TURN)


def _output_entries(X, gap, t):
    """The GEMM's output entries of a tile's rows, in order: a row's column groups (an empty
    row: one zero token of ``n/lanes`` beats), group ``j``'s last pass ``(groups-1-j)*gap``
    before the row's last pass ``X``. Returns ``(last_pass, beats)``, ``(rows, groups)``
    arrays (an empty row's first ``groups-1`` entries have no beats) and each entry's beats
    leave ``issue_to_push + 1`` cycles after its last pass, one a cycle."""
    g = t.gemm
    groups = g.col_groups
    X, gap = np.asarray(X, dtype=np.int64), np.asarray(gap, dtype=np.int64)
    last_pass = X[:, None] - gap[:, None] * np.arange(groups - 1, -1, -1)[None, :]
    zero = gap == 0 if groups > 1 else np.zeros(X.size, dtype=bool)
    beats = np.where(zero[:, None], 0, np.full((X.size, groups), g.n_par // t.lanes))
    beats[:, -1] = np.where(zero, t.n // t.lanes, g.n_par // t.lanes)
    return last_pass, beats


def _results_fifo_stall(X, gap, a_first, written, t):
    """A row group's results into the ``results`` FIFO (one row group deep): its ``C`` beat
    ``j`` waits for entry ``entries + j - E`` of the previous group to have left, and the
    GEMM's output entries (:func:`_output_entries`) then wait for their credit. ``X``, ``gap``:
    each row's last pass in the group's last step, from ``a_first``, and the cycles between its
    column groups' last passes; ``written``: the previous group's ``(entry free times,
    entries)``, or None. Returns ``(stall, ready, delay)``: cycles the group's last ``C`` beat
    is delayed, each ``C`` beat's cycle, ``(rows, beats a row)`` from ``a_first``, and each
    row's last pass's delay (the rows after it follow it)."""
    g = t.gemm
    beats_row = t.n // t.lanes
    itp = g.issue_to_push
    last_pass, nb = _output_entries(X, gap, t)
    has = nb.reshape(-1) > 0
    e_pass, e_beats = last_pass.reshape(-1)[has], nb.reshape(-1)[has]     # entries in order
    e_of = np.repeat(np.arange(e_pass.size), e_beats)                     # each beat's entry
    j = np.arange(e_of.size) - np.repeat(np.cumsum(e_beats) - e_beats, e_beats)
    ready = (e_pass[e_of] + itp + 1 + j).reshape(X.size, beats_row)
    none = np.zeros(X.size, dtype=np.int64)
    if written is None:
        return 0, ready, none
    free, entries = written
    idx = entries + np.arange(X.size * beats_row) - t.acc_rows * beats_row
    if not (idx >= 0).any():
        return 0, ready, none
    bound = np.where(idx >= 0, free[np.clip(idx, 0, None)] - a_first, -(1 << 40))
    # The last pass each entry would need for its beats not to wait; the next entry's last
    # pass follows the entry's last beat (its credit).
    s_entry = np.full(e_pass.size, -(1 << 40))
    np.maximum.at(s_entry, e_of, bound - itp - 1 - j)
    floor = itp + 1 + e_beats
    x_last = int(e_pass[-1])
    if e_pass.size > 1:
        suffix = e_pass[-1] - e_pass[1:]      # increments after entry e + 1
        x_last = max(x_last, int((s_entry[:-1] + floor[:-1] + suffix).max()))
    stall = max(0, max(x_last, int(s_entry[-1])) - int(e_pass[-1]))
    bound = bound.reshape(X.size, beats_row)
    # Each entry's delay: its own wait, or an earlier entry's carried on by the credits.
    carried = np.maximum.accumulate(np.concatenate([[-(1 << 40)], s_entry[:-1] + floor[:-1]
                                                    - e_pass[1:]]))
    delay = np.maximum(0, np.maximum(s_entry - e_pass, carried))
    row_last = np.cumsum(has.reshape(X.size, -1).sum(axis=1)) - 1      # a row's last entry
    return stall, (np.maximum(ready, bound) if stall else ready), delay[row_last]


def _writer_starts(ready, pace, busy_until):
    """The writer, in order: the cycle each ``C`` beat's first word goes out, ``pace`` cycles a
    beat (its words, one a cycle, or its row's bursts' addresses when they take longer), not
    before the beat is ready nor before ``busy_until`` has passed."""
    idx = np.arange(ready.size, dtype=np.int64)
    return np.maximum(np.maximum.accumulate(ready - idx * pace), busy_until + 1) + idx * pace


def _schedule(op, steps, t, b_first0, a_first0, a_in0):
    """The steps in order, overlapped (docs/engine.md, "Cycle model"). ``steps``: each step's
    :class:`_Rows`, result columns and whether it ends its row group. Returns per step (int64
    arrays, cycles after the checks) ``b_first``, ``b_last``, ``a_first``, ``c_last``,
    ``stall`` (the results FIFO's delay of its last ``C`` beat) and ``exposed`` (cycles its
    first row waited beyond the GEMM's pace: its ``B`` chunk or its input), and the writer's
    last word and last kept word."""
    T = len(steps)
    out = {name: np.zeros(T, dtype=np.int64) for name in ("b_first", "b_last", "a_first",
                                                            "c_last", "stall", "exposed")}
    b_first, b_last, a_first, c_last = (out[n] for n in ("b_first", "b_last", "a_first",
                                                          "c_last"))
    b_span = _b_span(op, t)
    bpr, itp = t.beats_per_row, t.gemm.issue_to_push
    latency = A_QUEUE_LATENCY if op == 0 else 0    # OP 1's B comes later than its A
    beats_row, wpc = t.n // t.lanes, t.words_per_c_beat
    state = _IDLE
    written = None               # entry free times, entries of the previous row group's results
    busy_until = -(1 << 40)
    writer_end = None
    prev = None                  # the step before: (rows, LS, A beats, A span)
    w_end = b_first0 - TRANSPOSE_TURN if op == 1 else b_first0 - 1   # OP 1's Wᵀ, OP 2's Xᵀ
    w_ends = [w_end]
    freed_at = []                # OP 2: each tile's transposer block free again
    a_in = a_in0                 # OP 0, 1: A tile s's first beat into the A queue
    run_start = run = 0          # OP 1: the Wᵀ read-out's cadence: its start, beats since
    for s, (rows, nv, ends_group) in enumerate(steps):
        a_beats = rows.rows * bpr
        a_span = _transposed_span(a_beats) if op == 2 else a_beats
        if s == 0:
            b_first[s] = b_first0
        else:
            p_rows, p_ls, p_beats, p_span = prev
            # The reader's R stream, in order: OP 0 chunk s after A tile s-1; OP 1 chunk s
            # into the transposer after A tile s-1, read out TRANSPOSE_TURN after; OP 2 Xᵀ
            # block s into the transposer after chunk s-1, then chunk s. A tile's last beat
            # goes into the A queue (OP 0, 1) once the beat A_QUEUE before it has left.
            # Chunk s's weight set is free once C tile s-2 has left (s-1 with one set).
            if op == 2:
                start = b_last[s - 1] + 1
                if s >= 2:
                    # The transposer's block of tile s-2 is free once its last beat's read
                    # is issued: at most three beats out of the banks and not taken.
                    start = max(start, freed_at[s - 2])
                w_ends.append(start + _xt_fill(rows.rows, t) - 1)
                bf = w_ends[-1] + 1
            else:
                after_a = a_in + p_beats
                if p_beats >= A_QUEUE:
                    after_a = max(after_a, a_first[s - 1] + 1 + accept_time(
                        p_rows.makers, p_ls - a_first[s - 1], t, p_beats - A_QUEUE))
                if op == 1:
                    if s >= 2:  # the transposer's block of chunk s-2, read out
                        after_a = max(after_a, b_last[s - 2] + 1)
                    w_ends.append(after_a + t.b_beats - 1)
                    bf = w_ends[-1] + TRANSPOSE_TURN
                else:
                    bf = after_a
            if s >= t.weight_sets:
                bf = max(bf, c_last[s - t.weight_sets] + 1)
            b_first[s] = bf
        b_last[s] = b_first[s] + b_span - 1
        if op == 1:
            # Wᵀ chunks leave the transposer three beats in four; a chunk ready before the one
            # before it has left follows it in the same cadence.
            if s and b_first[s] < run_start + run + run // 3:
                b_first[s] = run_start + run + run // 3
                run += t.b_beats
                b_last[s] = run_start + _transposed_span(run) - 1
            else:
                run_start, run = b_first[s], t.b_beats
        if s:
            # When A tile s's first beat goes into the A queue: after chunk s (OP 0), after
            # chunk s's Wᵀ into the transposer (OP 1).
            a_in = b_last[s] + 1 if op == 0 else w_ends[-1] + 1
        if s == 0:
            a_first[s] = a_first0
        else:
            a_first[s] = max(a_first[s - 1] + prev[3], b_last[s] + 1 + latency)
            if op == 2:
                a_first[s] = max(a_first[s], w_ends[-1] + TRANSPOSE_TURN)
            if rows.r0 == rows.rows and rows.rows > 1:
                # Rows that wait for their input (every row stepped): the tile's first beat
                # follows the last of the tile before, which the GEMM may have held back.
                p_rows, p_ls = prev[0], prev[1]
                a_first[s] = max(a_first[s], a_first[s - 1] + 1 + accept_time(
                    p_rows.makers, p_ls - a_first[s - 1], t, p_rows.rows * bpr - 1,
                    transposed=op == 2))
        x_before = state[0]
        X, LS, state = _run_rows(rows, int(a_first[s]), state)
        if op == 2:
            freed_at.append(_block_freed(rows, LS, a_first[s], t))
        if ends_group:
            row_cycles, kept, _ = _row_write_cycles(nv, t)
            pace = _cdiv(row_cycles, beats_row)
            stall, ready, delay = _results_fifo_stall(X, rows.gap, 0, written, t)
            if stall or delay.any():
                X = X + delay
                x1, x2, le_prev, fl_prev = state
                state = (int(X[-1]), int(X[-2]) if X.size > 1 else x2, le_prev, fl_prev)
            out["stall"][s] = stall
            start = _writer_starts((ready + ACC_TO_WRITER).reshape(-1), pace, busy_until)
            busy_until = int(start[-1] + wpc - 1)
            written = (start + wpc, start.size)
            # The last row's last kept word: in its beat ``b`` (a row's beats need not follow
            # one another: its column groups leave the GEMM apart).
            b = (kept - 1) // wpc
            writer_end = (busy_until, int(start[b - beats_row]) - b * pace + kept - 1)
        c_last[s] = X[-1] + itp + rows.beats[-1]
        if s:
            first_inc = _first_increment(rows, prev[0])
            out["exposed"][s] = max(0, int(X[0]) - x_before - first_inc)
        prev = (rows, LS, a_beats, a_span)
    return out, writer_end


def _block_freed(rows, LS, a_first, t):
    """OP 2: the cycle the transposer's block of a tile is free again: its last beat's read
    issued, at most three beats before the core takes the last (two cycles after the core
    took the beat three before it, or its unthrottled time)."""
    last = rows.rows * t.beats_per_row - 1
    if last < 3:
        return a_first + last + last // 3 - 2
    return a_first + 2 + accept_time(rows.makers, LS - a_first, t, last - 3, transposed=True)


def _first_increment(rows, before):
    """A tile's first row's last pass after the last row before it, at the GEMM's pace."""
    floor_prev = int(before.floor_after[-1])
    pg, _, rest, _, _, empty = rows.first[0]
    return max(1, floor_prev) if empty else max(pg, floor_prev) + rest


def layer_cycles_nnz(op, nnz, M, K, N, t, sparse=False, *, beat_nnz=None, per_step=False):
    """:func:`layer_cycles` from the streamed operand's nonzeros per row and inner chunk
    (``nnz``: ``(Mo, ceil(Ki/k))``, :func:`row_nnz`; only their counts matter to the model)
    and each tile's mode (``sparse``: a bool, or one per tile in the engine's order).
    ``beat_nnz``: the nonzeros per input beat (:func:`row_beat_nnz`), where they are known;
    without them a sparse row's nonzeros are taken as spread evenly over its beats (it matters
    only where the compactor's admission sets a bound). ``per_step``: also ``"per_step"``,
    each step's first and last ``B`` beat, first ``A`` beat and last ``C`` beat (int64
    arrays, cycles from START: the first cycle ``LAYER_CYCLES`` counts is 0)."""
    Mo, Ki, No, mvs, kvs, nvs = _geometry(op, M, K, N, t)
    nnz = np.asarray(nnz, dtype=np.int64)
    if nnz.shape != (Mo, len(kvs)):
        raise ValueError(f"nnz must be (Mo, ceil(Ki/k)) = {(Mo, len(kvs))}, not {nnz.shape}")
    n_nc, n_mt, n_kc = len(nvs), len(mvs), len(kvs)
    T = n_nc * n_mt * n_kc
    sparse = sparse if t.sparse else False   # the dense-only twin runs every tile dense
    modes = np.broadcast_to(np.asarray(sparse, dtype=bool), (T,)).reshape(n_nc, n_mt, n_kc)
    blocks = {}

    def block(mode, mt, kc):
        key = (mode, mt, kc) if mode else (mode, mt)      # dense blocks of a row group: alike
        if key not in blocks:
            span = slice(mt * t.acc_rows, mt * t.acc_rows + mvs[mt])
            blocks[key] = _block_rows(nnz[span, kc], t, mode, op == 2,
                                      None if beat_nnz is None else beat_nnz[span, kc])
        return blocks[key]

    # The steps in the engine's order (result column chunk, row group, inner chunk).
    steps = [(block(bool(modes[nc, mt, kc]), mt, kc), nvs[nc], kc == n_kc - 1)
             for nc in range(n_nc) for mt in range(n_mt) for kc in range(n_kc)]
    b_span = _b_span(op, t)
    b_first0, a_ready0 = _first_step_times(op, mvs, kvs, nvs, t)
    # OP 0's A tile follows its B chunk through the A queue; OP 1's is in the queue before
    # its Wᵀ comes out of the transposer; OP 2's comes out of the transposer.
    a_first0 = max(b_first0 + b_span + (A_QUEUE_LATENCY if op == 0 else 0),
                   a_ready0 + (A_QUEUE_LATENCY if op != 2 else 0))
    times, (end_words, end_kept) = _schedule(op, steps, t, b_first0, a_first0,
                                             max(b_first0 + b_span, a_ready0) if op == 0
                                             else max(b_first0 - TRANSPOSE_TURN + 1, a_ready0))
    c_last = times["c_last"]
    layer = max(end_words + LAST_WORD_TO_DONE, end_kept + WRITE_RESPONSE)
    exposed = int(times["exposed"].sum())
    tiles = int(c_last[-1] - a_first0 + 1) - exposed
    passes = sum(rows.passes for rows, _, _ in steps)
    # The exposed waits of a tile's first row: for its B chunk (OP 0, 1) or its Xᵀ block
    # (OP 2; counted in a_wait).
    out = {"layer_cycles": int(layer) + CHECK_CYCLES, "checks": CHECK_CYCLES, "steps": T,
           "tiles_sparse": int(modes.sum()), "tiles_dense": int(T - modes.sum()),
           "start": int(b_first0), "b_load": b_span + (exposed if op != 2 else 0),
           "a_wait": a_first0 - (b_first0 + b_span) + (exposed if op == 2 else 0),
           "tile": tiles, "tile_passes": passes, "tile_other": tiles - passes,
           "results_stall": int(times["stall"].sum()), "turnaround": 0,
           "drain": int(layer - c_last[-1] - 1)}
    out.update(words(op, M, K, N, t))
    if per_step:
        out["per_step"] = {name: times[name] + CHECK_CYCLES
                           for name in ("b_first", "b_last", "a_first", "c_last")}
    return out


def layer_cycles(op, a_matrix, M, K, N, params, *, mode=None, modes_per_tile=None, **kwargs):
    """Predicted ``LAYER_CYCLES`` of one layer (zero-wait memory) and its breakdown.

    ``a_matrix``: the ``A`` operand as stored at ``A_ADDR`` (X, dY, X for OP 0, 1, 2; raw
    elements or a boolean mask); ``params``: the engine's parameters (a dict, or an
    :class:`EngineTiming`); each tile dense or sparse by ``mode`` (1 dense, 2 sparse) or
    ``modes_per_tile`` (bools, the engine's tile order: what the density table decides in
    auto mode). Returns a dict: ``layer_cycles`` (the register: START to DONE), the cycles of
    each part (``checks``: the descriptor's, :data:`CHECK_CYCLES`; ``start``: then to the
    first ``B`` beat (OP 2: after step 0's ``Xᵀ`` block);
    ``b_load``; ``a_wait``: ``B``'s last beat to ``A``'s first beyond one cycle, and (OP 2)
    the waits of a ``B`` chunk for its step's ``Xᵀ`` block beyond its turn-around; ``tile``:
    first ``A`` beat to last ``C`` beat, of which ``tile_passes`` GEMM issue cycles and
    ``tile_other`` the pipeline's fill, the output's pace and the results FIFO's waits
    (``results_stall``); ``turnaround``: last ``C`` beat to the next ``B`` beat beyond one
    cycle; ``drain``: the last ``C`` beat to the end), which add up to
    ``layer_cycles``, and the words and bytes of each operand (exact). ``per_step=True``: also
    each step's times (:func:`layer_cycles_nnz`)."""
    t = params if isinstance(params, EngineTiming) else EngineTiming.of(params)
    if modes_per_tile is not None:
        sparse = np.asarray(modes_per_tile, dtype=bool)
    elif mode in (None, 1, 3, "dense"):
        sparse = False
    elif mode in (2, "sparse"):
        sparse = True
    else:
        raise ValueError(f"mode must be 1 (dense) or 2 (sparse), or give modes_per_tile, "
                         f"not {mode!r}")
    return layer_cycles_nnz(op, row_nnz(op, a_matrix, t), M, K, N, t, sparse,
                            beat_nnz=row_beat_nnz(op, a_matrix, t), **kwargs)


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
