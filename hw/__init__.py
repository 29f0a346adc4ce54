"""Spartan RTL generator: Amaranth descriptions of the Spartan hardware blocks.

Each block lives in its own module (``hw/monitor.py``, ...) and registers a
:class:`hw.block.Block` description in :mod:`hw.blocks`; ``spartan generate``
turns a description and a parameter set into ``<top>.v`` and ``<top>.json``.
"""

__version__ = "0.1.0"
