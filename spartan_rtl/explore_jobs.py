"""The candidates of ``spartan explore`` and its cycle-model job (docs/explore.md);
spartan_rtl/explore.py is the sweep that drives them, spartan_rtl/synth_jobs.py has the
synthesis jobs (shared with ``make synth``).

The job is a module-level function (picklable arguments, JSON-able result): any worker that
can import this package runs it; the client keeps its results in the store.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

__all__ = ["DEFAULT_RANGES", "DEVICES", "Candidate", "Budget", "candidates", "twin",
           "cycles_job", "ecp5_device"]

#: The ranges swept unless ``--set`` gives others: bus lanes, the resident chunk (k x n),
#: the multipliers along N and the on-chip output rows.
DEFAULT_RANGES = {"lanes": (4, 8, 16), "k": (32, 64, 128), "n": (16, 32, 64),
                  "n_par": (8, 16, 32, 64), "acc_rows": (64, 256, 1024)}
#: ``--device`` names: the ECP5 devices of verif/flows/synth/ (speed grade 6).
DEVICES = ("LFE5U-25F", "LFE5U-45F", "LFE5U-85F")
#: A sweep larger than this is a mistake in ``--set``, not a plan.
MAX_CANDIDATES = 5000
#: Yosys runs spent looking for candidates that fit, per candidate asked for.
SYNTH_TRIES_PER_PICK = 4
BLOCK = "engine"
FAMILY = "ecp5"
#: The synthesis jobs' work folder, in the checkout: never ``make synth``'s build/synth, which
#: locks a whole block while it runs (the two share results through the store instead).
WORK = "build/explore-synth"


@dataclass(frozen=True)
class Candidate:
    changed: tuple      # (name, value) pairs set on the engine's defaults
    params: dict = field(compare=False, hash=False)     # every parameter, resolved

    @property
    def label(self):
        return " ".join(f"{k}={v}" for k, v in self.changed) or "defaults"

    @property
    def is_twin(self):
        """A dense-only twin (``sparse=false``), a baseline, not a candidate of the ranking."""
        return self.params.get("sparse") is False

    @property
    def dsp_floor(self):
        """MULT18X18Ds it needs at least: the ``ecp5`` multiplier (set by the ECP5 build where
        valid: ``k_par`` 1, ``width`` up to 18) is one a multiplier; 0 where it is not used."""
        p = self.params
        return p["n_par"] * p["k_par"] if p["k_par"] == 1 and p["width"] <= 18 else 0


@dataclass(frozen=True)
class Budget:
    """What a build may use: ``--max-lut/--max-dsp/--max-bram`` and the device's flip-flops."""

    lut: int
    ff: int
    dsp: int
    bram: int

    def excess(self, counts):
        """``[(resource, wanted, budget)]`` of the resources of which ``counts`` (a netlist's)
        wants more than the budget; the synthesis harness's flip-flops count, as they do in
        placement."""
        want = dict(counts, ff=counts["ff"] + counts.get("harness_ffs", 0))
        return [(r, want[r], getattr(self, r)) for r in ("lut", "ff", "dsp", "bram")
                if want[r] > getattr(self, r)]

    def over(self, counts):
        """The resources of which ``counts`` wants more than the budget (:meth:`excess`)."""
        return [r for r, _, _ in self.excess(counts)]


def candidates(ranges, block=None):
    """``(candidates, invalid)``: every combination of ``ranges`` (name -> values) the block
    accepts, and how many it refused."""
    from .hw import blocks
    block = block or blocks.get(BLOCK)
    names = sorted(ranges)
    found, invalid = [], 0
    for values in itertools.product(*(ranges[n] for n in names)):
        changed = tuple(zip(names, values))
        try:
            found.append(Candidate(changed, block.resolve(dict(changed))))
        except (ValueError, TypeError):
            invalid += 1
    return found, invalid


def twin(candidate, block=None):
    """``candidate``'s dense-only twin: the same parameters with ``sparse=false``, the build
    without the monitor, compactor, decision and table (docs/engine.md#dense-only-twin)."""
    from .hw import blocks
    block = block or blocks.get(BLOCK)
    changed = tuple(sorted({**dict(candidate.changed), "sparse": False}.items()))
    return Candidate(changed, block.resolve(dict(changed)))


# ------------------------------------------------------------------ the job (on the workers)

def cycles_job(trace, params, threshold):
    """The engine's whole-step cycles on ``trace`` (a golden/traces.py Trace, or the name of a
    golden/networks.py network, its layers at the densities given there): dense (every tile,
    MODE 1) and adaptive."""
    from . import estimate
    from .golden.engine_timing import EngineTiming
    timing = EngineTiming.of(params)
    layers = (estimate.engine_network(trace, timing, threshold) if isinstance(trace, str)
              else estimate.engine_trace(trace, timing, threshold))
    total = estimate.engine_totals(layers)
    return {"dense_cycles": int(total["dense_cycles"]),
            "adaptive_cycles": int(total["adaptive_cycles"]),
            "gemms": {name: {"dense_cycles": int(g["dense_cycles"]),
                             "adaptive_cycles": int(g["adaptive_cycles"])}
                      for name, g in total["gemms"].items()}}


def ecp5_device(flow, name):
    """The synthesis flow's Device (verif/flows/synth/) for a :data:`DEVICES` name."""
    return next(d for d in flow.FAMILIES[FAMILY].devices if d.name.startswith(name + "-"))
