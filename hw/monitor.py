"""Sparsity monitor: measures activation tiles on their write path for free
(docs/interfaces.md, "monitor").

Data path
    ``s_axis`` -> ``m_axis`` is a wire: same beats, same ``tlast``, latency 0. The only gate is
    the tile's last beat, which waits while ``STATS_DEPTH`` records are outstanding (counted
    from the last beat's transfer to the record's, wherever the record is), so
    ``s_axis_tready`` is high whenever ``m_axis_tready`` is high and the statistics output has
    room (and also, mid-tile, when it has none). The count is a register: ``s_axis_tready`` is
    two gates from flip-flops.

Statistics path: a pipeline that never stalls (the outstanding count bounds what is in it)
    P1: the accepted beat's per-lane nonzero flags (the zero test) and the tile's threshold
    (sampled on its first beat). Then the popcount of the flags, two adder levels per register
    stage (:func:`popcount_stages`: 2 for 8 or 16 lanes), and whether the beat is all zero.
    Then per tile, wrapping accumulators of ``nnz``, ``elems``, ``zero_beats`` and
    ``threshold * elems`` (adding ``threshold * lanes``, a shift, per beat: no multiplier), each
    with a sticky flag set when its true value passes the counter's range. On the last beat the
    raw totals and flags go to closing registers; the next stage resolves the saturation
    (flag set: ``2**w - 1``, and ``threshold * (2**w - 1)``); the next compares ``nnz*256``
    with ``threshold*elems`` (``sparse``) into the FIFO. A record can transfer
    :attr:`SparsityMonitor.stats_latency` edges after its tile's last beat (6 for 8 or 16
    lanes). Two records may be outstanding before a last beat is held, which gives a consumer
    of ``m_axis_stats`` a tile's time to react.

Counter width ``w = bit_length(max_tile_elems)``: exact for tiles up to ``2**w - 1``
elements; beyond that the counters saturate at ``2**w - 1`` (documented in docs/monitor.md).
"""

from amaranth.hdl import Cat, Module, Mux, Shape, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from . import params as P
from .block import Block
from .elements import beat_layout, delayed, is_nonzero, staged_tree_sum

__all__ = ["SparsityMonitor", "BLOCK", "STATS_DEPTH"]

#: Statistics records that may wait on ``m_axis_stats`` before the data path is held.
STATS_DEPTH = 2
#: Adder levels of the per-beat popcount between two registers.
POPCOUNT_LEVELS_PER_STAGE = 2
#: Edges from a tile's last beat transfer to its record's transfer, beyond the popcount's
#: stages: the accumulators (and closing registers), the saturated totals, the FIFO write, the
#: transfer. (The beat's nonzero flags are registered on the edge of its own transfer.)
STATS_STAGES_AFTER_POPCOUNT = 4


