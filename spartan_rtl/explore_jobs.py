"""The candidates of ``spartan explore`` and the jobs it runs on the workers (docs/explore.md);
spartan_rtl/explore.py is the sweep that drives them.

The jobs are module-level functions (picklable arguments, JSON-able results): any worker that
can import this package (and, to synthesise, a source checkout's verif/flows/synth.py) runs
them; the client keeps their results in the store.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .store import digest

__all__ = ["DEFAULT_RANGES", "DEVICES", "Candidate", "Budget", "candidates", "cycles_job",
           "verilog_job", "netlist_job", "place_job", "synth_flow", "ecp5_device",
           "tool_versions", "source_digest"]

#: The ranges swept unless ``--set`` gives others: bus lanes, the resident chunk (k x n),
#: the multipliers along N and the on-chip output rows.
DEFAULT_RANGES = {"lanes": (4, 8, 16), "k": (32, 64, 128), "n": (16, 32, 64),
                  "n_par": (8, 16, 32, 64), "acc_rows": (64, 256, 1024)}
#: ``--device`` names: the ECP5 devices of verif/flows/synth.py (speed grade 6).
DEVICES = ("LFE5U-25F", "LFE5U-45F", "LFE5U-85F")
#: A sweep larger than this is a mistake in ``--set``, not a plan.
MAX_CANDIDATES = 5000
#: Yosys runs spent looking for candidates that fit, per candidate asked for.
SYNTH_TRIES_PER_PICK = 4
BLOCK = "engine"
FAMILY = "ecp5"


@dataclass(frozen=True)
class Candidate:
    changed: tuple      # (name, value) pairs set on the engine's defaults
    params: dict = field(compare=False, hash=False)     # every parameter, resolved

    @property
    def label(self):
        return " ".join(f"{k}={v}" for k, v in self.changed) or "defaults"

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

    def over(self, counts):
        """The resources of which ``counts`` (a netlist's) wants more than the budget; the
        synthesis harness's flip-flops count, as they do in placement."""
        want = dict(counts, ff=counts["ff"] + counts.get("harness_ffs", 0))
        return [r for r in ("lut", "ff", "dsp", "bram") if want[r] > getattr(self, r)]


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


# ------------------------------------------------------------------ jobs (run on the workers)

def cycles_job(trace, params, threshold):
    """The engine's whole-step cycles on ``trace``: dense (every tile, MODE 1) and adaptive."""
    from .golden import estimate
    from .golden.engine_timing import EngineTiming
    layers = estimate.engine_trace(trace, EngineTiming.of(params), threshold)
    total = estimate.engine_totals(layers)
    return {"dense_cycles": int(total["dense_cycles"]),
            "adaptive_cycles": int(total["adaptive_cycles"]),
            "gemms": {name: {"dense_cycles": int(g["dense_cycles"]),
                             "adaptive_cycles": int(g["adaptive_cycles"])}
                      for name, g in total["gemms"].items()}}


def synth_flow():
    """verif/flows/synth.py of the source tree this package runs from, with its build folder
    moved to build/explore-synth: the explorer never shares a work folder with ``make synth``,
    which locks a whole block while it runs."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "verif" / "flows" / "synth.py").is_file():
        raise FileNotFoundError(f"no verif/flows/synth.py under {root}: synthesis needs a "
                                f"source checkout")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from verif.flows import synth
    synth.BUILD = synth.ROOT / "build" / "explore-synth"
    return synth


def verilog_job(changed):
    """The SHA-256 of the Verilog the ECP5 build synthesises, and the values it adds."""
    from .hw import blocks
    flow = synth_flow()
    block = blocks.get(BLOCK)
    values = flow.family_values(block, changed, flow.FAMILIES[FAMILY])
    _, verilog, _ = flow._generate(block, {**changed, **values})
    return {"sha256": digest(verilog), "family_values": values}


def netlist_job(changed):
    """Yosys ``synth_ecp5`` of one candidate: LUT, FF, BRAM, DSP (verif/flows/synth.py)."""
    from .hw import blocks
    flow = synth_flow()
    result, _ = flow.yosys_netlist(blocks.get(BLOCK), changed, flow.FAMILIES[FAMILY])
    return {k: result[k] for k in ("lut", "ff", "bram", "dsp", "lutram", "harness_ffs",
                                   "family_values", "yosys_seconds")}


def place_job(changed, device, seed, freq):
    """nextpnr-ecp5 of one candidate on ``device`` with placement ``seed``: fits, Fmax."""
    from .hw import blocks
    flow = synth_flow()
    family = flow.FAMILIES[FAMILY]
    result, work = flow.yosys_netlist(blocks.get(BLOCK), changed, family)
    placed = flow.place_seed(work, family, ecp5_device(flow, device), seed, freq,
                             result["key"])
    return {k: placed.get(k) for k in ("fits", "reason", "fmax_mhz", "critical_path",
                                       "utilisation", "seconds")}


def ecp5_device(flow, name):
    """verif/flows/synth.py's Device for a :data:`DEVICES` name."""
    return next(d for d in flow.FAMILIES[FAMILY].devices if d.name.startswith(name + "-"))


def tool_versions():
    """Versions of the synthesis tools and of the flow, as the store keys netlists by."""
    flow = synth_flow()
    return {**flow.tool_versions(), "flow": flow.FLOW}


def source_digest(package, names=None):
    """SHA-256 of the Python sources of a folder of this package (the cycle model, the
    generator): what a cached result computed by that code depends on."""
    folder = Path(__file__).resolve().parent / package
    if not folder.is_dir():    # the source tree of an editable install
        folder = Path(__file__).resolve().parent.parent / package
    files = sorted(folder.glob("*.py")) if names is None else [folder / n for n in names]
    return digest(b"".join(f.name.encode() + f.read_bytes() for f in files))

