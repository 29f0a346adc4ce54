"""The broadcast GEMM's components alone (hw/gemm/broadcast.py), in amaranth.sim: each against
what docs/gemm.md ("Broadcast datapath") says its outside does. The whole datapath is checked by
verif/tests/test_gemm.py; these tests pin each part's contract so a part can be changed on its
own."""

import random

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from spartan_rtl.golden.formats import to_signed
from spartan_rtl.hw.gemm.broadcast import (
    ISSUE_TO_PUSH,
    MacArray,
    OutputQueue,
    RowLoader,
    Scheduler,
    WeightBuffer,
    lowest_set_bit,
)
from verif.tests.amsim import get_stream, put_stream, simulate


def _bits(mask, k):
    return [j for j in range(k) if (mask >> j) & 1]


def _scheduler_masks(k, rng):
    """Edge rows (empty, full, one bit at either end, two adjacent bits), then random rows of
    every density: bits alone in their group of 8, groups empty between nonzeros."""
    edges = [0, (1 << k) - 1, 1 << (k - 1), 1, 0b11]
    return edges + [sum(1 << j for j in range(k) if rng.random() < density)
                    for density in (0.05, 0.1, 0.3, 0.5, 0.9) for _ in range(4)]


@pytest.mark.parametrize("k, n, n_par", [(16, 4, 4), (16, 8, 4), (64, 4, 4), (24, 8, 4)])
def test_scheduler_walks_each_rows_columns_in_order(k, n, n_par):
    """Per row: every set mask bit in column order, once per column group (weight address
    ``column * (n/n_par) + group``, row-memory beat and lane of the nonzero's rank), ``push``
    on each group's last pass; an empty row is one ``zero`` pass. Rows alternate slots, a slot
    is released after its last pass, and a ``push`` pass waits for the output credit."""
    lanes = 4
    beat_bits = (k // lanes - 1).bit_length()
    cg = n // n_par
    rng = random.Random(3)
    masks = [0b1010_0000_0001_0110, 0, 0xFFFF, 1 << 15, 0b11, 0, 0x8421] + _scheduler_masks(k, rng)
    dut = Scheduler(lanes=lanes, k=k, n=n, n_par=n_par, sparse=True)
    want = []
    for i, mask in enumerate(masks):
        if mask == 0:
            want.append((None, None, True, True, i == len(masks) - 1))
            continue
        cols = _bits(mask, k)
        for g in range(cg):
            for r, col in enumerate(cols):
                last = r == len(cols) - 1
                want.append((col * cg + g, r, last, False, last and g == cg - 1
                             and i == len(masks) - 1))
    got = []

    async def loader(ctx):
        # Plays the row loader: a row goes into its slot (take + mask), and is marked full
        # a few cycles later; the next row waits for its slot to be released.
        full = [False, False]
        for i, mask in enumerate(masks):
            slot = i % 2
            while full[slot]:
                _, _, release = await ctx.tick().sample(dut.release)
                full = [full[s] and not (release >> s) & 1 for s in range(2)]
            ctx.set(dut.take, 1 << slot)
            ctx.set(dut.mask, mask)
            ctx.set(dut.slots[slot].zero, int(mask == 0))
            ctx.set(dut.slots[slot].last, int(i == len(masks) - 1))
            _, _, release = await ctx.tick().sample(dut.release)
            full = [full[s] and not (release >> s) & 1 for s in range(2)]
            ctx.set(dut.take, 0)
            # Its data beats arrive: a nonempty row is full 3 cycles after its take at the
            # earliest (mask, count, one beat), an empty one the next cycle.
            for _ in range(rng.randrange(0 if mask == 0 else 2, 5)):
                _, _, release = await ctx.tick().sample(dut.release)
                full = [full[s] and not (release >> s) & 1 for s in range(2)]
            full[slot] = True
            ctx.set(dut.full, sum(1 << s for s in range(2) if full[s]))

    async def output(ctx):
        # Plays the output queue: a credit comes back a random while after each push.
        pending = []
        while len(got) < len(want):
            _, _, valid, payload, b_addr, row_addr = await ctx.tick().sample(
                dut.o_pass.valid, dut.o_pass.payload, dut.b_addr, dut.row_addr)
            freed = bool(pending) and pending[0] == 0
            ctx.set(dut.freed, int(freed))
            pending = [c - 1 for c in (pending[1:] if freed else pending)]
            if valid:
                rank = (row_addr & ((1 << beat_bits) - 1)) * lanes + payload.lane
                got.append((None if payload.zero else b_addr, None if payload.zero else rank,
                            bool(payload.push), bool(payload.zero), bool(payload.tlast)))
                if payload.push:
                    pending.append(rng.randrange(0, 6))
                    assert len(pending) <= 1, "a push without a free credit"

    simulate(dut, loader, output)
    assert got == want


def test_output_queue_sends_each_entry_and_zero_tokens():
    """``n_par / lanes`` beats per entry in lane order, ``n / lanes`` zero beats per zero-row
    token, ``tlast`` on a tile's last beat; ``freed`` once per entry, with its last beat."""
    lanes, acc, n, n_par = 2, 12, 8, 4
    dut = OutputQueue(lanes=lanes, acc_width=acc, n=n, n_par=n_par)
    rng = random.Random(5)
    entries = [([rng.randrange(1 << acc) for _ in range(n_par)], rng.random() < 0.3,
                rng.random() < 0.2) for _ in range(30)]
    want = []
    for sums, zero, tlast in entries:
        chunks = [[0] * lanes] * (n // lanes) if zero else \
            [sums[i:i + lanes] for i in range(0, n_par, lanes)]
        want += [(c, int(tlast and j == len(chunks) - 1)) for j, c in enumerate(chunks)]
    result = {}

    async def pusher(ctx):
        for sums, zero, tlast in entries:
            for _ in range(rng.randrange(0, 3)):
                await ctx.tick()
            ctx.set(dut.i_sums.payload, {"sums": sums, "zero": zero, "tlast": tlast})
            ctx.set(dut.i_sums.valid, 1)
            await ctx.tick()
            ctx.set(dut.i_sums.valid, 0)
            await ctx.tick().until(dut.freed)      # the one credit comes back

    async def sink(ctx):
        beats = await get_stream(ctx, dut.m_axis_c, len(want), rng, backpressure=0.4)
        result["c"] = [([int(x) for x in b.data], int(b.last)) for b in beats]

    simulate(dut, pusher, sink)
    assert result["c"] == want


def test_weight_buffer_reads_b_three_cycles_later():
    """``B`` row-major in (random idle, ``hold`` respected), then any word readable: word
    ``k * (n/n_par) + j`` = ``B[k, j*n_par:(j+1)*n_par]``, on ``rd_data`` 3 cycles after its
    address; ``loading`` while a packet is part-way in."""
    lanes, width, k, n, n_par = 2, 5, 6, 8, 4
    cg = n // n_par
    rng = random.Random(7)
    b = np.array([[rng.randrange(1 << width) for _ in range(n)] for _ in range(k)])
    dut = WeightBuffer(lanes=lanes, width=width, k=k, n=n, n_par=n_par)
    flat = b.reshape(-1)
    beats = [{"data": [int(x) for x in flat[i:i + lanes]], "last": int(i + lanes == len(flat))}
             for i in range(0, len(flat), lanes)]
    addresses = [rng.randrange(k * cg) for _ in range(40)]
    seen = []

    async def tb(ctx):
        await put_stream(ctx, dut.s_axis_b, beats[:3], rng)
        assert ctx.get(dut.loading)
        ctx.set(dut.hold, 1)                       # held: not ready
        for _ in range(3):
            await ctx.tick()
            assert not ctx.get(dut.s_axis_b.ready)
        ctx.set(dut.hold, 0)
        await put_stream(ctx, dut.s_axis_b, beats[3:], rng)
        await ctx.tick()
        assert not ctx.get(dut.loading)
        for addr in addresses + [0, 0, 0]:
            ctx.set(dut.rd_addr, addr)
            _, _, word = await ctx.tick().sample(dut.rd_data)
            seen.append(int(word))

    simulate(dut, tb)
    mask = (1 << width) - 1
    for i, addr in enumerate(addresses):
        word = seen[i + 3]     # sampled as each cycle ends: the word of 3 cycles before
        row, group = divmod(addr, cg)
        assert [(word >> (c * width)) & mask for c in range(n_par)] == \
            [int(x) for x in b[row, group * n_par:(group + 1) * n_par]]


@pytest.mark.parametrize("signed", [True, False])
def test_mac_array_sums_each_column_group(signed):
    """Passes issued back to back or apart: each pass's ``a`` (its lane of the beat on
    ``a_beat`` one cycle after the issue) times the weight word on ``b_word`` three cycles after
    it, summed per column group; ``o_sums`` carries the sums ``ISSUE_TO_PUSH`` cycles after
    the group's last pass (modulo 2**acc_width); a zero token carries its flag."""
    lanes, width, acc, n_par = 4, 6, 10, 3
    rng = random.Random(11 + signed)
    dut = MacArray(lanes=lanes, width=width, signed=signed, acc_width=acc, n_par=n_par)
    groups = []
    for _ in range(12):
        if rng.random() < 0.2:
            groups.append(None)                    # a zero-row token
            continue
        groups.append([(rng.randrange(lanes), [rng.randrange(1 << width) for _ in range(lanes)],
                        [rng.randrange(1 << width) for _ in range(n_par)])
                       for _ in range(rng.randrange(1, 5))])
    value = (lambda raw: int(to_signed(raw, width))) if signed else int
    want = []
    for g in groups:
        if g is None:
            want.append((True, None))
            continue
        sums = [sum(value(beat[lane]) * value(w[c]) for lane, beat, w in g) % (1 << acc)
                for c in range(n_par)]
        want.append((False, sums))
    passes = []                                    # (cycle offset, lane, push, zero, beat, word)
    for g in groups:
        for _ in range(rng.randrange(0, 2)):
            passes.append(None)
        if g is None:
            passes.append((0, True, True, [0] * lanes, [0] * n_par))
        else:
            passes += [(lane, i == len(g) - 1, False, beat, w)
                       for i, (lane, beat, w) in enumerate(g)]
    got = []

    async def driver(ctx):
        schedule = passes + [None] * (ISSUE_TO_PUSH + 4)
        for t in range(len(schedule)):
            p = schedule[t]
            ctx.set(dut.i_pass.valid, int(p is not None))
            if p is not None:
                lane, push, zero, _, _ = p
                ctx.set(dut.i_pass.payload, {"lane": lane, "push": push, "zero": zero,
                                             "tlast": 0})
            one_back = schedule[t - 1] if t >= 1 else None
            three_back = schedule[t - 3] if t >= 3 else None
            if one_back is not None:
                ctx.set(dut.a_beat, sum(x << (i * width) for i, x in enumerate(one_back[3])))
            if three_back is not None:
                ctx.set(dut.b_word, sum(x << (i * width) for i, x in enumerate(three_back[4])))
            _, _, valid, payload = await ctx.tick().sample(dut.o_sums.valid, dut.o_sums.payload)
            if valid:
                got.append((bool(payload.zero),
                            None if payload.zero else [int(x) for x in payload.sums]))

    simulate(dut, driver)
    assert got == want


def test_row_loader_fills_slots_in_turn():
    """Rows into slots 0, 1, 0, ...: ``take`` with the mask when a slot is free, the row's
    ``ceil(popcount/lanes)`` data beats into the row memory at (slot, beat), ``full`` from the
    cycle after the last beat until ``release``; empty rows take no data beat."""
    lanes, width, k = 4, 5, 16
    rng = random.Random(13)
    rows = []
    for i in range(14):
        mask = 0 if rng.random() < 0.2 else rng.randrange(1, 1 << k)
        nnz = bin(mask).count("1")
        beats = [[rng.randrange(1, 1 << width) for _ in range(lanes)]
                 for _ in range(-(-nnz // lanes))]
        rows.append((mask, beats, i == 13))
    dut = RowLoader(lanes=lanes, width=width, k=k, sparse=True)
    seen = []

    async def masks(ctx):
        await put_stream(ctx, dut.s_axis_a_mask,
                         [{"data": m, "last": int(last)} for m, _, last in rows], rng)

    async def data(ctx):
        await put_stream(ctx, dut.s_axis_a_data,
                         [{"data": beat, "last": int(j == len(b) - 1)}
                          for _, b, _ in rows for j, beat in enumerate(b)], rng)

    takes = []

    async def watch_takes(ctx):
        # Every take as it happens: the consumer spends cycles reading a slot back, and the
        # other slot may take its mask meanwhile.
        while len(seen) < len(rows):
            _, _, take, mask = await ctx.tick().sample(dut.take, dut.mask)
            if take:
                takes.append((take, mask))

    async def consumer(ctx):
        # Plays the scheduler: once a slot is full, read its beats back and release it.
        slot = 0
        while len(seen) < len(rows):
            _, _, full = await ctx.tick().sample(dut.full)
            if (full >> slot) & 1 and takes:
                take_bits, taken_mask = takes.pop(0)
                assert take_bits == 1 << slot
                slot_flags = ctx.get(dut.slots[slot])
                beats = []
                for beat in range(-(-bin(taken_mask).count("1") // lanes)):
                    ctx.set(dut.rd_addr, (slot << 2) | beat)
                    await ctx.tick()
                    word = ctx.get(dut.rd_data)
                    beats.append([(word >> (i * width)) & ((1 << width) - 1)
                                  for i in range(lanes)])
                seen.append((taken_mask, beats, bool(slot_flags.last),
                             bool(slot_flags.zero)))
                for _ in range(rng.randrange(0, 3)):
                    await ctx.tick()
                ctx.set(dut.release, 1 << slot)
                await ctx.tick()
                ctx.set(dut.release, 0)
                slot ^= 1

    simulate(dut, masks, data, watch_takes, consumer)
    assert seen == [(m, b, last, m == 0) for m, b, last in rows]
    assert not any(seen_row[1] for seen_row in seen if seen_row[0] == 0)


@pytest.mark.parametrize("width", [1, 5, 8, 9, 24, 64, 70])
def test_lowest_set_bit(width):
    """The scheduler's two-level lowest set bit: index and the bits without it, against
    ``v & -v`` (none set: index 0, nothing left), single bits, all ones and random words."""
    m = Module()
    bits = Signal(width)
    index, rest = lowest_set_bit(m, bits, width, "t")
    rng = random.Random(width)
    words = [0, (1 << width) - 1, *(1 << i for i in range(width)),
             *(rng.getrandbits(width) for _ in range(300))]

    async def check(ctx):
        for word in words:
            ctx.set(bits, word)
            lowest = (word & -word).bit_length() - 1 if word else 0
            assert (ctx.get(index), ctx.get(rest)) == (lowest, word & (word - 1)), word

    sim = Simulator(m)      # combinational: no clock
    sim.add_testbench(check)
    sim.run()
