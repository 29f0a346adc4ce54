"""Training-speed estimates from activation sparsity: the cycle model of golden/gemm.py applied
to whole layers (``spartan estimate FILE.npz``, the network benchmark).

Pure NumPy and golden/gemm.py's public functions; no simulator. Only the zero/nonzero pattern
of the activations matters for cycles, so a layer is reduced to a boolean mask first.

How a layer is mapped onto the core (stated, not measured)
    A GEMM ``C = A . B`` with ``A`` (R x I) sparse and ``B`` (I x N) dense. The core's rows are
    ``k`` elements wide and its weight buffer holds ``k x n``, so the inner dimension ``I`` is
    cut into ``ceil(I/k)`` chunks and ``N`` into ``ceil(N/n)`` chunks; for every (inner chunk,
    N chunk) ``B`` is loaded once (``k*n/lanes`` beats, not overlapped with compute) and ``A``'s
    rows restricted to that chunk stream through in *tiles* of ``rows`` rows (the core's ``A``
    packets; partial sums across inner chunks are added outside the core, not counted).
    Every N chunk repeats the same ``A`` masks, so it costs the same cycles.

    Each tile is timed from an idle datapath (no overlap between consecutive tiles; this costs
    both modes the same ~15 pipeline cycles per tile): :func:`tile_cycles` is
    :func:`golden.gemm.compute_bound_cycles` where :func:`golden.gemm.is_compute_bound` holds and
    :func:`golden.gemm.simulate` otherwise.

    *Dense* cycles: every tile as all-ones masks over its real columns (the last inner chunk of a
    layer whose ``I`` is not a multiple of ``k`` is not charged for its padding in either mode,
    so the speedup measures sparsity, not padding). *Adaptive* cycles: each tile sparse (its
    true masks) iff ``nnz*256 <= threshold*elems`` over the tile, otherwise dense: the core's
    rule (SPEC 4.5) with the density the same tile had in the previous pass taken equal to its
    density now.

GEMMs covered
    ``forward``: ``Y = A . W``, ``A`` the im2col input (M x K), ``W`` (K x N): rows M, inner K.
    ``wgrad``: the weight gradient ``dW = A^T . dY`` (K x N), which reuses the same sparse
    activations as the streamed operand: ``A^T`` (K x M) sparse times ``dY`` (M x N) dense, rows
    K, inner M. The data gradient ``dX = dY . W^T`` has no sparse operand in this core (``dY``
    is not ReLU-sparse in the same way) and is left out, as are pooling, normalisation and the
    fully connected layers.

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
from pathlib import Path
from dataclasses import asdict, dataclass, field

import numpy as np

from .gemm import GemmTiming, compute_bound_cycles, is_compute_bound, simulate

__all__ = ["DEFAULT_ROWS", "DEFAULT_THRESHOLD", "AXIL_READ_CYCLES", "GEMMS", "Options",
           "nonzero", "pack_rows", "tile_cycles", "TileClass", "GemmEstimate", "estimate_gemm",
           "estimate_random", "profile_tiles", "LayerEstimate", "estimate_layer", "estimate_trace",
           "estimate_network", "totals", "quantise", "sample_trace_tiles",
           "format_report"]

#: Rows per ``A`` tile (one core packet).
DEFAULT_ROWS = 64
#: THRESHOLD register value assumed (sparse iff density <= 240/256 = 93.75 %). In this GEMM the
#: sparse form is never slower than the dense one when ``b_banks`` = 1 (a row costs
#: ``ceil(nnz/k_par)`` passes per column group against ``k/k_par``), so only nearly dense
#: tiles should go dense; the core's reset value 0x80 would leave 50-65 %-dense tiles dense.
DEFAULT_THRESHOLD = 0xF0
#: Cycles of one AXI4-Lite read of the core, AR transfer to R transfer (hw/axil.py).
AXIL_READ_CYCLES = 4
GEMMS = ("forward", "wgrad")


@dataclass(frozen=True)
class Options:
    timing: GemmTiming = field(default_factory=GemmTiming)
    rows: int = DEFAULT_ROWS
    threshold: int = DEFAULT_THRESHOLD

    def __post_init__(self):
        if not isinstance(self.rows, int) or self.rows < 1:
            raise ValueError(f"rows must be a positive integer, not {self.rows!r}")
        if not isinstance(self.threshold, int) or not 0 <= self.threshold <= 255:
            raise ValueError(f"threshold must be an integer 0..255, not {self.threshold!r}")


def nonzero(a):
    """The zero/nonzero mask of an activation array (``-0.0`` is zero)."""
    return np.asarray(a) != 0


def pack_rows(bits):
    """Row masks as integers, bit ``j`` = column ``j`` (SPEC 4.2's mask beat)."""
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
    gemm: str                 # "forward" or "wgrad"
    shape: tuple              # (rows, inner, N) of this GEMM
    density: float
    dense_cycles: float
    adaptive_cycles: float
    tiles: int
    sparse_tiles: float       # estimated number run sparse
    b_load_cycles: float      # included in both totals
    sampled_tiles: int


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


def _dense_cycles(rows, cols, timing, cache):
    key = (rows, cols)
    if key not in cache:
        cache[key] = tile_cycles([(1 << cols) - 1] * rows, timing)
    return cache[key]


def _fill(cls, tiles_bits, opts, cache):
    """Time the sampled tiles of one class (a sequence of (rows, cols) boolean arrays)."""
    t = opts.timing
    dense = _dense_cycles(cls.rows, cls.cols, t, cache)
    total = sparse = nnz_sum = 0
    n = 0
    for bits in tiles_bits:
        nnz = int(bits.sum())
        if _sparse(nnz, bits.size, opts.threshold):
            total += tile_cycles(pack_rows(bits), t)
            sparse += 1
        else:
            total += dense
        nnz_sum += nnz
        n += 1
    cls.sampled, cls.dense_cycles = n, dense
    cls.adaptive_cycles, cls.sparse_share, cls.nnz = total / n, sparse / n, nnz_sum / n


def _finish(name, shape, density, classes, opts):
    t = opts.timing
    rows_total, inner, n_out = shape
    n_chunks = -(-n_out // t.n)
    b_load = n_chunks * -(-inner // t.k) * (t.k * t.n // t.lanes)
    dense = n_chunks * sum(c.count * c.dense_cycles for c in classes) + b_load
    adaptive = n_chunks * sum(c.count * c.adaptive_cycles for c in classes) + b_load
    return GemmEstimate(name, tuple(shape), density, dense, adaptive,
                        sum(c.count for c in classes) * n_chunks,
                        n_chunks * sum(c.count * c.sparse_share for c in classes), b_load,
                        sum(c.sampled for c in classes))


def estimate_gemm(bits, n_out, opts, name="forward"):
    """Every tile of the sparse operand ``bits`` (R x I boolean) timed: dense vs adaptive."""
    bits = np.asarray(bits, dtype=bool)
    rows_total, inner = bits.shape
    t = opts.timing
    cache = {}
    classes = _classes(rows_total, inner, opts)
    for cls in classes:
        def tiles(cls=cls):
            for c0 in range(0, inner, t.k):
                for r0 in range(0, rows_total, opts.rows):
                    tile = bits[r0:r0 + opts.rows, c0:c0 + t.k]
                    if tile.shape == (cls.rows, cls.cols):
                        yield tile
        _fill(cls, tiles(), opts, cache)
    return _finish(name, (rows_total, inner, n_out), float(bits.mean()), classes, opts)


def estimate_random(rows_total, inner, n_out, density, opts, *, samples, rng, name="forward"):
    """The same for unstructured random masks of ``density``: per tile shape, ``samples`` random
    tiles (or all of them if fewer) timed and their mean scaled by the number of such tiles."""
    cache = {}
    classes = _classes(rows_total, inner, opts)
    for cls in classes:
        count = min(cls.count, samples)
        _fill(cls, (rng.random((cls.rows, cls.cols)) < density for _ in range(count)), opts,
              cache)
    return _finish(name, (rows_total, inner, n_out), density, classes, opts)


def profile_tiles(rows_total, inner, opts):
    """Profiling cycles of one layer's activations (M x K): software read-back and reduction
    against the monitor's stats beats and against AXI4-Lite reads of the density table."""
    t = opts.timing
    software = monitor = tiles = 0
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


@dataclass
class LayerEstimate(_Ratios):
    name: str
    shape: tuple              # (M, K, N)
    density: float
    gemms: dict               # name -> GemmEstimate
    profiling: dict

    @property
    def dense_cycles(self):
        return sum(g.dense_cycles for g in self.gemms.values())

    @property
    def adaptive_cycles(self):
        return sum(g.adaptive_cycles for g in self.gemms.values())


    def as_dict(self):
        out = {"name": self.name, "shape": list(self.shape), "density": self.density,
               "dense_cycles": self.dense_cycles, "adaptive_cycles": self.adaptive_cycles,
               "speedup": self.speedup, "ideal": self.ideal, "profiling": self.profiling,
               "gemms": {}}
        for name, g in self.gemms.items():
            d = asdict(g)
            d.update(speedup=g.speedup, ideal=g.ideal, shape=list(g.shape))
            out["gemms"][name] = d
        return out


def estimate_layer(name, bits, n_out, opts, gemms=GEMMS):
    """Forward and/or weight-gradient estimates of one layer from its activation mask (M x K)."""
    bits = np.asarray(bits, dtype=bool)
    m, k = bits.shape
    out = {}
    for g in gemms:
        if g == "forward":
            out[g] = estimate_gemm(bits, n_out, opts, "forward")
        elif g == "wgrad":
            out[g] = estimate_gemm(bits.T, n_out, opts, "wgrad")
        else:
            raise ValueError(f"gemm must be one of {', '.join(GEMMS)}, not {g!r}")
    return LayerEstimate(name, (m, k, n_out), float(bits.mean()), out, profile_tiles(m, k, opts))


def estimate_trace(trace, opts, gemms=GEMMS, progress=None):
    """Per-layer estimates of a loaded :class:`golden.traces.Trace`."""
    result = []
    for layer in trace.layers:
        result.append(estimate_layer(layer.name, nonzero(layer.a), layer.w_shape[0], opts,
                                     gemms))
        if progress:
            progress(layer.name)
    return result


def totals(layers):
    """Whole-network figures: cycle-weighted speedup, MAC-weighted ideal, worst profiling."""
    dense = sum(layer.dense_cycles for layer in layers)
    adaptive = sum(layer.adaptive_cycles for layer in layers)
    macs = sum(math.prod(layer.shape) for layer in layers)
    useful = sum(math.prod(layer.shape) * layer.density for layer in layers)
    sw = sum(layer.profiling["software_cycles"] for layer in layers)
    stats = sum(layer.profiling["monitor_stats_cycles"] for layer in layers)
    regs = sum(layer.profiling["monitor_register_cycles"] for layer in layers)
    return {"dense_cycles": dense, "adaptive_cycles": adaptive, "speedup": dense / adaptive,
            "ideal": macs / useful if useful else math.inf,
            "density": useful / macs if macs else 0.0,
            "profiling": {"software_cycles": sw, "monitor_stats_cycles": stats,
                          "monitor_register_cycles": regs, "reduction_stats": sw / stats,
                          "reduction_registers": sw / regs,
                          "min_layer_reduction_stats": min(
                              layer.profiling["reduction_stats"] for layer in layers),
                          "min_layer_reduction_registers": min(
                              layer.profiling["reduction_registers"] for layer in layers)}}


def format_report(layers, opts, title=""):
    """The terminal table of :func:`estimate_trace`'s result."""
    t = opts.timing
    lines = []
    if title:
        lines.append(title)
    lines.append(f"  GEMM k={t.k} n={t.n} lanes={t.lanes} k_par={t.k_par} n_par={t.n_par} "
                 f"b_banks={t.b_banks}; tiles of {opts.rows} rows; THRESHOLD={opts.threshold:#x} "
                 f"(sparse iff density <= {opts.threshold / 256:.1%})")
    lines.append(f"  {'layer':<16} {'gemm':<8} {'R x I x N':>18} {'dens':>6} {'sparse':>8} "
                 f"{'dense cyc':>12} {'adaptive':>12} {'speedup':>8} {'ideal':>6} "
                 f"{'prof.red':>9}")
    for layer in layers:
        for name, g in layer.gemms.items():
            shape = "x".join(str(v) for v in g.shape)
            red = layer.profiling["reduction_stats"] if name == "forward" or \
                "forward" not in layer.gemms else None
            lines.append(
                f"  {layer.name:<16} {name:<8} {shape:>18} {g.density:>6.3f} "
                f"{g.sparse_tiles:>4.0f}/{g.tiles:<3} {g.dense_cycles:>12.0f} "
                f"{g.adaptive_cycles:>12.0f} {g.speedup:>7.2f}x {g.ideal:>5.2f}x "
                + (f"{red:>8.1f}x" if red is not None else f"{'':>9}"))
    tot = totals(layers)
    lines.append(f"  {'total':<16} {'+'.join(layers[0].gemms) if layers else '':<8} "
                 f"{'':>18} {tot['density']:>6.3f} {'':>8} {tot['dense_cycles']:>12.0f} "
                 f"{tot['adaptive_cycles']:>12.0f} {tot['speedup']:>7.2f}x {tot['ideal']:>5.2f}x "
                 f"{tot['profiling']['reduction_stats']:>8.1f}x")
    lines.append("  (speedup = dense / adaptive cycles, forward and weight-gradient GEMMs; ideal = "
                 "1/density; prof.red = software profiling cycles (read-back + reduction) / the "
                 "monitor's stats beats, 1 per tile; if the host reads the density table over "
                 f"AXI4-Lite instead, {2 * AXIL_READ_CYCLES} cycles per tile: "
                 f"{tot['profiling']['reduction_registers']:.1f}x in total, "
                 f"{tot['profiling']['min_layer_reduction_registers']:.1f}x worst layer)")
    return "\n".join(lines)


def estimate_network(network, opts, *, samples=16, seed=2021, gemms=GEMMS, progress=None):
    """Per-layer estimates of one network of golden/networks.py: unstructured random masks at
    each layer's density, ``samples`` random tiles per tile shape per GEMM (all of them where a
    layer has fewer), scaled to the layer's tile count."""
    from .networks import layers as network_layers
    rng = np.random.default_rng(seed)
    out = []
    for g in network_layers(network):
        est = {}
        for name in gemms:
            rows_total, inner = (g.m, g.k) if name == "forward" else (g.k, g.m)
            est[name] = estimate_random(rows_total, inner, g.n, g.density, opts, samples=samples,
                                        rng=rng, name=name)
        out.append(LayerEstimate(g.name, (g.m, g.k, g.n), g.density, est,
                                 profile_tiles(g.m, g.k, opts)))
        if progress:
            progress(g.name)
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
    """Tile specifications (dicts: file, layer, gemm, chunk, row0, rows) drawn from traces:
    for each file, layer and GEMM, ``per_layer`` tiles at random (row tile, inner chunk),
    always including the last inner chunk (the partial one, where there is one)."""
    from .traces import load
    rng = np.random.default_rng(seed)
    specs = []
    for path in paths:
        trace = load(path)
        for layer in trace.layers:
            for gemm in GEMMS:
                r_total, inner = layer.a.shape if gemm == "forward" else layer.a.shape[::-1]
                chunks = -(-inner // k)
                for i in range(per_layer):
                    chunk = chunks - 1 if i == 0 else int(rng.integers(chunks))
                    row0 = int(rng.integers(max(1, r_total - rows + 1)))
                    specs.append({"file": str(Path(path).resolve()), "layer": layer.name, "gemm": gemm,
                                  "chunk": chunk, "row0": row0,
                                  "rows": min(rows, r_total - row0)})
    return specs
