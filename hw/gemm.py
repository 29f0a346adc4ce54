"""Tile sparse GEMM (docs/interfaces.md#gemm): ``C = A·B``, ``A`` in ZVC rows, ``B`` resident.

Two datapaths behind one component (docs/gemm.md, "Two datapaths"): ``k_par = 1``, the
default, is the *broadcast* datapath of :mod:`spartan_rtl.hw.gemm_broadcast` (one nonzero per
pass times a whole ``n_par``-wide row of ``B``; ``B`` stored once, no conflicts); ``k_par > 1``
is the *replicated* datapath below (``k_par`` nonzeros per pass, ``B`` replicated or banked),
built stage by stage (weight buffer, row loader, issue, multiply, output). Both follow the same
loader, issue and output rules, so :mod:`spartan_rtl.golden.gemm` models both; what follows
describes the replicated one.

Dataflow (row-wise, Gustavson; docs/gemm.md has the diagrams)
    Row ``i`` of ``C`` is ``sum over nonzero a[i,k] of a[i,k] * B[k, :]``. The row's nonzeros
    (value and column ``k``), in column order, are cut into aligned *groups* of ``k_par``. For
    each column group ``j`` (``n_par`` columns, ``n / n_par`` of them) and each group, one *pass*
    reads the ``k_par`` matching ``B[k, j:j+n_par]`` slices, multiplies them by the ``a`` values
    (``k_par * n_par`` multipliers), reduces across ``k`` in an adder tree and accumulates into
    ``C[i, j:j+n_par]``. After the row's last group the column group's ``n_par`` sums go to the
    output FIFO; ``m_axis_c`` sends them as ``n_par / lanes`` beats. An all-zero row is one pass
    (a *zero-row token*: the output side sends ``n / lanes`` zero beats for it).

Pipeline
    loader (mask beat, then ``ceil(nnz/lanes)`` data beats into one of two row slots) -> issue
    (one pass per cycle) -> weight-buffer read -> multiply -> adder tree -> accumulate, FIFO
    push ``ISSUE_TO_PUSH`` = 3 cycles after the issue -> ``m_axis_c`` from the next cycle. Every
    stage after the issue runs without stalls: a pass that completes a column group issues only
    when it can reserve an output FIFO entry (credits), so back-pressure on ``m_axis_c`` holds
    the issue stage, then the loader, then ``s_axis_a_*``, and nothing is lost.

Weight buffer and conflicts
    ``B`` lives in ``k_par`` memories (``amaranth.lib.memory``, one read port each, words of
    ``n_par`` elements): ``b_banks`` banks (row ``k`` in bank ``k mod b_banks``), each stored
    ``k_par / b_banks`` times. A pass may read at most ``k_par / b_banks`` rows of one bank; a
    group that needs more is *split* into ``max over banks ceil(count / copies)`` passes, and
    every pass beyond the first is a *conflict cycle*. The default ``b_banks = 1`` replicates
    ``B`` ``k_par`` times and never conflicts; ``b_banks = k_par`` is classic banking (no
    replication; dense rows still conflict-free, sparse rows lose cycles).

Weights load
    ``s_axis_b`` is accepted only while no ``A`` tile is in flight, and a tile's first mask
    only while no ``B`` packet is being received or offered, so a tile uses the ``B`` complete
    when its first row started, and a ``B`` arriving mid-tile waits for the end of that tile
    (and holds back the next one). ``B``'s ``tlast`` returns the write pointer to ``B[0, 0]``;
    beats beyond ``k*n/lanes`` wrap around.

Dense-only variant
    ``sparse = false`` removes the zero-skipping logic for area comparison: no mask ranks, no
    column registers (entry ``e`` is column ``e``), every row ``k`` elements in ``k/lanes`` data
    beats (the compactor's dense-bypass form); the mask beat is still taken, its bits ignored.

Malformed ``A`` streams
    The mask decides everything: a row takes exactly ``ceil(popcount/lanes)`` data beats, the
    lanes beyond the popcount are ignored, and a data ``tlast`` in the wrong place only raises
    ``err_a_stream`` for that cycle; the mask's ``tlast`` ends a tile.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory

from . import ecp5
from . import params as P
from .block import Block
from .elements import log2, mux_tree, prefix_sums, select_onehot, tree_sum
from .gemm_broadcast import ISSUE_TO_PUSH as BROADCAST_ISSUE_TO_PUSH
from .gemm_broadcast import OUT_DEPTH as BROADCAST_OUT_DEPTH
from .gemm_broadcast import BroadcastGemm, gemm_members, weight_write_pointer

__all__ = ["SparseGemm", "BLOCK", "ISSUE_TO_PUSH", "FIFO_DEPTH"]

#: Cycles from a pass's issue to its column group's sums entering the output FIFO.
ISSUE_TO_PUSH = 3
#: Output FIFO entries (column groups of ``n_par`` sums, or zero-row tokens).
FIFO_DEPTH = 8

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
SIZE_BOUND = P.SizeBound(SIZE_TERMS, SIZE_LIMIT)


class SparseGemm(wiring.Component):
    """Tile sparse GEMM: the broadcast datapath for ``k_par = 1``, the replicated one otherwise.

    Parameters
    ----------
    lanes, width, signed, acc_width, k, n, k_par, n_par, b_banks, multiplier, sparse
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
                 n_par=None, b_banks=1, multiplier="inferred", sparse=True):
        # n_par None: follows n, as when ``spartan generate`` is not given it (hw/params.py).
        given = dict(lanes=lanes, width=width, signed=signed, acc_width=acc_width, k=k, n=n,
                     k_par=k_par, b_banks=b_banks, multiplier=multiplier, sparse=sparse)
        if n_par is not None:
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
    sparse = property(lambda self: self._p["sparse"])
    multiplier = property(lambda self: self._p["multiplier"])
    copies = property(lambda self: self._p["k_par"] // self._p["b_banks"])

    def elaborate(self, platform):
        if self.k_par == 1:
            m = Module()
            m.submodules.datapath = datapath = BroadcastGemm(self._p)
            wiring.connect(m, wiring.flipped(self), datapath)
            return m
        return self._elaborate_replicated()

    def _elaborate_replicated(self):
        # The replicated datapath (k_par > 1), stage by stage; ``carry`` holds what a stage
        # makes to the stages after it.
        m = Module()
        carry = SimpleNamespace()
        self._replicated_parameters(m, carry)
        self._replicated_weight_buffer(m, carry)
        self._replicated_row_loader(m, carry)
        self._replicated_issue(m, carry)
        self._replicated_multiply(m, carry)
        self._replicated_output(m, carry)
        return m

    def _replicated_parameters(self, m, carry):
        """Sizes and shapes every stage below reads."""
        p = self._p
        L, W, A = p["lanes"], p["width"], p["acc_width"]
        K, N, KP, NP, BB = p["k"], p["n"], p["k_par"], p["n_par"], p["b_banks"]
        COPIES = KP // BB
        CG = N // NP
        GROUPS = -(-K // KP)
        BEATS_PER_WORD = NP // L
        rows_per_bank = -(-K // BB)
        elem = signed(W) if p["signed"] else unsigned(W)
        SPARSE = p["sparse"]
        carry.A, carry.BB, carry.BEATS_PER_WORD = A, BB, BEATS_PER_WORD
        carry.CG, carry.COPIES, carry.GROUPS = CG, COPIES, GROUPS
        carry.K, carry.KP, carry.L, carry.N = K, KP, L, N
        carry.NP, carry.SPARSE, carry.W, carry.elem = NP, SPARSE, W, elem
        carry.p, carry.rows_per_bank = p, rows_per_bank

    def _replicated_weight_buffer(self, m, carry):
        """B, written row-major into ``b_banks`` banks of ``k_par / b_banks`` copies each."""
        BB, BEATS_PER_WORD, CG = carry.BB, carry.BEATS_PER_WORD, carry.CG
        COPIES, K, L, NP = carry.COPIES, carry.K, carry.L, carry.NP
        W, rows_per_bank = carry.W, carry.rows_per_bank
        b = self.s_axis_b
        tiles_in_flight = Signal(range(3))
        b_loading = Signal()
        m.d.comb += b.ready.eq(tiles_in_flight == 0)
        b_write = Signal()
        m.d.comb += b_write.eq(b.valid & b.ready)
        b_sub, b_cg, b_row = weight_write_pointer(m, b, b_write, b_loading, k=K, col_groups=CG,
                                                  beats_per_word=BEATS_PER_WORD)

        b_word = Cat(*[b.payload.data[i] for i in range(L)])
        read_ports = []  # index = bank * COPIES + copy
        for bank in range(BB):
            for copy in range(COPIES):
                mem = Memory(shape=unsigned(NP * W), depth=rows_per_bank * CG, init=[])
                m.submodules[f"b_bank{bank}_copy{copy}"] = mem
                granular = BEATS_PER_WORD > 1
                wp = mem.write_port(granularity=L * W if granular else None)
                m.d.comb += [
                    wp.addr.eq((b_row >> log2(BB)) * CG + b_cg),
                    wp.data.eq(Cat(*[b_word] * BEATS_PER_WORD)),
                ]
                hit = b_write & ((b_row & (BB - 1)) == bank) if BB > 1 else b_write
                if granular:
                    m.d.comb += wp.en.eq(Mux(hit, 1 << b_sub, 0))
                else:
                    m.d.comb += wp.en.eq(hit)
                read_ports.append(mem.read_port(transparent_for=()))
        carry.b, carry.b_loading, carry.read_ports = b, b_loading, read_ports
        carry.tiles_in_flight = tiles_in_flight

    def _replicated_row_loader(self, m, carry):
        """A rows: each mask and its data beats into one of two slots (value, column)."""
        K, L, SPARSE, W = carry.K, carry.L, carry.SPARSE, carry.W
        b, b_loading = carry.b, carry.b_loading
        ms, ds = self.s_axis_a_mask, self.s_axis_a_data
        idx_shape = range(max(K, 2))
        slot_full = [Signal(name=f"slot{s}_full") for s in range(2)]
        slot_nnz = ([Signal(range(K + 1), name=f"slot{s}_nnz") for s in range(2)] if SPARSE
                    else None)   # a dense row's count is K
        slot_last = [Signal(name=f"slot{s}_last") for s in range(2)]
        slot_val = [[Signal(W, name=f"slot{s}_val{e}") for e in range(K)] for s in range(2)]
        if SPARSE:
            slot_idx = [[Signal(idx_shape, name=f"slot{s}_idx{e}") for e in range(K)]
                        for s in range(2)]
        else:   # a dense row's entry e is column e
            slot_idx = [[Const(e, idx_shape) for e in range(K)] for s in range(2)]

        ld_data = Signal()                       # receiving a row's data beats
        ld_slot = Signal()
        ld_beat = Signal(range(max(K // L, 2)))
        ld_beats_left = Signal(range(K // L + 1))
        tile_start = Signal(init=1)              # the next mask starts a tile

        ld_free = Mux(ld_slot, slot_full[1], slot_full[0]) == 0
        m.d.comb += [
            ms.ready.eq(~ld_data & ld_free & ~(tile_start & (b_loading | b.valid))),
            ds.ready.eq(ld_data),
        ]
        mask_in = ms.payload.data
        nnz_in = Signal(range(K + 1))
        if SPARSE:
            mask_reg = Signal(K)
            ranks = [Signal(range(K + 1), name=f"rank{j}") for j in range(K)]
            rank_in, total_in = prefix_sums([mask_in[j] for j in range(K)])
            m.d.comb += nnz_in.eq(total_in)
        else:
            m.d.comb += nnz_in.eq(K)
        mask_accept = Signal()
        data_accept = Signal()
        m.d.comb += [mask_accept.eq(ms.valid & ms.ready), data_accept.eq(ds.valid & ds.ready)]
        set_full = [Signal(name=f"set_full{s}") for s in range(2)]
        clear_full = [Signal(name=f"clear_full{s}") for s in range(2)]

        with m.If(mask_accept):
            m.d.sync += tile_start.eq(ms.payload.last)
            if SPARSE:
                m.d.sync += mask_reg.eq(mask_in)
                m.d.sync += [ranks[j].eq(rank_in[j]) for j in range(K)]
            for s in range(2):
                with m.If(ld_slot == s):
                    m.d.sync += slot_last[s].eq(ms.payload.last)
                    if SPARSE:
                        m.d.sync += slot_nnz[s].eq(nnz_in)
            with m.If(nnz_in == 0):
                m.d.comb += [set_full[s].eq(ld_slot == s) for s in range(2)]
                m.d.sync += ld_slot.eq(~ld_slot)
            with m.Else():
                m.d.sync += [ld_data.eq(1), ld_beat.eq(0),
                             ld_beats_left.eq((nnz_in + L - 1) >> log2(L))]

        # Column of each lane of the current data beat: the j whose rank is beat*lanes + lane.
        lane_bits = log2(L)
        lane_idx = []
        for lane in range(L if SPARSE else 0):
            hits = []
            for j in range(K):
                hit = mask_reg[j] & ((ranks[j] >> lane_bits) == ld_beat)
                if lane_bits:
                    hit = hit & (ranks[j][:lane_bits] == lane)
                hits.append(hit)
            sig = Signal(idx_shape, name=f"lane{lane}_idx")
            m.d.comb += sig.eq(select_onehot([Const(j, idx_shape) for j in range(K)], hits,
                                             sig.shape().width))
            lane_idx.append(sig)

        bad_mask = mask_accept & ~mask_in.all() if not SPARSE else 0
        m.d.comb += self.err_a_stream.eq(
            (data_accept & (ds.payload.last != (ld_beats_left == 1))) | bad_mask)
        with m.If(data_accept):
            m.d.sync += [ld_beat.eq(ld_beat + 1), ld_beats_left.eq(ld_beats_left - 1)]
            with m.If(ld_beats_left == 1):
                m.d.comb += [set_full[s].eq(ld_slot == s) for s in range(2)]
                m.d.sync += [ld_slot.eq(~ld_slot), ld_data.eq(0)]
            for s in range(2):
                for e in range(K):
                    with m.If((ld_slot == s) & (ld_beat == e // L)):
                        m.d.sync += slot_val[s][e].eq(ds.payload.data[e % L])
                        if SPARSE:
                            m.d.sync += slot_idx[s][e].eq(lane_idx[e % L])
        carry.clear_full, carry.idx_shape = clear_full, idx_shape
        carry.mask_accept, carry.set_full = mask_accept, set_full
        carry.slot_full, carry.slot_idx = slot_full, slot_idx
        carry.slot_last, carry.slot_nnz = slot_last, slot_nnz
        carry.slot_val, carry.tile_start = slot_val, tile_start

    def _replicated_issue(self, m, carry):
        """Passes: ``k_par`` entries a cycle, each routed to the bank copy that serves it."""
        BB, CG, COPIES = carry.BB, carry.CG, carry.COPIES
        GROUPS, K, KP, NP = carry.GROUPS, carry.K, carry.KP, carry.NP
        SPARSE, W, clear_full = carry.SPARSE, carry.W, carry.clear_full
        idx_shape, mask_accept = carry.idx_shape, carry.mask_accept
        read_ports, rows_per_bank = carry.read_ports, carry.rows_per_bank
        set_full, slot_full = carry.set_full, carry.slot_full
        slot_idx, slot_last = carry.slot_idx, carry.slot_last
        slot_nnz, slot_val = carry.slot_nnz, carry.slot_val
        tile_start, tiles_in_flight = carry.tile_start, carry.tiles_in_flight
        c_slot = Signal()
        c_cg = Signal(range(max(CG, 2)))
        c_grp = Signal(range(max(GROUPS, 2)))
        c_sub = Signal(range(max(BB, 2)))
        outstanding = Signal(range(FIFO_DEPTH + 1))

        cur_full = Mux(c_slot, slot_full[1], slot_full[0])
        cur_nnz = Signal(range(K + 1))
        cur_last = Signal()
        m.d.comb += [cur_nnz.eq(Mux(c_slot, slot_nnz[1], slot_nnz[0]) if SPARSE else K),
                     cur_last.eq(Mux(c_slot, slot_last[1], slot_last[0]))]

        # The group's k_par entries (value, column), from the slot being computed.
        g_val, g_idx, g_valid = [], [], []
        for lane in range(KP):
            per_slot_val, per_slot_idx = [], []
            for s in range(2):
                vals = [slot_val[s][g * KP + lane] if g * KP + lane < K else Const(0, W)
                        for g in range(GROUPS)]
                idxs = [slot_idx[s][g * KP + lane] if g * KP + lane < K else Const(0, idx_shape)
                        for g in range(GROUPS)]
                per_slot_val.append(mux_tree(vals, c_grp))
                per_slot_idx.append(mux_tree(idxs, c_grp))
            v = Signal(W, name=f"g_val{lane}")
            i = Signal(idx_shape, name=f"g_idx{lane}")
            ok = Signal(name=f"g_valid{lane}")
            m.d.comb += [v.eq(Mux(c_slot, per_slot_val[1], per_slot_val[0])),
                         i.eq(Mux(c_slot, per_slot_idx[1], per_slot_idx[0])),
                         ok.eq((c_grp * KP + lane) < cur_nnz)]
            g_val.append(v)
            g_idx.append(i)
            g_valid.append(ok)

        # Bank of each entry and its rank among the group's entries of the same bank; the
        # entry is read in sub-pass rank // COPIES by copy rank % COPIES of its bank.
        bank_bits = log2(BB)
        copy_bits = log2(COPIES)
        g_bank = [g_idx[lane][:bank_bits] if bank_bits else Const(0, 1) for lane in range(KP)]
        g_rank = []
        for lane in range(KP):
            if lane == 0:
                g_rank.append(Const(0, 1))
                continue
            same = [g_valid[o] & (g_bank[o] == g_bank[lane]) for o in range(lane)]
            r = Signal(range(lane + 1), name=f"g_bankrank{lane}")
            m.d.comb += r.eq(tree_sum(same))
            g_rank.append(r)
        g_subpass = [g_rank[lane] >> copy_bits for lane in range(KP)]
        # Lanes below COPIES always fall in sub-pass 0 (their bank rank is below COPIES).
        later = [g_valid[lane] & (g_subpass[lane] > c_sub) for lane in range(COPIES, KP)]
        last_sub = Signal()
        m.d.comb += last_sub.eq(~Cat(*later).any() if later else 1)
        active = [g_valid[lane] & (g_subpass[lane] == c_sub) for lane in range(KP)]
        active_count = Signal(range(KP + 1))
        m.d.comb += active_count.eq(tree_sum(active))

        zero_row = Signal()
        last_grp = Signal()
        m.d.comb += [zero_row.eq(cur_nnz == 0),
                     last_grp.eq((c_grp + 1) == ((cur_nnz + KP - 1) >> log2(KP)))]
        group_done = Signal()
        row_done = Signal()
        m.d.comb += [group_done.eq(zero_row | (last_sub & last_grp)),
                     row_done.eq(zero_row | (last_sub & last_grp & (c_cg == CG - 1)))]
        issue = Signal()
        m.d.comb += issue.eq(cur_full & (~group_done | (outstanding < FIFO_DEPTH)))

        # Route each active entry to the memory (bank, copy) that serves it.
        addr_shape = range(max(rows_per_bank * CG, 2))
        a_routed = []
        for bank in range(BB):
            for copy in range(COPIES):
                sels = []
                for lane in range(KP):
                    sel = active[lane] & (g_rank[lane][:copy_bits] == copy if copy_bits else 1)
                    if bank_bits:
                        sel = sel & (g_bank[lane] == bank)
                    sels.append(sel)
                a = Signal(W, name=f"a_bank{bank}_copy{copy}")
                addr = Signal(addr_shape, name=f"addr_bank{bank}_copy{copy}")
                rows = [(g_idx[lane] >> bank_bits) * CG + c_cg for lane in range(KP)]
                m.d.comb += [a.eq(select_onehot(g_val, sels, W)),
                             addr.eq(select_onehot(rows, sels, addr.shape().width))]
                m.d.comb += read_ports[bank * COPIES + copy].addr.eq(addr)
                a_routed.append(a)

        with m.If(issue):
            with m.If(row_done):
                m.d.sync += [c_cg.eq(0), c_grp.eq(0), c_sub.eq(0), c_slot.eq(~c_slot)]
                m.d.comb += [clear_full[s].eq(c_slot == s) for s in range(2)]
            with m.Elif(last_sub & last_grp):
                m.d.sync += [c_cg.eq(c_cg + 1), c_grp.eq(0), c_sub.eq(0)]
            with m.Elif(last_sub):
                m.d.sync += [c_grp.eq(c_grp + 1), c_sub.eq(0)]
            with m.Else():
                m.d.sync += c_sub.eq(c_sub + 1)

        for s in range(2):
            with m.If(set_full[s]):
                m.d.sync += slot_full[s].eq(1)
            with m.Elif(clear_full[s]):
                m.d.sync += slot_full[s].eq(0)

        tile_begins = mask_accept & tile_start
        tile_ends = issue & row_done & cur_last
        m.d.sync += tiles_in_flight.eq(tiles_in_flight + tile_begins - tile_ends)

        m.d.comb += [
            self.stat_busy.eq(tiles_in_flight != 0),
            self.stat_issue.eq(issue),
            self.stat_conflict.eq(issue & (c_sub != 0)),
            self.stat_stall.eq(cur_full & ~issue),
            self.stat_empty_row.eq(issue & zero_row),
            self.stat_macs.eq(Mux(issue, active_count * NP, 0)),
        ]
        carry.a_routed, carry.c_grp, carry.c_sub = a_routed, c_grp, c_sub
        carry.cur_last, carry.group_done = cur_last, group_done
        carry.issue, carry.outstanding = issue, outstanding
        carry.row_done, carry.zero_row = row_done, zero_row

    def _replicated_multiply(self, m, carry):
        """The ``k_par x n_par`` products, their sums and the accumulators."""
        A, KP, NP, W = carry.A, carry.KP, carry.NP, carry.W
        a_routed, c_grp, c_sub = carry.a_routed, carry.c_grp, carry.c_sub
        cur_last, elem, group_done = carry.cur_last, carry.elem, carry.group_done
        issue, p, read_ports = carry.issue, carry.p, carry.read_ports
        row_done, zero_row = carry.row_done, carry.zero_row
        flags = data.StructLayout({"valid": 1, "first": 1, "push": 1, "zero": 1, "tlast": 1})
        f1, f2, f3 = Signal(flags), Signal(flags), Signal(flags)
        m.d.sync += [
            f1.valid.eq(issue),
            f1.first.eq((c_grp == 0) & (c_sub == 0)),
            f1.push.eq(issue & group_done),
            f1.zero.eq(zero_row),
            f1.tlast.eq(cur_last & row_done),
            f2.eq(f1),
            f3.eq(f2),
        ]
        a1 = [Signal(elem, name=f"a1_{i}") for i in range(KP)]
        m.d.sync += [a1[i].eq(a_routed[i]) for i in range(KP)]

        # Exact widths, or acc_width bits when that is less: everything is kept modulo
        # 2**acc_width from there on (bits above acc_width never reach C).
        def exact_or_acc(bits):
            if bits >= A:
                return unsigned(A)
            return signed(bits) if p["signed"] else unsigned(bits)
        prod_shape = exact_or_acc(2 * W)
        prods = [[Signal(prod_shape, name=f"prod{i}_{c}") for c in range(NP)] for i in range(KP)]
        for i in range(KP):
            word = read_ports[i].data
            for c in range(NP):
                bval = word[c * W:(c + 1) * W]
                bval = bval.as_signed() if p["signed"] else bval
                m.d.sync += prods[i][c].eq(a1[i] * bval)

        sum_shape = exact_or_acc(2 * W + log2(KP))
        sums = [Signal(sum_shape, name=f"sum{c}") for c in range(NP)]
        m.d.sync += [sums[c].eq(tree_sum(prods[i][c] for i in range(KP))) for c in range(NP)]

        acc = [Signal(A, name=f"acc{c}") for c in range(NP)]
        acc_next = [Signal(A, name=f"acc_next{c}") for c in range(NP)]
        for c in range(NP):
            m.d.comb += acc_next[c].eq(Mux(f3.first, 0, acc[c]) + sums[c])
            with m.If(f3.valid):
                m.d.sync += acc[c].eq(acc_next[c])
        carry.acc_next, carry.f3 = acc_next, f3

    def _replicated_output(self, m, carry):
        """Finished column groups through the output FIFO to ``m_axis_c``."""
        A, BEATS_PER_WORD, L = carry.A, carry.BEATS_PER_WORD, carry.L
        N, NP, acc_next, f3 = carry.N, carry.NP, carry.acc_next, carry.f3
        group_done, issue = carry.group_done, carry.issue
        outstanding = carry.outstanding
        entry = data.StructLayout({"sums": data.ArrayLayout(A, NP), "zero": 1, "tlast": 1})
        m.submodules.out_fifo = out_fifo = fifo.SyncFIFO(width=entry.size, depth=FIFO_DEPTH)
        pushed = Signal(entry)
        m.d.comb += [pushed.zero.eq(f3.zero), pushed.tlast.eq(f3.tlast)]
        m.d.comb += [pushed.sums[c].eq(acc_next[c]) for c in range(NP)]
        m.d.comb += [out_fifo.w_data.eq(pushed), out_fifo.w_en.eq(f3.valid & f3.push)]

        head = Signal(entry)
        m.d.comb += head.eq(out_fifo.r_data)
        o_beat = Signal(range(max(N // L, 2)))
        final = Signal()
        m.d.comb += final.eq(o_beat == Mux(head.zero, N // L - 1, BEATS_PER_WORD - 1))
        c_out = self.m_axis_c
        chunks = [Cat(*[head.sums[w * L + lane] for lane in range(L)])
                  for w in range(BEATS_PER_WORD)]
        chunk = mux_tree(chunks, o_beat)
        m.d.comb += [
            c_out.valid.eq(out_fifo.r_rdy),
            c_out.payload.data.eq(Mux(head.zero, 0, chunk)),
            c_out.payload.last.eq(head.tlast & final),
        ]
        pop = Signal()
        m.d.comb += [pop.eq(c_out.valid & c_out.ready & final), out_fifo.r_en.eq(pop)]
        with m.If(c_out.valid & c_out.ready):
            m.d.sync += o_beat.eq(Mux(final, 0, o_beat + 1))

        m.d.sync += outstanding.eq(outstanding + (issue & group_done) - pop)

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
    bits = gemm.copies * gemm.k * gemm.n * gemm.width
    issue_to_push = BROADCAST_ISSUE_TO_PUSH if gemm.k_par == 1 else ISSUE_TO_PUSH
    return {
        "latency_cycles": issue_to_push + 2,
        "throughput_beats_per_cycle": 1.0,
        "datapath": "broadcast" if gemm.k_par == 1 else "replicated",
        "macs_per_cycle": gemm.k_par * gemm.n_par,
        "issue_to_push_cycles": issue_to_push,
        "output_fifo_entries": BROADCAST_OUT_DEPTH if gemm.k_par == 1 else FIFO_DEPTH,
        "weight_buffer": {"memories": gemm.k_par, "banks": gemm.b_banks, "copies": gemm.copies,
                          "word_bits": gemm.n_par * gemm.width, "bits": bits},
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
