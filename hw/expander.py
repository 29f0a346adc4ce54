"""Expander: zero-value compression -> dense rows, one output beat a cycle
(docs/interfaces.md, "expander").

The exact inverse of :mod:`spartan_rtl.hw.compactor`, in two stages with a valid/ready
handshake between them, so that the per-beat decisions (which depend on the mask alone) are made a
cycle ahead of the data they steer:

**A: control** (from the row's mask)
    A row's mask is taken into a register (the next row's mask in the same cycle as the row's
    last step, so rows follow without a gap) and shifted down ``lanes`` bits per step. Per
    output beat: ``need`` = the popcount of the beat's ``lanes`` mask bits, ``pos`` their
    exclusive prefix sum (the index of each nonzero lane among the beat's nonzeros). ``avail``
    (< ``lanes``) elements are left over in the staging register from the row's last data
    beat; ``take`` = ``need > avail``: a data beat is consumed for this output beat. Seen as a
    *window* (the ``avail`` staged elements, then the data beat), output lane ``i`` is window
    element ``pos[i]`` where its mask bit is set, else zero, and the new staging content is the
    window shifted down by ``need``; ``avail`` becomes ``(avail - need) mod lanes``. Stage A
    turns these into *command* registers: the beat's mask bits, ``take``, and for every output
    lane and every staging slot the index of its source among the staged and the incoming
    elements. At the row's end ``avail`` returns to 0 (what is left is the zero fill).
    For timing, a slot's ``pos`` and ``need`` (and ``pos[i] + i + 1``, ``need + lanes``) are
    decoded into registers when the slot becomes current: from the incoming mask as it is
    taken, from the register's next slot as it shifts (per group of four bits by table lookup,
    then adders over the groups: :func:`spartan_rtl.hw.elements.fast_prefix_sums`). A step then only
    subtracts ``avail``, compares and selects.
**B: data** (the command register, the data beat, the staging register)
    Each output lane and staging slot is a multiplexer over its possible sources, steered by
    the command; the output beat goes to a register (a slot frees when the output is empty or
    being read). A command is executed when the output register has room and, if it takes a
    data beat, the data beat is valid.

Latency: a mask transferred on edge ``t`` gives the row's first command after edge ``t+1`` and
its first output beat on ``m_axis`` after edge ``t+2`` (transferable on edge ``t+3``:
:data:`MASK_LATENCY`, 2 before the pipelining for timing); a data beat taken on edge ``t`` is
in the output beat transferable on edge ``t+1`` (:data:`DATA_LATENCY`).

Malformed input: the mask stream is authoritative. Each row takes exactly
``ceil(popcount(mask)/lanes)`` data beats (none for an empty row) and produces ``cols/lanes``
output beats, ``tlast`` from the mask's ``tlast``. The data ``tlast`` is checked: a row whose
data beats do not end with exactly one ``tlast`` on the last of them is reported by a one-cycle
``error`` pulse in the cycle after its last output beat is produced. The output is what the mask
says with whatever data arrived (a short or long data row shifts every later row: recovery is a
reset). If the data stream holds fewer beats than the masks call for, the expander waits.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .block import Block
from .compactor import PARAMS, check_cols
from .elements import beat_layout, fast_prefix_sums, lookup

__all__ = ["Expander", "BLOCK", "MASK_LATENCY", "DATA_LATENCY"]

#: Edges from a mask transfer to the transfer of its row's first output beat (output ready):
#: stage A's command, stage B's output register, then the transfer.
MASK_LATENCY = 3
#: Edges from a data beat's transfer to the transfer of the output beat that uses it.
DATA_LATENCY = 1


def _signed(x, bits):
    """The ``bits``-bit pattern ``x`` read as two's complement."""
    return x - (1 << bits) if x >> (bits - 1) else x


def gather(sources, index, width):
    """``sources[index]`` (``width``-bit values); the list is padded with zeros to a power of
    two, so every value of ``index`` (``ceil(log2(len(sources)))`` bits) selects something."""
    if len(sources) == 1:
        return sources[0]
    padded = sources + [Const(0, width)] * ((1 << len(index)) - len(sources))
    return Cat(padded).word_select(index, width)


def decode_slot(bits):
    """A mask slot's decode (its ``lanes`` = ``len(bits)`` bits), in the order of
    :meth:`Expander._step_indices`' registers: ``pos[i]`` (the exclusive prefix sum),
    ``pos[i] + i + 1``, ``need`` (the popcount) and ``need + lanes``."""
    lanes = len(bits)
    bits = [bits[i] for i in range(lanes)]
    positions, total = fast_prefix_sums(bits)
    positions_plus, _ = fast_prefix_sums(bits, offset=lambda i: i + 1)
    # need + lanes, need <= lanes a power of two: no adder.
    total_plus = Mux(total[-1], 2 * lanes, total | lanes)
    return positions + positions_plus + [total, total_plus]


