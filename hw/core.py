"""Spartan core (docs/interfaces.md#core): monitor -> compactor -> sparse GEMM, adaptive per
tile, with an AXI4-Lite register interface.

Data path
    ``s_axis_a`` (dense ``A`` rows of ``k`` elements) passes through the sparsity monitor
    (:mod:`spartan_rtl.hw.monitor`, latency 0) into the compactor (:mod:`spartan_rtl.hw.compactor`),
    whose per-tile ``tuser`` bit selects dense bypass (all-ones masks, rows unchanged) or ZVC; its
    mask and data streams feed the GEMM (:mod:`spartan_rtl.hw.gemm`), whose ``C`` is ``m_axis_c``.
    ``s_axis_b`` goes straight to the GEMM's weight buffer. The blocks are instantiated, not copied.

Per-tile decision (the paper's policy, docs/interfaces.md#core)
    Tiles are numbered from 0 after each ``CTRL.PASS_START``. A density table (``table_depth``
    entries of the monitor's ``nnz`` and ``elems``, plus a valid bit) remembers each tile index
    from the last pass that saw it; entry ``TABLE_BASE + t`` serves tile ``t``. Tile ``t`` is
    processed sparse iff ``MODE`` is 2 (force sparse), or ``MODE`` is 0 (auto) and its entry is
    valid and ``nnz*256 <= THRESHOLD*elems``; otherwise dense (``MODE`` 1 forces dense; 3 is
    reserved and behaves as 1). The decision for the next tile goes through a pipeline of
    ``DECISION_STAGES`` registers (docs/core.md), restarted by any write to ``CTRL``,
    ``THRESHOLD`` or ``TABLE_BASE``, so a change applies to every tile whose first beat comes
    after the write was accepted. When the monitor reports tile ``t``, its entry is overwritten.
    Tiles whose entry would lie beyond the table are processed by the rule with no history (dense in
    auto mode) and not recorded.

Counters (32 bits, saturating, zeroed by reset and ``CTRL.CLEAR``; each event counted two cycles
after it happens)
    ``CYCLES`` every clock; ``BUSY_CYCLES`` cycles with a tile in flight (after its first
    ``A`` beat's transfer, up to and including the cycle of its last ``C`` beat's transfer);
    ``STALL_CYCLES`` cycles a GEMM pass was ready but waited for ``m_axis_c`` (the GEMM's
    ``stat_stall``); ``TILES_DENSE``/``TILES_SPARSE`` tiles whose last ``C`` beat left, by
    mode; ``ROWS_EMPTY`` ``A`` rows (``k/lanes`` beats) without a nonzero, counted at the
    input in either mode; ``MACS_DONE`` ``popcount(mask)*n`` per row entering the GEMM (a dense
    row ``k*n``); ``MACS_SKIPPED`` ``(k - popcount(mask))*n`` per row, so their sum is
    ``rows*k*n``; ``CONFLICT_CYCLES`` the GEMM's weight-bank conflict cycles; ``ZERO_BEATS``
    and ``TILES_BELOW`` the monitor's all-zero beats and tiles it found at or below
    ``THRESHOLD`` (those run sparse in the next pass, in auto mode).
"""

from amaranth.hdl import Cat, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from . import ecp5
from . import params as P
from .axil import (
    AxiLiteRegisters,
    Field,
    Register,
    RegisterMap,
    Window,
    axil_members,
    forward_ports,
)
from .block import Block
from .compactor import MAX_COLS, Compactor
from .elements import beat_layout, delayed, is_nonzero, popcount, tree_sum
from .gemm import CORE_SIZE_BOUND, SparseGemm, sim_models
from .gemm import PARAMS as GEMM_PARAMS
from .gemm import check_params as check_gemm_params
from .monitor import SparsityMonitor, stats_layout

__all__ = ["SpartanCore", "BLOCK", "ID_VALUE", "register_map", "MODES",
           "TILES_IN_FLIGHT"]

#: ``ID`` register: "SP" (0x5350), block 0x01 (core), version 0x02 (0x02: the ``CONFIG_*``
#: registers).
ID_VALUE = 0x5350_0102
#: ``CTRL.MODE`` values.
MODES = {"auto": 0, "dense": 1, "sparse": 2}
#: Tiles that may be between their first ``A`` beat and their last ``C`` beat; a further tile's
#: first beat waits (the per-tile mode travels in a FIFO of this depth).
TILES_IN_FLIGHT = 8

#: Registers between the decision's inputs (tile index, registers, table) and its verdict.
DECISION_STAGES = 6
COUNTER_BITS = 32

