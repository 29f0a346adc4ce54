"""Expander (SPEC §4.3): zero-value compression -> dense rows, one output beat a cycle.

The exact inverse of :mod:`hw.compactor`. A row's mask is taken into a register (the next
row's mask is taken in the same cycle as the row's last output beat, so rows follow without a
gap) and shifted down ``lanes`` bits per output beat. Per output beat:

``need``
    the popcount of the beat's ``lanes`` mask bits; ``pos`` their exclusive prefix sum (the
    index of each nonzero lane among the beat's nonzeros).
``take``
    ``need > avail``: the staging register (``avail`` < ``lanes`` elements left over from the
    row's last data beat) is short, so a data beat is consumed in this cycle.
``window``
    the staging register OR the data beat shifted up by ``avail`` elements (zero when not
    taken). Output lane ``i`` is ``window[pos[i]]`` where its mask bit is set, else zero (a
    crossbar; ``pos[i] <= i`` so lane ``i`` chooses among ``i+1`` elements). The staging
    register becomes ``window`` shifted down by ``need`` elements, ``avail`` grows by
    ``lanes`` if a beat was taken and shrinks by ``need``. At the row's end the staging
    register empties: what is left is the zero fill of the row's last data beat.

A register stage holds the output beat (the ready path is one gate: a slot frees when the
output is empty or being read). Latency: a mask transferred on edge ``t`` gives the row's first
output beat on ``m_axis`` after edge ``t+1`` (transferable on edge ``t+2``); a data beat taken
on edge ``t`` is in the output beat transferable on edge ``t+1``.

Malformed input: the mask stream is authoritative. Each row takes exactly
``ceil(popcount(mask)/lanes)`` data beats (none for an empty row) and produces ``cols/lanes``
output beats, ``tlast`` from the mask's ``tlast``. The data ``tlast`` is checked: a row whose
data beats do not end with exactly one ``tlast`` on the last of them is reported by a one-cycle
``error`` pulse in the cycle after its last output beat is produced. The output is what the mask
says with whatever data arrived (a short or long data row shifts every later row: recovery is a
reset). If the data stream holds fewer beats than the masks call for, the expander waits.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .block import Block
from .compactor import PARAMS, Compactor, check_cols, input_layout, prefix_sums, shift_elements
from .elements import beat_layout

__all__ = ["Expander", "BLOCK"]

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
        L, W, C = self._lanes, self._width, self._cols
        B = C // L
        LW = L * W
        mask_in, data_in, out = self.s_axis_mask, self.s_axis_data, self.m_axis

        # The current row's mask, shifted down one slot per output beat.
        mask = Signal(C, name="row_mask")
        mask_last = Signal()
        have_mask = Signal()
        beat = Signal(range(B), name="beat")
        at_end = Signal()
        m.d.comb += at_end.eq(beat == B - 1)

        # Output register: a new beat can be produced when it is empty or being read.
        out_valid = Signal()
        room = Signal()
        m.d.comb += [room.eq(~out_valid | out.ready), out.valid.eq(out_valid)]

        slot = mask[:L]
        pos_values, need_value = prefix_sums([slot[i] for i in range(L)])
        pos = pos_values  # expressions (see hw/compactor.py)
        need = Signal(range(L + 1), name="need")
        m.d.comb += need.eq(need_value)

        avail = self.avail
        staging = Signal(LW, name="staging")
        take = Signal()
        m.d.comb += take.eq(need > avail)
        produce = Signal()
        m.d.comb += [
            produce.eq(have_mask & room & (~take | data_in.valid)),
            data_in.ready.eq(have_mask & room & take),
            mask_in.ready.eq(~have_mask | (produce & at_end)),
        ]
        taken = Signal()
        m.d.comb += taken.eq(data_in.valid & data_in.ready)

        # Nothing is ever left over with one lane or one beat per row: the window is a beat.
        span = 2 * L if L > 1 and B > 1 else L
        window = Signal(span * W, name="window")
        incoming = Mux(take, data_in.payload.data.as_value(), 0)
        m.d.comb += window.eq(staging | shift_elements(incoming, avail, W, span, left=True))
        lanes_out = []
        for i in range(L):
            chosen = window[:(i + 1) * W].word_select(pos[i], W) if i else window[:W]
            lanes_out.append(Mux(slot[i], chosen, 0))

        with m.If(produce):
            m.d.sync += [
                out_valid.eq(1),
                out.payload.data.eq(Cat(lanes_out)),
                out.payload.last.eq(at_end & mask_last),
            ]
            with m.If(at_end):
                m.d.sync += [have_mask.eq(0), beat.eq(0), staging.eq(0), avail.eq(0)]
            with m.Else():
                m.d.sync += [
                    beat.eq(beat + 1),
                    mask.eq(mask >> L),
                    staging.eq(shift_elements(window, need, W, L, left=False)),
                    avail.eq(avail + Mux(take, L, 0) - need),
                ]
        with m.Elif(out.ready):
            m.d.sync += out_valid.eq(0)

        with m.If(mask_in.valid & mask_in.ready):
            m.d.sync += [mask.eq(mask_in.payload.data), mask_last.eq(mask_in.payload.last),
                         have_mask.eq(1), beat.eq(0)]

        # Data tlast check: a row's data beats must end with exactly one tlast, on the last.
        closed = Signal()   # a tlast beat was taken in this row
        open_ = Signal()    # the last beat taken in this row had no tlast
        row_error = Signal()
        bad = Signal()
        m.d.comb += bad.eq(taken & closed)
        open_after = Mux(taken, ~data_in.payload.last, open_)
        with m.If(produce & at_end):
            m.d.sync += [self.error.eq(row_error | bad | open_after),
                         closed.eq(0), open_.eq(0), row_error.eq(0)]
        with m.Else():
            m.d.sync += self.error.eq(0)
            with m.If(taken):
                m.d.sync += [closed.eq(data_in.payload.last), open_.eq(~data_in.payload.last),
                             row_error.eq(row_error | bad)]
        return m


def _info(expander):
    return {"latency_cycles": 2, "throughput_beats_per_cycle": 1.0,
            "data_latency_cycles": 1,
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


class RoundTrip(wiring.Component):
    """Test harness (never registered for ``spartan generate``): a compactor feeding an
    expander directly, so a dense stream goes in on ``s_axis`` and comes back on ``m_axis``."""

    def __init__(self, *, lanes=8, width=8, number_format="int", cols=64):
        self.compactor = Compactor(lanes=lanes, width=width, number_format=number_format,
                                   cols=cols)
        self.expander = Expander(lanes=lanes, width=width, number_format=number_format,
                                 cols=cols)
        super().__init__({
            "s_axis": In(stream.Signature(input_layout(lanes, width))),
            "m_axis": Out(stream.Signature(beat_layout(lanes, width))),
            "compactor_error": Out(1),
            "expander_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.compactor = c = self.compactor
        m.submodules.expander = e = self.expander
        wiring.connect(m, wiring.flipped(self.s_axis), c.s_axis)
        wiring.connect(m, c.m_axis_mask, e.s_axis_mask)
        wiring.connect(m, c.m_axis_data, e.s_axis_data)
        wiring.connect(m, e.m_axis, wiring.flipped(self.m_axis))
        m.d.comb += [self.compactor_error.eq(c.error), self.expander_error.eq(e.error)]
        return m


ROUNDTRIP_BLOCK = Block(
    name="compactor_roundtrip",
    top="spartan_compactor_roundtrip",
    summary="test harness: compactor -> expander",
    params=PARAMS,
    check=check_cols,
    build=lambda **p: RoundTrip(**p),
    info=lambda rt: {"latency_cycles": 3, "throughput_beats_per_cycle": 1.0},
)
