"""AXI4-Lite register slave generated from one register-map description.

The map (:class:`RegisterMap`: registers of named fields, plus read-only windows onto memories)
is the single source of the hardware decode in :class:`AxiLiteRegisters`, the manifest's
``registers`` list and the SystemRDL description (:mod:`spartan_rtl.hw.registers`), from which
PeakRDL renders the C header, the Markdown reference and the IP-XACT export.

Bus behaviour (32-bit data, byte addresses, ``addr[1:0]`` ignored):

* AW and W are independent: each is accepted into its own holding register whenever that is
  empty; the write happens once both are held and no B response is waiting, and B follows in
  the next cycle. ``wstrb`` masks bytes of ``rw`` fields; a ``w1p`` (write-1-pulse) field
  pulses for one cycle when a strobed byte writes 1 to it and always reads 0.
* A read is accepted when no R response is waiting; ``rvalid`` rises three cycles after the
  AR transfer (a window's memory reads the address in the first, the word is captured in the
  second).
* ``SLVERR`` answers any access to an address that is no register and no window entry
  (reads return 0, writes do nothing). Writes to read-only registers are ignored with ``OKAY``.
* There are no ``awprot``/``arprot`` ports: protection is not checked (tie a master's off).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ACCESS", "BUS_DOC", "Field", "Register", "Window", "RegisterMap", "AxiLiteRegisters",
           "axil_members", "forward_ports", "RESP_OKAY", "RESP_SLVERR"]

RESP_OKAY = 0b00
RESP_SLVERR = 0b10
DATA_WIDTH = 32

#: The bus behaviour above, for register references (the SystemRDL's description).
BUS_DOC = ("AXI4-Lite, 32-bit data, byte addresses (`addr[1:0]` ignored). Any address that is "
           "neither a register nor a table word answers SLVERR (reads return 0, writes do "
           "nothing); writes to read-only registers are ignored with OKAY; `wstrb` masks bytes. "
           "A write-only single-pulse field (the one-shot commands) acts once when a 1 is "
           "written to it and reads 0.")


#: Field access kinds. ``rw``: stored here, read back; ``ro``: driven by the logic around the
#: slave; ``const``: read-only, always its reset value (driven here); ``w1p``: writing 1 pulses
#: it for one cycle, reads 0.
ACCESS = ("rw", "ro", "const", "w1p")


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    access: str
    doc: str
    reset: int | None = 0  # value after reset; None: undefined (a memory's contents)

    def __post_init__(self):
        if self.access not in ACCESS:
            raise ValueError(f"access must be one of {', '.join(map(repr, ACCESS))}, "
                             f"not {self.access!r}")
        if self.reset is not None and not 0 <= self.reset < 1 << self.width:
            raise ValueError(f"reset of field {self.name} must fit in {self.width} bits, "
                             f"not {self.reset:#x}")


def _reset_value(fields):
    return sum((f.reset or 0) << f.lsb for f in fields)


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    doc: str
    fields: tuple

    @property
    def access(self):
        return "rw" if any(f.access in ("rw", "w1p") for f in self.fields) else "ro"

    @property
    def width(self):
        return max(f.lsb + f.width for f in self.fields)

    @property
    def reset(self):
        """The whole register's value after reset (what a read returns before any write)."""
        return _reset_value(self.fields)


@dataclass(frozen=True)
class Window:
    """``entries`` read-only entries of ``entry_words`` 32-bit words each from ``offset`` on
    (word ``w`` of entry ``e`` at ``offset + 4*(entry_words*e + w)``), backed by a memory that
    answers a word index one cycle after it is presented. ``fields`` lay out one entry as an
    ``32*entry_words``-bit value, word 0 in its low 32 bits."""

    name: str
    offset: int
    entries: int
    doc: str
    fields: tuple
    entry_words: int = 1

    @property
    def words(self):
        return self.entries * self.entry_words


