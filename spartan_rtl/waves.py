"""``spartan waves``: a VCD as a picture (PNG/SVG), as text in the terminal, or as a stream
utilisation report — without a GUI.

Everything is drawn *per clock cycle*: a cycle's box shows the value the rising edge at its
right-hand side samples (the value just before the edge, what every flip-flop and every AXI4-Stream
transfer sees). AXI4-Stream interfaces are found from the port names: every ``<base>_tvalid``
with a ``<base>_tready`` is a stream whose members are ``<base>_tdata``, ``_tvalid``,
``_tready``, ``_tlast`` and ``_tuser``. Each cycle of a stream is in one of four states:

``transfer`` (valid & ready), ``stall`` (valid & !ready: the consumer holds the producer back),
``starved`` (ready & !valid: the consumer waits for data), ``idle`` (neither).

Only the signals asked for (plus the clock, reset and the handshakes of the streams they belong
to) are parsed, and parsing stops at the end of the window, so a large file costs what the
window costs. The CLI (:mod:`spartan_rtl.cli`) is a thin layer over :func:`open_window`,
:func:`render_image`, :func:`render_text` and :func:`stream_report`.
"""

from __future__ import annotations

import fnmatch
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .handshake import STATES, counters, cycle_state
from .vcd import VcdError, header, load_window, parse_time, rising_edges, values_at

__all__ = ["Stream", "Window", "find_streams", "open_window", "busiest", "render_image",
           "render_text",
           "stream_report", "format_report", "STATES", "add_parser"]

MEMBERS = ("tdata", "tvalid", "tready", "tlast", "tuser")
DONT_CARE = "-"  # a payload value while tvalid is low
#: Cycles drawn when no ``--to`` is given (a picture of 10 000 cycles shows nothing).
DEFAULT_CYCLES = 48
MAX_PICTURE_CYCLES = 600


@dataclass(frozen=True)
class Stream:
    base: str
    members: tuple  # the present member signal names, in MEMBERS order

    @property
    def valid(self):
        return f"{self.base}_tvalid"

    @property
    def ready(self):
        return f"{self.base}_tready"

    @property
    def last(self):
        name = f"{self.base}_tlast"
        return name if name in self.members else None

    @property
    def direction(self):
        return "in" if self.base.startswith("s_") else "out" if self.base.startswith("m_") else "?"


def find_streams(names):
    """The AXI4-Stream interfaces among ``names`` (``<base>_tvalid`` + ``<base>_tready``),
    inputs (``s_...``) first, then by name."""
    names = set(names)
    streams = []
    for n in names:
        if n.endswith("_tvalid") and n[:-len("_tvalid")] + "_tready" in names:
            base = n[:-len("_tvalid")]
            members = tuple(f"{base}_{m}" for m in MEMBERS if f"{base}_{m}" in names)
            streams.append(Stream(base, members))
    return sorted(streams, key=lambda s: (not s.base.startswith("s_"), s.base))


def stream_of(name, streams):
    for s in streams:
        if name in s.members:
            return s
    return None


@dataclass
class Window:
    """The sampled signals of one window: ``edges`` (VCD times of the rising clock edges in the
    window), ``index0`` (the number of the first edge counted from the start of the file),
    ``values[name][k]`` (value before edge ``k``; ``None`` for X/Z)."""
    path: Path
    unit_ns: float
    edges: list
    index0: int
    period_ns: float
    signals: list        # displayed, in order
    widths: dict
    values: dict
    streams: list        # streams whose handshakes are known in this window
    reset: str | None

    def ns(self, k):
        return self.edges[k] * self.unit_ns

    def state(self, stream, k):
        return cycle_state(self.values[stream.valid][k], self.values[stream.ready][k])

    def in_reset(self, k):
        return self.reset is not None and self.values[self.reset][k] != 0

    def beat_starts(self, name):
        """Cycles that follow a transfer of ``name``'s stream, when ``name`` is its payload:
        a new beat starts there even if its value repeats."""
        s = stream_of(name, self.streams)
        if s is None or name in (s.valid, s.ready):
            return frozenset()
        return frozenset(k + 1 for k in range(len(self.edges))
                         if self.state(s, k) == "transfer")

    def shown(self, name):
        """Values to draw: a stream's ``tdata``/``tuser``/``tlast`` read :data:`DONT_CARE` in
        cycles where its ``tvalid`` is low (the producer may drive anything there)."""
        vals = self.values[name]
        s = stream_of(name, self.streams)
        if s is None or name in (s.valid, s.ready):
            return vals
        valid = self.values[s.valid]
        return [v if valid[k] else DONT_CARE for k, v in enumerate(vals)]


