"""Adapts the product to pytest: marks every cocotb simulation test (those parametrised by
``sim``) ``cocotb``, so ``make test-fast`` (``-m "not cocotb"``) runs only the amaranth.sim,
golden-model, formal-flow and CLI tests; and turns the simulation runner's
:class:`~spartan_rtl.runner.SimulatorMissing` into a skip (a failure when
``SPARTAN_REQUIRE_ICARUS`` is set, as in CI). The tests of the flows on the executor
(test_synth_jobs.py, test_mutants_jobs.py) share its Dask fixtures: :func:`dask_client`,
:func:`submitted_jobs`, :func:`opened_clusters`."""

import contextlib

import pytest

from spartan_rtl import jobs, runner, toolchain


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


@pytest.fixture(scope="module")
def dask_client():
    """A Dask client of 2 worker threads in this process: the workers call the functions this
    process has, so that a test's stubs are the ones its jobs run."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.fixture
def submitted_jobs(monkeypatch):
    """Every jobs.run call of a flow, as it is made: ``(what, [job function names, sorted])``."""
    calls = []
    real = jobs.run

    def spy(client, job_list, store, **kwargs):
        calls.append((kwargs.get("what"), sorted(j.function.__name__ for j in job_list)))
        return real(client, job_list, store, **kwargs)

    monkeypatch.setattr(jobs, "run", spy)
    return calls


@pytest.fixture
def opened_clusters(monkeypatch, dask_client):
    """jobs.cluster replaced by :func:`dask_client`: the ``(address, workers)`` of each call,
    for the tests of a command line's ``--scheduler`` and ``--jobs``."""
    opened = []

    @contextlib.contextmanager
    def cluster(address=None, *, n_workers=None, **kwargs):
        opened.append((address, n_workers))
        yield dask_client

    monkeypatch.setattr(jobs, "cluster", cluster)
    return opened
