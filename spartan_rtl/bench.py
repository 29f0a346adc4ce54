"""One benchmark entry point: ``spartan bench [NAME ...] [--quick]`` (``make bench``).

Each benchmark is a module ``verif/tb/bench_<name>.py`` with

``run(quick: bool) -> dict``
    simulate and measure; returns JSON-able figures (cycles, beats/cycle, speedups, ...).
``report(figures: dict) -> str``
    the figures as a plain-text table for the terminal.

found by that name (no list to edit): a block's benchmark sits beside its testbench. Figures
are measured in one run, as ratios where the machine could skew them; nothing here times
wall-clock seconds as a performance figure. The benchmarks share their seed (``SEED``) and
report headings through :mod:`spartan_rtl.tb.benchmark`, never through this driver.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

from . import tb
from .hw.blocks import BLOCKS
from .hw.params import not_one_of


def _discover():
    """name -> module of every ``bench_<name>`` in :mod:`spartan_rtl.tb`: the blocks' in the
    registry's order, then the others (the whole-network estimate) by name."""
    found = sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules(tb.__path__)
                   if m.name.startswith("bench_"))
    order = {name: i for i, name in enumerate(BLOCKS)}
    found.sort(key=lambda name: (order.get(name, len(order)), name))
    return {name: f"{tb.__name__}.bench_{name}" for name in found}


BENCHES = _discover()


def names():
    return list(BENCHES)


def module(name):
    return importlib.import_module(BENCHES[name])


def run(selected=None, quick=False, json_path=None, echo=None):
    """Run the benchmarks (all by default) with a progress bar, print each report and write the
    figures as JSON (``json_path``). The project's Markdown page of them, docs/results.md, is
    rendered from that JSON by a developer flow (``make bench``: verif/flows/results.py)."""
    from tqdm import tqdm
    selected = list(selected or BENCHES)
    for name in selected:
        if name not in BENCHES:
            raise ValueError(not_one_of("benchmark", name, BENCHES))
    echo = echo or tqdm.write
    results = {}
    with tqdm(selected, desc="bench", unit="bench") as bar:
        for name in bar:
            bar.set_postfix_str(name)
            figures = module(name).run(quick=quick)
            results[name] = figures
            echo(module(name).report(figures))
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2) + "\n")
    return results