COUNTERS = (
    ("CYCLES", 0x10, "clock cycles"),
    ("BUSY_CYCLES", 0x14, "cycles with a tile in flight"),
    ("STALL_CYCLES", 0x18, "cycles the GEMM waited on m_axis_c"),
    ("TILES_DENSE", 0x1C, "tiles completed in dense mode"),
    ("TILES_SPARSE", 0x20, "tiles completed in sparse mode"),
    ("ROWS_EMPTY", 0x24, "A rows with no nonzero element"),
    ("MACS_DONE", 0x28, "multiply-accumulates performed (dense row: `k*n`, sparse row: "
                        "`nnz*n`)"),
    ("MACS_SKIPPED", 0x2C, "`rows*k*n - MACS_DONE`"),
    ("CONFLICT_CYCLES", 0x30, "cycles lost to weight-bank conflicts"),
    ("ZERO_BEATS", 0x38, "A beats whose lanes were all zero (the monitor's zero_beats)"),
    ("TILES_BELOW", 0x3C, "tiles the monitor measured at or below THRESHOLD (its sparse bit)"),
    ("A_ERRORS", 0x40, "malformed A rows: a tlast before the row's k elements (the compactor "
                       "pads the row with zeros)"),
)

TABLE_OFFSET = 0x1000
#: ``CONFIG_<PARAMETER>``: one read-only word per generator parameter, in the block's parameter
#: order from here, so software can tell which build it drives (k, n, lanes, table_depth...).
CONFIG_OFFSET = 0x100


def config_registers(params, values):
    """The ``CONFIG_<NAME>`` registers of a block's ``params`` (:class:`~.params.Param`) as
    built (``values``): a number as itself, a flag 0 or 1, a choice its index."""
    regs = []
    for i, param in enumerate(params):
        value = values[param.name]
        if param.kind is str:
            code = param.choices.index(value)
            meaning = ", ".join(f"{n} {c}" for n, c in enumerate(param.choices))
            doc = f"parameter {param.name} ({meaning})"
        else:
            code = int(value)
            doc = f"parameter {param.name}" + (" (1 true, 0 false)" if param.kind is bool
                                               else "")
        regs.append(Register(f"CONFIG_{param.name.upper()}", CONFIG_OFFSET + 4 * i,
                             f"{doc}: {param.doc}",
                             (Field(f"CONFIG_{param.name.upper()}", 0, 32, "const",
                                    f"{param.name} = {value}", reset=code),)))
    return regs


def register_map(table_depth, count_bits, config=()):
    """The core's register map: the one description behind the decode, the manifest and the
    SystemRDL (:mod:`spartan_rtl.hw.registers`) from which PeakRDL renders the C header,
    docs/registers.md and the IP-XACT export. ``count_bits``: width of the monitor's
    ``nnz``/``elems``."""
    regs = [
        Register("ID", 0x00, "constant identifying the block and version", (
            Field("ID", 0, 32, "const", "0x5350 'SP', block 0x01 (core), version 0x02",
                  reset=ID_VALUE),)),
        Register("CTRL", 0x04, "mode and one-shot commands", (
            Field("MODE", 0, 2, "rw", "0 auto (density table), 1 force dense, 2 force sparse "
                                      "(3 behaves as 1)"),
            Field("PASS_START", 2, 1, "w1p", "write 1: number the next tile 0 (between passes)"),
            Field("CLEAR", 3, 1, "w1p", "write 1: zero every counter"),
            Field("FORGET", 4, 1, "w1p", "write 1: invalidate every density-table entry"),
        )),
        Register("THRESHOLD", 0x08, "a tile with an entry runs sparse (auto mode) iff "
                                    "`nnz*256 <= THRESHOLD*elems`", (
            Field("THRESHOLD", 0, 8, "rw", "density threshold in 1/256 steps; reset 0x80: "
                                           "sparse at or below 50 % nonzeros", reset=0x80),)),
        Register("TILE", 0x0C, "tiles started in this pass (the next tile's index)",
                 (Field("TILE", 0, 32, "ro", "tile index of the next A tile"),)),
        Register("TABLE_BASE", 0x34, "first density-table entry of this pass",
                 (Field("TABLE_BASE", 0, 16, "rw", "tile t uses entry TABLE_BASE + t"),)),
    ]
    regs += [Register(name, offset, doc + " (saturating)",
                      (Field(name, 0, COUNTER_BITS, "ro", doc),)) for name, offset, doc in COUNTERS]
    regs += config
    regs.sort(key=lambda r: r.offset)
    table = Window(
        "DENSITY_TABLE", TABLE_OFFSET, table_depth,
        "the monitor's measurement of tile t of the last pass that saw it, in entry "
        "TABLE_BASE + t: entry e is the two words at offset 8e (NNZ and VALID, then ELEMS)",
        (Field("NNZ", 0, count_bits, "ro", "nonzero elements of the tile", reset=None),
         Field("VALID", 31, 1, "ro", "the entry holds a measurement (cleared by reset and "
                                     "CTRL.FORGET)"),
         Field("ELEMS", 32, count_bits, "ro", "elements of the tile", reset=None)),
        entry_words=2)
    return RegisterMap("spartan_core", regs, [table], addr_width=16)


