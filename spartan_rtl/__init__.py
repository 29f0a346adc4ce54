"""Spartan RTL: a generator of the Spartan sparse DNN-training hardware, and its user tools.

One installed namespace. The folders of the source tree map into it (pyproject.toml):

- ``spartan_rtl.hw``: ``hw/``, the Amaranth blocks and the emitters of Verilog and IP files;
- ``spartan_rtl.golden``: ``golden/``, the NumPy reference and cycle models;
- ``spartan_rtl.tb``: ``verif/tb/``, the cocotb testbenches, benchmarks and their stream library,
  which ``spartan sim`` and ``spartan bench`` run;
- this folder: the ``spartan`` command and the user tools it calls (simulation runner,
  waveform reader and renderer, benchmark driver).

The pytest tests (``verif/tests/``) and developer flows (``verif/flows/``) are not installed.
"""

__version__ = "0.1.0"
