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

Cycles: one step ``s`` (``B`` chunk, ``A`` tile, ``C`` tile) after another at the core
    B load        ``k*n/lanes`` beats into the GEMM, one a cycle from memory (OP 0, 2); OP 1's
                  ``Wᵀ`` comes out of the transposer, three beats every four cycles:
                  ``X + (X-1)//3`` cycles for ``X`` beats.
    start         ``b_first(0)`` = :data:`FIRST_AR` + the memory's read latency + the reader's
                  :data:`READ_SLICE` (OP 0); OP 1 first writes the chunk into the
                  transposer (``k*n/lanes`` beats) and reads it out :data:`TRANSPOSE_TURN`
                  cycles after its last write; OP 2 first fills the transposer with step 0's
                  ``Xᵀ`` block (``fill = k*acc_rows/lanes`` beats, whatever ``mv``: the wgrad
                  step reads its A tile before its B chunk).
    turn-around   ``b_first(s) = c_last(s-1) + 1``: B chunk ``s`` is offered the cycle after
                  tile ``s-1``'s last ``C`` beat (counted, registered). OP 1: not before the
                  transposer holds it: ``a_last(s-1) + k*n/lanes + TRANSPOSE_TURN`` (the reader
                  reaches chunk ``s`` only after tile ``s-1``'s last ``A`` beat). OP 2: not
                  before step ``s``'s ``Xᵀ`` block is in: ``b_last(s-1) + fill + 1`` (the
                  reader writes it into the transposer's free block right after chunk
                  ``s-1``, while tile ``s-1`` computes; counted in ``a_wait``).
    A start       ``a_first(s) = b_last(s) + 1``. Step 0 may wait for its reads: the reader's
                  address side spends 2 cycles a burst.
    tile          ``a_first`` to the last ``C`` beat: the rows' beats at one a cycle (OP 2:
                  three in four, out of the transposer), each row's mask through the compactor
                  (:attr:`EngineTiming.mask_latency`), then golden/gemm.py's rules: the
                  loader (mask, gap, ``ceil(nnz/lanes)`` data beats), one pass per nonzero
                  (dense row: ``k``; an empty row one pass), and the output: with the
                  broadcast datapath's single output entry a row's result waits for the last
                  one's credit, ``issue_to_push + 1 + n_par/lanes`` cycles after its last pass.
                  The first :data:`START_ROWS` rows are stepped exactly (their masks arrive as
                  the input streams); from then on each row costs ``max(passes, that credit
                  floor)``: the next row's load and its input beats stay ahead whenever the
                  floor is at least a row's load (``2 + k/lanes``) and its beats (at the
                  defaults 15 against 10 and 8; in the small configuration 9 against 6 and
                  4); where it is not (``k = 128`` at 8 lanes: 15 against 18 and 16) every
                  row is stepped. The last ``C`` beat leaves ``issue_to_push + n_par/lanes``
                  after the last row's last pass.
    results       the last inner chunk's ``C`` beats go through the accumulator into the
                  ``results`` FIFO (one row group deep, readable :data:`ACC_TO_WRITER` cycles
                  after the beat) and out to the writer, one bus word a cycle
                  (``lanes*acc_width/data_width`` words a ``C`` beat, the padding columns'
                  words dropped in a cycle each). With several column groups (``n > n_par``)
                  a row's beats leave the GEMM an output entry (``n_par/lanes`` beats) at a
                  time, each ``issue_to_push + 1`` cycles after its group's last pass: the
                  first groups' words go out while the row's later groups compute, and each
                  entry waits for its own credit. The next row group's last chunk can put a
                  beat in only while the FIFO has room: at low density, when a row group is one
                  inner chunk, the writer sets the pace (``n*acc_width/data_width`` cycles a
                  row against the GEMM's credit floor).
    drain         after the last ``C`` beat, the writer's backlog and the last write's
                  response (:data:`WRITE_RESPONSE` cycles), then ``BUSY`` falls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .gemm import GemmTiming

__all__ = ["EngineTiming", "CHECK_CYCLES", "FIRST_AR", "READ_SLICE", "TRANSPOSE_TURN",
           "ACC_TO_WRITER", "WRITE_RESPONSE", "LAST_WORD_TO_DONE", "dims", "words", "row_nnz",
           "layer_cycles", "layer_cycles_nnz", "tile_profile", "write_layers", "read_layers"]

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
#: the GEMM and the accumulator, the accumulator's two stages, the results FIFO, its output
#: register).
ACC_TO_WRITER = 6
#: The last write's last W beat to ``BUSY`` falling (the response, then the idle check,
#: registered).
WRITE_RESPONSE = 5
#: The writer's last word taken to ``BUSY`` falling (its idle, then the idle check, registered).
LAST_WORD_TO_DONE = 3
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


def row_nnz(op, a_matrix, t):
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
    (tiles, rows) the ``C`` beats of each row's last output entry (``n_par/lanes``; an empty
    row's zero token: ``n/lanes``), ``gap`` (tiles, rows) cycles between the last passes of a
    row's column groups (0 for an empty row: one entry), ``passes`` (tiles,) issue cycles."""
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
    # The closed form after them holds while every row's credit floor covers the longest load
    # and the input's cycles a row (the loader and the input then stay ahead of the passes);
    # where they do not (k/lanes over the floor: k = 128 at 8 lanes, 16 beats a row against
    # 15), every row is stepped.
    bpr = t.beats_per_row
    input_cycles = _cdiv(4 * bpr, 3) if transposed else bpr
    ahead = int(floor_after.min()) >= max(1 + g.data_gap + bpr, input_cycles)
    r0 = min(R, START_ROWS) if ahead else R
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
    # A row's column groups end one after another, each its passes or its credit after the
    # last: group j's last pass is X - (groups-1-j) * gap (an empty row: one entry, gap 0).
    gap = np.where(nnz == 0, 0, np.maximum(per_group, floor_after))
    return {"X": X, "load": LS, "c_last": c_last, "beats": beats, "gap": gap,
            "passes": passes.sum(axis=1)}


#: The compactor's input admission (hw/compactor.py ``room``), as the model steps it: a
#: row's data beats and its mask count in their FIFO's level this many cycles after the input
#: beat that makes them (short pipeline, deep pipeline), and a data beat leaves it this many
#: cycles after the loader takes its row's mask.
_ADMIT = {False: (1, 1, 3), True: (1, 4, 3)}
#: Rows of a tile's end the admission is stepped over (the rows before are taken as buffered).
ADMIT_ROWS = 16
#: Tiles per layer whose last ``A`` beat is stepped (OP 1 needs it); the rest take the mean.
ADMIT_TILES = 256


def _makers(nnz, bpr, lanes, dense):
    """Input beat (of its row) that makes each data beat: uniform nonzeros assumed."""
    if dense:
        return list(range(bpr))
    if nnz == 0:
        return []
    out = []
    for j in range(_cdiv(nnz, lanes)):
        need = (j + 1) * lanes
        out.append(bpr - 1 if need >= nnz else min(_cdiv(need * bpr, nnz) - 1, bpr - 1))
    return out


def last_a_beat(nnz, load, t, *, sparse=True, transposed=False):
    """Cycle (from the tile's first ``A`` beat) the tile's last ``A`` beat enters the core: the
    input runs at the reader's (or the transposer's) rate until the compactor's FIFOs are at
    their thresholds (``room``: data FIFO at most ``k/lanes + 4`` beats, 2 below 8 lanes; mask
    FIFO at most 5 rows, in the cycle before), then as the loader (``load``: each row's mask
    taken, from :func:`tile_profile`) empties them. ``nnz``: the tile's rows' nonzeros."""
    import bisect
    L, bpr = t.lanes, t.beats_per_row
    deep = L >= 8
    wd, wm, rd = _ADMIT[deep]
    dd, dm = bpr + (4 if deep else 2), 5
    R = len(nnz)
    nnz = np.asarray(nnz, dtype=np.int64)
    nd = np.full(R, bpr, dtype=np.int64) if not sparse else np.where(nnz == 0, 0,
                                                                          _cdiv(nnz, L))
    r0 = max(0, R - ADMIT_ROWS)
    load = np.asarray(load, dtype=np.int64)
    mask_reads = load.tolist()
    # Data beats leave in row order, each row's from rd cycles after its mask.
    starts = np.repeat(load + rd - np.concatenate([[0], np.cumsum(nd)[:-1]]), nd)
    data_reads = (starts + np.arange(int(nd.sum()))).tolist()
    mask_in = [-(1 << 40)] * r0          # cycles from which each mask counts in the level
    data_in = [-(1 << 40)] * int(nd[:r0].sum())
    prev = -(1 << 40)
    for r in range(r0, R):
        times = []
        for b in range(bpr):
            x = r * bpr + b
            c = max(x + x // 3 if transposed else x, prev + 1)
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
            prev = c
        for j in _makers(int(nnz[r]), bpr, L, not sparse):
            bisect.insort(data_in, times[j] + wd + 1)
        mask_in.append(times[-1] + wm + 1)
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


def _xt_fill(t):
    """OP 2: beats of a step's ``Xᵀ`` block into the transposer (whatever its valid rows)."""
    return t.k * t.acc_rows // t.lanes


def _b_span(op, t):
    """Cycles of one ``B`` chunk into the GEMM: one beat a cycle, OP 1's out of the
    transposer."""
    return _transposed_span(t.b_beats) if op == 1 else t.b_beats


def _block_profiles(nnz, modes, mvs, t, transposed):
    """The schedule (:func:`tile_profile`) of every distinct ``A`` block in each mode a step
    runs it in, keyed ``(sparse, mt, kc)``: its last ``C`` beat, each row's last pass and mask
    taken, its issue cycles and its rows' nonzeros. ``modes``: ``(n_nc, n_mt, n_kc)`` bools."""
    prof = {}
    for mode in (False, True):
        need = modes.any(axis=0) if mode else (~modes).any(axis=0)   # (n_mt, n_kc)
        for mt, mv in enumerate(mvs):
            kcs = np.flatnonzero(need[mt])
            if not len(kcs):
                continue
            rows = nnz[mt * t.acc_rows:mt * t.acc_rows + mv, kcs].T      # (blocks, mv)
            if not mode:
                rows = rows[:1]          # dense blocks of a row group are all alike
            pr = tile_profile(rows, t, sparse=mode, transposed=transposed)
            for i, kc in enumerate(kcs):
                j = i if mode else 0
                prof[(mode, mt, kc)] = {"c_last": int(pr["c_last"][j]), "X": pr["X"][j],
                                        "gap": pr["gap"][j], "load": pr["load"][j],
                                        "passes": int(pr["passes"][j]), "nnz": rows[j]}
    return prof


def _last_a_beats(prof, mvs, t, admit_tiles):
    """OP 1: each block's last ``A`` beat (the transposer's next write waits for it), keyed as
    ``prof``. Stepped (:func:`last_a_beat`) once per row count for dense blocks (all alike) and
    for up to ``admit_tiles`` sparse ones; the rest take the mean gap to their last ``C`` beat
    of those stepped with as many rows (or, if none, of all stepped in their mode)."""
    a_last, gaps = {}, {}
    stepped = 0
    for key in sorted(prof):
        mode, mt, kc = key
        pr, same = prof[key], (mode, mvs[mt])
        if (not mode and same in gaps) or (mode and stepped >= admit_tiles):
            continue
        a_last[key] = last_a_beat(pr["nnz"], pr["load"], t, sparse=mode)
        gaps.setdefault(same, []).append(pr["c_last"] - a_last[key])
        stepped += mode
    for key in prof:
        if key not in a_last:
            mode, mt, _ = key
            gap = gaps.get((mode, mvs[mt])) or [v for (m, _), vs in gaps.items()
                                                if m == mode for v in vs]
            a_last[key] = prof[key]["c_last"] - int(round(np.mean(gap)))
    return a_last


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
    fill_end = start_read + _xt_fill(t) - 1
    return (max(fill_end + 1, _read_after_bursts(kvs[0], _cdiv(mvs[0], L), t)),
            fill_end + TRANSPOSE_TURN)


def _b_chunk_waits(op, tile_prev, a_last_prev, t):
    """Cycles ``B`` chunk ``s`` waits beyond the one-cycle turn-around, from step ``s-1``'s
    tile (first ``A`` to last ``C`` beat) and, OP 1, its last ``A`` beat (both from its first
    ``A`` beat): OP 1 until the transposer holds the chunk; OP 2 until step ``s``'s ``Xᵀ``
    block is in (its fill follows chunk ``s-1``'s last beat). Arrays or ints."""
    if op == 1:
        return np.maximum(0, a_last_prev + t.b_beats + TRANSPOSE_TURN - tile_prev - 1)
    return np.maximum(0, _xt_fill(t) - tile_prev - 1)


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
    each row's last pass in the group's last step, from ``a_first``, its first ``A`` beat, and
    the cycles between its column groups' last passes; ``written``: the previous group's
    ``(entry free times, entries)``, or None. Returns ``(stall, ready)``: cycles the group's
    last ``C`` beat is delayed, and each ``C`` beat's cycle, ``(rows, beats a row)`` from
    ``a_first``."""
    g = t.gemm
    beats_row = t.n // t.lanes
    itp = g.issue_to_push
    last_pass, nb = _output_entries(X, gap, t)
    has = nb.reshape(-1) > 0
    e_pass, e_beats = last_pass.reshape(-1)[has], nb.reshape(-1)[has]     # entries in order
    e_of = np.repeat(np.arange(e_pass.size), e_beats)                     # each beat's entry
    j = np.arange(e_of.size) - np.repeat(np.cumsum(e_beats) - e_beats, e_beats)
    ready = (e_pass[e_of] + itp + 1 + j).reshape(X.size, beats_row)
    if written is None:
        return 0, ready
    free, entries = written
    idx = entries + np.arange(X.size * beats_row) - t.acc_rows * beats_row
    if not (idx >= 0).any():
        return 0, ready
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
    return stall, (np.maximum(ready, bound) if stall else ready)


def _writer_starts(ready, pace, busy_until):
    """The writer, in order: the cycle each ``C`` beat's first word goes out, ``pace`` cycles a
    beat (its words, one a cycle, or its row's bursts' addresses when they take longer), not
    before the beat is ready nor before ``busy_until`` has passed."""
    idx = np.arange(ready.size, dtype=np.int64)
    return np.maximum(np.maximum.accumulate(ready - idx * pace), busy_until + 1) + idx * pace


def _schedule_steps(op, tile, a_last, groups, t, a_first0):
    """The steps in order; within a row group every step adds its parts, and the group's last
    step waits for the results FIFO. ``tile``: each step's first ``A`` to last ``C`` beat
    before that wait; ``a_last`` (OP 1): its last ``A`` beat, from its first; ``groups``: per
    row group, its result columns and its last step's rows' last passes; ``a_first0``: step
    0's first ``A`` beat. Returns ``(c_last, stall, b_wait, writer_end)``: each step's last
    ``C`` beat and results FIFO stall, each ``B`` chunk's wait beyond the turn-around
    (:func:`_b_chunk_waits`), and the writer's last word and last kept word."""
    T = len(tile)
    n_kc = T // len(groups)
    beats_row, wpc = t.n // t.lanes, t.words_per_c_beat
    b_wait = np.zeros(T, dtype=np.int64)
    if op in (1, 2):
        b_wait[1:] = _b_chunk_waits(op, tile[:-1], None if a_last is None else a_last[:-1], t)
    inc = 1 + b_wait + _b_span(op, t) + tile      # c_last(s) - c_last(s-1), before the FIFO
    c_prev = a_first0 + tile[0] - inc[0]          # so that c_last(0) = c_prev + inc[0]
    c_last = np.zeros(T, dtype=np.int64)
    stall = np.zeros(T, dtype=np.int64)
    written = None               # entry free times, entries of the previous row group's results
    busy_until = -(1 << 40)
    writer_end = None
    for group, (nv, X, gap) in enumerate(groups):
        row_cycles, kept, _ = _row_write_cycles(nv, t)
        pace = _cdiv(row_cycles, beats_row)
        s0, s1 = group * n_kc, (group + 1) * n_kc
        ends = c_prev + np.cumsum(inc[s0:s1])
        c_last[s0:s1] = ends
        a_first = int(ends[-1]) - int(tile[s1 - 1])
        group_stall, ready = _results_fifo_stall(X, gap, a_first, written, t)
        c_prev = int(ends[-1]) + group_stall
        c_last[s1 - 1] = c_prev
        stall[s1 - 1] = group_stall
        start = _writer_starts((a_first + ready + ACC_TO_WRITER).reshape(-1), pace, busy_until)
        busy_until = int(start[-1] + wpc - 1)
        written = (start + wpc, start.size)
        # The last row's last kept word: in its beat ``b`` (a row's beats need not follow
        # one another: its column groups leave the GEMM apart).
        b = (kept - 1) // wpc
        writer_end = (busy_until, int(start[b - beats_row]) - b * pace + kept - 1)
        if op in (1, 2) and group_stall and s1 < T:
            # the next B chunk's wait, measured from the later C beat
            wait = _b_chunk_waits(op, int(tile[s1 - 1]) + group_stall,
                                  None if a_last is None else int(a_last[s1 - 1]), t)
            inc[s1] += wait - b_wait[s1]
            b_wait[s1] = wait
    return c_last, stall, b_wait, writer_end


def _step_times(c_last, tile, stall, b_first0, b_span):
    """Each step's first and last ``B`` beat, first ``A`` beat and last ``C`` beat, cycles
    from START, back from its last ``C`` beat."""
    a_first = c_last - tile - stall
    b_last = a_first - 1
    b_last[0] = b_first0 + b_span - 1
    times = {"b_first": b_last - b_span + 1, "b_last": b_last, "a_first": a_first,
             "c_last": c_last}
    return {name: v + CHECK_CYCLES for name, v in times.items()}


def layer_cycles_nnz(op, nnz, M, K, N, t, sparse=False, *, admit_tiles=ADMIT_TILES,
                     per_step=False):
    """:func:`layer_cycles` from the streamed operand's nonzeros per row and inner chunk
    (``nnz``: ``(Mo, ceil(Ki/k))``, :func:`row_nnz`; only their counts matter to the model)
    and each tile's mode (``sparse``: a bool, or one per tile in the engine's order).
    ``per_step``: also ``"per_step"``, each step's first and last ``B`` beat, first ``A``
    beat and last ``C`` beat (int64 arrays, cycles from START: the first cycle
    ``LAYER_CYCLES`` counts is 0)."""
    Mo, Ki, No, mvs, kvs, nvs = _geometry(op, M, K, N, t)
    nnz = np.asarray(nnz, dtype=np.int64)
    if nnz.shape != (Mo, len(kvs)):
        raise ValueError(f"nnz must be (Mo, ceil(Ki/k)) = {(Mo, len(kvs))}, not {nnz.shape}")
    n_nc, n_mt, n_kc = len(nvs), len(mvs), len(kvs)
    T = n_nc * n_mt * n_kc
    sparse = sparse if t.sparse else False   # the dense-only twin runs every tile dense
    modes = np.broadcast_to(np.asarray(sparse, dtype=bool), (T,)).reshape(n_nc, n_mt, n_kc)
    prof = _block_profiles(nnz, modes, mvs, t, transposed=op == 2)
    # The steps in the engine's order (result column chunk, row group, inner chunk).
    keys = [(bool(modes[nc, mt, kc]), mt, kc) for nc in range(n_nc) for mt in range(n_mt)
            for kc in range(n_kc)]
    tile = np.array([prof[key]["c_last"] for key in keys], dtype=np.int64)
    a_last = None
    if op == 1:
        a_last_of = _last_a_beats(prof, mvs, t, admit_tiles)
        a_last = np.array([a_last_of[key] for key in keys], dtype=np.int64)
    b_span = _b_span(op, t)
    b_first0, a_ready0 = _first_step_times(op, mvs, kvs, nvs, t)
    a_first0 = max(b_first0 + b_span, a_ready0)
    groups = [(nvs[s // (n_mt * n_kc)], prof[keys[s]]["X"], prof[keys[s]]["gap"])
              for s in range(n_kc - 1, T, n_kc)]
    c_last, stall, b_wait, (end_words, end_kept) = _schedule_steps(op, tile, a_last, groups, t,
                                                                   a_first0)
    layer = max(end_words + LAST_WORD_TO_DONE, end_kept + WRITE_RESPONSE)
    stalls = int(stall.sum())
    tiles = int((tile + 1).sum()) + stalls
    passes = sum(prof[key]["passes"] for key in keys)
    # A B chunk's wait for its Xᵀ block (OP 2) counts in a_wait, for the transposer (OP 1) in
    # the turn-around.
    out = {"layer_cycles": int(layer) + CHECK_CYCLES, "checks": CHECK_CYCLES, "steps": T,
           "tiles_sparse": int(modes.sum()), "tiles_dense": int(T - modes.sum()),
           "start": int(b_first0), "b_load": T * b_span,
           "a_wait": a_first0 - (b_first0 + b_span) + (int(b_wait.sum()) if op == 2 else 0),
           "tile": tiles, "tile_passes": passes, "tile_other": tiles - passes,
           "results_stall": stalls, "turnaround": int(b_wait.sum()) if op == 1 else 0,
           "drain": int(layer - c_last[-1] - 1)}
    out.update(words(op, M, K, N, t))
    if per_step:
        out["per_step"] = _step_times(c_last, tile, stall, b_first0, b_span)
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
    return layer_cycles_nnz(op, row_nnz(op, a_matrix, t), M, K, N, t, sparse, **kwargs)


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
