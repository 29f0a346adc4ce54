"""Reading waveforms: values of named signals at each rising clock edge of a VCD file, from
either simulator (Verilator scopes signals under ``TOP.<top>``/``$rootio``, Icarus under
``<top>``).

Two levels: :func:`sample_at_rising_edges` for tests that want a few ports over a whole run,
and :func:`header` + :func:`load_window` for the waveform tools (``spartan waves``), which read
the header once, then parse only the signals asked for and stop at the end of the window.
Problems with the file or the request raise :class:`VcdError` with a one-line message.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

__all__ = ["find_signal", "sample_at_rising_edges", "VcdError", "Var", "Header", "header",
           "load_window", "rising_edges", "values_at", "parse_time"]


class VcdError(ValueError):
    """The waveform file or the request on it is unusable (one-line message)."""


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


def rising_edges(clk_tv):
    """Times of the 0 -> 1 transitions in a clock's ``[(time, value), ...]``."""
    return [t for (t, v), (_, prev) in zip(clk_tv[1:], clk_tv[:-1]) if v == "1" and prev == "0"]


def values_at(tv, edges):
    """A signal's value just before each time in ``edges`` (``None`` for X/Z or not yet set)."""
    times = [t for t, _ in tv]
    return [_value(tv, times, t) for t in edges]


def sample_at_rising_edges(path, signals, clock="clk"):
    """``{signal: [value at edge 0, value at edge 1, ...]}`` plus ``"_edges"``: the edge times.
    Values are those just before each rising edge of ``clock``; X/Z read as ``None``."""
    from vcdvcd import VCDVCD

    vcd = VCDVCD(str(path), store_tvs=True)
    names = vcd.signals
    full = {s: find_signal(names, s) for s in list(signals) + [clock]}
    edges = rising_edges(vcd[full[clock]].tv)
    out = {"_edges": edges}
    for s in signals:
        out[s] = values_at(vcd[full[s]].tv, edges)
    return out


# --- header and windowed loading (spartan waves) ---------------------------------------------

_RANGE = re.compile(r"\[\d+:\d+\]$")
_UNITS = {"s": Decimal(1), "ms": Decimal("1e-3"), "us": Decimal("1e-6"), "ns": Decimal("1e-9"),
          "ps": Decimal("1e-12"), "fs": Decimal("1e-15")}


@dataclass(frozen=True)
class Var:
    """One signal: ``ref`` its full VCD name (``spartan_monitor.s_axis_tdata[63:0]``), ``name``
    the name inside the design (``s_axis_tdata``, ``core.nnz``), ``width`` in bits."""
    ref: str
    name: str
    width: int

    @property
    def is_port(self):
        return "." not in self.name and not self.name.startswith(("_", "\\"))


@dataclass(frozen=True)
class Header:
    path: Path
    vars: dict          # name -> Var, in file order
    unit_ns: float      # one VCD time unit in nanoseconds

    def ns(self, t):
        return t * self.unit_ns

    def units(self, ns):
        return ns / self.unit_ns


def _check_text(path):
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise VcdError(f"waveform must be a readable VCD file, not {str(path)!r} ({e.strerror})")
    if head[:8] == b"\x00" * 8 or not head.lstrip().startswith(b"$"):
        kind = " (this looks like FST: convert it with fst2vcd)" if Path(path).suffix == ".fst" \
            else ""
        raise VcdError(f"waveform must be a VCD file, not {str(path)!r}{kind}")


def header(path):
    """The signals and timescale of a VCD file, reading only its definitions."""
    from vcdvcd import VCDVCD

    _check_text(path)
    try:
        vcd = VCDVCD(str(path), only_sigs=True, store_tvs=False)
    except (UnicodeDecodeError, ValueError, IndexError, KeyError) as e:
        raise VcdError(f"waveform must be a VCD file, not {str(path)!r} ({type(e).__name__})")
    if not vcd.signals:
        raise VcdError(f"waveform must be a VCD file with signals, not {str(path)!r}")
    ts = vcd.timescale or {"magnitude": Decimal(1), "factor": _UNITS["ps"]}
    unit_ns = float(ts["magnitude"] * ts["factor"] / _UNITS["ns"])
    found = {}
    for ref in vcd.signals:
        parts = ref.split(".")
        # Drop the top scope (the DUT module, Verilator's ``$rootio``, ``TOP``) and any bit range.
        # Icarus keeps Verilog's escaped identifiers (``\core.out``): drop the backslash.
        name = _RANGE.sub("", ".".join(parts[1:]) if len(parts) > 1 else ref).lstrip("\\")
        width = int(vcd[ref].size)
        if name in found and not found[name].ref.startswith("$"):
            continue  # keep the design scope's name (what GTKWave users look for)
        found[name] = Var(ref, name, width)
    return Header(Path(path), found, unit_ns)


def load_window(hdr, names, to_ns=None):
    """``{name: [(time, value), ...]}`` for ``names``, parsing only those signals and stopping
    after ``to_ns`` (times in VCD units)."""
    from vcdvcd import VCDVCD

    refs = [hdr.vars[n].ref for n in names]
    to_time = None if to_ns is None else int(hdr.units(to_ns)) + 1
    vcd = VCDVCD(str(hdr.path), signals=refs, store_tvs=True, to_time=to_time)
    return {n: vcd[hdr.vars[n].ref].tv for n in names}


_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(fs|ps|ns|us|ms|s)?\s*$")


def parse_time(text, option):
    """``"1200"``, ``"1200ns"``, ``"1.5us"`` -> nanoseconds (a bare number is in ns)."""
    m = _TIME.match(str(text))
    if not m:
        raise VcdError(f"{option} must be a time such as 1200, 1200ns or 1.5us, not {text!r}")
    return float(Decimal(m.group(1)) * _UNITS[m.group(2) or "ns"] / _UNITS["ns"])
