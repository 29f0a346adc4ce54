"""Layer engine (docs/engine.md, docs/interfaces.md#engine): whole training-step GEMMs from
memory, partial sums kept on chip.

One ``START`` runs a layer's forward (``OP`` 0, ``Y = X·W``), data-gradient (1, ``dX = dY·Wᵀ``)
or weight-gradient (2, ``dW = Xᵀ·dY``) GEMM on matrices laid out as a training framework
holds them. Around the core's data path (:func:`spartan_rtl.hw.core.tile_datapath`: monitor ->
compactor -> sparse GEMM, the per-tile decision, density table and counters):

    sequencer    checks the descriptor, then walks output columns (``n``), output rows
                 (``acc_rows``) and the inner dimension (``k``), one *step* per inner chunk
    BlockReader  AXI4 reads of each step's ``B`` chunk and ``A`` tile, zero-filled at the edges
    Transposer   the operand read across its memory rows (dgrad's ``Wᵀ``, wgrad's ``Xᵀ``)
    Accumulator  the step's ``C`` added to the partial sums of its rows; the last inner chunk's
                 sums go out
    ResultWriter AXI4 writes of each result row, once

Loop order and why: for each ``n``-column group, each ``acc_rows`` row group, every inner chunk.
The partial sums of one row group stay on chip across the whole inner dimension (``C`` leaves
once), at the cost of reading each ``B`` chunk once per row group.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import Out

from . import core
from . import params as P
from .axil import AxiLiteRegisters, axil_members, forward_ports
from .block import Block
from .elements import BlockRamFifo, beat_layout, log2
from .engine_buffers import Accumulator, Transposer, acc_cmd_layout, transpose_cmd_layout
from .engine_dma import (
    ADDR_WIDTH,
    DEST_A,
    DEST_B,
    DEST_T,
    BlockReader,
    RegisterSlice,
    ResultWriter,
    axi_master_members,
    read_cmd_layout,
    write_cmd_layout,
)
from .engine_regs import ENGINE_COUNTERS, ERR_CODES, ID_VALUE, MAX_DIM, OPS, register_map

__all__ = ["SpartanEngine", "BLOCK"]

DIM_BITS = 16
#: Cycles of the multiply-by-shifts that sizes each region at START (one per bit of a row
#: count).
CHECK_CYCLES = DIM_BITS

PARAMS = tuple(P.power_of_two("table_depth", 256, 1, 1024,
                              "density-table entries (tiles of a layer remembered)")
               if q.name == "table_depth" else q for q in core.PARAMS) + (
    P.power_of_two("data_width", 64, 32, 1024, "AXI4 master data bits: lanes*width (one bus "
                                                "word is one beat of elements)"),
    P.power_of_two("acc_rows", 256, 8, 4096, "output rows whose partial sums stay on chip "
                                             "(rows of an A tile)"),
    P.power_of_two("max_burst", 16, 1, 256, "longest AXI4 burst, beats"),
    P.flag("sparse", True, "false: the dense-only twin, for area comparison (no monitor, "
                           "compactor, density table or zero skipping; every tile dense)"),
)
#: The parameters software reads back as ``CONFIG_*``: the twin is a comparison build with the
#: engine's register map, so ``sparse`` has none.
CONFIG_PARAMS = tuple(q for q in PARAMS if q.name != "sparse")


def _check(p):
    core._check(p)
    if p["width"] not in (8, 16):
        raise ValueError(f"width must be 8 or 16 (whole bytes in memory), not {p['width']!r}")
    if p["acc_width"] not in (16, 32, 64):
        raise ValueError(f"acc_width must be 16, 32 or 64 (whole bytes in memory), "
                         f"not {p['acc_width']!r}")
    if p["data_width"] != p["lanes"] * p["width"]:
        raise ValueError(f"data_width must be lanes*width ({p['lanes'] * p['width']}), "
                         f"not {p['data_width']!r}")


#: Beats of the A queue between the reader and the core (OP 0, 1): the reader moves on to the
#: next B chunk once a tile's last A beat is in, so the queue's beats are what the tile still
#: computes while that chunk loads (64 rows at the defaults: at least 960 cycles of work at
#: any density against 512 for the chunk; docs/engine.md, "Hiding the B loads").
A_QUEUE = 512

#: The engine's elaboration-size estimate (hw/params.py SizeBound; docs/interfaces.md,
#: "Elaboration size"): the core's GEMM terms, the GEMM's second weight set (counted at any
#: ``k_par``, so the term grows with every parameter it reads: at ``k_par`` > 1, which has
#: one set, it over-counts by at most half the weights' term), and the bits of its on-chip
#: buffers over 64 (the partial sums and their result FIFO, 2*acc_rows*n*acc_width; the
#: transposer's two blocks, about 2*max(k,n)*max(acc_rows,k)*width), as for the GEMM's weights.
SIZE_BOUND = P.SizeBound(core.CORE_SIZE_BOUND.terms + (
    ("n", "k*n*width/64", lambda p: p["k"] * p["n"] * p["width"] // 64),
    ("acc_rows", "(acc_rows*n*acc_width + max(k,n)*max(acc_rows,k)*width)/32",
     lambda p: (p["acc_rows"] * p["n"] * p["acc_width"]
                + max(p["k"], p["n"]) * max(p["acc_rows"], p["k"]) * p["width"]) // 32),
), core.CORE_SIZE_BOUND.limit)


def pack(layout, **values):
    """The bits of a ``layout`` struct from its fields' values, as an expression: a named
    signal would keep the bits Yosys finds constant (a parameter's value), unused, and lint
    would name them."""
    parts = []
    for name, field in layout:
        width = Shape.cast(field.shape).width
        value = Value.cast(values[name]).as_unsigned()
        parts.append(value[:width] if len(value) >= width
                     else Cat(value, Const(0, width - len(value))))
    return Cat(*parts)


def matrix_shapes(op, desc, *, elem_bytes, acc_bytes):
    """The three matrices' shapes by OP: (rows, columns, bytes per element), from the
    descriptor's ``M``, ``K``, ``N``."""
    return {
        "A": (desc["M"], Mux(op == OPS["dgrad"], desc["N"], desc["K"]), elem_bytes),
        "B": (Mux(op == OPS["wgrad"], desc["M"], desc["K"]), desc["N"], elem_bytes),
        "C": (Mux(op == OPS["wgrad"], desc["K"], desc["M"]),
              Mux(op == OPS["dgrad"], desc["K"], desc["N"]), acc_bytes),
    }


class Status:
    """``STATUS`` and ``ERR_CODE`` as the sequencer drives them: ``busy`` (a layer runs),
    ``done`` (it ended, or START was refused), ``err`` and its ``err_code``."""

    def __init__(self):
        self.busy, self.done = Signal(name="busy"), Signal(name="done")
        self.err = Signal(name="err")
        self.err_code = Signal(4, name="err_code")

    def refuse(self, code):
        """The statements that refuse a descriptor with ``code``."""
        return [self.err.eq(1), self.err_code.eq(code), self.done.eq(1), self.busy.eq(0)]


class RegionChecks:
    """The descriptor's checks, between START and the layer's start: the fields, and each
    matrix's region in memory, ``end`` = its address + ``span`` + ``row_bytes``, where
    ``span`` = (rows - 1) * stride is computed by shifts and adds, one cycle per bit of
    ``rows_m1`` (:data:`CHECK_CYCLES`), and ``row_bytes`` is a row rounded up to bus words.

    The checks' verdicts (``fields_code``, ``stride_short``, ``out_of_range``, ``overlap``)
    are each registered: the descriptor is held from START to DONE, so these settle during the
    span steps, and no compare reaches the refusal or the layer's start in the same cycle
    (they were the engine's slowest paths). Made by :meth:`add_verdicts`; the sequencer's
    states run :meth:`clear`, :meth:`shift` and :meth:`add_ends`.
    """

    def __init__(self, op, desc, shapes, *, bus_bytes, code_shape):
        self._op, self._desc, self._shapes, self._bus_bytes = op, desc, shapes, bus_bytes
        self.row_bytes, self.span, self.end, self._rounded = {}, {}, {}, {}
        for x, (rows, cols, size) in shapes.items():
            # A row's bytes rounded up to bus words.
            self._rounded[x] = Cat(Const(0, log2(bus_bytes)),
                                   (cols[:DIM_BITS] * size + (bus_bytes - 1)) >> log2(bus_bytes))
            self.row_bytes[x] = Signal.like(self._rounded[x], name=f"row_bytes_{x.lower()}")
            self.span[x] = Signal(DIM_BITS + 32, name=f"span_{x.lower()}")  # (rows - 1) * stride
            self.end[x] = Signal(DIM_BITS + 33, name=f"end_{x.lower()}")
        self.step = Signal(range(CHECK_CYCLES + 1), name="step")
        self.fields_code = Signal(code_shape, name="fields_code")
        # (One statement, whose first two signals Amaranth's tracer leaves unnamed: they are
        # ``$signal$<n>`` in the generated Verilog, which the mutation and coverage reports
        # quote, so naming them would change those.)
        stride_short, out_of_range, overlap = Signal(), Signal(), Signal()
        self.stride_short, self.out_of_range, self.overlap = stride_short, out_of_range, overlap
        self.rows_m1 = {x: Signal(DIM_BITS, name=f"rows_m1_{x.lower()}") for x in "ABC"}

    def add_verdicts(self, m):
        """The rounded row lengths and the verdicts, registered every cycle."""
        op, d, BW = self._op, self._desc, self._bus_bytes
        for x in self._shapes:
            m.d.sync += self.row_bytes[x].eq(self._rounded[x])
        aligned = Cat(*[d[name][:log2(BW)] for name in ("A_ADDR", "A_STRIDE", "B_ADDR",
                                                        "B_STRIDE", "C_ADDR", "C_STRIDE")]) == 0
        dims_ok = Cat(*[(d[x] == 0) | (d[x] > MAX_DIM) for x in ("M", "K", "N")]) == 0
        end = self.end
        m.d.sync += [
            self.fields_code.eq(Mux(op == 3, ERR_CODES["BAD_OP"],
                                    Mux(~dims_ok, ERR_CODES["BAD_DIM"],
                                        Mux(~aligned, ERR_CODES["UNALIGNED"], 0)))),
            self.stride_short.eq(Cat(*[d[f"{x}_STRIDE"] < self.row_bytes[x]
                                       for x in "ABC"]) != 0),
            self.out_of_range.eq(Cat(*[end[x] > (1 << ADDR_WIDTH) for x in "ABC"]) != 0),
            self.overlap.eq(Cat(*[(d["C_ADDR"] < end[x]) & (d[f"{x}_ADDR"] < end["C"])
                                  for x in "AB"]) != 0),
        ]

    def clear(self, m):
        """Before the span steps: every ``span`` 0, every ``rows_m1`` its matrix's rows - 1."""
        m.d.sync += self.step.eq(0)
        m.d.sync += [self.span[x].eq(0) for x in "ABC"]
        m.d.sync += [self.rows_m1[x].eq(rows[:DIM_BITS] - 1)
                     for x, (rows, _, _) in self._shapes.items()]

    def shift(self, m):
        """One span step; returns whether it is the last."""
        # span = (rows - 1) * stride, most significant bit of rows - 1 first.
        for x in "ABC":
            bit = self.rows_m1[x][DIM_BITS - 1]
            m.d.sync += [self.span[x].eq((self.span[x] << 1)
                                         + Mux(bit, self._desc[f"{x}_STRIDE"], 0)),
                         self.rows_m1[x].eq(self.rows_m1[x] << 1)]
        m.d.sync += self.step.eq(self.step + 1)
        return self.step == CHECK_CYCLES - 1

    def add_ends(self, m):
        """Each region's end, from its address, span and row length."""
        m.d.sync += [self.end[x].eq(self._desc[f"{x}_ADDR"] + self.span[x] + self.row_bytes[x])
                     for x in "ABC"]


class LayerWalk:
    """Where the sequencer is in the layer: the output columns (``no``), output rows (``mo``)
    and inner dimension (``ki``) still ``left`` from each loop's size, and the byte offsets
    (``off``) of the step's A tile, B chunk and C tile in their matrices. ``kc_first``,
    ``kc_last``: the step is its row group's first, last inner chunk; ``mt_last``,
    ``nc_last``: the last row group, column group; ``mv``, ``kv``, ``nv``: the step's valid
    rows, inner elements, columns."""

    def __init__(self, op, desc, output_shape, *, k, n, acc_rows, elem_bytes, acc_bytes):
        K, N, MT, d = k, n, acc_rows, desc
        self._op, self._desc, self._k, self._n, self._acc_rows = op, desc, K, N, MT
        self._out_rows, self._out_cols = output_shape[0], output_shape[1]
        self.left = {name: Signal(DIM_BITS + 1, name=f"{name}_left")
                     for name in ("mo", "ki", "no")}
        self.off = {name: Signal(32, name=f"off_{name}")
                    for name in ("a_mt", "a_kc", "b_kc", "b_nc", "c_mt", "c_nc")}
        # What each offset steps by (the descriptor is held through the layer).
        self.delta = {
            "a_mt": Mux(op == OPS["wgrad"], MT * elem_bytes, d["A_STRIDE"] * MT),
            "a_kc": Mux(op == OPS["wgrad"], d["A_STRIDE"] * K, K * elem_bytes),
            "b_kc": Mux(op == OPS["dgrad"], K * elem_bytes, d["B_STRIDE"] * K),
            "b_nc": Mux(op == OPS["dgrad"], d["B_STRIDE"] * N, N * elem_bytes),
            "c_mt": d["C_STRIDE"] * MT,
            "c_nc": Const(N * acc_bytes, 32),
        }
        # The last flags and valid counts are registers, written with ``left``: computed
        # from ``left`` they were the engine's slowest path (``mo_left`` through the valid
        # rows into the read command's queue, 11.9 ns on ECP5). Reset as ``left`` = 0 gives.
        self._size = {"mo": MT, "ki": K, "no": N}
        self.last = {name: Signal(name=f"{name}_last", init=1) for name in ("mo", "ki", "no")}
        self.valid = {name: Signal(DIM_BITS, name=f"{name}_valid") for name in ("mo", "ki", "no")}
        self.kc_first = Signal(name="kc_first")
        self.kc_last, self.mt_last, self.nc_last = (self.last[x] for x in ("ki", "mo", "no"))
        self.mv, self.kv, self.nv = (self.valid[x] for x in ("mo", "ki", "no"))
        # Each loop's start (its whole size: C's rows and columns, the inner dimension) with
        # the last flag and valid count it gives, registered every cycle from the descriptor,
        # which is held from START to DONE (see :meth:`add_starts`).
        self.start = {name: Signal(DIM_BITS + 1, name=f"{name}_start")
                      for name in ("mo", "ki", "no")}
        self.start_last = {name: Signal(name=f"{name}_start_last") for name in ("mo", "ki", "no")}
        self.start_valid = {name: Signal(DIM_BITS, name=f"{name}_start_valid")
                            for name in ("mo", "ki", "no")}

    def add_starts(self, m):
        """The loops' starts, registered every cycle in two stages: the start itself (``OP``'s
        multiplexers over ``M``, ``K``, ``N``), then the last flag and valid count from the
        registered start (the compare with the loop's size). In one stage, ``OP`` through
        the inner dimension's multiplexer and the 32-bit compare into ``no_start_valid`` was
        the slowest path of the engine and its twin (9.7-10.8 ns on ECP5). The checks run 20
        cycles between START and the layer's start, so both stages have long settled."""
        for name, value in (("mo", self._out_rows), ("no", self._out_cols),
                            ("ki", self._inner())):
            size, start = self._size[name], self.start[name]
            m.d.sync += [start.eq(value), self.start_last[name].eq(start <= size),
                         self.start_valid[name].eq(Mux(start <= size, start, size))]

    def _load(self, m, name):
        """``left[name]`` = the loop's start: it (re)starts."""
        m.d.sync += [self.left[name].eq(self.start[name]),
                     self.last[name].eq(self.start_last[name]),
                     self.valid[name].eq(self.start_valid[name])]

    def _step(self, m, name):
        """``left[name]`` -= the loop's step, its flags from the ``left`` before (in parallel
        with the subtraction, not after it)."""
        size, left = self._size[name], self.left[name]
        last = left <= 2 * size
        m.d.sync += [left.eq(left - size), self.last[name].eq(last),
                     self.valid[name].eq(Mux(last, left - size, size))]

    def _inner(self):
        """The inner dimension's size by OP."""
        op, d = self._op, self._desc
        return Mux(op == OPS["forward"], d["K"], Mux(op == OPS["dgrad"], d["N"], d["M"]))

    def begin(self, m):
        """At the layer's start: the first step of C's rows and columns."""
        m.d.sync += self.kc_first.eq(1)
        for name in ("mo", "no", "ki"):
            self._load(m, name)
        m.d.sync += [o.eq(0) for o in self.off.values()]

    def advance(self, m):
        """After a step: the next inner chunk, else the next row group, else the next column
        group."""
        off, delta = self.off, self.delta
        m.d.sync += self.kc_first.eq(self.kc_last)
        with m.If(~self.kc_last):
            self._step(m, "ki")
            m.d.sync += [off["a_kc"].eq(off["a_kc"] + delta["a_kc"]),
                         off["b_kc"].eq(off["b_kc"] + delta["b_kc"])]
        with m.Else():
            self._load(m, "ki")
            m.d.sync += [off["a_kc"].eq(0), off["b_kc"].eq(0)]
            with m.If(~self.mt_last):
                self._step(m, "mo")
                m.d.sync += [off["a_mt"].eq(off["a_mt"] + delta["a_mt"]),
                             off["c_mt"].eq(off["c_mt"] + delta["c_mt"])]
            with m.Else():
                self._load(m, "mo")
                self._step(m, "no")
                m.d.sync += [off["a_mt"].eq(0), off["c_mt"].eq(0),
                             off["b_nc"].eq(off["b_nc"] + delta["b_nc"]),
                             off["c_nc"].eq(off["c_nc"] + delta["c_nc"])]


class SpartanEngine(wiring.Component):
    """The layer engine.

    Members
    -------
    s_axil_* : AXI4-Lite slave (32-bit data, 16-bit byte addresses): :func:`register_map`
    m_axi_*  : AXI4 master (32-bit addresses, ``data_width`` data, INCR bursts, one ID)
    irq      : high while ``STATUS.DONE`` and ``IRQ_EN``
    """

    def __init__(self, **params):
        p = BLOCK.resolve(params)
        self._p = p
        self._map = register_map(p["table_depth"], p["max_tile_elems"].bit_length(),
                                 core.config_registers(CONFIG_PARAMS, p))
        members = dict(axil_members(self._map.addr_width))
        members.update(axi_master_members(p["data_width"]))
        members["irq"] = Out(1)
        super().__init__(members)

    params = property(lambda self: dict(self._p))
    #: Two weight sets in the broadcast datapath: each step's B chunk loads during the step
    #: before (the replicated datapath holds one).
    _weight_sets = property(lambda self: 2 if self._p["k_par"] == 1 else 1)
    regmap = property(lambda self: self._map)
    #: Bytes per A and B element, per C sum.
    _elem_bytes = property(lambda self: self._p["width"] // 8)
    _acc_bytes = property(lambda self: self._p["acc_width"] // 8)

    def elaborate(self, platform):
        m = Module()
        p = self._p
        m.submodules.regs = regs = AxiLiteRegisters(self._map)
        forward_ports(m, self, regs, axil_members(self._map.addr_width))
        f = regs.fields

        layer_start, a, b, c = self._core_datapath(m, regs)
        reader, writer, transposer, acc = self._units(m)
        queues = self._command_queues(m, reader, transposer, acc, writer)
        op = Signal(2)   # the running layer's OP (the register may change while it runs)
        # ``op == dgrad`` and ``op == wgrad`` as flip-flops, set with ``op`` at START: the beats'
        # source multiplexers select by them, and ``OP``'s compare in front of the ``A``
        # operand's was the engine's slowest path (into the core's handshake, 11.5 ns on ECP5).
        op_dgrad, op_wgrad = Signal(name="op_dgrad"), Signal(name="op_wgrad")
        self._route_beats(m, reader.beats, transposer, dgrad=op_dgrad, wgrad=op_wgrad,
                          a=a, b=b, c=c)
        self._write_results(m, c, acc, writer)

        status = Status()
        start_accepted = Signal()   # a START while idle: the descriptor is copied, checks begin
        mem_error = self._status_registers(m, f, status, start_accepted, reader, writer)
        with m.If(start_accepted):
            m.d.sync += [op_dgrad.eq(f[("OP", "OP")] == OPS["dgrad"]),
                         op_wgrad.eq(f[("OP", "OP")] == OPS["wgrad"])]

        # --- descriptor (copied at START) and its checks --------------------------------------
        d = {name: Signal(32, name=f"desc_{name.lower()}")
             for name in ("M", "K", "N", "A_ADDR", "A_STRIDE", "B_ADDR", "B_STRIDE", "C_ADDR",
                          "C_STRIDE")}
        shapes = matrix_shapes(op, d, elem_bytes=self._elem_bytes, acc_bytes=self._acc_bytes)
        checks = RegionChecks(op, d, shapes, bus_bytes=p["data_width"] // 8,
                              code_shape=status.err_code.shape())
        checks.add_verdicts(m)
        walk = LayerWalk(op, d, shapes["C"], k=p["k"], n=p["n"], acc_rows=p["acc_rows"],
                         elem_bytes=self._elem_bytes, acc_bytes=self._acc_bytes)
        walk.add_starts(m)
        self._sequencer(m, f, op, d, status, checks, walk, queues,
                        (reader, transposer, acc, writer), layer_start=layer_start,
                        start_accepted=start_accepted, mem_error=mem_error)
        return m

    def _core_datapath(self, m, regs):
        """The core's data path (:func:`spartan_rtl.hw.core.tile_datapath`), its tiles numbered
        from each START. Returns ``layer_start`` (its PASS_START) and its ``A``, ``B`` and ``C``
        streams."""
        L, W, acc_width = self._p["lanes"], self._p["width"], self._p["acc_width"]
        layer_start = Signal()
        view = SimpleNamespace(fields={**regs.fields, ("CTRL", "PASS_START"): layer_start},
                               written=regs.written, window_addr=regs.window_addr,
                               window_data=regs.window_data)
        a = stream.Signature(beat_layout(L, W)).create()
        b = stream.Signature(beat_layout(L, W)).create()
        c = wiring.flipped(stream.Signature(beat_layout(L, acc_width)).create())
        core.tile_datapath(m, {**self._p, "weight_sets": self._weight_sets}, view, a=a, b=b, c=c)
        return layer_start, a, b, c

    def _units(self, m):
        """The reader, writer (each on its own AXI4 channels), transposer and accumulator."""
        p = self._p
        L, W, K, N, MT, DW = p["lanes"], p["width"], p["k"], p["n"], p["acc_rows"], p["data_width"]
        m.submodules.reader = reader = BlockReader(lanes=L, width=W, data_width=DW,
                                                   max_burst=p["max_burst"])
        m.submodules.writer = writer = ResultWriter(data_width=DW, max_burst=p["max_burst"])
        m.submodules.transposer = transposer = Transposer(
            lanes=L, width=W, rows_max=max(K, N), cols_max=max(MT, K))
        m.submodules.accumulator = acc = Accumulator(lanes=L, acc_width=p["acc_width"],
                                                     rows=MT, n=N)
        for unit in (reader, writer):   # reads and writes, each its own channels
            forward_ports(m, self, unit, [name for name in axi_master_members(DW)
                                          if name in unit.signature.members])
        return reader, writer, transposer, acc

    def _command_queues(self, m, reader, transposer, acc, writer):
        """Command queues from the sequencer to each unit, in step order: returns the
        reader's, the transposer's, the accumulator's and the writer's."""
        L, DW = self._p["lanes"], self._p["data_width"]
        m.submodules.read_cmds = read_cmds = fifo.SyncFIFOBuffered(
            width=read_cmd_layout(L).size, depth=2)
        m.submodules.transpose_cmds = transpose_cmds = fifo.SyncFIFOBuffered(
            width=transpose_cmd_layout().size, depth=2)
        m.submodules.acc_cmds = acc_cmds = fifo.SyncFIFOBuffered(
            width=acc_cmd_layout().size, depth=4)
        m.submodules.write_cmds = write_cmds = fifo.SyncFIFOBuffered(
            width=write_cmd_layout(DW).size, depth=2)
        for queue, port in ((read_cmds, reader.cmd), (transpose_cmds, transposer.cmd),
                            (acc_cmds, acc.cmd), (write_cmds, writer.cmd)):
            m.d.comb += [port.valid.eq(queue.r_rdy), port.payload.eq(queue.r_data),
                         queue.r_en.eq(port.ready)]
        return read_cmds, transpose_cmds, acc_cmds, write_cmds

    def _route_beats(self, m, beats, transposer, *, dgrad, wgrad, a, b, c):
        """The reader's ``beats`` to the core (``a``, ``b``) or the transposer, and the
        transposer's output to the core, by the running layer's OP (``dgrad``: ``B`` from the
        transposer; ``wgrad``: ``A`` from it)."""
        t_out = transposer.out
        # Steps run strictly in turn at the core: B chunk s, then A tile s, then C tile s. The
        # GEMM takes B whenever no tile has reached it, but a tile's first rows may still be in
        # the monitor and compactor, and the transposer may offer one operand before the
        # reader has sent the other: so B chunk s waits until C tile s-1 has left, and A tile
        # s until B chunk s is in. (Counts modulo 4: they never differ by more than one.)
        b_loaded = Signal(2, name="b_loaded")
        a_sent = Signal(2, name="a_sent")
        c_left = Signal(2, name="c_left")
        next_b_loaded = b_loaded + (b.valid & b.ready & b.payload.last)
        next_a_sent = a_sent + (a.valid & a.ready & a.payload.last)
        next_c_left = c_left + (c.valid & c.ready & c.payload.last)
        m.d.sync += [b_loaded.eq(next_b_loaded), a_sent.eq(next_a_sent),
                     c_left.eq(next_c_left)]
        # The two permissions are registers, computed from the counts' next values (so they
        # equal what the counts give each cycle): from the counts, the subtraction and compare
        # ran on through the operands' valid into the GEMM's B loader (12.1 ns on ECP5, 10 of
        # it routing across the device).
        b_allowed = Signal(name="b_allowed", init=1)     # the counts start equal
        a_allowed = Signal(name="a_allowed")
        m.d.sync += [b_allowed.eq((next_b_loaded - next_c_left)[:2] < self._weight_sets),
                     a_allowed.eq(next_a_sent[:2] != next_b_loaded[:2])]
        L, W = self._p["lanes"], self._p["width"]
        m.submodules.a_queue = a_queue = BlockRamFifo(width=L * W + 1, depth=A_QUEUE)
        # The queue's data comes straight from its block RAM's read port: a register slice
        # after it, so the block RAM's clock-to-output and the core's first stage are not one
        # path (13.3 ns, 75 MHz on ECP5 without it).
        m.submodules.a_queue_out = a_out = RegisterSlice(L * W + 1)
        m.d.comb += [a_queue.w_en.eq(beats.valid & (beats.payload.dest == DEST_A)),
                     a_queue.w_data.eq(Cat(beats.payload.data, beats.payload.last)),
                     a_out.i.valid.eq(a_queue.r_rdy), a_out.i.payload.eq(a_queue.r_data),
                     a_queue.r_en.eq(a_out.i.ready),
                     a_out.o.ready.eq(a.ready & a_allowed & ~wgrad)]
        to_core_a = a_allowed & Mux(wgrad, t_out.valid & (t_out.payload.dest == 0),
                                    a_out.o.valid)
        m.d.comb += [
            transposer.w_valid.eq(beats.valid & (beats.payload.dest == DEST_T)),
            transposer.w_last.eq(beats.payload.last), transposer.w_row.eq(beats.payload.row),
            transposer.w_beat.eq(beats.payload.beat), transposer.w_data.eq(beats.payload.data),
            beats.ready.eq(Mux(beats.payload.dest == DEST_T, transposer.w_ready,
                               Mux(beats.payload.dest == DEST_A, a_queue.w_rdy,
                                   b.ready & b_allowed))),
            a.valid.eq(to_core_a),
            a.payload.data.eq(Mux(wgrad, t_out.payload.data, a_out.o.payload[:L * W])),
            a.payload.last.eq(Mux(wgrad, t_out.payload.last, a_out.o.payload[-1])),
            b.valid.eq(b_allowed & Mux(dgrad, t_out.valid & (t_out.payload.dest == 1),
                                       beats.valid & (beats.payload.dest == DEST_B))),
            b.payload.data.eq(Mux(dgrad, t_out.payload.data, beats.payload.data)),
            b.payload.last.eq(Mux(dgrad, t_out.payload.last, beats.payload.last)),
            t_out.ready.eq(Mux(t_out.payload.dest, b.ready & b_allowed, a.ready & a_allowed)),
        ]

    def _write_results(self, m, c, acc, writer):
        """C -> accumulator -> bus words -> writer."""
        L, DW, acc_width = self._p["lanes"], self._p["data_width"], self._p["acc_width"]
        words_per_c_beat = L * acc_width // DW
        # Through a register slice: the accumulator's ready (a carry chain) into the GEMM's
        # output queue, the core's tile counters and its mode FIFO was the engine's slowest
        # path (12.7 ns on ECP5).
        m.submodules.c_slice = c_slice = RegisterSlice(beat_layout(L, acc_width))
        m.d.comb += [c_slice.i.valid.eq(c.valid), c_slice.i.payload.eq(c.payload),
                     c.ready.eq(c_slice.i.ready)]
        wiring.connect(m, c_slice.o, acc.c)
        sub = Signal(range(max(words_per_c_beat, 2)))
        sums = acc.out
        last_sub = sub == words_per_c_beat - 1
        m.d.comb += [writer.data.valid.eq(sums.valid),
                     writer.data.payload.eq(sums.payload.word_select(sub, DW)),
                     sums.ready.eq(writer.data.ready & last_sub)]
        with m.If(writer.data.valid & writer.data.ready):
            m.d.sync += sub.eq(Mux(last_sub, 0, sub + 1))

    def _status_registers(self, m, f, status, start_accepted, reader, writer):
        """Registers: status, error, counters (zeroed as a START is accepted). Returns
        ``mem_error``: a read or write was answered with an error in this layer."""
        busy, err, err_code = status.busy, status.err, status.err_code
        m.d.comb += [f[("STATUS", "BUSY")].eq(busy), f[("STATUS", "DONE")].eq(status.done),
                     f[("STATUS", "ERR")].eq(err), f[("ERR_CODE", "ERR_CODE")].eq(err_code),
                     self.irq.eq(status.done & f[("IRQ_EN", "IRQ_EN")])]
        events = {"LAYER_CYCLES": busy, "A_WORDS": reader.words_a, "B_WORDS": reader.words_b,
                  "C_WORDS": writer.words_c}
        for name, _, _ in ENGINE_COUNTERS:
            counter = Signal(core.COUNTER_BITS, name=f"count_{name.lower()}")
            saturated = counter == (1 << core.COUNTER_BITS) - 1
            with m.If(start_accepted):
                m.d.sync += counter.eq(0)
            with m.Elif(events[name] & ~saturated):
                m.d.sync += counter.eq(counter + 1)
            m.d.comb += f[(name, name)].eq(counter)

        mem_error = Signal()
        with m.If(reader.r_error | writer.b_error):
            m.d.sync += [mem_error.eq(1), err.eq(1),
                         err_code.eq(Mux(reader.r_error, ERR_CODES["READ_RESP"],
                                         ERR_CODES["WRITE_RESP"]))]
        return mem_error

    def _step_commands(self, op, d, walk):
        """The units' commands for the step ``walk`` is at: the B chunk's and the A tile's
        reads, the transposer's read-out, the accumulator's tile and the result rows' write."""
        p = self._p
        L, K, N, DW = p["lanes"], p["k"], p["n"], p["data_width"]
        BW = DW // 8
        mv, kv, nv = walk.mv, walk.kv, walk.nv

        def valid_words(count):
            return (count + (L - 1)) >> log2(L)

        def last_mask(count):
            rem = count[:log2(L)] if L > 1 else Const(0, 1)
            return Mux(rem == 0, (1 << L) - 1, (Const(1, L + 1) << rem) - 1)[:L]

        def read_cmd(base, stride, rows, valid_rows, beats, count, dest, operand_b):
            return pack(read_cmd_layout(L), base=base, stride=stride, rows=rows,
                        valid_rows=valid_rows, beats=beats, words=valid_words(count),
                        last_mask=last_mask(count), dest=dest, operand_b=operand_b)

        off = walk.off
        b_cmd = read_cmd(
            d["B_ADDR"] + off["b_kc"] + off["b_nc"], d["B_STRIDE"],
            Mux(op == OPS["dgrad"], N, K), Mux(op == OPS["dgrad"], nv, kv),
            Mux(op == OPS["dgrad"], K // L, N // L), Mux(op == OPS["dgrad"], kv, nv),
            Mux(op == OPS["dgrad"], DEST_T, DEST_B), 1)
        # wgrad's Xᵀ block: ``k`` rows of only the tile's ``mv`` result rows' words. The
        # transposer reads out ``mv`` columns, so beats past them would be zeros never read
        # (a row group of 64 result rows paid 32 beats a row for 8).
        a_cmd = read_cmd(
            d["A_ADDR"] + off["a_mt"] + off["a_kc"], d["A_STRIDE"],
            Mux(op == OPS["wgrad"], K, mv), Mux(op == OPS["wgrad"], kv, mv),
            Mux(op == OPS["wgrad"], valid_words(mv), K // L), Mux(op == OPS["wgrad"], mv, kv),
            Mux(op == OPS["wgrad"], DEST_T, DEST_A), 0)
        t_cmd = pack(transpose_cmd_layout(), cols=Mux(op == OPS["dgrad"], K, mv),
                     beats=Mux(op == OPS["dgrad"], N // L, K // L), dest=op == OPS["dgrad"])
        a_cmd_acc = pack(acc_cmd_layout(), first=walk.kc_first, last=walk.kc_last)
        out_bytes = nv * self._acc_bytes
        rem_bytes = out_bytes[:log2(BW)]
        w_cmd = pack(write_cmd_layout(DW), base=d["C_ADDR"] + off["c_mt"] + off["c_nc"],
                     stride=d["C_STRIDE"], rows=mv,
                     words=(out_bytes + (BW - 1)) >> log2(BW),
                     total_words=N // L * (L * p["acc_width"] // DW),
                     last_strb=Mux(rem_bytes == 0, (1 << BW) - 1,
                                   (Const(1, BW + 1) << rem_bytes) - 1)[:BW])
        return b_cmd, a_cmd, t_cmd, a_cmd_acc, w_cmd

    def _sequencer(self, m, f, op, d, status, checks, walk, queues, units, *, layer_start,
                   start_accepted, mem_error):
        """The sequencer: at START it copies the descriptor (``d``) and ``op``, checks them
        (a refusal ends the layer with ``ERR``), then issues the layer's steps to the units'
        command ``queues`` and waits until every queue and unit is idle."""
        busy, done, err, err_code = status.busy, status.done, status.err, status.err_code
        start = f[("CTRL", "START")]
        with m.If(start & busy):
            m.d.sync += [err.eq(1), err_code.eq(ERR_CODES["BUSY"])]

        quiet = Signal(name="quiet")
        m.d.sync += quiet.eq(0)     # set only in DRAIN, below
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += start_accepted.eq(start)
                with m.If(start):
                    m.d.sync += [busy.eq(1), done.eq(0), err.eq(0), err_code.eq(0),
                                 mem_error.eq(0), op.eq(f[("OP", "OP")])]
                    m.d.sync += [sig.eq(f[(name, name)]) for name, sig in d.items()]
                    m.next = "CHECK_FIELDS"
            with m.State("CHECK_FIELDS"):
                checks.clear(m)
                m.next = "SPAN"
            with m.State("SPAN"):
                with m.If(checks.shift(m)):
                    m.next = "END"
            with m.State("END"):
                checks.add_ends(m)
                m.next = "CHECK_REGIONS"
            with m.State("CHECK_REGIONS"):
                m.next = "VERDICT"    # the regions' compares, from the ends of END
            with m.State("VERDICT"):
                # Refusals in the order docs/engine.md lists them (the first failure counts).
                with m.If(checks.fields_code != 0):
                    m.d.sync += status.refuse(checks.fields_code)
                    m.next = "IDLE"
                with m.Elif(checks.stride_short):
                    m.d.sync += status.refuse(ERR_CODES["BAD_STRIDE"])
                    m.next = "IDLE"
                with m.Elif(checks.out_of_range):
                    m.d.sync += status.refuse(ERR_CODES["RANGE"])
                    m.next = "IDLE"
                with m.Elif(checks.overlap):
                    m.d.sync += status.refuse(ERR_CODES["OVERLAP"])
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += layer_start.eq(1)
                    walk.begin(m)
                    m.next = "ISSUE_READ_1"
            self._step_states(m, op, d, walk, queues, mem_error=mem_error)
            with m.State("DRAIN"):
                # ``quiet``: every queue and unit was idle the cycle before, in DRAIN (no
                # command is issued here, so they stay idle). The levels' adders and compares
                # straight into the state register were the engine's slowest path (10.8 ns on
                # ECP5, from the results FIFO's ``r_rdy`` to the FSM's state).
                read_cmds, transpose_cmds, acc_cmds, write_cmds = queues
                reader, transposer, acc, writer = units
                m.d.sync += quiet.eq((read_cmds.level == 0) & (transpose_cmds.level == 0)
                                     & (acc_cmds.level == 0) & (write_cmds.level == 0)
                                     & reader.idle & transposer.idle & acc.idle & writer.idle)
                with m.If(quiet):
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"

    def _step_states(self, m, op, d, walk, queues, *, mem_error):
        """The sequencer's states of one step: the B chunk and the A tile, the transposer's
        read-out, the accumulator's tile, and after the last inner chunk the result rows; then
        the next step, or DRAIN after the last (or a memory error)."""
        read_cmds, transpose_cmds, acc_cmds, write_cmds = queues
        b_cmd, a_cmd, t_cmd, a_cmd_acc, w_cmd = self._step_commands(op, d, walk)
        kc_last = walk.kc_last
        # wgrad reads the A tile first: its Xᵀ block fills the transposer's free block while
        # the GEMM still computes the step before (the B chunk must wait for that step's C
        # anyway).
        wgrad = op == OPS["wgrad"]
        with m.State("ISSUE_READ_1"):
            m.d.comb += [read_cmds.w_en.eq(1), read_cmds.w_data.eq(Mux(wgrad, a_cmd, b_cmd))]
            with m.If(read_cmds.w_rdy):
                m.next = "ISSUE_READ_2"
        with m.State("ISSUE_READ_2"):
            m.d.comb += [read_cmds.w_en.eq(1), read_cmds.w_data.eq(Mux(wgrad, b_cmd, a_cmd))]
            with m.If(read_cmds.w_rdy):
                m.next = "ISSUE_T"
        with m.State("ISSUE_T"):
            m.d.comb += [transpose_cmds.w_en.eq(op != OPS["forward"]),
                         transpose_cmds.w_data.eq(t_cmd)]
            with m.If(transpose_cmds.w_rdy | (op == OPS["forward"])):
                m.next = "ISSUE_ACC"
        with m.State("ISSUE_ACC"):
            m.d.comb += [acc_cmds.w_en.eq(1), acc_cmds.w_data.eq(a_cmd_acc)]
            with m.If(acc_cmds.w_rdy):
                m.next = "ISSUE_W"
        with m.State("ISSUE_W"):
            m.d.comb += [write_cmds.w_en.eq(kc_last), write_cmds.w_data.eq(w_cmd)]
            with m.If(write_cmds.w_rdy | ~kc_last):
                m.next = "NEXT"
        with m.State("NEXT"):
            walk.advance(m)
            finished = kc_last & walk.mt_last & walk.nc_last
            with m.If(finished | mem_error):
                m.next = "DRAIN"
            with m.Else():
                m.next = "ISSUE_READ_1"


def _info(engine):
    p = engine.params
    return {
        "latency_cycles": None,
        "throughput_beats_per_cycle": None,
        "id": ID_VALUE,
        "ops": OPS,
        "err_codes": ERR_CODES,
        "limits": {"max_dim": MAX_DIM, "addr_width": ADDR_WIDTH},
        "axi": {"addr_width": ADDR_WIDTH, "data_width": p["data_width"],
                "max_burst": p["max_burst"], "burst": "INCR", "id": None,
                "boundary_bytes": 4096},
        **core.register_info(engine, BLOCK.top),
    }


BLOCK = Block(
    name="engine",
    top="spartan_engine",
    summary="layer engine: a whole forward, dgrad or wgrad GEMM from memory (AXI4 master), "
            "partial sums on chip, adaptive per tile, AXI4-Lite descriptor registers",
    params=PARAMS,
    check=_check,
    build=lambda **p: SpartanEngine(**p),
    info=_info,
    size_bound=SIZE_BOUND,
)
