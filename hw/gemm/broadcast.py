"""Broadcast sparse GEMM (``k_par = 1``, the default): each cycle one nonzero ``a[i, k]`` of
``A`` times the whole row slice ``B[k, j*n_par : (j+1)*n_par]``.

Why this datapath (docs/gemm.md, "Two datapaths")
    A pass multiplies one nonzero by ``n_par`` weights of one row of ``B``, so the nonzero's
    column ``k`` is simply the weight-buffer read address: ``B`` is stored once, no pass can
    conflict, there is no group rounding (a row costs exactly ``nnz`` passes per column group),
    and nothing selects operands per multiplier. Zero skipping costs only what turns a mask into
    a sequence of column numbers (one lowest-set-bit search per cycle) and a popcount; the
    dense-only twin (``sparse = false``) is the same datapath with a counter in its place.

Components, each a small :class:`wiring.Component` (docs/gemm.md has the diagram)
    :class:`WeightBuffer`  ``s_axis_b`` -> one memory of ``n_par``-element words, a read port
                           with registered address and word (address at ``t``, word at ``t + 3``)
    :class:`RowLoader`     ``s_axis_a_mask`` + ``s_axis_a_data`` -> two row slots (mask, flags)
                           and a row memory of data beats, read one beat at a time
    :class:`Scheduler`     walks the current slot's set mask bits, one pass per cycle; drives the
                           weight and row memories' read addresses; output credits
    :class:`MacArray`      ``n_par`` multipliers and accumulators; a column group's sums leave
                           ``ISSUE_TO_PUSH`` cycles after its last pass issued
    :class:`OutputQueue`   ``OUT_DEPTH`` entries of ``n_par`` sums -> ``m_axis_c``

    Scheduler -> MacArray -> OutputQueue are valid-only streams: the scheduler issues a pass that
    completes a column group only while it holds an output credit, so nothing after the issue
    ever stalls, and back-pressure on ``m_axis_c`` holds the scheduler, then the loader (both
    slots full), then ``s_axis_a_*``.

The rules (slots, credits, issue-to-push) are those of the replicated design
(:mod:`spartan_rtl.hw.gemm.replicated`), so one cycle model (:mod:`spartan_rtl.golden.gemm`)
predicts both exactly; only the constants differ. What the two build alike (the ``B`` write
pointer and write port, the loader's walk through the ``A`` streams, the product width, the
output's beats) is in :mod:`spartan_rtl.hw.gemm.parts`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .. import ecp5
from ..elements import NO_RW_CHECK, beat_layout, log2, mux_tree, tree_sum
from .parts import (
    RowCursor,
    entry_layout,
    exact_or_acc,
    mask_layout,
    send_entries,
    weight_write_pointer,
    write_weights,
)

__all__ = ["BroadcastGemm", "WeightBuffer", "RowLoader", "Scheduler", "MacArray", "OutputQueue",
           "ISSUE_TO_PUSH", "OUT_DEPTH"]

#: Cycles from a pass's issue to its column group's sums entering the output queue: the row
#: memory read and lane select, ``a`` registered again on its way to the multipliers (the
#: weight read, address and word registered, takes as long), the multipliers' input and
#: output registers, the product registered again beside the accumulator, the accumulate.
ISSUE_TO_PUSH = 6
#: Output queue entries of ``n_par`` sums. One suffices at 20 % density and above (each row's
#: passes outlast its ``n_par / lanes`` output beats plus the pipeline); a second entry would
#: cost as many flip-flops as the accumulators themselves (docs/gemm.md, "Output queue").
OUT_DEPTH = 1


def _index_bits(count):
    """Bits of an index into ``count`` things (0 for one thing)."""
    return (count - 1).bit_length()


def lowest_set_bit(m, bits, width, name):
    """``(index, rest)``: the position of the lowest set bit of ``bits`` (0 when none) and
    ``bits`` without it. In two levels of 8-bit groups, the lowest set bit of each group and
    the lowest group with one: one carry chain (``bits & -bits``) over all of ``bits`` was the
    sparse GEMM's critical path on ECP5 (9.9 ns at k = 64)."""
    def lowest(value, n):
        # Each bit against the OR of those below it: plain LUTs. ``value & -value`` maps to a
        # carry chain, whose entry and exit routes cost more than the chain saves at 8 bits.
        return Cat(*[value[i] & ~value[:i].any() if i else value[0] for i in range(n)])

    def encode(onehot, n):
        return Cat(*[Cat(*[onehot[j] for j in range(n) if (j >> b) & 1]).any()
                     for b in range(max(_index_bits(n), 1))])

    groups = [(lo, min(lo + 8, width)) for lo in range(0, width, 8)]
    group_any = Signal(len(groups), name=f"{name}_groups")
    m.d.comb += group_any.eq(Cat(*[bits[lo:hi].any() for lo, hi in groups]))
    group_first = lowest(group_any, len(groups))
    in_group = [lowest(bits[lo:hi], hi - lo) for lo, hi in groups]
    onehot = Signal(width, name=f"{name}_lowest")
    m.d.comb += onehot.eq(Cat(*[in_group[g] & group_first[g].replicate(hi - lo)
                                for g, (lo, hi) in enumerate(groups)]))
    local = Cat(*[Cat(*[group_first[g] & encode(in_group[g], hi - lo)[b]
                        for g, (lo, hi) in enumerate(groups) if b < _index_bits(hi - lo)]).any()
                  for b in range(3)])
    index = Cat(local, encode(group_first, len(groups))) if len(groups) > 1 else local
    return index[:max(_index_bits(width), 1)], bits & ~onehot


