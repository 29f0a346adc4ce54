"""Tile sparse GEMM (docs/interfaces.md#gemm): ``C = A·B``, ``A`` in ZVC rows, ``B`` resident.

This module is what the outside sees: the parameters and their checks, the ports
(:func:`gemm_members`), the statistics strobes, the front class :class:`SparseGemm` and the
block description. Behind the ports, one of two datapaths (docs/gemm.md, "Two datapaths"):

- :mod:`.broadcast` (``k_par = 1``, the default): one nonzero per pass times a whole
  ``n_par``-wide row slice of ``B``; ``B`` stored once, no conflicts.
- :mod:`.replicated` (``k_par > 1``): ``k_par`` nonzeros per pass, ``B`` replicated or banked.
  It serves the configurations that want more multipliers than a row slice of ``B`` is wide
  (``n_par`` is at most ``n``; a narrow layer, ``n`` of 8, say, gets ``k_par * n_par`` of
  them). docs/synth.md's figure of merit made the broadcast one the default; docs/gemm.md
  compares the two in cycles and area.
- :mod:`.parts`: what both build alike (the ``B`` write pointer and write ports, the row
  loader's walk through the ``A`` streams, the product widths, the output's beats).

Both follow the same loader, issue and output rules, so :mod:`spartan_rtl.golden.gemm` models
both; only their constants (issue to push, output entries) differ.

Weights load
    One set (``weight_sets = 1``): ``s_axis_b`` is accepted only while no ``A`` tile is in
    flight, and a tile's first mask only while no ``B`` packet is being received or offered, so
    a tile uses the ``B`` complete when its first row started, and a ``B`` arriving mid-tile
    waits for the end of that tile (and holds back the next one). ``B``'s ``tlast`` returns the
    write pointer to ``B[0, 0]``; beats beyond ``k*n/lanes`` wrap around.

    Two sets (``weight_sets = 2``, broadcast datapath): ``B`` packets (chunks, each ended by
    ``tlast``) and ``A`` tiles pair up in order: tile ``t`` multiplies by chunk ``t``. Chunk
    ``c`` goes into set ``c mod 2``, accepted while the tile before it (``c - 1``) computes:
    it waits only for tile ``c - 2``, the set's last user, to end; tile ``t``'s first mask
    waits until chunk ``t`` is complete. So a producer that sends each tile's ``B`` before the
    tile hides every load behind the tile before it.

Dense-only variant
    ``sparse = false`` removes the zero-skipping logic for area comparison, every row ``k``
    elements in ``k/lanes`` data beats (the compactor's dense-bypass form); the mask beat is
    still taken, its bits ignored.

Malformed ``A`` streams
    The mask decides everything: a row takes exactly ``ceil(popcount/lanes)`` data beats, the
    lanes beyond the popcount are ignored, and a data ``tlast`` in the wrong place only raises
    ``err_a_stream`` for that cycle; the mask's ``tlast`` ends a tile.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .. import ecp5
from .. import params as P
from ..block import Block
from ..elements import beat_layout
from . import broadcast, replicated
from .parts import mask_layout

__all__ = ["SparseGemm", "BLOCK", "PARAMS", "check_params", "SIZE_BOUND", "CORE_SIZE_BOUND",
           "STAT_PORTS",
           "gemm_members", "sim_models"]

PARAMS = (
    P.lanes_param(),
    P.integer("width", 8, 1, 32, "bits per A and B element"),
    P.flag("signed", True, "elements are two's complement (false: unsigned)"),
    P.integer("acc_width", 32, 1, 64, "bits per C accumulator; sums wrap modulo 2**acc_width"),
    P.integer("k", 64, 1, 1024, "K: A columns = B rows, a multiple of lanes"),
    P.integer("n", 64, 1, 1024, "N: B and C columns, a multiple of lanes"),
    P.power_of_two("k_par", 1, 1, 64, "multipliers along K: nonzeros of a row per pass (1: the "
                                      "broadcast datapath, B stored once; more: B replicated)"),
    P.power_of_two("n_par", 64, 1, 256,
                   "multipliers along N: C columns per pass, a multiple of lanes dividing n"),
    P.power_of_two("b_banks", 1, 1, 64,
                   "weight-buffer banks (row k in bank k mod b_banks), each stored k_par/b_banks "
                   "times; 1 = fully replicated, conflict-free"),
    P.integer("weight_sets", 1, 1, 2,
              "B chunks held (k_par 1): 1, one resident B, used by every tile that starts "
              "after it; 2, double-buffered: each A tile takes the next B chunk, which loads "
              "while the tile before computes"),
    P.choice("multiplier", "inferred", ("inferred", "ecp5"),
             "inferred: a '*' for any tool; ecp5: Lattice MULT18X18D slices with their own "
             "registers (k_par 1, width up to 18; ships a simulation model)"),
    P.flag("sparse", True, "false: a dense-only GEMM for area comparison (masks ignored, every "
                           "row k elements in k/lanes data beats, no zero skipping)"),
)


def check_params(p):
    lanes = p["lanes"]
    for name in ("k", "n"):
        if p[name] % lanes:
            raise ValueError(f"{name} must be a multiple of lanes ({lanes}), not {p[name]!r}")
    if p["k_par"] > p["k"]:
        raise ValueError(f"k_par must be at most k ({p['k']}), not {p['k_par']!r}")
    if p["n_par"] % lanes or p["n"] % p["n_par"]:
        raise ValueError(f"n_par must be a multiple of lanes ({lanes}) dividing n ({p['n']}), "
                         f"not {p['n_par']!r}")
    if p["multiplier"] == "ecp5" and p["k_par"] != 1:
        raise ValueError(f"multiplier=ecp5 needs k_par 1 (the broadcast datapath), "
                         f"not {p['k_par']!r}")
    if p["multiplier"] == "ecp5" and p["width"] > ecp5.MAX_WIDTH:
        raise ValueError(f"width must be at most {ecp5.MAX_WIDTH} with multiplier=ecp5, "
                         f"not {p['width']!r}")
    if p.get("weight_sets", 1) == 2 and p["k_par"] != 1:   # (the core holds one set)
        raise ValueError(f"weight_sets=2 needs k_par 1 (the broadcast datapath), "
                         f"not {p['k_par']!r}")
    if p["b_banks"] > p["k_par"]:
        raise ValueError(f"b_banks must be a power of two from 1 to k_par ({p['k_par']}), "
                         f"not {p['b_banks']!r}")


def _replicated_sparse(p):
    return p["k_par"] > 1 and p.get("sparse", True)   # (the core and engine are sparse)


#: The elaboration-size estimate of the GEMM (and of the core's and engine's GEMM): one unit is
#: about a millisecond of ``spartan generate`` on the machine it was measured on (2 shared
#: cores), and memory follows time (about 1.5 GB at 200 s). docs/interfaces.md, "Elaboration
#: size", lists the runs. Terms: the replicated loader's rank scan (a prefix sum per mask bit,
#: expanded once per use: quadratic in k) and its per-lane column selects; the row loader; the
#: multipliers; the replicated datapath's routing of entries to weight memories (with bank
#: compares when banked); the weight buffer's bits (Verilog spells out every word).
SIZE_TERMS = (
    ("k", "[k_par>1 and sparse: k*k/2 + 8*k*lanes]",
     lambda p: p["k"] * p["k"] // 2 + 8 * p["k"] * p["lanes"] if _replicated_sparse(p) else 0),
    ("k", "32*k", lambda p: 32 * p["k"]),
    ("k_par", "8*k_par*n_par", lambda p: 8 * p["k_par"] * p["n_par"]),
    ("k_par", "[k_par>1: 4*k_par*k_par, 16*k_par*k_par with b_banks>1]",
     lambda p: (16 if p["b_banks"] > 1 else 4) * p["k_par"] ** 2 if p["k_par"] > 1 else 0),
    ("n", "k*n*width*(k_par/b_banks)/64",
     lambda p: p["k"] * p["n"] * p["width"] * (p["k_par"] // p["b_banks"]) // 64),
)
#: The largest estimate accepted: measured runs of up to this size took at most 190 s and
#: 1.5 GB; the advertised maximum (lanes=1 k=1024 n=1024 k_par=64 n_par=256 b_banks=64, 892928)
#: ran out of 6 GB after 8 minutes.
SIZE_LIMIT = 200_000
#: The core holds one ``B`` (it has no ``weight_sets``): the GEMM's second set is its own term.
CORE_SIZE_BOUND = P.SizeBound(SIZE_TERMS, SIZE_LIMIT)
SIZE_BOUND = P.SizeBound(SIZE_TERMS + (
    ("weight_sets", "[weight_sets=2: k*n*width/64]",
     lambda p: p["k"] * p["n"] * p["width"] // 64 if p["weight_sets"] == 2 else 0),
), SIZE_LIMIT)


def gemm_members(p):
    """The GEMM's ports (both datapaths): streams, statistics strobes, the error flag."""
    L, W, A, K = p["lanes"], p["width"], p["acc_width"], p["k"]
    return {
        "s_axis_b": In(stream.Signature(beat_layout(L, W))),
        "s_axis_a_mask": In(stream.Signature(mask_layout(K))),
        "s_axis_a_data": In(stream.Signature(beat_layout(L, W))),
        "m_axis_c": Out(stream.Signature(beat_layout(L, A))),
        "stat_busy": Out(1),
        "stat_issue": Out(1),
        "stat_conflict": Out(1),
        "stat_stall": Out(1),
        "stat_empty_row": Out(1),
        "stat_macs": Out(range(p["k_par"] * p["n_par"] + 1)),
        "err_a_stream": Out(1),
    }