# The GEMM's parameters but ``sparse`` (the core's GEMM always skips zeros) and
# ``weight_sets`` (the core holds one resident ``B``, as its streams promise).
PARAMS = tuple(q for q in GEMM_PARAMS if q.name not in ("sparse", "weight_sets")) + (
    P.power_of_two("table_depth", 64, 1, 1024, "density-table entries (tile indices remembered)"),
    P.integer("max_tile_elems", 65536, 1, 2 ** 24, "largest A tile (elements) measured exactly"),
)

def _check(p):
    check_gemm_params(p)
    if p["k"] > MAX_COLS:
        raise ValueError(f"k must be at most {MAX_COLS} (the compactor's row length), "
                         f"not {p['k']!r}")


class SpartanCore(wiring.Component):
    """The integrated tile engine.

    Members
    -------
    s_axis_a : In(stream)  dense ``A`` rows (``k`` elements), ``last`` on a tile's last beat
    s_axis_b : In(stream)  ``B`` row-major (``n/lanes`` beats per row), ``last`` on its last beat
    m_axis_c : Out(stream) ``C`` row-major, ``acc_width``-bit sums, ``last`` on a tile's last beat
    s_axil_* : AXI4-Lite slave (32-bit data, 16-bit byte addresses), see :func:`register_map`
    """

    def __init__(self, **params):
        p = BLOCK.resolve(params)
        self._p = p
        self._map = register_map(p["table_depth"], p["max_tile_elems"].bit_length(),
                                 config_registers(PARAMS, p))
        members = {
            "s_axis_a": In(stream.Signature(beat_layout(p["lanes"], p["width"]))),
            "s_axis_b": In(stream.Signature(beat_layout(p["lanes"], p["width"]))),
            "m_axis_c": Out(stream.Signature(beat_layout(p["lanes"], p["acc_width"]))),
        }
        members.update(axil_members(self._map.addr_width))
        super().__init__(members)

    params = property(lambda self: dict(self._p))
    regmap = property(lambda self: self._map)

    def elaborate(self, platform):
        m = Module()
        regs = AxiLiteRegisters(self._map)
        forward_ports(m, self, regs, axil_members(self._map.addr_width))
        tile_datapath(m, self._p, regs, a=self.s_axis_a, b=wiring.flipped(self.s_axis_b),
                      c=wiring.flipped(self.m_axis_c))
        return m


