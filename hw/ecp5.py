"""Lattice ECP5 multiplier, instantiated with its own registers (``multiplier = "ecp5"``).

Yosys maps a ``*`` onto ``MULT18X18D`` with every register of the slice off, and nextpnr does
not move fabric flip-flops into it: a register -> multiplier -> register path then runs from a
flip-flop somewhere in the fabric to the DSP column and back, and capped the GEMM at 68 MHz
(docs/gemm.md, "The multipliers"). Instantiated here with the input registers of ``A`` and ``B``
and the output register enabled, the multiply is a path inside the slice, and the routes to and
from it each have a cycle of their own.

:data:`SIM_MODEL` is a behavioural model of the primitive, for simulators without Lattice's
library (Icarus, Verilator). It models the one configuration :func:`registered_multiply`
instantiates (clock ``CLK0``, always enabled, never reset, the pipeline register off) and
stops the simulation at time 0 on any other. It is for simulation only: a synthesis tool that
read it would build the multiplier from logic.
"""

from amaranth.hdl import ClockSignal, Const, Instance, Signal

__all__ = ["multiply", "registered_multiply", "LATENCY", "MAX_WIDTH", "SIM_MODEL", "SIM_MODEL_FILE"]

#: Cycles from ``a`` and ``b`` to their product: the input registers, then the output one.
LATENCY = 2
#: Widest operand: 18 bits, two's complement or unsigned.
MAX_WIDTH = 18
#: The simulation model's file name (the same for every block: one definition of the module).
SIM_MODEL_FILE = "MULT18X18D_sim.v"

_CONFIG = {"REG_INPUTA_CLK": "CLK0", "REG_INPUTB_CLK": "CLK0", "REG_PIPELINE_CLK": "NONE",
           "REG_OUTPUT_CLK": "CLK0", "GSR": "DISABLED", "RESETMODE": "SYNC"}


def registered_multiply(m, name, a, b, *, signed):
    """Add a ``MULT18X18D`` named ``name`` to ``m``; returns its 36-bit product of ``a`` and
    ``b`` (at most :data:`MAX_WIDTH` bits each), :data:`LATENCY` cycles after them."""
    for operand in (a, b):
        if len(operand) > MAX_WIDTH:
            raise ValueError(f"an ECP5 multiplier takes at most {MAX_WIDTH}-bit operands, "
                             f"not {len(operand)}")
    a18, b18, p36 = (Signal(18, name=f"{name}_a"), Signal(18, name=f"{name}_b"),
                     Signal(36, name=f"{name}_p"))
    # Sign- or zero-extended to the slice's 18 bits by the operands' own shapes.
    m.d.comb += [a18.eq(a), b18.eq(b)]
    ports = {}
    for i in range(18):
        ports[f"i_A{i}"], ports[f"i_B{i}"], ports[f"i_C{i}"] = a18[i], b18[i], Const(0)
    for i in range(36):
        ports[f"o_P{i}"] = p36[i]
    for i in range(4):
        ports[f"i_CLK{i}"] = ClockSignal() if i == 0 else Const(0)
        ports[f"i_CE{i}"] = Const(1 if i == 0 else 0)
        ports[f"i_RST{i}"] = Const(0)
    ports.update({f"p_{key}": value for key, value in _CONFIG.items()})
    sign = Const(1 if signed else 0)
    ports.update(i_SIGNEDA=sign, i_SIGNEDB=sign, i_SOURCEA=Const(0), i_SOURCEB=Const(0))
    m.submodules[name] = Instance("MULT18X18D", **ports)
    return p36


def multiply(m, name, a, b, *, signed, multiplier):
    """``a * b`` (``len(a) + len(b)`` bits), :data:`LATENCY` cycles after ``a`` and ``b``,
    through registers at the inputs and at the output: a ``MULT18X18D``'s own
    (:func:`registered_multiply`) for ``multiplier = "ecp5"``, else registers around a ``*``
    (``"inferred"``). The registers have no reset: a product is read beside a valid flag."""
    if multiplier == "ecp5":
        return registered_multiply(m, name, a, b, signed=signed)[:len(a) + len(b)]
    a_in, b_in = (Signal.like(a, name=f"{name}_a", reset_less=True),
                  Signal.like(b, name=f"{name}_b", reset_less=True))
    product = Signal(len(a) + len(b), name=f"{name}_p", reset_less=True)
    m.d.sync += [a_in.eq(a), b_in.eq(b), product.eq(a_in * b_in)]
    return product


def _sim_model():
    a = ", ".join(f"A{i}" for i in range(18))
    b = ", ".join(f"B{i}" for i in range(18))
    c = ", ".join(f"C{i}" for i in range(18))
    p = ", ".join(f"P{i}" for i in range(36))
    a_cat = ", ".join(f"A{i}" for i in reversed(range(18)))
    b_cat = ", ".join(f"B{i}" for i in reversed(range(18)))
    c_cat = ", ".join(f"C{i}" for i in reversed(range(18)))
    p_assign = "\n".join(f"  assign P{i} = p_q[{i}];" for i in range(36))
    checks = "\n".join(
        f'    if ({key} != "{value}") begin\n'
        f'      $display("MULT18X18D %m: this model supports {key} = \\"{value}\\" only");\n'
        f"      $finish;\n    end" for key, value in _CONFIG.items())
    params = "\n".join(f'  parameter {key} = "{value}";' for key, value in _CONFIG.items())
    return f"""// Behavioural model of the Lattice ECP5 MULT18X18D in the one configuration the
// Spartan generator instantiates (spartan_rtl/hw/ecp5.py): A and B registered at the input,
// the product registered at the output (2 cycles), clock CLK0, always enabled, never reset.
// For simulation only (Icarus, Verilator): synthesis must use the vendor primitive. The file is
// named MULT18X18D_sim.v, not after its module, so that no one takes it for the vendor's; the
// registers power up at 0 as the primitive's do (set in the initial block: Verilator -Wall
// warns of registers that have a declaration initialiser and a procedural assignment).
/* verilator lint_off DECLFILENAME */
/* verilator lint_off UNUSEDSIGNAL */
/* verilator lint_off UNUSEDPARAM */
module MULT18X18D (
  input wire {a},
  input wire {b},
  input wire {c},
  input wire SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
  input wire CLK0, CLK1, CLK2, CLK3, CE0, CE1, CE2, CE3, RST0, RST1, RST2, RST3,
  output wire {p}
);
{params}
  wire [17:0] a = {{{a_cat}}};
  wire [17:0] b = {{{b_cat}}};
  wire [17:0] c_unused = {{{c_cat}}};
  reg [17:0] a_q;
  reg [17:0] b_q;
  reg signa_q;
  reg signb_q;
  reg [35:0] p_q;
  wire signed [18:0] a_ext = $signed({{signa_q & a_q[17], a_q}});
  wire signed [18:0] b_ext = $signed({{signb_q & b_q[17], b_q}});
  wire signed [37:0] product = a_ext * b_ext;
  initial begin
{checks}
    a_q = 18'd0;
    b_q = 18'd0;
    signa_q = 1'b0;
    signb_q = 1'b0;
    p_q = 36'd0;
  end
  always @(posedge CLK0) begin
    a_q <= a;
    b_q <= b;
    signa_q <= SIGNEDA;
    signb_q <= SIGNEDB;
    p_q <= product[35:0];
  end
{p_assign}
endmodule
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on DECLFILENAME */
"""


SIM_MODEL = _sim_model()
