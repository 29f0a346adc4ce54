"""What the tools wrote, read: Yosys' ``stat -json`` (resources of a block, the ASIC proxy's
transistors), its ``dump`` of the memories, nextpnr's ``--report`` JSON and log (Fmax, critical
path, utilisation, why a design does not fit)."""

from __future__ import annotations

import re

from .families import SynthError

#: nextpnr messages that mean the design is too big for the device (not a tool failure).
_NO_FIT = re.compile(r"but device only has|Unable to (?:place|find a placement)|"
                     r"failed to place|too many|not enough", re.IGNORECASE)


def _module_stat(stat_doc, module):
    """One module's part of Yosys' ``stat -json`` output (names may carry Yosys' ``\\``)."""
    modules = stat_doc.get("modules", {})
    key = module if module in modules else "\\" + module
    if key not in modules:
        raise SynthError(f"module {module!r} not in the Yosys statistics "
                         f"(have {', '.join(modules) or 'none'})")
    return modules[key]


def resources(stat_doc, module, family):
    """Resource counts of ``module`` from Yosys' ``stat -json`` output (a dict)."""
    cells = dict(_module_stat(stat_doc, module).get("num_cells_by_type", {}))

    def count(types):
        return sum(n for t, n in cells.items() if t in types)

    return {
        "lut": sum(n * family.lut[t] for t, n in cells.items() if t in family.lut),
        "ff": sum(n for t, n in cells.items() if t.startswith(family.ff_prefixes)),
        "bram": count(family.bram),
        "dsp": count(family.dsp),
        "lutram": count(family.lutram),
        "cells": cells,
    }


def fmax_from_report(report_doc):
    """Lowest achieved post-route frequency (MHz) over the clocks of a nextpnr ``--report``
    JSON, and its constraint; ``(None, None)`` if the report times no clock."""
    clocks = report_doc.get("fmax") or {}
    if not clocks:
        return None, None
    worst = min(clocks.values(), key=lambda c: c["achieved"])
    return float(worst["achieved"]), float(worst.get("constraint", "nan"))


_LOG_FMAX = re.compile(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz")


def fmax_from_log(text):
    """The same from a nextpnr log: the last (post-route) figure of each clock, lowest wins."""
    last = {}
    for clock, mhz in _LOG_FMAX.findall(text):
        last[clock] = float(mhz)
    return min(last.values()) if last else None


def critical_path(report_doc):
    """Start cell, end cell and delay (ns) of the slowest register-to-register path of a
    nextpnr report, or ``None``: where a block's Fmax is lost."""
    paths = [c for c in report_doc.get("critical_paths") or []
             if c["path"] and "<async>" not in (c["from"], c["to"])]
    if not paths:
        return None
    worst = max(paths, key=lambda c: sum(seg["delay"] for seg in c["path"]))
    return {"from": worst["path"][0]["from"]["cell"], "to": worst["path"][-1]["to"]["cell"],
            "delay_ns": round(sum(seg["delay"] for seg in worst["path"]), 3)}


def utilisation(report_doc):
    """``{resource: [used, available]}`` of a nextpnr report, resources in use only."""
    return {name: [u["used"], u["available"]]
            for name, u in (report_doc.get("utilization") or {}).items() if u["used"]}


def no_fit_reason(log_text):
    """The first log line saying the design does not fit, or ``None``."""
    for line in log_text.splitlines():
        if _NO_FIT.search(line):
            return line.strip()
    return None


_MEM_CELL = re.compile(r"^\s*cell \$mem_v2 (\S+)\n((?:\s*parameter .*\n)*)", re.MULTILINE)
_MEM_PARAM = re.compile(r"parameter \\(WIDTH|SIZE) (\d+)")


def memories(dump_text):
    """``[{"name", "width", "size"}]`` of every ``$mem_v2`` cell in a Yosys ``dump`` (RTLIL)."""
    found = []
    for name, params in _MEM_CELL.findall(dump_text):
        values = dict(_MEM_PARAM.findall(params))
        found.append({"name": name.lstrip("\\"), "width": int(values["WIDTH"]),
                      "size": int(values["SIZE"])})
    return found


#: Cell types ``stat -tech cmos`` prices after the ASIC proxy's script (tools.py's
#: ``ASIC_SCRIPT``; memories are counted as bits).
ASIC_CELLS = {"$_NAND_", "$_NOR_", "$_NOT_", "$_DFF_P_"}


def asic_stats(stat_doc, module):
    """Transistors, flip-flops and cell counts of ``module`` from ``stat -json -tech cmos``
    after :data:`ASIC_SCRIPT`; memories are left out of the transistors (counted as bits)."""
    stat = _module_stat(stat_doc, module)
    cells = dict(stat.get("num_cells_by_type", {}))
    unpriced = sorted(set(cells) - ASIC_CELLS - {"$mem_v2"})
    if unpriced:
        raise SynthError(f"the ASIC proxy of {module} has cells stat -tech cmos does not price: "
                         f"{', '.join(unpriced)}")
    estimate = str(stat["estimated_num_transistors"])
    return {"transistors": int(estimate.rstrip("+")), "ffs": cells.get("$_DFF_P_", 0),
            "cells": cells}
