"""The expander's properties: its counts in a form k-induction can close
(:func:`expander_protocol`), every element from its mask and data (tagged, inductive;
``_expander_elements``), and the element property in its first, bounded form
(:func:`expander_props`)."""

from __future__ import annotations

from typing import NamedTuple

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.hdl._ast import AnyConst, AnySeq, Assert, Cover

from .harness import _popcount
from .internals import _mux_const


def expander_protocol(lanes, cols, width=None):
    """The expander's counts, in a form k-induction can close: an output beat only for a mask
    taken (rows taken and not yet output, counted here, are never 0 under a valid output), a
    ``tlast`` only on a row's last beat, and a data beat taken only when the masks taken call
    for one (``ceil(popcount/lanes)`` beats each, minus the beats taken). The invariants
    induction needs place every pending row and beat in the block (one row in the mask
    register, one step in the command register, one beat in the output register):

    - the row position of the output (counted here), the command's and the mask register's
      ``beat`` follow each other, and the command ends a row (and a tile) exactly at its last
      position;
    - rows pending = the row in the mask register + a row-ending command + a row's last beat
      in the output register;
    - the mask register holds only the row's remaining slots (shifted in zeros above),
      ``slot_need`` is its current slot's popcount, and nothing is staged between rows;
    - data beats owed = the command's data beat + ``ceil((popcount(mask) - avail) / lanes)``
      for the row in the mask register (``avail`` of its elements already staged).

    With ``width``, also every element (:func:`_expander_elements`).
    """
    per_row = cols // lanes
    shift = lanes.bit_length() - 1

    def props(m, dut, h):
        i = h.internals
        mk, dt, o = dut.s_axis_mask, dut.s_axis_data, dut.m_axis
        out_fire = h.fire(o)
        out_beat = Signal(range(per_row), name="h_out_beat")
        row_done = out_fire & (out_beat == per_row - 1)
        with m.If(out_fire):
            m.d.sync += out_beat.eq(Mux(out_beat == per_row - 1, 0, out_beat + 1))
        rows = h.outstanding(m, h.fire(mk), row_done, 3, "h_rows_pending")
        beats_of = (_popcount(mk.payload.data) + lanes - 1) >> shift
        owed = h.outstanding(m, Mux(h.fire(mk), beats_of, 0), h.fire(dt), per_row + 1,
                             "h_beats_owed")
        # The pending rows' mask tlast, oldest first: the output's row is the oldest.
        lasts = Signal(3, name="h_row_lasts")
        popped = Mux(row_done, lasts >> 1, lasts)
        slot = rows - row_done
        with m.If(h.fire(mk)):
            m.d.sync += lasts.eq(Cat(*[Mux(slot == n, mk.payload.last, popped[n])
                                       for n in range(3)]))
        with m.Else():
            m.d.sync += lasts.eq(popped)
        with m.If(o.valid):
            m.d.comb += Assert(rows != 0, "an output beat without a mask")
            with m.If(out_beat == per_row - 1):
                m.d.comb += Assert(o.payload.last == lasts[0], "row tlast is not the mask's")
            with m.Else():
                m.d.comb += Assert(~o.payload.last, "tlast inside a row")
        with m.If(dt.ready):
            m.d.comb += Assert(owed != 0, "a data beat no mask calls for")

        have, cmd_valid, out_valid = i["have_mask"], i["cmd_valid"], i["out_valid"]
        mask, beat, avail = i["row_mask"], i["beat"], i["avail"]
        # Positions modulo the row: the output register's beat, then the command's, then the
        # mask register's next step.
        cmd_pos = Signal(range(per_row), name="h_cmd_pos")
        next_pos = Signal(range(per_row), name="h_next_pos")

        def step(pos, valid):
            return Mux(valid, Mux(pos == per_row - 1, 0, pos + 1), pos)

        m.d.comb += [cmd_pos.eq(step(out_beat, out_valid)), next_pos.eq(step(cmd_pos, cmd_valid))]
        remaining = Signal(range(cols + 1), name="h_mask_pop")
        m.d.comb += remaining.eq(_popcount(mask))
        needed = remaining - avail   # signed: the padding of a row's last beat may be staged
        row_beats = Mux(needed > 0, (needed + lanes - 1) >> shift, 0)
        m.d.comb += [
            Assert(next_pos == Mux(have, beat, 0), "the mask register's step is out of place"),
            Assert(~cmd_valid | (i["cmd_end"] == (cmd_pos == per_row - 1)),
                   "the command ends a row elsewhere than at its last beat"),
            Assert(~i["cmd_last"] | i["cmd_end"], "a tile's end not at a row's end"),
            # The command's row is the oldest unless the output holds an older row's last beat;
            # the mask register's is the youngest.
            Assert(~(cmd_valid & i["cmd_end"])
                   | (i["cmd_last"] == lasts.bit_select(out_valid & (out_beat == per_row - 1), 1)),
                   "the command's tlast is not its row's"),
            Assert(~have | (i["mask_last"] == lasts.bit_select((rows - 1)[:2], 1)),
                   "the mask register's tlast is not its row's"),
            Assert(rows == have + (cmd_valid & i["cmd_end"])
                   + (out_valid & (out_beat == per_row - 1)),
                   "rows pending are not the rows in the block"),
            Assert(~have | ~Cat(*[(beat == b) & mask[(per_row - b) * lanes:].any()
                                  for b in range(1, per_row)]).any(),
                   "the mask register holds bits past the row"),
            Assert(have | (avail == 0), "elements staged between rows"),
            Assert(~have | (i["slot_need"] == _popcount(mask[:lanes])),
                   "the current slot's decoded popcount is not its mask's"),
            Assert(owed == (cmd_valid & i["cmd_take"]) + Mux(have, row_beats, 0),
                   "data beats owed are not the command's and the mask register's"),
        ]
        if width is not None:
            _expander_elements(m, dut, h, lanes, width, cols, rows=rows, owed=owed,
                               out_beat=out_beat, row_done=row_done, cmd_pos=cmd_pos)
    return props


