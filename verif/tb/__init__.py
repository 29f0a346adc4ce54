"""cocotb testbenches (``tb_<block>.py``), benchmarks (``bench_<name>.py``) and the stream library
they share (``axis.py``): what ``spartan sim``, ``spartan bench`` and the pytest suite simulate.
Installed as ``spartan_rtl.tb``; imports nothing of the test suite."""
