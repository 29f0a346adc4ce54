"""Adapts the product to pytest: marks every cocotb simulation test (those parametrised by
``sim``) ``cocotb``, so ``make test-fast`` (``-m "not cocotb"``) runs only the amaranth.sim,
golden-model, formal-flow and CLI tests; and turns the simulation runner's
:class:`~spartan_rtl.runner.SimulatorMissing` into a skip (a failure when
``SPARTAN_REQUIRE_ICARUS`` is set, as in CI)."""

import pytest

from spartan_rtl import runner, toolchain


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "sim" in callspec.params:
            item.add_marker(pytest.mark.cocotb)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except runner.SimulatorMissing as e:
        if toolchain.icarus_required():
            pytest.fail(f"{e} (SPARTAN_REQUIRE_ICARUS is set)", pytrace=False)
        pytest.skip(str(e))
