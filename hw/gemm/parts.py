"""What both GEMM datapaths build alike, written once (docs/gemm.md, "Two datapaths").

- :func:`mask_layout`, :func:`entry_layout`: a row mask on ``s_axis_a_mask``; an output entry
  (``n_par`` sums, or a zero-row token, and ``tlast``).
- :func:`exact_or_acc`: the width of a product or a sum, exact or wrapped to ``acc_width``.
- :func:`weight_write_pointer`, :func:`write_weights`: where each ``B`` beat goes, and a weight
  memory's write port taking it.
- :class:`RowCursor`: the row loader's walk through the ``A`` streams (a mask, then the row's
  data beats; two slots filled alternately) and the rules both loaders follow.
- :func:`send_entries`: an output entry's beats on ``m_axis_c``.

Either datapath's generated Verilog is what it was before these were shared, name for name:
where the two name a thing differently (the output's beat counter), the name is a parameter;
where their logic differs (a FIFO or registers behind the output, a token's beats zeroed or
stored as zeros), what differs is passed in.
"""

from amaranth.hdl import Cat, Mux, Signal, signed, unsigned
from amaranth.lib import data

from ..elements import mux_tree

__all__ = ["mask_layout", "entry_layout", "exact_or_acc", "weight_write_pointer", "write_weights",
           "RowCursor", "send_entries"]


def mask_layout(k):
    """One ``s_axis_a_mask`` beat: a row's ``k``-bit mask, ``last`` on a tile's last row."""
    return data.StructLayout({"data": k, "last": 1})


def entry_layout(n_par, acc_width):
    """One output entry: a column group's ``n_par`` sums, whether it is a zero-row token (sent
    as ``n / lanes`` zero beats) and whether it ends the tile."""
    return data.StructLayout({"sums": data.ArrayLayout(acc_width, n_par), "zero": 1, "tlast": 1})


def exact_or_acc(bits, *, acc_width, signed_elements):
    """The shape of a ``bits``-bit product or sum: exact, or ``acc_width`` bits when that is
    less (everything is kept modulo ``2**acc_width`` from there on: bits above ``acc_width``
    never reach ``C``)."""
    if bits >= acc_width:
        return unsigned(acc_width)
    return signed(bits) if signed_elements else unsigned(bits)


def weight_write_pointer(m, b, write, loading, *, k, col_groups, beats_per_word):
    """The ``B`` write position ``(b_sub, b_cg, b_row)`` (beat within a word, column group,
    row of ``B``) stepped by each ``write`` of stream ``b``: row-major ``B``, ``tlast`` back to
    ``B[0, 0]``, rows beyond ``k`` wrap. ``loading`` is set while a packet is part-way in."""
    b_sub = Signal(range(max(beats_per_word, 2)), name="b_sub")
    b_cg = Signal(range(max(col_groups, 2)), name="b_cg")
    b_row = Signal(range(max(k, 2)), name="b_row")
    with m.If(write):
        m.d.sync += loading.eq(~b.payload.last)
        with m.If(b.payload.last):
            m.d.sync += [b_sub.eq(0), b_cg.eq(0), b_row.eq(0)]
        with m.Elif(b_sub != beats_per_word - 1):
            m.d.sync += b_sub.eq(b_sub + 1)
        with m.Else():
            m.d.sync += b_sub.eq(0)
            with m.If(b_cg != col_groups - 1):
                m.d.sync += b_cg.eq(b_cg + 1)
            with m.Else():
                m.d.sync += [b_cg.eq(0), b_row.eq(Mux(b_row == k - 1, 0, b_row + 1))]
    return b_sub, b_cg, b_row


def write_weights(m, memory, beat, *, lanes, width, beats_per_word, addr, enable, b_sub):
    """A write port of weight ``memory`` (words of ``beats_per_word`` beats of ``B``) that
    writes ``beat`` at word ``addr``, in its place ``b_sub`` of the word, when ``enable``."""
    granular = beats_per_word > 1
    wp = memory.write_port(granularity=lanes * width if granular else None)
    m.d.comb += [wp.addr.eq(addr), wp.data.eq(Cat(*[beat] * beats_per_word))]
    m.d.comb += wp.en.eq(Mux(enable, 1 << b_sub, 0) if granular else enable)