class _TaggedRow(NamedTuple):
    """The row :func:`_tag_row` tags and the element of it the solver chose."""

    live: Value        # tagged and not yet out of the output register
    ahead: Signal      # pending rows older than it
    mask: Signal
    rank: Signal       # its nonzeros before the chosen column
    bit: Value         # its mask bit at the chosen column
    got: Signal        # the chosen element's data beat has arrived
    value: Signal      # the chosen element, once arrived
    skip: Signal       # data beats still to come before the chosen element's


def _tag_row(m, dut, h, lanes, width, cols, *, rows, owed, out_beat, row_done):
    """Tag one row and check one of its elements. The solver tags one mask as it is taken
    (``AnySeq``, once) and chooses a column (``AnyConst``); the tagged row's output element
    there must be 0 under a zero mask bit and otherwise the data element the masks place
    there: the ``rank``-th nonzero of the row, in the data beat that comes after the beats
    owed to older rows at the tag (rows start on a fresh data beat), counted down here. The
    row is checked while it is the oldest pending (the output register's)."""
    mk, dt, o = dut.s_axis_mask, dut.s_axis_data, dut.m_axis
    shift, per_row = lanes.bit_length() - 1, cols // lanes
    pick = AnySeq(1)
    col = AnyConst(range(cols))
    lane_mask = lanes - 1

    def rank_of(bits):
        below = Cat(*[bits[c] & (col > c) for c in range(cols)])
        return _popcount(below)

    tagged, finished, got = (Signal(name=n) for n in ("h_tagged", "h_finished", "h_got"))
    t_mask = Signal(cols, name="h_tag_mask")
    ahead = Signal(range(4), name="h_tag_ahead")
    skip = Signal(range(2 * per_row + 2), name="h_tag_skip")
    value = Signal(width, name="h_tag_value")
    rank = Signal(range(cols + 1), name="h_tag_rank")
    m.d.comb += rank.eq(rank_of(t_mask))
    bit = t_mask.bit_select(col, 1)
    live = tagged & ~finished
    data_fire = h.fire(dt)
    with m.If(h.fire(mk) & pick & ~tagged):
        m.d.sync += [tagged.eq(1), got.eq(0), finished.eq(0), t_mask.eq(mk.payload.data),
                     ahead.eq(rows - row_done),
                     skip.eq(owed - data_fire + (rank_of(mk.payload.data) >> shift))]
    with m.If(live):
        with m.If(row_done):
            with m.If(ahead == 0):
                m.d.sync += finished.eq(1)
            with m.Else():
                m.d.sync += ahead.eq(ahead - 1)
        with m.If(data_fire & ~got):
            with m.If(skip == 0):
                m.d.sync += [got.eq(1), value.eq(dt.payload.data[rank & lane_mask])]
            with m.Else():
                m.d.sync += skip.eq(skip - 1)
    with m.If(o.valid & live & (ahead == 0) & (out_beat == (col >> shift))):
        m.d.comb += Assert(o.payload.data[col & lane_mask] == Mux(bit, value, 0),
                           "an element that is not its data (or not 0 under a zero bit)")
        with m.If(bit):
            m.d.comb += Assert(got, "an element out before its data arrived")
    # Reachability, as for the channels: a tagged nonzero element is checked within the bound.
    m.d.comb += Cover(o.valid & live & (ahead == 0) & (out_beat == (col >> shift)) & bit,
                      "a tagged nonzero element is checked")
    return _TaggedRow(live, ahead, t_mask, rank, bit, got, value, skip)