class Expander(wiring.Component):
    """ZVC -> dense expander.

    Parameters
    ----------
    lanes, width, number_format, cols
        See ``spartan list``; checked here with the generator's messages. ``number_format``
        changes no logic (zeros are written as all-zero patterns) but is recorded.

    Members
    -------
    s_axis_mask : In(stream)  one ``cols``-bit mask per row, ``last`` on the tile's last row
    s_axis_data : In(stream)  packed nonzeros, ``last`` on each row's last data beat
    m_axis : Out(stream)      dense rows, ``cols/lanes`` beats each, ``last`` from the mask
    error : Out(1)            one-cycle pulse after a row whose data ``tlast`` was wrong
    """

    def __init__(self, *, lanes=8, width=8, number_format="int", cols=64):
        p = BLOCK.resolve(dict(lanes=lanes, width=width, number_format=number_format,
                               cols=cols))
        self._lanes, self._width = p["lanes"], p["width"]
        self._number_format, self._cols = p["number_format"], p["cols"]
        super().__init__({
            "s_axis_mask": In(stream.Signature(data.StructLayout({"data": cols, "last": 1}))),
            "s_axis_data": In(stream.Signature(beat_layout(lanes, width))),
            "m_axis": Out(stream.Signature(beat_layout(lanes, width))),
            "error": Out(1),
        })
        self.avail = Signal(range(lanes), name="avail")

    lanes = property(lambda self: self._lanes)
    width = property(lambda self: self._width)
    number_format = property(lambda self: self._number_format)
    cols = property(lambda self: self._cols)
    beats_per_row = property(lambda self: self._cols // self._lanes)

    def elaborate(self, platform):
        m = Module()
        L, C = self._lanes, self._cols
        B = C // L
        mask_in, data_in, out = self.s_axis_mask, self.s_axis_data, self.m_axis

        # --- stage A: the current row's mask, shifted down one slot per step ----------------
        mask = Signal(C, name="row_mask")
        mask_last = Signal()
        have_mask = Signal()
        beat = Signal(range(B), name="beat")
        at_end = Signal()
        m.d.comb += at_end.eq(beat == B - 1)
        avail = self.avail
        decoded, left, take, out_index, stage_index = self._step_indices(m)

        # --- the command register between the stages ---------------------------------------
        cmd_valid = Signal()
        cmd_slot = Signal(L, name="cmd_slot")
        cmd_take = Signal()
        cmd_end = Signal()
        cmd_last = Signal()
        cmd_out = [Signal(range(2 * (i + 1)), name=f"cmd_out{i}") for i in range(L)]
        cmd_stage = [Signal(range(2 * L - j), name=f"cmd_stage{j}") for j in range(L)]

        # Output register: a new beat can be produced when it is empty or being read.
        out_valid = Signal()
        room = Signal()
        execute = Signal()
        advance = Signal()
        m.d.comb += [
            room.eq(~out_valid | out.ready),
            out.valid.eq(out_valid),
            execute.eq(cmd_valid & room & (~cmd_take | data_in.valid)),
            data_in.ready.eq(cmd_valid & room & cmd_take),
            advance.eq(have_mask & (~cmd_valid | execute)),
            mask_in.ready.eq(~have_mask | (advance & at_end)),
        ]
        taken = Signal()
        m.d.comb += taken.eq(data_in.valid & data_in.ready)

        with m.If(advance):
            m.d.sync += [
                cmd_valid.eq(1), cmd_slot.eq(mask[:L]), cmd_take.eq(take), cmd_end.eq(at_end),
                cmd_last.eq(at_end & mask_last),
            ]
            m.d.sync += [c.eq(v) for c, v in zip(cmd_out, out_index)]
            m.d.sync += [c.eq(v) for c, v in zip(cmd_stage, stage_index)]
            with m.If(at_end):
                m.d.sync += [have_mask.eq(0), beat.eq(0), avail.eq(0)]
            with m.Else():
                m.d.sync += [beat.eq(beat + 1), mask.eq(mask >> L), avail.eq(left)]
                if B > 1:
                    m.d.sync += [r.eq(v) for r, v in zip(decoded, decode_slot(mask[L:2 * L]))]
        with m.Elif(execute):
            m.d.sync += cmd_valid.eq(0)

        with m.If(mask_in.valid & mask_in.ready):
            m.d.sync += [mask.eq(mask_in.payload.data), mask_last.eq(mask_in.payload.last),
                         have_mask.eq(1), beat.eq(0)]
            m.d.sync += [r.eq(v) for r, v in zip(decoded, decode_slot(mask_in.payload.data[:L]))]

        self._stage_b(m, execute, out_valid, cmd_slot, cmd_out, cmd_stage, cmd_last)
        self._check_data_last(m, taken, execute & cmd_end)
        return m

    def _step_indices(self, m):
        """Stage A's arithmetic for one step, from the current slot's registered decode and
        ``avail``. Returns the decode registers (in :func:`decode_slot`'s order), ``left``
        (what stays staged after the step), ``take`` (the step consumes a data beat) and the
        command's source index of every output lane and every staging slot."""
        L, avail = self._lanes, self.avail
        # The current slot's decode, registered: computed when the slot becomes current (from
        # the incoming mask's first slot, or the mask register's next slot as it shifts), so a
        # step does only a subtraction, a compare and a multiplexer per index below. ``pos``:
        # the slot's exclusive prefix sum; ``need``: its popcount; ``pos_plus[i]`` =
        # ``pos[i] + i + 1`` and ``need_plus`` = ``need + lanes`` (the offsets of the data
        # beat's elements in the window, added before the register).
        pos = [Signal(range(i + 1), name=f"slot_pos{i}") for i in range(L)]
        pos_plus = [Signal(range(2 * i + 2), name=f"slot_pos_plus{i}") for i in range(L)]
        need = Signal(range(L + 1), name="slot_need")
        need_plus = Signal(range(2 * L + 1), name="slot_need_plus")
        decoded = pos + pos_plus + [need, need_plus]

        left = Signal(range(-L, L), name="left")  # what stays staged after this step
        m.d.comb += left.eq(avail - need)
        take = left < 0
        if L > 1:
            # Output lane ``i`` (``pos[i] <= i``): staged elements 0..i, then data 0..i; the
            # data element ``pos[i] - avail`` is window element ``pos[i] + i + 1 - avail``.
            out_index = [Mux(pos[i] < avail, pos[i], pos_plus[i] - avail) for i in range(L)]
            # Staging slot ``j`` takes window element ``j + need``: staged elements j..L-1,
            # then data elements 0..L-1 (only slots below the new ``avail`` matter).
            # (``j + need < avail`` as ``left > j``: one subtraction shared by every slot,
            # then a table of ``left``'s bits, where a compare would be a second carry chain.)
            stage_index = [Mux(lookup(left, lambda x, j=j: _signed(x, len(left)) > j),
                               need, need_plus - avail) for j in range(L)]
        else:  # one lane: nothing is ever staged (``avail`` is always 0)
            out_index, stage_index = [Const(1, 1)], [Const(0, 1)]
        return decoded, left, take, out_index, stage_index

    def _stage_b(self, m, execute, out_valid, cmd_slot, cmd_out, cmd_stage, cmd_last):
        """Stage B: multiplexers steered by the command, into the output and staging
        registers."""
        L, W = self._lanes, self._width
        data_in, out = self.s_axis_data, self.m_axis
        staging = Signal(L * W, name="staging")
        staged = [staging.word_select(k, W) for k in range(L)]
        incoming = [data_in.payload.data[k] for k in range(L)]
        lanes_out = [Mux(cmd_slot[i], gather(staged[:i + 1] + incoming[:i + 1], cmd_out[i], W),
                         0) for i in range(L)]
        new_staging = [gather(staged[j:] + incoming, cmd_stage[j], W) for j in range(L)]
        with m.If(execute):
            m.d.sync += [
                out_valid.eq(1),
                out.payload.data.eq(Cat(lanes_out)),
                out.payload.last.eq(cmd_last),
                staging.eq(Cat(new_staging)),
            ]
        with m.Elif(out.ready):
            m.d.sync += out_valid.eq(0)

    def _check_data_last(self, m, taken, row_done):
        """Data tlast check: a row's data beats must end with exactly one tlast, on the last.
        ``taken``: a data beat transfers; ``row_done``: the row's last command executes."""
        data_in = self.s_axis_data
        closed = Signal()   # a tlast beat was taken in this row
        open_ = Signal()    # the last beat taken in this row had no tlast
        row_error = Signal()
        bad = Signal()
        m.d.comb += bad.eq(taken & closed)
        open_after = Mux(taken, ~data_in.payload.last, open_)
        with m.If(row_done):
            m.d.sync += [self.error.eq(row_error | bad | open_after),
                         closed.eq(0), open_.eq(0), row_error.eq(0)]
        with m.Else():
            m.d.sync += self.error.eq(0)
            with m.If(taken):
                m.d.sync += [closed.eq(data_in.payload.last), open_.eq(~data_in.payload.last),
                             row_error.eq(row_error | bad)]


def _info(expander):
    return {"latency_cycles": MASK_LATENCY, "throughput_beats_per_cycle": 1.0,
            "data_latency_cycles": DATA_LATENCY,
            "error_port": "error: one-cycle pulse after a row whose data tlast did not fall "
                          "exactly on its last data beat (the mask is authoritative)"}


BLOCK = Block(
    name="expander",
    top="spartan_expander",
    summary="zero-value compression -> dense rows (inverse of the compactor)",
    params=PARAMS,
    check=check_cols,
    build=lambda **p: Expander(**p),
    info=_info,
)
