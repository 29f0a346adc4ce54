"""Compaction engine (SPEC §4.2): dense rows -> zero-value compression (ZVC), one beat a cycle.

A three-stage pipeline (no stage ever stalls: the input is throttled instead, see *Flow
control*), so that no path goes from the input port through the whole packing:

**S1** (registered from the accepted input beat)
    ``nz``: the per-lane nonzero test (:func:`hw.elements.is_nonzero`; all ones in dense
    bypass); ``pos``: its exclusive prefix sum (a log-depth Hillis-Steele scan), where each
    nonzero lane lands among this beat's nonzeros; ``count``: the total. Plus the beat itself
    and its place in the row (``beat``, row end, ``tlast``).
**S2** (registered from S1)
    ``fill`` (< ``lanes``): how many elements of the row are left over in the staging register
    when this beat reaches S3. ``total = fill + count``, ``full = total >= lanes``, and the
    number of data beats the beat makes (0, 1, or 2 at a row end: ``n_new``). The crossbar's
    select, one-hot: ``sel[j][i]`` = lane ``i`` is nonzero and lands at window position
    ``j = fill + pos[i]``. The row's mask is assembled here (one slot of ``lanes`` bits per
    beat) and, at the row's end, enters the mask FIFO with the row's ``tlast`` and its number
    of data beats.
**S3** (into the data FIFO)
    ``window``: ``2*lanes - 1`` elements (the most a beat and a leftover make), the staging
    register (``fill`` leftover elements of the row, zeros above) OR the lanes moved by
    ``sel`` (an AND-OR crossbar).
    ``window[:lanes]`` is a packed output beat when ``full``; ``window[lanes:]`` is then the new
    staging content (the leftover carried into the next beat). At the row's end both halves
    leave as up to two beats, zero-filled, and the staging register empties.

Everything S2 and S3 need that depends on more than one beat (``fill``, the mask slots, the
row's beat count) is a function of the ``nz`` bits alone, so it is computed a stage ahead of
the data it steers.

Data beats go into a FIFO (``data_depth`` = ``cols/lanes`` + :data:`DATA_MARGIN` beats: one
whole row, the beats in flight, and the beats that arrive while the row's mask leaves). The row
end can produce two beats in one cycle; the second waits in a one-beat ``pending`` register.
Over any run of S3 steps at most one more beat is produced than steps (a row of ``b`` beats
packs into at most ``b`` data beats; and while ``pending`` is full the staging register is
empty), so that single register is enough.

The mask leaves first; when it does, the row's data beat count enters a small *grant* FIFO,
and the data output only sends beats of granted rows. The data ``tlast`` is set by counting
beats against the grant, so a beat can be written to the FIFO before anyone knows it is the
row's last. So a consumer reads a mask, then exactly ``ceil(popcount/lanes)`` data beats.

Flow control: ``s_axis_tready`` is a register, ``room``: high when the data FIFO holds at most
``data_depth - 1 -`` :data:`DATA_IN_FLIGHT` beats and the mask FIFO at most
``MASK_DEPTH -`` :data:`MASK_IN_FLIGHT` rows, as counted in the cycle before. Beats and rows
still in the pipeline (and the one being accepted) then always fit, so the pipeline never
waits and nothing is dropped. Back-pressure on either output only fills its FIFO; the data
FIFO's threshold is above a whole row, so the row in progress can always finish and release
its mask (no deadlock).

Latency (outputs ready): the row's last input beat transfers on edge ``t``; its mask can
transfer on edge ``t+2`` (:data:`MASK_LATENCY`) and its first data beat on edge ``t+4``
(:data:`DATA_LATENCY`) when that beat is made by the row's last input beat, or on edge ``t+3``
(one edge after the mask, as it is granted) when it was made earlier. Before the pipelining
for timing these were 1 and 2 (both cases).

Malformed input: ``tlast`` before a row's last beat closes the row early. The missing columns
are zeros (mask bits 0, no data), a bypass row's mask has ones over the received columns only;
the row's mask and data are otherwise normal (and mask ``tlast`` is set), so the output stays a
valid ZVC stream that expands to the zero-padded row. ``error`` is high for one cycle, the cycle
after such a beat transfers.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from . import params as P
from .block import Block
from .elements import beat_layout, is_nonzero, lanes_layout

__all__ = ["Compactor", "BLOCK", "input_layout", "MASK_DEPTH", "GRANT_DEPTH", "data_depth",
           "MASK_LATENCY", "DATA_LATENCY", "prefix_sums", "popcount", "check_cols"]

#: Rows of masks buffered for ``m_axis_mask`` (beyond those in flight the input waits).
MASK_DEPTH = 8
#: Rows whose mask has left and whose data beats have not all left.
GRANT_DEPTH = 4
#: Data FIFO beats beyond one row: :data:`DATA_IN_FLIGHT`, the FIFO's output register, and two
#: beats of slack for the cycles between a row's last data beat and its mask's grant (so the
#: input never waits at line rate).
DATA_MARGIN = 8
#: Data beats that can still enter the data FIFO after the level ``room`` was computed from:
#: the S3 steps of the beats in S1, S2 and S3 and of the one being accepted (4 steps, at most
#: one beat more than steps, the ``pending`` backlog included).
DATA_IN_FLIGHT = 5
#: Masks that can still enter the mask FIFO after the level ``room`` was computed from: those
#: of the beats in S1 and S2 and of the one being accepted.
MASK_IN_FLIGHT = 3
#: Edges from a row's last input beat to its mask beat (outputs ready): S1, S2 (the mask FIFO
#: write), then the transfer.
MASK_LATENCY = 2
#: Edges from a row's last input beat to its first data beat (outputs ready) when the last
#: input beat makes it: S1, S2, S3 (the data FIFO write), the FIFO's output register, then the
#: transfer. (A data beat made earlier leaves one edge after its row's mask: 3.)
DATA_LATENCY = 4

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
    return cols // lanes + DATA_MARGIN


def prefix_sums(bits):
    """``(pos, total)``: ``pos[i]`` = sum of ``bits[:i]`` (exclusive scan, log depth)."""
    n = len(bits)
    inclusive = [Cat(b) for b in bits]
    step = 1
    while step < n:
        inclusive = [inclusive[i] + inclusive[i - step] if i >= step else inclusive[i]
                     for i in range(n)]
        step *= 2
    return [Const(0, 1)] + inclusive[:-1], inclusive[-1]


def popcount(bits):
    return prefix_sums(bits)[1] if len(bits) else Const(0, 1)


def select_onehot(elements, hits, width):
    """OR of the ``elements`` whose ``hits`` bit is set (at most one is)."""
    out = Const(0, width)
    for e, h in zip(elements, hits):
        out = out | Mux(h, e, 0)
    return out


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

    def elaborate(self, platform):
        m = Module()
        L, W, C = self._lanes, self._width, self._cols
        B = C // L
        LW = L * W
        # The window is one beat when nothing is ever left over: one lane, or one beat per row.
        span = 2 * L if L > 1 and B > 1 else L

        # The mask and the row's (last, data beat count) in two FIFOs moved in lockstep: in one,
        # Verilator would see the count (computed from the mask bits) as a loop through the
        # FIFO's input word when a row is one beat.
        entry = data.StructLayout({"last": 1, "nbeats": range(B + 1)})
        m.submodules.mask_fifo = mask_fifo = fifo.SyncFIFO(width=C, depth=MASK_DEPTH)
        m.submodules.row_fifo = row_fifo = fifo.SyncFIFO(width=entry.size, depth=MASK_DEPTH)
        m.submodules.grant_fifo = grant_fifo = fifo.SyncFIFO(width=max(1, (B - 1).bit_length()),
                                                             depth=GRANT_DEPTH)
        m.submodules.data_fifo = data_fifo = fifo.SyncFIFOBuffered(width=LW,
                                                                    depth=self.data_depth)

        # Flow control: room for everything in flight, from last cycle's FIFO levels.
        src = self.s_axis
        room = Signal(name="room")
        m.d.sync += room.eq((data_fifo.level <= self.data_depth - 1 - DATA_IN_FLIGHT)
                            & (mask_fifo.level <= MASK_DEPTH - MASK_IN_FLIGHT))
        m.d.comb += src.ready.eq(room)
        transfer = Signal()
        m.d.comb += transfer.eq(src.valid & room)

        # --- input: tile state, row position, nonzero test, prefix sum -> S1 -----------------
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

        lanes = [src.payload.data[i] for i in range(L)]
        # (Plain expressions, not named signals, where a name would merely rename another
        # signal's bits in some configuration: Yosys then leaves half-used wires behind.)
        nz = Cat(is_nonzero(e, W, self._number_format) | bypass for e in lanes)
        pos, count = prefix_sums([nz[i] for i in range(L)])

        # S1 registers: loaded every cycle, meaningful when ``s1_valid``.
        s1_valid = Signal()
        s1_data = Signal(LW, name="s1_data")
        s1_nz = Signal(L, name="s1_nz")
        s1_pos = [Signal(range(i + 1), name=f"s1_pos{i}") for i in range(L)]
        s1_count = Signal(range(L + 1), name="s1_count")
        s1_beat = Signal(range(B), name="s1_beat")
        s1_row_end = Signal()
        s1_last = Signal()
        m.d.sync += [
            s1_valid.eq(transfer), s1_data.eq(src.payload.data), s1_nz.eq(nz),
            s1_count.eq(count), s1_beat.eq(beat), s1_row_end.eq(row_end),
            s1_last.eq(src.payload.last),
        ]
        m.d.sync += [s1_pos[i].eq(pos[i]) for i in range(1, L)]

        # --- S2: fill, beats made, crossbar selects, the row's mask -------------------------
        fill = self.fill
        total = fill + s1_count
        full = total >= L
        remainder = total[:len(fill)]  # total mod lanes (lanes is a power of two)
        # Beats produced by this input beat: 0, 1, or 2 at a row's end.
        n_new = Mux(s1_valid, Mux(s1_row_end, full + remainder.any(), full), 0)
        with m.If(s1_valid):
            m.d.sync += fill.eq(Mux(s1_row_end, 0, remainder))

        # Lane ``i`` lands at window position ``fill + pos[i]`` >= ``pos[i]``, <= ``i + L - 1``,
        # so position ``2*lanes - 1`` is never reached: the window has ``span - 1`` elements
        # when it spans two beats (its top half is zero-extended where it is used).
        if span > L:
            span -= 1
        sources = [range(max(0, j - L + 1), L) for j in range(span)]
        s2_sel = [Signal(len(sources[j]), name=f"s2_sel{j}") for j in range(span)]
        dest = [fill + s1_pos[i] for i in range(L)]
        s2_valid = Signal()
        s2_data = Signal(LW, name="s2_data")
        s2_full = Signal()
        s2_row_end = Signal()
        s2_n_new = Signal(range(3), name="s2_n_new")
        m.d.sync += [
            s2_valid.eq(s1_valid), s2_data.eq(s1_data), s2_full.eq(full),
            s2_row_end.eq(s1_row_end), s2_n_new.eq(n_new),
        ]
        m.d.sync += [s2_sel[j].eq(Cat(s1_nz[i] & (dest[i] == j) for i in sources[j]))
                     for j in range(span)]

        # The row's mask: one slot of ``lanes`` bits per beat; the current beat's slot is
        # taken straight from ``nz``, earlier ones from registers (cleared at each row end).
        slots = [Signal(L, name=f"mask_slot{j}") for j in range(B - 1)] + [Const(0, L)]
        row_mask = Cat(Mux(s1_beat == j, s1_nz, slots[j]) for j in range(B))
        row_beats = Signal(range(B + 1), name="row_beats")
        with m.If(s1_valid):
            m.d.sync += row_beats.eq(Mux(s1_row_end, 0, row_beats + n_new))
            for j in range(B - 1):
                # (Written so that Yosys does not share this mux with ``row_mask``'s, which
                # would leave a half-used FIFO input wire behind for the linter.)
                with m.If((s1_beat == j) & ~s1_row_end):
                    m.d.sync += slots[j].eq(s1_nz)
                with m.Elif(s1_row_end):
                    m.d.sync += slots[j].eq(0)
        new_entry = data.View(entry, row_fifo.w_data)
        m.d.comb += [
            mask_fifo.w_data.eq(row_mask),
            new_entry.last.eq(s1_last),
            new_entry.nbeats.eq(row_beats + n_new),
            mask_fifo.w_en.eq(s1_valid & s1_row_end),
            row_fifo.w_en.eq(s1_valid & s1_row_end),
        ]

        # --- S3: the window, the staging register, into the data FIFO ----------------------
        staging = Signal(LW, name="staging")
        window = Signal(span * W, name="window")
        m.d.comb += window.eq(Cat(
            (staging.word_select(j, W) if j < L else Const(0, W))
            | select_onehot([s2_data.word_select(i, W) for i in sources[j]],
                            [s2_sel[j][k] for k in range(len(sources[j]))], W)
            for j in range(span)))
        with m.If(s2_valid):
            with m.If(s2_row_end):
                m.d.sync += staging.eq(0)
            with m.Else():
                m.d.sync += staging.eq(Mux(s2_full, window[LW:], window[:LW]))

        # Into the data FIFO: the pending beat first, then the new ones. ``room`` guarantees
        # that the FIFO can take every beat written here.
        pending = Signal(LW, name="pending")
        pending_valid = Signal()
        m.d.comb += [
            data_fifo.w_en.eq(pending_valid | (s2_n_new != 0)),
            data_fifo.w_data.eq(Mux(pending_valid, pending, window[:LW])),
        ]
        with m.If(pending_valid):
            m.d.sync += [pending_valid.eq(s2_n_new != 0), pending.eq(window[:LW])]
        with m.Elif(s2_n_new == 2):
            m.d.sync += [pending_valid.eq(1), pending.eq(window[LW:])]

        # Mask output; a row with data beats is granted to the data output as its mask leaves.
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

        # Data output: beats of granted rows; ``last`` by counting against the grant.
        data_out = self.m_axis_data
        sent = Signal(range(B), name="sent")
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
        return m


def _info(compactor):
    return {"latency_cycles": MASK_LATENCY, "throughput_beats_per_cycle": 1.0,
            "data_latency_cycles": DATA_LATENCY,
            "mask_buffer_rows": MASK_DEPTH,
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