def _expander_elements(m, dut, h, lanes, width, cols, *, rows, owed, out_beat, row_done,
                       cmd_pos):
    """The expander's elements, in a form k-induction can close: one element of a tagged row
    checked (:func:`_tag_row`), and the invariants that make that check inductive.

    Invariants: everything the block holds of the tagged row is a function of its mask and
    its position. With ``R(s)`` its nonzeros before slot ``s`` and ``ideal(s) = -R(s) mod
    lanes`` the elements staged when slot ``s`` starts: in the mask register, the shifted
    mask, ``avail == ideal(beat)`` and the slot's decoded prefix sums; a command of the row
    for slot ``s`` carries that slot's bits, ``take``, and the source of every nonzero lane
    and of every staging slot that stays filled, as computed from ``ideal(s)``; the staging
    register holds ranks ``R .. R + ideal - 1`` (before the pending command, if it is the
    row's), so the tagged element, once arrived, is there until it leaves in an output beat;
    and a tagged element not yet arrived is still ``skip`` data beats away, its row's data
    beats so far being ``(R + ideal) / lanes``."""
    i = h.internals
    L, shift, per_row = lanes, lanes.bit_length() - 1, cols // lanes
    live, ahead, t_mask, rank, bit, got, value, skip = _tag_row(
        m, dut, h, lanes, width, cols, rows=rows, owed=owed, out_beat=out_beat,
        row_done=row_done)

    # The tagged row's quantities per slot position.
    def before(slot):                     # R(slot): its nonzeros in the slots before
        return _mux_const(slot, [_popcount(t_mask[:n * L]) if n else Const(0, 1)
                                 for n in range(per_row + 1)])

    def ideal(slot):                      # elements staged as the slot starts
        return (-before(slot))[:shift]

    have, cmd_valid, out_valid = i["have_mask"], i["cmd_valid"], i["out_valid"]
    beat, avail, cmd_end = i["beat"], i["avail"], i["cmd_end"]
    in_mask = live & have & (ahead == rows - 1)
    cmd_row = Mux(cmd_end, out_valid & (out_beat == per_row - 1), rows - 1)
    in_cmd = live & cmd_valid & (ahead == cmd_row)
    slot_bits = (t_mask >> (cmd_pos * L))[:L]
    need = _popcount(slot_bits)
    pre = Signal(range(L), name="h_tag_cmd_avail")
    m.d.comb += pre.eq(ideal(cmd_pos))
    post = (pre - need)[:shift]
    invariants = [
        Assert(~live | (ahead < rows), "the tagged row is not pending"),
        Assert(~in_mask | (i["row_mask"] == (t_mask >> (beat * L))[:cols]),
               "the mask register is not the tagged row's"),
        Assert(~in_mask | (avail == ideal(beat)), "avail is not the tagged row's"),
        Assert(~in_cmd | (i["cmd_slot"] == slot_bits), "the command's slot is not the row's"),
        Assert(~in_cmd | (i["cmd_take"] == (need > pre)), "the command's take is wrong"),
    ]
    for n in range(L):
        decoded = _popcount(i["row_mask"][:n]) if n else Const(0, 1)
        invariants += [
            Assert(~have | (i[f"slot_pos{n}"] == decoded), "a decoded prefix sum is wrong"),
            Assert(~have | (i[f"slot_pos_plus{n}"] == decoded + n + 1),
                   "a decoded prefix sum is wrong"),
        ]
        pos = _popcount(slot_bits[:n]) if n else Const(0, 1)
        source = Mux(pos < pre, pos, pos + n + 1 - pre)
        invariants.append(Assert(~(in_cmd & slot_bits[n]) | (i[f"cmd_out{n}"] == source),
                                 "a command's output lane has the wrong source"))
        stays = in_cmd & ~cmd_end & (post > n)
        stage_source = Mux(pre - need > n, need, need + L - pre)
        invariants.append(Assert(~stays | (i[f"cmd_stage{n}"] == stage_source),
                                 "a command's staging slot has the wrong source"))
    invariants.append(Assert(~have | (i["slot_need_plus"] == i["slot_need"] + L),
                             "a decoded popcount is wrong"))
    # The staging register: ranks base .. base + count - 1 of the tagged row.
    base = Mux(in_cmd, before(cmd_pos), before(beat))
    count = Mux(in_cmd, pre, avail)
    holds = in_cmd | in_mask
    offset = (rank - base)[:shift]
    staged = i["staging"].word_select(offset, width)
    tracked = live & bit
    older = cmd_valid & i["cmd_take"] & ~in_cmd
    invariants += [
        Assert(~(tracked & got & holds & (rank >= base) & (rank < base + count))
               | (staged == value), "the staged tagged element is not its data"),
        Assert(~tracked | Mux(holds, got == (rank < base + count), got),
               "the tagged element arrived with another data beat than its own"),
        Assert(~(tracked & ~got)
               | (skip == older + (rank >> shift) - ((base + count) >> shift)),
               "the tagged element is not the data beats away the masks place it"),
    ]
    m.d.comb += invariants


