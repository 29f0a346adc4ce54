"""Compactor and expander benchmark (``spartan bench compactor``): sustained throughput in
Verilator with the input always valid and every output always ready, at densities 0 to 100 %,
for the defaults and for 16 lanes, plus the compression ratio of the same data
(:func:`spartan_rtl.golden.compactor.compression_ratio`). Line rate is 1.0 input beats per cycle."""

from __future__ import annotations

import json

from spartan_rtl import runner
from spartan_rtl.tb.benchmark import SEED, block_config

DENSITIES = tuple(d / 10 for d in range(11))
CONFIGS = (
    {"lanes": 8, "width": 8, "number_format": "int", "cols": 64},    # the defaults
    {"lanes": 16, "width": 8, "number_format": "int", "cols": 64},
    {"lanes": 16, "width": 16, "number_format": "fp", "cols": 256},
)


def _run(block, tb, config, beats):
    test_dir = runner.run(block, tb, config, sim="verilator", name="bench", testcase="throughput",
                          seed=SEED, args={"beats": beats, "densities": list(DENSITIES)})
    return json.loads((test_dir / "throughput.json").read_text())["rows"]


def run(quick=False):
    beats = 500 if quick else 2048
    configs = CONFIGS[:2] if quick else CONFIGS
    return {"beats": beats, "configs": [
        {"params": config,
         "compactor": _run("compactor", "spartan_rtl.tb.tb_compactor", config, beats),
         "expander": _run("expander", "spartan_rtl.tb.tb_expander", config, beats)}
        for config in configs]}


def report(figures):
    lines = ["compactor / expander: sustained throughput (input always valid, outputs always "
             "ready)"]
    for entry in figures["configs"]:
        p = entry["params"]
        lines.append(f"  {block_config('compactor / expander', p)}:")
        lines.append(f"  {'density':>8} {'in beats':>9} {'in/cycle':>9} {'data/cycle':>11} "
                     f"{'mask/cycle':>11} {'ratio':>7} {'expander out/cycle':>19}")
        for c, e in zip(entry["compactor"], entry["expander"]):
            lines.append(f"  {c['density']:>8.1f} {c['input_beats']:>9} "
                         f"{c['input_beats_per_cycle']:>9.3f} {c['data_beats_per_cycle']:>11.3f} "
                         f"{c['mask_beats_per_cycle']:>11.3f} {c['compression_ratio']:>7.2f} "
                         f"{e['output_beats_per_cycle']:>19.3f}")
        lines.append(f"  row's last input beat -> its mask: "
                     f"{entry['compactor'][0]['first_mask_latency']} cycle(s)")
    return "\n".join(lines)
