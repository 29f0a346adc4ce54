"""Monitor benchmark: pass-through throughput in Verilator with every output always ready,
at several densities: the monitor must cost the data path nothing (1.0 beats/cycle)."""

from __future__ import annotations

from spartan_rtl import runner
from spartan_rtl.hw import blocks
from spartan_rtl.tb.benchmark import SEED, block_config

DENSITIES = (0.0, 0.1, 0.5, 0.9, 1.0)


def run(quick=False):
    beats = 500 if quick else 4000
    test_dir = runner.run("monitor", "spartan_rtl.tb.tb_monitor", None, sim="verilator",
                          name="bench", testcase="throughput",
                          seed=SEED, args={"beats": beats, "densities": list(DENSITIES)})
    import json
    figures = json.loads((test_dir / "throughput.json").read_text())
    figures["params"] = blocks.get("monitor").resolve()   # the run above builds the defaults
    return figures


def report(figures):
    lines = [f"{block_config('monitor', figures['params'])}: pass-through throughput "
             "(outputs always ready, input always valid)",
             f"  {'density':>8} {'beats':>7} {'cycles':>7} {'beats/cycle':>12}"]
    for row in figures["rows"]:
        lines.append(f"  {row['density']:>8.2f} {row['beats']:>7} {row['cycles']:>7} "
                     f"{row['beats_per_cycle']:>12.3f}")
    return "\n".join(lines)
