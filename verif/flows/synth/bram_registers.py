"""Block RAM output registers on ECP5: a flip-flop that takes a DP16KD's read data straight
(no logic between, no other load) moves into the block RAM's own output register
(``REGMODE = OUTREG``), as Lattice's synthesis does and Yosys's ECP5 mapping does not.

Why: nextpnr's model gives a DP16KD read 5.83 ns from clock to output without the register
and 0.96 ns with it, and the route from a block RAM to the flip-flop that takes its word
crosses the device on the larger designs: the engine's slowest paths were such a route with
no logic in it (the accumulator's ``sums`` into ``s2_stored``, 5.83 + 4.47 ns). The design
does not change: the register is the same register, with the same clock, enable and reset,
in another site.

A block RAM is packed only when every read data bit it drives goes to exactly one flip-flop's
data input, all of those flip-flops share one clock (the block RAM's, on both ports), one
enable and one reset (none, or synchronous to 0, which becomes the block RAM's synchronous
``RST``; a block RAM whose read port already has a synchronous reset keeps it only if it is
the same). The cell's ``RESETMODE`` is one for both ports, which is why the decision is the
cell's, not a port's.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["pack_bram_output_registers"]

BRAM, FF = "DP16KD", "TRELLIS_FF"


def _sinks(module):
    """Every net bit's loads: ``[(cell name, port)]``, ``(None, None)`` for a module output."""
    sinks = defaultdict(list)
    for name, cell in module["cells"].items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "input":
                for bit in bits:
                    if isinstance(bit, int):
                        sinks[bit].append((name, port))
    for port in module["ports"].values():
        if port["direction"] != "input":
            for bit in port["bits"]:
                if isinstance(bit, int):
                    sinks[bit].append((None, None))
    return sinks


def _control(ff):
    """What a flip-flop shares with the others a block RAM's register replaces: clock,
    enable, reset and their modes."""
    conn, par = ff["connections"], ff["parameters"]
    cemux = par["CEMUX"].strip()
    enable = ("1",) if cemux == "1" else tuple(conn.get("CE", ["1"]))
    return (tuple(conn["CLK"]), par["CLKMUX"].strip(), enable, cemux, tuple(conn["LSR"]),
            par["LSRMUX"].strip(), par["REGSET"].strip(),
            par.get("SRMODE", "LSR_OVER_CE").strip(), par["GSR"].strip())


def _registers(cells, sinks, bram):
    """``[(read data pin, flip-flop name)]`` for every read data bit in use of ``bram`` if
    each goes to one flip-flop's data input and nowhere else, else ``None``."""
    taken = []
    for pin, bits in bram["connections"].items():
        if not pin.startswith("DO") or not isinstance(bits[0], int) or not sinks[bits[0]]:
            continue
        loads = sinks[bits[0]]
        name, port = loads[0]
        if len(loads) != 1 or name is None or port != "DI" or cells[name]["type"] != FF:
            return None
        taken.append((pin, name))
    return taken or None


def pack_bram_output_registers(netlist, top):
    """Move the flip-flops after the DP16KDs of ``netlist`` (Yosys's JSON, flattened; module
    ``top``) into the block RAMs' output registers, in place. Returns how many flip-flops
    moved."""
    module = netlist["modules"][top]
    cells = module["cells"]
    sinks = _sinks(module)
    moved = 0
    for bram in [c for c in cells.values() if c["type"] == BRAM]:
        conn, par = bram["connections"], bram["parameters"]
        if (par.get("REGMODE_A", "NOREG"), par.get("REGMODE_B", "NOREG")) != ("NOREG", "NOREG"):
            continue
        if conn["CLKA"] != conn["CLKB"]:
            continue
        taken = _registers(cells, sinks, bram)
        if taken is None:
            continue
        controls = {_control(cells[name]) for _, name in taken}
        if len(controls) != 1:
            continue
        clk, clkmux, ce, cemux, lsr, lsrmux, regset, srmode, gsr = controls.pop()
        if (clk != tuple(conn["CLKA"]) or clkmux != "CLK" or cemux not in ("1", "CE")
                or lsrmux != "LSR" or regset != "RESET" or gsr != par.get("GSR", "DISABLED")):
            continue
        reset = lsr != ("0",)
        if reset and srmode != "LSR_OVER_CE":        # an asynchronous reset: not the same
            continue
        # A read reset the block RAM already has (Yosys maps a read port's synchronous reset
        # to ``RST``) must be the flip-flops' own: ``RST`` then clears both stages at once.
        own = {tuple(conn["RSTA"]), tuple(conn["RSTB"])} - {("0",)}
        if own and (own != {lsr} or par.get("RESETMODE") != "SYNC"):
            continue
        for port in "AB":
            par[f"REGMODE_{port}"] = "OUTREG"
            conn[f"OCE{port}"] = list(ce)
            conn[f"RST{port}"] = list(lsr)
        if reset:
            par["RESETMODE"] = "SYNC"
        for pin, name in taken:
            conn[pin] = cells.pop(name)["connections"]["Q"]
        moved += len(taken)
    return moved
