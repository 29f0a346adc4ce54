"""A block's verification profile: what every flow needs to know about one block, declared once,
as ``PROFILE`` at the end of its testbench ``verif/tb/tb_<block>.py``.

The flows read profiles, never tables of block names: ``spartan sim`` (the standard stimulus),
``make synth`` (the sizes beyond the defaults), ``make mutants`` (how many mutants and the
regression subset each runs), ``make coverage`` (the uncovered points no test can reach, and
why) and the fuzz tests (how many examples). A block's benchmark is the module
``verif/tb/bench_<block>.py`` beside it (``spartan bench`` finds it by that name).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Union

__all__ = ["Profile", "Waiver", "of", "SATURATE"]

#: A saturating counter's arm in Yosys' netlist: ``x[w] ? <all ones> : x[w-1:0]``, or the
#: monitor's ``closing_<count>_over ? <saturated> : closing_<count>`` (its counters wrap with a
#: sticky flag; the saturation is resolved once per tile). A coverage pattern the monitor's and
#: the core's profiles share.
SATURATE = r"(\[\d+\] \? \d+'h[137f]f* +:|closing_\w+_over +\? )"


@dataclass(frozen=True)
class Waiver:
    """An uncovered line/branch point no test can (or should) reach. ``pattern`` is searched in
    ``"[<points>] <Verilog line>  => <signals it drives>"`` (or is a predicate on that text and
    the parameters); ``when`` is a predicate on the configuration's parameters (None: any)."""
    pattern: Union[str, Callable[[str, dict], bool]]
    when: Union[Callable[[dict], bool], None]
    reason: str


@dataclass(frozen=True)
class Profile:
    #: ``spartan sim``: (cocotb test of the testbench, its arguments); ``None``: the generic
    #: manifest-driven stimulus (verif/tb/tb_streams.py).
    stimulus: Union[tuple[str, dict], None] = ("random_traffic", {})
    #: ``make synth``: parameter sets beyond the defaults; ``None``: half and double ``lanes``.
    synth_sizes: Union[tuple[dict, ...], None] = None
    #: ``make mutants``: mutants a campaign of the block draws ...
    mutants: int = 10
    #: ... and whether ``make mutants`` runs it unnamed (False: only when the block is named,
    #: with that count all the same).
    mutate_by_default: bool = True
    #: ... and the regression subset each runs on the default configuration in Verilator:
    #: (cocotb tests, ``None`` for all of them; their arguments).
    mutant_tests: tuple = (None, {})
    #: ... and the configurations beyond the defaults a campaign also mutates, ``(name,
    #: parameter overrides)``: those in which logic the defaults leave dead works (several
    #: column groups, a dense-only build). Each is its own campaign, ``BLOCK@NAME``, with the
    #: block's subset and ``mutants`` count.
    mutant_configs: tuple = ()
    #: ``make coverage``: the waived points, the first match explains a point.
    coverage_waivers: tuple[Waiver, ...] = ()
    #: The fuzz tests' examples per run in the fast profile (the long one multiplies it).
    fuzz_examples: int = 10
    #: The testbench module (set by :func:`of`).
    module: str = field(default="", compare=False)


def of(block_name):
    """The profile of ``block_name``: ``PROFILE`` of ``spartan_rtl.tb.tb_<block_name>``, or the
    defaults (with the generic stimulus) for a block without a testbench."""
    name = f"{__package__}.tb_{block_name}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return Profile(stimulus=None)
    found = getattr(module, "PROFILE", None) or Profile()
    return Profile(**{**found.__dict__, "module": name})
