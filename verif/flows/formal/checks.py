"""The checks ``make formal`` runs: each a block (or a part of one) at a small configuration,
its properties, its BMC depth and, for a proof, its k."""

from __future__ import annotations

from dataclasses import dataclass

from .axi_properties import axil_props, engine_reader_props, engine_writer_props
from .expander_properties import expander_props, expander_protocol
from .harness import Harness
from .stream_properties import (
    compactor_props,
    compactor_protocol,
    gemm_broadcast_invariants,
    monitor_props,
)


@dataclass
class Check:
    name: str
    block: str
    params: dict
    depth: int
    props: tuple = ()
    what: str = ""
    #: k of a k-induction proof (SymbiYosys ``prove``), or None: BMC to ``depth`` only.
    prove: int | None = None
    #: Builds a part of ``block`` alone from ``params`` (else the block itself).
    build: object = None

    def dut(self):
        if self.build is not None:
            return self.build(**self.params)
        from spartan_rtl.hw import blocks
        block = blocks.get(self.block)
        return block.build(**block.resolve(self.params))

    def harness(self):
        return Harness(self.dut(), self.props)


def _engine_part(name):
    def build(**params):
        from spartan_rtl.hw import engine_dma
        return getattr(engine_dma, name)(**params)
    return build


def _checks():
    mon_small = {"lanes": 2, "width": 2, "max_tile_elems": 255}
    mon_sat = {"lanes": 4, "width": 3, "max_tile_elems": 5}
    # Two beats a row: rows end often enough for a short bound to see several, and a row's
    # leftover still crosses a beat.
    comp = {"lanes": 2, "width": 2, "cols": 4}
    comp4 = {"lanes": 4, "width": 2, "cols": 8}
    # From 8 lanes on the compactor has its deep pipeline (hw/compactor.py, ``pipeline``).
    comp_deep = {"lanes": 8, "width": 2, "cols": 16}
    gemm = {"lanes": 2, "width": 2, "acc_width": 4, "k": 4, "n": 4, "k_par": 2, "n_par": 2}
    # The broadcast datapath (k_par = 1) with two column groups.
    gemm_broadcast = {"lanes": 2, "width": 2, "acc_width": 4, "k": 4, "n": 4, "k_par": 1,
                      "n_par": 2}
    core = dict(gemm, table_depth=2, max_tile_elems=63)
    core_broadcast = dict(gemm_broadcast, table_depth=2, max_tile_elems=63)
    # The engine's AXI4 master, its two halves alone: one bus word of 4 lanes, bursts of 4
    # beats at most; commands of 1 to 3 rows of 1 to 6 words (a row takes two bursts or, cut
    # at a 4 KB boundary, three).
    reader = {"lanes": 4, "width": 8, "data_width": 32, "max_burst": 4}
    writer = {"data_width": 32, "max_burst": 4}
    blocks = {"rows_max": 3, "words_max": 6, "max_burst": 4, "bus_bytes": 4}
    # Stability alone goes deep cheaply; the exact conservation properties make every BMC step
    # much harder (the solver relates two counts across the whole trace), so they run shorter.
    return [
        Check("monitor_protocol", "monitor", mon_small, 20,
              (monitor_props(2, 2, 255, exact=False, content=False, invariants=True),),
              "stable outputs; wire data path; a record only for a tile ended and waiting",
              prove=8),
        Check("monitor_stable", "monitor", mon_small, 20, (monitor_props(2, 2, 255, exact=False),),
              "as above; nnz <= elems"),
        Check("monitor", "monitor", mon_small, 12, (monitor_props(2, 2, 255),),
              "as above, and a chosen tile's record exact"),
        Check("monitor_saturating", "monitor", mon_sat, 10, (monitor_props(4, 3, 5),),
              "as above, tiles past max_tile_elems (counts saturate)"),
        Check("compactor_protocol", "compactor", comp, 20, (compactor_protocol(2, 4),),
              "stable outputs; a mask only for a row ended", prove=8),
        Check("compactor_deep_protocol", "compactor", comp_deep, 12,
              (compactor_protocol(8, 16),), "as above, the deep pipeline (8 lanes)", prove=8),
        Check("compactor", "compactor", comp, 10, (compactor_props(2, 2, 4),),
              "stable outputs; masks and data conserve the rows"),
        Check("compactor_lanes4", "compactor", comp4, 10, (compactor_props(4, 2, 8),),
              "as above, 4 lanes"),
        Check("expander_elements", "expander", comp, 14, (expander_protocol(2, 4, width=2),),
              "stable output; an output row per mask, tlast at the row's end only and the "
              "mask's; a data beat only when the masks call for one; every element from its "
              "mask and data", prove=8),
        Check("expander_elements_lanes4", "expander", comp4, 10,
              (expander_protocol(4, 8, width=2),), "as above, 4 lanes", prove=8),
        Check("expander", "expander", comp, 14, (expander_props(2, 2, 4),),
              "stable output; every element from its mask and data (a row chosen by its index "
              "since reset)"),
        Check("expander_lanes4", "expander", comp4, 10, (expander_props(4, 2, 8),),
              "as above, 4 lanes"),
        Check("gemm", "gemm", gemm, 24, (), "stable output (replicated datapath)", prove=8),
        Check("gemm_broadcast", "gemm", gemm_broadcast, 24, (gemm_broadcast_invariants(2),),
              "stable output (broadcast datapath)", prove=8),
        Check("core", "core", core, 16, (axil_props(),),
              "stable outputs (C stream, AXI4-Lite B and R); one response per request", prove=8),
        Check("core_broadcast", "core", core_broadcast, 22,
              (axil_props(), gemm_broadcast_invariants(2)),
              "as above, through the broadcast GEMM", prove=8),
        Check("engine_reader", "engine", reader, 12,
              (engine_reader_props(lanes=4, **blocks),),
              "BlockReader alone, commands of 1-3 rows of 1-6 words: AR stable, INCR bursts "
              "of 1 to max_burst whole words, aligned, none across 4 KB; beats stable; the R "
              "beats the R side takes are exactly those requested", prove=8,
              build=_engine_part("BlockReader")),
        Check("engine_writer", "engine", writer, 12, (engine_writer_props(**blocks),),
              "ResultWriter alone, commands as above: AW as AR; W stable, only after its AW, "
              "wlast exactly on a burst's last beat, W beats = AW lengths; bready 1, B "
              "responses awaited = AWs sent; the words to write are those requested and to "
              "request", prove=8, build=_engine_part("ResultWriter")),
    ]


CHECKS = {c.name: c for c in _checks()}
