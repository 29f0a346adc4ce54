"""The executor of ``spartan explore``, ``make synth`` and ``make mutants``: jobs on
Dask.distributed, results into the store (docs/explore.md#faults).

``cluster()`` opens a client: on an existing scheduler (``--scheduler tcp://HOST:PORT`` or
``DASK_SCHEDULER_ADDRESS``), else on a ``LocalCluster`` of this machine (worker processes, one
a core, one thread each: every job is a single-threaded Python or tool run). ``run()`` submits
the jobs whose key the store lacks and stores each result as it arrives, in its own
transaction; only this process writes the store, so the workers need no access to it.

Faults
    * A worker that dies mid-job: the scheduler hands its jobs to another worker (up to
      ``distributed.scheduler.allowed-failures`` deaths, then ``KilledWorker``, recorded as
      the job's failure). The client sees one result per job, and the store keeps one row per
      key whatever arrives.
    * A job that raises (a tool error, a tool's time-out): :func:`attempt` catches it on the
      worker and returns the reason, which is stored as a failure; the sweep goes on.
    * Ctrl-C: the jobs still pending are cancelled; every row already stored is whole. A
      LocalCluster's workers ignore SIGINT (the terminal sends it to them too), so the client
      alone handles it and the workers leave quietly when it closes the cluster.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable

from .progress import Progress
from .store import Key

__all__ = ["Job", "SchedulerUnreachable", "CONNECT_TIMEOUT_S", "cluster", "attempt", "run"]

#: Seconds a scheduler has to answer before ``--scheduler`` is reported unreachable.
CONNECT_TIMEOUT_S = 5
#: Seconds between redraws of the progress line while jobs run.
REDRAW_S = 1.0


class SchedulerUnreachable(Exception):
    """The scheduler address given does not answer (or is no address)."""


@dataclass(frozen=True)
class Job:
    """One job: ``function(*args)`` on a worker, its JSON-able result stored under ``key``.
    ``function`` must be importable by the workers (a module-level function)."""

    key: Key
    function: Callable
    args: tuple
    label: str               # how progress and failures name it
    params: object = None    # what it was asked, stored beside the result


def scheduler_address(address=None):
    """The scheduler the jobs go to: ``address``, else ``DASK_SCHEDULER_ADDRESS``, else
    ``None`` (a LocalCluster of this machine)."""
    return address or os.environ.get("DASK_SCHEDULER_ADDRESS") or None


@contextlib.contextmanager
def cluster(address=None, *, n_workers=None, timeout=CONNECT_TIMEOUT_S, dashboard=True,
            stream=None):
    """A Dask client: on ``address`` (or ``DASK_SCHEDULER_ADDRESS``) if given, else on a new
    LocalCluster of ``n_workers`` processes (default: one a core). The dashboard link is
    printed on ``stream`` (default stderr)."""
    from distributed import Client, LocalCluster
    stream = sys.stderr if stream is None else stream
    address = scheduler_address(address)
    if address:
        client = _connect(Client, address, timeout)
        _show_dashboard(client, dashboard, stream)
    else:
        client = LazyLocalClient(lambda: _local_client(Client, LocalCluster, n_workers,
                                                       dashboard, stream))
    try:
        yield client
    finally:
        client.close()


def _show_dashboard(client, dashboard, stream):
    if dashboard:
        print(f"dask dashboard: {client.dashboard_link}", file=stream, flush=True)


def _local_client(client_class, cluster_class, n_workers, dashboard, stream):
    # The workers are started with SIGINT ignored, a disposition their interpreters keep: a
    # terminal's Ctrl-C reaches the whole process group, and only this process acts on it (it
    # cancels the jobs and closes the cluster). Workers that took it would each print a
    # traceback of their event loop. Their logs are kept to CRITICAL: a job's own failure is
    # caught by ``attempt`` and stored with its reason, a worker's death reaches its future,
    # and what a closing cluster logs at ERROR (a heartbeat to a scheduler already gone) is
    # noise. Dask's warning that 8787 is taken is dropped: the link printed below has the
    # port it took instead.
    with _sigint_ignored(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port 8787 is already in use")
        local = cluster_class(n_workers=n_workers or os.cpu_count() or 1, threads_per_worker=1,
                              processes=True, dashboard_address=":8787" if dashboard else ":0",
                              silence_logs=logging.CRITICAL)
    client = client_class(local)
    _show_dashboard(client, dashboard, stream)
    return client, local


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while the block runs (from the main thread; elsewhere, as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class LazyLocalClient:
    """A client of a LocalCluster started on first use: a sweep whose every result is in the
    store starts no worker."""

    def __init__(self, start):
        self._start, self._client, self._cluster = start, None, None

    def __getattr__(self, name):
        if self._client is None:
            self._client, self._cluster = self._start()
        return getattr(self._client, name)

    def close(self):
        if self._client is not None:
            self._client.close()
            self._cluster.close()


def _connect(client_class, address, timeout):
    try:
        return client_class(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise SchedulerUnreachable(f"--scheduler {address!r} does not answer within {timeout} s"
                                   f" ({type(e).__name__})") from None


def attempt(function, args):
    """Run one job on a worker: ``{"result", "seconds"}``, or ``{"reason", "seconds"}`` if it
    raised, so that a failing job is a stored failure, not a lost sweep."""
    started = time.monotonic()
    try:
        return {"result": function(*args), "seconds": time.monotonic() - started}
    except Exception as e:    # any failure of the job is its recorded reason
        reason = f"{type(e).__name__}: {e}".splitlines()[0]
        return {"reason": reason, "seconds": time.monotonic() - started}


def run(client, jobs, store, *, what="jobs", retry_failed=False, stream=None):
    """Every job's stored row, ``{key: Row}``: the stored ones as they are, the others computed
    on ``client`` and stored as each arrives. ``retry_failed``: failures stored by an earlier
    run are computed again."""
    rows, todo = {}, {}
    for job in jobs:
        if retry_failed:
            store.forget_failed(job.key)
        row = store.get(job.key)
        if row is not None:
            rows[job.key] = row
        else:
            todo.setdefault(job.key, job)    # a key asked twice is computed once
    if not todo:
        return rows
    futures = {client.submit(attempt, job.function, job.args, pure=False): job
               for job in todo.values()}
    with JobProgress(len(futures), what, stream) as bar:
        try:
            _collect(client, futures, store, rows, bar)
        except BaseException:
            client.cancel(list(futures))
            raise
    return rows


def _collect(client, futures, store, rows, bar):
    from distributed import wait
    pending = set(futures)
    while pending:
        try:
            done, pending = wait(pending, timeout=REDRAW_S, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        for future in done:
            job = futures[future]
            rows[job.key] = _store(store, job, _outcome(future))
            bar.finished(job.label, rows[job.key].ok)
        bar.running(client, {f.key: futures[f].label for f in pending})


def _outcome(future):
    try:
        return future.result()
    except Exception as e:    # KilledWorker, a lost scheduler: the job's failure, not ours
        return {"reason": f"{type(e).__name__}: {e}".splitlines()[0], "seconds": None}


def _store(store, job, outcome):
    seconds = outcome.get("seconds")
    if "reason" in outcome:
        store.put(job.key, reason=outcome["reason"], params=job.params, seconds=seconds)
    else:
        store.put(job.key, result=outcome["result"], params=job.params, seconds=seconds)
    return store.get(job.key)


class JobProgress(Progress):
    """``what: done/total, N failed; running: label (s), ...`` on a terminal: the whole
    sweep's count and each running job with its time so far."""

    def __init__(self, total, what, stream=None):
        super().__init__(total, what, stream)
        self.failed, self._started = 0, {}

    def finished(self, label, ok):
        self.done += 1
        self.failed += not ok

    def running(self, client, labels):
        if not self.shown:
            return
        now = time.monotonic()
        busy = {key for keys in client.processing().values() for key in keys}
        jobs = []
        for key, label in labels.items():
            if key in busy:
                since = self._started.setdefault(key, now)
                jobs.append(f"{label} ({now - since:.0f} s)")
        line = f"{self.what}: {self.done}/{self.total}, {self.failed} failed"
        line += "; running: " + ", ".join(jobs) if jobs else ""
        # One terminal line: a wrapped one would not be redrawn in place.
        self._draw(line[:shutil.get_terminal_size().columns - 1])
