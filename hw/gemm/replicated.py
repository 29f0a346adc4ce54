"""Replicated sparse GEMM (``k_par > 1``): each pass ``k_par`` nonzeros of a row, each times its
own row slice of ``B``, which is stored ``k_par / b_banks`` times (docs/gemm.md, "Replicated
datapath").

Why it is kept
    The broadcast datapath (:mod:`spartan_rtl.hw.gemm.broadcast`) has ``n_par`` multipliers,
    at most ``n`` of them. This one has ``k_par * n_par``: more multiply-accumulates per cycle
    than a narrow ``B`` (``n`` of 8, say) gives the other, at the price of ``B``'s copies, the
    operand routing and group rounding. docs/synth.md's figure of merit made the broadcast one
    the default; docs/gemm.md compares the two in cycles and area.

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
    replication; dense rows still conflict-free, sparse rows lose cycles). ``s_axis_b`` is
    ready while no ``A`` tile is in flight.

Dense-only variant
    No mask ranks and no column registers: entry ``e`` of a row is column ``e``.

Built as one module on the front's own ports (:func:`build`), stage by stage: each stage
function takes what earlier stages made and returns what later ones use. The stages are not
components of their own: the generated Verilog keeps the flat names it has always had.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo
from amaranth.lib.memory import Memory

from ..elements import log2, mux_tree, prefix_sums, select_onehot, tree_sum
from .parts import (
    RowCursor,
    entry_layout,
    exact_or_acc,
    send_entries,
    weight_write_pointer,
    write_weights,
)

__all__ = ["build", "ISSUE_TO_PUSH", "FIFO_DEPTH"]

#: Cycles from a pass's issue to its column group's sums entering the output FIFO.
ISSUE_TO_PUSH = 3
#: Output FIFO entries (column groups of ``n_par`` sums, or zero-row tokens).
FIFO_DEPTH = 8


@dataclass(frozen=True)
class Sizes:
    """The datapath's dimensions, from the GEMM's parameters."""

    lanes: int
    width: int
    signed: bool
    acc_width: int
    k: int
    n: int
    k_par: int
    n_par: int
    b_banks: int
    sparse: bool

    @classmethod
    def of(cls, p):
        return cls(**{name: p[name] for name in cls.__dataclass_fields__})

    copies = property(lambda self: self.k_par // self.b_banks)
    col_groups = property(lambda self: self.n // self.n_par)
    #: Groups of ``k_par`` entries a row slot holds.
    groups = property(lambda self: -(-self.k // self.k_par))
    beats_per_word = property(lambda self: self.n_par // self.lanes)
    rows_per_bank = property(lambda self: -(-self.k // self.b_banks))
    #: The shape of a row entry's column.
    column_shape = property(lambda self: range(max(self.k, 2)))
    element = property(lambda self: signed(self.width) if self.signed else unsigned(self.width))


@dataclass(frozen=True)
class Weights:
    """The weight buffer: a read port per memory (index ``bank * copies + copy``); whether a
    ``B`` packet is part-way in; the ``A`` tiles in flight, which hold ``s_axis_b`` (counted by
    the issue stage)."""

    read_ports: list
    loading: Signal
    tiles_in_flight: Signal


@dataclass(frozen=True)
class Slots:
    """The two row slots: per slot full, nonzero count (sparse), last row of its tile, and
    ``k`` entries (value, column); the loader's strobes that fill a slot (``set_full``) and
    the issue stage's that empty it (``clear_full``); a mask taken, and whether it starts a
    tile."""

    full: list
    nnz: list
    last: list
    value: list
    column: list
    set_full: list
    clear_full: list
    mask_accept: Signal
    tile_start: Signal


@dataclass(frozen=True)
class Pass:
    """The pass issued this cycle (``issue``), as the stages after the issue see it: the
    ``k_par`` routed ``a`` values (one per memory); its group and sub-pass; whether it
    completes a column group, ends the row, is a zero-row token, belongs to the tile's last
    row; the output credits in use."""

    issue: Signal
    a_routed: list
    group: Signal
    sub_pass: Signal
    group_done: Signal
    row_done: Signal
    zero_row: Signal
    last_row: Signal
    outstanding: Signal


def build(ports, p):
    """The replicated datapath on ``ports`` (the front's,
    :func:`spartan_rtl.hw.gemm.gemm_members`) for the GEMM's parameters ``p``."""
    m = Module()
    z = Sizes.of(p)
    weights = weight_buffer(m, z, ports.s_axis_b)
    slots = row_loader(m, z, ports, b_pending=weights.loading | ports.s_axis_b.valid)
    issued = issue_passes(m, z, ports, slots, weights)
    sums, flags = multiply(m, z, issued, weights.read_ports)
    output(m, z, ports.m_axis_c, issued, sums, flags)
    return m


