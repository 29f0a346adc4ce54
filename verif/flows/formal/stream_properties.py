"""The properties of the stream blocks: the monitor, the compactor and the broadcast GEMM's
output (the package's docstring, "Properties", says what each asserts; each function's
docstring, the invariants its proofs need)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.hdl._ast import AnyConst, Assert
from amaranth.lib import data

from .harness import _nonzero, _popcount


def monitor_invariants(m, h, lanes, tiles_waiting):
    """What k-induction needs beyond the port properties: the monitor's ``waiting`` register
    (which gates a tile's last beat) is the harness's count of tiles waiting for their record,
    and equals the records in the FIFO plus the closed tiles in the statistics pipeline (one
    token per stage: the beat flags, the popcount stages, the closing and record registers).
    From any other state a record could leave with ``waiting`` at 0, which wraps it and drops a
    held last beat's ``valid``."""
    from spartan_rtl.hw.monitor import popcount_stages

    i = h.internals
    tokens = [i["p1_valid"] & i["p1_last"], i["closing"], i["record_valid"]] + [
        i[f"beat_valid_d{n}"] & i[f"beat_last_d{n}"] for n in range(1, popcount_stages(lanes) + 1)]
    m.d.comb += [
        Assert(i["waiting"] == tiles_waiting, "waiting is not the tiles waiting"),
        Assert(i["waiting"] == i["stats_fifo/level"] + sum(tokens, Const(0, 3)),
               "waiting is not the records buffered and in the pipeline"),
    ]


def monitor_props(lanes, width, max_tile_elems, exact=True, content=True, invariants=False):
    """``content``: check what records carry (``nnz <= elems``; ``exact``: a chosen tile's
    record). Not inductive: a record in the FIFO's memory is beyond the harness's reach, and
    induction starts from any memory. ``invariants``: :func:`monitor_invariants`."""
    from spartan_rtl.hw.monitor import STATS_DEPTH, stats_layout

    count_bits = max_tile_elems.bit_length()
    top = 2 ** count_bits - 1
    beats_bits = stats_layout(lanes, max_tile_elems).size - 2 * count_bits - 1

    def props(m, dut, h):
        s, o, st = dut.s_axis, dut.m_axis, dut.m_axis_stats
        m.d.comb += Assert(h.fire(s) == h.fire(o), "s/m transfers differ")
        with m.If(o.valid):
            m.d.comb += Assert(s.valid & (o.payload.as_value() == s.payload.as_value()),
                               "m_axis is not s_axis")
        if content:
            with m.If(st.valid):
                m.d.comb += Assert(st.payload.data.nnz <= st.payload.data.elems, "nnz > elems")
        in_fire, st_fire = h.fire(s), h.fire(st)
        # Tiles ended whose record has not left: a record only for one, and the data path
        # holds a last beat rather than let more than STATS_DEPTH wait.
        waiting = h.outstanding(m, in_fire & s.payload.last, st_fire, 3, "h_tiles_waiting")
        with m.If(st.valid):
            m.d.comb += Assert(waiting != 0, "a record before its tile ended")
        m.d.comb += Assert(waiting <= STATS_DEPTH, "more records waiting than the buffer holds")
        if invariants:
            monitor_invariants(m, h, lanes, waiting)
        if not exact:
            return
        tiles_in = h.counter(m, in_fire & s.payload.last, 7, "tiles_in")
        records = h.counter(m, st_fire, 7, "records_out")
        # The chosen tile, counted here with wide counters, saturated only when compared.
        chosen = AnyConst(range(3))
        nnz, elems, zero_beats = (Signal(16, name=n) for n in ("h_nnz", "h_elems", "h_zero"))
        # threshold * elems, accumulated per beat (a constant multiple of the threshold of the
        # tile's first beat): the solver sees no variable multiplication.
        weighted = Signal(24, name="h_weighted")
        threshold = Signal(8, name="h_threshold")
        first = Signal(init=1, name="h_first")
        tile_threshold = Mux(first, dut.threshold, threshold)
        lane_nz = [_nonzero(s.payload.data[i]) for i in range(lanes)]
        with m.If(in_fire):
            m.d.sync += first.eq(s.payload.last)
            with m.If(tiles_in == chosen):
                m.d.sync += [nnz.eq(nnz + sum(lane_nz)), elems.eq(elems + lanes),
                             zero_beats.eq(zero_beats + ~Cat(*lane_nz).any()),
                             weighted.eq(weighted + tile_threshold * lanes),
                             threshold.eq(tile_threshold)]

        def sat(value, bits):
            return Mux(value > 2 ** bits - 1, 2 ** bits - 1, value)

        with m.If(st_fire & (records == chosen)):
            exp_nnz = sat(nnz, count_bits)
            exp_weighted = Mux(elems > top, threshold * top, weighted)
            m.d.comb += [
                Assert(st.payload.data.nnz == exp_nnz, "record nnz"),
                Assert(st.payload.data.elems == sat(elems, count_bits), "record elems"),
                Assert(st.payload.data.zero_beats == sat(zero_beats, beats_bits),
                       "record zero_beats"),
                Assert(st.payload.data.sparse == (exp_nnz * 256 <= exp_weighted), "record sparse"),
            ]
    return props


def compactor_props(lanes, width, cols):
    per_row = cols // lanes
    shift = lanes.bit_length() - 1

    def props(m, dut, h):
        s, mk, dt = dut.s_axis, dut.m_axis_mask, dut.m_axis_data
        in_fire, mask_fire, data_fire = h.fire(s), h.fire(mk), h.fire(dt)
        # Input side: row boundaries (per_row beats or an early tlast), bypass per tile.
        beat = Signal(range(per_row), name="h_beat")
        first = Signal(init=1, name="h_first")
        bypass_held = Signal(name="h_bypass")
        bypass = Mux(first, s.payload.user.bypass, bypass_held)
        row_end = s.payload.last | (beat == per_row - 1)
        rows_in = h.counter(m, in_fire & row_end, 7, "rows_in")
        with m.If(in_fire):
            m.d.sync += [first.eq(s.payload.last), bypass_held.eq(bypass),
                         beat.eq(Mux(row_end, 0, beat + 1))]
        # The chosen row: its pattern, tlast, count and its j-th nonzero.
        row = AnyConst(range(3))
        j = AnyConst(range(cols))
        pattern = Signal(cols, name="h_pattern")
        last = Signal(name="h_last")
        count = Signal(range(cols + 1), name="h_count")
        value = Signal(width, name="h_value")
        nz = [bypass | _nonzero(s.payload.data[i]) for i in range(lanes)]
        with m.If(in_fire & (rows_in == row)):
            rank = count
            for i in range(lanes):
                with m.If(nz[i] & (rank == j)):
                    m.d.sync += value.eq(s.payload.data[i])
                rank = rank + nz[i]
            m.d.sync += [count.eq(rank), last.eq(s.payload.last)]
            for b in range(per_row):
                with m.If(beat == b):
                    m.d.sync += pattern[b * lanes:(b + 1) * lanes].eq(Cat(*nz))
        # Output side: masks announce ceil(popcount/lanes) data beats each.
        masks = h.counter(m, mask_fire, 7, "masks_out")
        m.d.comb += Assert(masks <= rows_in, "a mask before its row ended")
        pop = _popcount(mk.payload.data)
        beats_of = (pop + lanes - 1) >> shift
        announced = Signal(8, name="h_announced")
        before = Signal(8, name="h_before")
        seen = Signal(name="h_seen")
        row_beats = Signal(range(per_row + 1), name="h_row_beats")
        row_pop = Signal(range(cols + 1), name="h_row_pop")
        with m.If(mask_fire):
            m.d.sync += announced.eq(announced + beats_of)
            with m.If(masks < row):
                m.d.sync += before.eq(before + beats_of)
            with m.If(masks == row):
                m.d.sync += [seen.eq(1), row_beats.eq(beats_of), row_pop.eq(pop)]
                m.d.comb += [Assert(mk.payload.data == pattern, "mask is not the row's pattern"),
                             Assert(mk.payload.last == last, "mask tlast is not the row's")]
        sent = h.counter(m, data_fire, 255, "data_out")
        with m.If(data_fire):
            m.d.comb += Assert(sent < announced, "a data beat no mask announced")
            offset = sent - before
            with m.If(seen & (sent >= before) & (offset < row_beats)):
                m.d.comb += Assert(dt.payload.last == (offset == row_beats - 1),
                                   "data tlast not on the row's last beat")
                with m.If(offset == (j >> shift)):
                    element = dt.payload.data[j & (lanes - 1)]
                    m.d.comb += Assert(element == Mux(j < row_pop, value, 0),
                                       "data element is not the row's j-th nonzero")
    return props


def compactor_protocol(lanes, cols):
    """The compactor's outputs, in a form k-induction can close: a mask only for a row that
    ended at the input (rows ended and not yet masked, counted here, are never 0 under a
    valid mask), with the invariants induction needs:

    - the mask and row FIFOs move in lockstep (written and read together), so their levels
      are equal; from a state where they differ, one can be empty while the other is not, and
      a held mask's ``tlast`` (the row FIFO's head) changes when the row FIFO is written;
    - the row position the harness counts is the block's ``beat``, and the rows pending are
      the mask FIFO's level plus the row ends in the stages before it (one token per stage:
      S0 and the prefix stages when deep, S1, S2 and the closed row when deep).
    """
    from spartan_rtl.hw.compactor import PREFIX_STAGES, pipeline

    per_row = cols // lanes
    plan = pipeline(lanes)

    def props(m, dut, h):
        i = h.internals
        s, mk = dut.s_axis, dut.m_axis_mask
        in_fire = h.fire(s)
        beat = Signal(range(per_row), name="h_beat")
        row_end = s.payload.last | (beat == per_row - 1)
        with m.If(in_fire):
            m.d.sync += beat.eq(Mux(row_end, 0, beat + 1))
        limit = plan.mask_depth + plan.mask_in_flight
        pending = h.outstanding(m, in_fire & row_end, h.fire(mk), limit, "h_rows_pending")
        with m.If(mk.valid):
            m.d.comb += Assert(pending != 0, "a mask before its row ended")
        if plan.deep:
            stages = ([("s0_valid", "s0_row_end")]
                      + [(f"s1_valid_d{n}", f"s1_row_end_d{n}")
                         for n in range(1, PREFIX_STAGES + 1)]
                      + [("s2_valid", "s2_row_end")])
            tokens = [i[v] & i[e] for v, e in stages] + [i["closed_valid"]]
        else:
            tokens = [i["s1_valid"] & i["s1_row_end"]]
        m.d.comb += [
            Assert(i["mask_fifo/level"] == i["row_fifo/level"],
                   "the mask and row FIFOs are out of step"),
            Assert(beat == i["beat"], "the row position is not the block's"),
            Assert(pending == i["mask_fifo/level"] + sum(tokens, Const(0, 4)),
                   "rows pending are not the masks buffered and in the pipeline"),
        ]
    return props


def gemm_broadcast_invariants(lanes):
    """What k-induction needs for the broadcast GEMM's output: the scheduler's credits in use
    (``outstanding``) are the output queue's entries (``count``) plus the column groups whose
    last pass is in the MAC pipeline (``f1`` .. ``f6``, ``ISSUE_TO_PUSH`` stages, valid with
    ``push``), at most
    ``OUT_DEPTH``. From any other state a push could overwrite the entry being sent (its
    payload changes while held) or a pop could wrap ``count`` (``valid`` drops)."""
    from spartan_rtl.hw.gemm.broadcast import ISSUE_TO_PUSH, OUT_DEPTH, pass_layout

    def props(m, dut, h):
        i = h.internals
        # The MAC pipeline's flag words: valid, then the pass (as MacArray lays them out).
        flags = data.StructLayout({"valid": 1, **{name: field.shape
                                                  for name, field in pass_layout(lanes)}})
        stages = [data.View(flags, i[f"macs/f{n}"]) for n in range(1, ISSUE_TO_PUSH + 1)]
        in_macs = sum((f.valid & f.push for f in stages), Const(0, 3))
        credits = i["scheduler/outstanding"]
        m.d.comb += [
            Assert(credits <= OUT_DEPTH, "more output credits in use than entries"),
            Assert(credits == i["output/count"] + in_macs,
                   "credits in use are not the entries queued and in the MAC pipeline"),
        ]
    return props