class RegisterMap:
    def __init__(self, prefix, registers, windows=(), *, addr_width=16):
        self.prefix = prefix
        self.registers = tuple(registers)
        self.windows = tuple(windows)
        self.addr_width = addr_width
        spans = [(r.offset, r.offset + 4, r.name) for r in self.registers]
        spans += [(w.offset, w.offset + 4 * w.words, w.name) for w in self.windows]
        spans.sort()
        for (a0, a1, n0), (b0, b1, n1) in zip(spans, spans[1:]):
            if b0 < a1:
                raise ValueError(f"register {n1} must not overlap {n0}, not at {b0:#x}")
        for start, end, name in spans:
            if start % 4 or end > 1 << addr_width:
                raise ValueError(f"register {name} must be word-aligned inside the "
                                 f"{addr_width}-bit address space, not at {start:#x}")

    def register(self, name):
        return next(r for r in self.registers if r.name == name)

    def manifest(self):
        def fields(fs):
            return [{"name": f.name, "lsb": f.lsb, "width": f.width, "access": f.access,
                     "reset": f.reset, "doc": f.doc} for f in fs]
        out = []
        for r in self.registers:
            out.append({"name": r.name, "offset": r.offset, "access": r.access, "width": r.width,
                        "reset": r.reset, "doc": r.doc, "fields": fields(r.fields)})
        for w in self.windows:
            out.append({"name": w.name, "offset": w.offset, "access": "ro", "width": DATA_WIDTH,
                        "words": w.words, "entries": w.entries, "entry_words": w.entry_words,
                        "doc": w.doc, "fields": fields(w.fields)})
        return out


