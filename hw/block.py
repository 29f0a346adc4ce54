"""What the generator needs to know about a block, and nothing it does not.

A :class:`Block` names a hardware block, its Verilog top, its parameters, and a function
that builds the Amaranth component from a checked parameter set. Blocks register themselves in
:mod:`spartan_rtl.hw.blocks`; the CLI, the emitter and the testbenches find them there by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import params as _params


@dataclass(frozen=True)
class Block:
    """One generatable block.

    ``build(**params)`` returns the Amaranth component (AXI base-named streams, see
    :mod:`spartan_rtl.hw.axis`). ``check(params)`` enforces constraints between parameters (raise
    the usual "<name> must be ..." ``ValueError``). ``info(component)`` returns the manifest's
    block-specific entries (``latency_cycles``, ``throughput_beats_per_cycle``, extras).
    """

    name: str
    top: str
    summary: str
    params: tuple
    build: Callable
    info: Callable
    check: Callable = field(default=lambda p: None)
    #: The elaboration-size bound (:class:`~spartan_rtl.hw.params.SizeBound`), or None.
    size_bound: object = None

    def resolve(self, values=None):
        """Defaults overlaid with ``values``, every value and cross-constraint checked, then
        the elaboration-size bound."""
        resolved = _params.resolve(self.params, dict(values or {}))
        self.check(resolved)
        if self.size_bound is not None:
            self.size_bound.check(resolved, self.params, self._valid, self.name)
        return resolved

    def _valid(self, resolved):
        try:
            self.check(resolved)
        except ValueError:
            return False
        return True

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise ValueError(_params.not_one_of("parameter", name, [p.name for p in self.params]))