def popcount_stages(lanes):
    """Register stages of the per-beat popcount: its adder levels, two per stage."""
    levels = (lanes - 1).bit_length()
    return -(-levels // POPCOUNT_LEVELS_PER_STAGE)

PARAMS = (
    P.lanes_param(),
    P.width_param(),
    P.number_format_param(),
    P.integer("max_tile_elems", 65536, 1, 2 ** 32, "largest tile (elements) counted exactly"),
)


def _check(p):
    if p["number_format"] == "fp" and p["width"] < 2:
        raise ValueError(f"width must be at least 2 for number_format 'fp', not {p['width']!r}")


def stats_layout(lanes, max_tile_elems):
    count = max_tile_elems.bit_length()
    beats = -(-max_tile_elems // lanes)
    return data.StructLayout({
        "nnz": count,
        "elems": count,
        "zero_beats": beats.bit_length(),
        "sparse": 1,
    })


def _count_widths(layout):
    """The widths of a record's counters (``nnz`` and ``elems``), of ``zero_beats``, and of
    ``threshold * elems``."""
    count_w = Shape.cast(layout["nnz"].shape).width
    beats_w = Shape.cast(layout["zero_beats"].shape).width
    return count_w, beats_w, count_w + 8


class SparsityMonitor(wiring.Component):
    """Pass-through sparsity monitor.

    Parameters
    ----------
    lanes, width, number_format, max_tile_elems
        See ``spartan list``; checked here with the generator's messages.

    Members
    -------
    s_axis : In(stream)  dense tile beats in (``data`` lanes, ``last``)
    m_axis : Out(stream) the same beats out, combinationally
    m_axis_stats : Out(stream) one record per tile (:func:`stats_layout`)
    threshold : In(8)    density threshold in 1/256 steps, sampled on a tile's first beat
    """

    def __init__(self, *, lanes=8, width=8, number_format="int", max_tile_elems=65536):
        p = BLOCK.resolve(dict(lanes=lanes, width=width, number_format=number_format,
                               max_tile_elems=max_tile_elems))
        self._lanes, self._width = p["lanes"], p["width"]
        self._number_format, self._max_tile_elems = p["number_format"], p["max_tile_elems"]
        beat = beat_layout(lanes, width)
        super().__init__({
            "s_axis": In(stream.Signature(beat)),
            "m_axis": Out(stream.Signature(beat)),
            "m_axis_stats": Out(stream.Signature(
                data.StructLayout({"data": stats_layout(lanes, max_tile_elems)}))),
            "threshold": In(8),
        })
        # Visible in waveforms: the statistics buffer can take a record.
        self.stats_room = Signal()

    lanes = property(lambda self: self._lanes)
    width = property(lambda self: self._width)
    number_format = property(lambda self: self._number_format)
    max_tile_elems = property(lambda self: self._max_tile_elems)
    #: Edges from a tile's last beat transfer to the earliest transfer of its record.
    stats_latency = property(lambda self: popcount_stages(self._lanes)
                             + STATS_STAGES_AFTER_POPCOUNT)

    def elaborate(self, platform):
        m = Module()
        layout = stats_layout(self._lanes, self._max_tile_elems)
        transfer, last = self._pass_through(m)
        beat_nnz, beat_zero, beat_valid, beat_last, beat_threshold = self._beat_counts(
            m, transfer, last)
        closing, closing_threshold, closing_raw, closing_over = self._tile_totals(
            m, layout, beat_nnz, beat_zero, beat_valid, beat_last, beat_threshold)
        record, record_thr_elems, record_valid = self._saturated_record(
            m, layout, closing, closing_threshold, closing_raw, closing_over)
        self._stats_output(m, layout, record, record_thr_elems, record_valid)
        return m

    def _pass_through(self, m):
        """The data path: a wire; only a tile's last beat waits, for room in the buffer.
        Returns the input's ``transfer`` and its ``last`` bit."""
        # ``waiting``: tiles whose last beat went in and whose record has not left, wherever
        # it is (statistics pipeline or FIFO). A register, so ``s_axis_tready`` is two gates
        # from flip-flops.
        waiting = Signal(range(STATS_DEPTH + 1))
        src, dst, stats = self.s_axis, self.m_axis, self.m_axis_stats
        last = src.payload.last
        m.d.comb += [
            self.stats_room.eq(waiting < STATS_DEPTH),
            dst.payload.eq(src.payload),
            dst.valid.eq(src.valid & (~last | self.stats_room)),
            src.ready.eq(dst.ready & (~last | self.stats_room)),
        ]
        transfer = Signal()
        m.d.comb += transfer.eq(src.valid & src.ready)
        m.d.sync += waiting.eq(waiting + (transfer & last) - (stats.valid & stats.ready))
        return transfer, last

    def _beat_counts(self, m, transfer, last):
        """The statistics pipeline's front (it never stalls: ``waiting`` bounds what is in it):
        the accepted beat's nonzero flags, then their popcount. Returns the beat's
        (``beat_nnz``, ``beat_zero``, ``beat_valid``, ``beat_last``, ``beat_threshold``), all
        as of the popcount's last stage."""
        L = self._lanes
        # The tile's threshold, sampled on its first beat, travels with each beat.
        first = Signal(init=1)
        tile_threshold = Signal(8)
        threshold_now = Mux(first, self.threshold, tile_threshold)
        with m.If(transfer):
            m.d.sync += [first.eq(last), tile_threshold.eq(threshold_now)]

        # P1: the accepted beat's per-lane nonzero flags.
        p1_valid, p1_last = Signal(name="p1_valid"), Signal(name="p1_last")
        p1_nz = Signal(L, name="p1_nz")
        p1_threshold = Signal(8, name="p1_threshold")
        m.d.sync += [
            p1_valid.eq(transfer), p1_last.eq(last), p1_threshold.eq(threshold_now),
            p1_nz.eq(Cat(is_nonzero(self.s_axis.payload.data[i], self._width,
                                    self._number_format) for i in range(L))),
        ]
        # The beat's popcount, two adder levels per stage; the rest of the beat waits beside it.
        beat_nnz, stages = staged_tree_sum(m, [p1_nz[i] for i in range(L)],
                                           levels_per_stage=POPCOUNT_LEVELS_PER_STAGE,
                                           name="beat_nnz")
        assert stages == popcount_stages(L)
        beat_zero = delayed(m, ~p1_nz.any(), stages, "beat_zero")
        beat_valid = delayed(m, p1_valid, stages, "beat_valid")
        beat_last = delayed(m, p1_last, stages, "beat_last")
        beat_threshold = delayed(m, p1_threshold, stages, "beat_threshold")
        return beat_nnz, beat_zero, beat_valid, beat_last, beat_threshold

    def _tile_totals(self, m, layout, beat_nnz, beat_zero, beat_valid, beat_last,
                     beat_threshold):
        """Per-tile accumulators. Each wraps, and a sticky flag records that its true value
        passed ``2**width - 1``: the saturation is resolved once per tile, after the adders.
        Returns ``closing`` (a tile's totals are in the closing registers), its threshold, and
        the raw totals and overflow flags by field."""
        L = self._lanes
        count_w, beats_w, thr_w = _count_widths(layout)
        # ``thr_elems`` is threshold * elems, accumulated by adding threshold * lanes (a shift)
        # per beat: no multiplier. Exact while elems is; once elems saturates the record uses
        # threshold * (2**w - 1).
        accumulators = {"nnz": (count_w, beat_nnz), "elems": (count_w, L),
                        "zero_beats": (beats_w, beat_zero),
                        "thr_elems": (thr_w, beat_threshold << (L.bit_length() - 1))}
        closing = Signal()
        closing_threshold = Signal(8)
        closing_raw, closing_over = {}, {}
        m.d.sync += closing.eq(beat_valid & beat_last)
        for field, (width, increment) in accumulators.items():
            acc, over = Signal(width, name=f"acc_{field}"), Signal(name=f"acc_{field}_over")
            total = acc + increment
            over_next = over | total[width:].any()
            closing_raw[field] = Signal(width, name=f"closing_{field}")
            closing_over[field] = Signal(name=f"closing_{field}_over")
            with m.If(beat_valid):
                with m.If(beat_last):
                    m.d.sync += [acc.eq(0), over.eq(0), closing_raw[field].eq(total[:width]),
                                 closing_over[field].eq(over_next)]
                with m.Else():
                    m.d.sync += [acc.eq(total[:width]), over.eq(over_next)]
        with m.If(beat_valid & beat_last):
            m.d.sync += closing_threshold.eq(beat_threshold)
        return closing, closing_threshold, closing_raw, closing_over

    def _saturated_record(self, m, layout, closing, closing_threshold, closing_raw,
                          closing_over):
        """The saturated totals, registered (then ``sparse`` is a compare of registers).
        Returns the ``record``, its ``threshold * elems`` and its valid flag."""
        count_w, beats_w, thr_w = _count_widths(layout)
        top = (1 << count_w) - 1
        record = Signal(layout)
        record_thr_elems = Signal(thr_w)
        record_valid = Signal()
        m.d.sync += [
            record_valid.eq(closing),
            record.nnz.eq(Mux(closing_over["nnz"], top, closing_raw["nnz"])),
            record.elems.eq(Mux(closing_over["elems"], top, closing_raw["elems"])),
            record.zero_beats.eq(Mux(closing_over["zero_beats"], (1 << beats_w) - 1,
                                     closing_raw["zero_beats"])),
            # threshold * (2**count_w - 1), sliced to its width: the unsigned difference is a
            # signed Amaranth value, whose sign bit Yosys left undriven (a combinational loop in
            # Verilator) when only the low bits were used.
            record_thr_elems.eq(Mux(closing_over["elems"],
                                    ((closing_threshold << count_w) - closing_threshold)[:thr_w],
                                    closing_raw["thr_elems"])),
        ]
        return record, record_thr_elems, record_valid

    def _stats_output(self, m, layout, record, record_thr_elems, record_valid):
        """``sparse`` from the registered record, into the FIFO of ``m_axis_stats``."""
        stats = self.m_axis_stats
        # ``waiting`` never exceeds STATS_DEPTH, so the FIFO always has room for a record.
        m.submodules.stats_fifo = stats_fifo = fifo.SyncFIFO(width=layout.size,
                                                             depth=STATS_DEPTH)
        entry = Signal(layout)
        m.d.comb += [
            entry.eq(record),
            entry.sparse.eq((record.nnz << 8) <= record_thr_elems),
            stats_fifo.w_data.eq(entry),
            stats_fifo.w_en.eq(record_valid),
            stats.payload.data.eq(stats_fifo.r_data),
            stats.valid.eq(stats_fifo.r_rdy),
            stats_fifo.r_en.eq(stats.ready),
        ]


def _info(monitor):
    return {"latency_cycles": 0, "throughput_beats_per_cycle": 1.0,
            "stats_latency_cycles": monitor.stats_latency,
            "stats_buffer_records": STATS_DEPTH}


BLOCK = Block(
    name="monitor",
    top="spartan_monitor",
    summary="sparsity monitor: pass-through tiles, one nnz/elems/zero_beats/sparse record per tile",
    params=PARAMS,
    check=_check,
    build=lambda **p: SparsityMonitor(**p),
    info=_info,
)