#: ``n_par`` not given to :class:`SparseGemm`: it follows ``n``, as when ``spartan generate``
#: is not given it (hw/params.py).
FOLLOW_N = object()


class SparseGemm(wiring.Component):
    """Tile sparse GEMM: the broadcast datapath for ``k_par = 1``, the replicated one otherwise.

    Parameters
    ----------
    lanes, width, signed, acc_width, k, n, k_par, n_par, b_banks, weight_sets, multiplier, sparse
        See ``spartan list``; checked here with the generator's messages.

    Members
    -------
    s_axis_b : In(stream)       ``B`` row-major, ``lanes`` elements per beat
    s_axis_a_mask : In(stream)  one ``k``-bit mask per ``A`` row, ``last`` on the tile's last row
    s_axis_a_data : In(stream)  each row's nonzeros, ``lanes`` per beat
    m_axis_c : Out(stream)      ``C`` row-major, ``lanes`` ``acc_width``-bit sums per beat
    stat_* : Out                per-cycle statistics strobes (see :data:`STAT_PORTS`)
    err_a_stream : Out          a data ``tlast`` disagreed with its mask, or (dense-only) a mask
                                was not all ones; flagged, otherwise ignored
    """

    def __init__(self, *, lanes=8, width=8, signed=True, acc_width=32, k=64, n=64, k_par=1,
                 n_par=FOLLOW_N, b_banks=1, weight_sets=1, multiplier="inferred", sparse=True):
        given = dict(lanes=lanes, width=width, signed=signed, acc_width=acc_width, k=k, n=n,
                     k_par=k_par, b_banks=b_banks, weight_sets=weight_sets,
                     multiplier=multiplier, sparse=sparse)
        if n_par is not FOLLOW_N:   # (None, like any value, is checked: refused)
            given["n_par"] = n_par
        p = BLOCK.resolve(given)
        self._p = p
        super().__init__(gemm_members(p))

    lanes = property(lambda self: self._p["lanes"])
    width = property(lambda self: self._p["width"])
    signed = property(lambda self: self._p["signed"])
    acc_width = property(lambda self: self._p["acc_width"])
    k = property(lambda self: self._p["k"])
    n = property(lambda self: self._p["n"])
    k_par = property(lambda self: self._p["k_par"])
    n_par = property(lambda self: self._p["n_par"])
    b_banks = property(lambda self: self._p["b_banks"])
    weight_sets = property(lambda self: self._p["weight_sets"])
    sparse = property(lambda self: self._p["sparse"])
    multiplier = property(lambda self: self._p["multiplier"])
    copies = property(lambda self: self._p["k_par"] // self._p["b_banks"])

    def elaborate(self, platform):
        if self.k_par > 1:
            # Built on these ports, in this module: the replicated datapath's Verilog names
            # have never had a submodule's prefix.
            return replicated.build(self, self._p)
        m = Module()
        m.submodules.datapath = datapath = broadcast.BroadcastGemm(self._p, self.signature)
        wiring.connect(m, wiring.flipped(self), datapath)
        return m


#: The statistics ports: per-cycle strobes a wrapper (the core's counters) accumulates.
STAT_PORTS = {
    "stat_busy": "1 while an A tile is in flight (its first mask accepted, its last pass not "
                 "yet issued)",
    "stat_issue": "1 in every cycle a pass issues (the multipliers are busy)",
    "stat_conflict": "1 in every cycle lost to a weight-bank conflict (a split group's extra "
                     "pass); summed, CONFLICT_CYCLES",
    "stat_stall": "1 when a row is ready but its pass waits for an output FIFO entry "
                  "(m_axis_c back-pressure)",
    "stat_empty_row": "1 in the one cycle an all-zero row issues",
    "stat_macs": "useful multiply-accumulates issued this cycle (active nonzeros * n_par); "
                 "summed over a tile, sum of nnz * n",
    "err_a_stream": "1 in the cycle a data beat is taken whose tlast disagrees with its row's "
                    "mask (tlast on a row's last data beat only; the mask wins, the beat is used "
                    "as the mask says), or, in the dense-only variant, a mask that is not all "
                    "ones (ignored: the row is taken whole)",
}


def _info(gemm):
    bits = gemm.copies * gemm.weight_sets * gemm.k * gemm.n * gemm.width
    datapath = broadcast if gemm.k_par == 1 else replicated
    issue_to_push = datapath.ISSUE_TO_PUSH
    return {
        "latency_cycles": issue_to_push + 2,
        "throughput_beats_per_cycle": 1.0,
        "datapath": "broadcast" if gemm.k_par == 1 else "replicated",
        "macs_per_cycle": gemm.k_par * gemm.n_par,
        "issue_to_push_cycles": issue_to_push,
        "output_fifo_entries": broadcast.OUT_DEPTH if gemm.k_par == 1 else replicated.FIFO_DEPTH,
        "weight_buffer": {"memories": gemm.k_par, "banks": gemm.b_banks, "copies": gemm.copies,
                          "sets": gemm.weight_sets, "word_bits": gemm.n_par * gemm.width,
                          "bits": bits},
        "stats_ports": STAT_PORTS,
        **sim_models(gemm.multiplier),
    }


def sim_models(multiplier):
    """The manifest's ``sim_models`` (files to simulate with, never to synthesise) and the
    files themselves, for a GEMM (or a core) built with ``multiplier``."""
    if multiplier != "ecp5":
        return {"sim_models": []}
    return {"sim_models": [ecp5.SIM_MODEL_FILE],
            "extra_files": {ecp5.SIM_MODEL_FILE: ecp5.SIM_MODEL}}


BLOCK = Block(
    name="gemm",
    top="spartan_gemm",
    summary="tile sparse GEMM: C = A.B, A in ZVC rows, B resident, cycles proportional to nonzeros",
    params=PARAMS,
    check=check_params,
    build=lambda **p: SparseGemm(**p),
    info=_info,
    size_bound=SIZE_BOUND,
)
