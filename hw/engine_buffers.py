"""The layer engine's on-chip buffers (docs/engine.md): the transposer that lets the backward
GEMMs read operands as a training framework stores them, and the accumulator that keeps
partial sums on chip across the whole inner dimension.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .elements import NO_RW_CHECK, BlockRamFifo, beat_layout, log2, mux_tree

__all__ = ["Transposer", "Accumulator", "transpose_cmd_layout", "acc_cmd_layout"]

COUNT_BITS = 16


def transpose_cmd_layout():
    return data.StructLayout({"cols": COUNT_BITS, "beats": COUNT_BITS, "dest": 1})


def acc_cmd_layout():
    return data.StructLayout({"first": 1, "last": 1})


def _rotate(values, amount):
    """``out[i] = values[(i + amount) % len]``: each output a multiplexer tree over the
    inputs."""
    n = len(values)
    return [mux_tree([values[(i + s) % n] for s in range(n)], amount) if n > 1 else values[0]
            for i in range(n)]


class Transposer(wiring.Component):
    """A block of up to ``rows_max x cols_max`` elements written row-major, ``lanes`` elements a
    beat, and read column-major, ``lanes`` rows of one column a beat.

    Why skewed banks: a beat written holds ``lanes`` columns of one row, a beat read
    ``lanes`` rows of one column; each of the ``lanes`` banks must give one element to either.
    Element ``(r, c)`` lives in bank ``(c + r) mod lanes`` at word ``r*W + c div lanes``
    (``W`` = ``cols_max/lanes`` rounded up to a power of two): a row's beat spreads over every
    bank (rotated by ``r``), and so does a column's (rotated by ``c``). One read port and one
    write port per bank: block RAM.

    Why two blocks: wgrad writes the next ``Xᵀ`` block (``k*ceil(mv/lanes)`` beats for a tile
    of ``mv`` rows, 2048 at the defaults' full row group) while the GEMM computes with the
    current one; with one block that fill stood between every two steps (13-15 % of a sparse
    training step's cycles).

    ``w_*``: the block reader's beats with their row and beat index; ``w_last`` fills the
    block being written and moves to the other (``w_ready`` is low while both are full).
    ``cmd``: read ``cols`` columns of ``beats`` beats each (``rows = beats*lanes``) of the
    oldest full block to ``out``, with ``last`` on the final beat and ``dest`` passed
    through; the final beat's read frees the block."""

    def __init__(self, *, lanes, width, rows_max, cols_max):
        self._p = dict(lanes=lanes, width=width, rows_max=rows_max, cols_max=cols_max)
        super().__init__({
            "w_valid": In(1), "w_ready": Out(1), "w_last": In(1),
            "w_row": In(COUNT_BITS), "w_beat": In(COUNT_BITS),
            "w_data": In(data.ArrayLayout(width, lanes)),
            "cmd": In(stream.Signature(transpose_cmd_layout())),
            "out": Out(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(width, lanes), "last": 1, "dest": 1}))),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, W = p["lanes"], p["width"]
        col_words = 1 << max((p["cols_max"] // L - 1).bit_length(), 0)
        block_words = p["rows_max"] * col_words
        block_bits = max((block_words - 1).bit_length(), 1)
        lane_bits = max(log2(L), 1)
        # Block i is full from its last beat written until its final beat is read. Blocks are
        # written and read in turn: ``w_block`` is the next written, ``r_block`` the next read.
        full = Signal(2, name="full")
        w_block, r_block = Signal(name="w_block"), Signal(name="r_block")
        m.d.comb += self.w_ready.eq(~full.bit_select(w_block, 1))
        write = Signal()
        m.d.comb += write.eq(self.w_valid & self.w_ready)
        filled = Signal(2)
        with m.If(write & self.w_last):
            m.d.comb += filled.eq(1 << w_block)
            m.d.sync += w_block.eq(~w_block)

        # Read side: column ``col``, beat ``rb`` (rows rb*L .. rb*L + L - 1).
        cmd = self.cmd
        col, rb = Signal(COUNT_BITS, name="col"), Signal(COUNT_BITS, name="rb")
        issued = Signal()    # a read was issued last cycle: its word is on the ports now
        fetched = Signal()   # a read was issued two cycles ago: its word is in ``fetched_words``
        stored = Signal(range(4))   # words read and not yet taken: in ``out`` or ``waiting``
        issue = Signal()
        # Why 3: a word read stays in the ``out`` register or in ``waiting`` (two deep behind
        # it) until taken, so the words issued and not yet taken never exceed those three
        # places. With ``out.ready`` high a word counts the three cycles after its issue (on
        # the ports, fetched, in ``out``): three reads every four cycles, the rate the cycle
        # model counts (golden/engine_timing.py).
        m.d.comb += issue.eq(cmd.valid & full.bit_select(r_block, 1)
                             & (issued + fetched + stored < 3))
        final = (col == cmd.payload.cols - 1) & (rb == cmd.payload.beats - 1)
        emptied = Signal(2)
        with m.If(issue):
            with m.If(rb == cmd.payload.beats - 1):
                m.d.sync += [rb.eq(0), col.eq(col + 1)]
            with m.Else():
                m.d.sync += rb.eq(rb + 1)
            with m.If(final):
                m.d.sync += [col.eq(0), rb.eq(0), r_block.eq(~r_block)]
                m.d.comb += [cmd.ready.eq(1), emptied.eq(1 << r_block)]
        m.d.sync += [issued.eq(issue), full.eq((full & ~emptied) | filled)]

        shift = col[:lane_bits] if L > 1 else 0
        shift_q = Signal(lane_bits, name="shift_q")
        last_q, dest_q = Signal(name="last_q"), Signal(name="dest_q")
        m.d.sync += [shift_q.eq(shift), last_q.eq(final), dest_q.eq(cmd.payload.dest)]
        # Each bank is two memories, one per block: each word read is registered as it
        # leaves its memory, and the block is chosen after those registers. Why registered
        # before the rotation: the block RAMs' clock-to-output and the rotation into a LUT
        # RAM's write did not fit in one cycle (13.3 ns at 75 MHz). Why one memory a block:
        # as one memory two blocks deep, a bank took two block RAMs whose outputs Yosys
        # multiplexed before the register (9.8 ns on ECP5, the twin's slowest path on one
        # placement); a register that takes a block RAM's word straight can sit in its output
        # register (docs/synth.md).
        r_block_q, fetched_block = Signal(name="r_block_q"), Signal(name="fetched_block")
        fetched_words = []
        for b in range(L):
            # Write: bank b takes lane (b - row) mod L of the beat.
            lane = (b - self.w_row[:lane_bits])[:lane_bits] if L > 1 else 0
            w_data = mux_tree([self.w_data[i] for i in range(L)], lane) if L > 1 else \
                self.w_data[0]
            # Read: bank b holds row rb*L + ((b - c) mod L) of column c.
            row_in_beat = (b - shift)[:lane_bits] if L > 1 else 0
            r_addr = ((rb * L + row_in_beat) * col_words + (col >> log2(L)))[:block_bits]
            block_words = []
            for i in range(2):
                # The read port reads every cycle, but its word counts only for a read
                # issued from a full block, which is never written (``w_ready``): a word
                # read while the same word is written is never used.
                mem = Memory(shape=unsigned(W), depth=1 << block_bits, init=[],
                             attrs=NO_RW_CHECK)
                m.submodules[f"bank{b}_block{i}"] = mem
                wp, rp = mem.write_port(), mem.read_port()
                m.d.comb += [wp.en.eq(write & (w_block == i)),
                             wp.addr.eq((self.w_row * col_words + self.w_beat)[:block_bits]),
                             wp.data.eq(w_data), rp.addr.eq(r_addr)]
                word = Signal(W, name=f"fetched_word{b}_block{i}")
                m.d.sync += word.eq(rp.data)
                block_words.append(word)
            fetched_words.append(Mux(fetched_block, block_words[1], block_words[0]))
        fetched_shift = Signal(lane_bits, name="fetched_shift")
        fetched_last, fetched_dest = Signal(name="fetched_last"), Signal(name="fetched_dest")
        m.d.sync += [r_block_q.eq(r_block), fetched_block.eq(r_block_q),
                     fetched.eq(issued), fetched_shift.eq(shift_q),
                     fetched_last.eq(last_q), fetched_dest.eq(dest_q)]
        word = Cat(*_rotate(fetched_words, fetched_shift), fetched_last, fetched_dest)
        out_empty = _offer(m, self.out, word, fetched, stored)
        m.d.comb += self.idle.eq((full == 0) & ~issued & ~fetched & out_empty)
        return m


def _offer(m, out, word, valid, stored):
    """Puts each ``word`` (when ``valid``) on the stream ``out``: its payload is a register,
    loaded from ``waiting`` (the words behind it, two deep) or, when none waits, straight from
    ``word``. Drives ``stored`` (the words held) and returns "none held".

    Why not a FIFO with a registered output (a LUT RAM, then that register): a word would take
    two cycles to reach ``out``; with ``word`` loaded directly it takes one, so the register on
    the banks' read data left the read-out's timing as it was, cycle for cycle
    (``TRANSPOSE_TURN`` in the cycle model, three beats in four)."""
    m.submodules.waiting = waiting = fifo.SyncFIFO(width=len(word), depth=2)
    held = Signal(name="out_held")   # ``out`` holds a word
    data = Signal(len(word), name="out_data")
    load = Signal()   # ``out``'s register takes a word: it is free, or being taken
    m.d.comb += [
        load.eq(~held | out.ready),
        waiting.w_data.eq(word),
        waiting.w_en.eq(valid & ~(load & ~waiting.r_rdy)),
        waiting.r_en.eq(load),
        out.valid.eq(held), out.payload.as_value().eq(data),
        stored.eq(held + waiting.level),
    ]
    with m.If(load):
        m.d.sync += [held.eq(waiting.r_rdy | valid),
                     data.eq(Mux(waiting.r_rdy, waiting.r_data, word))]
    return ~held & (waiting.level == 0)


class Accumulator(wiring.Component):
    """Partial sums of up to ``rows`` rows of ``n`` results, one ``C`` beat (``lanes`` sums) a
    cycle: a tile's beat ``j`` is added to word ``j`` of ``sums`` (its first inner chunk writes
    it, later chunks add to it); the last chunk's totals enter ``results``, a FIFO as deep as
    ``sums``, which ``out`` drains.

    Why a FIFO as deep as a row group: the bus takes a result row in
    ``n*acc_width/data_width`` cycles (32 at the defaults), four times as long as the GEMM
    takes to make it at low density. Held in ``results``, a row group's totals go out while
    the next row group computes its first inner chunks (which use ``sums`` only); only when
    ``results`` is full does a last chunk wait.

    Read, registered, add, registered, write: a word is read three cycles before the sum of
    an earlier beat to the same word would land only if a tile had fewer than four beats, so a
    tile starts only with the pipeline empty (three cycles a tile).

    Why the sum is registered before its writes: ``sums``' read data sits in its block RAM's
    output register (the ECP5 flow packs it, verif/flows/synth/bram_registers.py), so without
    a register of its own the sum went from one block RAM's output through the route, the
    adder and the route into another block RAM's input in one cycle (the dense-only twin's
    slowest path, 12.6 ns on ECP5)."""

    def __init__(self, *, lanes, acc_width, rows, n):
        self._p = dict(lanes=lanes, acc_width=acc_width, rows=rows, n=n)
        beat = beat_layout(lanes, acc_width)
        super().__init__({
            "cmd": In(stream.Signature(acc_cmd_layout())),
            "c": In(stream.Signature(beat)),
            "out": Out(stream.Signature(lanes * acc_width)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self._p
        L, A = p["lanes"], p["acc_width"]
        depth = p["rows"] * (p["n"] // L)
        # A word is read three cycles before its sum is written, and a tile starts only with the
        # pipeline empty (below), so no read meets the write of the same word.
        m.submodules.sums = sums = Memory(shape=unsigned(L * A), depth=depth, init=[],
                                          attrs=NO_RW_CHECK)
        rp, wp = sums.read_port(), sums.write_port()
        # ``depth - 1`` entries, and ``out_word`` holds the last (see ``_read_out``).
        m.submodules.results = results = BlockRamFifo(width=L * A, depth=depth - 1)

        cmd, c = self.cmd, self.c
        addr = Signal(range(max(depth, 2)))
        # Stage 1: the beat taken, its word being read; stage 2: the word read, the sum; stage
        # 3: the sum, written.
        s1_valid, s2_valid = Signal(name="s1_valid"), Signal(name="s2_valid")
        s1_addr, s2_addr = Signal.like(addr, name="s1_addr"), Signal.like(addr, name="s2_addr")
        s1_data, s2_data = Signal(L * A, name="s1_data"), Signal(L * A, name="s2_data")
        s1_first, s2_first = Signal(name="s1_first"), Signal(name="s2_first")
        s1_last, s2_last = Signal(name="s1_last"), Signal(name="s2_last")
        s2_stored = Signal(L * A)
        s3_valid, s3_last = Signal(name="s3_valid"), Signal(name="s3_last")
        s3_addr, s3_total = Signal.like(addr, name="s3_addr"), Signal(L * A, name="s3_total")
        pipeline_empty = ~s1_valid & ~s2_valid & ~s3_valid
        out_valid = self._read_out(m, results)
        # A last chunk's beat is taken only with room for it and the three ahead in ``results``
        # and ``out_word``. ``held`` counts those as they come and go: summed from
        # ``results.level`` (whose ready register feeds an adder), the room and ``c.ready``
        # were the dense-only twin's slowest path (12.1 ns on ECP5, into ``c_slice``).
        held = Signal(range(depth + 1), name="held")   # = s1 + s2 + s3 + results + out_word
        # ``mid_tile`` is ``addr != 0`` as a flip-flop: the compare through ``c.ready`` into
        # ``c_slice``'s registers was the engine's slowest path next (10.4 ns on ECP5).
        mid_tile = Signal(name="mid_tile")
        m.d.comb += c.ready.eq(cmd.valid & (mid_tile | pipeline_empty)
                               & (~cmd.payload.last | (held < depth)))
        take = c.valid & c.ready
        m.d.sync += held.eq(held + take - (s3_valid & ~s3_last)
                            - (self.out.valid & self.out.ready))
        m.d.comb += rp.addr.eq(addr)
        with m.If(take):
            # A tile's beats fill at most ``depth`` words, its last at ``depth - 1``, so
            # ``addr + 1`` never wraps to 0 before a last beat.
            m.d.sync += [addr.eq(Mux(c.payload.last, 0, addr + 1)),
                         mid_tile.eq(~c.payload.last)]
            m.d.comb += cmd.ready.eq(c.payload.last)
        m.d.sync += [s1_valid.eq(take), s1_addr.eq(addr), s1_data.eq(c.payload.data.as_value()),
                     s1_first.eq(cmd.payload.first), s1_last.eq(cmd.payload.last),
                     s2_valid.eq(s1_valid), s2_addr.eq(s1_addr), s2_data.eq(s1_data),
                     s2_first.eq(s1_first), s2_last.eq(s1_last), s2_stored.eq(rp.data)]
        total = Cat(*[(Mux(s2_first, 0, s2_stored[i * A:(i + 1) * A]) + s2_data[i * A:(i + 1) * A])
                      [:A] for i in range(L)])
        m.d.sync += [s3_valid.eq(s2_valid), s3_last.eq(s2_last), s3_addr.eq(s2_addr),
                     s3_total.eq(total)]
        m.d.comb += [
            wp.addr.eq(s3_addr), wp.data.eq(s3_total), wp.en.eq(s3_valid & ~s3_last),
            results.w_en.eq(s3_valid & s3_last), results.w_data.eq(s3_total),
            self.idle.eq(pipeline_empty & (results.level == 0) & ~out_valid & ~cmd.valid),
        ]
        return m

    def _read_out(self, m, results):
        """``out`` from a register, ``out_word``, loaded from ``results`` as it empties. Why:
        ``results`` is two block RAMs deep at the defaults, and their read data went through
        the multiplexer between them into the writer's word select and out on W, the engine's
        slowest path (12.3 ns on ECP5). The register is one of the ``depth`` entries, so the
        room a last chunk waits for is unchanged; a word reaches ``out`` one cycle later, and
        back to back as before while the writer drains. Returns ``out_valid``."""
        out_valid = Signal(name="out_valid")
        out_word = Signal(results.width, name="out_word")
        load = Signal()
        m.d.comb += [load.eq(results.r_rdy & (~out_valid | self.out.ready)),
                     results.r_en.eq(load),
                     self.out.valid.eq(out_valid), self.out.payload.eq(out_word)]
        m.d.sync += out_valid.eq(load | (out_valid & ~self.out.ready))
        with m.If(load):
            m.d.sync += out_word.eq(results.r_data)
        return out_valid