def tile_datapath(m, p, regs, *, a, b, c):
    """The core's data path and control, shared by :class:`SpartanCore` and the layer engine
    (:mod:`spartan_rtl.hw.engine`): monitor -> compactor -> GEMM with the per-tile decision,
    the density table and the counters, added to module ``m``.

    ``regs``: the register slave (added here, as submodule ``regs``), or a view of another
    block's slave with its ``fields``/``written``/``window_addr``/``window_data`` for the
    fields of :func:`register_map` the data path uses (added by that block). ``a``: the ``A``
    stream read here (its ``ready`` driven here); ``b``: an outgoing ``B`` stream view, ``c``
    an incoming ``C`` stream view, connected to the GEMM.

    ``p["sparse"]`` false (the engine's dense-only twin, for area comparison): no monitor,
    compactor, decision or density table, and the GEMM's dense-only build; every tile runs
    dense, the table's entries read 0 (never valid), and the counters of what those blocks
    measure (``TILES_SPARSE``, ``ZERO_BEATS``, ``TILES_BELOW``, ``A_ERRORS``) stay 0.
    """
    L, W, K = p["lanes"], p["width"], p["k"]
    sparse = p.get("sparse", True)   # (the core has no such parameter: it always skips zeros)
    gemm_params = {q.name: p[q.name] for q in GEMM_PARAMS if q.name in p}

    if sparse:
        m.submodules.monitor = monitor = SparsityMonitor(
            lanes=L, width=W, number_format="int", max_tile_elems=p["max_tile_elems"])
        m.submodules.compactor = compactor = Compactor(lanes=L, width=W, number_format="int",
                                                       cols=K)
    m.submodules.gemm = gemm = SparseGemm(**gemm_params)
    if isinstance(regs, AxiLiteRegisters):
        m.submodules.regs = regs
    m.submodules.modes = modes = fifo.SyncFIFO(width=1, depth=TILES_IN_FLIGHT)

    f = regs.fields
    clear = f[("CTRL", "CLEAR")]
    if sparse:
        a_tile, a_take, events = _adaptive_tiles(m, p, regs, a, monitor, compactor, modes)
        mask_out, data_out = compactor.m_axis_mask, compactor.m_axis_data
    else:
        a_tile, a_take, mask_out, data_out = _whole_rows(m, p, regs, a, modes)
        events = {"ZERO_BEATS": 0, "TILES_BELOW": 0, "A_ERRORS": 0}
        m.d.comb += regs.window_data["DENSITY_TABLE"].eq(0)

    mask, c_done, tile_mode = _gemm_streams(m, mask_out, data_out, gemm, modes, b=b, c=c)
    rows_empty = _empty_rows(m, p, a, a_take)
    events = {
        "CYCLES": 1,
        "BUSY_CYCLES": modes.r_rdy,
        "STALL_CYCLES": gemm.stat_stall,
        "TILES_DENSE": c_done & ~tile_mode,
        "TILES_SPARSE": c_done & tile_mode,
        "ROWS_EMPTY": rows_empty,
        "CONFLICT_CYCLES": gemm.stat_conflict,
        **events,
    }
    _counters(m, p, f, events, mask, clear=clear)
    m.d.comb += f[("TILE", "TILE")].eq(a_tile)


def _adaptive_tiles(m, p, regs, a, monitor, compactor, modes):
    """``A`` -> monitor -> compactor, each tile dense or sparse by the per-tile decision from
    the density table, which the monitor's records fill. Returns ``a_tile`` (tiles started in
    this pass), ``a_take`` (an ``A`` beat transfers) and the events of the counters the
    monitor and compactor drive."""
    f = regs.fields
    mode, threshold = f[("CTRL", "MODE")], f[("THRESHOLD", "THRESHOLD")]
    pass_start, forget = f[("CTRL", "PASS_START")], f[("CTRL", "FORGET")]
    table_base = f[("TABLE_BASE", "TABLE_BASE")]

    first, sparse_next, decision_ready, a_tile, a_take = _a_to_compactor(
        m, a, monitor, compactor, modes, threshold=threshold, pass_start=pass_start)

    # --- density table ------------------------------------------------------------------
    m.submodules.table = table = Memory(shape=_table_entry(p), depth=p["table_depth"],
                                        init=[])
    valid = Signal(p["table_depth"])
    lookup = table.read_port(domain="comb")
    bus_read = table.read_port()
    write = table.write_port()
    target = _decide(m, p, lookup, valid, a_tile=a_tile, first=first, mode=mode,
                     threshold=threshold, table_base=table_base, sparse_next=sparse_next)
    stats = monitor.m_axis_stats
    record, stats_tile = _record_measurements(m, p, stats, write, forget=forget,
                                              table_base=table_base, pass_start=pass_start)
    _settle_decision(m, p, regs, stats, stats_tile, target, decision_ready,
                     forget=forget, pass_start=pass_start, tile_start=a_take & first)
    # (A Mux, not If/Elif: Yosys would emit a casez that Verilator's lint calls overlapping.)
    m.d.sync += valid.eq(Mux(forget, 0, valid | (record << write.addr)))
    _table_bus_view(m, regs, bus_read, valid)
    return a_tile, a_take, {
        "ZERO_BEATS": Mux(stats.valid, stats.payload.data.zero_beats, 0),
        "TILES_BELOW": stats.valid & stats.payload.data.sparse,
        "A_ERRORS": compactor.error,
    }


