"""The layer engine's area and clock model: ECP5 LUT4, FF, DP16KD, MULT18X18D and post-route
Fmax predicted from the engine's parameters, fitted on measured builds
(docs/explore.md#the-area-and-clock-model). ``spartan explore`` prunes with it before
synthesis: a candidate the model puts over the budget by more than twice the model's own
largest validation error is never synthesised.

Each figure is a least-squares fit, linear in a few terms that follow the hardware's structure
(the GEMM's columns, the compactor's and transposer's lane crossbars, the memories' bits), on
the rows of ``docs/area_model.json`` (written by ``python -m
verif.flows.area_model``: Yosys and nextpnr of a fixed set of engine builds). Its error is the
leave-one-out error: each row predicted by the fit on the others, relative to the measured.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["RESOURCES", "TERMS", "PRUNE_MARGIN", "Fit", "AreaModel", "DEFAULT_PATH", "fit",
           "memory_brams"]

#: The netlist's resources, as netlist rows name them.
RESOURCES = ("lut", "ff", "bram", "dsp")
#: Where the flow writes the measured rows (a source checkout's, beside docs/synth.json: the
#: explorer's answers in docs/explore/ are its answers only).
DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "area_model.json"
#: How far a prediction may be over, in the fit's largest leave-one-out errors, before a
#: candidate is pruned: a row outside the fitted ones may miss by more than any fitted one did.
PRUNE_MARGIN = 2
#: The DP16KD's shapes (depth, width) Yosys picks from, 512 x 36 as the pseudo-dual-port
#: PDPW16KD.
_BRAM_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))
#: ... for a memory written a byte at a time (a byte-enable a 9-bit lane: 8 bits of it used).
_BRAM_BYTE_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 8), (1024, 16), (512, 32))
#: Memories this shallow or shallower go to distributed RAM or flip-flops, not block RAM.
_LUTRAM_DEPTH = 32
#: The density table's block RAMs (256 entries of 34 bits, read by the decision and by the
#: register file: two read ports, two PDPW16KDs).
_TABLE_BRAMS = 2


def _brams(depth, width, shapes=_BRAM_SHAPES):
    """DP16KDs of one ``depth x width`` memory: its best shape (one DP16KD a piece)."""
    return min(-(-depth // d) * -(-width // w) for d, w in shapes)


def memory_brams(p):
    """The block RAMs of the engine's memories at parameters ``p``, each memory's depth and
    width as the hardware sizes it (hw/engine_buffers.py: the accumulator's ``sums`` and its
    ``results`` FIFO, the transposer's ``lanes`` banks of each of its two blocks; hw/engine.py:
    the ``A`` queue; hw/gemm/: the weights and the loader's beats; the density table of sparse
    builds), each packed in its best DP16KD shape. Checked
    against Yosys' netlists memory by memory (docs/explore.md); what it misses the fit's
    constant takes."""
    from .hw.engine import A_QUEUE
    L, A, W, K, N, MT = (p[x] for x in ("lanes", "acc_width", "width", "k", "n", "acc_rows"))
    rows = MT * N // L
    total = _brams(rows, L * A) + _brams(rows - 2, L * A)
    # The transposer: two blocks (one filled while the other is read), each bank of each
    # block its own memory.
    cols_words = 1 << max((max(MT, K) // L - 1).bit_length(), 0)
    block_depth = 1 << max((max(K, N) * cols_words - 1).bit_length(), 1)
    total += 2 * L * _brams(block_depth, W)
    # The ``A`` queue: ``A_QUEUE`` beats of ``lanes`` elements and ``last``.
    total += _brams(A_QUEUE, L * W + 1)
    # The weights are written a bus word (``lanes`` elements) into an ``n_par``-element word:
    # byte enables.
    # Two weight sets (one loads while the other computes) in one memory.
    for depth, width, shapes in ((2 * K * N // p["n_par"], p["n_par"] * W, _BRAM_BYTE_SHAPES),
                                 (2 * K // L, L * W, _BRAM_SHAPES)):
        if depth > _LUTRAM_DEPTH:
            total += _brams(depth, width, shapes)
    return total + (_TABLE_BRAMS if p.get("sparse", True) else 0)


def _sparse(p):
    return 1.0 if p.get("sparse", True) else 0.0


#: Each figure's terms: ``{figure: {term name: function of the resolved parameters}}``.
#: Why these: the GEMM's ``n_par`` columns each hold an ``acc_width`` adder and its slice of the
#: weights' read-out; the bus datapath, the accumulator's adds and the writer are ``lanes``
#: wide; the compactor (sparse builds only) and the transposer rotate ``lanes`` lanes by any of
#: ``lanes`` positions; the GEMM walks ``k``-bit row masks; the monitor, the decision and the
#: density table are the sparse builds' own; a memory deeper or wider than one block RAM needs
#: read-out multiplexers and address decoding for every block RAM it takes. The memories'
#: shapes decide the block RAMs (:func:`memory_brams`).
TERMS = {
    "lut": {
        "1": lambda p: 1.0,
        "n_par": lambda p: p["n_par"],
        "lanes": lambda p: p["lanes"],
        "lanes^2": lambda p: p["lanes"] ** 2,
        "sparse*lanes^2": lambda p: _sparse(p) * p["lanes"] ** 2,
        "sparse": _sparse,
        "k": lambda p: p["k"],
        "block RAMs": memory_brams,
    },
    "ff": {
        "1": lambda p: 1.0,
        "n_par": lambda p: p["n_par"],
        "lanes": lambda p: p["lanes"],
        "sparse*lanes": lambda p: _sparse(p) * p["lanes"],
        "sparse": _sparse,
        "k": lambda p: p["k"],
    },
    "bram": {
        "1": lambda p: 1.0,
        "memories": memory_brams,
    },
    "dsp": {
        "1": lambda p: 1.0,
        "multipliers": lambda p: p["n_par"] * p["k_par"],
        "sparse": _sparse,
    },
    "fmax_mhz": {
        "1": lambda p: 1.0,
        "log2 n_par": lambda p: math.log2(p["n_par"]),
        "log2 lanes": lambda p: math.log2(p["lanes"]),
    },
}


@dataclass(frozen=True)
class Fit:
    """One figure's least-squares fit and its leave-one-out error."""

    figure: str
    terms: tuple            # term names
    coefficients: tuple     # one a term
    rows: int
    loo_errors: tuple       # (predicted - measured) / measured of each row, fitted without it

    @property
    def max_error(self):
        """The largest relative leave-one-out error (0 with too few rows to validate)."""
        return max((abs(e) for e in self.loo_errors), default=0.0)

    @property
    def mean_error(self):
        return float(np.mean(np.abs(self.loo_errors))) if self.loo_errors else 0.0

    def predict(self, params):
        f = TERMS[self.figure]
        return float(sum(c * f[t](params) for t, c in zip(self.terms, self.coefficients)))


