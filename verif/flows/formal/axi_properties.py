"""The properties of the AXI interfaces: the core's AXI4-Lite slave (one response per request)
and the layer engine's AXI4 master, its ``BlockReader`` and ``ResultWriter`` alone (the burst
rules, ``wlast``, the responses awaited, and the invariants their proofs need)."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Signal
from amaranth.hdl._ast import Assert, Assume, Cover
from amaranth.lib import data

from spartan_rtl.hw.elements import log2

from .harness import _chan
from .internals import fifo_entries


def axil_props():
    """Requests outstanding (accepted, not yet answered) per channel, so the counts stay small
    and the properties are inductive: a response needs its request outstanding, and the
    slave's handshake outputs say how many are (the invariants k-induction needs: an AW or W
    is held while ``awready``/``wready`` is low, or answered by the pending B; an AR is
    outstanding exactly while ``arready`` is low)."""
    def props(m, dut, h):
        aw, w, ar, b, r = (_chan(dut, f"s_axil_{c}") for c in ("aw", "w", "ar", "b", "r"))

        def outstanding(request, response, name):
            count = Signal(range(4), name=name)
            change = h.fire(request) - h.fire(response)  # signed, -1 .. 1
            with m.If(count + change <= 3):
                m.d.sync += count.eq(count + change)
            return count

        aw_out = outstanding(aw, b, "aw_outstanding")
        w_out = outstanding(w, b, "w_outstanding")
        ar_out = outstanding(ar, r, "ar_outstanding")
        with m.If(b.valid):
            m.d.comb += Assert((aw_out != 0) & (w_out != 0), "B valid before AW and W")
        with m.If(r.valid):
            m.d.comb += Assert(ar_out != 0, "R valid before AR")
        # What the slave holds, seen from its ports: one AW (W) waiting for its write, and the
        # B of the last write; one read in flight.
        m.d.comb += [
            Assert(aw_out == ~aw.ready + b.valid, "AWs outstanding are not the held AW and B"),
            Assert(w_out == ~w.ready + b.valid, "Ws outstanding are not the held W and B"),
            Assert(ar_out == ~ar.ready, "ARs outstanding are not the read in flight"),
        ]
    return props


def _beyond_one(m, ch, valid, ready, length):
    """Cover: an ``ch`` burst of more than one beat transfers after a cycle held."""
    held = Signal(name=f"h_{ch}_held")
    m.d.sync += held.eq(valid & ~ready)
    m.d.comb += Cover(held & valid & ready & (length != 0),
                      f"{ch}: a burst of more than one beat transfers after a stall")


def _address_channel(m, h, dut, ch, *, max_burst, bus_bytes):
    """The AXI4 rules of a master's AR or AW beyond the handshake (the harness asserts that):
    one ID (0), INCR bursts of at most ``max_burst`` beats of the whole bus word, word-aligned,
    none across a 4 KB boundary. Covers: a burst of more than one beat taken after a stall,
    and one cut short by a 4 KB boundary (the row goes on in the next burst)."""
    from spartan_rtl.hw.engine_dma import BURST_INCR

    def port(field):
        return getattr(dut, f"m_axi_{ch}{field}")

    shift = log2(bus_bytes)
    addr, length, valid, ready = port("addr"), port("len"), port("valid"), port("ready")
    end = addr[:12] + ((length + 1) << shift)
    with m.If(valid):
        m.d.comb += [
            Assert(port("burst") == BURST_INCR, f"{ch}: a burst not INCR"),
            Assert(length < max_burst, f"{ch}: a burst longer than max_burst"),
            Assert(port("size") == shift, f"{ch}: size is not the whole bus word"),
            Assert(addr[:shift] == 0, f"{ch}: an address not word-aligned"),
            Assert(end <= 4096, f"{ch}: a burst across a 4 KB boundary"),
            Assert(port("id") == 0, f"{ch}: an ID other than 0"),
        ]
    _beyond_one(m, ch, valid, ready, length)
    i = h.internals
    left, beats = i["walker/left"], i["walker/length"]
    m.d.comb += Cover(valid & ready & (end == 4096)
                      & (beats < Mux(left < max_burst, left, max_burst)),
                      f"{ch}: a burst cut at a 4 KB boundary, its row going on")


def _block_counts(c, rows_max, words_max, rows="rows", words="words", total="beats"):
    """A command's counts in range: rows and row words nonzero and small."""
    r, w, t = getattr(c, rows), getattr(c, words), getattr(c, total)
    return (r >= 1) & (r <= rows_max) & (w >= 1) & (w <= t) & (t <= words_max)


