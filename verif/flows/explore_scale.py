"""How a synthesis sweep scales with the number of Dask workers (docs/explore.md#measured):
the same small sweep of engine netlists (Yosys, ECP5) on a LocalCluster of each worker count.

    python -m verif.flows.explore_scale [--workers 1 2 4] [--sizes N]

Each worker count gets a new store and a new work folder (build/explore-scale/wN), so nothing
is taken from an earlier run: every job is synthesised again. Prints, per worker count, the
sweep's wall time (cluster start included), the sum of the jobs' own seconds and the speedup
over one worker. Run it on an otherwise idle machine: the figures are wall times.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from spartan_rtl import jobs
from spartan_rtl.store import Store
from spartan_rtl.synth_jobs import (
    netlist_job,
    netlist_key,
    tool_versions,
    verilog_job,
    with_family_values,
)

from .job_options import Parser, positive

ROOT = Path(__file__).resolve().parents[2]
#: Small engines (Yosys about a minute each unloaded), different enough to be separate jobs.
SIZES = [
    {"lanes": 4, "k": 32, "n": 16, "n_par": 8, "acc_rows": 64},
    {"lanes": 4, "k": 32, "n": 16, "n_par": 16, "acc_rows": 64},
    {"lanes": 4, "k": 64, "n": 16, "n_par": 8, "acc_rows": 64},
    {"lanes": 4, "k": 32, "n": 32, "n_par": 8, "acc_rows": 64},
]
BLOCK, FAMILY = "engine", "ecp5"


def sweep_jobs(sizes, tools, build):
    """One netlist job per size, keyed as ``spartan explore`` keys it."""
    out = []
    for changed in sizes:
        _, params = with_family_values(BLOCK, changed, FAMILY)
        sha = verilog_job(BLOCK, changed, FAMILY)["sha256"]
        label = " ".join(f"{k}={v}" for k, v in changed.items())
        out.append(jobs.Job(netlist_key(sha, FAMILY, tools), netlist_job,
                            (BLOCK, changed, FAMILY, build), label, params))
    return out


def measure(workers, sizes, tools):
    """``(wall seconds, sum of job seconds, failures)`` of the sweep on ``workers`` workers."""
    build = f"build/explore-scale/w{workers}"
    shutil.rmtree(ROOT / build, ignore_errors=True)
    job_list = sweep_jobs(sizes, tools, build)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        with jobs.cluster(n_workers=workers, dashboard=False) as client, \
                Store(Path(tmp) / "scale.sqlite") as store:
            rows = jobs.run(client, job_list, store, what=f"netlists, {workers} workers")
        wall = time.monotonic() - started
    failed = [j.label for j in job_list if not rows[j.key].ok]
    return wall, sum(rows[j.key].seconds or 0 for j in job_list), failed


def main(argv=None):
    parser = Parser(prog="python -m verif.flows.explore_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", nargs="+", type=positive("--workers"), default=[1, 2, 4])
    parser.add_argument("--sizes", type=positive("--sizes"), default=len(SIZES),
                        help=f"how many of the {len(SIZES)} small engines (default all)")
    args = parser.parse_args(argv)
    if args.sizes > len(SIZES):
        parser.error(f"--sizes must be at most {len(SIZES)}, not {args.sizes}")
    sizes, tools = SIZES[:args.sizes], tool_versions()
    print(f"{len(sizes)} engine netlists (Yosys, {FAMILY}) per worker count")
    print("| workers | wall (s) | jobs' own seconds | speedup over the first | failed |")
    print("|---:|---:|---:|---:|---|")
    first = None
    for w in args.workers:
        wall, own, failed = measure(w, sizes, tools)
        first = first or wall
        print(f"| {w} | {wall:.1f} | {own:.1f} | {first / wall:.2f}x | "
              f"{', '.join(failed) or 'none'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
