"""Spartan RTL generator: Amaranth descriptions of the Spartan hardware blocks.

Each block lives in its own module (``hw/monitor.py``, ...) and registers a
:class:`spartan_rtl.hw.block.Block` description in :mod:`spartan_rtl.hw.blocks`;
``spartan generate`` turns a description and a parameter set into ``<top>.v`` and ``<top>.json``.
"""

