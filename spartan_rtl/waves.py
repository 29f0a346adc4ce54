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

Buses are *decoded* where the design says how: with the block's manifest (``<top>.json``, which
``spartan sim`` and ``spartan generate`` write; found beside the VCD or named with
``--manifest``) a stream's ``tdata`` reads as its lanes in decimal, a mask as bits, a record as
its fields; without it, a bus named like a mask (``mask``, ``keep``, ``strb``) reads as bits and
anything else in hex (:class:`Decoder`). Without ``--from``/``--to``, pictures and text start at
the first transfer out of reset (:func:`first_transfer`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .handshake import STATES, counters, cycle_state
from .vcd import VcdError, header, load_window, parse_time, rising_edges, values_at

__all__ = ["Stream", "Window", "find_streams", "open_window", "busiest", "render_image",
           "render_text", "Decoder", "find_manifest", "read_manifest", "first_transfer",
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


# --- decoding buses: lanes, mask bits, record fields -----------------------------------------

#: Bits of a mask per item (a row of its own when the bus is drawn split).
MASK_CHUNK = 8
#: Names that mark a bus of per-byte or per-element flags when no manifest says otherwise.
MASK_WORDS = ("mask", "keep", "strb")
#: Rows a split bus takes at most; beyond, neighbouring items share a row.
MAX_SUBROWS = 16
#: A manifest larger than this is no manifest.
MANIFEST_MAX_BYTES = 16 << 20
_TOP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_LANE = re.compile(r"lane\d+")


def _signed(value, width):
    return value - (1 << width) if value >> (width - 1) else value


@dataclass(frozen=True)
class Decoder:
    """How a bus reads: ``fields`` ``((label, lsb, width), ...)``, each shown as ``kind``:
    ``"signed"`` or ``"unsigned"`` decimal, ``"hex"``, or ``"bits"`` (bit ``lsb`` first, so a
    mask reads in column order). ``named``: on one row each item is ``label=value``;
    ``summary`` says what the row holds (``lanes 0-7``)."""
    fields: tuple
    kind: str
    summary: str
    named: bool = False

    def items(self, value):
        """``[(label, text), ...]`` of the integer ``value``."""
        out = []
        for label, lsb, width in self.fields:
            v = (value >> lsb) & ((1 << width) - 1)
            if self.kind == "bits":
                text = "".join("1" if v >> i & 1 else "0" for i in range(width))
            elif self.kind == "hex":
                text = format(v, f"0{(width + 3) // 4}x")
            else:
                text = str(_signed(v, width) if self.kind == "signed" else v)
            out.append((label, text))
        return out

    def join(self, items):
        sep = "_" if self.kind == "bits" else " "
        return sep.join(f"{label}={text}" if self.named else text for label, text in items)


def bits_decoder(width, lsb=0):
    """A mask of ``width`` bits: items of :data:`MASK_CHUNK` bits, bit 0 first."""
    if width <= MASK_CHUNK:
        chunks = [(lsb, width)]
    else:
        chunks = [(lsb + lo, min(MASK_CHUNK, width - lo)) for lo in range(0, width, MASK_CHUNK)]
    return Decoder(tuple((f"bits {lo - lsb}-{lo - lsb + w - 1}", lo, w) for lo, w in chunks),
                   "bits", f"bits 0-{width - 1}")


def _fields_decoder(fields, params):
    """The decoder of one manifest field list (``[{"name", "lsb", "width"}]``), or None."""
    try:
        spec = tuple((str(f["name"]), int(f["lsb"]), int(f["width"])) for f in fields)
    except (KeyError, TypeError, ValueError):
        return None
    if not spec or any(lsb < 0 or width < 1 for _, lsb, width in spec):
        return None
    if all(_LANE.fullmatch(name) for name, _, _ in spec):
        fmt = params.get("number_format")
        signed = params.get("signed", fmt in (None, "int")) is True
        kind = "hex" if fmt == "fp" else "signed" if signed else "unsigned"
        return Decoder(spec, kind, f"lanes 0-{len(spec) - 1}")
    if len(spec) == 1 and spec[0][0] == "data":        # a mask: bit j is column j
        return bits_decoder(spec[0][2], spec[0][1])
    if len(spec) == 1 and spec[0][2] == 1:
        return None                                   # one flag: drawn as it is
    return Decoder(spec, "unsigned", "fields", named=True)


def read_manifest(path, strict=False):
    """The manifest at ``path`` (a JSON object with ``streams``), or None when it is none
    (``strict``: a :class:`VcdError` naming ``--manifest`` instead)."""
    what = "--manifest must be the JSON manifest spartan generate or spartan sim writes"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise OSError(0, "no regular file")
        if os.path.getsize(path) > MANIFEST_MAX_BYTES:
            raise OSError(0, f"larger than {MANIFEST_MAX_BYTES} bytes")
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        if strict:
            why = getattr(e, "strerror", None) or type(e).__name__
            raise VcdError(f"{what}, not {str(path)!r} ({why})") from None
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("streams"), dict) \
            or not all(isinstance(s, dict) for s in doc["streams"].values()):
        if strict:
            raise VcdError(f"{what}, not {str(path)!r} (no 'streams' object)")
        return None
    return doc


def manifest_mismatch(doc, hdr):
    """Why the manifest ``doc`` does not describe the design in ``hdr``'s file, or None: each
    of its streams' ``tdata`` must be a signal of the file, at the manifest's width."""
    if not doc["streams"]:
        return "it has no streams"
    for base, s in doc["streams"].items():
        var = hdr.vars.get(f"{base}_tdata")
        width = s.get("tdata_width")
        if var is None or (isinstance(width, int) and var.width != width):
            return f"{hdr.path.name} has no {base}_tdata" + (
                f" of {width} bits" if var is not None else "")
    return None


def _top_scopes(hdr):
    tops = []
    for v in hdr.vars.values():
        parts = v.ref.split(".")
        if parts[0] == "TOP" and len(parts) > 2:
            parts = parts[1:]
        if len(parts) > 1 and _TOP_NAME.fullmatch(parts[0]) and parts[0] not in tops:
            tops.append(parts[0])
    return tops


def find_manifest(hdr):
    """``(path, manifest)`` of the design in the VCD of ``hdr``, or ``(None, None)``:
    ``<top>.json`` for a top-level scope of the file, in the file's folder (``spartan sim``'s
    output) or the two above it (a test's run folder under ``sim_build/``), describing the
    file's streams."""
    folder = hdr.path.resolve().parent
    for where in (folder, folder.parent, folder.parent.parent):
        for top in _top_scopes(hdr):
            path = where / f"{top}.json"
            doc = read_manifest(path)
            if doc is not None and manifest_mismatch(doc, hdr) is None:
                return path, doc
    return None, None


def decoders(names, widths, doc=None):
    """``{name: Decoder}`` for the buses among ``names``: a stream's ``tdata`` and ``tuser``
    as the manifest ``doc`` gives their fields; other buses named like a mask, as bits."""
    out = {}
    params = doc.get("params") if doc else None
    params = params if isinstance(params, dict) else {}
    for base, s in (doc or {}).get("streams", {}).items():
        for member, key in (("tdata", "fields"), ("tuser", "tuser")):
            name = f"{base}_{member}"
            if name in names and isinstance(s.get(key), list):
                dec = _fields_decoder(s[key], params)
                if dec is not None and all(lsb + w <= widths[name] for _, lsb, w in dec.fields):
                    out[name] = dec
    for name in names:
        leaf = name.rsplit(".", 1)[-1].lower()
        if name not in out and widths[name] > 1 and any(w in leaf for w in MASK_WORDS):
            out[name] = bits_decoder(widths[name])
    return out


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
    decoders: dict = None    # name -> Decoder of the buses that are decoded (:func:`decoders`)
    manifest: Path | None = None   # the manifest they come from

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

    def bus_rows(self, name):
        """Bus ``name`` as rows of texts, one per cycle (:data:`DONT_CARE`, None for X/Z):
        ``(joined, split)``. ``joined`` is one row ``(label, kind, texts)`` with every item
        of a cycle (hex when the bus is not decoded); ``split`` one row per item (neighbours
        share one when there are more than :data:`MAX_SUBROWS`), or None when there is one
        item. ``kind`` tells how a text too long for its box is cut (:func:`_cut`)."""
        vals = self.shown(name)
        dec = (self.decoders or {}).get(name)
        if dec is None:
            texts = [v if v is None or v == DONT_CARE else format(v, "x") for v in vals]
            return (None, "hex", texts), None
        items = [v if v is None or v == DONT_CARE else dec.items(v) for v in vals]
        multi = len(dec.fields) > 1
        joined = (dec.summary, "list" if multi else dec.kind,
                  [v if v is None or v == DONT_CARE else dec.join(v) for v in items])
        if not multi:
            return joined, None
        per = -(-len(dec.fields) // MAX_SUBROWS)
        split = []
        for lo in range(0, len(dec.fields), per):
            labels = [f[0] for f in dec.fields[lo:lo + per]]
            label = labels[0] if per == 1 else f"{labels[0]}..{labels[-1]}"
            split.append((label, dec.kind if per == 1 else "list",
                          [v if v is None or v == DONT_CARE else
                           v[lo][1] if per == 1 else dec.join(v[lo:lo + per]) for v in items]))
        return joined, split


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


def open_window(path, globs=None, start=None, stop=None, *, clock="clk", cycles=DEFAULT_CYCLES,
                manifest="auto"):
    """Parse ``path`` for the signals matching ``globs`` (default: every port, streams grouped)
    between times ``start`` and ``stop`` (strings like ``"1200ns"``, or ns numbers; both
    optional). Without ``stop``, ``cycles`` cycles from ``start`` (``None``: to the end).
    ``manifest``: the block's manifest to decode buses with (a path), ``"auto"`` to look for it
    beside the file (:func:`find_manifest`), or None."""
    hdr = header(path)
    doc = None
    if manifest == "auto":
        manifest, doc = find_manifest(hdr)
    elif manifest is not None:
        doc = read_manifest(manifest, strict=True)
        why = manifest_mismatch(doc, hdr)
        if why:
            raise VcdError(f"--manifest must describe the design in {hdr.path.name}, not "
                           f"{str(manifest)!r} ({why})")
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
                  marked, reset, decoders(shown, widths, doc),
                  Path(manifest) if doc is not None else None)


def busiest(path, cycles=DEFAULT_CYCLES, *, clock="clk"):
    """``(from_ns, to_ns)`` of the ``cycles``-cycle window (out of reset) where the most streams
    transfer, then with the most transfers: the part of a long run worth a picture. Reads the
    handshakes of the whole file."""
    hdr = header(path)
    if not find_streams(n for n, v in hdr.vars.items() if v.is_port):
        raise VcdError(f"--busiest needs AXI4-Stream ports (*_tvalid, *_tready) in {hdr.path.name}")
    win = open_window(path, ["*_tvalid", "*_tready"], None, None, clock=clock, cycles=None,
                      manifest=None)
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


def first_transfer(path, *, clock="clk"):
    """Half a clock period before the first rising edge out of reset at which a stream
    transfers (valid & ready), in ns: where pictures and text start without ``--from``. None
    when no stream ever transfers (or there is no stream or no clock). Reads the file only as
    far as that edge (a span growing fourfold until the edge is in it or the file ends)."""
    hdr = header(path)
    streams = find_streams(n for n, v in hdr.vars.items() if v.is_port)
    if not streams or clock not in hdr.vars:
        return None
    reset = "rst" if "rst" in hdr.vars else None
    names = list(dict.fromkeys([clock] + ([reset] if reset else [])
                               + [m for s in streams for m in (s.valid, s.ready)]))
    horizon = 1000.0
    while True:
        tvs = load_window(hdr, names, to_ns=horizon)
        ended = horizon is None or not tvs[clock] or hdr.ns(tvs[clock][-1][0]) < horizon / 2
        edges = rising_edges(tvs[clock])
        vals = {n: values_at(tvs[n], edges) for n in names}
        for k in range(len(edges)):
            if reset and vals[reset][k] != 0:
                continue
            if any(cycle_state(vals[s.valid][k], vals[s.ready][k]) == "transfer"
                   for s in streams):
                diffs = sorted(b - a for a, b in zip(edges, edges[1:]))
                half = hdr.ns(diffs[len(diffs) // 2]) / 2 if diffs else 0.0
                return max(hdr.ns(edges[k]) - half, 0.0)
        if horizon is None:
            return None
        # The clock stopped well before the span's end: read the rest of the file once.
        horizon = None if ended else horizon * 4


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


#: Widest cycle of a picture (inches) and of text (characters) when a split bus asks for room.
CELL_CAP_IN = 0.67
CELL_CAP_TEXT = 8


def _approx(value):
    """Shorter forms of a large integer, most precise first: ``~-1.2M``, ``~-1M``."""
    for unit, scale in (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9),
                        ("M", 10**6), ("k", 10**3)):
        if abs(value) >= scale:
            q = value / scale
            return [f"~{q:.1f}{unit}", f"~{q:.0f}{unit}"]
    return []


def _cut(text, room, kind, mark):
    """``text`` in at most ``room`` characters: whole when it fits; else a decimal number
    approximated (``~1.2M``, or ``mark``), hex keeping its low digits after ``mark`` (lane 0 is
    the low end), bits and lists of items keeping their start (bit 0, lane 0) before ``mark``."""
    if len(text) <= room:
        return text
    if room <= 0:
        return ""
    if kind in ("signed", "unsigned"):
        return next((a for a in _approx(int(text)) if len(a) <= room), mark)
    if kind == "hex":
        return mark + text[-(room - 1):] if room > 1 else mark
    return text[:room - 1] + mark


def _fits(texts, breaks, room):
    """Whether each text of a row fits its box (``room(cycles)`` characters)."""
    return all(t is None or t == DONT_CARE or len(t) <= room(b - a)
               for a, b, t in _segments(texts, breaks))


def _bus_layout(win, room, base, cap, need):
    """``(cell, {bus: rows})``: the width of a cycle (``base``, or wider, up to ``cap``, so that
    the longest item of a split bus fits one cycle: ``need(characters)``) and each bus's rows
    (:meth:`Window.bus_rows`): one row when every cycle's whole text fits its box
    (``room(cell, cycles)`` characters), else one per item."""
    layouts = {n: win.bus_rows(n) for n in win.signals if win.widths[n] > 1}
    breaks = {n: win.beat_starts(n) for n in layouts}

    def fits(name, row, cell):
        return _fits(row[2], breaks[name], lambda cycles: room(cell, cycles))

    cell = base
    for name, (joined, split) in layouts.items():
        if split and not fits(name, joined, base):
            longest = max((len(t) for r in split for t in r[2] if t not in (None, DONT_CARE)),
                          default=1)
            cell = max(cell, min(cap, need(longest)))
    return cell, {name: [joined] if not split or fits(name, joined, cell) else split
                  for name, (joined, split) in layouts.items()}


def _rows(win, bus=None):
    """Display rows: ``("group", stream)`` headers, ``("signal", name)`` for one-bit signals and
    ``("bus", (name, i, row, count))`` for row ``i`` of ``count`` of a bus (``bus``: the rows of
    :func:`_bus_layout`; default: every bus on one row)."""
    rows, current = [], object()
    for name in win.signals:
        s = stream_of(name, win.streams)
        if s is not current:
            rows.append(("group", s))
            current = s
        if win.widths[name] == 1:
            rows.append(("signal", name))
            continue
        mine = bus[name] if bus is not None else [win.bus_rows(name)[0]]
        rows += [("bus", (name, i, row, len(mine))) for i, row in enumerate(mine)]
    return rows


def _label(win, kind, item, text=False):
    """A row's label: the signal's name (and a bus's range in a picture), a decoded row's
    contents (``lanes 0-7``, ``lane3``), later rows of a split bus only their item."""
    if kind != "bus":
        return item
    name, i, (label, _, _), _ = item
    if i:
        return (" " * len(name) + " " + label) if text else label
    head = name if text else f"{name} [{win.widths[name] - 1}:0]"
    return head + (f" {label}" if label else "")


#: A picture's bus text (points), a monospace digit's width in it (inches) and a hexagon's
#: pointed ends (cycles); the labels of a split bus's rows (points).
_BUS_FONT = 7.0
_CHAR_IN = _BUS_FONT * 0.62 / 72
_TIP = 0.12
_SPLIT_LABEL_FONT = 7.0
#: Heights of a picture's rows, inches: a signal or bus, a group header, a split bus's row.
_ROW_H, _GROUP_H, _SPLIT_H = 0.34, 0.30, 0.26


def _room(cell, cycles):
    """Characters of bus text that fit a box of ``cycles`` cycles ``cell`` inches wide."""
    return int((cycles * cell - 2 * _TIP * cell - 0.02) / _CHAR_IN)


def _picture_axes(plt, n, cell, label_in, heights):
    """The figure and its axes for ``n`` cycles of ``cell`` inches and rows of ``heights``
    inches (one unit a signal's row), with ``label_in`` inches of labels on the left."""
    fig_w = label_in + n * cell + 0.3
    fig_h = sum(heights) + 1.25
    fig = plt.figure(figsize=(fig_w, fig_h), dpi=110)
    ax = fig.add_axes([label_in / fig_w, 0.75 / fig_h, (n * cell) / fig_w,
                       sum(heights) / fig_h])
    ax.set_xlim(0, n)
    ax.set_ylim(sum(heights) / _ROW_H, 0)
    ax.set_yticks([])
    for spine in ("left", "right", "top"):
        ax.spines[spine].set_visible(False)
    return fig, ax


def _draw_signal(ax, vals, top, bot, mid):
    """A one-bit signal's trace: high, low, X (a hatched box) and don't-care (grey)."""
    from matplotlib.patches import Rectangle
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


def _draw_bus(ax, win, name, item, cell, top, bot, mid):
    """A bus row (``item`` of :func:`_rows`): a hexagon a value, its text cut to fit."""
    from matplotlib.patches import Polygon
    _, cut_kind, texts = item[2]
    d = _TIP
    for a, b, v in _segments(texts, win.beat_starts(name)):
        if v == DONT_CARE:
            ax.plot([a, b], [mid, mid], color="#b0b0b0", lw=1.0)
            continue
        pts = [(a, mid), (a + d, top), (b - d, top), (b, mid), (b - d, bot), (a + d, bot)]
        face = "#ff9896" if v is None else "#f4f4f4"
        ax.add_patch(Polygon(pts, closed=True, facecolor=face, edgecolor="black",
                             lw=0.9, hatch="///" if v is None else None))
        text = _cut("x" if v is None else v, _room(cell, b - a), cut_kind, "…")
        if text:
            ax.text((a + b) / 2, mid, text, ha="center", va="center",
                    fontsize=_BUS_FONT, family="monospace")


def _draw_rows(ax, win, rows, heights, cell):
    """Every row of :func:`_rows`, top down. Returns ``(ticks, group_spans)``: each row's
    ``(middle, label, label size)``, and each stream's rows' span ``[top, bottom]``."""
    y, ticks, group_spans = 0.0, [], {}
    for (kind, item), h in zip(rows, heights):
        hh = h / _ROW_H
        if kind == "group":
            title = item.base if item else "other signals"
            ax.text(-0.1, y + hh * 0.62, title, ha="right", va="center",
                    fontsize=8.5, weight="bold", clip_on=False,
                    transform=ax.transData)
            if item is not None:
                group_spans[item.base] = [y, y + hh]
            y += hh
            continue
        name = item if kind == "signal" else item[0]
        s = stream_of(name, win.streams)
        if s is not None:
            group_spans[s.base][1] = y + hh
        pad = 0.15 * hh
        top, bot, mid = y + pad, y + hh - pad, y + hh / 2
        split = kind == "bus" and item[3] > 1
        ticks.append((mid, _label(win, kind, item), _SPLIT_LABEL_FONT if split else 8))
        if kind == "signal":
            _draw_signal(ax, win.shown(name), top, bot, mid)
        else:
            _draw_bus(ax, win, name, item, cell, top, bot, mid)
        y += hh
    return ticks, group_spans


def _shade(ax, win, group_spans, height):
    """Handshake shading behind each stream's rows, a bar at each packet's last transfer, and
    a grey band over every reset cycle (``height``: all rows', in signal rows)."""
    from matplotlib.patches import Rectangle
    n = len(win.edges)
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
    for k in range(n):
        if win.in_reset(k):
            ax.add_patch(Rectangle((k, 0), 1, height, facecolor="#bbbbbb", alpha=0.35,
                                   edgecolor="none", zorder=4))


def _label_axes(ax, win, ticks):
    """The rows' labels, a line between cycles, and the cycles' edge numbers and times."""
    n = len(win.edges)
    ax.set_yticks([mid for mid, _, _ in ticks])
    ax.set_yticklabels([label for _, label, _ in ticks], fontsize=8, family="monospace")
    for tick, (_, _, size) in zip(ax.get_yticklabels(), ticks):
        tick.set_fontsize(size)
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


def _legend_and_title(fig, win, label_in):
    """The shading's legend above the rows, and the file and its decoding at the top."""
    from matplotlib.patches import Patch
    fig_w, fig_h = fig.get_size_inches()
    legend = [Patch(facecolor=_COLOURS[k], alpha=_ALPHA[k] + 0.2, label=text) for k, text in
              (("transfer", "transfer (valid & ready)"), ("stall", "stall (valid & !ready)"),
               ("starved", "starved (ready & !valid)"))]
    legend.append(Patch(facecolor="white", edgecolor="#999999", label="idle"))
    legend.append(Patch(facecolor="#6a3d9a", label="tlast transfer (end of packet)"))
    if any(win.in_reset(k) for k in range(len(win.edges))):
        legend.append(Patch(facecolor="#bbbbbb", alpha=0.6, label="in reset"))
    fig.legend(handles=legend, loc="upper left", ncol=len(legend), fontsize=8, frameon=False,
               bbox_to_anchor=(label_in / fig_w - 0.1 / fig_w, 1 - 0.02 / fig_h))
    fig.text(0.005, 1 - 0.35 / fig_h, f"{win.path}    {_decoding_note(win)}", fontsize=8,
             color="#555555", va="top")


def render_image(win, out):
    """Draw ``win`` into ``out`` (``.png`` or ``.svg``)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, small

    n = len(win.edges)
    if n > MAX_PICTURE_CYCLES:
        raise VcdError(f"a picture shows at most {MAX_PICTURE_CYCLES} cycles, not {n}: narrow "
                       "--from/--to (or use --streams for the whole run)")
    cell, bus = _bus_layout(win, _room, max(0.26, min(0.9, 17.0 / n)), CELL_CAP_IN,
                            lambda chars: (chars * _CHAR_IN + 0.025) / (1 - 2 * _TIP))
    rows = _rows(win, bus)
    longest = max(len(_label(win, kind, item)) for kind, item in rows if kind != "group")
    label_in = max(2.3, longest * 8 * 0.62 / 72 + 0.3)
    heights = [_GROUP_H if kind == "group" else
               _SPLIT_H if kind == "bus" and item[3] > 1 else _ROW_H for kind, item in rows]
    fig, ax = _picture_axes(plt, n, cell, label_in, heights)
    ticks, group_spans = _draw_rows(ax, win, rows, heights, cell)
    _shade(ax, win, group_spans, sum(heights) / _ROW_H)
    _label_axes(ax, win, ticks)
    _legend_and_title(fig, win, label_in)
    _save_atomically(fig, out)
    plt.close(fig)


def _decoding_note(win, cut="…"):
    """What the bus texts are: where the decoding comes from, the order of lanes and bits."""
    decs = (win.decoders or {}).values()
    kinds = {d.kind for d in decs if not d.named}
    parts = []
    if kinds & {"signed", "unsigned", "hex"}:
        parts.append("lanes in decimal (fp lanes in hex), lane 0 first")
    if any(d.named for d in decs):
        parts.append("records by field")
    if "bits" in kinds:
        parts.append("masks as bits, bit 0 first")
    source = f"decoded with {win.manifest.name}: " if win.manifest else ""
    text = (source + "; ".join(parts) + "; other buses in hex") if parts else "buses in hex"
    return f"{text}; " + ("~ = cut or rounded" if cut == "~" else f"{cut} = cut, ~ = rounded")


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


def render_text(win, cell=None):
    """The window as ASCII: ``cell`` characters per cycle (None: 2, or up to
    :data:`CELL_CAP_TEXT` so that a split bus's items fit one cycle); one line per signal (a
    decoded bus on one line, or one per lane or mask chunk when they do not fit), and per
    stream a handshake line (``==`` transfer, ``=|`` transfer with tlast, ``!!`` stall, ``..``
    starved, blank idle, ``rr`` reset)."""
    n = len(win.edges)
    if n > MAX_PICTURE_CYCLES:
        raise VcdError(f"--text shows at most {MAX_PICTURE_CYCLES} cycles, not {n}: narrow "
                       "--from/--to (or use --streams for the whole run)")

    def room(cell, cycles):
        return cycles * cell - 1

    if cell is None:
        cell, bus = _bus_layout(win, room, 2, CELL_CAP_TEXT, lambda chars: chars + 1)
    else:
        cell, bus = _bus_layout(win, room, cell, cell, lambda chars: cell)
    rows = _rows(win, bus)
    names = [_label(win, kind, item, text=True) for kind, item in rows if kind != "group"]
    label_w = max([len(x) + 2 for x in names] + [len(s.base) + 10 for s in win.streams] + [6]) + 2
    lines = []
    scale = [" "] * (n * cell)
    for k in range(n):
        number = str(win.index0 + k)
        if (win.index0 + k) % 5 == 0 and k * cell + len(number) <= n * cell:
            scale[k * cell:k * cell + len(number)] = number
    lines.append("cycle".ljust(label_w) + "".join(scale).rstrip())
    for kind, item in rows:
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
        if kind == "signal":
            vals = win.shown(item)
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
            _, cut_kind, texts = item[2]
            for a, b, v in _segments(texts, win.beat_starts(item[0])):
                if v == DONT_CARE:
                    text += " " * ((b - a) * cell)
                    continue
                space = room(cell, b - a)
                text += "|" + _cut("x" if v is None else v, space, cut_kind, "~").ljust(space)
        lines.append((("  " + _label(win, kind, item, text=True)).ljust(label_w) + text).rstrip())
    lines.append(f"{win.path.name}: cycles {win.index0}-{win.index0 + n - 1}, "
                 f"{win.ns(0):g}-{win.ns(n - 1):g} ns. Every {cell} characters are one cycle "
                 "(the value its closing rising edge samples); "
                 f"{_decoding_note(win, cut='~')}; "
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
                   help="window start, e.g. 200ns or 1.5us (a bare number is ns; default: the "
                        "first transfer out of reset for pictures and text, 0 for --streams "
                        "and with --to)")
    p.add_argument("--to", dest="stop", metavar="T",
                   help=f"window end (default: {DEFAULT_CYCLES} cycles for pictures and text, "
                        "the end of the file for --streams)")
    p.add_argument("--busiest", action="store_true",
                   help=f"instead of --from/--to: the {DEFAULT_CYCLES} cycles where the most "
                        "streams transfer")
    p.add_argument("--clock", default="clk", help="clock signal (default clk)")
    p.add_argument("--cell", type=int, default=None, metavar="N",
                   help="with --text: characters per cycle (default 2, or up to "
                        f"{CELL_CAP_TEXT} when lanes or mask bits need it; wider shows more)")
    p.add_argument("--manifest", metavar="FILE.json",
                   help="the block's manifest, to decode lanes and masks (default: <top>.json "
                        "beside the VCD or up to two folders above it, when there is one)")
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
    from .usage import UsageError
    try:
        return _waves(args)
    except VcdError as e:
        raise UsageError(str(e)) from None


def _waves(args):
    from .usage import check_output_file, require_modules
    if args.output is not None:
        if Path(args.output).suffix.lower() not in (".png", ".svg"):
            raise VcdError(f"-o must name a .png or .svg file, not {args.output!r}")
        require_modules("spartan waves -o (a picture)", *PICTURE_EXTRA)
        check_output_file(args.output, "-o", new_folders=True)
    if args.cell is not None and not 1 <= args.cell <= 40:
        raise VcdError(f"--cell must be an integer from 1 to 40, not {args.cell}")
    if args.json and not args.streams:
        raise VcdError("--json goes with --streams")
    cycles = None if args.streams else DEFAULT_CYCLES
    start, stop = args.start, args.stop
    if args.busiest:
        if start is not None or stop is not None:
            raise VcdError("--busiest chooses the window itself: leave out --from and --to")
        start, stop = busiest(args.file, DEFAULT_CYCLES, clock=args.clock)
    elif start is None and stop is None and not args.streams:
        start = first_transfer(args.file, clock=args.clock)    # None: from the start
    win = open_window(args.file, args.signals, start, stop, clock=args.clock, cycles=cycles,
                      manifest=args.manifest if args.manifest is not None else "auto")
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
