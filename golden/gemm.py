"""Reference model of the tile sparse GEMM (docs/interfaces.md#gemm): result and cycles.

Result (from docs/interfaces.md#gemm alone)
    ``C = A · B`` with ``A`` (M×K) and ``B`` (K×N) raw ``width``-bit elements, read as two's
    complement when ``signed`` and as unsigned otherwise; products and sums are exact and ``C``
    is reduced modulo ``2**acc_width`` (two's-complement wrap), returned as raw ``acc_width``-bit
    patterns. :func:`gemm` is that; :func:`c_beats` packs it as ``m_axis_c`` carries it.

Cycles (from docs/gemm.md, "Cycle model")
    The datapath's timing follows from a few rules written down in the design document; this
    module steps those rules cycle by cycle from the row masks alone (values never matter) with
    every input always valid and the output always ready. :func:`row_passes` is the per-row
    compute cost (issue cycles, including bank-conflict cycles); :func:`simulate` runs a whole
    sequence of tiles and reports, per tile, the cycle of its first mask transfer and of its last
    ``C`` beat. :func:`compute_bound_cycles` is the closed formula of the design document for
    tiles whose rows never wait for a load or for the output; the tests check the two agree
    there, and the RTL against :func:`simulate` everywhere.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass

import numpy as np

from .formats import mask as bitmask
from .formats import tile_to_beats

__all__ = ["gemm", "c_beats", "GemmTiming", "row_passes", "TileCycles", "simulate",
           "compute_bound_cycles", "is_compute_bound", "ISSUE_TO_PUSH", "FIFO_DEPTH",
           "BROADCAST_FIFO_DEPTH", "BROADCAST_ISSUE_TO_PUSH"]

#: Cycles from a pass's issue to its column group's result entering the output FIFO
#: (docs/gemm.md "Pipeline"): replicated = weight read, multiply, adder tree, accumulate;
#: broadcast = row read and lane select, a registered on its way to the multipliers (the
#: weight read, address and word registered, alongside), the multipliers' input and output
#: registers, the product registered again beside the accumulator, accumulate.
ISSUE_TO_PUSH = 3
BROADCAST_ISSUE_TO_PUSH = 6
#: Output FIFO entries (one entry = one column group of ``n_par`` results, or a zero row) of
#: the replicated datapath (``k_par > 1``) and of the broadcast one (``k_par = 1``).
FIFO_DEPTH = 8
BROADCAST_FIFO_DEPTH = 1


def _values(raw, width, signed):
    raw = np.asarray(raw, dtype=np.uint64)
    ints = np.vectorize(int, otypes=[object])(raw) if raw.size else raw.astype(object)
    if signed:
        sign = 1 << (width - 1)
        ints = np.vectorize(lambda v: v - (1 << width) if v & sign else v, otypes=[object])(ints) \
            if raw.size else ints
    return ints


def gemm(a_raw, b_raw, *, width, signed, acc_width):
    """``C`` as raw ``acc_width``-bit patterns (np.uint64), ``C = A·B mod 2**acc_width``."""
    a_raw = np.asarray(a_raw, dtype=np.uint64)
    b_raw = np.asarray(b_raw, dtype=np.uint64)
    if a_raw.ndim != 2 or b_raw.ndim != 2 or a_raw.shape[1] != b_raw.shape[0]:
        raise ValueError(f"a and b must be (M, K) and (K, N), not {a_raw.shape} and {b_raw.shape}")
    a = _values(a_raw, width, signed)
    b = _values(b_raw, width, signed)
    k = a_raw.shape[1]
    if 2 * width + max(k, 1).bit_length() <= 62:
        c = a.astype(np.int64) @ b.astype(np.int64)   # exact: no sum can reach 2**63
        c = [[int(x) for x in row] for row in c]
    else:
        c = (a @ b).tolist()                           # Python integers, exact at any width
    modulus = bitmask(acc_width)
    return np.array([[x & modulus for x in row] for row in c], dtype=np.uint64).reshape(
        a_raw.shape[0], b_raw.shape[1])


def c_beats(c_raw, *, lanes, acc_width):
    """``C`` as ``m_axis_c`` carries it: ``(tdata, tlast)`` per beat, ``lanes`` per beat."""
    return tile_to_beats(c_raw, lanes, acc_width)


@dataclass(frozen=True)
class GemmTiming:
    """The parameters the cycle count depends on (values, width and signedness do not)."""

    lanes: int = 8
    k: int = 64
    n: int = 64
    k_par: int = 1
    n_par: int = 64
    b_banks: int = 1
    sparse: bool = True
    # None: the datapath's own (broadcast for k_par = 1, replicated otherwise)
    fifo_depth: int | None = None
    issue_to_push: int | None = None

    def __post_init__(self):
        broadcast = self.k_par == 1
        if self.fifo_depth is None:
            depth = BROADCAST_FIFO_DEPTH if broadcast else FIFO_DEPTH
            object.__setattr__(self, "fifo_depth", depth)
        if self.issue_to_push is None:
            delay = BROADCAST_ISSUE_TO_PUSH if broadcast else ISSUE_TO_PUSH
            object.__setattr__(self, "issue_to_push", delay)

    @classmethod
    def of(cls, params):
        return cls(**{f: params[f] for f in ("lanes", "k", "n", "k_par", "n_par", "b_banks",
                                             "sparse") if f in params})

    @property
    def data_gap(self):
        """Cycles between a row's mask and its first data beat beyond the next one: 1 in the
        sparse broadcast datapath (its loader sums the row's beat count in that cycle)."""
        return 1 if self.k_par == 1 and self.sparse else 0

    def load_cycles(self, mask):
        """Cycles the loader spends on a row: its mask, then (if any) the gap and data beats."""
        nnz = bin(self.effective(mask)).count("1")
        return 1 + (self.data_gap + -(-nnz // self.lanes) if nnz else 0)

    def effective(self, mask):
        """The mask the datapath acts on: the dense-only variant treats every row as dense."""
        return int(mask) if self.sparse else (1 << self.k) - 1

    @property
    def col_groups(self):
        return self.n // self.n_par

    @property
    def ports_per_bank(self):
        return self.k_par // self.b_banks


def _positions(mask, k):
    return [j for j in range(k) if (mask >> j) & 1]


def _group_passes(mask, timing):
    """The passes of each aligned group of ``k_par`` nonzeros of a row, as :func:`row_passes`
    counts them (none for an all-zero row)."""
    t = timing
    positions = _positions(t.effective(mask), t.k)
    groups = [positions[start:start + t.k_par] for start in range(0, len(positions), t.k_par)]
    return [max(-(-count // t.ports_per_bank)
                for count in Counter(j % t.b_banks for j in group).values())
            for group in groups]


def row_passes(mask, timing):
    """``(passes, conflict_passes)`` for one row: the issue cycles its compute takes.

    An all-zero row is one pass. Otherwise the row's nonzeros, in column order, are cut into
    aligned groups of ``k_par``; a group whose nonzeros need more than ``ports_per_bank`` reads
    of one weight bank (bank = column mod ``b_banks``) is split into
    ``max over banks ceil(count / ports_per_bank)`` passes, and the whole sequence repeats once
    per column group (``n / n_par``). Conflict passes are the passes beyond one per group.
    """
    per_group = _group_passes(mask, timing)
    if not per_group:
        return 1, 0
    passes = sum(per_group)
    return timing.col_groups * passes, timing.col_groups * (passes - len(per_group))


@dataclass
class TileCycles:
    """What :func:`simulate` predicts for one tile."""

    rows: int
    first_mask: int       # cycle of the tile's first mask transfer
    last_c: int           # cycle of the tile's last ``m_axis_c`` beat
    passes: int           # issue cycles (compute busy)
    conflict_cycles: int  # of those, passes lost to bank conflicts
    macs: int             # useful multiply-accumulates: sum over rows of nnz * n
    empty_rows: int

    @property
    def cycles(self):
        """First mask transfer to last C beat, both included."""
        return self.last_c - self.first_mask + 1


def _pass_list(mask, timing):
    """Each pass of a row: ``needs_credit`` (it completes a column group or is a zero row)."""
    per_group = _group_passes(mask, timing)
    if not per_group:
        return [True]
    one_group = [False] * (sum(per_group) - 1) + [True]
    return one_group * timing.col_groups


def simulate(tiles, timing, *, start_cycle=0, max_cycles=10_000_000):
    """Step the design document's rules over ``tiles`` (a list of lists of row masks) sent back
    to back with every input always valid and ``m_axis_c`` always ready; the first mask is
    offered from ``start_cycle``. Returns one :class:`TileCycles` per tile."""
    t = timing
    rows = []  # (tile index, mask, last row of tile)
    for ti, masks in enumerate(tiles):
        if not masks:
            raise ValueError("a tile must have at least one row")
        rows.extend((ti, t.effective(m), i == len(masks) - 1) for i, m in enumerate(masks))
    results = [TileCycles(len(m), -1, -1, 0, 0, 0, 0) for m in tiles]
    beats_per_group = t.n_par // t.lanes
    beats_per_row = t.n // t.lanes

    # Loader: rows go into two slots alternately; a slot is "full" from the cycle after its
    # row's last input beat until the cycle after the row's last pass was issued.
    next_row, ld_slot, ld_beats_left, ld_row = 0, 0, 0, None
    full = [None, None]          # row index held by each slot once full
    c_slot, pass_index = 0, 0
    passes_of = {}
    outstanding = 0              # output FIFO entries reserved and not yet popped
    pushes = deque()             # (cycle of push, entry)
    fifo = deque()               # entries readable (pushed in an earlier cycle)
    head_beat = 0
    done = 0
    cycle = start_cycle
    while done < len(rows) or fifo or pushes:
        if cycle - start_cycle > max_cycles:
            raise RuntimeError("cycle model did not finish")
        set_full = clear_full = None
        pop = False
        # Output: the FIFO head's next beat transfers (output always ready).
        if fifo:
            ri, zero = fifo[0]
            head_beat += 1
            if head_beat == (beats_per_row if zero else beats_per_group):
                fifo.popleft()
                head_beat = 0
                pop = True
                results[rows[ri][0]].last_c = cycle
        # Issue: one pass of the row in slot ``c_slot`` when that slot is full and, if the pass
        # needs an output entry, an entry is free.
        if full[c_slot] is not None:
            ri = full[c_slot]
            if ri not in passes_of:
                passes_of[ri] = _pass_list(rows[ri][1], t)
            plist = passes_of[ri]
            needs = plist[pass_index]
            if not needs or outstanding < t.fifo_depth:
                tile_index, mask, _ = rows[ri]
                res = results[tile_index]
                res.passes += 1
                if needs:
                    outstanding += 1
                    pushes.append((cycle + t.issue_to_push, (ri, mask == 0)))
                pass_index += 1
                if pass_index == len(plist):
                    res.conflict_cycles += row_passes(mask, t)[1]
                    res.macs += bin(mask).count("1") * t.n
                    res.empty_rows += mask == 0
                    clear_full = c_slot
                    c_slot ^= 1
                    pass_index = 0
                    del passes_of[ri]
                    done += 1
        # Loader: a mask beat when the next slot is free, then the row's data beats.
        if ld_row is None:
            if next_row < len(rows) and full[ld_slot] is None:
                tile_index, mask, _ = rows[next_row]
                if results[tile_index].first_mask < 0:
                    results[tile_index].first_mask = cycle
                nnz = bin(mask).count("1")
                if nnz == 0:
                    set_full = (ld_slot, next_row)
                    ld_slot ^= 1
                else:
                    ld_row, ld_beats_left = next_row, t.data_gap + -(-nnz // t.lanes)
                next_row += 1
        else:
            ld_beats_left -= 1
            if ld_beats_left == 0:
                set_full = (ld_slot, ld_row)
                ld_slot ^= 1
                ld_row = None
        # End of cycle: registers update.
        while pushes and pushes[0][0] == cycle:
            fifo.append(pushes.popleft()[1])
        if pop:
            outstanding -= 1
        if clear_full is not None:
            full[clear_full] = None
        if set_full is not None:
            full[set_full[0]] = set_full[1]
        cycle += 1
    return results


def is_compute_bound(masks, timing):
    """Whether :func:`compute_bound_cycles` applies to this tile: every row has a nonzero, each
    row's passes cover the next row's load (``passes_i >= load_cycles(row i+1)``) and
    each column group's passes cover its output beats (``passes_i / (n/n_par) >= n_par/lanes``,
    plus ``issue_to_push + 1`` when the output has a single entry)."""
    t = timing
    masks = [t.effective(m) for m in masks]
    if not all(masks):
        return False
    passes = [row_passes(m, t)[0] for m in masks]
    loads = [t.load_cycles(m) for m in masks]
    # With a single output entry a column group's last pass waits for the previous entry to
    # be pushed, drained and its credit returned: issue_to_push + beats + 1 cycles.
    per_group = t.n_par // t.lanes + (t.issue_to_push + 1 if t.fifo_depth == 1 else 0)
    return all(passes[i] >= loads[i + 1] for i in range(len(masks) - 1)) and \
        all(pa // t.col_groups >= per_group for pa in passes)


def compute_bound_cycles(masks, timing):
    """The design document's closed formula for one tile that starts from an idle datapath and
    whose rows never wait for their load or for the output (true for dense tiles and for
    tiles whose every row has enough work, docs/gemm.md):

        cycles = load_cycles(row 0) + sum_i passes_i + issue_to_push + beats_per_entry

    (mask beat of row 0, the data gap and its data beats, every pass back to back, the
    pipeline to the FIFO, and the last entry's beats; an empty row 0 loads in its mask cycle
    alone.)"""
    t = timing
    masks = [t.effective(m) for m in masks]
    load0 = t.load_cycles(masks[0])
    total = sum(row_passes(int(m), t)[0] for m in masks)
    last_entry = (t.n // t.lanes) if masks[-1] == 0 else (t.n_par // t.lanes)
    return load0 + total + t.issue_to_push + last_entry