def _whole_rows(m, p, regs, a, modes):
    """The dense-only twin's ``A`` front: each row's ``k/lanes`` beats into a data FIFO, and
    once its last beat is in, its mask (all ones, ``last`` from ``A``'s ``tlast`` on that
    beat) into a mask FIFO: the GEMM takes a row's mask before its data, and whether the row
    ends its tile is known only at its last beat. Two rows of room, so one row streams in
    while the GEMM takes the other (a dense row takes the GEMM ``k`` passes per column group
    and the input ``k/lanes`` beats, so more would not be faster). A ``tlast`` before a row's
    last beat is not seen (the engine sends whole rows). Returns ``a_tile``, ``a_take`` and
    the mask and data streams."""
    L, W, K = p["lanes"], p["width"], p["k"]
    beats = K // L
    m.submodules.row_data = row_data = fifo.SyncFIFO(width=L * W + 1, depth=2 * beats)
    m.submodules.row_ends = row_ends = fifo.SyncFIFO(width=1, depth=2)
    pass_start = regs.fields[("CTRL", "PASS_START")]
    first = Signal(init=1)   # the next A beat starts a tile
    a_tile = Signal(32)
    row_beat = Signal(range(max(beats, 2)))
    row_end = Signal()
    a_take = Signal()
    m.d.comb += [
        a.ready.eq(row_data.w_rdy & row_ends.w_rdy & (~first | modes.w_rdy)),
        a_take.eq(a.valid & a.ready),
        row_end.eq(row_beat == beats - 1),
        row_data.w_en.eq(a_take),
        row_data.w_data.eq(Cat(a.payload.data, row_end)),
        row_ends.w_en.eq(a_take & row_end),
        row_ends.w_data.eq(a.payload.last),
        modes.w_en.eq(a_take & first),
        modes.w_data.eq(0),
    ]
    with m.If(a_take):
        m.d.sync += [first.eq(a.payload.last), row_beat.eq(Mux(row_end, 0, row_beat + 1))]
    _count_tiles(m, a_tile, pass_start=pass_start, tile_ends=a_take & a.payload.last)
    mask = stream.Signature(data.StructLayout({"data": K, "last": 1})).create()
    rows = stream.Signature(beat_layout(L, W)).create()
    m.d.comb += [
        mask.valid.eq(row_ends.r_rdy), mask.payload.data.eq((1 << K) - 1),
        mask.payload.last.eq(row_ends.r_data), row_ends.r_en.eq(mask.ready),
        rows.valid.eq(row_data.r_rdy), rows.payload.eq(row_data.r_data),
        row_data.r_en.eq(rows.ready),
    ]
    return a_tile, a_take, mask, rows


def _a_to_compactor(m, a, monitor, compactor, modes, *, threshold, pass_start):
    """A: ``s_axis_a`` -> monitor -> compactor, with the tile's mode in ``tuser``; a tile's
    first beat waits for the decision and for room in the ``modes`` FIFO. Returns ``first``
    (the next A beat starts a tile), ``sparse_next`` and ``decision_ready`` (the decision
    for the tile that starts next, driven by :func:`_decide` and :func:`_settle_decision`),
    ``a_tile`` (tiles started in this pass) and ``a_take`` (an A beat transfers)."""
    mon_in, mon_out = monitor.s_axis, monitor.m_axis
    first = Signal(init=1)  # the next A beat starts a tile
    sparse_next = Signal()  # the decision for the tile that starts next (when ready)
    decision_ready = Signal()
    a_tile = Signal(32)
    can_start = Signal()
    m.d.comb += [
        can_start.eq(~first | (modes.w_rdy & decision_ready)),
        mon_in.payload.eq(a.payload),
        mon_in.valid.eq(a.valid & can_start),
        a.ready.eq(mon_in.ready & can_start),
        monitor.threshold.eq(threshold),
        compactor.s_axis.payload.data.eq(mon_out.payload.data),
        compactor.s_axis.payload.last.eq(mon_out.payload.last),
        compactor.s_axis.payload.user.eq(~sparse_next),  # 1 = dense bypass
        compactor.s_axis.valid.eq(mon_out.valid),
        mon_out.ready.eq(compactor.s_axis.ready),
    ]
    a_take = Signal()
    m.d.comb += a_take.eq(a.valid & a.ready)
    with m.If(a_take):
        m.d.sync += first.eq(a.payload.last)
    _count_tiles(m, a_tile, pass_start=pass_start, tile_ends=a_take & a.payload.last)
    m.d.comb += [modes.w_en.eq(a_take & first), modes.w_data.eq(sparse_next)]
    return first, sparse_next, decision_ready, a_tile, a_take


def _count_tiles(m, a_tile, *, pass_start, tile_ends):
    """``a_tile``: tiles started in this pass, zeroed by ``PASS_START``. The handshake enables
    the increment rather than entering the carry chain as its carry in: ``A``'s handshake
    through the 32-bit adder was the engine's slowest path (11.5 ns on ECP5, 8.2 ns of it
    routing)."""
    with m.If(pass_start):
        m.d.sync += a_tile.eq(0)
    with m.Elif(tile_ends):
        m.d.sync += a_tile.eq(a_tile + 1)


def _count_width(p):
    """Bits of the monitor's ``nnz`` and ``elems``."""
    return Shape.cast(stats_layout(p["lanes"], p["max_tile_elems"])["nnz"].shape).width