class RowCursor:
    """Where a row loader is in the ``A`` streams, and the rules both loaders follow
    (docs/gemm.md, "Loading `A`"): a mask beat when the slot it fills is free; an empty row's
    slot is full at once, another row's after its ``ceil(nnz / lanes)`` data beats; slots are
    filled alternately. The mask decides how many data beats a row has: a data ``tlast``
    elsewhere than the row's last beat, or (dense-only) a mask that is not all ones, only
    raises the error flag.

    ``receiving`` (``ld_data``): a row's data beats are being taken; ``slot`` (``ld_slot``):
    the slot being filled; ``beat``, ``beats_left``: the row's data beats taken and to come;
    ``tile_start``: the next mask starts a tile.
    """

    def __init__(self, *, k, lanes):
        self.receiving = Signal(name="ld_data")
        self.slot = Signal(name="ld_slot")
        self.beat = Signal(range(max(k // lanes, 2)), name="ld_beat")
        self.beats_left = Signal(range(k // lanes + 1), name="ld_beats_left")
        self.tile_start = Signal(init=1, name="tile_start")

    def mask_ready(self, slot_free, b_pending):
        """A mask is taken when no data beats are awaited and ``slot_free``; a tile's first
        only while no ``B`` packet is ``b_pending`` (being received or offered), so a tile
        uses the ``B`` complete when it started."""
        return ~self.receiving & slot_free & ~(self.tile_start & b_pending)

    def start_row(self, m, *, empty, mark_full, beats):
        """In the cycle a mask is taken: an ``empty`` row's slot is full (``mark_full``, comb
        statements) and the next slot is filled; another row's data beats are awaited
        (``beats``: the sync statements that set how many, or start counting them)."""
        with m.If(empty):
            m.d.comb += mark_full
            m.d.sync += self.slot.eq(~self.slot)
        with m.Else():
            m.d.sync += [self.receiving.eq(1), self.beat.eq(0)]
            m.d.sync += beats

    def take_data(self, m, data, accept, *, sparse, mask, mask_accept, err, mark_full,
                  store=None):
        """A data beat of stream ``data`` (``accept``: taken this cycle): ``err`` when its
        ``tlast`` disagrees with the row's mask, or (not ``sparse``) when a ``mask`` taken
        (``mask_accept``) is not all ones; on the row's last beat its slot is full
        (``mark_full``, comb statements) and the next slot is filled. ``store()``, if given,
        adds the loader's own writes of the beat, under the same condition (a second ``If``
        on ``accept`` would add cells to the netlist, and renumber the names Amaranth derives
        from cell numbers in the blocks built after this one)."""
        bad_mask = mask_accept & ~mask.all() if not sparse else 0
        last_beat = self.beats_left == 1
        m.d.comb += err.eq((accept & (data.payload.last != last_beat)) | bad_mask)
        with m.If(accept):
            m.d.sync += [self.beat.eq(self.beat + 1), self.beats_left.eq(self.beats_left - 1)]
            with m.If(last_beat):
                m.d.comb += mark_full
                m.d.sync += [self.slot.eq(~self.slot), self.receiving.eq(0)]
            if store is not None:
                store()


def send_entries(m, c, head_entry, *, valid, lanes, n, n_par, acc_width, zeros_stored,
                 beat_name="beat"):
    """``m_axis_c`` (stream ``c``) from the output's head entry ``head_entry``
    (:func:`entry_layout`), readable while ``valid``: ``n_par / lanes`` beats of its sums,
    ``n / lanes`` zero beats for a zero-row token, ``tlast`` on a tile's last beat.
    ``zeros_stored``: a token's sums are zeros already (else its beats are zeroed here; either
    way a token's beats past the entry's chunks read one of them). ``beat_name``: the beat
    counter's name in the generated Verilog. Returns ``pop``, high in the cycle the entry's
    last beat leaves.
    """
    head = Signal(entry_layout(n_par, acc_width))
    m.d.comb += head.eq(head_entry)
    beat = Signal(range(max(n // lanes, 2)), name=beat_name)
    final = Signal()
    beats_per_entry = n_par // lanes
    m.d.comb += final.eq(beat == Mux(head.zero, n // lanes - 1, beats_per_entry - 1))
    chunks = [Cat(*[head.sums[w * lanes + lane] for lane in range(lanes)])
              for w in range(beats_per_entry)]
    chunk = mux_tree(chunks, beat)
    m.d.comb += [
        c.valid.eq(valid),
        c.payload.data.eq(chunk if zeros_stored else Mux(head.zero, 0, chunk)),
        c.payload.last.eq(head.tlast & final),
    ]
    pop = Signal()
    m.d.comb += pop.eq(c.valid & c.ready & final)
    with m.If(c.valid & c.ready):
        m.d.sync += beat.eq(Mux(final, 0, beat + 1))
    return pop
