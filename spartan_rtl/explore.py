"""``spartan explore TRACE.npz --device LFE5U-45F``: which layer-engine configuration to build for
this network on this FPGA, and how much faster it trains (docs/explore.md).

1. Every combination of the parameter ranges (``--set NAME=V1,V2,...`` over
   explore_jobs.DEFAULT_RANGES) that the engine accepts is a candidate.
2. Each is timed by the engine's cycle model (spartan_rtl/estimate.py ``engine_trace``, which runs
   golden/engine_timing.py) on the trace, or ``engine_network`` on a golden/networks.py
   network: the whole training step, forward, dgrad and wgrad of every layer, each tile
   sparse or dense by the density the trace (or the network's table) has there.
3. In the order of that ranking, candidates are synthesised (Yosys, verif/flows/synth/) until
   ``--synth`` of them fit the budget; those are placed and routed on the device
   (nextpnr-ecp5, ``--seeds`` seeds, each within ``--place-minutes``). So is the dense-only
   twin (``sparse=false``) with the fewest cycles that fits, so that the baseline is the best
   dense-only build at its own, smaller, size (if it does not place, the next, up to
   :data:`TWIN_PLACEMENTS` twins); and so is the default build, set beside.
4. The answer (spartan_rtl/explore_report.py): training steps per second (Fmax / cycles per
   step) of each placed candidate, the Pareto fronts against LUT and DSP, the best that fits,
   and its speedup over the best dense-only build: the placed twin (cycles from its model,
   Fmax measured), or where no twin fits, the placed builds forced dense (MODE 1).

Every job runs through spartan_rtl/jobs.py and is kept in the store (spartan_rtl/store.py);
the synthesis jobs and their keys are spartan_rtl/synth_jobs.py's, which ``make synth`` uses
too, so the two share every netlist and placement of identical Verilog.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import __version__, jobs
from .area_model import AreaModel
from .explore_jobs import (
    BLOCK,
    FAMILY,
    SYNTH_TRIES_PER_PICK,
    WORK,
    Budget,
    Candidate,
    cycles_job,
    ecp5_device,
    twin,
)
from .store import Key, digest, source_digest
from .synth_jobs import (
    netlist_job,
    netlist_key,
    place_job,
    place_key,
    synth_flow,
    tool_versions,
    verilog_job,
    verilog_key,
    with_family_values,
)

__all__ = ["Request", "JobKinds", "Placed", "Answer", "Explorer", "explore"]

#: The cycle model's sources: a cached cycle count is as good as these files (golden/'s models
#: and this package's estimate.py, which applies them to a trace).
MODEL_SOURCES = ("engine_timing.py", "gemm.py")
#: A placement's default time limit, in minutes. Why one: on an LFE5U-25F the best dense
#: build (69 % of the LUTs, 86 % of the block RAMs) was still routing after 93 minutes,
#: while the candidates around it placed in 7 to 27.
PLACE_MINUTES = 45
#: Dense-only twins placed in turn, fewest cycles first, until one places: the best that fits
#: the budget may not route within ``--place-minutes`` (on the LFE5U-85F the best AlexNet twin
#: did not in 60 or 90 minutes), and the baseline is then the next one that does.
TWIN_PLACEMENTS = 3


@dataclass(frozen=True)
class Request:
    """A checked ``spartan explore`` request."""

    trace: object            # golden/traces.py Trace, or a golden/networks.py network's name
    trace_sha256: str        # of the trace's file; of the network's name and networks.py
    device: str              # a DEVICES name
    budget: Budget
    ranges: dict             # parameter -> values
    seeds: int = 1
    synth: int = 3
    threshold: int = 0xF0
    freq_mhz: float = 100.0
    retry_failed: bool = False
    place_minutes: int = PLACE_MINUTES


@dataclass(frozen=True)
class JobKinds:
    """The job functions (module-level, importable by the workers), the synthesis tools'
    versions and the area and clock model (both called here, on the client): tests put stubs
    in."""

    cycles: Callable = cycles_job
    verilog: Callable = verilog_job
    netlist: Callable = netlist_job
    place: Callable = place_job
    synth_tools: Callable = tool_versions
    area_model: Callable = AreaModel.load


@dataclass
class Placed:
    """A placed candidate and its figures (``fits`` False: ``reason`` says why)."""

    candidate: object
    cycles: dict
    netlist: dict
    family_values: dict
    fits: bool
    reason: str | None = None
    fmax_mhz: float | None = None
    fmax_min: float | None = None

    @property
    def steps_per_s(self):
        return self.fmax_mhz * 1e6 / self.cycles["adaptive_cycles"] if self.fits else None

    @property
    def dense_steps_per_s(self):
        return self.fmax_mhz * 1e6 / self.cycles["dense_cycles"] if self.fits else None

    @property
    def generate_command(self):
        sets = [*self.candidate.changed, *sorted(self.family_values.items())]
        return "spartan generate engine " + " ".join(f"--set {k}={v}" for k, v in sets)


@dataclass
class Answer:
    candidates: int
    invalid: int
    ranked: list             # [(candidate, cycles)], fewest adaptive cycles first
    placed: list             # [Placed]
    failures: list = field(default_factory=list)    # [(kind, label, reason)]
    #: The area and clock model's predictions beside what was measured:
    #: ``[(label, figure, predicted, measured)]``, and the candidates it pruned.
    model_checks: list = field(default_factory=list)
    pruned: int = 0
    area: object = None      # the AreaModel it used
    #: The engine's default build: its :class:`Placed` if placed (a member of ``placed``),
    #: else why not (its netlist over the budget, or no synthesis asked).
    default: object = None
    default_reason: str | None = None

    @property
    def fitting(self):
        return [p for p in self.placed if p.fits]

    @property
    def fitting_candidates(self):
        """The fitting builds the ranking is about: the dense-only twins left out."""
        return [p for p in self.fitting if not p.candidate.is_twin]

    @property
    def fitting_twins(self):
        """The fitting dense-only twins: the baselines."""
        return [p for p in self.fitting if p.candidate.is_twin]

    @property
    def best(self):
        return max(self.fitting_candidates, key=lambda p: p.steps_per_s, default=None)

    @property
    def dense_is_twin(self):
        """The dense-only baseline is a placed twin (else: the placed builds forced dense)."""
        return bool(self.fitting_twins)

    @property
    def dense_best(self):
        return max(self.fitting_twins or self.fitting, key=lambda p: p.dense_steps_per_s,
                   default=None)

    @property
    def speedup(self):
        best, dense = self.best, self.dense_best
        return best.steps_per_s / dense.dense_steps_per_s if best and dense else None

    @property
    def over_default(self):
        """The best build's steps per second over the default build's (both adaptive)."""
        best, default = self.best, self.default
        return best.steps_per_s / default.steps_per_s if best and default and default.fits \
            else None


class Explorer:
    """The stages of a sweep on one Dask client and one store: each returns the stored rows
    of its jobs, computing those the store lacks."""

    def __init__(self, client, store, request, kinds=JobKinds(), stream=None):
        self.client, self.store, self.request, self.kinds = client, store, request, kinds
        self.stream, self.failures = stream, []
        #: Why :meth:`pick` passed over a candidate: its DSP floor, the area model, its
        #: synthesis, its netlist.
        self.passed_over = {}
        self.area = kinds.area_model()
        #: ``[(label, figure, predicted, measured)]`` of every netlist and placement measured.
        self.model_checks = []
        self._synth_tools = None
        self._trace = None

    def _run(self, what, job_list):
        rows = jobs.run(self.client, job_list, self.store, what=what, stream=self.stream,
                        retry_failed=self.request.retry_failed)
        for job in job_list:
            if not rows[job.key].ok:
                self.failures.append((what, job.label, rows[job.key].reason))
        return {job.label: rows[job.key] for job in job_list}

    def _results(self, what, pairs):
        """``{candidate: result or None}`` of jobs ``[(candidate, Job)]``."""
        rows = self._run(what, [job for _, job in pairs])
        return {c: rows[job.label].result if rows[job.label].ok else None for c, job in pairs}

    def synth_tools(self):
        if self._synth_tools is None:
            self._synth_tools = self.kinds.synth_tools()
        return self._synth_tools

    def cycles(self, cands):
        r = self.request
        model = {"spartan-rtl": __version__, "model": source_digest("golden", MODEL_SOURCES),
                 "estimate": digest(Path(__file__).resolve().with_name("estimate.py").read_bytes())}
        keys = {c: Key.of("cycles", digest({"params": c.params, "trace": r.trace_sha256,
                                            "threshold": r.threshold}), model) for c in cands}
        stored = [self.store.get(k) for k in keys.values()]
        if self._trace is None and any(row is None or not row.ok for row in stored):
            # Sent to every worker once, not with every job; not at all if nothing is to run.
            self._trace = self.client.scatter(r.trace, broadcast=True)
        return self._results("cycle model", [(c, jobs.Job(
            keys[c], self.kinds.cycles, (self._trace, c.params, r.threshold), c.label,
            c.params)) for c in cands])

    def verilog(self, cands):
        """``{candidate: {"sha256", "family_values"} or None}``: the hash of the Verilog the
        ECP5 build synthesises, and the values that build adds to the candidate's."""
        built = {c: with_family_values(BLOCK, dict(c.changed), FAMILY) for c in cands}
        made = self._results("verilog", [(c, jobs.Job(
            verilog_key(BLOCK, built[c][1]), self.kinds.verilog,
            (BLOCK, dict(c.changed), FAMILY), c.label, c.params)) for c in cands])
        return {c: dict(made[c], family_values=built[c][0]) if made[c] is not None else None
                for c in cands}

    def netlists(self, cands):
        """``{candidate: (verilog row, netlist counts) or None}``."""
        made = self.verilog(cands)
        ok = [c for c in cands if made[c] is not None]
        counts = self._results("synthesis", [(c, jobs.Job(
            netlist_key(made[c]["sha256"], FAMILY, self.synth_tools()), self.kinds.netlist,
            (BLOCK, dict(c.changed), FAMILY, WORK), c.label, c.params)) for c in ok])
        self._check_model(cands, counts.get)
        return {c: (made[c], counts[c]) if c in ok and counts[c] is not None else None
                for c in cands}

    def pick(self, ranked, count):
        """The first ``count`` of ``ranked`` whose netlist fits the budget, synthesising in
        rounds; at most ``SYNTH_TRIES_PER_PICK * count`` netlists. ``{candidate: netlist}``;
        the reason for each candidate passed over goes to :attr:`passed_over`."""
        budget, picked, tried = self.request.budget, {}, 0
        queue = []
        for c in ranked:
            if c.dsp_floor > budget.dsp:
                self.passed_over[c] = f"needs {c.dsp_floor} DSP, the budget is {budget.dsp}"
            elif over := self.area.surely_over(c.params, budget):
                self.passed_over[c] = "the area model puts it over the budget in " + ", ".join(
                    f"{r.upper()} (about {want} > {have})" for r, want, have in over)
            else:
                queue.append(c)
        limit = SYNTH_TRIES_PER_PICK * count
        while len(picked) < count and queue and tried < limit:
            size = min(count - len(picked), limit - tried)
            batch, queue = queue[:size], queue[size:]
            tried += size
            for c, made in self.netlists(batch).items():
                excess = budget.excess(made[1]) if made is not None else None
                if made is None:
                    self.passed_over[c] = "its synthesis failed"
                elif excess:
                    self.passed_over[c] = "over the budget in " + ", ".join(
                        f"{r.upper()} ({want} > {have})" for r, want, have in excess)
                else:
                    picked[c] = made
        return picked

    def place(self, picked, cycles):
        """:class:`Placed` of every picked candidate, each seed placed (and stored) alone."""
        r, tools = self.request, self.synth_tools()
        device = ecp5_device(synth_flow(), r.device).name
        pairs = [((c, seed), jobs.Job(
            place_key(made[0]["sha256"], tools, device, seed, r.freq_mhz), self.kinds.place,
            (BLOCK, dict(c.changed), FAMILY, device, seed, r.freq_mhz, WORK, made[1]["key"],
             r.place_minutes * 60),
            f"{c.label} seed {seed}", c.params))
            for c, made in picked.items() for seed in range(1, r.seeds + 1)]
        seeds = self._results("place and route", pairs)
        placed = [_placed(c, cycles[c], made, [seeds[(c, s)] for s in range(1, r.seeds + 1)])
                  for c, made in picked.items()]
        fmax = {p.candidate: {"fmax_mhz": p.fmax_mhz} for p in placed if p.fits}
        self._check_model(list(fmax), fmax.get)
        return placed

    def _check_model(self, cands, measured):
        """Keep the model's prediction of every figure it fits beside the measured one
        (``measured(candidate)``: a dict of figures, or None)."""
        for c in cands:
            found = measured(c)
            if found is None:
                continue
            for figure, predicted in self.area.predict(c.params).items():
                check = (c.label, figure, predicted, found.get(figure))
                # A build asked for twice (the default among the ranked) is one measurement.
                if check[3] is not None and check not in self.model_checks:
                    self.model_checks.append(check)