def _block_addresses(c, rows, rows_max, bus_bytes):
    """A command's addresses as the sequencer checks them (docs/engine.md): base and stride
    word-aligned, the stride at least a row's words, the block below 2**32."""
    shift = log2(bus_bytes)
    span = sum((Mux(rows > n, c.stride, 0) for n in range(1, rows_max)), Const(0, 34))
    return ((c.base[:shift] == 0) & (c.stride[:shift] == 0) & (c.stride >= (c.words << shift))
            & (c.base + span + (c.words << shift) <= 2 ** 32))


def _prefix_mask(mask):
    """A nonzero mask of the lowest bits (a row's last word: its first lanes or bytes)."""
    return (mask != 0) & ((mask & (mask + 1)) == 0)


def _small(value, limit):
    """``value`` in its low bits, as its range invariant bounds it (narrow products)."""
    return value[:limit.bit_length()]


def _walker_invariants(m, h, *, addr, newest, block_rows, rows_max, words_max, max_burst,
                       bus_bytes):
    """The ``BurstWalker``'s registers (shared by reader and writer), as k-induction needs
    them: busy only in SIZE or ISSUE; while busy, the words of the row still to request
    (``left``) between 1 and the row's ``words``, 1 to ``rows_max`` rows left, addresses and
    stride word-aligned, and its block the newest the data side holds (``newest``: its
    ``words``, and at least ``rows_left`` rows); a burst in ISSUE is 1 to ``max_burst`` words,
    within the row and its 4 KB. Without them induction starts from a misaligned row address,
    or from ``words`` 0 (the next row's first burst 0 beats long: ``len`` 255), or (the writer
    offers AW only while its ``lengths`` FIFO has room) from a burst across 4 KB waiting for
    room."""
    i = h.internals
    state, busy, issue = i["walker/fsm_state"], i["walker/busy"], i["walker/valid"]
    left, words, rows_left, length = (i[f"walker/{n}"] for n in ("left", "words", "rows_left",
                                                                    "length"))
    shift = log2(bus_bytes)
    present, block = newest
    m.d.comb += [
        Assert(busy | (state == state.init), "the walker idle outside IDLE"),
        Assert(~busy | ((left >= 1) & (left <= words) & (words <= words_max)),
               "the walker's words left are not within its row"),
        Assert(~busy | ((rows_left >= 1) & (rows_left <= rows_max)),
               "the walker's rows left are out of range"),
        Assert(~busy | ((addr[:shift] == 0) & (i["walker/row_addr"][:shift] == 0)
                        & (i["walker/stride"][:shift] == 0)),
               "the walker's addresses are not word-aligned"),
        Assert(~busy | (present & (block.words == words)
                        & (getattr(block, block_rows) >= rows_left)),
               "the walker's block is not the newest pending"),
        Assert(~issue | ((length >= 1) & (length <= left) & (length <= max_burst)
                         & (addr[:12] + (length << shift) <= 4096)),
               "the walker's burst is not within its row and 4 KB"),
    ]


def _last_indices_kept(present, block, last_indices):
    """A pending block's last indices are its counts less one (as it was queued)."""
    kept = Const(1)
    for name, count in last_indices.items():
        kept &= block[name] == (block[count] - 1)[:len(block[name])]
    return Assert(~present | kept, "a pending block's last indices are not its counts less one")


def _to_request(h, rows_max, words_max):
    """Words the walker has still to request for its block: the row's ``left`` and the rows
    after it."""
    i = h.internals
    words = _small(i["walker/words"], words_max)
    rest = (_small(i["walker/rows_left"], rows_max) - 1) * words
    return Mux(i["walker/busy"], i["walker/left"] + rest, 0)