def _default_signals(hdr, streams):
    ports = [n for n, v in hdr.vars.items() if v.is_port]
    chosen = []
    for s in streams:
        chosen += list(s.members)
    rest = sorted(n for n in ports if n not in chosen and n not in ("clk", "rst"))
    return chosen + rest


def _select(hdr, globs, streams):
    names = list(hdr.vars)
    ports = [n for n in names if hdr.vars[n].is_port]
    order = {n: i for i, n in enumerate(_default_signals(hdr, streams))}
    chosen = []
    for g in globs:
        hits = [n for n in names if fnmatch.fnmatchcase(n, g)]
        if not hits:
            some = ", ".join(ports[:12]) + (", ..." if len(ports) > 12 else "")
            raise VcdError(f"--signals {g!r} matches no signal of {hdr.path.name} "
                           f"(its ports: {some})")
        hits.sort(key=lambda n: (order.get(n, len(order)), n))
        chosen += [n for n in hits if n not in chosen]
    return chosen


def _period(hdr, clock, from_ns):
    """The clock period (ns), from the first few edges at or after ``from_ns``: the file is read
    only as far as needed."""
    horizon = max(from_ns, 1.0) * 2 + 1000.0
    while True:
        tv = load_window(hdr, [clock], to_ns=horizon)[clock]
        edges = [hdr.ns(t) for t in rising_edges(tv)]
        later = [e for e in edges if e >= from_ns]
        if len(later) >= 3 or not tv or hdr.ns(tv[-1][0]) < horizon / 2:
            break
        horizon *= 4
    if len(edges) < 2:
        raise VcdError(f"{hdr.path.name} has fewer than two rising edges of {clock!r}")
    diffs = sorted(b - a for a, b in zip(edges, edges[1:]))
    return diffs[len(diffs) // 2], (later[0] if later else None)


def open_window(path, globs=None, start=None, stop=None, *, clock="clk", cycles=DEFAULT_CYCLES):
    """Parse ``path`` for the signals matching ``globs`` (default: every port, streams grouped)
    between times ``start`` and ``stop`` (strings like ``"1200ns"``, or ns numbers; both
    optional). Without ``stop``, ``cycles`` cycles from ``start`` (``None``: to the end)."""
    hdr = header(path)
    from_ns = parse_time(start, "--from") if isinstance(start, str) else float(start or 0.0)
    to_ns = parse_time(stop, "--to") if isinstance(stop, str) else stop
    if to_ns is not None and to_ns <= from_ns:
        raise VcdError(f"--to must be later than --from, not {stop} (from {from_ns:g} ns)")
    if clock not in hdr.vars:
        raise VcdError(f"{hdr.path.name} has no clock signal {clock!r} (name it with --clock)")
    streams = find_streams(n for n, v in hdr.vars.items() if v.is_port)
    shown = _select(hdr, globs, streams) if globs else _default_signals(hdr, streams)
    if not shown:
        raise VcdError(f"{hdr.path.name} has no ports to show (choose signals with --signals)")
    period, first = _period(hdr, clock, from_ns)
    if to_ns is None and cycles is not None and first is not None:
        to_ns = first + (cycles - 1) * period + period / 2
    # Mark the handshakes of every stream a shown signal belongs to.
    marked = [s for s in streams if any(n in s.members for n in shown)]
    reset = "rst" if "rst" in hdr.vars else None
    needed = list(dict.fromkeys(shown + [clock] + ([reset] if reset else [])
                                + [m for s in marked for m in (s.valid, s.ready, s.last) if m]))
    tvs = load_window(hdr, needed, to_ns=to_ns)
    all_edges = rising_edges(tvs[clock])
    lo = int(hdr.units(from_ns))
    hi = None if to_ns is None else hdr.units(to_ns)
    picked = [i for i, t in enumerate(all_edges) if t >= lo and (hi is None or t <= hi)]
    if not picked:
        have = (f"{hdr.ns(all_edges[0]):g} to {hdr.ns(all_edges[-1]):g} ns" if all_edges
                else "none")
        until = "the end" if to_ns is None else f"{to_ns:g} ns"
        raise VcdError(f"the window from {from_ns:g} ns to {until} holds no rising edge of "
                       f"{clock!r} (edges read: {have})")
    edges = [all_edges[i] for i in picked]
    values = {n: values_at(tvs[n], edges) for n in needed}
    widths = {n: hdr.vars[n].width for n in needed}
    return Window(hdr.path, hdr.unit_ns, edges, picked[0], period, shown, widths, values,
                  marked, reset)


def busiest(path, cycles=DEFAULT_CYCLES, *, clock="clk"):
    """``(from_ns, to_ns)`` of the ``cycles``-cycle window (out of reset) where the most streams
    transfer, then with the most transfers: the part of a long run worth a picture. Reads the
    handshakes of the whole file."""
    hdr = header(path)
    if not find_streams(n for n, v in hdr.vars.items() if v.is_port):
        raise VcdError(f"--busiest needs AXI4-Stream ports (*_tvalid, *_tready) in {hdr.path.name}")
    win = open_window(path, ["*_tvalid", "*_tready"], None, None, clock=clock, cycles=None)
    n, m = len(win.edges), len(win.streams)
    # prefix[k][i]: transfers of stream i before cycle k (reset cycles count none)
    prefix = [[0] * m]
    for k in range(n):
        prefix.append([c + (not win.in_reset(k) and win.state(s, k) == "transfer")
                       for c, s in zip(prefix[-1], win.streams)])
    width = min(cycles, n)
    best, best_score = 0, None
    for start in range(0, n - width + 1):
        if win.in_reset(start):
            continue
        per_stream = [b - a for a, b in zip(prefix[start], prefix[start + width])]
        score = (sum(c > 0 for c in per_stream), min(per_stream), sum(per_stream))
        if best_score is None or score > best_score:
            best, best_score = start, score
    half = win.period_ns / 2
    return win.ns(best) - half, win.ns(best + width - 1) + half


# --- the utilisation report ------------------------------------------------------------------

def stream_report(win):
    """Per stream over the window's cycles out of reset: cycles in each state, beats, packets
    (transfers with ``tlast``) and beats per packet. JSON-able."""
    counted = [k for k in range(len(win.edges)) if not win.in_reset(k)]
    out = {"file": str(win.path), "from_ns": win.ns(0), "to_ns": win.ns(len(win.edges) - 1),
           "cycles": len(counted), "reset_cycles": len(win.edges) - len(counted), "streams": {}}
    for s in win.streams:
        counts = counters()
        packets, beats_in_packet, sizes = 0, 0, []
        for k in counted:
            st = win.state(s, k)
            counts[st] += 1
            if st == "transfer":
                beats_in_packet += 1
                if s.last and win.values[s.last][k]:
                    packets += 1
                    sizes.append(beats_in_packet)
                    beats_in_packet = 0
        n = max(len(counted), 1)
        entry = {"direction": s.direction, **counts,
                 "shares": {k: counts[k] / n for k in STATES},
                 "beats": counts["transfer"]}
        if s.last:
            entry.update(packets=packets, open_packet_beats=beats_in_packet,
                         beats_per_packet=(sum(sizes) / len(sizes)) if sizes else None,
                         packet_beats_min=min(sizes) if sizes else None,
                         packet_beats_max=max(sizes) if sizes else None)
        out["streams"][s.base] = entry
    return out


def format_report(rep):
    lines = [f"{rep['file']}: {rep['cycles']} cycles from {rep['from_ns']:g} to "
             f"{rep['to_ns']:g} ns ({rep['reset_cycles']} cycles in reset not counted)",
             f"{'stream':<22}{'dir':<5}{'transfer':>9}{'stall':>8}{'starved':>9}{'idle':>8}"
             f"{'beats':>8}{'packets':>9}  beats/packet"]
    for name, e in rep["streams"].items():
        sh = e["shares"]
        per = "-"
        if e.get("packets"):
            per = f"{e['beats_per_packet']:.2f} ({e['packet_beats_min']}-{e['packet_beats_max']})"
        lines.append(f"{name:<22}{e['direction']:<5}" + "".join(
            f"{100 * sh[k]:>{w}.1f}%" for k, w in zip(STATES, (8, 7, 8, 7)))
            + f"{e['beats']:>8}{e.get('packets', '-')!s:>9}  {per}")
    if not rep["streams"]:
        lines.append("(no AXI4-Stream interface: no *_tvalid with a matching *_tready)")
    lines.append("transfer = valid & ready; stall = valid & !ready (held back by the consumer); "
                 "starved = ready & !valid (waiting for the producer); idle = neither")
    return "\n".join(lines)


# --- pictures --------------------------------------------------------------------------------

def _hex(value, width):
    if value is None:
        return "x"
    return format(value, "x")


def _segments(vals, breaks=frozenset()):
    """Runs of equal values: ``[(start, end, value), ...]`` (end exclusive); a run also ends
    before every cycle in ``breaks``."""
    runs, start = [], 0
    for k in range(1, len(vals) + 1):
        if k == len(vals) or vals[k] != vals[start] or k in breaks:
            runs.append((start, k, vals[start]))
            start = k
    return runs


_COLOURS = {"transfer": "#2ca02c", "stall": "#d62728", "starved": "#1f77b4", "idle": None}
_ALPHA = {"transfer": 0.28, "stall": 0.30, "starved": 0.12}


def _rows(win):
    """Display rows: ``("group", stream)`` headers and ``("signal", name)``."""
    rows, current = [], object()
    for name in win.signals:
        s = stream_of(name, win.streams)
        if s is not current:
            rows.append(("group", s))
            current = s
        rows.append(("signal", name))
    return rows


def render_image(win, out):
    """Draw ``win`` into ``out`` (``.png`` or ``.svg``)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, small
    from matplotlib.patches import Patch, Polygon, Rectangle

    n = len(win.edges)
    if n > MAX_PICTURE_CYCLES:
        raise VcdError(f"a picture shows at most {MAX_PICTURE_CYCLES} cycles, not {n}: narrow "
                       "--from/--to (or use --streams for the whole run)")
    rows = _rows(win)
    cell = max(0.26, min(0.9, 17.0 / n))          # inches per cycle
    longest = max(len(name) + 7 for kind, name in rows if kind == "signal")
    label_in = max(2.3, longest * 8 * 0.62 / 72 + 0.3)
    fig_w = label_in + n * cell + 0.3
    row_h, group_h = 0.34, 0.30
    heights = [group_h if kind == "group" else row_h for kind, _ in rows]
    fig_h = sum(heights) + 1.25
    fig = plt.figure(figsize=(fig_w, fig_h), dpi=110)
    ax = fig.add_axes([label_in / fig_w, 0.75 / fig_h, (n * cell) / fig_w,
                       sum(heights) / fig_h])
    total = sum(heights) / row_h
    ax.set_xlim(0, n)
    ax.set_ylim(total, 0)
    ax.set_yticks([])
    for spine in ("left", "right", "top"):
        ax.spines[spine].set_visible(False)
    font = 7.5
    char_in = font * 0.62 / 72                       # monospace digit width, inches
    y, ticks, labels = 0.0, [], []
    group_spans = {}
    for (kind, item), h in zip(rows, heights):
        hh = h / row_h
        if kind == "group":
            title = item.base if item else "other signals"
            ax.text(-0.1, y + hh * 0.62, title, ha="right", va="center",
                    fontsize=8.5, weight="bold", clip_on=False,
                    transform=ax.transData)
            if item is not None:
                group_spans[item.base] = [y, y + hh]
            y += hh
            continue
        name = item
        s = stream_of(name, win.streams)
        if s is not None:
            group_spans[s.base][1] = y + hh
        top, bot, mid = y + 0.15, y + hh - 0.15, y + hh / 2
        width = win.widths[name]
        ticks.append(mid)
        labels.append(name + (f" [{width - 1}:0]" if width > 1 else ""))
        vals = win.shown(name)
        if width == 1:
            xs, ys, prev = [], [], None
            for k, v in enumerate(vals):
                level = mid if v is None else (bot if v in (0, DONT_CARE) else top)
                if v is None:
                    ax.add_patch(Rectangle((k, top), 1, bot - top, facecolor="#ff9896",
                                           edgecolor="none", hatch="///"))
                dc = v == DONT_CARE
                if dc != prev and xs:
                    ax.plot(xs, ys, color="#b0b0b0" if prev else "black", lw=1.1)
                    xs, ys = xs[-1:], ys[-1:]
                xs += [k, k + 1]
                ys += [level, level]
                prev = dc
            ax.plot(xs, ys, color="#b0b0b0" if prev else "black", lw=1.1)
        else:
            d = min(0.18, 0.25)
            for a, b, v in _segments(vals, win.beat_starts(name)):
                if v == DONT_CARE:
                    ax.plot([a, b], [mid, mid], color="#b0b0b0", lw=1.0)
                    continue
                pts = [(a, mid), (a + d, top), (b - d, top), (b, mid), (b - d, bot), (a + d, bot)]
                face = "#ff9896" if v is None else "#f4f4f4"
                ax.add_patch(Polygon(pts, closed=True, facecolor=face, edgecolor="black",
                                     lw=0.9, hatch="///" if v is None else None))
                text = _hex(v, width)
                room = int(((b - a) * cell - 0.06) / char_in)
                if room < 1:
                    continue
                if len(text) > room:
                    text = "…" + text[-(room - 1):] if room > 1 else "…"
                ax.text((a + b) / 2, mid, text, ha="center", va="center", fontsize=font,
                        family="monospace")
        y += hh
    # Handshake shading behind each stream's rows, and a bar at each packet's last transfer.
    for s in win.streams:
        if s.base not in group_spans:
            continue
        y0, y1 = group_spans[s.base]
        for k in range(n):
            st = "idle" if win.in_reset(k) else win.state(s, k)
            colour = _COLOURS[st]
            if colour:
                ax.add_patch(Rectangle((k, y0), 1, y1 - y0, facecolor=colour,
                                       alpha=_ALPHA[st], edgecolor="none", zorder=0))
            if st == "transfer" and s.last and win.values[s.last][k]:
                ax.plot([k + 1, k + 1], [y0, y1], color="#6a3d9a", lw=2.2, zorder=3)
    # Reset cycles: grey band over everything.
    for k in range(n):
        if win.in_reset(k):
            ax.add_patch(Rectangle((k, 0), 1, total, facecolor="#bbbbbb", alpha=0.35,
                                   edgecolor="none", zorder=4))
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8, family="monospace")
    ax.tick_params(axis="y", length=0)
    ax.yaxis.set_visible(True)
    for k in range(n + 1):
        ax.axvline(k, color="#cccccc", lw=0.5, zorder=-1)
    step = next(s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if n / s <= 24)
    first = win.index0
    xt = [k for k in range(n) if (first + k) % step == 0]
    ax.set_xticks([k + 0.5 for k in xt])
    ax.set_xticklabels([str(first + k) for k in xt], fontsize=8)
    ax.set_xlabel("clock cycle (edge number; each box shows the value its right-hand rising "
                  f"edge samples) — {win.ns(0):g} to {win.ns(n - 1):g} ns, "
                  f"period {win.period_ns:g} ns", fontsize=8)
    legend = [Patch(facecolor=_COLOURS[k], alpha=_ALPHA[k] + 0.2, label=text) for k, text in
              (("transfer", "transfer (valid & ready)"), ("stall", "stall (valid & !ready)"),
               ("starved", "starved (ready & !valid)"))]
    legend.append(Patch(facecolor="white", edgecolor="#999999", label="idle"))
    legend.append(Patch(facecolor="#6a3d9a", label="tlast transfer (end of packet)"))
    if any(win.in_reset(k) for k in range(n)):
        legend.append(Patch(facecolor="#bbbbbb", alpha=0.6, label="in reset"))
    fig.legend(handles=legend, loc="upper left", ncol=len(legend), fontsize=8, frameon=False,
               bbox_to_anchor=(label_in / fig_w - 0.1 / fig_w, 1 - 0.02 / fig_h))
    fig.text(0.005, 1 - 0.35 / fig_h, str(win.path), fontsize=8, color="#555555", va="top")
    _save_atomically(fig, out)
    plt.close(fig)


def _save_atomically(fig, out):
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, format=out.suffix[1:])
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- text ------------------------------------------------------------------------------------

_TEXT_STATES = {"transfer": "=", "stall": "!", "starved": ".", "idle": " ", "reset": "r"}


def render_text(win, cell=2):
    """The window as ASCII: ``cell`` characters per cycle; one line per signal, and per stream
    a handshake line (``==`` transfer, ``=|`` transfer with tlast, ``!!`` stall, ``..``
    starved, blank idle, ``rr`` reset)."""
    n = len(win.edges)
    if n > MAX_PICTURE_CYCLES:
        raise VcdError(f"--text shows at most {MAX_PICTURE_CYCLES} cycles, not {n}: narrow "
                       "--from/--to (or use --streams for the whole run)")
    names = [name for kind, name in _rows(win) if kind == "signal"]
    label_w = max([len(x) + 2 for x in names] + [len(s.base) + 10 for s in win.streams] + [6]) + 2
    lines = []
    scale = [" "] * (n * cell)
    for k in range(n):
        number = str(win.index0 + k)
        if (win.index0 + k) % 5 == 0 and k * cell + len(number) <= n * cell:
            scale[k * cell:k * cell + len(number)] = number
    lines.append("cycle".ljust(label_w) + "".join(scale).rstrip())
    for kind, item in _rows(win):
        if kind == "group":
            if item is None:
                continue
            row = []
            for k in range(n):
                st = "reset" if win.in_reset(k) else win.state(item, k)
                if st == "transfer" and item.last and win.values[item.last][k]:
                    row.append("=" * (cell - 1) + "|")
                else:
                    row.append(_TEXT_STATES[st] * cell)
            lines.append(f"{item.base} handshake".ljust(label_w) + "".join(row).rstrip())
            continue
        vals = win.shown(item)
        if win.widths[item] == 1:
            row, prev = [], None
            for v in vals:
                if v == DONT_CARE:
                    row.append(" " * cell)
                    v = None
                elif v is None:
                    row.append("x" * cell)
                else:
                    level = "-" if v else "_"
                    edge = level if prev in (None, v) else ("/" if v else "\\")
                    row.append(edge + level * (cell - 1))
                prev = v
            text = "".join(row)
        else:
            text = ""
            for a, b, v in _segments(vals, win.beat_starts(item)):
                if v == DONT_CARE:
                    text += " " * ((b - a) * cell)
                    continue
                room = (b - a) * cell - 1
                label = _hex(v, win.widths[item])
                if len(label) > room:
                    label = ("~" + label[-(room - 1):]) if room > 1 else "~"[:room]
                text += "|" + label.ljust(room)
        lines.append((("  " + item).ljust(label_w) + text).rstrip())
    lines.append(f"{win.path.name}: cycles {win.index0}-{win.index0 + n - 1}, "
                 f"{win.ns(0):g}-{win.ns(n - 1):g} ns. Every {cell} characters are one cycle (the value "
                 "its closing rising edge samples); buses in hex, ~ = leading digits cut; "
                 "a stream's payload is blank while its tvalid is low.")
    lines.append("handshake: = transfer, | transfer with tlast, ! stall (valid, not ready), "
                 ". starved (ready, not valid), blank idle, r reset")
    return "\n".join(lines)


# --- command line ----------------------------------------------------------------------------

def add_parser(sub):
    p = sub.add_parser("waves", help="a VCD as a picture, as text, or as a stream report",
                       description="Render a VCD waveform (PNG/SVG or text) or report AXI4-Stream "
                       "utilisation from it.")
    p.add_argument("file", metavar="FILE.vcd")
    p.add_argument("--signals", nargs="+", action="extend", metavar="GLOB",
                   help="signals to show, shell globs on names inside the design "
                        "(default: every port, streams grouped)")
    p.add_argument("--from", dest="start", metavar="T",
                   help="window start, e.g. 200ns or 1.5us (a bare number is ns; default 0)")
    p.add_argument("--to", dest="stop", metavar="T",
                   help=f"window end (default: {DEFAULT_CYCLES} cycles for pictures and text, "
                        "the end of the file for --streams)")
    p.add_argument("--busiest", action="store_true",
                   help=f"instead of --from/--to: the {DEFAULT_CYCLES} cycles where the most "
                        "streams transfer")
    p.add_argument("--clock", default="clk", help="clock signal (default clk)")
    p.add_argument("--cell", type=int, default=2, metavar="N",
                   help="with --text: characters per cycle (default 2; wider shows more hex)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("-o", "--output", metavar="OUT.png|OUT.svg", help="write a picture")
    what.add_argument("--text", action="store_true", help="print an ASCII rendering")
    what.add_argument("--streams", action="store_true",
                      help="print the AXI4-Stream utilisation report")
    p.add_argument("--json", action="store_true", help="with --streams: print JSON")
    p.set_defaults(func=cmd_waves)
    return p


#: What a picture needs beyond the base install (``--text`` and ``--streams`` need nothing).
PICTURE_EXTRA = ("waves", ("matplotlib",))


def cmd_waves(args):
    """Every problem with the request or the file is a one-line usage error (the file's, with
    the line where it stops being a VCD); the output path, and for a picture the ``waves``
    extra, are checked before the file is read."""
    from .cli import UsageError
    try:
        return _waves(args)
    except VcdError as e:
        raise UsageError(str(e)) from None


def _waves(args):
    from .cli import check_output_file, require_modules
    if args.output is not None:
        if Path(args.output).suffix.lower() not in (".png", ".svg"):
            raise VcdError(f"-o must name a .png or .svg file, not {args.output!r}")
        require_modules("spartan waves -o (a picture)", *PICTURE_EXTRA)
        check_output_file(args.output, "-o", new_folders=True)
    if not 1 <= args.cell <= 40:
        raise VcdError(f"--cell must be an integer from 1 to 40, not {args.cell}")
    if args.json and not args.streams:
        raise VcdError("--json goes with --streams")
    cycles = None if args.streams else DEFAULT_CYCLES
    start, stop = args.start, args.stop
    if args.busiest:
        if start is not None or stop is not None:
            raise VcdError("--busiest chooses the window itself: leave out --from and --to")
        start, stop = busiest(args.file, DEFAULT_CYCLES, clock=args.clock)
    win = open_window(args.file, args.signals, start, stop, clock=args.clock, cycles=cycles)
    if args.streams:
        rep = stream_report(win)
        print(json.dumps(rep, indent=2) if args.json else format_report(rep))
    elif args.text:
        print(render_text(win, cell=args.cell))
    else:
        render_image(win, args.output)
        print(f"{args.output}: cycles {win.index0}-{win.index0 + len(win.edges) - 1} "
              f"({win.ns(0):g}-{win.ns(len(win.edges) - 1):g} ns), {len(win.signals)} signals")
    return 0