def weight_buffer(m, z, b):
    """``B``, written row-major into ``b_banks`` banks of ``k_par / b_banks`` copies each."""
    CG, BB = z.col_groups, z.b_banks
    tiles_in_flight = Signal(range(3))
    b_loading = Signal()
    m.d.comb += b.ready.eq(tiles_in_flight == 0)
    b_write = Signal()
    m.d.comb += b_write.eq(b.valid & b.ready)
    b_sub, b_cg, b_row = weight_write_pointer(m, b, b_write, b_loading, k=z.k, col_groups=CG,
                                              beats_per_word=z.beats_per_word)

    b_word = Cat(*[b.payload.data[i] for i in range(z.lanes)])
    read_ports = []  # index = bank * copies + copy
    for bank in range(BB):
        for copy in range(z.copies):
            mem = Memory(shape=unsigned(z.n_par * z.width), depth=z.rows_per_bank * CG, init=[])
            m.submodules[f"b_bank{bank}_copy{copy}"] = mem
            hit = b_write & ((b_row & (BB - 1)) == bank) if BB > 1 else b_write
            write_weights(m, mem, b_word, lanes=z.lanes, width=z.width,
                          beats_per_word=z.beats_per_word, addr=(b_row >> log2(BB)) * CG + b_cg,
                          enable=hit, b_sub=b_sub)
            read_ports.append(mem.read_port(transparent_for=()))
    return Weights(read_ports, b_loading, tiles_in_flight)