def _row_words_left(rows, words, row, word, rows_max, words_max):
    """Words of a block's first ``rows`` rows of ``words`` words that the data side has still
    to move, at row ``row``, word ``word``."""
    done = Mux(word < words, word, words)
    return Mux(row < rows, (_small(rows, rows_max) - _small(row, rows_max))
               * _small(words, words_max) - done, 0)


def engine_reader_props(*, lanes, max_burst, bus_bytes, rows_max, words_max):
    """``BlockReader`` alone (AR + R): commands free within their ranges (``rows`` 1 to
    ``rows_max``, ``valid_rows`` 1 to ``rows``, ``beats`` 1 to ``words_max``, ``words`` 1 to
    ``beats``, addresses as the sequencer checks them, ``dest`` 0 to 2, ``last_mask`` a
    nonzero prefix); the slave's R only for beats requested and not yet returned (``rlast``
    free: the reader counts it only for ``idle``). Asserted: AR's burst rules
    (:func:`_address_channel`); an R beat taken only as requested (given the slave's rule,
    what the reader adds is the next one); the words its pending blocks still need from
    memory are exactly the word its R skid buffer holds, the R beats outstanding and the words
    the walker has still to request (its R side takes every beat requested and no other);
    nothing outstanding when ``idle``.

    Invariants: :func:`_walker_invariants`; the pending blocks' counts in range and the R
    side's row and beat within its block (0 and 0 between blocks), its ``in_rows`` and
    ``in_words`` flags the compares of that position with the block's valid rows and words
    (both set between blocks)."""
    from spartan_rtl.hw.engine_dma import READ_LAST_INDICES, read_cmd_layout, walked_layout

    def props(m, dut, h):
        i = h.internals
        layout = walked_layout(read_cmd_layout(lanes), READ_LAST_INDICES)
        with m.If(dut.cmd.valid):
            c = dut.cmd.payload
            m.d.comb += Assume(_block_counts(c, rows_max, words_max)
                               & (c.valid_rows >= 1) & (c.valid_rows <= c.rows)
                               & _block_addresses(c, c.valid_rows, rows_max, bus_bytes)
                               & (c.dest <= 2) & _prefix_mask(c.last_mask))
        _address_channel(m, h, dut, "ar", max_burst=max_burst, bus_bytes=bus_bytes)
        ar_fire = dut.m_axi_arvalid & dut.m_axi_arready
        r_fire = dut.m_axi_rvalid & dut.m_axi_rready
        entries = [(present, data.View(layout, value))
                   for present, value in fifo_entries(i, "pending")]
        owed = h.outstanding(m, Mux(ar_fire, dut.m_axi_arlen + 1, 0), r_fire,
                             len(entries) * rows_max * words_max, "h_r_owed")
        m.d.comb += [
            Assume(~dut.m_axi_rvalid | (owed != 0)),
            Assert(~r_fire | (owed != 0), "R: a beat not requested"),
            Assert(~dut.idle | (owed == 0), "idle with R beats outstanding"),
        ]
        # Invariants.
        r_rdy = i["pending/r_rdy"]
        row, beat = i["row"], i["beat"]
        newest = (entries[0][0], Mux(entries[1][0], entries[1][1].as_value(),
                                     entries[0][1].as_value()))
        _walker_invariants(m, h, addr=dut.m_axi_araddr,
                           newest=(newest[0], data.View(layout, newest[1])),
                           block_rows="valid_rows", rows_max=rows_max, words_max=words_max,
                           max_burst=max_burst, bus_bytes=bus_bytes)
        head = entries[0][1]
        needed = []
        for n, (present, block) in enumerate(entries):
            m.d.comb += [Assert(~present | (_block_counts(block, rows_max, words_max)
                                            & (block.valid_rows >= 1)
                                            & (block.valid_rows <= block.rows)),
                                "a pending block's counts out of range"),
                         _last_indices_kept(present, block, READ_LAST_INDICES)]
            at_row, at_beat = (row, beat) if n == 0 else (Const(0, 1), Const(0, 1))
            needed.append(Mux(present, _row_words_left(block.valid_rows, block.words, at_row,
                                                       at_beat, rows_max, words_max), 0))
        m.d.comb += [
            Assert(Mux(r_rdy, (row < head.rows) & (beat < head.beats), (row == 0) & (beat == 0)),
                   "the R side's position is outside its block"),
            Assert(Mux(r_rdy, (i["in_rows"] == (row < head.valid_rows))
                       & (i["in_words"] == (beat < head.words)), i["in_rows"] & i["in_words"]),
                   "the R side's in-memory flags are not its position's compares"),
            Assert(sum(needed) == owed + i["r_held"] + _to_request(h, rows_max, words_max),
                   "the words the R side needs are not those held, requested and to request"),
        ]
    return props


