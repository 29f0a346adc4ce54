"""End-to-end reference model of the Spartan core (docs/interfaces.md#core): results, per-tile
decisions across passes, and every counter that does not depend on cycle timing.

Written from docs/interfaces.md#core and the register map (docs/registers.md): tiles are
numbered from 0 after ``PASS_START``; tile ``t`` uses density-table entry ``TABLE_BASE + t``; it
is sparse iff ``MODE`` is force-sparse, or ``MODE`` is auto and the entry holds ``nnz, elems``
with ``nnz*256 <= THRESHOLD*elems``; after the tile, its entry holds the tile's own
``nnz, elems``. Counters saturate at ``2**32 - 1``. ``CYCLES``, ``BUSY_CYCLES`` and
``STALL_CYCLES`` depend on timing and are checked from the ports by the testbench instead.
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
        k, n = p["k"], p["n"]
        if a.ndim != 2 or a.shape[1] != k or a.shape[0] < 1:
            raise ValueError(f"a must be (rows >= 1, {k}), not {a.shape}")
        sparse = self.decide()
        c = gemm(a, self.b_raw, width=p["width"], signed=p["signed"], acc_width=p["acc_width"])
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
        s = tile_stats(sent, self.threshold, width=p["width"],
                       number_format="int", max_tile_elems=p["max_tile_elems"])
        self._add("ZERO_BEATS", s.zero_beats)
        self._add("TILES_BELOW", s.sparse)
        entry = self.table_base + self.tile
        if entry < p["table_depth"]:
            self.table[entry] = (s.nnz, s.elems)
        self.tile += 1
        return c, sparse
