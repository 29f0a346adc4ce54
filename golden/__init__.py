"""Bit-exact NumPy reference models of the Spartan blocks, written from docs/interfaces.md.

Elements are carried as raw bit patterns (``numpy.uint64``), exactly what travels in a lane;
:mod:`spartan_rtl.golden.formats` converts to and from numbers and decides which patterns are zero.
"""