def axil_members(addr_width):
    """Port members of an AXI4-Lite slave, flat ``s_axil_*`` (docs/interfaces.md#core)."""
    return {
        "s_axil_awaddr": In(addr_width), "s_axil_awvalid": In(1),
        "s_axil_awready": Out(1),
        "s_axil_wdata": In(DATA_WIDTH), "s_axil_wstrb": In(DATA_WIDTH // 8), "s_axil_wvalid": In(1),
        "s_axil_wready": Out(1),
        "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1), "s_axil_bready": In(1),
        "s_axil_araddr": In(addr_width), "s_axil_arvalid": In(1),
        "s_axil_arready": Out(1),
        "s_axil_rdata": Out(DATA_WIDTH), "s_axil_rresp": Out(2), "s_axil_rvalid": Out(1),
        "s_axil_rready": In(1),
    }


def forward_ports(m, outer, inner, names):
    """Drive ``inner``'s like-named ports from ``outer``'s inputs, and ``outer``'s outputs from
    ``inner``'s: a block's bus ports handed to the unit inside it that serves them."""
    for name in names:
        port, inside = getattr(outer, name), getattr(inner, name)
        if outer.signature.members[name].flow == In:
            m.d.comb += inside.eq(port)
        else:
            m.d.comb += port.eq(inside)


class AxiLiteRegisters(wiring.Component):
    """The slave. For the logic around it, per field ``fields[(reg, field)]`` is:
    ``rw``: the stored value (driven here); ``ro``: an input to drive; ``const``: its reset
    value (driven here); ``w1p``: a one-cycle pulse (driven here). Per register
    ``written[reg]`` is high in the cycle a write to it is accepted (the fields hold the new
    value from the next cycle; driven here, a pulse whatever the strobes). Per window
    ``window_addr[name]`` (word index, driven here) and ``window_data[name]`` (32-bit input,
    the word at the address presented one cycle before)."""

    def __init__(self, regmap: RegisterMap):
        self._map = regmap
        super().__init__(axil_members(regmap.addr_width))
        self.fields = {}
        for r in regmap.registers:
            for f in r.fields:
                init = f.reset if f.access == "rw" else 0
                self.fields[(r.name, f.name)] = Signal(f.width, name=f"{r.name}_{f.name}",
                                                       init=init)
        self.written = {r.name: Signal(name=f"{r.name}_written") for r in regmap.registers}
        self.window_addr = {w.name: Signal(range(max(w.words, 2)), name=f"{w.name}_addr")
                            for w in regmap.windows}
        self.window_data = {w.name: Signal(DATA_WIDTH, name=f"{w.name}_data")
                            for w in regmap.windows}

    @property
    def regmap(self):
        return self._map

    def elaborate(self, platform):
        m = Module()
        rm = self._map

        # --- write channel: AW and W held independently ---------------------------------
        aw_full, aw_addr = Signal(), Signal(rm.addr_width)
        w_full, w_data, w_strb = Signal(), Signal(DATA_WIDTH), Signal(DATA_WIDTH // 8)
        bvalid, bresp = Signal(), Signal(2)
        m.d.comb += [self.s_axil_awready.eq(~aw_full), self.s_axil_wready.eq(~w_full),
                     self.s_axil_bvalid.eq(bvalid), self.s_axil_bresp.eq(bresp)]
        with m.If(self.s_axil_awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), aw_addr.eq(self.s_axil_awaddr)]
        with m.If(self.s_axil_wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), w_data.eq(self.s_axil_wdata), w_strb.eq(self.s_axil_wstrb)]
        with m.If(bvalid & self.s_axil_bready):
            m.d.sync += bvalid.eq(0)

        do_write = Signal()
        m.d.comb += do_write.eq(aw_full & w_full & ~bvalid)
        write_word = aw_addr[2:]
        # Byte-enable expanded to bits.
        bit_enable = Cat(*[w_strb[i].replicate(8) for i in range(DATA_WIDTH // 8)])
        for r in rm.registers:
            for f in r.fields:
                sig = self.fields[(r.name, f.name)]
                if f.access == "w1p":
                    m.d.sync += sig.eq(0)
                elif f.access == "const":
                    m.d.comb += sig.eq(f.reset)
        with m.If(do_write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bvalid.eq(1), bresp.eq(RESP_SLVERR)]
            for r in rm.registers:
                with m.If(write_word == r.offset // 4):
                    m.d.comb += self.written[r.name].eq(1)
                    m.d.sync += bresp.eq(RESP_OKAY)
                    for f in r.fields:
                        sig = self.fields[(r.name, f.name)]
                        bits = slice(f.lsb, f.lsb + f.width)
                        if f.access == "rw":
                            enable = bit_enable[bits]
                            m.d.sync += sig.eq((sig & ~enable) | (w_data[bits] & enable))
                        elif f.access == "w1p":
                            m.d.sync += sig.eq(w_data[bits] & bit_enable[bits])
            for w in rm.windows:
                with m.If((write_word >= w.offset // 4) & (write_word < w.offset // 4 + w.words)):
                    m.d.sync += bresp.eq(RESP_OKAY)  # read-only: ignored

        # --- read channel: address (windows' memories read it), capture, respond -----------
        r_stage = Signal(2)  # 0 idle, 1 address presented, 2 capture, 3 rvalid
        ar_addr = Signal(rm.addr_width)
        rdata, rresp = Signal(DATA_WIDTH), Signal(2)
        # A window's word is captured alone and chosen at the port: through the register
        # multiplexer, a block RAM's output (5.8 ns on ECP5) to rdata was the core's critical
        # path.
        window_hit, window_word = Signal(), Signal(DATA_WIDTH)
        m.d.comb += [self.s_axil_arready.eq(r_stage == 0), self.s_axil_rvalid.eq(r_stage == 3),
                     self.s_axil_rdata.eq(Mux(window_hit, window_word, rdata)),
                     self.s_axil_rresp.eq(rresp)]
        read_word = ar_addr[2:]
        for w in rm.windows:
            m.d.comb += self.window_addr[w.name].eq(read_word - w.offset // 4)
        # Stages advance 0 -> 1 -> 2 -> 3 -> 0 (a 2-bit counter); 0 waits for arvalid, 3 for
        # rready. (No Switch: Yosys would emit a casez Verilator's lint calls overlapping.)
        advance = Mux(r_stage == 0, self.s_axil_arvalid, Mux(r_stage == 3, self.s_axil_rready, 1))
        with m.If(advance):
            m.d.sync += r_stage.eq(r_stage + 1)
        with m.If((r_stage == 0) & self.s_axil_arvalid):
            m.d.sync += ar_addr.eq(self.s_axil_araddr)
        # The address is decoded in stage 1, one flag a register or window, and stage 2 only
        # selects: the compares and the multiplexer over every register in one cycle were the
        # layer engine's slowest path (11.9 ns on ECP5, 50 registers).
        reg_hit = Signal(len(rm.registers), name="read_reg_hit")
        win_hit = Signal(max(len(rm.windows), 1), name="read_window_hit")
        with m.If(r_stage == 1):
            m.d.sync += [reg_hit[i].eq(read_word == r.offset // 4)
                         for i, r in enumerate(rm.registers)]
            m.d.sync += [win_hit[i].eq((read_word >= w.offset // 4)
                                       & (read_word < w.offset // 4 + w.words))
                         for i, w in enumerate(rm.windows)]
        with m.If(r_stage == 2):
            selected = Const(0, DATA_WIDTH)
            for i, r in enumerate(rm.registers):
                value = Const(0, DATA_WIDTH)
                for f in r.fields:
                    if f.access != "w1p":
                        value = value | (self.fields[(r.name, f.name)].as_unsigned() << f.lsb)
                selected = selected | Mux(reg_hit[i], value, 0)
            word = Const(0, DATA_WIDTH)
            for i, w in enumerate(rm.windows):
                word = word | Mux(win_hit[i], self.window_data[w.name], 0)
            m.d.sync += [rdata.eq(selected), window_hit.eq(win_hit.any()),
                         window_word.eq(word),
                         rresp.eq(Mux(reg_hit.any() | win_hit.any(), RESP_OKAY, RESP_SLVERR))]
        return m
