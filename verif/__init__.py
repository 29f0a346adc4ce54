"""Verification of the Spartan blocks, in three parts, each for one reason:

- ``verif/tb/``: the cocotb testbenches, benchmarks and their stream library. Installed as
  ``spartan_rtl.tb`` because ``spartan sim`` and ``spartan bench`` run them.
- ``verif/tests/``: the pytest regression (``make test``); not installed.
- ``verif/flows/``: developer flows that write the project's records (synthesis, formal,
  coverage, mutants, lint, traces, docs/results.md); not installed.
"""
