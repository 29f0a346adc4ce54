"""Compaction engine: dense rows -> zero-value compression (ZVC), one beat a cycle
(docs/interfaces.md, "compactor").

A pipeline of register stages (none ever stalls: the input is throttled instead, see *Flow
control*), each with a bounded amount of logic. Two stage plans (:func:`pipeline`): from 8
lanes on the *deep* one below, so that no path goes from the input port through more than the
nonzero test (150 MHz on ECP5 at 8 and 16 lanes; docs/compactor.md, *Synthesis*); below 8
lanes, where the prefix sum and the crossbar are small, the *short* one, which keeps the
latency low: S1 registers the beat with its prefix sum straight from the input, the mask is
assembled from S1 and written into (unbuffered) FIFOs from S2, the window is formed from S2's
registers and written into the data FIFO without S3 and S4.

**S0** (registered from the accepted input beat)
    ``nz``: the per-lane nonzero test (:func:`spartan_rtl.hw.elements.is_nonzero`; all ones in dense
    bypass), the beat itself and its place in the row (``beat``, row end, ``tlast``).
**Prefix stages, the second is S1** (:data:`PREFIX_STAGES`, :func:`staged_prefix_sums`)
    ``pos``: the exclusive prefix sum of ``nz``, where each nonzero lane lands among this
    beat's nonzeros; ``count``: the total. First per group of four lanes by table lookup (one
    LUT level), then over the groups (two adder levels up to 16 lanes). The rest of the beat
    travels beside it.
**S2** (registered from S1)
    ``fill`` (< ``lanes``): how many elements of the row are left over in the staging register
    when this beat reaches S3. ``total = fill + count``, ``full = total >= lanes``, and the
    number of data beats the beat makes (0, 1, or 2 at a row end: ``n_new``). The crossbar's
    select, one-hot: ``sel[j][i]`` = lane ``i`` is nonzero and lands at window position
    ``j = fill + pos[i]``. The row's mask is assembled here (one slot of ``lanes`` bits per
    beat, a stage later) and, at the row's end, goes with the row's ``tlast`` and its number of
    data beats into *closed row* registers, and from there into the mask FIFO.
**S3** (registered from S2)
    The lanes moved by ``sel`` (an AND-OR crossbar) to their window positions.
**Window step** (from S3 into the S4 registers)
    ``window``: ``2*lanes - 1`` elements (the most a beat and a leftover make), the staging
    register (``fill`` leftover elements of the row, zeros above) OR the moved lanes.
    ``window[:lanes]`` is a packed output beat when ``full``; ``window[lanes:]`` is then the new
    staging content (the leftover carried into the next beat). At the row's end both halves
    leave as up to two beats, zero-filled, and the staging register empties.
**S4**: the beat written into the data FIFO.

Everything S2 and S3 need that depends on more than one beat (``fill``, the mask slots, the
row's beat count) is a function of the ``nz`` bits alone, so it is computed a stage ahead of
the data it steers. The mask slots and the row's beat count are kept a stage behind S2 (from
S2's registers), and the finished row waits in *closed row* registers before the FIFOs.

Data beats go into a FIFO (``data_depth`` = ``cols/lanes`` + ``data_margin`` beats: one
whole row, the beats in flight, and the beats that arrive while the row's mask leaves). The row
end can produce two beats in one cycle; the second waits in a one-beat ``pending`` register.
Over any run of window steps at most one more beat is produced than steps (a row of ``b`` beats
packs into at most ``b`` data beats; and while ``pending`` is full the staging register is
empty), so that single register is enough.

The mask leaves first; when it does, the row's data beat count enters a small *grant* FIFO,
and the data output only sends beats of granted rows. The data ``tlast`` is set by counting
beats against the grant, so a beat can be written to the FIFO before anyone knows it is the
row's last. So a consumer reads a mask, then exactly ``ceil(popcount/lanes)`` data beats.

Flow control: ``s_axis_tready`` is a register, ``room``: high when the data FIFO holds at most
``data_depth - 1 - data_in_flight`` beats and the mask FIFO at most
``mask_depth - mask_in_flight`` rows (:class:`Pipeline`), as counted in the cycle before. Beats
and rows still in the pipeline (and the one being accepted) then always fit, so the pipeline
never waits and nothing is dropped. Back-pressure on either output only fills its FIFO; the
data FIFO's threshold is above a whole row, so the row in progress can always finish and
release its mask (no deadlock).

Latency (outputs ready): the row's last input beat transfers on edge ``t``. Deep: its mask can
transfer on edge ``t+7`` and its first data beat on edge ``t+8`` (every data beat waits for its
row's grant, one edge after the mask). Short: ``t+2`` and ``t+4`` when that beat is made by
the row's last input beat (``t+3`` when made earlier: one edge after the mask). Before the
first pipelining for timing these were 1 and 2.

Malformed input: ``tlast`` before a row's last beat closes the row early. The missing columns
are zeros (mask bits 0, no data), a bypass row's mask has ones over the received columns only;
the row's mask and data are otherwise normal (and mask ``tlast`` is set), so the output stays a
valid ZVC stream that expands to the zero-padded row. ``error`` is high for one cycle, the cycle
after such a beat transfers.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from . import params as P
from .block import Block
from .elements import (
    beat_layout,
    delayed,
    fast_prefix_sums,
    is_nonzero,
    lanes_layout,
    popcount,
    prefix_sums,
    select_onehot,
    staged_prefix_sums,
)

__all__ = ["Compactor", "BLOCK", "input_layout", "GRANT_DEPTH", "data_depth", "pipeline",
           "Pipeline", "prefix_sums", "fast_prefix_sums", "popcount", "check_cols"]

#: Rows whose mask has left and whose data beats have not all left.
GRANT_DEPTH = 4
#: Register stages of the input beat's prefix sum in the deep pipeline
#: (:func:`staged_prefix_sums`).
PREFIX_STAGES = 2
#: From this many lanes on, the deep pipeline (see :func:`pipeline`).
DEEP_LANES = 8


@dataclass(frozen=True)
class Pipeline:
    """The compactor's stage plan for a number of lanes (:func:`pipeline`)."""
    #: S0, two prefix stages, the mask a stage behind S2, the crossbar registered (S3), the
    #: FIFO writes registered (S4, closed row) and the mask FIFO's output register.
    deep: bool
    #: Edges from a row's last input beat to its mask beat (outputs ready).
    mask_latency: int
    #: Edges from a row's last input beat to its first data beat (outputs ready) when the
    #: row's last input beat makes it; a beat made earlier leaves one edge after the mask.
    data_latency: int
    #: Data beats that can still enter the data FIFO after the level ``room`` was computed
    #: from: those of the window steps of the beats in the stages before the window and of the
    #: one being accepted (at most one beat more than steps, the ``pending`` backlog included),
    #: and the beat in S4.
    data_in_flight: int
    #: Masks that can still enter the mask FIFO after the level ``room`` was computed from.
    mask_in_flight: int
    #: Rows of masks buffered for ``m_axis_mask`` (beyond those in flight the input waits).
    mask_depth: int
    #: Data FIFO beats beyond one row: ``data_in_flight``, the FIFO's output register, and
    #: slack for the cycles between a row's last data beat and its mask's grant (so the input
    #: never waits at line rate).
    data_margin: int


