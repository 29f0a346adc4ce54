"""Reference model of zero-value compression (SPEC §4.2 compactor, §4.3 expander).

A tile is ``rows x cols`` raw elements. Per row the compressed form is

* a mask: ``cols`` bits, bit ``j`` = (element ``j`` is nonzero) — all ones in dense bypass;
* data beats: the row's nonzero elements in column order, ``lanes`` per beat, the last beat
  zero-filled; no beat for an empty row. In bypass: the row unchanged, ``cols/lanes`` beats.

The last row's mask beat carries ``tlast`` (and so does each row's last data beat, on the data
stream, see :func:`encode_tile`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .formats import is_zero, pack_beat

__all__ = ["Compressed", "encode_row", "encode_tile", "decode_tile", "compressed_bits",
           "compression_ratio", "row_data_beats"]


@dataclass(frozen=True)
class Compressed:
    """One tile in ZVC form, as it travels: ``masks`` is a list of ``(tdata, tlast)`` on the
    mask stream, ``data`` a list of ``(tdata, tlast)`` on the data stream."""

    masks: list
    data: list


def row_data_beats(nnz, lanes):
    return -(-nnz // lanes)


def encode_row(row_raw, *, lanes, width, number_format, bypass=False):
    """``(mask, [data tdata, ...])`` for one row."""
    row = np.asarray(row_raw, dtype=np.uint64)
    cols = row.size
    if bypass:
        keep = np.ones(cols, dtype=bool)
        values = row
    else:
        keep = ~is_zero(row, width, number_format)
        values = row[keep]
    mask = 0
    for j in np.flatnonzero(keep):
        mask |= 1 << int(j)
    padded = np.zeros(row_data_beats(values.size, lanes) * lanes, dtype=np.uint64)
    padded[:values.size] = values
    beats = [pack_beat(padded[i:i + lanes], width) for i in range(0, padded.size, lanes)]
    return mask, beats


def encode_tile(tile_raw, *, lanes, width, number_format, bypass=False):
    """The compressed tile. Data ``tlast`` marks the last beat of each row (a consumer needs no
    row counter); mask ``tlast`` marks the tile's last row."""
    tile = np.asarray(tile_raw, dtype=np.uint64)
    if tile.ndim != 2 or tile.shape[1] % lanes:
        raise ValueError(f"tile must be (rows, cols) with cols a multiple of {lanes}, not {tile.shape}")
    masks, data = [], []
    for r, row in enumerate(tile):
        mask, beats = encode_row(row, lanes=lanes, width=width, number_format=number_format,
                                 bypass=bypass)
        masks.append((mask, int(r == tile.shape[0] - 1)))
        data.extend((b, int(i == len(beats) - 1)) for i, b in enumerate(beats))
    return Compressed(masks, data)


def decode_tile(masks, data_beats, *, cols, lanes, width):
    """Inverse of :func:`encode_tile` (bypass or not: an all-ones mask is a dense row).
    ``masks``: mask values per row; ``data_beats``: data ``tdata`` values in order."""
    out = np.zeros((len(masks), cols), dtype=np.uint64)
    it = iter(data_beats)
    element_mask = (1 << width) - 1
    for r, mask in enumerate(masks):
        positions = [j for j in range(cols) if (mask >> j) & 1]
        for start in range(0, len(positions), lanes):
            beat = next(it)
            for lane, j in enumerate(positions[start:start + lanes]):
                out[r, j] = (beat >> (lane * width)) & element_mask
    rest = list(it)
    if rest:
        raise ValueError(f"data_beats has {len(rest)} beats more than the masks call for")
    return out


def compressed_bits(tile_raw, *, lanes, width, number_format):
    """Size of the ZVC form: one ``cols``-bit mask per row plus every data beat in full."""
    tile = np.asarray(tile_raw, dtype=np.uint64)
    rows, cols = tile.shape
    nnz = (~is_zero(tile, width, number_format)).sum(axis=1)
    beats = sum(row_data_beats(int(n), lanes) for n in nnz)
    return rows * cols + beats * lanes * width


def compression_ratio(tile_raw, *, lanes, width, number_format):
    """Dense bits / compressed bits."""
    tile = np.asarray(tile_raw, dtype=np.uint64)
    return tile.size * width / compressed_bits(tile, lanes=lanes, width=width,
                                               number_format=number_format)