def _solve(figure, params_list, measured):
    terms = TERMS[figure]
    x = np.array([[f(p) for f in terms.values()] for p in params_list], dtype=float)
    coefficients, *_ = np.linalg.lstsq(x, np.asarray(measured, dtype=float), rcond=None)
    return tuple(terms), tuple(float(c) for c in coefficients)


def fit(figure, params_list, measured):
    """:class:`Fit` of ``figure`` on rows ``params_list`` (resolved parameters) measuring
    ``measured``; leave-one-out needs more rows than terms, else no error is given."""
    names, coefficients = _solve(figure, params_list, measured)
    errors = []
    if len(params_list) > len(names):
        for i, (p, y) in enumerate(zip(params_list, measured)):
            rest = [q for j, q in enumerate(params_list) if j != i]
            _, c = _solve(figure, rest, [m for j, m in enumerate(measured) if j != i])
            predicted = sum(ci * TERMS[figure][t](p) for t, ci in zip(names, c))
            errors.append((predicted - y) / y)
    return Fit(figure, names, coefficients, len(params_list), tuple(errors))


@dataclass(frozen=True)
class AreaModel:
    """The fits of every figure the rows measure (none: an empty model, which prunes
    nothing)."""

    fits: dict = field(default_factory=dict)     # figure -> Fit

    @classmethod
    def from_rows(cls, rows):
        """Fitted on measured rows ``[{"params": resolved parameters, "lut": .., "ff": ..,
        "bram": .., "dsp": .., "fmax_mhz": .. or None}]``."""
        fits = {}
        for figure in (*RESOURCES, "fmax_mhz"):
            have = [r for r in rows if r.get(figure) is not None]
            if len(have) >= len(TERMS[figure]):
                fits[figure] = fit(figure, [r["params"] for r in have],
                                   [r[figure] for r in have])
        return cls(fits)

    @classmethod
    def load(cls, path=DEFAULT_PATH):
        """The model fitted on the rows kept at ``path``; an empty model if there are none."""
        try:
            rows = json.loads(Path(path).read_text())["rows"]
        except FileNotFoundError:
            rows = []
        return cls.from_rows(rows)

    def predict(self, params):
        """``{figure: predicted}`` of every fitted figure."""
        return {figure: f.predict(params) for figure, f in self.fits.items()}

    def surely_over(self, params, budget):
        """``[(resource, predicted, budget)]`` of the resources ``params`` needs more of than
        ``budget`` (explore_jobs.Budget) even if the prediction is over by
        :data:`PRUNE_MARGIN` times the fit's largest validation error (a resource whose fit
        has no validation error is never judged)."""
        out = []
        for resource in ("lut", "dsp", "bram"):
            f = self.fits.get(resource)
            if f is None or not f.loo_errors:
                continue
            predicted = f.predict(params)
            if predicted / (1 + PRUNE_MARGIN * f.max_error) > getattr(budget, resource):
                out.append((resource, round(predicted), getattr(budget, resource)))
        return out