#: Mask bits a scheduler slot searches in one cycle (docs/gemm.md, "Scheduler").
GROUP = 8


def _groups(k):
    """``(group width, groups)`` of a ``k``-bit mask."""
    width = min(GROUP, k)
    return width, -(-k // width)


def _column(local, group, groups):
    """A mask bit's column from its group and its place in the group (``GROUP`` is a power of
    two, so this is a concatenation)."""
    return Cat(local, group) if groups > 1 else local


def _move(target, fields):
    """Assignments of ``fields`` (name -> value) to the like-named fields of view ``target``."""
    return [target[name].eq(value) for name, value in fields.items()]


def walker_layout(k):
    """A scheduler slot's place in its row's mask: the column of its next pass (``head``); the
    bits after it in its group (``cur_rest``, group ``cur_g``); the next nonempty group's bits
    (``nxt_bits``, group ``nxt_g``, ``nxt_valid``), and the nonempty groups after that
    (``gleft``)."""
    width, groups = _groups(k)
    return data.StructLayout({
        "head": range(max(k, 2)), "cur_rest": width, "cur_g": range(max(groups, 2)),
        "nxt_bits": width, "nxt_g": range(max(groups, 2)), "nxt_valid": 1, "gleft": groups})


def slot_layout(sets=1):
    """What a row slot holds besides its data beats and its mask (kept by the scheduler):
    whether the row is empty, whether it is the tile's last row and (two weight sets) the set
    its tile multiplies by."""
    return data.StructLayout({"zero": 1, "last": 1, **({"set": 1} if sets > 1 else {})})


def weight_address(k, col_groups, sets):
    """A weight word's address: ``k * col_groups + j`` within a set, the set above it."""
    words = max(k * col_groups, 2)
    return range(words) if sets == 1 else unsigned(Shape.cast(range(words)).width + 1)


def in_set(word, set_bit, address):
    """Word ``word`` of a set as a :func:`weight_address` (``address``: a signal of that
    shape): the set above the word (two sets), or the word (one set, ``set_bit`` None)."""
    return word if set_bit is None else Cat(word[:len(address) - 1], set_bit)


def pass_layout(lanes):
    """One issued pass: the lane of the row's data beat holding its ``a`` value, whether it
    completes a column group (``push``), is a zero-row token, and ends the tile."""
    return data.StructLayout({"lane": max(log2(lanes), 1), "push": 1, "zero": 1, "tlast": 1})


class WeightBuffer(wiring.Component):
    """``B`` in one memory of ``n_par``-element words, address ``k * (n/n_par) + j``, in
    ``sets`` sets (:func:`weight_address`; two: each chunk the other set than the last).

    ``s_axis_b`` is ready while ``hold`` is low (no ``A`` tile that reads the set being written
    is in flight, nor is it the cycle after one's last pass: no write may meet a read of the same
    word, whose order the memory leaves undefined); ``tlast`` returns the write pointer to
    ``B[0, 0]`` (and moves it to the other set), beats beyond ``k*n/lanes`` wrap. The read
    address and the word are registered in the block RAM and the word again outside it (block
    RAM then neither waits for logic nor drives any: the word is at ``rd_data`` three cycles
    after its address was on ``rd_addr``).
    """

    def __init__(self, *, lanes, width, k, n, n_par, sets=1):
        self._p = dict(lanes=lanes, width=width, k=k, n=n, n_par=n_par, sets=sets)
        super().__init__({
            "s_axis_b": In(stream.Signature(beat_layout(lanes, width))),
            "hold": In(1),
            "loading": Out(1),
            "rd_addr": In(weight_address(k, n // n_par, sets)),
            "rd_data": Out(n_par * width),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, W, K, NP, SETS = p["lanes"], p["width"], p["k"], p["n_par"], p["sets"]
        CG = p["n"] // NP
        beats_per_word = NP // L
        b = self.s_axis_b
        write = Signal()
        m.d.comb += [b.ready.eq(~self.hold), write.eq(b.valid & b.ready)]
        b_sub, b_cg, b_row = weight_write_pointer(m, b, write, self.loading, k=K,
                                                  col_groups=CG, beats_per_word=beats_per_word)

        # ``no_rw_check``: a read never meets a write (``hold`` stays up a cycle after a tile's
        # last pass), so Yosys need not emulate either order. With the emulation, which it
        # adds whatever the read port's transparency, a LUT per bit sat between the block
        # RAMs and ``rd_data``: the critical path of both builds (8.3 ns). The read port is
        # combinational between two registers (``address``, ``word``) that Yosys moves into
        # the block RAM, and ``rd_data`` registers the word again.
        w_set = None
        if SETS > 1:
            w_set = Signal(name="w_set")       # the set the chunk coming in goes into
            with m.If(write & b.payload.last):
                m.d.sync += w_set.eq(~w_set)
        m.submodules.words = words = Memory(shape=unsigned(NP * W),
                                            depth=K * CG if SETS == 1 else 1 << len(self.rd_addr),
                                            init=[], attrs=NO_RW_CHECK)
        beat = Cat(*[b.payload.data[i] for i in range(L)])
        write_weights(m, words, beat, lanes=L, width=W, beats_per_word=beats_per_word,
                      addr=in_set(b_row * CG + b_cg, w_set, self.rd_addr), enable=write,
                      b_sub=b_sub)
        address = Signal.like(self.rd_addr)
        word = Signal.like(self.rd_data)
        rp = words.read_port(domain="comb")
        m.d.comb += rp.addr.eq(address)
        m.d.sync += [address.eq(self.rd_addr), word.eq(rp.data), self.rd_data.eq(word)]
        return m


class RowLoader(wiring.Component):
    """``A`` rows into two slots, alternately: a mask beat when the next slot is free, then
    (sparse: after a cycle for the count) the row's ``ceil(popcount / lanes)`` data beats into
    the row memory (address ``(slot, beat)``).
    A slot is ``full`` from the cycle after its row's last input beat until ``release``.

    A tile's first mask waits while ``b_pending`` (one weight set: a ``B`` packet being
    received or offered; two: no complete chunk left for it). With two sets each slot also
    keeps its tile's set: tiles take sets 0, 1, 0, ... in turn.
    ``take`` is one-hot in the cycle a slot takes the mask on ``mask`` (the scheduler keeps it). The
    mask decides how many data beats a row has; a data ``tlast`` elsewhere than the row's last beat,
    or (dense-only) a mask that is not all ones, only raises ``err``. The walk through the streams
    is the replicated loader's too (:class:`~spartan_rtl.hw.gemm.parts.RowCursor`).
    """

    def __init__(self, *, lanes, width, k, sparse, sets=1):
        self._p = dict(lanes=lanes, width=width, k=k, sparse=sparse, sets=sets)
        super().__init__({
            "s_axis_a_mask": In(stream.Signature(mask_layout(k))),
            "s_axis_a_data": In(stream.Signature(beat_layout(lanes, width))),
            "b_pending": In(1),
            "release": In(2),
            "full": Out(2),
            "slots": Out(data.ArrayLayout(slot_layout(sets), 2)),
            "take": Out(2),
            "mask": Out(k),
            "tile_begins": Out(1),
            "err": Out(1),
            "rd_addr": In(range(2 << _index_bits(k // lanes))),
            "rd_data": Out(lanes * width),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, W, K, SPARSE = p["lanes"], p["width"], p["k"], p["sparse"]
        beat_bits = _index_bits(K // L)
        ms, ds = self.s_axis_a_mask, self.s_axis_a_data

        cursor = RowCursor(k=K, lanes=L)
        ld_wait = Signal()                       # sparse: the cycle between mask and data
        ld_slot, ld_beat, ld_beats_left = cursor.slot, cursor.beat, cursor.beats_left
        m.d.comb += [
            ms.ready.eq(cursor.mask_ready(~self.full.bit_select(ld_slot, 1), self.b_pending)),
            ds.ready.eq(cursor.receiving & ~ld_wait),
        ]
        mask_in = ms.payload.data
        mask_accept = Signal()
        data_accept = Signal()
        m.d.comb += [mask_accept.eq(ms.valid & ms.ready), data_accept.eq(ds.valid & ds.ready),
                     self.tile_begins.eq(mask_accept & cursor.tile_start)]
        set_full = Signal(2)
        mark_full = set_full.eq(1 << ld_slot)
        m.d.comb += [self.take.eq(Mux(mask_accept, 1 << ld_slot, 0)), self.mask.eq(mask_in)]

        # Sparse: a row's data-beat count, ceil(popcount / lanes), takes two cycles: counts of
        # 8-bit chunks registered with the mask, summed in the next cycle, in which the data
        # stream waits (``ld_wait``; GemmTiming.data_gap in the model). Summed when the first
        # data beat came instead, its "last beat?" decision was the GEMM's critical path on
        # ECP5 (10.4 ns); a row now loads in 2 + ceil(nnz / lanes) cycles instead of 1 + ...,
        # which only rows with fewer nonzeros than their passes cover ever see.
        if SPARSE:
            # At most 8 chunks, so the second cycle's sum is three adders deep whatever K:
            # 16 chunks of 8 bits (K = 128) made it four, the GEMM's critical path on ECP5
            # (11.8 ns in the engine). K <= 64 keeps 8-bit chunks.
            chunk_bits = min(K, max(8, -(-K // 8)))
            chunks = [mask_in[j:j + chunk_bits] for j in range(0, K, chunk_bits)]
            chunk_counts = [Signal(range(len(c) + 1), name=f"chunk_count{i}")
                            for i, c in enumerate(chunks)]
            empty = ~mask_in.any()
            nnz = tree_sum(chunk_counts)
            with m.If(ld_wait):
                m.d.sync += [ld_wait.eq(0), ld_beats_left.eq((nnz + L - 1) >> log2(L))]
        else:
            empty = Const(0, 1)
        with m.If(mask_accept):
            m.d.sync += cursor.tile_start.eq(ms.payload.last)
            if SPARSE:
                m.d.sync += [count.eq(tree_sum(chunk[i] for i in range(len(chunk))))
                             for count, chunk in zip(chunk_counts, chunks)]
            if p["sets"] > 1:
                # The sets' turn: flipped as each tile starts, so a tile's first row takes
                # the set before the flip and its other rows the set after it.
                begun_odd = Signal(name="tiles_begun_odd")
                row_set = Mux(cursor.tile_start, begun_odd, ~begun_odd)
                with m.If(cursor.tile_start):
                    m.d.sync += begun_odd.eq(~begun_odd)
            for s in range(2):
                with m.If(ld_slot == s):
                    slot = self.slots[s]
                    m.d.sync += [slot.last.eq(ms.payload.last), slot.zero.eq(empty)]
                    if p["sets"] > 1:
                        m.d.sync += slot.set.eq(row_set)
            cursor.start_row(m, empty=empty, mark_full=mark_full,
                             beats=ld_wait.eq(1) if SPARSE else ld_beats_left.eq(K // L))

        cursor.take_data(m, ds, data_accept, sparse=SPARSE, mask=mask_in,
                         mask_accept=mask_accept, err=self.err, mark_full=mark_full)
        m.d.sync += self.full.eq((self.full & ~self.release) | set_full)

        m.submodules.beats = beats = Memory(shape=unsigned(L * W), depth=2 << beat_bits,
                                            init=[])
        wp = beats.write_port()
        m.d.comb += [wp.addr.eq(Cat(ld_beat[:beat_bits], ld_slot)), wp.en.eq(data_accept),
                     wp.data.eq(Cat(*[ds.payload.data[i] for i in range(L)]))]
        rp = beats.read_port(transparent_for=())
        m.d.comb += [rp.addr.eq(self.rd_addr), self.rd_data.eq(rp.data)]
        return m


class Scheduler(wiring.Component):
    """One pass per cycle of the row in the current slot (slots alternate) while it is full.

    Sparse: each slot keeps its next column (``head``, the lowest set mask bit not yet issued)
    and the bits after it (``rest``). A slot takes its mask into ``rest`` and is *primed* the
    next cycle (head found, removed from rest), before its row can be full; each pass finds the
    next head the same way, so the weight address of a pass comes straight from a register and
    one lowest-set-bit unit per slot serves both. Dense-only: the column is the
    pass counter. A pass that completes a column group (its row's last nonzero, or a zero row)
    issues only while an output credit is free (``OUT_DEPTH`` of them, returned by ``freed``).
    """

    def __init__(self, *, lanes, k, n, n_par, sparse, sets=1, out_depth=OUT_DEPTH):
        self._p = dict(lanes=lanes, k=k, n=n, n_par=n_par, sparse=sparse, sets=sets,
                       out_depth=out_depth)
        cg = n // n_par
        super().__init__({
            "full": In(2),
            "slots": In(data.ArrayLayout(slot_layout(sets), 2)),
            "take": In(2),
            "mask": In(k),
            "release": Out(2),
            "freed": In(1),
            "b_addr": Out(weight_address(k, cg, sets)),
            "row_addr": Out(range(2 << _index_bits(k // lanes))),
            "o_pass": Out(stream.Signature(pass_layout(lanes), always_ready=True)),
            "stall": Out(1),
            "tile_ends": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, K, NP, SPARSE = p["lanes"], p["k"], p["n_par"], p["sparse"]
        CG = p["n"] // NP
        beat_bits = _index_bits(K // L)
        lane_bits = log2(L)

        c_slot = Signal()
        c_cg = Signal(range(max(CG, 2)))
        rank = Signal(range(max(K, 2)))          # the pass's nonzero within the row
        outstanding = Signal(range(p["out_depth"] + 1))
        cur = Signal(slot_layout(p["sets"]))
        m.d.comb += cur.eq(Mux(c_slot, self.slots[1], self.slots[0]))
        cur_full = self.full.bit_select(c_slot, 1)

        if SPARSE:
            walker = walker_layout(K)
            state = [Signal(walker, name=f"slot{s}_walk") for s in range(2)]
            cur_walk = Signal(walker)
            m.d.comb += cur_walk.eq(Mux(c_slot, state[1], state[0]))
            column = cur_walk.head
            last_nonzero = ~cur_walk.cur_rest.any() & ~cur_walk.nxt_valid
        else:
            column = rank
            last_nonzero = rank == K - 1
        group_done = Signal()
        row_done = Signal()
        m.d.comb += [group_done.eq(cur.zero | last_nonzero),
                     row_done.eq(cur.zero | (last_nonzero & (c_cg == CG - 1)))]
        issue = Signal()
        m.d.comb += issue.eq(cur_full & (~group_done | (outstanding < p["out_depth"])))

        b_set = cur.set if p["sets"] > 1 else None
        m.d.comb += [
            self.b_addr.eq(in_set(column * CG + c_cg, b_set, self.b_addr)),
            self.row_addr.eq(Cat((rank >> lane_bits)[:beat_bits], c_slot)),
            self.o_pass.valid.eq(issue),
            self.o_pass.payload.lane.eq(rank[:lane_bits] if lane_bits else 0),
            self.o_pass.payload.push.eq(group_done),
            self.o_pass.payload.zero.eq(cur.zero),
            self.o_pass.payload.tlast.eq(cur.last & row_done),
            self.stall.eq(cur_full & ~issue),
            self.tile_ends.eq(issue & row_done & cur.last),
            self.release.eq(Mux(issue & row_done, 1 << c_slot, 0)),
        ]

        with m.If(issue):
            with m.If(row_done):
                m.d.sync += [c_cg.eq(0), rank.eq(0), c_slot.eq(~c_slot)]
            with m.Elif(last_nonzero):
                m.d.sync += [c_cg.eq(c_cg + 1), rank.eq(0)]
            with m.Else():
                m.d.sync += rank.eq(rank + 1)

        if SPARSE:
            self._walk_masks(m, state, issue=issue, c_slot=c_slot, zero=cur.zero,
                             last_nonzero=last_nonzero)

        m.d.sync += outstanding.eq(outstanding + (issue & group_done) - self.freed)
        return m

    def _walk_masks(self, m, state, *, issue, c_slot, zero, last_nonzero):
        """Each slot's walker ``state`` (:func:`walker_layout`) through its row's mask: taken
        with the mask, primed, and moved on by each pass of the slot's row (``issue`` while
        ``c_slot`` is it, not a ``zero`` row; ``last_nonzero``: the pass is a column group's
        last)."""
        K, CG = self._p["k"], self._p["n"] // self._p["n_par"]
        GW, G = _groups(K)
        walker = walker_layout(K)
        # A slot's mask is walked in groups of GW bits: the next nonzero is the lowest set
        # bit of the current group's rest (``step``) or of the next nonempty group, found a
        # cycle ahead (``hop``, which also finds the group after it). So no cycle searches
        # more than GW bits plus G group flags: one search over all K bits was the GEMM's
        # critical path on ECP5 (9.1 ns at K = 64). A slot takes its mask (``take``), finds
        # its first group the next cycle (``prime[0]``) and its first nonzero the cycle
        # after (``prime[1]``): the row loader makes no nonempty row full before then.
        prime = [Signal(2, name=f"prime{i}") for i in range(2)]
        m.d.sync += [prime[0].eq(self.take), prime[1].eq(prime[0] & ~self.take)]
        for s in range(2):
            st = state[s]
            bits = Signal(G * GW, name=f"slot{s}_bits")
            group, groups_after = lowest_set_bit(m, st.gleft, G, f"slot{s}_groups")
            in_group, in_rest = lowest_set_bit(m, st.cur_rest, GW, f"slot{s}_cur")
            in_next, next_rest = lowest_set_bit(m, st.nxt_bits, GW, f"slot{s}_nxt")
            # The three moves, field by field (a view of the next state would gather the
            # fields into one vector, and Verilator reads the group index going through it
            # to the group's bits as a loop).
            refill = dict(nxt_bits=bits.word_select(group, GW), nxt_g=group,
                          nxt_valid=st.gleft.any(), gleft=groups_after)
            step = {"head": _column(in_group, st.cur_g, G), "cur_rest": in_rest}
            hop = {**refill, "head": _column(in_next, st.nxt_g, G),
                   "cur_rest": next_rest, "cur_g": st.nxt_g}

            advance = Signal(name=f"slot{s}_advance")
            m.d.comb += advance.eq(issue & (c_slot == s) & ~zero & ~last_nonzero)
            with m.If(self.take[s]):
                m.d.sync += [bits.eq(self.mask),
                             st.gleft.eq(Cat(*[self.mask[lo:lo + GW].any()
                                               for lo in range(0, K, GW)]))]
            with m.Elif(prime[0][s]):
                m.d.sync += _move(st, refill)
            with m.Elif(prime[1][s] | (advance & ~st.cur_rest.any())):
                m.d.sync += _move(st, hop)
            with m.Elif(advance):
                m.d.sync += _move(st, step)
            if CG > 1:
                # A row's column groups after the first start again from its primed state.
                first = Signal(walker, name=f"slot{s}_first")
                with m.If(prime[1][s]):
                    m.d.sync += _move(first, hop)
                with m.If(issue & (c_slot == s) & ~zero & last_nonzero):
                    m.d.sync += st.eq(first)


class MacArray(wiring.Component):
    """``n_par`` multipliers and accumulators.

    A pass issued at ``t``: its row beat is on ``a_beat`` at ``t + 1`` (the lane is selected and
    registered), registered again at ``t + 2`` (its route to every multiplier has a cycle of
    its own); at ``t + 3`` it and its weight word (on ``b_word`` then) enter the multipliers'
    input registers, the product is in their output registers at ``t + 4``, registered again
    beside the accumulators at ``t + 5`` and accumulated at ``t + 6``; a pass that completes a
    column group sends ``acc + product`` on ``o_sums`` in that cycle and clears the
    accumulators. Exact widths, or ``acc_width`` bits when that is less: sums wrap modulo
    ``2**acc_width``. ``multiplier``: ``"inferred"`` writes the registers and a ``*``;
    ``"ecp5"`` instantiates ``MULT18X18D`` with its own input and output registers
    (:mod:`spartan_rtl.hw.ecp5`); the timing is the same.
    """

    def __init__(self, *, lanes, width, signed, acc_width, n_par, multiplier="inferred"):
        self._p = dict(lanes=lanes, width=width, signed=signed, acc_width=acc_width,
                       n_par=n_par, multiplier=multiplier)
        super().__init__({
            "i_pass": In(stream.Signature(pass_layout(lanes), always_ready=True)),
            "a_beat": In(lanes * width),
            "b_word": In(n_par * width),
            "o_sums": Out(stream.Signature(entry_layout(n_par, acc_width), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, W, A, NP = p["lanes"], p["width"], p["acc_width"], p["n_par"]
        flags = data.StructLayout({"valid": 1, "lane": max(log2(L), 1), "push": 1, "zero": 1,
                                   "tlast": 1})
        stages = [Signal(flags, name=f"f{i}") for i in range(1, ISSUE_TO_PUSH + 1)]
        f1, last = stages[0], stages[-1]
        m.d.sync += [
            f1.valid.eq(self.i_pass.valid),
            f1.lane.eq(self.i_pass.payload.lane),
            f1.push.eq(self.i_pass.payload.push),
            f1.zero.eq(self.i_pass.payload.zero),
            f1.tlast.eq(self.i_pass.payload.tlast),
        ]
        m.d.sync += [after.eq(before) for before, after in zip(stages, stages[1:])]
        # The data registers have no reset: only passes flagged valid are ever used, and a
        # reset net would reach every one of them (and keep them out of the DSP slices).
        elem = signed(W) if p["signed"] else unsigned(W)
        lanes = [self.a_beat[i * W:(i + 1) * W] for i in range(L)]
        a1 = Signal(elem, reset_less=True)
        m.d.sync += a1.eq(mux_tree(lanes, f1.lane) if L > 1 else lanes[0])
        # Register -> multiplier -> register is the GEMM's critical path on ECP5 (docs/gemm.md,
        # "Timing choices"): ``a`` reaches the multipliers from a register of its own, each
        # multiplier has input and output registers, and each product is registered again
        # beside its accumulator.
        a2 = Signal(elem, reset_less=True)
        m.d.sync += a2.eq(a1)

        prod_shape = exact_or_acc(2 * W, acc_width=A, signed_elements=p["signed"])
        prods = [Signal(prod_shape, name=f"prod{c}", reset_less=True) for c in range(NP)]
        for c in range(NP):
            bval = self.b_word[c * W:(c + 1) * W]
            bval = bval.as_signed() if p["signed"] else bval
            product = ecp5.multiply(m, f"mult{c}", a2, bval, signed=p["signed"],
                                    multiplier=p["multiplier"])
            m.d.sync += prods[c].eq(product[:prod_shape.width])

        acc = [Signal(A, name=f"acc{c}") for c in range(NP)]
        acc_next = [Signal(A, name=f"acc_next{c}") for c in range(NP)]
        for c in range(NP):
            m.d.comb += acc_next[c].eq(acc[c] + prods[c])
            # Cleared after a column group's last pass (a zero row's too: its accumulators are
            # already zero) rather than zeroed on its first: the clear is the register's
            # synchronous reset, with priority over its enable, so no LUT sits in front of it.
            with m.If(last.valid & last.push):
                m.d.sync += acc[c].eq(0)
            with m.Elif(last.valid):
                m.d.sync += acc[c].eq(acc_next[c])
        out = self.o_sums
        m.d.comb += [out.valid.eq(last.valid & last.push), out.payload.zero.eq(last.zero),
                     out.payload.tlast.eq(last.tlast)]
        m.d.comb += [out.payload.sums[c].eq(acc_next[c]) for c in range(NP)]
        return m


class OutputQueue(wiring.Component):
    """``depth`` entries of ``n_par`` sums (or zero-row tokens) -> ``m_axis_c``: ``n_par /
    lanes`` beats per entry, ``n / lanes`` zero beats per token, ``tlast`` on a tile's last
    beat. An entry is readable from the cycle after its push; ``freed`` pulses in the cycle of
    an entry's last beat. The scheduler's credits guarantee a push always finds room."""

    def __init__(self, *, lanes, acc_width, n, n_par, depth=OUT_DEPTH):
        self._p = dict(lanes=lanes, acc_width=acc_width, n=n, n_par=n_par, depth=depth)
        super().__init__({
            "i_sums": In(stream.Signature(entry_layout(n_par, acc_width), always_ready=True)),
            "m_axis_c": Out(stream.Signature(beat_layout(lanes, acc_width))),
            "freed": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, A, N, NP, D = p["lanes"], p["acc_width"], p["n"], p["n_par"], p["depth"]
        layout = entry_layout(NP, A)
        entries = [Signal(layout, name=f"entry{e}") for e in range(D)]
        count = Signal(range(D + 1))
        wr = Signal(range(max(D, 2)))
        rd = Signal(range(max(D, 2)))
        pushed = self.i_sums.payload
        for e in range(D):
            write = self.i_sums.valid & (wr == e)
            with m.If(write):
                m.d.sync += [entries[e].zero.eq(pushed.zero), entries[e].tlast.eq(pushed.tlast)]
            # A zero-row token's sums are stored as zeros (the register's synchronous reset), so
            # the output sends its beats without a multiplexer to zero them.
            with m.If(write & pushed.zero):
                m.d.sync += entries[e].sums.eq(0)
            with m.Elif(write):
                m.d.sync += entries[e].sums.eq(pushed.sums)
        with m.If(self.i_sums.valid):
            m.d.sync += wr.eq(Mux(wr == D - 1, 0, wr + 1))

        pop = send_entries(m, self.m_axis_c, mux_tree(entries, rd) if D > 1 else entries[0],
                           valid=count != 0, lanes=L, n=N, n_par=NP, acc_width=A,
                           zeros_stored=True)
        m.d.comb += self.freed.eq(pop)
        with m.If(pop):
            m.d.sync += rd.eq(Mux(rd == D - 1, 0, rd + 1))
        m.d.sync += count.eq(count + self.i_sums.valid - pop)
        return m


class BroadcastGemm(wiring.Component):
    """Tile sparse GEMM, ``k_par = 1``: the ports of ``signature`` (the front's,
    :class:`spartan_rtl.hw.gemm.SparseGemm`), parameters ``p`` and malformed-stream behaviour
    as there (and docs/gemm.md); ``stat_conflict`` is always 0."""

    def __init__(self, p, signature):
        self._p = p
        super().__init__(signature)

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, K, N, NP, SETS = p["lanes"], p["k"], p["n"], p["n_par"], p["weight_sets"]
        m.submodules.weights = weights = WeightBuffer(lanes=L, width=p["width"], k=K, n=N,
                                                      n_par=NP, sets=SETS)
        m.submodules.loader = loader = RowLoader(lanes=L, width=p["width"], k=K,
                                                 sparse=p["sparse"], sets=SETS)
        m.submodules.scheduler = sched = Scheduler(lanes=L, k=K, n=N, n_par=NP,
                                                   sparse=p["sparse"], sets=SETS)
        m.submodules.macs = macs = MacArray(lanes=L, width=p["width"], signed=p["signed"],
                                            acc_width=p["acc_width"], n_par=NP,
                                            multiplier=p["multiplier"])
        m.submodules.output = output = OutputQueue(lanes=L, acc_width=p["acc_width"], n=N,
                                                   n_par=NP)

        wiring.connect(m, wiring.flipped(self.s_axis_b), weights.s_axis_b)
        wiring.connect(m, wiring.flipped(self.s_axis_a_mask), loader.s_axis_a_mask)
        wiring.connect(m, wiring.flipped(self.s_axis_a_data), loader.s_axis_a_data)
        wiring.connect(m, sched.o_pass, macs.i_pass)
        wiring.connect(m, macs.o_sums, output.i_sums)
        wiring.connect(m, output.m_axis_c, wiring.flipped(self.m_axis_c))

        tiles_in_flight = Signal(range(3))
        m.d.sync += tiles_in_flight.eq(tiles_in_flight + loader.tile_begins - sched.tile_ends)
        # ``B`` waits one cycle more: the last pass's weight read is at ``t + 1``.
        tile_ended = Signal()
        m.d.sync += tile_ended.eq(sched.tile_ends)
        if SETS == 1:
            m.d.comb += [weights.hold.eq((tiles_in_flight != 0) | tile_ended),
                         loader.b_pending.eq(weights.loading | self.s_axis_b.valid)]
        else:
            # Chunk c and tile c pair up. ``unused``: chunks complete that no tile has taken
            # (tile t starts only with chunk t in); ``held``: chunks complete whose tile has
            # not ended (a cycle late, as above). Chunk c's set was chunk c-2's: it is
            # written only once tile c-2 has ended, i.e. while at most one chunk is held.
            chunk_in = self.s_axis_b.valid & self.s_axis_b.ready & self.s_axis_b.payload.last
            unused = Signal(range(SETS + 1), name="chunks_unused")
            held = Signal(range(SETS + 1), name="chunks_held")
            m.d.sync += [unused.eq(unused + chunk_in - loader.tile_begins),
                         held.eq(held + chunk_in - tile_ended)]
            m.d.comb += [weights.hold.eq(held == SETS), loader.b_pending.eq(unused == 0)]
        m.d.comb += [
            loader.release.eq(sched.release),
            sched.full.eq(loader.full),
            sched.slots.eq(loader.slots),
            sched.take.eq(loader.take),
            sched.mask.eq(loader.mask),
            sched.freed.eq(output.freed),
            weights.rd_addr.eq(sched.b_addr),
            loader.rd_addr.eq(sched.row_addr),
            macs.a_beat.eq(loader.rd_data),
            macs.b_word.eq(weights.rd_data),
        ]
        issue = sched.o_pass.valid
        m.d.comb += [
            self.stat_busy.eq(tiles_in_flight != 0),
            self.stat_issue.eq(issue),
            self.stat_conflict.eq(0),
            self.stat_stall.eq(sched.stall),
            self.stat_empty_row.eq(issue & sched.o_pass.payload.zero),
            self.stat_macs.eq(Mux(issue & ~sched.o_pass.payload.zero, NP, 0)),
            self.err_a_stream.eq(loader.err),
        ]
        return m