def _table_entry(p):
    """A density-table entry: the monitor's ``nnz`` and ``elems`` of a tile."""
    count_w = _count_width(p)
    return data.StructLayout({"nnz": count_w, "elems": count_w})


def _table_index_width(p):
    """Bits of a density-table index (of its read and write ports' addresses)."""
    return max(p["table_depth"].bit_length(), 1)


def _decide(m, p, lookup, valid, *, a_tile, first, mode, threshold, table_base, sparse_next):
    """The decision for the next tile into ``sparse_next``, from its density-table entry
    (``lookup``, a combinational read port, and the ``valid`` bits). Returns ``target``: the
    tile it decides."""
    depth, count_w, index_w = p["table_depth"], _count_width(p), _table_index_width(p)
    # The decision is a pipeline of DECISION_STAGES registers (index, table read, its
    # copy, the THRESHOLD x elems multiplier's input and output, the verdict), so no path runs from
    # an A handshake through the table and a multiplier (it limited the core to 33 MHz). It works
    # one tile ahead: while a tile streams in, it decides the tile after it (``target``), so a tile
    # boundary does not change its input and costs no cycle. Whenever an input changes (the target
    # moves, MODE, THRESHOLD or TABLE_BASE is written, the table is forgotten, or a record
    # lands in the entry being read) ``settle`` restarts, and no tile starts before the
    # verdict has passed through every stage: only tiles shorter than the pipeline wait.
    target = Signal(32)
    m.d.comb += target.eq(a_tile + ~first)
    lookup_index = Signal(33)
    m.d.sync += lookup_index.eq(table_base + target)
    m.d.comb += lookup.addr.eq(lookup_index[:index_w])
    has_entry, entry_nnz, entry_elems = Signal(), Signal(count_w), Signal(count_w)
    m.d.sync += [has_entry.eq((lookup_index < depth) & valid.bit_select(lookup.addr, 1)),
                 entry_nnz.eq(lookup.data.nnz), entry_elems.eq(lookup.data.elems)]
    # Registered again: the tools make the first register the block RAM's synchronous
    # read, whose output (5.8 ns on ECP5) straight into the multiplier was the core's
    # critical path.
    entry_elems_q = delayed(m, entry_elems, 1, "entry_elems")
    # THRESHOLD x elems on a multiplier with registers at its inputs and at its output:
    # its DSP slice is wherever the GEMM left one free, and routes of up to 4.9 ns in and
    # 4.8 ns out of it were the core's critical path on ECP5 (a MULT18X18D takes at most
    # 18-bit operands: larger tables infer it).
    fits_dsp = count_w <= ecp5.MAX_WIDTH
    threshold_elems = ecp5.multiply(m, "threshold_mult", threshold, entry_elems_q,
                                    signed=False,
                                    multiplier=p["multiplier"] if fits_dsp else "inferred")
    scaled_nnz = delayed(m, entry_nnz << 8, 1 + ecp5.LATENCY, "scaled_nnz")
    has_entry_d = delayed(m, has_entry, 1 + ecp5.LATENCY, "has_entry")
    m.d.sync += sparse_next.eq((mode == MODES["sparse"])
                               | ((mode == MODES["auto"]) & has_entry_d
                                  & (scaled_nnz <= threshold_elems)))
    return target


def _record_measurements(m, p, stats, write, *, forget, table_base, pass_start):
    """The monitor's records (``stats``) into the density table's ``write`` port. Returns
    ``record`` (an entry is written) and ``stats_tile`` (the tile the next record is for)."""
    index_w = _table_index_width(p)
    stats_tile = Signal(32)
    # A record is written the cycle after the monitor sends it, its entry's index
    # registered on the way (TABLE_BASE + tile, compared with the depth, into the valid
    # bits' decoder in one cycle was the core's critical path, 10.8 ns); FORGET drops a
    # record on its way, as it drops the ones already written.
    record_valid = Signal()
    record_index, record_fits = Signal(index_w), Signal()
    record_data = Signal.like(write.data)
    m.d.comb += stats.ready.eq(1)
    m.d.sync += [record_valid.eq(stats.valid & ~forget),
                 record_index.eq((table_base + stats_tile)[:index_w]),
                 record_fits.eq(table_base + stats_tile < p["table_depth"]),
                 record_data.nnz.eq(stats.payload.data.nnz),
                 record_data.elems.eq(stats.payload.data.elems)]
    record = record_valid & record_fits
    m.d.comb += [write.addr.eq(record_index), write.en.eq(record), write.data.eq(record_data)]
    m.d.sync += stats_tile.eq(Mux(pass_start, 0, stats_tile + stats.valid))
    return record, stats_tile