def expander_props(lanes, width, cols):
    per_row = cols // lanes
    shift = lanes.bit_length() - 1

    def props(m, dut, h):
        mk, dt, o = dut.s_axis_mask, dut.s_axis_data, dut.m_axis
        mask_fire, data_fire, out_fire = h.fire(mk), h.fire(dt), h.fire(o)
        masks = h.counter(m, mask_fire, 7, "masks_in")
        # Data elements by their position in the data stream; the chosen one is recorded.
        received = h.counter(m, data_fire, 255, "data_in")
        p = AnyConst(8 + shift)
        got = Signal(name="h_got")
        value = Signal(width, name="h_value")
        with m.If(data_fire & (received == (p >> shift))):
            m.d.sync += [got.eq(1), value.eq(dt.payload.data[p & (lanes - 1)])]
        # The chosen row's mask and where its data starts.
        row = AnyConst(range(3))
        col = AnyConst(range(cols))
        pattern = Signal(cols, name="h_pattern")
        last = Signal(name="h_last")
        seen = Signal(name="h_seen")
        before = Signal(8, name="h_before")
        beats_of = (_popcount(mk.payload.data) + lanes - 1) >> shift
        with m.If(mask_fire):
            with m.If(masks < row):
                m.d.sync += before.eq(before + beats_of)
            with m.If(masks == row):
                m.d.sync += [seen.eq(1), pattern.eq(mk.payload.data), last.eq(mk.payload.last)]
        # Output side.
        out_beat = Signal(range(per_row), name="h_out_beat")
        out_rows = h.counter(m, out_fire & (out_beat == per_row - 1), 7, "rows_out")
        with m.If(out_fire):
            m.d.sync += out_beat.eq(Mux(out_beat == per_row - 1, 0, out_beat + 1))
            m.d.comb += Assert(out_rows < masks, "an output beat without a mask")
        rank = sum((pattern[b] & (b < col) for b in range(cols)), Const(0, range(cols + 1)))
        with m.If(out_fire & (out_rows == row)):
            m.d.comb += Assert(seen, "the chosen row left before its mask")
            with m.If(out_beat == per_row - 1):
                m.d.comb += Assert(o.payload.last == last, "row tlast is not the mask's")
            with m.If(out_beat != per_row - 1):
                m.d.comb += Assert(~o.payload.last, "tlast inside a row")
            with m.If(out_beat == (col >> shift)):
                element = o.payload.data[col & (lanes - 1)]
                with m.If(~pattern.bit_select(col, 1)):
                    m.d.comb += Assert(element == 0, "an element where the mask has a zero")
                with m.Elif(((before << shift) + rank) == p):
                    m.d.comb += Assert(got & (element == value),
                                       "an element that is not its data")
    return props