def _placed(candidate, cycles, made, seeds):
    netlist, values = made[1], made[0]["family_values"]
    if any(s is None for s in seeds):
        return Placed(candidate, cycles, netlist, values, False, "place and route failed")
    misfit = next((s for s in seeds if not s["fits"]), None)
    if misfit is not None:
        return Placed(candidate, cycles, netlist, values, False, misfit["reason"])
    fmax = [s["fmax_mhz"] for s in seeds]
    if any(f is None for f in fmax):
        return Placed(candidate, cycles, netlist, values, False, "no Fmax reported")
    return Placed(candidate, cycles, netlist, values, True, None, statistics.fmean(fmax),
                  min(fmax))


def _next_twins(explorer, by_dense, placed, cycles):
    """While no placed twin fits: the next twin of ``by_dense`` that fits the budget, placed,
    up to :data:`TWIN_PLACEMENTS` twins in all. Returns the :class:`Placed` it adds."""
    tried = {p.candidate for p in placed if p.candidate.is_twin}
    added = []
    while not any(p.fits for p in placed + added if p.candidate.is_twin) \
            and 0 < len(tried) < TWIN_PLACEMENTS:
        rest = [c for c in by_dense if c not in tried and c not in explorer.passed_over]
        picked = explorer.pick(rest, 1)
        if not picked:
            break
        tried.update(picked)
        added += explorer.place(picked, cycles)
    return added


