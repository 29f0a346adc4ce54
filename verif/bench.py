"""One benchmark entry point: ``spartan bench [NAME ...] [--quick]`` (``make bench``).

Each benchmark is a module ``verif/bench_<name>.py`` with

``run(quick: bool) -> dict``
    simulate and measure; returns JSON-able figures (cycles, beats/cycle, speedups, ...).
``report(figures: dict) -> str``
    the figures as a plain-text table for the terminal.

and is listed in :data:`BENCHES`. Figures are measured in one run, as ratios where the machine
could skew them; nothing here times wall-clock seconds as a performance figure.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

#: name -> module; add a line when a block gets a benchmark.
BENCHES = {
    "monitor": "verif.bench_monitor",
}


def names():
    return list(BENCHES)


def run(selected=None, quick=False, json_path=None, echo=print):
    selected = list(selected or BENCHES)
    for name in selected:
        if name not in BENCHES:
            raise ValueError(f"benchmark must be one of {', '.join(BENCHES)}, not {name!r}")
    results = {}
    for name in selected:
        module = importlib.import_module(BENCHES[name])
        figures = module.run(quick=quick)
        results[name] = figures
        echo(module.report(figures))
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2) + "\n")
    return results
