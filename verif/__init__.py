"""Verification: cocotb testbenches (``tb_<block>.py``), pytest tests (``test_<block>.py``) and
the shared framework they stand on (:mod:`verif.runner`; :mod:`verif.axis`: bench, sources,
sinks and the scoreboard, ``check_sequence``)."""