def default_candidate(cands):
    """The engine's default build: the candidate with its default parameters, or one made for
    it when the ranges leave it out (it is then timed and placed, not ranked)."""
    from .hw import blocks
    defaults = blocks.get(BLOCK).resolve()
    return next((c for c in cands if c.params == defaults), Candidate((), defaults))


def explore(explorer, cands, invalid):
    """The sweep: rank ``cands`` by the cycle model, synthesise and place the most promising
    that fit, the best dense-only twin and the default build, and the :class:`Answer`."""
    request = explorer.request
    default = default_candidate(cands)
    timed = cands if default in cands else [*cands, default]
    cycles = {c: r for c, r in explorer.cycles(timed).items() if r is not None}
    ranked = sorted((c for c in cycles if c in cands),
                    key=lambda c: (cycles[c]["adaptive_cycles"], cycles[c]["dense_cycles"],
                                   c.label))
    picked = explorer.pick(ranked, request.synth) if request.synth else {}
    if request.synth:
        # The baseline: the candidates' dense-only twins, fewest cycles first (a twin runs
        # every tile dense; at the defaults it takes 22 % fewer LUT4s, so a budget may fit a
        # larger one than any sparse candidate).
        twins = {c: r for c, r in explorer.cycles([twin(c) for c in ranked]).items()
                 if r is not None}
        cycles.update(twins)
        by_dense = sorted(twins, key=lambda c: (twins[c]["dense_cycles"], c.label))
        picked.update(explorer.pick(by_dense, 1))
        if default in cycles:
            picked.update(explorer.pick([default], 1))
    placed = explorer.place(picked, cycles)
    if request.synth:
        placed += _next_twins(explorer, by_dense, placed, cycles)
    placed_default = next((p for p in placed if p.candidate == default), None)
    reason = None
    if placed_default is None:
        reason = ("not synthesised (--synth 0)" if not request.synth
                  else "its cycle model failed" if default not in cycles
                  else explorer.passed_over[default])
    pruned = sum(why.startswith("the area model") for why in explorer.passed_over.values())
    return Answer(len(cands), invalid, [(c, cycles[c]) for c in ranked], placed,
                  explorer.failures, explorer.model_checks, pruned, explorer.area,
                  default=placed_default, default_reason=reason)


