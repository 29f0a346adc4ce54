"""An Amaranth design of one's own with two Spartan blocks inside (docs/integration.md).

``SparseWriter`` is the write path of an activation buffer: every tile is measured by the
sparsity monitor on its way through and stored zero-value compressed by the compactor (or
dense, when ``dense`` is high at the tile's first beat).
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from spartan_rtl.hw.compactor import Compactor
from spartan_rtl.hw.monitor import SparsityMonitor


class SparseWriter(wiring.Component):
    """Dense tiles in (``s_axis``); per tile a statistics record (``m_axis_stats``) and the
    tile in ZVC form (``m_axis_mask``, ``m_axis_data``). A tile is whole rows of ``cols``."""

    def __init__(self, *, lanes=8, width=8, cols=64):
        # The blocks are built first: this component's ports are their members (direction and
        # signature), so the widths always agree with the blocks' parameters.
        self.monitor = SparsityMonitor(lanes=lanes, width=width)
        self.compactor = Compactor(lanes=lanes, width=width, cols=cols)
        monitor, compactor = self.monitor.signature.members, self.compactor.signature.members
        super().__init__({
            "s_axis": monitor["s_axis"],
            "m_axis_stats": monitor["m_axis_stats"],
            "m_axis_mask": compactor["m_axis_mask"],
            "m_axis_data": compactor["m_axis_data"],
            "threshold": In(8),  # the monitor's density threshold, 1/256 steps
            "dense": In(1),      # store this tile uncompressed (sampled on its first beat)
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.monitor = monitor = self.monitor
        m.submodules.compactor = compactor = self.compactor

        # Ports of the same signature: wiring.connect (flipped: this component's own ports
        # face outwards).
        wiring.connect(m, wiring.flipped(self.s_axis), monitor.s_axis)
        wiring.connect(m, monitor.m_axis_stats, wiring.flipped(self.m_axis_stats))
        wiring.connect(m, compactor.m_axis_mask, wiring.flipped(self.m_axis_mask))
        wiring.connect(m, compactor.m_axis_data, wiring.flipped(self.m_axis_data))

        # Monitor -> compactor: the compactor's beats carry one more field (tuser, bypass),
        # so the two streams differ in signature and are joined field by field.
        beat = monitor.m_axis.payload
        m.d.comb += [
            compactor.s_axis.payload.data.eq(beat.data),
            compactor.s_axis.payload.last.eq(beat.last),
            compactor.s_axis.payload.user.bypass.eq(self.dense),
            compactor.s_axis.valid.eq(monitor.m_axis.valid),
            monitor.m_axis.ready.eq(compactor.s_axis.ready),
            monitor.threshold.eq(self.threshold),
        ]
        return m