def _w_bursts(m, dut, depth, max_burst, aw_fire, w_fire):
    """The ``ResultWriter``'s bursts whose AW went and whose W has not ended, oldest first (at
    most ``depth``), as the harness keeps them: ``(lens, count, pos, pop)``, their lengths, how
    many, the W beats taken of the oldest, and its last beat taken this cycle. Asserted: a W
    beat only for such a burst, ``wlast`` exactly on its last beat."""
    lens = [Signal(range(max_burst + 1), name=f"h_w_burst{n}") for n in range(depth)]
    count = Signal(range(depth + 1), name="h_w_bursts")
    pos = Signal(range(max_burst), name="h_w_beat")
    ends = (count != 0) & (pos == lens[0] - 1)
    pop = w_fire & ends
    after_pop = count - pop
    for n in range(depth):
        kept = Mux(pop, lens[n + 1] if n + 1 < depth else 0, lens[n])
        m.d.sync += lens[n].eq(Mux(aw_fire & (after_pop == n), dut.m_axi_awlen + 1, kept))
    m.d.sync += count.eq(count + aw_fire - pop)
    with m.If(w_fire):
        m.d.sync += pos.eq(Mux(ends, 0, pos + 1))
    with m.If(dut.m_axi_wvalid):
        m.d.comb += [Assert(count != 0, "W: a beat before its burst's AW"),
                     Assert(dut.m_axi_wlast == ends, "W: wlast not on a burst's last beat")]
    return lens, count, pos, pop


