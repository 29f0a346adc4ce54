"""Reading waveforms: values of named signals at each rising clock edge of a VCD file, from
either simulator (Verilator scopes signals under ``TOP.<top>``, Icarus under ``<top>``)."""

from __future__ import annotations

import bisect

__all__ = ["find_signal", "sample_at_rising_edges"]


def find_signal(names, wanted):
    """The full VCD name of port/signal ``wanted``: the shortest hierarchical name ending in it."""
    matches = [n for n in names if n == wanted or n.endswith("." + wanted)]
    if not matches:
        raise KeyError(f"signal must be one of the waveform's signals, not {wanted!r}")
    return min(matches, key=lambda n: (n.count("."), len(n)))


def _value(tv, times, t):
    """Value strictly before time ``t`` (what a flip-flop clocked at ``t`` samples)."""
    i = bisect.bisect_left(times, t) - 1
    if i < 0:
        return None
    text = tv[i][1]
    try:
        return int(text, 2)
    except ValueError:
        return None  # x or z


def sample_at_rising_edges(path, signals, clock="clk"):
    """``{signal: [value at edge 0, value at edge 1, ...]}`` plus ``"_edges"``: the edge times.
    Values are those just before each rising edge of ``clock``; X/Z read as ``None``."""
    from vcdvcd import VCDVCD

    vcd = VCDVCD(str(path), store_tvs=True)
    names = vcd.signals
    full = {s: find_signal(names, s) for s in list(signals) + [clock]}
    clk_tv = vcd[full[clock]].tv
    edges = [t for (t, v), (_, prev) in zip(clk_tv[1:], clk_tv[:-1]) if v == "1" and prev == "0"]
    out = {"_edges": edges}
    for s in signals:
        tv = vcd[full[s]].tv
        times = [t for t, _ in tv]
        out[s] = [_value(tv, times, t) for t in edges]
    return out