# ------------------------------------------------------------------ the command line

def add_parser(sub):
    from .explore_jobs import DEFAULT_RANGES, DEVICES
    p = sub.add_parser("explore", help="the layer-engine build that trains this trace fastest "
                       "on an ECP5 device: cycle model, synthesis, place and route on Dask")
    p.add_argument("trace", metavar="TRACE.npz|NETWORK",
                   help="activation trace (golden/traces.py), or a network of "
                   "golden/networks.py at its densities (spartan estimate's names)")
    p.add_argument("--device", required=True, choices=DEVICES, metavar="|".join(DEVICES))
    p.add_argument("--set", action="append", metavar="NAME=V1,V2,...",
                   help="values to sweep of an engine parameter (spartan list engine; "
                   "repeatable; default " + "; ".join(
                       f"{k}={','.join(map(str, v))}" for k, v in DEFAULT_RANGES.items()) + ")")
    for resource in ("lut", "dsp", "bram"):
        p.add_argument(f"--max-{resource}", type=int, metavar="N",
                       help=f"{resource.upper()} budget (default: the device's)")
    p.add_argument("--seeds", type=int, default=1, metavar="N",
                   help="placement seeds 1..N per placed candidate (default 1)")
    p.add_argument("--synth", type=int, default=3, metavar="N",
                   help="candidates to synthesise and place (default 3; 0: cycle model only)")
    p.add_argument("--place-minutes", type=int, default=PLACE_MINUTES, metavar="N",
                   help="time limit of one placement; a run past it is stored as failed "
                   f"(--retry-failed runs it again) (default {PLACE_MINUTES})")
    p.add_argument("--threshold", type=lambda t: int(t, 0), default=0xF0,
                   help="THRESHOLD register: a tile runs sparse iff density <= T/256 "
                   "(default 0xf0)")
    p.add_argument("--store", metavar="PATH", help="result store, SQLite (default "
                   "build/explore.sqlite)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="an existing Dask "
                   "scheduler (default: DASK_SCHEDULER_ADDRESS, else a LocalCluster here)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="LocalCluster worker processes (default: one a core)")
    p.add_argument("--retry-failed", action="store_true",
                   help="compute again the jobs the store holds as failed")
    p.add_argument("--plot", metavar="OUT.png", help="also draw the Pareto fronts as a PNG")
    p.add_argument("--json", metavar="OUT.json", help="also write the answer as JSON (kept in "
                   "docs/explore/, docs/results.md shows it)")
    p.set_defaults(func=cmd_explore)


def _usage(message):
    from .usage import UsageError
    return UsageError(message)


def parse_ranges(items):
    """explore_jobs.DEFAULT_RANGES with each ``--set NAME=V1,V2,...`` replacing (or adding)
    its parameter's values, each checked by the engine's parameter."""
    from .explore_jobs import BLOCK, DEFAULT_RANGES
    from .hw import blocks
    block, ranges = blocks.get(BLOCK), dict(DEFAULT_RANGES)
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise _usage(f"--set must be NAME=V1,V2,..., not {item!r}")
        try:
            param = block.param(name.strip())
            values = [param.parse(v.strip()) for v in text.split(",")]
        except (ValueError, TypeError) as e:
            raise _usage(f"--set {name.strip()}: {e}") from None
        ranges[name.strip()] = tuple(dict.fromkeys(values))
    return ranges


def _check_numbers(args):
    for option, value, least in (("--seeds", args.seeds, 1), ("--synth", args.synth, 0),
                                 ("--place-minutes", args.place_minutes, 1),
                                 ("--workers", args.workers, 1), ("--max-lut", args.max_lut, 0),
                                 ("--max-dsp", args.max_dsp, 0),
                                 ("--max-bram", args.max_bram, 0)):
        if value is not None and value < least:
            raise _usage(f"{option} must be an integer of at least {least}, not {value}")
    if not 0 <= args.threshold <= 255:
        raise _usage(f"--threshold must be an integer 0..255, not {args.threshold}")


def _budget(args):
    """The budget on ``--device``: the options, else the device's capacity."""
    try:
        capacity = ecp5_device(synth_flow(), args.device).capacity
    except FileNotFoundError as e:
        if args.synth:
            raise _usage(f"--synth {args.synth} needs verif/flows/synth/ ({e}); --synth 0 "
                         f"ranks by the cycle model alone") from None
        capacity = {"lut": 0, "ff": 0, "dsp": 0, "bram": 0}
    return Budget(lut=capacity["lut"] if args.max_lut is None else args.max_lut,
                  ff=capacity["ff"],
                  dsp=capacity["dsp"] if args.max_dsp is None else args.max_dsp,
                  bram=capacity["bram"] if args.max_bram is None else args.max_bram)


def check_request(args):
    """Every input checked, nothing written: a :class:`Request`, the store's path and the
    candidates; any mistake is one UsageError."""
    import hashlib

    from .explore_jobs import MAX_CANDIDATES, candidates
    from .golden import networks, traces
    from .store import checked_path
    from .usage import check_output_file, require_modules
    _check_numbers(args)
    ranges = parse_ranges(args.set)
    if args.plot is not None:
        check_output_file(args.plot, "--plot")
        require_modules("spartan explore --plot", "plots", ("matplotlib",))
    if args.json is not None:
        check_output_file(args.json, "--json")
    store_path = checked_path(args.store)
    if args.trace in networks.NETWORKS and not Path(args.trace).exists():
        trace = args.trace      # a file of that name wins, as in spartan estimate
        trace_sha256 = digest({"network": trace,
                               "source": source_digest("golden", ("networks.py",))})
    else:
        try:
            trace = traces.load(args.trace)
        except traces.TraceError as e:
            raise _usage(str(e)) from None
        with open(args.trace, "rb") as f:
            trace_sha256 = hashlib.sha256(f.read()).hexdigest()
    cands, invalid = candidates(ranges)
    if not cands or len(cands) > MAX_CANDIDATES:
        raise _usage(f"--set ranges must give 1 to {MAX_CANDIDATES} valid engine "
                     f"configurations, not {len(cands)} ({invalid} refused)")
    request = Request(trace, trace_sha256, args.device, _budget(args), ranges, args.seeds,
                      args.synth, args.threshold, retry_failed=args.retry_failed,
                      place_minutes=args.place_minutes)
    return request, store_path, (cands, invalid)


def cmd_explore(args, kinds=JobKinds()):
    import json
    import os
    import sys

    from .explore_report import answer_json, format_answer, plot
    from .store import Store
    request, store_path, (cands, invalid) = check_request(args)
    try:
        with jobs.cluster(args.scheduler, n_workers=args.workers) as client, \
                Store(store_path) as store:
            answer = explore(Explorer(client, store, request, kinds), cands, invalid)
    except jobs.SchedulerUnreachable as e:
        raise _usage(str(e)) from None
    print(format_answer(answer, request, args.trace))
    if args.json is not None:
        staged = f"{args.json}.partial"
        with open(staged, "w") as out:
            json.dump(answer_json(answer, request, Path(args.trace).name,
                                  request.trace_sha256), out, indent=1)
            out.write("\n")
        os.replace(staged, args.json)
        print(f"answer: {args.json}", file=sys.stderr)
    if args.plot is not None:
        plot(answer, args.plot, request.device)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0
