"""The command line of the flows that submit their jobs through spartan_rtl/jobs.py (``make
mutants``; ``make synth`` has the same options): ``--jobs``, ``--scheduler``, ``--store``,
``--retry-failed``, and their mistakes, each one line on stderr and exit status 2 with nothing
written (docs/explore.md#faults).

A flow adds the options with :func:`add_executor_options` and opens the two things they name
with :func:`executor`: the scheduler first, so that one that does not answer has written
nothing, then the store.
"""

from __future__ import annotations

import argparse
import contextlib

from spartan_rtl import jobs
from spartan_rtl.store import DEFAULT_PATH, Store

__all__ = ["Parser", "positive", "add_executor_options", "store_path", "executor"]


class Parser(argparse.ArgumentParser):
    """An argument parser whose every complaint is one line: ``PROG: error: ...`` on stderr,
    exit status 2 (argparse's own would print the usage before it)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive(option):
    """The argparse type of ``option``: a whole number of at least 1."""
    def whole_number(text):
        if not text.strip().isdecimal() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{option} must be a positive integer, not "
                                             f"{text!r}")
        return int(text)
    return whole_number


def add_executor_options(parser, root, workers, what):
    """``--jobs`` (``workers`` by default; ``what`` the jobs are, for the help), ``--scheduler``,
    ``--store`` (default ``root``/:data:`~spartan_rtl.store.DEFAULT_PATH`) and
    ``--retry-failed``."""
    parser.add_argument("--jobs", type=positive("--jobs"), default=workers,
                        help=f"LocalCluster worker processes: {what} at a time (default "
                             f"{workers}; not with --scheduler)")
    parser.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                        help="an existing Dask scheduler (default: DASK_SCHEDULER_ADDRESS, "
                             "else a LocalCluster here); its workers need this checkout at "
                             f"the same path ({root})")
    parser.add_argument("--store", metavar="PATH", default=root / DEFAULT_PATH,
                        help="result store, SQLite, shared with spartan explore, make synth "
                             f"and make mutants (default {DEFAULT_PATH})")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run again the jobs the store holds as failed")


def store_path(parser, args):
    """``--store``, checked (a new file or an SQLite file: nothing else is overwritten); a
    mistake is the parser's one-line error."""
    from spartan_rtl.store import checked_path
    from spartan_rtl.usage import UsageError
    try:
        return checked_path(args.store)
    except UsageError as e:
        parser.error(str(e))


@contextlib.contextmanager
def executor(parser, args, path):
    """``(client, store)``: a Dask client on ``--scheduler`` (else a LocalCluster of ``--jobs``
    workers, started on first use) and the store at ``path``. A scheduler that does not answer
    is the parser's one-line error, before the store is created."""
    with contextlib.ExitStack() as stack:
        try:
            client = stack.enter_context(jobs.cluster(args.scheduler, n_workers=args.jobs))
        except jobs.SchedulerUnreachable as e:
            parser.error(str(e))
        yield client, stack.enter_context(Store(path))
