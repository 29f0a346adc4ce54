"""The layer engine's register map (docs/engine.md, docs/interfaces.md#engine): the core's
registers (mode, threshold, density table, counters) plus the layer descriptor, status and
interrupt. One description behind the decode, the manifest and the SystemRDL.
"""

from . import core
from .axil import Field, Register, RegisterMap, Window

__all__ = ["ID_VALUE", "OPS", "ERR_CODES", "MAX_DIM", "register_map"]

#: ``ID`` register: "SP" (0x5350), block 0x02 (layer engine), version 0x02 (0x02: the
#: ``CONFIG_*`` registers).
ID_VALUE = 0x5350_0202
#: ``OP`` values: which GEMM of a training step.
OPS = {"forward": 0, "dgrad": 1, "wgrad": 2}
#: ``ERR_CODE`` values (0: no error). A refused descriptor (codes 1 to 6) writes nothing.
ERR_CODES = {
    "BAD_OP": 1,       # OP is not 0, 1 or 2
    "BAD_DIM": 2,      # M, K or N is 0 or above MAX_DIM
    "UNALIGNED": 3,    # an address or stride is not a multiple of data_width/8 bytes
    "BAD_STRIDE": 4,   # a stride is smaller than its rows' bytes (rounded up to bus words)
    "RANGE": 5,        # a region runs past the end of the 32-bit address space
    "OVERLAP": 6,      # the output region overlaps an input region
    "BUSY": 7,         # START while a layer runs (the running layer goes on)
    "READ_RESP": 8,    # SLVERR or DECERR on a read: the layer stops after the step in flight
    "WRITE_RESP": 9,   # SLVERR or DECERR on a write: likewise
}
#: Largest M, K and N.
MAX_DIM = 65535

DESCRIPTOR = (
    ("OP", 0x50, 2, "0 forward Y = X·W, 1 dgrad dX = dY·Wᵀ, 2 wgrad dW = Xᵀ·dY"),
    ("M", 0x54, 32, "output positions (rows of X, dY and Y)"),
    ("K", 0x58, 32, "C_in·kh·kw (columns of X, rows of W)"),
    ("N", 0x5C, 32, "C_out (columns of W, dY and Y)"),
    ("A_ADDR", 0x60, 32, "byte address of the A operand (OP 0, 2: X; OP 1: dY)"),
    ("A_STRIDE", 0x64, 32, "bytes from one row of the A operand to the next"),
    ("B_ADDR", 0x68, 32, "byte address of the B operand (OP 0, 1: W; OP 2: dY)"),
    ("B_STRIDE", 0x6C, 32, "bytes from one row of the B operand to the next"),
    ("C_ADDR", 0x70, 32, "byte address of the result (OP 0: Y, 1: dX, 2: dW)"),
    ("C_STRIDE", 0x74, 32, "bytes from one row of the result to the next"),
)

ENGINE_COUNTERS = (
    ("LAYER_CYCLES", 0x78, "cycles from the last START taken while idle to its DONE (a refused "
                           "descriptor: its checks)"),
    ("A_WORDS", 0x7C, "bus words read for the A operand"),
    ("B_WORDS", 0x80, "bus words read for the B operand"),
    ("C_WORDS", 0x84, "bus words written for the result"),
)


def register_map(table_depth, count_bits, config=()):
    """The engine's map: the core's registers at the core's offsets (``CTRL.PASS_START``
    becomes ``CTRL.START``: the engine numbers a layer's tiles itself), then the descriptor;
    ``config``: the ``CONFIG_*`` registers (:func:`spartan_rtl.hw.core.config_registers`)."""
    base = core.register_map(table_depth, count_bits, config)
    regs = []
    for r in base.registers:
        if r.name == "ID":
            r = Register("ID", 0x00, "constant identifying the block and version", (
                Field("ID", 0, 32, "const", "0x5350 'SP', block 0x02 (layer engine), "
                                            "version 0x02", reset=ID_VALUE),))
        elif r.name == "CTRL":
            r = Register("CTRL", 0x04, "mode and one-shot commands", (
                Field("MODE", 0, 2, "rw", "0 auto (density table), 1 force dense, 2 force sparse "
                                          "(3 behaves as 1)"),
                Field("START", 2, 1, "w1p", "write 1: check the descriptor and run the layer "
                                            "(tiles numbered from 0)"),
                Field("CLEAR", 3, 1, "w1p", "write 1: zero every counter"),
                Field("FORGET", 4, 1, "w1p", "write 1: invalidate every density-table entry"),
            ))
        elif r.name == "TILE":
            r = Register("TILE", 0x0C, "tiles started in this layer",
                         (Field("TILE", 0, 32, "ro", "index of the next A tile"),))
        regs.append(r)
    regs += [
        Register("STATUS", 0x44, "state of the last layer", (
            Field("BUSY", 0, 1, "ro", "a layer runs"),
            Field("DONE", 1, 1, "ro", "the last START finished (cleared by the next START)"),
            Field("ERR", 2, 1, "ro", "ERR_CODE is not 0 (cleared by the next accepted START)"),
        )),
        Register("ERR_CODE", 0x48, "why the last START failed (docs/engine.md)",
                 (Field("ERR_CODE", 0, 4, "ro", "0 none, 1 BAD_OP, 2 BAD_DIM, 3 UNALIGNED, "
                                                 "4 BAD_STRIDE, 5 RANGE, 6 OVERLAP, 7 BUSY, "
                                                 "8 READ_RESP, 9 WRITE_RESP"),)),
        Register("IRQ_EN", 0x4C, "irq is high while STATUS.DONE and IRQ_EN",
                 (Field("IRQ_EN", 0, 1, "rw", "1: raise irq when a layer is done"),)),
    ]
    regs += [Register(name, offset, doc, (Field(name, 0, width, "rw", doc),))
             for name, offset, width, doc in DESCRIPTOR]
    regs += [Register(name, offset, doc + " (saturating)",
                      (Field(name, 0, core.COUNTER_BITS, "ro", doc),))
             for name, offset, doc in ENGINE_COUNTERS]
    regs.sort(key=lambda r: r.offset)
    table = base.windows[0]
    table = Window(table.name, table.offset, table.entries,
                   table.doc.replace("pass", "layer"), table.fields, entry_words=2)
    return RegisterMap("spartan_engine", regs, [table], addr_width=16)
