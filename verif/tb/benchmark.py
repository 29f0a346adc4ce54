"""What every benchmark (``bench_<name>.py``) shares: the seed its simulations run with and the
way its report names what it measured. Apart from spartan_rtl/bench.py, the driver that finds
and runs the benchmarks: the benchmarks read these without importing their driver back.
"""

from __future__ import annotations

#: Every benchmark's simulation seed (cocotb's ``RANDOM_SEED``, and the NumPy generators drawn
#: from it): the figures repeat from run to run, and docs/results.md with them.
SEED = 2021


def block_config(block, params, keys=None):
    """``gemm (k=64, n=64, ...)``: the block a report's rows come from and the parameters it
    was built with (``keys``: the ones that set its figures; default all), so a table read on
    its own (docs/results.md, a CI log) still says what it measured."""
    shown = params if keys is None else {key: params[key] for key in keys}
    return f"{block} ({', '.join(f'{key}={value}' for key, value in shown.items())})"
