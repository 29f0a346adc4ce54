"""Compaction engine (SPEC §4.2): dense rows -> zero-value compression (ZVC), one beat a cycle.

Per input beat (all combinational, then registered):

``nz``
    the per-lane nonzero test (:func:`hw.elements.is_nonzero`; all ones in dense bypass).
``pos``
    the exclusive prefix sum of ``nz`` (a log-depth Hillis-Steele scan): where each nonzero
    lane lands among this beat's nonzeros; ``count`` is the total.
``packed``
    a one-hot crossbar moves lane ``i`` to position ``pos[i]``: the beat's nonzeros, densely
    packed from position 0, zeros above ``count``.
``window``
    ``2*lanes`` elements: the staging register (``fill`` < ``lanes`` leftover elements of the
    row, zeros above) OR ``packed`` shifted up by ``fill`` elements (a barrel shifter).
    ``window[:lanes]`` is a packed output beat when ``fill + count >= lanes``;
    ``window[lanes:]`` is then the new staging content (the leftover carried into the next
    beat). At the row's end both halves leave as up to two beats, zero-filled, and the staging
    register empties.

Data beats go into a FIFO (``data_depth`` = ``cols/lanes + 4`` beats: one whole row, plus the
beats that arrive while the row's mask leaves). The row end can produce two beats in one cycle;
the second waits in a one-beat ``pending`` register. Over any run of accepted input beats at
most one more beat is produced than cycles pass (a row of ``b`` beats packs into at most ``b``
data beats), so that single register is enough and the input never waits for it.

The mask of the row is assembled in ``cols/lanes`` slots of ``lanes`` bits; at the row's last
beat it enters the mask FIFO with the row's ``tlast`` and its number of data beats. The mask
leaves first; when it does, the row's data beat count enters a small *grant* FIFO, and the
data output only sends beats of granted rows. The data ``tlast`` is set by counting beats
against the grant, so a beat can be written to the FIFO before anyone knows it is the row's
last. So a consumer reads a mask, then exactly ``ceil(popcount/lanes)`` data beats.

Flow control: ``s_axis_tready`` = data FIFO not full and mask FIFO not full. Back-pressure on
either output only fills its FIFO; the data FIFO holds a whole row, so the row in progress
can always finish and release its mask (no deadlock, nothing dropped).

Latency: the row's last input beat transfers on edge ``t``; its mask can transfer on edge
``t+1`` and its first data beat on edge ``t+2`` (outputs ready).

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
           "prefix_sums", "popcount", "shift_elements", "check_cols"]

#: Rows whose mask may wait on ``m_axis_mask`` (beyond that the input waits).
MASK_DEPTH = 4
#: Rows whose mask has left and whose data beats have not all left.
GRANT_DEPTH = 4
#: Data FIFO beats beyond one row.
DATA_MARGIN = 4

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


def shift_elements(value, amount, width, total, left):
    """``value`` shifted by ``amount`` elements of ``width`` bits (a barrel shifter, one
    stage per bit of ``amount``), then truncated or zero-extended to ``total`` elements."""
    bits = total * width
    # A left shift never needs bits above ``total`` elements; a right shift needs all of them.
    keep = bits if left else max(bits, len(value))
    v = Cat(value, Const(0, max(0, keep - len(value))))[:keep]
    for b in range(len(amount)):
        step = (1 << b) * width
        if left:
            moved = Cat(Const(0, min(step, keep)), v[:max(0, keep - step)])
        else:
            moved = Cat(v[step:], Const(0, min(step, keep)))
        v = Mux(amount[b], moved[:keep], v)
    return Cat(v, Const(0, max(0, bits - keep)))[:bits]


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

        src = self.s_axis
        m.d.comb += src.ready.eq(data_fifo.w_rdy & mask_fifo.w_rdy)
        transfer = Signal()
        m.d.comb += transfer.eq(src.valid & src.ready)

        # Tile state: the bypass flag is sampled on a tile's first beat.
        first = Signal(init=1)
        tile_bypass = Signal()
        bypass = self.bypass
        m.d.comb += bypass.eq(Mux(first, src.payload.user.bypass, tile_bypass))
        with m.If(transfer):
            m.d.sync += first.eq(src.payload.last)
            with m.If(first):
                m.d.sync += tile_bypass.eq(src.payload.user.bypass)

        # Row position.
        beat = Signal(range(B), name="beat")
        at_end = Signal()
        row_end = Signal()
        m.d.comb += [at_end.eq(beat == B - 1), row_end.eq(at_end | src.payload.last)]
        with m.If(transfer):
            m.d.sync += beat.eq(Mux(row_end, 0, beat + 1))
        m.d.sync += self.error.eq(transfer & src.payload.last & ~at_end)

        # Nonzero test, prefix sum, compaction crossbar.
        lanes = [src.payload.data[i] for i in range(L)]
        # (Plain expressions, not named signals, where a name would merely rename another
        # signal's bits in some configuration: Yosys then leaves half-used wires behind.)
        nz = Cat(is_nonzero(e, W, self._number_format) | bypass for e in lanes)
        pos_values, count_value = prefix_sums([nz[i] for i in range(L)])
        pos, count = pos_values, count_value
        packed = Signal(LW, name="packed")
        m.d.comb += packed.eq(Cat(
            select_onehot(lanes[k:], [nz[i] & (pos[i] == k) for i in range(k, L)], W)
            for k in range(L)))

        # Staging register and the 2*lanes window (one beat when nothing is ever left over:
        # one lane, or one beat per row).
        fill = self.fill
        staging = Signal(LW, name="staging")
        span = 2 * L if L > 1 and B > 1 else L
        window = Signal(span * W, name="window")
        m.d.comb += window.eq(staging | shift_elements(packed, fill, W, span, left=True))
        total = fill + count
        full = total >= L
        remainder = total[:len(fill)]  # total mod lanes (lanes is a power of two)

        # Beats produced by this input beat: 0, 1, or 2 at a row's end.
        n_new = Mux(transfer, Mux(row_end, full + remainder.any(), full), 0)
        with m.If(transfer):
            with m.If(row_end):
                m.d.sync += [staging.eq(0), fill.eq(0)]
            with m.Else():
                m.d.sync += [staging.eq(Mux(full, window[LW:], window[:LW])),
                             fill.eq(remainder)]

        # Into the data FIFO: the pending beat first, then the new ones.
        pending = Signal(LW, name="pending")
        pending_valid = Signal()
        m.d.comb += [
            data_fifo.w_en.eq(pending_valid | (n_new != 0)),
            data_fifo.w_data.eq(Mux(pending_valid, pending, window[:LW])),
        ]
        with m.If(pending_valid):
            with m.If(data_fifo.w_rdy):
                m.d.sync += [pending_valid.eq(n_new != 0), pending.eq(window[:LW])]
        with m.Elif(n_new == 2):
            m.d.sync += [pending_valid.eq(1), pending.eq(window[LW:])]

        # The row's mask: one slot of ``lanes`` bits per beat; the current beat's slot is
        # taken straight from ``nz``, earlier ones from registers (cleared at each row end).
        slots = [Signal(L, name=f"mask_slot{j}") for j in range(B - 1)] + [Const(0, L)]
        row_mask = Cat(Mux(beat == j, nz, slots[j]) for j in range(B))
        row_beats = Signal(range(B + 1), name="row_beats")
        with m.If(transfer):
            m.d.sync += row_beats.eq(Mux(row_end, 0, row_beats + n_new))
            for j in range(B - 1):
                # (Written so that Yosys does not share this mux with ``row_mask``'s, which
                # would leave a half-used FIFO input wire behind for the linter.)
                with m.If((beat == j) & ~row_end):
                    m.d.sync += slots[j].eq(nz)
                with m.Elif(row_end):
                    m.d.sync += slots[j].eq(0)
        new_entry = data.View(entry, row_fifo.w_data)
        m.d.comb += [
            mask_fifo.w_data.eq(row_mask),
            # ``& transfer`` changes nothing (the FIFO is written only on a transfer) but keeps
            # this bit from being a bare alias of the ``s_axis_tlast`` port (see above).
            new_entry.last.eq(src.payload.last & transfer),
            new_entry.nbeats.eq(row_beats + n_new),
            mask_fifo.w_en.eq(transfer & row_end),
            row_fifo.w_en.eq(transfer & row_end),
        ]

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
    return {"latency_cycles": 1, "throughput_beats_per_cycle": 1.0,
            "data_latency_cycles": 2,
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