def engine_writer_props(*, max_burst, bus_bytes, rows_max, words_max):
    """``ResultWriter`` alone (AW + W + B): commands free within their ranges (``rows`` 1 to
    ``rows_max``, ``total_words`` 1 to ``words_max``, ``words`` 1 to ``total_words``, addresses
    as the sequencer checks them, ``last_strb`` a nonzero prefix), the data stream free; the
    slave's B only for a burst whose last W beat it took and not yet answered. The harness
    keeps the lengths of the bursts whose AW went and whose W did not end, oldest first, and
    the W beats taken of the oldest. Asserted: AW's burst rules (:func:`_address_channel`); a
    W beat only for a burst whose AW went, ``wlast`` exactly on its last beat (so the W beats
    are the AW lengths' sum, outstanding beats never below 0); ``bready`` always 1; the B
    responses the writer awaits (``outstanding``) are the AW bursts sent and not answered;
    nothing outstanding when ``idle``; and the words its pending blocks still write are the W
    beats owed plus the words the walker has still to request.

    Invariants: :func:`_walker_invariants`; the pending blocks' counts in range and the W
    side's row and word within its block; the harness's lengths are the ``lengths`` FIFO's
    entries (its memory rows, :meth:`Internals.row`) and its beat count ``in_burst``; the
    awaited responses are the bursts unfinished plus those finished and not answered."""
    from spartan_rtl.hw.engine_dma import WRITE_LAST_INDICES, walked_layout, write_cmd_layout

    def props(m, dut, h):
        i = h.internals
        layout = walked_layout(write_cmd_layout(8 * bus_bytes), WRITE_LAST_INDICES)
        with m.If(dut.cmd.valid):
            c = dut.cmd.payload
            m.d.comb += Assume(_block_counts(c, rows_max, words_max, total="total_words")
                               & _block_addresses(c, c.rows, rows_max, bus_bytes)
                               & _prefix_mask(c.last_strb))
        _address_channel(m, h, dut, "aw", max_burst=max_burst, bus_bytes=bus_bytes)
        aw_fire = dut.m_axi_awvalid & dut.m_axi_awready
        w_fire = dut.m_axi_wvalid & dut.m_axi_wready
        b_fire = dut.m_axi_bvalid & dut.m_axi_bready
        lengths = fifo_entries(i, "lengths")
        depth = len(lengths)
        lens, count, pos, pop = _w_bursts(m, dut, depth, max_burst, aw_fire, w_fire)
        # Responses: awaited (AW sent, not answered) and due (W ended, not answered).
        awaited = Signal(16, name="h_b_awaited")
        due = Signal(16, name="h_b_due")
        m.d.sync += [awaited.eq(awaited + aw_fire - b_fire), due.eq(due + pop - b_fire)]
        owed = sum((Mux(count > n, lens[n], 0) for n in range(depth)), Const(0, 8)) - pos
        m.d.comb += [
            Assume(~dut.m_axi_bvalid | (due != 0)),
            Assert(dut.m_axi_bready, "B: bready low"),
            Assert(~dut.idle | ((awaited == 0) & (count == 0)),
                   "idle with a write unanswered or W beats owed"),
        ]
        # Covers: wlast ending a burst of more than one beat, one of its beats held.
        stalled = Signal(name="h_w_stalled")
        w_held = dut.m_axi_wvalid & ~dut.m_axi_wready
        m.d.sync += stalled.eq(Mux(pop, 0, stalled | w_held))
        m.d.comb += Cover(pop & (pos != 0) & stalled,
                          "W: wlast ends a burst of more than one beat, after a stall in it")
        # Invariants.
        pending = [(present, data.View(layout, value))
                   for present, value in fifo_entries(i, "pending")]
        newest = Mux(pending[1][0], pending[1][1].as_value(), pending[0][1].as_value())
        _walker_invariants(m, h, addr=dut.m_axi_awaddr,
                           newest=(pending[0][0], data.View(layout, newest)),
                           block_rows="rows", rows_max=rows_max, words_max=words_max,
                           max_burst=max_burst, bus_bytes=bus_bytes)
        row, word = i["row"], i["word"]
        head = pending[0][1]
        to_write = []
        for n, (present, block) in enumerate(pending):
            m.d.comb += [Assert(~present | _block_counts(block, rows_max, words_max,
                                                         total="total_words"),
                                "a pending block's counts out of range"),
                         _last_indices_kept(present, block, WRITE_LAST_INDICES)]
            at_row, at_word = (row, word) if n == 0 else (Const(0, 1), Const(0, 1))
            to_write.append(Mux(present, _row_words_left(block.rows, block.words, at_row,
                                                         at_word, rows_max, words_max), 0))
        m.d.comb += [
            Assert(Mux(i["pending/r_rdy"], (row < head.rows) & (word < head.total_words),
                       (row == 0) & (word == 0)), "the W side's position is outside its block"),
            Assert(i["keep"] == (~i["pending/r_rdy"] | (word < head.words)),
                   "keep is not the W side's word within the words to write"),
            Assert(count == i["lengths/level"], "the bursts owed W are not the lengths queued"),
            Assert(i["in_burst"] == pos, "in_burst is not the W beats of the burst"),
            Assert(Mux(count != 0, pos < lens[0], pos == 0), "W beats past the burst's length"),
            Assert(i["outstanding"] == awaited, "the responses awaited are not the AWs sent"),
            Assert(awaited == (due + count)[:16],
                   "the responses awaited are not the bursts unfinished and due"),
            Assert(sum(to_write) == owed + _to_request(h, rows_max, words_max),
                   "the words to write are not the W beats owed and those to request"),
        ]
        for n, (present, value) in enumerate(lengths):
            m.d.comb += Assert(~(count > n) | ((value == lens[n]) & (lens[n] >= 1)
                                                & (lens[n] <= max_burst)),
                               "a queued length is not its burst's")
    return props
