"""The layer engine's memory side (docs/engine.md, "Blocks"): the AXI4 master's ports, a
block reader (AR + R) and a result writer (AW + W + B).

Both walk *blocks*: ``rows`` rows of ``beats`` beats at ``base + r*stride``, each beat one bus
word of ``lanes`` elements (``data_width = lanes*width``). Only the first ``valid_rows`` rows and
``words`` words of a row touch memory; the reader fills the rest with zeros, the writer drops
it. A row's words go out as INCR bursts of at most ``max_burst`` beats that never cross a
4 KB boundary. Reads and writes stay in order (one ID), so the R side needs no tags: it walks
the block the AR side walked, a few blocks behind at most.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .elements import log2

__all__ = ["ADDR_WIDTH", "axi_master_members", "read_cmd_layout", "write_cmd_layout",
           "walked_layout", "READ_LAST_INDICES", "WRITE_LAST_INDICES",
           "RegisterSlice", "BlockReader", "ResultWriter", "DEST_A", "DEST_B", "DEST_T"]

ADDR_WIDTH = 32
BURST_INCR = 0b01
ID_WIDTH = 1
CACHE_NORMAL = 0b0011
RESP_OKAY = 0b00
#: Where a read block's beats go: the core's ``A`` or ``B`` stream, or the transposer.
DEST_A, DEST_B, DEST_T = 0, 1, 2
#: A 16-bit count: rows, beats and words of one block (at most 4096 of each).
COUNT_BITS = 16


def axi_master_members(data_width):
    """Port members of the AXI4 master, AMBA names after ``m_axi_``. One ID (0): every
    transaction in order; a response carrying another ID is taken as an error response.
    ``*cache`` 0b0011 (normal, non-cacheable, bufferable), ``*prot`` 0 (data, secure,
    unprivileged)."""
    aw = ADDR_WIDTH
    members = {}
    for ch in ("aw", "ar"):
        members.update({f"m_axi_{ch}id": Out(ID_WIDTH),
                        f"m_axi_{ch}addr": Out(aw), f"m_axi_{ch}len": Out(8),
                        f"m_axi_{ch}size": Out(3), f"m_axi_{ch}burst": Out(2),
                        f"m_axi_{ch}cache": Out(4), f"m_axi_{ch}prot": Out(3),
                        f"m_axi_{ch}valid": Out(1), f"m_axi_{ch}ready": In(1)})
        if ch == "aw":
            members.update({"m_axi_wdata": Out(data_width), "m_axi_wstrb": Out(data_width // 8),
                            "m_axi_wlast": Out(1), "m_axi_wvalid": Out(1),
                            "m_axi_wready": In(1),
                            "m_axi_bid": In(ID_WIDTH), "m_axi_bresp": In(2),
                            "m_axi_bvalid": In(1), "m_axi_bready": Out(1)})
        else:
            members.update({"m_axi_rid": In(ID_WIDTH), "m_axi_rdata": In(data_width),
                            "m_axi_rresp": In(2), "m_axi_rlast": In(1), "m_axi_rvalid": In(1),
                            "m_axi_rready": Out(1)})
    return members


def read_cmd_layout(lanes):
    return data.StructLayout({
        "base": ADDR_WIDTH, "stride": ADDR_WIDTH,
        "rows": COUNT_BITS, "valid_rows": COUNT_BITS, "beats": COUNT_BITS, "words": COUNT_BITS,
        "last_mask": lanes,     # lanes of a row's last valid word that hold elements
        "dest": 2, "operand_b": 1})


def write_cmd_layout(data_width):
    return data.StructLayout({
        "base": ADDR_WIDTH, "stride": ADDR_WIDTH, "rows": COUNT_BITS,
        "words": COUNT_BITS,        # words of a row that hold results
        "total_words": COUNT_BITS,  # words of a row that arrive (the rest are dropped)
        "last_strb": data_width // 8})


#: The last indices (``count - 1``) a data side keeps beside each block it walks, by the
#: command count they come from.
READ_LAST_INDICES = {"last_row": "rows", "last_valid_row": "valid_rows", "last_beat": "beats",
                     "last_word": "words"}
WRITE_LAST_INDICES = {"last_row": "rows", "last_word": "words",
                      "last_total_word": "total_words"}


def walked_layout(cmd_layout, last_indices):
    """A block's copy as its data side walks it: the command's fields, then each of
    ``last_indices`` (a count less one, computed as the copy is queued). The data side's
    position tests are then equalities of two registers: a subtraction's carry chain before
    each compare (the reader's ``beat == words - 1`` into its register slice) was the engine's
    slowest path (9.6 ns on ECP5)."""
    fields = {name: field.shape for name, field in cmd_layout}
    fields.update({name: COUNT_BITS for name in last_indices})
    return data.StructLayout(fields)


def step_position(m, advance, item, last_item, row, last_row, block_end):
    """On ``advance``, a block's position moves to the next ``item`` of its ``row``, or to the
    next row after its last item (``last_item``, ``last_row``: indices); ``block_end``
    (combinational) is set at the block's last. Returns ``(row_end, at_last_row)``: the
    position is its row's last item, the block's last row (for flags stepped with the
    position)."""
    row_end, at_last_row = item == last_item, row == last_row
    with m.If(advance):
        with m.If(row_end):
            m.d.sync += item.eq(0)
            with m.If(at_last_row):
                m.d.sync += row.eq(0)
                m.d.comb += block_end.eq(1)
            with m.Else():
                m.d.sync += row.eq(row + 1)
        with m.Else():
            m.d.sync += item.eq(item + 1)
    return row_end, at_last_row


def still_below(below, index, last, *, wraps):
    """The next value of a flag ``below`` = ``index <= last`` as ``index`` steps: 1 where the
    step ``wraps`` ``index`` to 0 (a block has at least one of each), else whether ``index``
    was not yet ``last``. Kept as a flip-flop, the compare stays off the handshake that steps
    it."""
    return wraps | (below & (index != last))


class BurstWalker(wiring.Component):
    """The address side shared by reads and writes: takes a block (``base``, ``stride``,
    ``rows``, ``words``), issues one request per burst on ``addr``/``len``/``valid``.
    A burst's length is registered a cycle before it is offered (two cycles a burst): the
    data side, one word a cycle, is the bottleneck only for bursts of one word."""

    def __init__(self, *, data_width, max_burst):
        self._bw = data_width // 8
        self._max_burst = max_burst
        super().__init__({
            "start": In(1), "base": In(ADDR_WIDTH), "stride": In(ADDR_WIDTH),
            "rows": In(COUNT_BITS), "words": In(COUNT_BITS),
            "busy": Out(1),
            "addr": Out(ADDR_WIDTH), "len": Out(9), "valid": Out(1), "ready": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        word_shift = log2(self._bw)
        # The block being walked: its row's first address, the next burst's, the pitch, rows
        # still to start, words a row, words of this row still to request.
        row_addr = Signal(ADDR_WIDTH, name="row_addr")
        addr = Signal(ADDR_WIDTH, name="burst_addr")
        stride = Signal(ADDR_WIDTH, name="row_stride")
        rows_left = Signal(COUNT_BITS, name="rows_left")
        words = Signal(COUNT_BITS, name="row_words")
        left = Signal(COUNT_BITS, name="words_left")
        length = Signal(9)
        to_boundary = Signal(13 - word_shift + 1)
        m.d.comb += [to_boundary.eq((4096 - addr[:12]) >> word_shift),
                     self.addr.eq(addr), self.len.eq(length)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [row_addr.eq(self.base), addr.eq(self.base),
                                 stride.eq(self.stride), rows_left.eq(self.rows),
                                 words.eq(self.words), left.eq(self.words)]
                    with m.If((self.rows != 0) & (self.words != 0)):
                        m.next = "SIZE"
            with m.State("SIZE"):
                m.d.comb += self.busy.eq(1)
                shortest = Mux(left < self._max_burst, left, self._max_burst)
                m.d.sync += length.eq(Mux(to_boundary < shortest, to_boundary, shortest))
                m.next = "ISSUE"
            with m.State("ISSUE"):
                m.d.comb += [self.busy.eq(1), self.valid.eq(1)]
                with m.If(self.ready):
                    with m.If(left == length):
                        m.d.sync += [row_addr.eq(row_addr + stride), addr.eq(row_addr + stride),
                                     left.eq(words), rows_left.eq(rows_left - 1)]
                        with m.If(rows_left == 1):
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "SIZE"
                    with m.Else():
                        m.d.sync += [addr.eq(addr + (length << word_shift)),
                                     left.eq(left - length)]
                        m.next = "SIZE"
        return m


def take_block(m, cmd, walker, *, rows, last_indices):
    """Accept a block command while the address side is free and the data side has room for
    its copy: the walker starts on the block (``rows`` of its rows touch memory) and the copy
    (:func:`walked_layout` with ``last_indices``) queues in ``pending``, two blocks deep, for
    the data side, which walks it later. Returns ``pending`` and the copy's layout."""
    layout = walked_layout(cmd.payload.shape(), last_indices)
    m.submodules.pending = pending = fifo.SyncFIFOBuffered(width=layout.size, depth=2)
    copy = Signal(layout, name="block_copy")
    m.d.comb += copy.as_value()[:cmd.payload.shape().size].eq(cmd.payload.as_value())
    for name, count in last_indices.items():
        m.d.comb += copy[name].eq(cmd.payload[count] - 1)
    m.d.comb += [
        walker.base.eq(cmd.payload.base), walker.stride.eq(cmd.payload.stride),
        walker.rows.eq(rows), walker.words.eq(cmd.payload.words),
        cmd.ready.eq(~walker.busy & pending.w_rdy),
        walker.start.eq(cmd.valid & cmd.ready),
        pending.w_en.eq(cmd.valid & cmd.ready), pending.w_data.eq(copy.as_value()),
    ]
    return pending, layout


def drive_address(m, unit, channel, walker, data_width):
    """Address channel ``channel`` (``"ar"``, ``"aw"``) of ``unit`` from ``walker``: its burst,
    whole-word INCR beats, ID 0, normal non-cacheable bufferable data access."""
    def port(field):
        return getattr(unit, f"m_axi_{channel}{field}")
    m.d.comb += [port("addr").eq(walker.addr), port("len").eq(walker.len - 1),
                 port("size").eq(log2(data_width // 8)), port("burst").eq(BURST_INCR),
                 port("id").eq(0), port("cache").eq(CACHE_NORMAL), port("prot").eq(0)]


class RegisterSlice(wiring.Component):
    """A stream through a register: ``o.valid``/``o.payload`` and ``i.ready`` all come from
    flip-flops, so no combinational path crosses it either way. One cycle of latency, a beat
    every cycle: a beat offered while the output waits goes to a second (skid) register, and
    ``i.ready`` falls until it has moved on."""

    def __init__(self, layout):
        self._layout = layout
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        main_valid, main = Signal(name="main_valid"), Signal(self._layout, name="main")
        skid_valid, skid = Signal(name="skid_valid"), Signal(self._layout, name="skid")
        m.d.comb += [self.i.ready.eq(~skid_valid), self.o.valid.eq(main_valid),
                     self.o.payload.eq(main)]
        take = self.i.valid & self.i.ready
        # Neither wide enable waits for ``i.valid``, which comes through the producer's logic
        # (the reader's position compares, carry chains): the skid register takes the input
        # whenever it is free, and ``main`` whenever it may move; what each holds counts only
        # once its valid flag is set.
        with m.If(~skid_valid):
            m.d.sync += skid.eq(self.i.payload)
        with m.If(~main_valid | self.o.ready):
            m.d.sync += [main.eq(Mux(skid_valid, skid, self.i.payload)), skid_valid.eq(0),
                         main_valid.eq(skid_valid | take)]
        with m.Elif(take):
            m.d.sync += skid_valid.eq(1)
        return m


class BlockReader(wiring.Component):
    """Reads blocks (:func:`read_cmd_layout`) and sends their beats, zero-filled outside the
    valid rows and words, with ``row``/``beat`` indices and ``last`` on a block's last beat.

    ``r_error`` pulses for a read answered SLVERR or DECERR (its word is used all the same);
    ``words_a``/``words_b`` pulse per word read for the ``A`` or ``B`` operand."""

    def __init__(self, *, lanes, width, data_width, max_burst):
        self._p = dict(lanes=lanes, width=width, data_width=data_width, max_burst=max_burst)
        beat = data.StructLayout({"data": data.ArrayLayout(width, lanes), "last": 1,
                                  "row": COUNT_BITS, "beat": COUNT_BITS, "dest": 2})
        members = {
            "cmd": In(stream.Signature(read_cmd_layout(lanes))),
            "beats": Out(stream.Signature(beat)),
            "idle": Out(1), "r_error": Out(1), "words_a": Out(1), "words_b": Out(1),
        }
        members.update({name: member for name, member in axi_master_members(data_width).items()
                        if name.startswith(("m_axi_ar", "m_axi_r"))})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, W = p["lanes"], p["width"]
        m.submodules.walker = walker = BurstWalker(data_width=p["data_width"],
                                                   max_burst=p["max_burst"])
        # The R side's copy of each block the AR side has started (in order).
        cmd = self.cmd
        pending, walked = take_block(m, cmd, walker, rows=cmd.payload.valid_rows,
                                     last_indices=READ_LAST_INDICES)
        drive_address(m, self, "ar", walker, p["data_width"])
        m.d.comb += [self.m_axi_arvalid.eq(walker.valid), walker.ready.eq(self.m_axi_arready)]

        # --- R side: one beat per row position, from memory or zero ---------------------------
        # The R channel enters through a skid buffer: ``rready`` is its own flip-flop ("not
        # holding a word"), so the data path's ready (a long path through the compactor)
        # reaches neither the port nor the count of outstanding bursts. A word the data path
        # cannot take waits in ``held`` while the port stops; no cycle of latency is added.
        rdata_layout = data.StructLayout({"data": p["data_width"], "resp": 2,
                                          "id": ID_WIDTH})
        held = Signal(name="r_held")
        held_word = Signal(rdata_layout, name="r_held_word")
        port_word = Signal(rdata_layout, name="r_port_word")
        r_word = Signal(rdata_layout, name="r_word")
        m.d.comb += [port_word.data.eq(self.m_axi_rdata), port_word.resp.eq(self.m_axi_rresp),
                     port_word.id.eq(self.m_axi_rid), self.m_axi_rready.eq(~held),
                     r_word.eq(Mux(held, held_word, port_word))]
        r_valid = held | self.m_axi_rvalid

        block = data.View(walked, pending.r_data)
        row, beat = Signal(COUNT_BITS, name="row"), Signal(COUNT_BITS, name="beat")
        # ``in_memory`` = ``row < valid_rows`` and ``beat < words``, each a flip-flop stepped
        # with the position (1 at a block's first beat: a block has a valid row and a word a
        # row): the two compares (carry chains) through the R handshake into the position,
        # the R skid and ``ERR_CODE`` were the engine's slowest path (13.2 ns on ECP5, 10.1 ns
        # of it routing).
        in_rows = Signal(name="in_rows", init=1)
        in_words = Signal(name="in_words", init=1)
        in_memory = Signal()
        m.d.comb += in_memory.eq(in_rows & in_words)
        mask = Mux(beat == block.last_word, block.last_mask, (1 << L) - 1)
        # The beats leave through a register slice: the position's compares (carry chains)
        # and the units that take the beats (the GEMM's B loader, the compactor) are each
        # a path of their own.
        m.submodules.out_slice = out_slice = RegisterSlice(self.beats.payload.shape())
        wiring.connect(m, out_slice.o, wiring.flipped(self.beats))
        out = out_slice.i
        took_word = Signal()
        m.d.comb += [
            out.valid.eq(pending.r_rdy & (~in_memory | r_valid)),
            took_word.eq(pending.r_rdy & in_memory & out.ready & r_valid),
            out.payload.row.eq(row), out.payload.beat.eq(beat), out.payload.dest.eq(block.dest),
        ]
        with m.If(held & took_word):
            m.d.sync += held.eq(0)
        with m.Elif(~held & self.m_axi_rvalid & ~took_word):
            m.d.sync += held.eq(1)
        # ``held_word`` follows the port while nothing is held (it counts only once ``held``
        # is set), so its 67-bit enable is a flip-flop's output, not the data path's ready.
        with m.If(~held):
            m.d.sync += held_word.eq(port_word)
        for i in range(L):
            m.d.comb += out.payload.data[i].eq(
                Mux(in_memory & mask[i], r_word.data[i * W:(i + 1) * W], 0))
        m.d.comb += [self.r_error.eq(took_word & ((r_word.resp != RESP_OKAY) | (r_word.id != 0))),
                     self.words_a.eq(took_word & ~block.operand_b),
                     self.words_b.eq(took_word & block.operand_b)]
        row_end, last_row = step_position(m, out.valid & out.ready, beat, block.last_beat, row,
                                          block.last_row, pending.r_en)
        m.d.comb += out.payload.last.eq(last_row & row_end)
        with m.If(out.valid & out.ready):
            m.d.sync += in_words.eq(still_below(in_words, beat, block.last_word, wraps=row_end))
            with m.If(row_end):
                m.d.sync += in_rows.eq(still_below(in_rows, row, block.last_valid_row,
                                                   wraps=last_row))
        # Read bursts requested and not yet ended by their ``rlast`` at the port: none when
        # idle (a word still held belongs to a burst that has ended).
        bursts = Signal(16)
        m.d.sync += bursts.eq(bursts + (self.m_axi_arvalid & self.m_axi_arready)
                              - (self.m_axi_rvalid & self.m_axi_rready & self.m_axi_rlast))
        m.d.comb += self.idle.eq(~walker.busy & (pending.level == 0) & ~cmd.valid
                                 & (bursts == 0))
        return m


class ResultWriter(wiring.Component):
    """Writes result blocks (:func:`write_cmd_layout`): ``data`` brings each row's
    ``total_words`` words in order; the first ``words`` are written (the last with
    ``last_strb``), the rest dropped. W beats of a burst follow its AW transfer; every B
    response is awaited. ``b_error`` pulses for a response SLVERR or DECERR; ``words_c`` per
    word written."""

    def __init__(self, *, data_width, max_burst):
        self._p = dict(data_width=data_width, max_burst=max_burst)
        members = {
            "cmd": In(stream.Signature(write_cmd_layout(data_width))),
            "data": In(stream.Signature(data_width)),
            "idle": Out(1), "b_error": Out(1), "words_c": Out(1),
        }
        members.update({name: member for name, member in axi_master_members(data_width).items()
                        if name.startswith(("m_axi_aw", "m_axi_w", "m_axi_b"))})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        p = self._p
        DW, BW = p["data_width"], p["data_width"] // 8
        m.submodules.walker = walker = BurstWalker(data_width=DW, max_burst=p["max_burst"])
        cmd = self.cmd
        pending, layout = take_block(m, cmd, walker, rows=cmd.payload.rows,
                                     last_indices=WRITE_LAST_INDICES)
        # Lengths of the bursts whose AW went out, for the W side's wlast.
        m.submodules.lengths = lengths = fifo.SyncFIFOBuffered(width=9, depth=8)
        drive_address(m, self, "aw", walker, DW)
        m.d.comb += [
            self.m_axi_awvalid.eq(walker.valid & lengths.w_rdy),
            walker.ready.eq(self.m_axi_awready & lengths.w_rdy),
            lengths.w_en.eq(walker.valid & walker.ready), lengths.w_data.eq(walker.len),
        ]
        outstanding = Signal(16)
        aw_take = self.m_axi_awvalid & self.m_axi_awready
        b_take = self.m_axi_bvalid & self.m_axi_bready
        m.d.sync += outstanding.eq(outstanding + aw_take - b_take)
        m.d.comb += [self.m_axi_bready.eq(1),
                     self.b_error.eq(b_take & ((self.m_axi_bresp != RESP_OKAY)
                                               | (self.m_axi_bid != 0)))]

        # --- W side -----------------------------------------------------------------------------
        block = data.View(layout, pending.r_data)
        row, word = Signal(COUNT_BITS, name="row"), Signal(COUNT_BITS, name="word")
        in_burst = Signal(9, name="in_burst")
        # ``keep`` = ``word < block.words``, a flip-flop stepped with ``word`` (1 at a row's
        # first word: a block writes at least one word a row): the compare, through
        # ``src.ready`` into the accumulator's read-out and its block RAMs' enables, was the
        # dense-only twin's slowest path (11.2 ns on ECP5).
        keep = Signal(name="keep", init=1)
        src = self.data
        burst_end = in_burst == lengths.r_data - 1
        m.d.comb += [
            self.m_axi_wdata.eq(src.payload),
            self.m_axi_wstrb.eq(Mux(word == block.last_word, block.last_strb, (1 << BW) - 1)),
            self.m_axi_wlast.eq(burst_end),
            self.m_axi_wvalid.eq(pending.r_rdy & keep & src.valid & lengths.r_rdy),
            src.ready.eq(pending.r_rdy & (~keep | (self.m_axi_wready & lengths.r_rdy))),
        ]
        w_take = self.m_axi_wvalid & self.m_axi_wready
        m.d.comb += self.words_c.eq(w_take)
        with m.If(w_take):
            m.d.sync += in_burst.eq(Mux(burst_end, 0, in_burst + 1))
            m.d.comb += lengths.r_en.eq(burst_end)
        advance = src.valid & src.ready
        row_end, _ = step_position(m, advance, word, block.last_total_word, row, block.last_row,
                                   pending.r_en)
        with m.If(advance):
            m.d.sync += keep.eq(still_below(keep, word, block.last_word, wraps=row_end))
        m.d.comb += self.idle.eq(~walker.busy & (pending.level == 0) & ~cmd.valid
                                 & (outstanding == 0) & (lengths.level == 0))
        return m
