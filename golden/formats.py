"""Element formats, lane packing and stream beats (docs/interfaces.md#conventions)."""

from __future__ import annotations

import numpy as np

__all__ = ["mask", "is_zero", "pack_beat", "unpack_beat", "tile_to_beats", "from_signed",
           "to_signed", "random_elements"]


def mask(width):
    return (1 << width) - 1


def is_zero(raw, width, number_format):
    """Boolean array: which raw ``width``-bit patterns are zero in ``number_format``.

    ``int`` (two's complement): only the all-zero pattern. ``fp`` (sign-magnitude, sign in the
    top bit): every pattern whose magnitude bits are zero, so +0 and -0.
    """
    raw = np.asarray(raw, dtype=np.uint64)
    if number_format == "fp":
        return (raw & np.uint64(mask(width - 1))) == 0
    if number_format == "int":
        return raw == 0
    raise ValueError(f"number_format must be one of 'int' or 'fp', not {number_format!r}")


def pack_beat(lanes_raw, width):
    """Lane ``i`` at bits ``[i*width +: width]`` of one integer."""
    value = 0
    for i, element in enumerate(lanes_raw):
        value |= (int(element) & mask(width)) << (i * width)
    return value


def unpack_beat(value, lanes, width):
    return np.array([(value >> (i * width)) & mask(width) for i in range(lanes)], dtype=np.uint64)


def tile_to_beats(tile_raw, lanes, width):
    """A tile (any shape, row-major) as a list of ``(tdata, tlast)``, ``lanes`` per beat."""
    flat = np.asarray(tile_raw, dtype=np.uint64).reshape(-1)
    if flat.size % lanes:
        raise ValueError(f"tile size must be a multiple of lanes ({lanes}), not {flat.size}")
    beats = [pack_beat(flat[i:i + lanes], width) for i in range(0, flat.size, lanes)]
    return [(tdata, int(i == len(beats) - 1)) for i, tdata in enumerate(beats)]


def from_signed(values, width):
    """Signed integers -> raw two's-complement ``width``-bit patterns."""
    return (np.asarray(values, dtype=np.int64).astype(np.uint64) & np.uint64(mask(width)))


def to_signed(raw, width):
    """Raw two's-complement ``width``-bit patterns -> signed integers."""
    raw = np.asarray(raw, dtype=np.uint64)
    if width == 64:
        return raw.view(np.int64)
    sign = np.int64(1 << (width - 1))
    return (raw.astype(np.int64) ^ sign) - sign


def random_elements(rng, shape, width, density, number_format="int"):
    """Random raw elements with P(nonzero) = ``density``; zeros in ``fp`` are +0 or -0 at random,
    nonzeros are any nonzero pattern (including ones whose only set bit is the lowest)."""
    shape = tuple(np.atleast_1d(shape))
    keep = rng.random(shape) < density
    raw = rng.integers(0, (1 << width) - 1, size=shape, dtype=np.uint64, endpoint=True)
    # Redraw patterns that happen to be zero so the density is exactly what ``keep`` says.
    zero = is_zero(raw, width, number_format)
    raw = np.where(zero, raw | np.uint64(1), raw)
    zeros = np.zeros(shape, dtype=np.uint64)
    if number_format == "fp":
        zeros = np.where(rng.random(shape) < 0.5, np.uint64(1 << (width - 1)), zeros)
    return np.where(keep, raw, zeros).astype(np.uint64)
