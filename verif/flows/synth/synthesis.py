"""A ``make synth`` run: the builds of every block, size and family, each stage's jobs
submitted through spartan_rtl/jobs.py and kept in the store (:class:`Synthesis`), the report
merged after each stage (:func:`run`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from spartan_rtl import jobs, synth_jobs
from spartan_rtl.store import DEFAULT_PATH, Store
from verif.flows import ROOT

from .families import ASIC, FAMILIES
from .place import SEEDS, TARGET_MHZ, place_groups
from .report import JSON_PATH, MARKDOWN_PATH, _failure_line, _line, merge
from .sizing import _tag, has_twin, pair_key, sizes
from .tools import _lock

#: Every job's result: the store ``spartan explore`` keeps too (docs/explore.md#the-store).
STORE_PATH = ROOT / DEFAULT_PATH
JOBS = 2                        # LocalCluster workers


@dataclass
class Build:
    """One block at one size for one family (an FPGA family, or the ASIC proxy): what the
    report has an entry of, and the Verilog it synthesises (its SHA-256, once known)."""

    block: object           # spartan_rtl.hw.block.Block
    changed: dict           # the size's overrides
    family: str             # a FAMILIES name, or ASIC
    size_index: int         # the size's place among the block's sizes (the report's order)
    values: dict = None     # what the family adds (FAMILIES' ``values``)
    params: dict = None     # every parameter the generator is given
    verilog_sha256: str = None

    @property
    def label(self):
        return f"{self.block.name} {_tag(self.changed)} {self.family}"

    def asked(self):
        """The report entry's first fields: what was asked (the tools' figures follow)."""
        entry = {"block": self.block.name, "top": self.block.top,
                 "params": self.block.resolve(self.changed), "changed": self.changed}
        if self.family != ASIC:
            entry["family_values"] = self.values
        return dict(entry, size=_tag(self.changed), family=self.family)

    def failure(self, job, reason):
        """The report's record of a job of this build that failed: which, and why."""
        return {"block": self.block.name, "size": _tag(self.changed), "family": self.family,
                "params": self.block.resolve(self.changed), "size_index": self.size_index,
                "job": job, "reason": reason}


class Synthesis:
    """The jobs of one ``make synth`` run, submitted through spartan_rtl/jobs.py on ``client``,
    their results kept in ``store`` (docs/explore.md#the-store): each stage returns what the
    store has, computing only what it lacks."""

    def __init__(self, client, store, seeds=SEEDS, freq=TARGET_MHZ, retry_failed=False):
        self.client, self.store, self.seeds, self.freq = client, store, seeds, freq
        self.retry_failed, self.tools = retry_failed, synth_jobs.tool_versions()
        self.failures = []      # [failure record (Build.failure)]

    def _rows(self, what, pairs):
        """``[(build, job)]`` run: ``{id(build): result}`` of those that succeeded; each
        failure recorded with its reason."""
        rows = jobs.run(self.client, [job for _, job in pairs], self.store, what=what,
                        retry_failed=self.retry_failed)
        results = {}
        for build, job in pairs:
            row = rows[job.key]
            if row.ok:
                results[id(build)] = row.result
            else:
                self.failures.append(build.failure(what, row.reason))
        return results

    def verilog(self, builds):
        """The builds whose Verilog's SHA-256 is known (``build.verilog_sha256`` set)."""
        pairs = []
        for b in builds:
            family = b.family if b.family in FAMILIES else None
            b.values, b.params = synth_jobs.with_family_values(b.block.name, b.changed, family)
            pairs.append((b, jobs.Job(synth_jobs.verilog_key(b.block.name, b.params),
                                      synth_jobs.verilog_job, (b.block.name, b.changed, family),
                                      b.label, b.params)))
        made = self._rows("verilog", pairs)
        for b in builds:
            if id(b) in made:
                b.verilog_sha256 = made[id(b)]["sha256"]
        return [b for b in builds if b.verilog_sha256 is not None]

    def synthesise(self, builds):
        """``{id(build): entry}``: Yosys' counts of each FPGA build (the placement's fields to
        come), the ASIC proxy's figures of each ASIC build."""
        pairs = []
        for b in builds:
            if b.family == ASIC:
                job = jobs.Job(synth_jobs.asic_key(b.verilog_sha256, self.tools),
                               synth_jobs.asic_job, (b.block.name, b.changed), b.label, b.params)
            else:
                job = jobs.Job(synth_jobs.netlist_key(b.verilog_sha256, b.family, self.tools),
                               synth_jobs.netlist_job, (b.block.name, b.changed, b.family),
                               b.label, b.params)
            pairs.append((b, job))
        made = self._rows("synthesis", pairs)
        return {id(b): {**b.asked(), **made[id(b)]} for b in builds if id(b) in made}

    def place(self, builds, netlists):
        """The report entries of the FPGA ``builds`` (``netlists``: :meth:`synthesise`'s), a
        size and its twins placed on one device (:func:`place_groups`)."""
        groups, by_entry = {}, {}
        for b in builds:
            if id(b) in netlists:
                pair = (b.block.name, b.family, pair_key(b.changed))
                groups.setdefault(pair, (b.family, []))[1].append(netlists[id(b)])
                by_entry[(b.block.name, _tag(b.changed), b.family)] = b

        def place_round(asks):
            pairs = []
            for entry, device, seed in asks:
                b = by_entry[(entry["block"], entry["size"], entry["family"])]
                key = synth_jobs.place_key(b.verilog_sha256, self.tools, device.name, seed,
                                           self.freq)
                args = (b.block.name, b.changed, b.family, device.name, seed, self.freq, None,
                        entry["key"])
                pairs.append((b, jobs.Job(key, synth_jobs.place_job, args,
                                          f"{b.label} {device.name} seed {seed}", b.params)))
            rows = jobs.run(self.client, [job for _, job in pairs], self.store,
                            what="place and route", retry_failed=self.retry_failed)
            return [rows[job.key].result if rows[job.key].ok else rows[job.key].reason
                    for _, job in pairs]

        entries, failed = place_groups(list(groups.values()), place_round, self.seeds,
                                       self.freq)
        for entry, job, reason in failed:
            b = by_entry[(entry["block"], entry["size"], entry["family"])]
            self.failures.append(b.failure(job, reason))
        return entries