def _settle_decision(m, p, regs, stats, stats_tile, target, decision_ready, *, forget,
                     pass_start, tile_start):
    """``decision_ready``: the decision's pipeline has settled since its inputs last changed.

    Every restart is known by the cycle the input changes (a register's write is seen as
    the bus accepts it and registered, a tile's start as its first beat is taken), so the
    countdown starts at DECISION_STAGES (at DECISION_STAGES - 1 a cycle later for a write)
    and ``decision_ready`` is a register compare: no path runs from a register's value to
    ``s_axis_a_tready`` (with the change detected from the value a cycle late instead, one
    ran from TABLE_BASE through the A handshake to the counters, 55 MHz on ECP5). A record
    for the entry being read is the one input seen only as it changes; it holds the next
    tile back for that cycle (records reach an entry being read only late from a previous
    pass, after PASS_START).
    """
    index_w = _table_index_width(p)
    # ``record_hits``: the record now landing is for the entry now being read. Compared a
    # cycle early and registered (the same as comparing the registered record with the
    # registered target): from those registers through the compare, the A handshake and
    # the tile counter's add was the core's critical path on ECP5 (10.3 ns).
    record_hits = Signal()
    m.d.sync += record_hits.eq(stats.valid & ~forget
                               & (stats_tile[:index_w] == target[:index_w]))
    # A register's write restarts the countdown a cycle late, from a register, one stage
    # lower, and holds ``decision_ready`` low in the cycle between: the countdown ends in
    # the same cycle, but the write decode (the bus's address compares) no longer runs into
    # ``settle``'s reload, the slowest path of the core and of the engine on ECP5 (9.1 ns and
    # 10.4 ns, most of it routing).
    was_written = Signal()
    m.d.sync += was_written.eq(regs.written["CTRL"] | regs.written["THRESHOLD"]
                               | regs.written["TABLE_BASE"])
    restart = Signal()
    m.d.comb += restart.eq(pass_start | tile_start | record_hits)
    settle = Signal(range(DECISION_STAGES + 1), init=DECISION_STAGES - 1)
    with m.If(restart):
        m.d.sync += settle.eq(DECISION_STAGES)
    with m.Elif(was_written):
        m.d.sync += settle.eq(DECISION_STAGES - 1)
    with m.Elif(settle != 0):
        m.d.sync += settle.eq(settle - 1)
    m.d.comb += decision_ready.eq((settle == 0) & ~record_hits & ~was_written)


def _table_bus_view(m, regs, bus_read, valid):
    """Bus view: word 2e = nnz | valid << 31, word 2e+1 = elems."""
    window = "DENSITY_TABLE"
    word_addr = regs.window_addr[window]
    odd, entry_valid = Signal(), Signal()
    m.d.comb += bus_read.addr.eq(word_addr[1:])
    m.d.sync += [odd.eq(word_addr[0]), entry_valid.eq(valid.bit_select(word_addr[1:], 1))]
    m.d.comb += regs.window_data[window].eq(
        Mux(odd, bus_read.data.elems, bus_read.data.nnz | (entry_valid << 31)))


def _gemm_streams(m, mask, rows, gemm, modes, *, b, c):
    """The ``mask`` and ``rows`` (data) streams -> GEMM, ``B`` in and ``C`` out; a tile's mode
    leaves ``modes`` with its last ``C`` beat. Returns the ``mask`` stream, ``c_done`` (a
    tile's last ``C`` beat transfers) and ``tile_mode`` (that tile ran sparse)."""
    m.d.comb += [
        gemm.s_axis_a_mask.payload.eq(mask.payload),
        gemm.s_axis_a_mask.valid.eq(mask.valid),
        mask.ready.eq(gemm.s_axis_a_mask.ready),
    ]
    wiring.connect(m, rows, gemm.s_axis_a_data)
    wiring.connect(m, b, gemm.s_axis_b)
    wiring.connect(m, gemm.m_axis_c, c)
    c_done = Signal()
    m.d.comb += [c_done.eq(c.valid & c.ready & c.payload.last),
                 modes.r_en.eq(c_done)]
    tile_mode = modes.r_data[0]
    return mask, c_done, tile_mode


