"""Reference model of zero-value compression (docs/interfaces.md#compactor-and-the-zvc-format).

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

from .formats import is_zero, pack_beat, unpack_beat

__all__ = ["Compressed", "encode_row", "encode_tile", "decode_tile", "compressed_bits",
           "compression_ratio", "row_data_beats", "encode_stream", "expand_stream", "canonical"]


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
        raise ValueError(f"tile must be (rows, cols) with cols a multiple of {lanes}, "
                         f"not {tile.shape}")
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


def canonical(raw, width, number_format):
    """``raw`` with every zero written as the all-zero pattern (``fp`` -0 becomes +0): what a
    round trip through compressed form returns. Bypass tiles come back bit for bit."""
    raw = np.asarray(raw, dtype=np.uint64)
    return np.where(is_zero(raw, width, number_format), np.uint64(0), raw)


def encode_stream(beats, *, lanes, width, cols, number_format):
    """The compactor's outputs for a stream of dense beats ``(tdata, tlast, tuser)``, malformed
    rows included (the behaviour chosen in docs/compactor.md).

    A tile starts at the first beat and after each ``tlast``; its first beat's ``tuser`` is its
    bypass flag. A row is ``cols/lanes`` beats, or fewer when a ``tlast`` ends it early: such a
    row is malformed, its missing columns are zeros (in bypass its mask has ones over the
    received columns only, and its data is the received beats). Beats after the last ``tlast``
    that do not complete a row produce nothing.

    Returns ``(masks, data, errors)``: ``masks`` and ``data`` lists of ``(tdata, tlast)`` as
    they leave ``m_axis_mask`` and ``m_axis_data``, ``errors`` the number of malformed rows.
    """
    per_row = cols // lanes
    masks, data, errors = [], [], 0
    row, first, bypass = [], True, False
    for tdata, tlast, tuser in beats:
        if first:
            bypass = bool(tuser)
        first = bool(tlast)
        row.append(tdata)
        if len(row) < per_row and not tlast:
            continue
        short = len(row) < per_row
        errors += short
        if bypass:
            received = len(row) * lanes
            mask, row_beats = (1 << received) - 1, list(row)
        else:
            elements = np.zeros(cols, dtype=np.uint64)
            elements[:len(row) * lanes] = np.concatenate(
                [unpack_beat(b, lanes, width) for b in row])
            mask, row_beats = encode_row(elements, lanes=lanes, width=width,
                                         number_format=number_format)
        masks.append((mask, int(bool(tlast))))
        data.extend((b, int(i == len(row_beats) - 1)) for i, b in enumerate(row_beats))
        row = []
    return masks, data, errors


def expand_stream(masks, data, *, lanes, width, cols):
    """The expander's output for mask beats ``(tdata, tlast)`` and data beats ``(tdata,
    tlast)`` (the behaviour chosen in docs/compactor.md): the mask is authoritative, each row
    takes the next ``ceil(popcount/lanes)`` data beats, and a row whose data beats do not end
    with exactly one ``tlast``, on the last of them, is an error. Rows whose data has not all
    arrived are not produced (the expander waits).

    Returns ``(beats, errors)``: dense ``(tdata, tlast)`` beats and the number of error rows.
    """
    per_row = cols // lanes
    element_mask = (1 << width) - 1
    beats, errors, next_beat = [], 0, 0
    for mask, mask_last in masks:
        positions = [j for j in range(cols) if (mask >> j) & 1]
        needed = row_data_beats(len(positions), lanes)
        if next_beat + needed > len(data):
            break
        taken = data[next_beat:next_beat + needed]
        next_beat += needed
        errors += [last for _, last in taken] != [0] * (needed - 1) + [1] * (needed > 0)
        row = np.zeros(cols, dtype=np.uint64)
        for n, j in enumerate(positions):
            row[j] = (taken[n // lanes][0] >> ((n % lanes) * width)) & element_mask
        for k in range(per_row):
            beats.append((pack_beat(row[k * lanes:(k + 1) * lanes], width),
                          int(bool(mask_last) and k == per_row - 1)))
    return beats, errors