def run(names=None, families=("ice40", "ecp5", ASIC), freq=TARGET_MHZ, defaults_only=False,
        seeds=SEEDS, workers=JOBS, explicit=None, json_path=JSON_PATH,
        markdown_path=MARKDOWN_PATH, echo=print, scheduler=None, store_path=None,
        retry_failed=False, client=None):
    """Synthesise ``names`` (default: every registered block) at their sizes (or ``explicit``,
    one size): every job through spartan_rtl/jobs.py on ``client`` (default: the scheduler
    ``scheduler``, else a LocalCluster of ``workers`` processes), its result kept in the store
    at ``store_path`` (default :data:`STORE_PATH`); the report is built from the stored rows and
    merged into ``json_path`` after each stage. Returns the merged document and the failures
    (records of :meth:`Build.failure`)."""
    from spartan_rtl.hw import blocks
    selected = [blocks.get(n) for n in (names or blocks.BLOCKS)]
    builds, keep = [], {}
    for block in selected:
        chosen = sizes(block, explicit)
        if defaults_only:
            chosen = [s for s in chosen if pair_key(s) == ()]
        keep.update({(block.name, _tag(s)): block.resolve(s) for s in chosen})
        builds += [Build(block, s, family, i) for family in families for i, s in enumerate(chosen)
                   if family != ASIC or has_twin(block)]
    with contextlib.ExitStack() as stack:
        # The scheduler first: one that does not answer leaves nothing written.
        if client is None:
            client = stack.enter_context(jobs.cluster(scheduler, n_workers=workers))
        # Every block's lock, in one order: two runs of a block never share its work folders.
        for name in sorted({b.name for b in selected}):
            stack.enter_context(_lock(name))
        store = stack.enter_context(Store(store_path or STORE_PATH))
        flow = Synthesis(client, store, seeds, freq, retry_failed)
        known = flow.verilog(builds)
        made = flow.synthesise(known)

        def report(entries, failures):
            # Merged after each stage: an interrupted run keeps what it finished (and the
            # store, every job that finished).
            for entry in entries:
                b = next(b for b in builds if (b.block.name, _tag(b.changed), b.family)
                         == (entry["block"], entry["size"], entry["family"]))
                entry["size_index"] = b.size_index
                echo(_line(entry))
            for f in failures:
                echo(_failure_line(f))
            return merge(entries, json_path, markdown_path, freq, keep, failures)

        doc = report([made[id(b)] for b in known if b.family == ASIC and id(b) in made],
                     list(flow.failures))
        reported = len(flow.failures)
        placed = flow.place([b for b in known if b.family != ASIC], made)
        doc = report(placed, flow.failures[reported:])
    return doc, flow.failures