def pipeline(lanes):
    """The stage plan: below :data:`DEEP_LANES` lanes the nonzero test, the prefix sum and the
    crossbar are short enough for the three-stage pipeline (S1, S2, the window into the FIFO),
    which keeps the latency low; from 8 lanes on, the deep one (150 MHz on ECP5 at 8 and 16
    lanes; docs/compactor.md, *Synthesis*)."""
    if lanes < DEEP_LANES:
        # S1, S2 (the mask FIFO write), the transfer; the data beat: S1, S2, S3 (the FIFO
        # write), the FIFO's output register, the transfer. In flight: S1, S2, S3 and the
        # beat being accepted.
        return Pipeline(deep=False, mask_latency=2, data_latency=4, data_in_flight=5,
                        mask_in_flight=3, mask_depth=8, data_margin=5 + 1 + 2)
    # The mask: S0, the prefix stages (the second is S1), S2, the mask stage, the closed row
    # (the FIFO write), the FIFO's output register, the transfer. Every data beat then waits
    # for its row's grant, one edge after the mask.
    mask_latency = 5 + PREFIX_STAGES
    data_in_flight = 7 + PREFIX_STAGES
    return Pipeline(deep=True, mask_latency=mask_latency, data_latency=mask_latency + 1,
                    data_in_flight=data_in_flight, mask_in_flight=5 + PREFIX_STAGES,
                    mask_depth=12, data_margin=data_in_flight + 1 + 4)


