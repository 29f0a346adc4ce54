"""Sparsity monitor (SPEC §4.1): measures activation tiles on their write path for free.

Data path
    ``s_axis`` -> ``m_axis`` is a wire: same beats, same ``tlast``, latency 0. The only gate is
    the tile's last beat, which waits while the statistics buffer is full, so ``s_axis_tready``
    is high whenever ``m_axis_tready`` is high and the statistics output has room (and also,
    mid-tile, when it has none).

Statistics path
    Per beat: the number of nonzero lanes (a popcount of the per-lane zero test) and whether
    the beat is all zero. Per tile, saturating accumulators of ``nnz``, ``elems`` and
    ``zero_beats``, and of ``threshold * elems`` (adding ``threshold * lanes``, a shift, per
    beat: no multiplier). On the last beat the totals are registered; the next cycle decides
    ``sparse`` (a compare of registers) and writes the record into a FIFO. A record is on
    ``m_axis_stats`` two cycles after the tile's last beat transfers. Two records may wait
    (FIFO plus the closing register) before a last beat is held, which gives a consumer of
    ``m_axis_stats`` a tile's time to react.

Counter width ``w = bit_length(max_tile_elems)``: exact for tiles up to ``2**w - 1``
elements; beyond that the counters saturate at ``2**w - 1`` (documented in docs/monitor.md).
"""

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from . import params as P
from .block import Block
from .elements import beat_layout, is_nonzero, tree_sum

__all__ = ["SparsityMonitor", "BLOCK", "STATS_DEPTH"]

#: Statistics records that may wait on ``m_axis_stats`` before the data path is held.
STATS_DEPTH = 2

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

    def elaborate(self, platform):
        m = Module()
        layout = stats_layout(self._lanes, self._max_tile_elems)
        count_w = Shape.cast(layout["nnz"].shape).width
        beats_w = Shape.cast(layout["zero_beats"].shape).width

        m.submodules.stats_fifo = stats_fifo = fifo.SyncFIFO(width=layout.size,
                                                             depth=STATS_DEPTH)
        # A finished tile's totals wait one cycle in ``closing`` before the FIFO: ``sparse`` is
        # a compare of registers there, so no long path reaches the FIFO or the ports.
        closing = Signal()
        closing_nnz, closing_thr_elems = Signal(count_w), Signal(count_w + 8)
        closing_rest = Signal(data.StructLayout({"elems": count_w, "zero_beats": beats_w}))

        src, dst = self.s_axis, self.m_axis
        last = src.payload.last
        m.d.comb += [
            self.stats_room.eq(stats_fifo.level + closing < STATS_DEPTH),
            dst.payload.eq(src.payload),
            dst.valid.eq(src.valid & (~last | self.stats_room)),
            src.ready.eq(dst.ready & (~last | self.stats_room)),
        ]
        transfer = Signal()
        m.d.comb += transfer.eq(src.valid & src.ready)

        # Per-beat measurements.
        nonzero = [is_nonzero(src.payload.data[i], self._width, self._number_format)
                   for i in range(self._lanes)]
        beat_nnz = Signal(range(self._lanes + 1))
        m.d.comb += beat_nnz.eq(tree_sum(nonzero))
        beat_zero = Signal()
        m.d.comb += beat_zero.eq(beat_nnz == 0)

        # Per-tile accumulators; ``first`` marks that the next beat starts a tile.
        nnz = Signal(count_w)
        elems = Signal(count_w)
        zero_beats = Signal(beats_w)
        tile_threshold = Signal(8)
        first = Signal(init=1)
        # threshold * elems, accumulated by adding threshold * lanes (a shift) per beat: no
        # multiplier. Exact while elems is; once elems saturates, threshold * (2**w - 1).
        thr_elems = Signal(count_w + 8)

        nnz_next = _saturating_add(nnz, beat_nnz, count_w)
        elems_total = elems + self._lanes
        elems_next = _saturating_add(elems, self._lanes, count_w)
        zero_beats_next = _saturating_add(zero_beats, beat_zero, beats_w)
        threshold_now = Mux(first, self.threshold, tile_threshold)
        thr_elems_next = (thr_elems + (threshold_now << (self._lanes.bit_length() - 1)))[:count_w + 8]
        saturated = elems_total[count_w:].any()
        thr_elems_saturated = Signal(count_w + 8)  # threshold * (2**w - 1)
        m.d.comb += thr_elems_saturated.eq((threshold_now << count_w) - threshold_now)
        thr_elems_final = Mux(saturated, thr_elems_saturated, thr_elems_next)

        with m.If(transfer):
            with m.If(last):
                m.d.sync += [nnz.eq(0), elems.eq(0), zero_beats.eq(0), thr_elems.eq(0),
                             first.eq(1)]
            with m.Else():
                m.d.sync += [nnz.eq(nnz_next), elems.eq(elems_next),
                             zero_beats.eq(zero_beats_next), first.eq(0),
                             tile_threshold.eq(threshold_now), thr_elems.eq(thr_elems_next)]
        m.d.sync += closing.eq(transfer & last)
        with m.If(transfer & last):
            m.d.sync += [closing_nnz.eq(nnz_next), closing_thr_elems.eq(thr_elems_final),
                         closing_rest.elems.eq(elems_next),
                         closing_rest.zero_beats.eq(zero_beats_next)]

        entry = Signal(layout)
        m.d.comb += [
            entry.nnz.eq(closing_nnz),
            entry.elems.eq(closing_rest.elems),
            entry.zero_beats.eq(closing_rest.zero_beats),
            entry.sparse.eq((closing_nnz << 8) <= closing_thr_elems),
            stats_fifo.w_data.eq(entry),
            stats_fifo.w_en.eq(closing),
        ]

        stats = self.m_axis_stats
        m.d.comb += [
            stats.payload.data.eq(stats_fifo.r_data),
            stats.valid.eq(stats_fifo.r_rdy),
            stats_fifo.r_en.eq(stats.ready),
        ]
        return m


def _saturating_add(acc, inc, width):
    total = acc + inc
    return Mux(total[width:].any(), (1 << width) - 1, total[:width])


def _info(monitor):
    return {"latency_cycles": 0, "throughput_beats_per_cycle": 1.0,
            "stats_latency_cycles": 2, "stats_buffer_records": STATS_DEPTH}


BLOCK = Block(
    name="monitor",
    top="spartan_monitor",
    summary="sparsity monitor: pass-through tiles, one nnz/elems/zero_beats/sparse record per tile",
    params=PARAMS,
    check=_check,
    build=lambda **p: SparsityMonitor(**p),
    info=_info,
)