def _empty_rows(m, p, a, a_take):
    """``ROWS_EMPTY``'s event: an ``A`` row (``k/lanes`` beats, or up to ``tlast``) without a
    nonzero ends, counted at the input in either mode."""
    L, W, K = p["lanes"], p["width"], p["k"]
    row_beat = Signal(range(max(K // L, 2)))
    row_any = Signal()
    beat_any = Cat(is_nonzero(a.payload.data[i], W, "int") for i in range(L)).any()
    row_end = Signal()
    m.d.comb += row_end.eq(a_take & ((row_beat == K // L - 1) | a.payload.last))
    with m.If(a_take):
        m.d.sync += [row_beat.eq(Mux(row_end, 0, row_beat + 1)),
                     row_any.eq(Mux(row_end, 0, row_any | beat_any))]
    return row_end & ~row_any & ~beat_any


def _counters(m, p, f, events, mask, *, clear):
    """The saturating counters of :data:`COUNTERS` into their fields of ``f``: those of
    ``events`` (by counter name), and ``MACS_*`` from the GEMM's ``mask`` stream.

    Every increment reaches its counter two cycles after its event, through registers:
    in one cycle, a row mask's popcount, its product and a saturating 32-bit
    add were the core's critical path on ECP5 (17.6 ns). MACS_* take the popcount in two
    steps (8-bit chunk counts, then their sum); CLEAR drops the increments in flight, as
    it drops those of its own cycle.
    """
    K, N = p["k"], p["n"]
    increments = {}
    for name, event in events.items():
        shape = Value.cast(event).shape()
        first, second = (Signal(shape, name=f"inc_{name.lower()}_{i}") for i in (1, 2))
        m.d.sync += [first.eq(Mux(clear, 0, event)), second.eq(Mux(clear, 0, first))]
        increments[name] = second
    mask_take = mask.valid & mask.ready
    chunks = [mask.payload.data[j:j + 8] for j in range(0, K, 8)]
    mask_taken = Signal()
    m.d.sync += mask_taken.eq(mask_take & ~clear)
    # Ones and zeros are counted apart: ``K - ones`` after the sum was the core's slowest
    # path (9.8 ns on ECP5, ``mask_ones1`` to ``inc_macs_skipped_2``).
    for name, bits in (("MACS_DONE", chunks), ("MACS_SKIPPED", [~c for c in chunks])):
        counts = [Signal(range(len(c) + 1), name=f"{name.lower()}_chunk{i}")
                  for i, c in enumerate(bits)]
        m.d.sync += [count.eq(Mux(mask_take & ~clear, popcount(chunk), 0))
                     for count, chunk in zip(counts, bits)]
        increments[name] = Signal(range(K * N + 1), name=f"inc_{name.lower()}_2")
        m.d.sync += increments[name].eq(Mux(mask_taken & ~clear, tree_sum(counts) * N, 0))
    for name, _, _ in COUNTERS:
        counter = Signal(COUNTER_BITS, name=f"count_{name.lower()}")
        total = counter + increments[name]
        with m.If(clear):
            m.d.sync += counter.eq(0)
        with m.Else():
            m.d.sync += counter.eq(Mux(total[COUNTER_BITS:].any(),
                                       (1 << COUNTER_BITS) - 1, total[:COUNTER_BITS]))
        m.d.comb += f[(name, name)].eq(counter)


def register_info(component, driver):
    """The manifest entries of a block with an AXI4-Lite register map and the core's data path
    (the core, the layer engine): the map, the bus, the vendor models; and, popped by
    :func:`spartan_rtl.hw.emit.manifest`, the register map and the name of the block's C driver
    (``sw/<driver>.c``), from which it writes the register files and the driver under the
    generated top's name."""
    rm = component.regmap
    models = sim_models(component.params["multiplier"])
    model_files = models.pop("extra_files", {})
    return {
        "registers": rm.manifest(),
        "modes": MODES,
        "axil": {"addr_width": rm.addr_width, "data_width": 32,
                 "resp": {"okay": 0, "slverr": 2}},
        **models,
        "extra_files": model_files,
        "regmap": rm,
        "c_driver": driver,
    }


def _info(core):
    shared = register_info(core, BLOCK.top)
    return {"latency_cycles": None, "throughput_beats_per_cycle": 1.0,
            "registers": shared.pop("registers"), "id": ID_VALUE, "modes": shared.pop("modes"),
            "tiles_in_flight": TILES_IN_FLIGHT, **shared}


BLOCK = Block(
    name="core",
    top="spartan_core",
    summary="integrated tile engine: monitor -> compactor (per-tile dense/ZVC) -> sparse GEMM, "
            "AXI4-Lite registers",
    params=PARAMS,
    check=_check,
    build=lambda **p: SpartanCore(**p),
    info=_info,
    size_bound=CORE_SIZE_BOUND,   # the GEMM's: its monitor and compactor stay small beside it
)