MAX_COLS = 4096

PARAMS = (
    P.lanes_param(),
    P.width_param(),
    P.number_format_param(),
    P.integer("cols", 64, 1, MAX_COLS, "elements per row (a multiple of lanes)"),
)


def check_cols(p):
    """Cross-parameter checks shared by the compactor and the expander."""
    if p["number_format"] == "fp" and p["width"] < 2:
        raise ValueError(f"width must be at least 2 for number_format 'fp', not {p['width']!r}")
    if p["cols"] % p["lanes"]:
        raise ValueError(f"cols must be a multiple of lanes ({p['lanes']}), not {p['cols']!r}")


def data_depth(cols, lanes):
    return cols // lanes + pipeline(lanes).data_margin


def input_layout(lanes, width):
    """Dense beats with ``tuser`` = ``{bypass}``, sampled on a tile's first beat."""
    return data.StructLayout({"data": lanes_layout(lanes, width), "last": 1,
                              "user": data.StructLayout({"bypass": 1})})


class Compactor(wiring.Component):
    """Dense -> ZVC compaction engine.

    Parameters
    ----------
    lanes, width, number_format, cols
        See ``spartan list``; checked here with the generator's messages.

    Members
    -------
    s_axis : In(stream)       dense rows (``data`` lanes, ``last``, ``user`` = bypass)
    m_axis_mask : Out(stream) one ``cols``-bit mask per row, ``last`` on the tile's last row
    m_axis_data : Out(stream) packed nonzeros, ``last`` on each row's last data beat
    error : Out(1)            one-cycle pulse after a ``tlast`` that ends a row early
    """

    def __init__(self, *, lanes=8, width=8, number_format="int", cols=64):
        p = BLOCK.resolve(dict(lanes=lanes, width=width, number_format=number_format,
                               cols=cols))
        self._lanes, self._width = p["lanes"], p["width"]
        self._number_format, self._cols = p["number_format"], p["cols"]
        super().__init__({
            "s_axis": In(stream.Signature(input_layout(lanes, width))),
            "m_axis_mask": Out(stream.Signature(data.StructLayout({"data": cols, "last": 1}))),
            "m_axis_data": Out(stream.Signature(beat_layout(lanes, width))),
            "error": Out(1),
        })
        # Visible in waveforms.
        self.fill = Signal(range(lanes), name="fill")
        self.bypass = Signal(name="bypass")

    lanes = property(lambda self: self._lanes)
    width = property(lambda self: self._width)
    number_format = property(lambda self: self._number_format)
    cols = property(lambda self: self._cols)
    beats_per_row = property(lambda self: self._cols // self._lanes)
    data_depth = property(lambda self: data_depth(self._cols, self._lanes))
    pipeline = property(lambda self: pipeline(self._lanes))

    def elaborate(self, platform):
        m = Module()
        L, W, C = self._lanes, self._width, self._cols
        B = C // L
        # The mask and the row's (last, data beat count) in two FIFOs moved in lockstep: in one,
        # Verilator would see the count (computed from the mask bits) as a loop through the
        # FIFO's input word when a row is one beat.
        entry = data.StructLayout({"last": 1, "nbeats": range(B + 1)})
        plan = self.pipeline
        # Deep: buffered, so the mask output's valid and the grant's count come from registers.
        mask_fifo_kind = fifo.SyncFIFOBuffered if plan.deep else fifo.SyncFIFO
        m.submodules.mask_fifo = mask_fifo = mask_fifo_kind(width=C, depth=plan.mask_depth)
        m.submodules.row_fifo = row_fifo = mask_fifo_kind(width=entry.size,
                                                          depth=plan.mask_depth)
        m.submodules.grant_fifo = grant_fifo = fifo.SyncFIFO(width=max(1, (B - 1).bit_length()),
                                                             depth=GRANT_DEPTH)
        m.submodules.data_fifo = data_fifo = fifo.SyncFIFOBuffered(width=L * W,
                                                                    depth=self.data_depth)

        transfer = self._flow_control(m, mask_fifo, data_fifo)
        beat, row_end = self._row_position(m, transfer)
        (s1_valid, s1_data, s1_nz, s1_beat, s1_row_end, s1_last, s1_pos,
         s1_count) = self._nonzero_prefix(m, transfer, beat, row_end)
        n_new, s2_sel, s2_valid, s2_data, s2_full, s2_row_end, s2_n_new = self._fill_and_selects(
            m, s1_valid, s1_data, s1_nz, s1_row_end, s1_pos, s1_count)

        # The row's mask and data beat count (deep: a stage behind S2, adding S2's registered
        # ``n_new``, so ``fill``'s arithmetic ends in a register).
        if plan.deep:
            r_valid, r_row_end, r_n_new = s2_valid, s2_row_end, s2_n_new
            r_nz = delayed(m, s1_nz, 1, "s2_nz")
            r_beat = delayed(m, s1_beat, 1, "s2_beat")
            r_last = delayed(m, s1_last, 1, "s2_last")
        else:
            r_valid, r_row_end, r_n_new = s1_valid, s1_row_end, n_new
            r_nz, r_beat, r_last = s1_nz, s1_beat, s1_last
        self._row_mask(m, entry, mask_fifo, row_fifo,
                       r_valid, r_row_end, r_n_new, r_nz, r_beat, r_last)

        moved, s3_valid, s3_full, s3_row_end, s3_n_new = self._crossbar(
            m, s2_sel, s2_valid, s2_data, s2_full, s2_row_end, s2_n_new)
        self._window_into_fifo(m, data_fifo, moved, s3_valid, s3_full, s3_row_end, s3_n_new)
        self._mask_output(m, entry, mask_fifo, row_fifo, grant_fifo)
        self._data_output(m, data_fifo, grant_fifo)
        return m

    def _window_sources(self):
        """For each window position ``j``, the input lanes that can land there."""
        L = self._lanes
        # Lane ``i`` lands at window position ``fill + pos[i]`` >= ``pos[i]``, <= ``i + L - 1``,
        # so position ``2*lanes - 1`` is never reached: the window has ``2*lanes - 1`` elements
        # when it spans two beats (its top half is zero-extended where it is used). It is one
        # beat when nothing is ever left over: one lane, or one beat per row.
        span = 2 * L - 1 if L > 1 and self.beats_per_row > 1 else L
        return [range(max(0, j - L + 1), L) for j in range(span)]

    def _flow_control(self, m, mask_fifo, data_fifo):
        """Room for everything in flight, from last cycle's FIFO levels. Returns the input's
        ``transfer``."""
        plan = self.pipeline
        src = self.s_axis
        room = Signal(name="room")
        m.d.sync += room.eq((data_fifo.level <= self.data_depth - 1 - plan.data_in_flight)
                            & (mask_fifo.level <= plan.mask_depth - plan.mask_in_flight))
        m.d.comb += src.ready.eq(room)
        transfer = Signal()
        m.d.comb += transfer.eq(src.valid & room)
        return transfer

    def _row_position(self, m, transfer):
        """The input's tile state (the bypass flag) and place in the row, and ``error``.
        Returns the input beat's place in the row (``beat``) and ``row_end``: it ends its row."""
        B = self.beats_per_row
        src = self.s_axis
        # The bypass flag is sampled on a tile's first beat.
        first = Signal(init=1)
        tile_bypass = Signal()
        bypass = self.bypass
        m.d.comb += bypass.eq(Mux(first, src.payload.user.bypass, tile_bypass))
        with m.If(transfer):
            m.d.sync += first.eq(src.payload.last)
            with m.If(first):
                m.d.sync += tile_bypass.eq(src.payload.user.bypass)

        beat = Signal(range(B), name="beat")
        at_end = Signal()
        row_end = Signal()
        m.d.comb += [at_end.eq(beat == B - 1), row_end.eq(at_end | src.payload.last)]
        with m.If(transfer):
            m.d.sync += beat.eq(Mux(row_end, 0, beat + 1))
        m.d.sync += self.error.eq(transfer & src.payload.last & ~at_end)
        return beat, row_end

    def _nonzero_prefix(self, m, transfer, beat, row_end):
        """The nonzero test and the prefix sum, up to S1. Returns S1's ``valid``, ``data``,
        ``nz``, ``beat``, ``row_end``, ``last``, ``pos`` and ``count``."""
        L, W, B = self._lanes, self._width, self.beats_per_row
        plan = self.pipeline
        src = self.s_axis
        lanes = [src.payload.data[i] for i in range(L)]
        nz = Cat(is_nonzero(e, W, self._number_format) | self.bypass for e in lanes)
        # The first registers: the accepted beat, its nonzero flags and its place in the row;
        # S0 of the deep pipeline, S1 (with the prefix sum) of the short one.
        # (Data registers are reset-less: read only beside a valid flag; this keeps the reset
        # net, a pin in the synthesis harness, off hundreds of flip-flops.)
        stage = "s0" if plan.deep else "s1"
        s0_valid = Signal(name=f"{stage}_valid")
        s0_data = Signal(L * W, name=f"{stage}_data", reset_less=True)
        s0_nz = Signal(L, name=f"{stage}_nz")
        s0_beat = Signal(range(B), name=f"{stage}_beat")
        s0_row_end = Signal(name=f"{stage}_row_end")
        s0_last = Signal(name=f"{stage}_last")
        m.d.sync += [
            s0_valid.eq(transfer), s0_data.eq(src.payload.data), s0_nz.eq(nz),
            s0_beat.eq(beat), s0_row_end.eq(row_end), s0_last.eq(src.payload.last),
        ]
        if plan.deep:
            # S1: the prefix sum, two stages after S0; the beat beside it.
            s1_pos, s1_count = staged_prefix_sums(m, [s0_nz[i] for i in range(L)], name="s1")
            front = PREFIX_STAGES
        else:
            pos, count = prefix_sums([nz[i] for i in range(L)])
            s1_pos = [Signal(range(i + 1), name=f"s1_pos{i}") for i in range(L)]
            s1_count = Signal(range(L + 1), name="s1_count")
            m.d.sync += [s1_pos[i].eq(pos[i]) for i in range(1, L)] + [s1_count.eq(count)]
            front = 0
        s1_valid = delayed(m, s0_valid, front, "s1_valid")
        s1_data = delayed(m, s0_data, front, "s1_data", reset_less=True)
        s1_nz = delayed(m, s0_nz, front, "s1_nz")
        s1_beat = delayed(m, s0_beat, front, "s1_beat")
        s1_row_end = delayed(m, s0_row_end, front, "s1_row_end")
        s1_last = delayed(m, s0_last, front, "s1_last")
        return s1_valid, s1_data, s1_nz, s1_beat, s1_row_end, s1_last, s1_pos, s1_count

    def _fill_and_selects(self, m, s1_valid, s1_data, s1_nz, s1_row_end, s1_pos, s1_count):
        """S2: ``fill``, the beats made, the crossbar's selects. Returns ``n_new`` (the beats
        the S1 beat makes), the registered selects, and S2's ``valid``, ``data``, ``full``,
        ``row_end`` and ``n_new``."""
        L, W = self._lanes, self._width
        fill = self.fill
        total = fill + s1_count
        full = total >= L
        remainder = total[:len(fill)]  # total mod lanes (lanes is a power of two)
        # Beats produced by this input beat: 0, 1, or 2 at a row's end.
        n_new = Mux(s1_valid, Mux(s1_row_end, full + remainder.any(), full), 0)
        with m.If(s1_valid):
            m.d.sync += fill.eq(Mux(s1_row_end, 0, remainder))

        sources = self._window_sources()
        s2_sel = [Signal(len(lanes), name=f"s2_sel{j}") for j, lanes in enumerate(sources)]
        dest = [fill + s1_pos[i] for i in range(L)]
        s2_valid = Signal()
        s2_data = Signal(L * W, name="s2_data", reset_less=True)
        s2_full = Signal()
        s2_row_end = Signal()
        s2_n_new = Signal(range(3), name="s2_n_new")
        m.d.sync += [
            s2_valid.eq(s1_valid), s2_data.eq(s1_data), s2_full.eq(full),
            s2_row_end.eq(s1_row_end), s2_n_new.eq(n_new),
        ]
        m.d.sync += [s2_sel[j].eq(Cat(s1_nz[i] & (dest[i] == j) for i in lanes))
                     for j, lanes in enumerate(sources)]
        return n_new, s2_sel, s2_valid, s2_data, s2_full, s2_row_end, s2_n_new

    def _row_mask(self, m, entry, mask_fifo, row_fifo, r_valid, r_row_end, r_n_new, r_nz,
                  r_beat, r_last):
        """The row's mask and data beat count into the mask and row FIFOs: one mask slot of
        ``lanes`` bits per beat; the current beat's slot is taken straight from ``nz``, earlier
        ones from registers (cleared at each row end)."""
        L, B = self._lanes, self.beats_per_row
        slots = [Signal(L, name=f"mask_slot{j}") for j in range(B - 1)] + [Const(0, L)]
        row_mask = Cat(Mux(r_beat == j, r_nz, slots[j]) for j in range(B))
        row_beats = Signal(range(B + 1), name="row_beats")
        with m.If(r_valid):
            m.d.sync += row_beats.eq(Mux(r_row_end, 0, row_beats + r_n_new))
            for j in range(B - 1):
                # (Written so that Yosys does not share this mux with ``row_mask``'s, which
                # would leave a half-used FIFO input wire behind for the linter.)
                with m.If((r_beat == j) & ~r_row_end):
                    m.d.sync += slots[j].eq(r_nz)
                with m.Elif(r_row_end):
                    m.d.sync += slots[j].eq(0)
        closed_valid = Signal()
        closed_mask = Signal(self._cols, name="closed_mask")
        closed_entry = Signal(entry, name="closed_entry")
        closing = [closed_valid.eq(r_valid & r_row_end), closed_mask.eq(row_mask),
                   closed_entry.last.eq(r_last), closed_entry.nbeats.eq(row_beats + r_n_new)]
        # Deep: the finished row then waits a cycle in registers before the FIFOs.
        deep = self.pipeline.deep
        m.d.sync += closing if deep else []
        m.d.comb += ([] if deep else closing) + [
            mask_fifo.w_data.eq(closed_mask),
            row_fifo.w_data.eq(closed_entry),
            mask_fifo.w_en.eq(closed_valid),
            row_fifo.w_en.eq(closed_valid),
        ]

    def _crossbar(self, m, s2_sel, s2_valid, s2_data, s2_full, s2_row_end, s2_n_new):
        """S3 (deep): the crossbar, registered (it fills a cycle on its own). Returns the
        ``moved`` lanes and S3's ``valid``, ``full``, ``row_end`` and ``n_new``."""
        W = self._width
        deep = self.pipeline.deep
        moved = Cat(select_onehot([s2_data.word_select(i, W) for i in lanes],
                                  [s2_sel[j][k] for k in range(len(lanes))], W)
                    for j, lanes in enumerate(self._window_sources()))
        if deep:
            s3_moved = Signal(len(moved), name="s3_moved", reset_less=True)
            m.d.sync += s3_moved.eq(moved)
            moved = s3_moved
        step = 1 if deep else 0
        s3_valid = delayed(m, s2_valid, step, "s3_valid")
        s3_full = delayed(m, s2_full, step, "s3_full")
        s3_row_end = delayed(m, s2_row_end, step, "s3_row_end")
        s3_n_new = delayed(m, s2_n_new, step, "s3_n_new")
        return moved, s3_valid, s3_full, s3_row_end, s3_n_new

    def _window_into_fifo(self, m, data_fifo, moved, s3_valid, s3_full, s3_row_end, s3_n_new):
        """The window, the staging register, into the data FIFO."""
        LW = self._lanes * self._width
        deep = self.pipeline.deep
        staging = Signal(LW, name="staging")
        # Named where it is logic (staging OR moved); above ``lanes`` it is the moved lanes
        # themselves, and a named copy of a register's bits would be half used.
        window_low = Signal(LW, name="window")
        m.d.comb += window_low.eq(staging | moved[:LW])
        window = Cat(window_low, moved[LW:])
        with m.If(s3_valid):
            with m.If(s3_row_end):
                m.d.sync += staging.eq(0)
            with m.Else():
                m.d.sync += staging.eq(Mux(s3_full, window[LW:], window[:LW]))

        # Into the data FIFO (deep: through S4 registers): the pending beat first, then the
        # new ones. ``room`` guarantees that the FIFO can take every beat written.
        pending = Signal(LW, name="pending", reset_less=True)
        pending_valid = Signal()
        s4_valid = Signal()
        s4_data = Signal(LW, name="s4_data", reset_less=True)
        writing = [s4_valid.eq(pending_valid | (s3_n_new != 0)),
                   s4_data.eq(Mux(pending_valid, pending, window[:LW]))]
        m.d.sync += writing if deep else []
        m.d.comb += ([] if deep else writing) + [
            data_fifo.w_en.eq(s4_valid), data_fifo.w_data.eq(s4_data)]
        with m.If(pending_valid):
            m.d.sync += [pending_valid.eq(s3_n_new != 0), pending.eq(window[:LW])]
        with m.Elif(s3_n_new == 2):
            m.d.sync += [pending_valid.eq(1), pending.eq(window[LW:])]

    def _mask_output(self, m, entry, mask_fifo, row_fifo, grant_fifo):
        """Mask output; a row with data beats is granted to the data output as its mask
        leaves."""
        head = Signal(entry)
        mask_out = self.m_axis_mask
        has_data = head.nbeats != 0
        m.d.comb += [
            head.eq(row_fifo.r_data),
            mask_out.payload.data.eq(mask_fifo.r_data),
            mask_out.payload.last.eq(head.last),
            mask_out.valid.eq(mask_fifo.r_rdy & (grant_fifo.w_rdy | ~has_data)),
            mask_fifo.r_en.eq(mask_out.ready & mask_out.valid),
            row_fifo.r_en.eq(mask_out.ready & mask_out.valid),
            grant_fifo.w_data.eq(head.nbeats - 1),
            grant_fifo.w_en.eq(mask_out.ready & mask_out.valid & has_data),
        ]

    def _data_output(self, m, data_fifo, grant_fifo):
        """Data output: beats of granted rows; ``last`` by counting against the grant."""
        data_out = self.m_axis_data
        sent = Signal(range(self.beats_per_row), name="sent")
        data_last = Signal()
        m.d.comb += [
            data_last.eq(sent == grant_fifo.r_data),
            data_out.payload.data.eq(data_fifo.r_data),
            data_out.payload.last.eq(data_last),
            data_out.valid.eq(data_fifo.r_rdy & grant_fifo.r_rdy),
            data_fifo.r_en.eq(data_out.ready & data_out.valid),
            grant_fifo.r_en.eq(data_out.ready & data_out.valid & data_last),
        ]
        with m.If(data_out.ready & data_out.valid):
            m.d.sync += sent.eq(Mux(data_last, 0, sent + 1))


def _info(compactor):
    plan = compactor.pipeline
    return {"latency_cycles": plan.mask_latency, "throughput_beats_per_cycle": 1.0,
            "data_latency_cycles": plan.data_latency,
            "mask_buffer_rows": plan.mask_depth,
            "data_buffer_beats": compactor.data_depth,
            "error_port": "error: one-cycle pulse after a tlast that ends a row early "
                          "(the row is closed, its missing columns are zeros)"}


BLOCK = Block(
    name="compactor",
    top="spartan_compactor",
    summary="dense -> zero-value compression (mask + packed nonzeros per row), per-tile bypass",
    params=PARAMS,
    check=check_cols,
    build=lambda **p: Compactor(**p),
    info=_info,
)