def row_loader(m, z, ports, *, b_pending):
    """``A`` rows: each mask and its data beats into one of two slots (value, column)."""
    K, L, SPARSE = z.k, z.lanes, z.sparse
    ms, ds = ports.s_axis_a_mask, ports.s_axis_a_data
    slot_full = [Signal(name=f"slot{s}_full") for s in range(2)]
    slot_nnz = ([Signal(range(K + 1), name=f"slot{s}_nnz") for s in range(2)] if SPARSE
                else None)   # a dense row's count is K
    slot_last = [Signal(name=f"slot{s}_last") for s in range(2)]
    slot_val = [[Signal(z.width, name=f"slot{s}_val{e}") for e in range(K)] for s in range(2)]
    if SPARSE:
        slot_idx = [[Signal(z.column_shape, name=f"slot{s}_idx{e}") for e in range(K)]
                    for s in range(2)]
    else:   # a dense row's entry e is column e
        slot_idx = [[Const(e, z.column_shape) for e in range(K)] for s in range(2)]

    cursor = RowCursor(k=K, lanes=L)
    ld_slot, ld_beat = cursor.slot, cursor.beat
    ld_free = Mux(ld_slot, slot_full[1], slot_full[0]) == 0
    m.d.comb += [ms.ready.eq(cursor.mask_ready(ld_free, b_pending)),
                 ds.ready.eq(cursor.receiving)]
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
    mark_full = [set_full[s].eq(ld_slot == s) for s in range(2)]

    with m.If(mask_accept):
        m.d.sync += cursor.tile_start.eq(ms.payload.last)
        if SPARSE:
            m.d.sync += mask_reg.eq(mask_in)
            m.d.sync += [ranks[j].eq(rank_in[j]) for j in range(K)]
        for s in range(2):
            with m.If(ld_slot == s):
                m.d.sync += slot_last[s].eq(ms.payload.last)
                if SPARSE:
                    m.d.sync += slot_nnz[s].eq(nnz_in)
        cursor.start_row(m, empty=nnz_in == 0, mark_full=mark_full,
                         beats=cursor.beats_left.eq((nnz_in + L - 1) >> log2(L)))

    lane_idx = _lane_columns(m, z, mask_reg, ranks, ld_beat) if SPARSE else None

    def store():
        # Each lane of the beat into its entry of the slot, with its column.
        for s in range(2):
            for e in range(K):
                with m.If((ld_slot == s) & (ld_beat == e // L)):
                    m.d.sync += slot_val[s][e].eq(ds.payload.data[e % L])
                    if SPARSE:
                        m.d.sync += slot_idx[s][e].eq(lane_idx[e % L])

    cursor.take_data(m, ds, data_accept, sparse=SPARSE, mask=mask_in, mask_accept=mask_accept,
                     err=ports.err_a_stream, mark_full=mark_full, store=store)
    return Slots(slot_full, slot_nnz, slot_last, slot_val, slot_idx, set_full, clear_full,
                 mask_accept, cursor.tile_start)


def _lane_columns(m, z, mask_reg, ranks, ld_beat):
    """The column of each lane of the current data beat: the ``j`` whose rank (among the set
    bits of the row's mask) is ``beat * lanes + lane``."""
    K = z.k
    lane_bits = log2(z.lanes)
    lane_idx = []
    for lane in range(z.lanes):
        hits = []
        for j in range(K):
            hit = mask_reg[j] & ((ranks[j] >> lane_bits) == ld_beat)
            if lane_bits:
                hit = hit & (ranks[j][:lane_bits] == lane)
            hits.append(hit)
        sig = Signal(z.column_shape, name=f"lane{lane}_idx")
        m.d.comb += sig.eq(select_onehot([Const(j, z.column_shape) for j in range(K)], hits,
                                         sig.shape().width))
        lane_idx.append(sig)
    return lane_idx


def issue_passes(m, z, ports, slots, weights):
    """Passes: ``k_par`` entries a cycle, each routed to the bank copy that serves it."""
    K, KP, CG = z.k, z.k_par, z.col_groups
    c_slot = Signal()
    c_cg = Signal(range(max(CG, 2)))
    c_grp = Signal(range(max(z.groups, 2)))
    c_sub = Signal(range(max(z.b_banks, 2)))
    outstanding = Signal(range(FIFO_DEPTH + 1))

    cur_full = Mux(c_slot, slots.full[1], slots.full[0])
    cur_nnz = Signal(range(K + 1))
    cur_last = Signal()
    m.d.comb += [cur_nnz.eq(Mux(c_slot, slots.nnz[1], slots.nnz[0]) if z.sparse else K),
                 cur_last.eq(Mux(c_slot, slots.last[1], slots.last[0]))]
    g_val, g_idx, g_valid = _group_entries(m, z, slots, c_slot, c_grp, cur_nnz)
    g_bank, g_rank, active, last_sub, active_count = _bank_ranks(m, z, g_idx, g_valid, c_sub)

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
    a_routed = _route(m, z, g_val, g_idx, g_bank, g_rank, active, c_cg, weights.read_ports)

    with m.If(issue):
        with m.If(row_done):
            m.d.sync += [c_cg.eq(0), c_grp.eq(0), c_sub.eq(0), c_slot.eq(~c_slot)]
            m.d.comb += [slots.clear_full[s].eq(c_slot == s) for s in range(2)]
        with m.Elif(last_sub & last_grp):
            m.d.sync += [c_cg.eq(c_cg + 1), c_grp.eq(0), c_sub.eq(0)]
        with m.Elif(last_sub):
            m.d.sync += [c_grp.eq(c_grp + 1), c_sub.eq(0)]
        with m.Else():
            m.d.sync += c_sub.eq(c_sub + 1)

    for s in range(2):
        with m.If(slots.set_full[s]):
            m.d.sync += slots.full[s].eq(1)
        with m.Elif(slots.clear_full[s]):
            m.d.sync += slots.full[s].eq(0)

    tiles_in_flight = weights.tiles_in_flight
    tile_begins = slots.mask_accept & slots.tile_start
    tile_ends = issue & row_done & cur_last
    m.d.sync += tiles_in_flight.eq(tiles_in_flight + tile_begins - tile_ends)

    m.d.comb += [
        ports.stat_busy.eq(tiles_in_flight != 0),
        ports.stat_issue.eq(issue),
        ports.stat_conflict.eq(issue & (c_sub != 0)),
        ports.stat_stall.eq(cur_full & ~issue),
        ports.stat_empty_row.eq(issue & zero_row),
        ports.stat_macs.eq(Mux(issue, active_count * z.n_par, 0)),
    ]
    return Pass(issue, a_routed, c_grp, c_sub, group_done, row_done, zero_row, cur_last,
                outstanding)


def _group_entries(m, z, slots, c_slot, c_grp, cur_nnz):
    """The ``k_par`` entries (value, column, valid) of group ``c_grp`` of slot ``c_slot``."""
    K, KP, W = z.k, z.k_par, z.width
    g_val, g_idx, g_valid = [], [], []
    for lane in range(KP):
        per_slot_val, per_slot_idx = [], []
        for s in range(2):
            vals = [slots.value[s][g * KP + lane] if g * KP + lane < K else Const(0, W)
                    for g in range(z.groups)]
            idxs = [slots.column[s][g * KP + lane] if g * KP + lane < K
                    else Const(0, z.column_shape) for g in range(z.groups)]
            per_slot_val.append(mux_tree(vals, c_grp))
            per_slot_idx.append(mux_tree(idxs, c_grp))
        v = Signal(W, name=f"g_val{lane}")
        i = Signal(z.column_shape, name=f"g_idx{lane}")
        ok = Signal(name=f"g_valid{lane}")
        m.d.comb += [v.eq(Mux(c_slot, per_slot_val[1], per_slot_val[0])),
                     i.eq(Mux(c_slot, per_slot_idx[1], per_slot_idx[0])),
                     ok.eq((c_grp * KP + lane) < cur_nnz)]
        g_val.append(v)
        g_idx.append(i)
        g_valid.append(ok)
    return g_val, g_idx, g_valid


def _bank_ranks(m, z, g_idx, g_valid, c_sub):
    """Bank of each entry and its rank among the group's entries of the same bank: the entry
    is read in sub-pass ``rank // copies`` by copy ``rank % copies`` of its bank. Returns the
    banks, the ranks, which entries are read in sub-pass ``c_sub``, whether it is the group's
    last and how many entries it reads."""
    KP, COPIES = z.k_par, z.copies
    bank_bits = log2(z.b_banks)
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
    return g_bank, g_rank, active, last_sub, active_count


def _route(m, z, g_val, g_idx, g_bank, g_rank, active, c_cg, read_ports):
    """Each active entry to the memory (bank, copy) that serves it: the memory's ``a`` value
    (returned, one per memory) and read address."""
    KP, CG, W = z.k_par, z.col_groups, z.width
    bank_bits = log2(z.b_banks)
    copy_bits = log2(z.copies)
    addr_shape = range(max(z.rows_per_bank * CG, 2))
    a_routed = []
    for bank in range(z.b_banks):
        for copy in range(z.copies):
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
            m.d.comb += read_ports[bank * z.copies + copy].addr.eq(addr)
            a_routed.append(a)
    return a_routed


def multiply(m, z, issued, read_ports):
    """The ``k_par x n_par`` products, their sums and the accumulators. Returns the sums with
    this cycle's accumulation (``acc_next``) and the flags of the pass they are for."""
    A, KP, NP, W = z.acc_width, z.k_par, z.n_par, z.width
    flags = data.StructLayout({"valid": 1, "first": 1, "push": 1, "zero": 1, "tlast": 1})
    f1, f2, f3 = Signal(flags), Signal(flags), Signal(flags)
    m.d.sync += [
        f1.valid.eq(issued.issue),
        f1.first.eq((issued.group == 0) & (issued.sub_pass == 0)),
        f1.push.eq(issued.issue & issued.group_done),
        f1.zero.eq(issued.zero_row),
        f1.tlast.eq(issued.last_row & issued.row_done),
        f2.eq(f1),
        f3.eq(f2),
    ]
    a1 = [Signal(z.element, name=f"a1_{i}") for i in range(KP)]
    m.d.sync += [a1[i].eq(issued.a_routed[i]) for i in range(KP)]

    prod_shape = exact_or_acc(2 * W, acc_width=A, signed_elements=z.signed)
    prods = [[Signal(prod_shape, name=f"prod{i}_{c}") for c in range(NP)] for i in range(KP)]
    for i in range(KP):
        word = read_ports[i].data
        for c in range(NP):
            bval = word[c * W:(c + 1) * W]
            bval = bval.as_signed() if z.signed else bval
            m.d.sync += prods[i][c].eq(a1[i] * bval)

    sum_shape = exact_or_acc(2 * W + log2(KP), acc_width=A, signed_elements=z.signed)
    sums = [Signal(sum_shape, name=f"sum{c}") for c in range(NP)]
    m.d.sync += [sums[c].eq(tree_sum(prods[i][c] for i in range(KP))) for c in range(NP)]

    acc = [Signal(A, name=f"acc{c}") for c in range(NP)]
    acc_next = [Signal(A, name=f"acc_next{c}") for c in range(NP)]
    for c in range(NP):
        m.d.comb += acc_next[c].eq(Mux(f3.first, 0, acc[c]) + sums[c])
        with m.If(f3.valid):
            m.d.sync += acc[c].eq(acc_next[c])
    return acc_next, f3


def output(m, z, c_out, issued, acc_next, f3):
    """Finished column groups through the output FIFO to ``m_axis_c`` (``c_out``); the output
    credits returned as entries leave."""
    entry = entry_layout(z.n_par, z.acc_width)
    m.submodules.out_fifo = out_fifo = fifo.SyncFIFO(width=entry.size, depth=FIFO_DEPTH)
    pushed = Signal(entry)
    m.d.comb += [pushed.zero.eq(f3.zero), pushed.tlast.eq(f3.tlast)]
    m.d.comb += [pushed.sums[c].eq(acc_next[c]) for c in range(z.n_par)]
    m.d.comb += [out_fifo.w_data.eq(pushed), out_fifo.w_en.eq(f3.valid & f3.push)]

    pop = send_entries(m, c_out, out_fifo.r_data, valid=out_fifo.r_rdy, lanes=z.lanes, n=z.n,
                       n_par=z.n_par, acc_width=z.acc_width, zeros_stored=False,
                       beat_name="o_beat")
    m.d.comb += out_fifo.r_en.eq(pop)
    outstanding = issued.outstanding
    m.d.sync += outstanding.eq(outstanding + (issued.issue & issued.group_done) - pop)
