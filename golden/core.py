"""End-to-end reference model of the Spartan core (docs/interfaces.md#core): results, per-tile
decisions across passes, and every counter that does not depend on cycle timing.

Written from docs/interfaces.md#core and the register map (docs/registers.md): tiles are
numbered from 0 after ``PASS_START``; tile ``t`` uses density-table entry ``TABLE_BASE + t``; it
is sparse iff ``MODE`` is force-sparse, or ``MODE`` is auto and the entry holds ``nnz, elems``
with ``nnz*256 <= THRESHOLD*elems``; after the tile, its entry holds the tile's own
``nnz, elems``. Counters saturate at ``2**32 - 1``. ``CYCLES``, ``BUSY_CYCLES`` and
``STALL_CYCLES`` depend on timing and are checked from the ports by the testbench instead.

Faults (docs/core.md, *Reset and malformed input*): a reset returns every register to its reset
value and invalidates the table but keeps the weights; a ``B`` packet of the wrong length is
written from ``B[0, 0]`` on, wrapping after ``B``'s last element, over the weights it does not
replace; an ``A`` tile longer than the monitor counts exactly is measured with saturated counts
(:func:`spartan_rtl.golden.monitor.tile_stats`) and computed in full.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .compactor import encode_tile
from .formats import is_zero
from .gemm import GemmTiming, gemm, row_passes
from .monitor import tile_stats

__all__ = ["CoreModel", "MODES", "EVENT_COUNTERS"]

MODES = {"auto": 0, "dense": 1, "sparse": 2}
EVENT_COUNTERS = ("TILES_DENSE", "TILES_SPARSE", "ROWS_EMPTY", "MACS_DONE", "MACS_SKIPPED",
                  "CONFLICT_CYCLES", "ZERO_BEATS", "TILES_BELOW", "A_ERRORS")
SATURATE = (1 << 32) - 1


@dataclass
class CoreModel:
    params: dict
    mode: int = 0
    threshold: int = 0x80
    table_base: int = 0
    tile: int = 0
    table: dict = field(default_factory=dict)   # entry -> (nnz, elems)
    counters: dict = field(default_factory=lambda: dict.fromkeys(EVENT_COUNTERS, 0))
    b_raw: np.ndarray | None = None

    def pass_start(self):
        self.tile = 0

    def clear(self):
        self.counters = dict.fromkeys(EVENT_COUNTERS, 0)

    def forget(self):
        self.table.clear()

    def reset(self):
        """``rst``: every register at its reset value, counters zero, every table entry
        invalid; the weights survive (the weight buffer is a memory, which reset leaves)."""
        self.__dict__.update(CoreModel(self.params, b_raw=self.b_raw).__dict__)

    def load_b_packet(self, elements):
        """A ``B`` packet of any whole number of beats, long or short: its element ``i`` goes
        to position ``i mod k*n`` of ``B`` in row-major order (the write pointer starts at
        ``B[0, 0]`` and wraps after ``B``'s last element; a later write wins), and the positions
        it does not reach keep their weights. Also what a packet cut short by a reset leaves
        (its first beats). After power-up the weights are undefined until a packet of at least
        ``k*n`` elements."""
        p = self.params
        size = p["k"] * p["n"]
        flat = np.asarray(elements, dtype=np.uint64).reshape(-1)
        if flat.size == 0 or flat.size % p["lanes"]:
            raise ValueError(f"a B packet must be a whole number of beats of {p['lanes']} "
                             f"elements, not {flat.size} elements")
        if self.b_raw is None and flat.size < size:
            raise ValueError(f"the first B packet must cover B ({size} elements: the weights "
                             f"are undefined before it), not {flat.size} elements")
        b = np.zeros(size, dtype=np.uint64) if self.b_raw is None else self.b_raw.reshape(-1)
        b = b.copy()
        for start in range(0, flat.size, size):
            chunk = flat[start:start + size]
            b[:chunk.size] = chunk
        self.b_raw = b.reshape(p["k"], p["n"])

    def load_b(self, b_raw):
        b = np.asarray(b_raw, dtype=np.uint64)
        if b.shape != (self.params["k"], self.params["n"]):
            raise ValueError(f"b must be ({self.params['k']}, {self.params['n']}), not {b.shape}")
        self.b_raw = b

    def decide(self):
        """Sparse (True) or dense for the next tile, by the rules of docs/interfaces.md#core."""
        if self.mode == MODES["sparse"]:
            return True
        if self.mode != MODES["auto"]:
            return False
        entry = self.table.get(self.table_base + self.tile)
        if entry is None:
            return False
        nnz, elems = entry
        return nnz * 256 <= self.threshold * elems

    def _add(self, name, value):
        self.counters[name] = min(self.counters[name] + int(value), SATURATE)

    def run_tile(self, a_raw, short_beats=0):
        """Process one ``A`` tile (rows x k raw elements): returns ``(C raw, sparse)``.

        ``short_beats`` > 0 models a malformed tile whose ``tlast`` comes that many beats
        before the end of its last row: the compactor pads the row with zeros (so ``C``, the
        MAC and row counters see the padded tile, ``A_ERRORS`` counts one), while the
        monitor measures only the beats that were sent."""
        p = self.params
        a = np.asarray(a_raw, dtype=np.uint64).copy()
        sent = a.reshape(-1, p["lanes"])[:a.size // p["lanes"] - short_beats]
        if short_beats:
            a.reshape(-1)[sent.size:] = 0
            self._add("A_ERRORS", 1)
        if a.ndim != 2 or a.shape[1] != p["k"] or a.shape[0] < 1:
            raise ValueError(f"a must be (rows >= 1, {p['k']}), not {a.shape}")
        c = gemm(a, self.b_raw, width=p["width"], signed=p["signed"], acc_width=p["acc_width"])
        return c, self.account(a, sent)

    def account(self, a, sent=None):
        """Tile ``a`` (rows x k raw elements, as the GEMM gets it) decided by its table entry
        and counted; the monitor's measurement of ``sent`` (its beats; default all of ``a``)
        recorded in entry ``TABLE_BASE + tile``. Returns True when it runs sparse. (The layer
        engine's model counts its tiles with this too.)"""
        p = self.params
        k, n = p["k"], p["n"]
        sparse = self.decide()
        zvc = encode_tile(a, lanes=p["lanes"], width=p["width"], number_format="int",
                          bypass=not sparse)
        timing = GemmTiming.of(p)
        for mask, _ in zvc.masks:
            ones = bin(mask).count("1")
            self._add("MACS_DONE", ones * n)
            self._add("MACS_SKIPPED", (k - ones) * n)
            self._add("CONFLICT_CYCLES", row_passes(mask, timing)[1])
        nonzero = ~is_zero(a, p["width"], "int")
        self._add("ROWS_EMPTY", int((~nonzero.any(axis=1)).sum()))
        self._add("TILES_SPARSE" if sparse else "TILES_DENSE", 1)
        s = tile_stats(a.reshape(-1, p["lanes"]) if sent is None else sent, self.threshold,
                       width=p["width"], number_format="int", max_tile_elems=p["max_tile_elems"])
        self._add("ZERO_BEATS", s.zero_beats)
        self._add("TILES_BELOW", s.sparse)
        entry = self.table_base + self.tile
        if entry < p["table_depth"]:
            self.table[entry] = (s.nnz, s.elems)
        self.tile += 1
        return sparse
