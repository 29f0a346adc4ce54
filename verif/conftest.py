"""Marks every cocotb simulation test (those parametrised by ``sim``) ``cocotb``, so
``make test-fast`` (``-m "not cocotb"``) runs only the amaranth.sim, golden-model, formal-flow
and CLI tests."""


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "sim" in callspec.params:
            item.add_marker(pytest.mark.cocotb)
