"""Reference model of the sparsity monitor (docs/interfaces.md#monitor): one record per tile."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .formats import is_zero

__all__ = ["TileStats", "tile_stats", "count_widths"]


@dataclass(frozen=True)
class TileStats:
    nnz: int
    elems: int
    zero_beats: int
    sparse: int


def count_widths(lanes, max_tile_elems):
    """Bit widths of (nnz/elems, zero_beats): hold ``max_tile_elems`` elements without wrapping."""
    beats = -(-max_tile_elems // lanes)
    return max_tile_elems.bit_length(), beats.bit_length()


def tile_stats(beats_raw, threshold, *, width, number_format, max_tile_elems=65536):
    """Statistics of one tile.

    ``beats_raw``: array (beats, lanes) of raw element patterns, in stream order.
    ``threshold``: the 8-bit density threshold in force at the tile's first beat.

    Counts saturate at ``2**w - 1`` (``w`` from :func:`count_widths`) and ``sparse`` is decided on
    the saturated counts, as the hardware does.
    """
    beats_raw = np.asarray(beats_raw, dtype=np.uint64)
    if beats_raw.ndim != 2 or beats_raw.shape[0] == 0:
        raise ValueError("beats_raw must be a non-empty (beats, lanes) array")
    if not 0 <= threshold <= 255:
        raise ValueError(f"threshold must be an integer from 0 to 255, not {threshold!r}")
    lanes = beats_raw.shape[1]
    count_w, beats_w = count_widths(lanes, max_tile_elems)
    nonzero = ~is_zero(beats_raw, width, number_format)
    nnz = min(int(nonzero.sum()), (1 << count_w) - 1)
    elems = min(beats_raw.size, (1 << count_w) - 1)
    zero_beats = min(int((~nonzero.any(axis=1)).sum()), (1 << beats_w) - 1)
    sparse = int(nnz * 256 <= threshold * elems)
    return TileStats(nnz, elems, zero_beats, sparse)
