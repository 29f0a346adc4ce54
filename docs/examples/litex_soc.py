"""A minimal LiteX SoC around the generated Spartan core (docs/integration.md, *LiteX*).

No CPU: the SoC's Wishbone bus has one master, brought out to top-level pins (``wb_*``) so that
a testbench, a JTAG/UART bridge or a CPU added later drives it. The core's AXI4-Lite slave is a
bus slave at ``SPARTAN_BASE`` behind LiteX's own Wishbone -> AXI-Lite converter; its streams are
top-level pins too (a DMA would drive them in a real SoC).

    python docs/examples/litex_soc.py rtl_out/spartan_core.v -o build/litex

writes ``build/litex/spartan_soc.v``; simulate it together with ``spartan_core.v`` (the
generated file is not copied: the SoC refers to its module, ``spartan_core`` by default).
"""

import argparse
import json
import sys
from pathlib import Path

from litex.build.generic_platform import GenericPlatform, Pins, Subsignal
from litex.build.io import CRG
from litex.soc.integration.soc import SoCRegion
from litex.soc.integration.soc_core import SoCMini
from litex.soc.interconnect import wishbone
from litex.soc.interconnect.axi import AXILiteInterface, Wishbone2AXILite
from migen import ClockSignal, Instance, ResetSignal

#: Where the core's register map (0x0000-0x11FF) appears on the SoC bus: aligned to the
#: region's size, as LiteX's decoder needs.
SPARTAN_BASE = 0x4000_0000
SPARTAN_SIZE = 0x2000
CLK_FREQ = 100e6


def stream_pins(name, width):
    """Top-level pins of one AXI4-Stream port of the core."""
    pins = [Subsignal("tdata", Pins(width)), Subsignal("tvalid", Pins(1)),
            Subsignal("tready", Pins(1)), Subsignal("tlast", Pins(1))]
    return (name, 0, *pins)


class SpartanSoC(SoCMini):
    def __init__(self, platform, manifest):
        # No identifier ROM (it would need a memory-init file beside the Verilog); the SoC's
        # own control registers (scratch, bus errors) stay, on its CSR bus.
        SoCMini.__init__(self, platform, clk_freq=CLK_FREQ, ident="")
        self.crg = CRG(platform.request("clk"), rst=platform.request("rst"))

        # The bus master: whoever drives the wb_* pins.
        master = wishbone.Interface(data_width=32, adr_width=30)
        self.comb += master.connect_to_pads(platform.request("wb"), mode="slave")
        self.bus.add_master(name="external", master=master)

        # The core's registers: a Wishbone slave region, converted to AXI4-Lite. The converter
        # subtracts the base, so the core sees offsets from 0 (its 16 address bits).
        slave = wishbone.Interface(data_width=32, adr_width=30)
        self.bus.add_slave("spartan", slave,
                           SoCRegion(origin=SPARTAN_BASE, size=SPARTAN_SIZE, cached=False))
        axil = AXILiteInterface(data_width=32, address_width=32)
        self.submodules.wb2axil = Wishbone2AXILite(slave, axil, base_address=SPARTAN_BASE)

        addr_bits = manifest["axil"]["addr_width"]
        # Clock and reset under the names and polarity the core was generated with
        # (``--axi-names``: aclk, aresetn active low).
        clock = manifest["clock"]
        reset = ResetSignal("sys") if clock["reset_active"] == "high" else ~ResetSignal("sys")
        # The core's streams become the SoC's, under the same names.
        streams = {name: platform.request(name) for name in ("s_axis_a", "s_axis_b", "m_axis_c")}
        stream_ports = {}
        for name, pads in streams.items():
            into = name.startswith("s_")
            for signal, inward in (("tdata", into), ("tvalid", into), ("tlast", into),
                                   ("tready", not into)):
                stream_ports[("i_" if inward else "o_") + f"{name}_{signal}"] = \
                    getattr(pads, signal)
        self.specials += Instance(
            manifest["top"],
            **{"i_" + clock["port"]: ClockSignal("sys"), "i_" + clock["reset"]: reset},
            **stream_ports,
            i_s_axil_awaddr=axil.aw.addr[:addr_bits], i_s_axil_awvalid=axil.aw.valid,
            o_s_axil_awready=axil.aw.ready,
            i_s_axil_wdata=axil.w.data, i_s_axil_wstrb=axil.w.strb, i_s_axil_wvalid=axil.w.valid,
            o_s_axil_wready=axil.w.ready,
            o_s_axil_bresp=axil.b.resp, o_s_axil_bvalid=axil.b.valid, i_s_axil_bready=axil.b.ready,
            i_s_axil_araddr=axil.ar.addr[:addr_bits], i_s_axil_arvalid=axil.ar.valid,
            o_s_axil_arready=axil.ar.ready,
            o_s_axil_rdata=axil.r.data, o_s_axil_rresp=axil.r.resp, o_s_axil_rvalid=axil.r.valid,
            i_s_axil_rready=axil.r.ready,
        )


def platform_for(manifest):
    """A generic platform whose pins are the SoC's ports: clock, reset, the Wishbone master
    and the core's streams (named as on the core), at this configuration's port widths
    (``tdata_width``: padded to whole bytes)."""
    widths = {name: stream["tdata_width"] for name, stream in manifest["streams"].items()}
    io = [("clk", 0, Pins(1)), ("rst", 0, Pins(1)),
          *wishbone.Interface(data_width=32, adr_width=30).get_ios("wb"),
          *(stream_pins(name, width) for name, width in widths.items())]
    return GenericPlatform("generic", io)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("core", type=Path, help="the generated core's Verilog (its .json beside)")
    parser.add_argument("-o", "--output", type=Path, default=Path("build/litex"))
    args = parser.parse_args(argv)
    manifest_path = args.core.with_suffix(".json")
    manifest = None
    if args.core.suffix == ".v" and args.core.is_file() and manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
    if not manifest or manifest.get("block") != "core":
        print(f"core must be the Verilog of a generated core with its manifest beside it "
              f"(spartan generate core -o DIR), not {args.core}", file=sys.stderr)
        sys.exit(2)
    platform = platform_for(manifest)
    # With a real board's platform, LiteX's Builder then synthesises the core with the SoC.
    platform.add_source(str(args.core))
    soc = SpartanSoC(platform, manifest)
    args.output.mkdir(parents=True, exist_ok=True)
    platform.get_verilog(soc, name="spartan_soc").write(str(args.output / "spartan_soc.v"))
    print(args.output / "spartan_soc.v")


if __name__ == "__main__":
    main()
