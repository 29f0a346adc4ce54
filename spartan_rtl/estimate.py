"""Training-speed estimates from activation and error sparsity: the cycle model of
golden/gemm.py applied to the three GEMMs of every conv layer (``spartan estimate FILE.npz``,
the network benchmark).

Pure NumPy and golden/gemm.py's public functions; no simulator. Only the zero/nonzero pattern of
an operand matters for cycles, so operands are reduced to boolean masks first.

The three GEMMs of a conv layer (im2col: ``A`` M x K input, ``W`` K x N weights, ``dY`` M x N
output error), and how each is mapped onto the core: the *streamed* operand goes through the
monitor and compactor as the GEMM's sparse ``A`` port, row by row in tiles; the *resident*
operand is loaded into the weight buffer (``B``, ``k x n``)
    ``forward``  ``Y = A . W``: streamed ``A`` (rows M, inner K), resident ``W`` (K x N).
    ``dgrad``    ``dA = dY . W^T``: streamed ``dY`` (rows M, inner N), resident ``W^T`` (N x K),
                 output K wide. Not computed for the network's first layer (its input is the
                 data: nothing to propagate the error into).
    ``wgrad``    ``dW = A^T . dY`` (K x N) or, transposed, ``dW^T = dY^T . A`` (N x K): both
                 operands may be sparse, and either can be streamed. Both forms share the inner
                 dimension M, cut into *slices* of ``k`` output positions; per slice the core
                 streams the operand with less work by what the monitor measured: ``A^T``
                 (rows K, resident ``dY`` slice, ``ceil(N/n)`` resident chunks) iff
                 ``nnz(A slice) * ceil(N/n) <= nnz(dY slice) * ceil(K/n)``, else ``dY^T`` (rows
                 N, resident ``A`` slice, ``ceil(K/n)`` chunks). When ``n`` divides K and N this
                 is "stream the sparser one"; the chunk counts charge the padding of a narrow
                 output. Ties stream ``A^T``.

Tiling (every GEMM, stated, not measured)
    A GEMM ``C = X . B`` with the streamed ``X`` (R x I) and the resident ``B`` (I x O). The
    core's rows are ``k`` elements wide and its weight buffer holds ``k x n``, so ``I`` is cut
    into ``ceil(I/k)`` inner chunks and ``O`` into ``ceil(O/n)`` chunks; for every (inner chunk,
    O chunk) ``B`` is loaded once (``k*n/lanes`` beats, not overlapped with compute) and
    ``X``'s rows restricted to that chunk stream through in *tiles* of ``rows`` rows (the core's
    ``A`` packets; partial sums across inner chunks are added outside the core, not counted).
    Every O chunk repeats the same masks, so it costs the same cycles.

    Each tile is timed from an idle datapath (no overlap between consecutive tiles; this costs
    both modes the same pipeline fill per tile): :func:`tile_cycles` is
    :func:`spartan_rtl.golden.gemm.compute_bound_cycles` where
    :func:`spartan_rtl.golden.gemm.is_compute_bound` holds and
    :func:`spartan_rtl.golden.gemm.simulate` otherwise.

    *Dense* cycles: every tile as all-ones masks over its real columns (the last inner chunk of
    an operand whose ``I`` is not a multiple of ``k`` is not charged for its padding in either
    mode, so the speedup measures sparsity, not padding); for ``wgrad`` the cheaper of the two
    forms when both run dense. *Adaptive* cycles: each tile sparse (its true masks) iff
    ``nnz*256 <= threshold*elems`` over the tile, otherwise dense: the core's rule
    (docs/interfaces.md#core).
    The core decides from the density the same tile had in the previous pass; the estimate
    takes it equal to the tile's density now (the *oracle*), and :func:`last_pass` measures
    what deciding from an earlier pass costs.

Ideal bound of a GEMM: its MACs over its useful MACs (those whose streamed element is nonzero),
i.e. ``1/density`` of the streamed operand; for ``wgrad`` per slice the smaller of the two forms'.

Two-sided skipping (:func:`two_sided`, a hypothetical datapath, not RTL)
    The core skips a MAC only when its *streamed* element is zero. A two-sided datapath would
    also drop a streamed element whose resident row (the ``n`` columns of the current resident
    chunk it multiplies) is all zero: the compactor's mask of that row ANDed with one
    "resident row nonzero" bit per position, which a monitor on the resident operand can
    produce. Its cycles are the same cycle model on the ANDed masks (per resident chunk, since
    the AND differs per chunk), with the same slice choice and tile rule. A MAC whose resident
    element is zero inside a nonzero resident row is still done: the MAC-level bound (MACs with
    both operands nonzero) is reported beside it.

Profiling overhead (per tile of ``rows`` x (real columns of one inner chunk), forward activations)
    *Software*: read the tile back through the same ``lanes``-wide port, one beat per cycle
    (``ceil(elems/lanes)``), then reduce: an adder tree over the lanes (``ceil(log2 lanes)``)
    and the threshold compare (1). *Monitor*: the one ``m_axis_stats`` beat of the tile
    (1 cycle; the monitor itself runs on the write path at full rate) or, if the host reads the
    density table over AXI4-Lite, two register reads (``nnz``, ``elems``) of
    :data:`AXIL_READ_CYCLES` each (hw/axil.py: ``rvalid`` three cycles after the AR transfer).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .golden.gemm import GemmTiming, compute_bound_cycles, is_compute_bound, simulate

__all__ = ["DEFAULT_ROWS", "DEFAULT_THRESHOLD", "AXIL_READ_CYCLES", "GEMMS", "OPERANDS",
           "default_timing", "Options", "nonzero", "operand", "pack_rows", "tile_cycles",
           "Sweep", "sweep", "sweep_nnz", "TileClass", "GemmEstimate", "estimate_gemm",
           "estimate_wgrad",
           "estimate_random", "profile_tiles", "LayerEstimate", "estimate_layer",
           "estimate_trace", "estimate_network", "totals", "two_sided", "last_pass",
           "quantise", "sample_trace_tiles", "format_report", "ENGINE_FORMS", "engine_timing",
           "EngineGemm", "EngineLayer", "engine_gemm", "engine_layer", "engine_trace",
           "engine_network", "engine_totals", "format_engine_report"]

#: Rows per streamed tile (one core packet).
DEFAULT_ROWS = 64
#: THRESHOLD register value assumed (sparse iff density <= 240/256 = 93.75 %). With
#: ``b_banks`` = 1 the sparse form of a row is never slower than its dense form in this GEMM
#: (fewer or equal passes, fewer data beats), so only nearly dense tiles should go dense; the
#: core's reset value 0x80 would leave 50-65 %-dense tiles dense.
DEFAULT_THRESHOLD = 0xF0
#: Cycles of one AXI4-Lite read of the core, AR transfer to R transfer (hw/axil.py).
AXIL_READ_CYCLES = 4
#: A conv layer's GEMMs, in the order of a training step.
GEMMS = ("forward", "dgrad", "wgrad")
#: Streamed operands, as (trace array, transposed): what :func:`operand` cuts tiles from.
OPERANDS = {"forward": ("a", False), "dgrad": ("dy", False),
            "wgrad_a": ("a", True), "wgrad_dy": ("dy", True)}
#: How the report names a streamed operand.
_OPERAND_NAMES = {"forward": "A", "dgrad": "dY", "wgrad_a": "A^T", "wgrad_dy": "dY^T"}


def default_timing():
    """The GEMM block's defaults (hw/gemm/__init__.py), as the cycle model's parameters."""
    from spartan_rtl.hw.gemm import BLOCK
    return GemmTiming.of(BLOCK.resolve())


@dataclass(frozen=True)
class Options:
    timing: GemmTiming = field(default_factory=default_timing)
    rows: int = DEFAULT_ROWS
    threshold: int = DEFAULT_THRESHOLD

    def __post_init__(self):
        if not isinstance(self.rows, int) or self.rows < 1:
            raise ValueError(f"rows must be a positive integer, not {self.rows!r}")
        if not isinstance(self.threshold, int) or not 0 <= self.threshold <= 255:
            raise ValueError(f"threshold must be an integer 0..255, not {self.threshold!r}")


def nonzero(a):
    """The zero/nonzero mask of an array (``-0.0`` is zero)."""
    return np.asarray(a) != 0


def operand(layer, which):
    """The streamed operand ``which`` (a key of :data:`OPERANDS`) of a
    :class:`spartan_rtl.golden.traces.Layer`, values kept: ``A``, ``dY``, ``A^T`` or ``dY^T``."""
    key, transposed = OPERANDS[which]
    x = layer.a if key == "a" else layer.dy
    if x is None:
        raise ValueError(f"layer {layer.name!r} must have an output error dy for {which}, "
                         f"not none")
    return x.T if transposed else x


def pack_rows(bits):
    """Row masks as integers, bit ``j`` = column ``j``: the mask beats of the ZVC format
    (docs/interfaces.md#compactor-and-the-zvc-format)."""
    bits = np.asarray(bits, dtype=bool)
    packed = np.packbits(bits, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def tile_cycles(masks, timing):
    """Cycles of one tile (first mask transfer to last C beat) from an idle datapath."""
    masks = list(masks)
    if is_compute_bound(masks, timing):
        return compute_bound_cycles(masks, timing)
    return simulate([masks], timing)[0].cycles


def _sparse(nnz, elems, threshold):
    return nnz * 256 <= threshold * elems


def _chunks(total, size):
    return -(-total // size)


class _Cycles:
    """Memoised tile cycles of one timing: dense tiles by shape, sparse tiles by masks."""

    def __init__(self, timing):
        self.timing, self._dense, self._sparse = timing, {}, {}

    def dense(self, rows, cols):
        key = (rows, cols)
        if key not in self._dense:
            self._dense[key] = tile_cycles([(1 << cols) - 1] * rows, self.timing)
        return self._dense[key]

    def sparse(self, bits):
        key = (bits.shape[1], np.packbits(bits).tobytes())
        if key not in self._sparse:
            self._sparse[key] = tile_cycles(pack_rows(bits), self.timing)
        return self._sparse[key]


@dataclass
class Sweep:
    """One pass of the core over a streamed operand (R x I) for ONE resident chunk, per inner
    chunk: arrays of length ``ceil(I/k)``."""

    dense: np.ndarray       # cycles, every tile dense
    adaptive: np.ndarray    # cycles, each tile as decided
    nnz: np.ndarray         # nonzeros of the streamed operand
    tiles: np.ndarray       # tiles
    sparse: np.ndarray      # tiles run sparse
    flips: np.ndarray       # tiles whose decision differs from the one their own density gives


def sweep(bits, opts, decide=None, cycles=None):
    """Time every tile of the streamed operand ``bits`` (R x I boolean). Each tile runs sparse
    iff the density of the same tile of ``decide`` (the previous pass's pattern; default
    ``bits`` itself, the oracle) passes the threshold."""
    bits = np.asarray(bits, dtype=bool)
    decide = bits if decide is None else np.asarray(decide, dtype=bool)
    if decide.shape != bits.shape:
        raise ValueError(f"decide must have the operand's shape {bits.shape}, not {decide.shape}")
    t = opts.timing
    cycles = cycles or _Cycles(t)
    rows_total, inner = bits.shape
    n = _chunks(inner, t.k)
    out = Sweep(*(np.zeros(n, dtype=np.int64) for _ in range(6)))
    for ci in range(n):
        c0 = ci * t.k
        for r0 in range(0, rows_total, opts.rows):
            tile = bits[r0:r0 + opts.rows, c0:c0 + t.k]
            nnz = int(tile.sum())
            own = _sparse(nnz, tile.size, opts.threshold)
            taken = own if decide is bits else _sparse(
                int(decide[r0:r0 + opts.rows, c0:c0 + t.k].sum()), tile.size, opts.threshold)
            dense = cycles.dense(*tile.shape)
            out.dense[ci] += dense
            out.adaptive[ci] += cycles.sparse(tile) if taken else dense
            out.nnz[ci] += nnz
            out.tiles[ci] += 1
            out.sparse[ci] += taken
            out.flips[ci] += taken != own
    return out


@dataclass
class TileClass:
    """Tiles of one shape (rows x real columns) in a GEMM: how many, and their mean cycles."""

    rows: int
    cols: int
    count: int
    sampled: int = 0
    dense_cycles: float = 0.0      # per tile
    adaptive_cycles: float = 0.0   # per tile, mean over the sampled tiles
    sparse_share: float = 0.0      # of the sampled tiles, the share run sparse
    nnz: float = 0.0               # per tile, mean


class _Ratios:
    """``speedup`` (dense / adaptive cycles) and ``ideal`` (1 / density)."""

    @property
    def speedup(self):
        return self.dense_cycles / self.adaptive_cycles

    @property
    def ideal(self):
        return 1 / self.density if self.density else math.inf


@dataclass
class GemmEstimate(_Ratios):
    gemm: str                 # "forward", "dgrad" or "wgrad"
    shape: tuple              # (rows, inner, out) of the streamed form (wgrad: the A^T form)
    density: float           # useful MACs / MACs (the streamed operand's density)
    dense_cycles: float
    adaptive_cycles: float
    tiles: int
    sparse_tiles: float       # estimated number run sparse
    b_load_cycles: float      # of the adaptive total (resident loads)
    sampled_tiles: int
    operand: str = "A"        # what is streamed; wgrad: "A^T", "dY^T" or "A^T a/s, dY^T b/s"
    measured: bool = True     # False: the operand was not in the trace, counted dense
    flips: int = 0            # decisions differing from the oracle's (last_pass)

    @property
    def macs(self):
        return math.prod(self.shape)


def _b_load(timing):
    return timing.k * timing.n // timing.lanes


def _gemm_from_sweep(name, sw, shape, opts, operand_name="A", measured=True):
    """A one-form GEMM of ``shape`` (rows, inner, out) from its streamed operand's sweep."""
    t = opts.timing
    rows_total, inner, out = shape
    o_chunks = _chunks(out, t.n)
    b_load = o_chunks * len(sw.dense) * _b_load(t)
    return GemmEstimate(name, tuple(shape), int(sw.nnz.sum()) / (rows_total * inner),
                        o_chunks * int(sw.dense.sum()) + b_load,
                        o_chunks * int(sw.adaptive.sum()) + b_load,
                        o_chunks * int(sw.tiles.sum()), o_chunks * int(sw.sparse.sum()), b_load,
                        int(sw.tiles.sum()), operand_name, measured,
                        o_chunks * int(sw.flips.sum()))


def estimate_gemm(bits, n_out, opts, name="forward", decide=None):
    """Every tile of the streamed operand ``bits`` (R x I boolean) timed: dense vs adaptive,
    for an output ``n_out`` wide."""
    bits = np.asarray(bits, dtype=bool)
    sw = sweep(bits, opts, decide)
    return _gemm_from_sweep(name, sw, (*bits.shape, n_out), opts,
                            _OPERAND_NAMES.get(name, "A"))


def _wgrad_choice(nnz_a, nnz_dy, k_in, n_out, timing):
    """Per slice: True where ``dY^T`` is streamed (less work by the measured nonzeros)."""
    return np.asarray(nnz_dy) * _chunks(k_in, timing.n) < np.asarray(nnz_a) * _chunks(n_out,
                                                                                       timing.n)


def estimate_wgrad(a_bits, dy_bits, opts, prev=None, measured=True):
    """The weight gradient from the input mask ``a_bits`` (M x K) and the output-error mask
    ``dy_bits`` (M x N): per slice of ``k`` positions the form with less work by the slice's
    nonzeros (from ``prev`` = (a, dy) masks of the previous pass if given, else this pass's),
    each form's tiles decided by the same pass's densities. Dense: the cheaper form."""
    a_bits, dy_bits = np.asarray(a_bits, bool), np.asarray(dy_bits, bool)
    t = opts.timing
    m, k_in = a_bits.shape
    n_out = dy_bits.shape[1]
    pa, pd = (None, None) if prev is None else (np.asarray(prev[0], bool).T,
                                                np.asarray(prev[1], bool).T)
    sa = sweep(a_bits.T, opts, pa)
    sd = sweep(dy_bits.T, opts, pd)
    ga = _gemm_from_sweep("wgrad", sa, (k_in, m, n_out), opts, "A^T", measured)
    gd = _gemm_from_sweep("wgrad", sd, (n_out, m, k_in), opts, "dY^T", measured)
    if prev is None:
        choice = _wgrad_choice(sa.nnz, sd.nnz, k_in, n_out, t)
    else:
        choice = _wgrad_choice(sweep_nnz(pa, t.k), sweep_nnz(pd, t.k), k_in, n_out, t)
    oracle = _wgrad_choice(sa.nnz, sd.nnz, k_in, n_out, t)
    ca, cd = _chunks(n_out, t.n), _chunks(k_in, t.n)
    slice_a = ca * (sa.adaptive + _b_load(t))
    slice_d = cd * (sd.adaptive + _b_load(t))
    adaptive = int(np.where(choice, slice_d, slice_a).sum())
    useful = int(np.minimum(sa.nnz * n_out, sd.nnz * k_in).sum())
    n_d = int(choice.sum())
    form = "dY^T" if n_d == len(choice) else "A^T" if n_d == 0 else \
        f"A^T {len(choice) - n_d}/{len(choice)}, dY^T {n_d}/{len(choice)}"
    return GemmEstimate(
        "wgrad", (k_in, m, n_out), useful / (m * k_in * n_out),
        min(ga.dense_cycles, gd.dense_cycles), adaptive,
        int(np.where(choice, cd * sd.tiles, ca * sa.tiles).sum()),
        int(np.where(choice, cd * sd.sparse, ca * sa.sparse).sum()),
        int(np.where(choice, cd, ca).sum()) * _b_load(t),
        int(sa.tiles.sum() + sd.tiles.sum()), form, measured,
        int(np.where(choice, cd * sd.flips, ca * sa.flips).sum()) + int((choice != oracle).sum()))


def sweep_nnz(bits, k):
    """Nonzeros per inner chunk of ``k`` columns of ``bits`` (R x I)."""
    bits = np.asarray(bits, bool)
    pad = (-bits.shape[1]) % k
    return np.pad(bits, ((0, 0), (0, pad))).reshape(bits.shape[0], -1, k).sum(axis=(0, 2))


def _split(total, size):
    """``[(size, count), (remainder, 1)]`` without empty parts."""
    parts = [(size, total // size)] if total >= size else []
    if total % size:
        parts.append((total % size, 1))
    return parts


def _classes(rows_total, inner, opts):
    t = opts.timing
    return [TileClass(r, c, nr * nc) for r, nr in _split(rows_total, opts.rows)
            for c, nc in _split(inner, t.k)]


def _fill(cls, tiles_bits, opts, cycles):
    """Time the sampled tiles of one class (a sequence of (rows, cols) boolean arrays)."""
    dense = cycles.dense(cls.rows, cls.cols)
    total = sparse = nnz_sum = n = 0
    for bits in tiles_bits:
        nnz = int(bits.sum())
        if _sparse(nnz, bits.size, opts.threshold):
            total += cycles.sparse(bits)
            sparse += 1
        else:
            total += dense
        nnz_sum += nnz
        n += 1
    cls.sampled, cls.dense_cycles = n, dense
    cls.adaptive_cycles = total / n if n else dense
    cls.sparse_share, cls.nnz = (sparse / n, nnz_sum / n) if n else (0.0, 0.0)


def _finish(name, shape, density, classes, opts, operand_name):
    t = opts.timing
    rows_total, inner, n_out = shape
    n_chunks = _chunks(n_out, t.n)
    b_load = n_chunks * _chunks(inner, t.k) * _b_load(t)
    dense = n_chunks * sum(c.count * c.dense_cycles for c in classes) + b_load
    adaptive = n_chunks * sum(c.count * c.adaptive_cycles for c in classes) + b_load
    return GemmEstimate(name, tuple(shape), density, dense, adaptive,
                        sum(c.count for c in classes) * n_chunks,
                        n_chunks * sum(c.count * c.sparse_share for c in classes), b_load,
                        sum(c.sampled for c in classes), operand_name)


def estimate_random(rows_total, inner, n_out, density, opts, *, samples, rng, name="forward",
                    operand_name=None):
    """The same for unstructured random masks of ``density``: per tile shape, ``samples`` random
    tiles (or all of them if fewer; none: dense only) timed and their mean scaled by the number
    of such tiles."""
    cycles = _Cycles(opts.timing)
    classes = _classes(rows_total, inner, opts)
    for cls in classes:
        count = min(cls.count, samples)
        _fill(cls, (rng.random((cls.rows, cls.cols)) < density for _ in range(count)), opts,
              cycles)
    return _finish(name, (rows_total, inner, n_out), density, classes, opts,
                   operand_name or _OPERAND_NAMES.get(name, "A"))


def profile_tiles(rows_total, inner, opts):
    """Profiling cycles of one layer's activations (M x K): software read-back and reduction
    against the monitor's stats beats and against AXI4-Lite reads of the density table."""
    t = opts.timing
    software = tiles = 0
    reduce = math.ceil(math.log2(t.lanes)) + 1
    for r, nr in _split(rows_total, opts.rows):
        for c, nc in _split(inner, t.k):
            software += nr * nc * (-(-r * c // t.lanes) + reduce)
            tiles += nr * nc
    monitor = tiles
    registers = tiles * 2 * AXIL_READ_CYCLES
    return {"tiles": tiles, "software_cycles": software, "monitor_stats_cycles": monitor,
            "monitor_register_cycles": registers,
            "reduction_stats": software / monitor, "reduction_registers": software / registers}


class _Sums(_Ratios):
    """Cycle sums and the MAC-weighted ideal over ``self.gemms``."""

    @property
    def dense_cycles(self):
        return sum(g.dense_cycles for g in self.gemms.values())

    @property
    def adaptive_cycles(self):
        return sum(g.adaptive_cycles for g in self.gemms.values())

    @property
    def ideal(self):
        useful = sum(g.macs * g.density for g in self.gemms.values())
        return sum(g.macs for g in self.gemms.values()) / useful if useful else math.inf


@dataclass
class LayerEstimate(_Sums):
    name: str
    shape: tuple              # (M, K, N)
    density: float            # of the im2col input A
    gemms: dict               # name -> GemmEstimate
    profiling: dict
    dy_density: float | None = None   # of the output error dY (None: not in the trace)

    def as_dict(self):
        out = {"name": self.name, "shape": list(self.shape), "density": self.density,
               "dy_density": self.dy_density,
               "dense_cycles": self.dense_cycles, "adaptive_cycles": self.adaptive_cycles,
               "speedup": self.speedup, "ideal": self.ideal, "profiling": self.profiling,
               "gemms": {}}
        for name, g in self.gemms.items():
            d = asdict(g)
            d.update(speedup=g.speedup, ideal=g.ideal, shape=list(g.shape))
            out["gemms"][name] = d
        return out


def _layer_masks(a_bits, dy_bits, n_out):
    """A layer's input mask as booleans (M x K), its output-error mask (M x N; all ones when
    ``dy_bits`` is None, not measured) and whether it was measured."""
    a_bits = np.asarray(a_bits, dtype=bool)
    m, _ = a_bits.shape
    measured = dy_bits is not None
    dy = np.asarray(dy_bits, dtype=bool) if measured else np.ones((m, n_out), bool)
    if dy.shape != (m, n_out):
        raise ValueError(f"dy must have shape (M, N) = {(m, n_out)}, not {dy.shape}")
    return a_bits, dy, measured


def estimate_layer(name, a_bits, dy_bits, n_out, opts, *, first=False, prev=None):
    """The three GEMMs of one conv layer from its input mask ``a_bits`` (M x K) and output-error
    mask ``dy_bits`` (M x N; None: not measured, counted dense and never streamed by wgrad).
    ``first``: the network's first layer, no data gradient. ``prev``: (a, dy) masks of the
    previous pass to take every decision from (:func:`last_pass`)."""
    a_bits, dy, measured = _layer_masks(a_bits, dy_bits, n_out)
    m, k = a_bits.shape
    pa, pd = (None, None) if prev is None else prev
    if pd is None and prev is not None:
        pd = np.ones((m, n_out), bool)
    out = {"forward": estimate_gemm(a_bits, n_out, opts, "forward", pa)}
    if not first:
        g = estimate_gemm(dy, k, opts, "dgrad", pd)
        g.measured = measured
        out["dgrad"] = g
    if measured:
        out["wgrad"] = estimate_wgrad(a_bits, dy, opts, None if prev is None else (pa, pd))
    else:
        g = estimate_gemm(a_bits.T, n_out, opts, "wgrad", None if pa is None else pa.T)
        g.operand, g.measured = "A^T", False
        out["wgrad"] = g
    return LayerEstimate(name, (m, k, n_out), float(a_bits.mean()), out,
                         profile_tiles(m, k, opts), float(dy.mean()) if measured else None)


def _bits(layer):
    return nonzero(layer.a), None if layer.dy is None else nonzero(layer.dy)


def estimate_trace(trace, opts, progress=None):
    """Per-layer estimates of a loaded :class:`spartan_rtl.golden.traces.Trace`. Its first layer is
    taken as the network's first (no data gradient)."""
    result = []
    for i, layer in enumerate(trace.layers):
        a, dy = _bits(layer)
        result.append(estimate_layer(layer.name, a, dy, layer.w_shape[0], opts, first=i == 0))
        if progress:
            progress(layer.name)
    return result


def _sum_dict(gemms):
    dense = sum(g.dense_cycles for g in gemms)
    adaptive = sum(g.adaptive_cycles for g in gemms)
    macs = sum(g.macs for g in gemms)
    useful = sum(g.macs * g.density for g in gemms)
    return {"dense_cycles": dense, "adaptive_cycles": adaptive,
            "speedup": dense / adaptive if adaptive else math.inf,
            "ideal": macs / useful if useful else math.inf,
            "density": useful / macs if macs else 0.0}


def totals(layers):
    """Whole-step figures (every GEMM of every layer: cycle-weighted speedup, MAC-weighted
    ideal), the same per GEMM (``gemms``), and the profiling comparison."""
    out = _sum_dict([g for layer in layers for g in layer.gemms.values()])
    out["gemms"] = {name: _sum_dict([layer.gemms[name] for layer in layers
                                     if name in layer.gemms])
                    for name in GEMMS if any(name in layer.gemms for layer in layers)}
    sw = sum(layer.profiling["software_cycles"] for layer in layers)
    stats = sum(layer.profiling["monitor_stats_cycles"] for layer in layers)
    regs = sum(layer.profiling["monitor_register_cycles"] for layer in layers)
    out["profiling"] = {"software_cycles": sw, "monitor_stats_cycles": stats,
                        "monitor_register_cycles": regs, "reduction_stats": sw / stats,
                        "reduction_registers": sw / regs,
                        "min_layer_reduction_stats": min(
                            layer.profiling["reduction_stats"] for layer in layers),
                        "min_layer_reduction_registers": min(
                            layer.profiling["reduction_registers"] for layer in layers)}
    return out


def format_report(layers, opts, title=""):
    """The terminal table of :func:`estimate_trace`'s result: every GEMM, every layer's step,
    per-GEMM totals and the whole step beside the forward-only figure."""
    t = opts.timing
    lines = [title] if title else []
    lines.append(f"  GEMM k={t.k} n={t.n} lanes={t.lanes} k_par={t.k_par} n_par={t.n_par} "
                 f"b_banks={t.b_banks}; tiles of {opts.rows} rows; THRESHOLD={opts.threshold:#x} "
                 f"(sparse iff density <= {opts.threshold / 256:.1%})")
    lines.append(f"  {'layer':<16} {'gemm':<8} {'streamed':<22} {'R x I x O':>16} {'dens':>6} "
                 f"{'sparse':>10} {'dense cyc':>11} {'adaptive':>11} {'speedup':>8} "
                 f"{'ideal':>6}")

    def row(label, gemm, streamed, shape, density, sparse, dense, adaptive, speedup, ideal):
        return (f"  {label:<16} {gemm:<8} {streamed:<22} {shape:>16} {density:>6} {sparse:>10} "
                f"{dense:>11.0f} {adaptive:>11.0f} {speedup:>7.2f}x {_fmt(ideal):>5}x")

    unmeasured = False
    for layer in layers:
        for name, g in layer.gemms.items():
            streamed = g.operand + ("" if g.measured else " (dense*)")
            unmeasured |= not g.measured
            lines.append(row(layer.name, name, streamed, "x".join(map(str, g.shape)),
                             f"{g.density:.3f}", f"{g.sparse_tiles:.0f}/{g.tiles}",
                             g.dense_cycles, g.adaptive_cycles, g.speedup, g.ideal))
        lines.append(row(layer.name, "step", "", "", "", "", layer.dense_cycles,
                         layer.adaptive_cycles, layer.speedup, layer.ideal))
    tot = totals(layers)
    for name, g in tot["gemms"].items():
        lines.append(row("total", name, "", "", f"{g['density']:.3f}", "", g["dense_cycles"],
                         g["adaptive_cycles"], g["speedup"], g["ideal"]))
    lines.append(row("total", "step", "", "", f"{tot['density']:.3f}", "", tot["dense_cycles"],
                     tot["adaptive_cycles"], tot["speedup"], tot["ideal"]))
    fwd = tot["gemms"]["forward"]["speedup"]
    lines.append(f"  whole training step {tot['speedup']:.2f}x (ideal {_fmt(tot['ideal'])}x) "
                 f"against forward only {fwd:.2f}x")
    lines.append("  (speedup = dense / adaptive cycles; ideal = MACs / MACs whose streamed "
                 "element is nonzero; forward streams A, dgrad dY, wgrad per slice of k positions "
                 "A^T or dY^T, whichever has less work; the first layer has no dgrad)")
    if unmeasured:
        lines.append("  (dense*: the trace has no output error dy for this layer: dgrad counted "
                     "dense, wgrad streams A^T)")
    p = tot["profiling"]
    lines.append(f"  profiling: software read-back + reduction / the monitor's stats beat (1 per "
                 f"tile) {p['reduction_stats']:.1f}x in total, "
                 f"{p['min_layer_reduction_stats']:.1f}x worst layer; if the host reads the "
                 f"density table over AXI4-Lite instead ({2 * AXIL_READ_CYCLES} cycles per "
                 f"tile): {p['reduction_registers']:.1f}x, "
                 f"{p['min_layer_reduction_registers']:.1f}x worst layer")
    return "\n".join(lines)


def _fmt(v):
    return "inf" if v == math.inf else f"{v:.2f}"


def estimate_network(network, opts, *, samples=16, seed=2021, progress=None):
    """Per-layer estimates of one network of golden/networks.py: unstructured random masks at
    each GEMM's streamed-operand density (golden/networks.py derives them from the layer's
    structure), ``samples`` random tiles per tile shape per GEMM (all of them where a layer has
    fewer), scaled to the layer's tile count. wgrad: every slice has the same densities, so one
    form is chosen for the whole layer by the same rule as for measured slices."""
    from .golden.networks import layers as network_layers
    rng = np.random.default_rng(seed)
    t = opts.timing
    out = []
    for i, g in enumerate(network_layers(network)):
        est = {"forward": estimate_random(g.m, g.k, g.n, g.density, opts, samples=samples,
                                          rng=rng, name="forward")}
        if g.has_dgrad:
            est["dgrad"] = estimate_random(g.m, g.n, g.k, g.dy_density, opts, samples=samples,
                                           rng=rng, name="dgrad")
        dense_a = estimate_random(g.k, g.m, g.n, 1.0, opts, samples=0, rng=rng)
        dense_d = estimate_random(g.n, g.m, g.k, 1.0, opts, samples=0, rng=rng)
        use_dy = bool(_wgrad_choice(g.density * g.k, g.dy_density * g.n, g.k, g.n, t))
        w = estimate_random(*((g.n, g.m, g.k, g.dy_density) if use_dy else
                              (g.k, g.m, g.n, g.density)),
                            opts, samples=samples, rng=rng, name="wgrad",
                            operand_name="dY^T" if use_dy else "A^T")
        w.dense_cycles = min(dense_a.dense_cycles, dense_d.dense_cycles)
        # The bound is the sparser operand's even where padding makes the other form cheaper.
        w.shape, w.density = (g.k, g.m, g.n), min(g.density, g.dy_density)
        est["wgrad"] = w
        out.append(LayerEstimate(g.name, (g.m, g.k, g.n), g.density, est,
                                 profile_tiles(g.m, g.k, opts), g.dy_density))
        if progress:
            progress(g.name)
    return out


def two_sided(a_bits, dy_bits, opts):
    """The weight gradient on the hypothetical two-sided datapath (module docstring): per
    slice the same form as :func:`estimate_wgrad` chooses, each streamed element dropped when
    its resident row within the current resident chunk is all zero. Returns the one-sided
    (the core's) and two-sided cycles, and the MAC-level counts."""
    a_bits, dy_bits = np.asarray(a_bits, bool), np.asarray(dy_bits, bool)
    t = opts.timing
    m, k_in = a_bits.shape
    n_out = dy_bits.shape[1]
    one = estimate_wgrad(a_bits, dy_bits, opts)
    choice = _wgrad_choice(sweep_nnz(a_bits.T, t.k), sweep_nnz(dy_bits.T, t.k), k_in, n_out, t)
    cycles = _Cycles(t)

    def per_chunk(streamed, resident):
        total = np.zeros(len(choice), dtype=np.int64)
        for c0 in range(0, resident.shape[1], t.n):
            live = resident[:, c0:c0 + t.n].any(axis=1)          # resident row nonzero
            total += sweep(streamed & live[None, :], opts, cycles=cycles).adaptive + _b_load(t)
        return total

    two = int(np.where(choice, per_chunk(dy_bits.T, a_bits), per_chunk(a_bits.T, dy_bits)).sum())
    both = int((a_bits.sum(1).astype(np.int64) * dy_bits.sum(1)).sum())
    macs = m * k_in * n_out
    return {"dense_cycles": one.dense_cycles, "one_sided_cycles": one.adaptive_cycles,
            "two_sided_cycles": two, "gain": one.adaptive_cycles / two,
            "one_sided_macs": round(one.density * macs), "two_sided_macs": both,
            "mac_bound_gain": one.density * macs / both if both else math.inf,
            "macs": macs}


def last_pass(previous, current, opts, progress=None):
    """Per layer and GEMM of ``current`` (a Trace), the decisions taken from ``previous`` (the
    same network and probe batch at an earlier point) against the oracle's (each tile's own
    density): how many differ and the cycles of both."""
    out = []
    for i, (p, c) in enumerate(zip(previous.layers, current.layers)):
        if (p.name, p.a.shape, p.w_shape) != (c.name, c.a.shape, c.w_shape):
            raise ValueError(f"traces must hold the same layers, not {p.name} {p.a.shape} "
                             f"and {c.name} {c.a.shape}")
        a, dy = _bits(c)
        oracle = estimate_layer(c.name, a, dy, c.w_shape[0], opts, first=i == 0)
        taken = estimate_layer(c.name, a, dy, c.w_shape[0], opts, first=i == 0,
                               prev=_bits(p))
        for name, g in taken.gemms.items():
            o = oracle.gemms[name]
            decisions = o.tiles + (len(sweep_nnz(a.T, opts.timing.k)) if name == "wgrad" and
                                   dy is not None else 0)
            out.append({"layer": c.name, "gemm": name, "decisions": decisions,
                        "differ": g.flips, "oracle_cycles": o.adaptive_cycles,
                        "last_pass_cycles": g.adaptive_cycles,
                        "cost": g.adaptive_cycles / o.adaptive_cycles - 1})
        if progress:
            progress(c.name)
    return out


def quantise(a, width):
    """Activations as raw ``width``-bit two's-complement integers with the zero/nonzero
    pattern kept: scaled to the largest magnitude, rounded, and a nonzero that would round to
    0 becomes +-1 (values never change cycles; this makes the RTL's results checkable)."""
    a = np.asarray(a, dtype=np.float64)
    top = (1 << (width - 1)) - 1
    scale = np.abs(a).max() if a.size else 0.0
    q = np.rint(a / scale * top) if scale else np.zeros_like(a)
    q = np.where((a != 0) & (q == 0), np.sign(a), q).astype(np.int64)
    return (q & ((1 << width) - 1)).astype(np.uint64)


def sample_trace_tiles(paths, *, per_layer, rows, k, seed=2021):
    """Tile specifications (dicts: file, layer, gemm = a key of :data:`OPERANDS`, chunk, row0,
    rows) drawn from traces: for each file, layer and streamed operand the layer has (the
    output-error ones only where the trace holds ``dy``), ``per_layer`` tiles at random (row
    tile, inner chunk), always including the last inner chunk (the partial one, if any)."""
    from .golden.traces import load
    rng = np.random.default_rng(seed)
    specs = []
    for path in paths:
        trace = load(path)
        for layer in trace.layers:
            for which, (key, _) in OPERANDS.items():
                if key == "dy" and layer.dy is None:
                    continue
                r_total, inner = operand(layer, which).shape
                chunks = _chunks(inner, k)
                for i in range(per_layer):
                    chunk = chunks - 1 if i == 0 else int(rng.integers(chunks))
                    row0 = int(rng.integers(max(1, r_total - rows + 1)))
                    specs.append({"file": str(Path(path).resolve()), "layer": layer.name,
                                  "gemm": which, "chunk": chunk, "row0": row0,
                                  "rows": min(rows, r_total - row0)})
    return specs


# --- the layer engine (spartan_engine): whole GEMMs from memory ---------------------------------
#
# The same three GEMMs per conv layer on the layer engine (docs/engine.md), timed by its cycle
# model (golden/engine_timing.py): OP 0 forward streams X (= A here), OP 1 dgrad streams dY,
# OP 2 wgrad streams Xᵀ, or dYᵀ with the operands swapped (A_ADDR = dY, B_ADDR = X: the
# engine then writes dWᵀ); per layer the form with fewer adaptive cycles (software knows both
# from the last step's LAYER_CYCLES), dense: the cheaper dense form. Everything the engine does
# is counted: B chunk loads (one per step, acc_rows rows a step), the transposer's fills, the
# pipeline's fill per tile, the output's pace, the results writes and their waits, the
# turn-around between steps, the drain; and the bus words of every operand (identical in
# both modes: the engine reads every element). A tile (acc_rows x k, zero-padded past the
# inner dimension, padding counted by the monitor) runs sparse iff nnz*256 <= THRESHOLD*elems
# (the oracle, as for the stream core).

#: The engine's streamed operand per form.
ENGINE_FORMS = {"forward": (0, "X"), "dgrad": (1, "dY"), "wgrad_x": (2, "X^T"),
                "wgrad_dy": (2, "dY^T")}


def engine_timing(**overrides):
    """The engine block's defaults (hw/engine.py) as its cycle model's parameters."""
    from .golden.engine_timing import EngineTiming
    return EngineTiming.default(**overrides)


@dataclass
class EngineGemm(_Ratios):
    """One GEMM of a layer on the engine: dense and adaptive :func:`layer_cycles` results."""

    gemm: str                 # "forward", "dgrad" or "wgrad"
    op: int                   # the engine's OP
    operand: str              # streamed: "X", "dY", "X^T" or "dY^T"
    shape: tuple              # (M, K, N) of the descriptor
    dims: tuple               # (Mo, Ki, No): result rows, inner dimension, result columns
    density: float            # of the streamed operand
    dense: dict               # golden/engine_timing.py layer_cycles_nnz, every tile dense
    adaptive: dict            # ... each tile by the threshold
    measured: bool = True     # False: the operand was not in the trace, counted dense

    @property
    def dense_cycles(self):
        return self.dense["layer_cycles"]

    @property
    def adaptive_cycles(self):
        return self.adaptive["layer_cycles"]

    @property
    def macs(self):
        return math.prod(self.dims)

    def as_dict(self):
        return {"gemm": self.gemm, "op": self.op, "operand": self.operand,
                "shape": list(self.shape), "dims": list(self.dims), "density": self.density,
                "measured": self.measured, "dense_cycles": self.dense_cycles,
                "adaptive_cycles": self.adaptive_cycles, "speedup": self.speedup,
                "dense": self.dense, "adaptive": self.adaptive}


@dataclass
class EngineLayer(_Sums):
    name: str
    shape: tuple              # (M, K, N)
    gemms: dict               # name -> EngineGemm

    def as_dict(self):
        return {"name": self.name, "shape": list(self.shape),
                "dense_cycles": self.dense_cycles, "adaptive_cycles": self.adaptive_cycles,
                "speedup": self.speedup,
                "gemms": {name: g.as_dict() for name, g in self.gemms.items()}}


def _tile_decisions(nnz, t, threshold, n_no):
    """Per tile in the engine's order, sparse iff its ``nnz*256 <= threshold*elems`` (elems
    = mv*k: the padding past the inner dimension is streamed and counted)."""
    mo, n_kc = nnz.shape
    rows = t.acc_rows
    n_mt = _chunks(mo, rows)
    pad = n_mt * rows - mo
    per_tile = np.pad(nnz, ((0, pad), (0, 0))).reshape(n_mt, rows, n_kc).sum(axis=1)
    mv = np.minimum(rows, mo - np.arange(n_mt) * rows)
    sparse = per_tile * 256 <= threshold * (mv[:, None] * t.k)
    return np.broadcast_to(sparse, (n_no, n_mt, n_kc)).reshape(-1)


def engine_gemm(name, form, nnz, shape, t, threshold, *, measured=True):
    """One GEMM (``form`` a key of :data:`ENGINE_FORMS`) from its streamed operand's nonzeros
    per row and inner chunk (``nnz``, ``(Mo, ceil(Ki/k))``) and the descriptor's ``shape``
    ``(M, K, N)``: dense and adaptive."""
    from .golden.engine_timing import dims as engine_dims
    from .golden.engine_timing import layer_cycles_nnz
    op, operand_name = ENGINE_FORMS[form]
    M, K, N = shape
    mo, ki, no = engine_dims(op, M, K, N)
    nnz = np.asarray(nnz, dtype=np.int64)
    dense = layer_cycles_nnz(op, nnz, M, K, N, t, False)
    decisions = _tile_decisions(nnz, t, threshold, _chunks(no, t.n))
    adaptive = layer_cycles_nnz(op, nnz, M, K, N, t, decisions)
    return EngineGemm(name, op, operand_name, (M, K, N), (mo, ki, no),
                      float(nnz.sum()) / (mo * ki), dense, adaptive, measured)


def _wgrad_pick(x_form, dy_form):
    """wgrad on the engine: the form with fewer adaptive cycles; dense, the cheaper dense."""
    from dataclasses import replace
    best = x_form if x_form.adaptive_cycles <= dy_form.adaptive_cycles else dy_form
    cheap = x_form if x_form.dense_cycles <= dy_form.dense_cycles else dy_form
    return replace(best, dense=cheap.dense)


def engine_layer(name, a_bits, dy_bits, n_out, t, threshold=DEFAULT_THRESHOLD, *, first=False):
    """The three GEMMs of one conv layer on the engine from the input mask ``a_bits`` (M x K)
    and the output-error mask ``dy_bits`` (M x N; None: not measured, counted dense, and
    wgrad streams Xᵀ). ``first``: no data gradient."""
    from .golden.engine_timing import row_nnz
    a_bits, dy, measured = _layer_masks(a_bits, dy_bits, n_out)
    m, k = a_bits.shape
    out = {"forward": engine_gemm("forward", "forward", row_nnz(0, a_bits, t), (m, k, n_out),
                                  t, threshold)}
    if not first:
        out["dgrad"] = engine_gemm("dgrad", "dgrad", row_nnz(1, dy, t), (m, k, n_out), t,
                                   threshold, measured=measured)
    wx = engine_gemm("wgrad", "wgrad_x", row_nnz(2, a_bits, t), (m, k, n_out), t, threshold)
    if measured:
        wd = engine_gemm("wgrad", "wgrad_dy", row_nnz(2, dy, t), (m, n_out, k), t, threshold)
        wx = _wgrad_pick(wx, wd)
    else:
        wx.measured = False
    out["wgrad"] = wx
    return EngineLayer(name, (m, k, n_out), out)


def engine_trace(trace, t, threshold=DEFAULT_THRESHOLD, progress=None):
    """:func:`engine_layer` of every layer of a loaded trace (the first has no dgrad)."""
    result = []
    for i, layer in enumerate(trace.layers):
        a, dy = _bits(layer)
        result.append(engine_layer(layer.name, a, dy, layer.w_shape[0], t, threshold,
                                   first=i == 0))
        if progress:
            progress(layer.name)
    return result


def _random_nnz(rng, rows, inner, density, k):
    """Nonzeros per row and inner chunk of an unstructured random ``rows x inner`` mask."""
    widths = np.array([min(k, inner - c) for c in range(0, inner, k)], dtype=np.int64)
    return rng.binomial(np.broadcast_to(widths, (rows, len(widths))), density)


def engine_network(network, t, threshold=DEFAULT_THRESHOLD, *, seed=2021, progress=None):
    """:func:`engine_layer` for a network of golden/networks.py: unstructured random masks at
    each operand's density (only their counts per row and inner chunk are drawn: every tile
    of every GEMM is timed). wgrad: both forms timed, the one with fewer cycles taken."""
    from .golden.networks import layers as network_layers
    rng = np.random.default_rng(seed)
    out = []
    for g in network_layers(network):
        est = {"forward": engine_gemm("forward", "forward",
                                      _random_nnz(rng, g.m, g.k, g.density, t.k),
                                      (g.m, g.k, g.n), t, threshold)}
        if g.has_dgrad:
            est["dgrad"] = engine_gemm("dgrad", "dgrad",
                                       _random_nnz(rng, g.m, g.n, g.dy_density, t.k),
                                       (g.m, g.k, g.n), t, threshold)
        wx = engine_gemm("wgrad", "wgrad_x", _random_nnz(rng, g.k, g.m, g.density, t.k),
                         (g.m, g.k, g.n), t, threshold)
        wd = engine_gemm("wgrad", "wgrad_dy", _random_nnz(rng, g.n, g.m, g.dy_density, t.k),
                         (g.m, g.n, g.k), t, threshold)
        est["wgrad"] = _wgrad_pick(wx, wd)
        out.append(EngineLayer(g.name, (g.m, g.k, g.n), est))
        if progress:
            progress(g.name)
    return out


#: The parts of an engine GEMM's cycles, as golden/engine_timing.py names them.
ENGINE_PARTS = ("start", "b_load", "a_wait", "tile_passes", "tile_other", "turnaround",
                "drain")


def engine_totals(layers):
    """Whole-step figures of the engine: cycles dense and adaptive, per GEMM and in total,
    the parts of the adaptive cycles, and the bytes moved per operand."""
    def sums(gemms):
        return {**_sum_dict(gemms),
                "adaptive_parts": {p: sum(g.adaptive[p] for g in gemms) for p in ENGINE_PARTS},
                "dense_parts": {p: sum(g.dense[p] for g in gemms) for p in ENGINE_PARTS},
                "bytes": {f"{x}_BYTES": sum(g.adaptive[f"{x}_BYTES"] for g in gemms)
                          for x in "ABC"}}
    every = [g for layer in layers for g in layer.gemms.values()]
    out = sums(every)
    out["gemms"] = {name: sums([layer.gemms[name] for layer in layers if name in layer.gemms])
                    for name in GEMMS if any(name in layer.gemms for layer in layers)}
    return out


def _mb(x):
    return f"{x / 1e6:.2f}"


def format_engine_report(layers, t, threshold, core=None, title=""):
    """The engine's table: per layer and GEMM the form, tiles run sparse, dense and adaptive
    cycles, speedup, where the adaptive cycles go (GEMM passes, the rest of the tiles, B
    loads, the transposer's fills, turn-around, start and drain) and the bytes read and
    written; the per-GEMM and whole-step totals, beside the stream core's step figure
    (``core``: :func:`totals` of the same layers) when given."""
    lines = [title] if title else []
    lines.append(f"  engine: k={t.k} n={t.n} lanes={t.lanes} n_par={t.n_par} "
                 f"acc_rows={t.acc_rows} data_width={t.data_width} acc_width={t.acc_width} "
                 f"max_burst={t.max_burst}; zero-wait memory; THRESHOLD={threshold:#x} per "
                 f"{t.acc_rows}x{t.k} tile")
    head = (f"  {'layer':<12} {'gemm':<7} {'OP':>2} {'streamed':<5} {'Mo x Ki x No':>18} "
            f"{'sparse':>9} {'dense cyc':>11} {'adaptive':>11} {'speedup':>8} {'passes':>6} "
            f"{'tiles+':>6} {'B load':>6} {'xpose':>6} {'turn':>5} {'ends':>5} "
            f"{'A MB':>7} {'B MB':>7} {'C MB':>7}")
    lines.append(head)

    def pct(part, total):
        return f"{100 * part / total:5.1f}%" if total else "    -"

    for layer in layers:
        for name, g in layer.gemms.items():
            a = g.adaptive
            total = a["layer_cycles"]
            streamed = g.operand + ("" if g.measured else "*")
            lines.append(
                f"  {layer.name:<12} {name:<7} {g.op:>2} {streamed:<5} "
                f"{'x'.join(map(str, g.dims)):>18} "
                f"{a['tiles_sparse']:>4}/{a['steps']:<4} {g.dense_cycles:>11} "
                f"{g.adaptive_cycles:>11} {g.speedup:>7.2f}x {pct(a['tile_passes'], total)} "
                f"{pct(a['tile_other'], total)} {pct(a['b_load'], total)} "
                f"{pct(a['a_wait'], total)} {pct(a['turnaround'], total):>5} "
                f"{pct(a['start'] + a['drain'], total):>5} {_mb(a['A_BYTES']):>7} "
                f"{_mb(a['B_BYTES']):>7} {_mb(a['C_BYTES']):>7}")
        lines.append(f"  {layer.name:<12} {'step':<7} {'':>2} {'':<5} {'':>18} {'':>9} "
                     f"{layer.dense_cycles:>11} {layer.adaptive_cycles:>11} "
                     f"{layer.speedup:>7.2f}x")
    tot = engine_totals(layers)
    for name, g in tot["gemms"].items():
        lines.append(f"  {'total':<12} {name:<7} {'':>2} {'':<5} {'':>18} {'':>9} "
                     f"{g['dense_cycles']:>11} {g['adaptive_cycles']:>11} {g['speedup']:>7.2f}x"
                     f" {'':>6} {'':>6} {'':>6} {'':>6} {'':>5} {'':>5} "
                     f"{_mb(g['bytes']['A_BYTES']):>7} {_mb(g['bytes']['B_BYTES']):>7} "
                     f"{_mb(g['bytes']['C_BYTES']):>7}")
    lines.append(f"  {'total':<12} {'step':<7} {'':>2} {'':<5} {'':>18} {'':>9} "
                 f"{tot['dense_cycles']:>11} {tot['adaptive_cycles']:>11} "
                 f"{tot['speedup']:>7.2f}x")
    parts = tot["adaptive_parts"]
    total = tot["adaptive_cycles"]
    lines.append("  engine, adaptive step: " + ", ".join(
        f"{label} {100 * parts[p] / total:.1f} %" for label, p in (
            ("GEMM passes", "tile_passes"), ("rest of the tiles (fill, output pace, results "
                                             "waits)", "tile_other"),
            ("B loads", "b_load"), ("waits for the transposer's fills", "a_wait"),
            ("turn-around", "turnaround"), ("start", "start"), ("drain", "drain"))))
    moved = tot["bytes"]
    lines.append(f"  engine, bytes moved in the step (either mode): A {_mb(moved['A_BYTES'])} MB "
                 f"read, B {_mb(moved['B_BYTES'])} MB read, C {_mb(moved['C_BYTES'])} MB "
                 f"written")
    summary = (f"  whole training step on the engine {tot['speedup']:.2f}x "
               f"(dense {tot['dense_cycles']} -> adaptive {tot['adaptive_cycles']} cycles)")
    if core is not None:
        summary += f"; the stream core {core['speedup']:.2f}x"
    lines.append(summary)
    lines.append("  (passes: GEMM issue cycles; tiles+: the rest of the tiles' cycles; xpose: "
                 "waits for OP 2's X^T blocks, filled while the tiles before compute; turn: "
                 "between steps; ends: start (OP 2: the first X^T block) and "
                 "drain; *: not in the trace, counted dense; wgrad: the form with fewer "
                 "cycles, its dense figure the cheaper dense form)")
    return "\n".join(lines)
