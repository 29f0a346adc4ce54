"""The C drivers of the blocks with registers (spartan_core.c/.h, spartan_engine.c/.h), as
package data: ``spartan generate`` writes them beside the register header, renamed after the
generated top (:func:`spartan_rtl.hw.ip.c_driver`)."""
