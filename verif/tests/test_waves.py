"""Waveform tools (``spartan sim``, ``spartan waves``): pictures, text and the stream report on a
hand-written VCD whose every cycle is known; the report against the testbench's own per-cycle
counts on simulated waveforms (Verilator and Icarus); the two-command path from ``spartan sim``
to a PNG; and one-line errors with exit status 2 and nothing written."""

import json
import os
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from spartan_rtl import runner
from spartan_rtl.waves import open_window, render_text, stream_report
from verif.tests.helpers import small_vcd


@pytest.fixture
def vcd(tmp_path):
    return small_vcd(tmp_path / "small.vcd")


CLI = [sys.executable, "-c", "import sys; from spartan_rtl.cli import main; sys.exit(main())"]


def spartan(*args, env=None):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env)


def test_window_samples_each_cycle(vcd):
    win = open_window(vcd, ["s_axis_*", "count"], "20ns", "60")
    assert [win.ns(k) for k in range(len(win.edges))] == [25, 35, 45, 55]
    assert win.index0 == 2
    assert win.signals == ["s_axis_tdata", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast",
                           "count"]
    assert win.values["count"] == [2, 3, 4, 5]
    assert win.values["s_axis_tdata"] == [0xA1, 0xFF, 0xB2, 0x00]
    assert win.shown("s_axis_tdata") == [0xA1, "-", 0xB2, "-"]
    assert [win.state(win.streams[0], k) for k in range(4)] == \
        ["transfer", "starved", "transfer", "idle"]


def test_report_counts_every_cycle(vcd):
    rep = stream_report(open_window(vcd, cycles=None))
    assert (rep["cycles"], rep["reset_cycles"]) == (7, 1)
    s = rep["streams"]["s_axis"]
    assert {k: s[k] for k in ("transfer", "stall", "starved", "idle", "beats", "packets")} == \
        dict(transfer=4, stall=1, starved=1, idle=1, beats=4, packets=2)
    assert s["beats_per_packet"] == 2.0 and s["direction"] == "in"
    win = stream_report(open_window(vcd, None, "20", "60"))["streams"]["s_axis"]
    assert (win["transfer"], win["starved"], win["idle"], win["packets"]) == (2, 1, 1, 1)


def test_busiest_window(vcd):
    """The 3-cycle window out of reset with the most transfers: edges 2-4 (the first of the
    windows with two), i.e. from half a period before edge 2 to half a period after edge 4."""
    from spartan_rtl.waves import busiest
    assert busiest(vcd, 3) == (20.0, 50.0)


def test_text_rendering(vcd):
    text = render_text(open_window(vcd, ["s_axis_*", "count"], "10", "80"), cell=3)
    rows = {line[:18].strip(): line[18:] for line in text.splitlines()[:7]}
    assert rows["s_axis handshake"] == "!!!===...==|   =====|"
    assert rows["s_axis_tdata"] == "|a1      |b2   |c3|c3"  # blank: tvalid low
    assert rows["s_axis_tvalid"] == "------\\__/--\\__/-----"
    assert rows["count"] == "|1 |2 |3 |4 |5 |6 |7"
    assert text.splitlines()[0].split()[:2] == ["cycle", "5"]


def _svg_texts(path):
    return [el.text or "" for el in ET.parse(path).iter() if el.tag.endswith("text")]


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_picture_of_requested_signals_and_window(vcd, tmp_path, suffix):
    out = tmp_path / f"w.{suffix}"
    res = spartan("waves", str(vcd), "--signals", "s_axis_tv*", "s_axis_tdata",
                  "--from", "30ns", "--to", "70ns", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "cycles 3-6" in res.stdout
    if suffix == "png":
        from matplotlib.image import imread
        data = out.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        h, w, _ = imread(out).shape
        assert w > 600 and 150 < h < 600, (w, h)
        return
    texts = _svg_texts(out)
    joined = " ".join(texts)
    assert "s_axis_tvalid" in joined and "s_axis_tdata [7:0]" in joined
    assert "s_axis_tready" not in joined and "count" not in joined
    assert [t for t in texts if t in ("3", "4", "5", "6")] == ["3", "4", "5", "6"]  # x axis
    assert not any(t in ("2", "7") for t in texts)
    assert "b2" in texts and "c3" in texts and "a1" not in texts  # window's data, hex


def _one_line_error(res, *fragments):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spartan: error: "), res.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.mark.parametrize("args, fragments", [
    (["--signals", "nosuch*"], ["--signals 'nosuch*' matches no signal", "s_axis_tdata"]),
    (["--from", "500ns", "--to", "900ns"], ["holds no rising edge of 'clk'"]),
    (["--from", "60", "--to", "40"], ["--to must be later than --from"]),
    (["--from", "soon"], ["--from must be a time such as"]),
    (["--clock", "clock"], ["no clock signal 'clock'"]),
])
def test_bad_requests(vcd, tmp_path, args, fragments):
    out = tmp_path / "w.png"
    for what in (["-o", str(out)], ["--text"], ["--streams"]):
        _one_line_error(spartan("waves", str(vcd), *args, *what), *fragments)
    assert not out.exists()


@pytest.mark.parametrize("content", [b"\x00\x01\x02binary" * 100, b"hello, not a waveform\n",
                                     b""])
def test_not_a_vcd(tmp_path, content):
    bad = tmp_path / "bad.vcd"
    bad.write_bytes(content)
    out = tmp_path / "w.png"
    _one_line_error(spartan("waves", str(bad), "-o", str(out)), "must be a VCD file")
    _one_line_error(spartan("waves", str(tmp_path / "missing.vcd"), "--streams"),
                    "must be a readable VCD file")
    assert not out.exists()


def test_window_too_long_for_a_picture(tmp_path):
    long = tmp_path / "long.vcd"
    lines = ["$timescale 1ns $end", "$scope module top $end", "$var wire 1 ! clk $end",
             "$upscope $end", "$enddefinitions $end"]
    for k in range(700):
        lines += [f"#{10 * k}", "0!", f"#{10 * k + 5}", "1!"]
    long.write_text("\n".join(lines) + "\n")
    out = tmp_path / "w.svg"
    for what in (["-o", str(out)], ["--text"]):
        _one_line_error(spartan("waves", str(long), "--signals", "clk", "--to", "7000", *what),
                        "at most 600 cycles, not 700")
    assert not out.exists()
    assert spartan("waves", str(long), "--signals", "clk", "--to", "2000", "-o",
                   str(out)).returncode == 0


def test_bad_output_name(vcd, tmp_path):
    _one_line_error(spartan("waves", str(vcd), "-o", str(tmp_path / "w.jpg")),
                    "-o must name a .png or .svg file")
    assert list(tmp_path.iterdir()) == [vcd]


# --- decoded buses and the default window ------------------------------------------------------
#
# A design ``spartan_demo`` with a 4-lane stream of 8-bit elements (``s_axis``) and a 12-bit
# mask stream padded to 16 bits (``m_axis_mask``); reset for two cycles, idle for three more,
# then traffic: the first transfer is on edge 5.

DEMO_SIGNALS = [("clk", 1), ("rst", 1), ("s_axis_tdata", 32), ("s_axis_tvalid", 1),
                ("s_axis_tready", 1), ("m_axis_mask_tdata", 16), ("m_axis_mask_tvalid", 1),
                ("m_axis_mask_tready", 1)]
#         rst  s valid ready  s_axis_tdata  m valid ready  mask (pad bits 15:12 set)
DEMO = [(1, 0, 0, 0x00000000, 0, 0, 0x0000),
        (1, 0, 0, 0x00000000, 0, 0, 0x0000),
        (0, 0, 1, 0x11223344, 0, 1, 0xF000),   # starved: payloads are don't-care
        (0, 0, 1, 0x11223344, 0, 0, 0xF000),
        (0, 1, 0, 0x80FF7F01, 0, 0, 0xF000),   # stall
        (0, 1, 1, 0x80FF7F01, 1, 0, 0xF801),   # transfer (edge 5), mask stalls
        (0, 1, 1, 0x05FE0A9C, 1, 1, 0xF801),   # transfers
        (0, 1, 1, 0x00000000, 1, 1, 0x0A5C),
        (0, 0, 0, 0x00000000, 0, 0, 0x0000)]
DEMO_COLUMNS = ["rst", "s_axis_tvalid", "s_axis_tready", "s_axis_tdata", "m_axis_mask_tvalid",
                "m_axis_mask_tready", "m_axis_mask_tdata"]
DEMO_MANIFEST = {
    "block": "demo", "top": "spartan_demo",
    "params": {"lanes": 4, "width": 8, "number_format": "int"},
    "streams": {
        "s_axis": {"dir": "in", "beat_bits": 32, "tdata_width": 32, "has_tlast": False,
                   "fields": [{"name": f"lane{i}", "lsb": 8 * i, "width": 8}
                              for i in range(4)]},
        "m_axis_mask": {"dir": "out", "beat_bits": 12, "tdata_width": 16, "has_tlast": False,
                        "fields": [{"name": "data", "lsb": 0, "width": 12}]}}}


def demo_vcd(folder, manifest=True, scope="spartan_demo"):
    """The demo design's VCD in ``folder`` (and its manifest beside it)."""
    ids = {name: chr(33 + i) for i, (name, _) in enumerate(DEMO_SIGNALS)}
    width = dict(DEMO_SIGNALS)
    lines = ["$timescale 1ns $end", f"$scope module {scope} $end"]
    lines += [f"$var wire {w} {ids[n]} {n}" + (f" [{w - 1}:0]" if w > 1 else "") + " $end"
              for n, w in DEMO_SIGNALS]
    lines += ["$upscope $end", "$enddefinitions $end"]

    def value(name, v):
        return f"b{v:b} {ids[name]}" if width[name] > 1 else f"{v}{ids[name]}"

    for k, row in enumerate(DEMO):
        lines += [f"#{10 * k}", value("clk", 0)]
        lines += [value(n, v) for n, v in zip(DEMO_COLUMNS, row)]
        lines += [f"#{10 * k + 5}", value("clk", 1)]
    lines += [f"#{10 * len(DEMO)}", value("clk", 0)]
    path = folder / "dump.vcd"
    path.write_text("\n".join(lines) + "\n")
    if manifest:
        (folder / "spartan_demo.json").write_text(json.dumps(DEMO_MANIFEST))
    return path


def lanes_of(word, lanes=4, width=8):
    """The signed lanes of ``word``, lane 0 first: the reference the decoder must agree with."""
    out = []
    for i in range(lanes):
        v = (word >> (i * width)) & ((1 << width) - 1)
        out.append(str(v - (1 << width) if v >> (width - 1) else v))
    return out


def test_lanes_and_mask_decoded_from_manifest(tmp_path):
    """With the manifest beside the VCD, every cycle's lanes read as the signed elements of
    the VCD's tdata and the mask as its 12 payload bits, bit 0 first (pad bits dropped)."""
    from spartan_rtl.waves import open_window
    win = open_window(demo_vcd(tmp_path), None, "0", "90")
    assert win.manifest == tmp_path / "spartan_demo.json"
    joined, split = win.bus_rows("s_axis_tdata")
    assert [label for label, _, _ in split] == ["lane0", "lane1", "lane2", "lane3"]
    for k, row in enumerate(DEMO):
        valid, word = row[1], row[3]
        expect = lanes_of(word) if valid else ["-"] * 4
        assert [texts[k] for _, _, texts in split] == expect, k
        assert joined[2][k] == (" ".join(expect) if valid else "-")
    assert split[0][2][4:7] == ["1", "1", "-100"] and split[3][2][4] == "-128"
    joined, split = win.bus_rows("m_axis_mask_tdata")
    assert joined[0] == "bits 0-11" and [r[0] for r in split] == ["bits 0-7", "bits 8-11"]
    for k, row in enumerate(DEMO):
        bits = "".join(str(row[6] >> j & 1) for j in range(12))
        assert joined[2][k] == (f"{bits[:8]}_{bits[8:]}" if row[4] else "-"), k
        assert [r[2][k] for r in split] == ([bits[:8], bits[8:]] if row[4] else ["-", "-"]), k
    assert joined[2][5] == "10000000_0001" and joined[2][7] == "00111010_0101"


def test_text_and_picture_show_decoded_values(tmp_path):
    vcd = demo_vcd(tmp_path)
    res = spartan("waves", str(vcd), "--text", "--from", "0", "--to", "90")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    rows = {line.split("|")[0].strip(): line for line in lines if "|" in line}
    assert "s_axis_tdata lane0" in rows and "lane3" in rows, rows
    assert "m_axis_mask_tdata bits 0-7" in rows and "bits 8-11" in rows, rows
    cells = [c.strip() for c in rows["lane1"].split("|")[1:]]
    assert cells == lanes_of(0x80FF7F01)[1:2] + lanes_of(0x05FE0A9C)[1:2] + ["0"]
    assert "decoded with spartan_demo.json" in res.stdout
    out = tmp_path / "w.svg"
    res = spartan("waves", str(vcd), "--from", "0", "--to", "90", "-o", str(out))
    assert res.returncode == 0, res.stderr
    texts = _svg_texts(out)
    # A beat's four lanes on one row if they fit its box, else a row per lane.
    for word in (0x80FF7F01, 0x05FE0A9C):
        lanes = lanes_of(word)
        assert " ".join(lanes) in texts or all(lane in texts for lane in lanes), (lanes, texts)
    assert "lane3" in texts or "s_axis_tdata [31:0] lanes 0-3" in texts, texts
    assert "10000000_0001" in texts or {"10000000", "0001"} <= set(texts), texts
    assert "00111010_0101" in texts or {"00111010", "0101"} <= set(texts), texts
    assert "80ff7f01" not in texts and "f801" not in texts


def test_without_manifest_masks_are_bits_and_the_rest_hex(tmp_path):
    vcd = demo_vcd(tmp_path, manifest=False)
    from spartan_rtl.waves import open_window
    win = open_window(vcd, None, "0", "90")
    assert win.manifest is None
    assert win.bus_rows("s_axis_tdata")[0][2][5] == "80ff7f01"
    # The whole 16-bit bus, pad bits included, in chunks: named like a mask.
    assert win.bus_rows("m_axis_mask_tdata")[0][2][5] == "10000000_00011111"
    # A manifest of another design beside it is not used.
    other = dict(DEMO_MANIFEST, streams={"s_axis": dict(DEMO_MANIFEST["streams"]["s_axis"],
                                                        tdata_width=64)})
    (tmp_path / "spartan_demo.json").write_text(json.dumps(other))
    assert open_window(vcd, None, "0", "90").manifest is None
    # ... unless named: then it is an error.
    res = spartan("waves", str(vcd), "--text", "--manifest", str(tmp_path / "spartan_demo.json"))
    _one_line_error(res, "--manifest must describe the design in dump.vcd",
                    "no s_axis_tdata of 64 bits")


def test_manifest_found_above_a_test_run_folder(tmp_path):
    """A test's waveform (sim_build/<block>/<build>/runs/<test>/dump.vcd) finds the manifest
    of its build two folders up; --manifest names one anywhere."""
    run = tmp_path / "build" / "runs" / "t"
    run.mkdir(parents=True)
    vcd = demo_vcd(run, manifest=False)
    (tmp_path / "build" / "spartan_demo.json").write_text(json.dumps(DEMO_MANIFEST))
    from spartan_rtl.waves import open_window
    assert open_window(vcd, None, "0", "90").manifest == tmp_path / "build" / "spartan_demo.json"
    elsewhere = tmp_path / "m.json"
    elsewhere.write_text(json.dumps(DEMO_MANIFEST))
    (tmp_path / "build" / "spartan_demo.json").unlink()
    res = spartan("waves", str(vcd), "--text", "--manifest", str(elsewhere))
    assert res.returncode == 0 and "decoded with m.json" in res.stdout, res.stderr


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"streams": 3}'])
def test_bad_manifest_option(tmp_path, content):
    vcd = demo_vcd(tmp_path, manifest=False)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = tmp_path / "w.png"
    for what in (["-o", str(out)], ["--text"]):
        _one_line_error(spartan("waves", str(vcd), "--manifest", str(bad), *what),
                        "--manifest must be the JSON manifest", "bad.json")
    _one_line_error(spartan("waves", str(vcd), "--text", "--manifest", str(tmp_path / "no")),
                    "--manifest must be the JSON manifest")
    assert not out.exists()


def test_default_window_starts_at_first_transfer(tmp_path, vcd):
    """Without --from/--to a picture or text starts at the first edge out of reset with a
    transfer on any stream (edge 5 of the demo; edge 2 of the small VCD); --from, --to and
    --busiest still choose their own."""
    from spartan_rtl.waves import first_transfer
    demo = demo_vcd(tmp_path)
    assert first_transfer(demo) == 50.0 and first_transfer(vcd) == 20.0
    res = spartan("waves", str(demo), "--text")
    assert res.returncode == 0, res.stderr
    assert "cycles 5-8, 55-85 ns" in res.stdout and "r" not in res.stdout.splitlines()[1][20:]
    res = spartan("waves", str(vcd), "-o", str(tmp_path / "w.png"))
    assert res.returncode == 0 and "cycles 2-7" in res.stdout, res.stderr
    res = spartan("waves", str(demo), "--text", "--from", "0")
    assert "cycles 0-8" in res.stdout, res.stdout
    res = spartan("waves", str(demo), "--text", "--to", "40")
    assert "cycles 0-3" in res.stdout, res.stdout
    res = spartan("waves", str(demo), "--text", "--busiest")
    assert "cycles 0-8" in res.stdout, res.stdout     # 48 cycles or the whole file
    # The report still covers the whole file.
    res = spartan("waves", str(demo), "--streams", "--json")
    assert json.loads(res.stdout)["reset_cycles"] == 2
    # No transfer at all: from the start of the file.
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    text = demo_vcd(quiet).read_text()
    # Both tvalid (codes $ and ') held low.
    (quiet / "dump.vcd").write_text(re.sub(r"^1([$'])$", r"0\1", text, flags=re.M))
    assert first_transfer(quiet / "dump.vcd") is None
    res = spartan("waves", str(quiet / "dump.vcd"), "--text")
    assert "cycles 0-8" in res.stdout, res.stdout


def test_split_rows_when_lanes_do_not_fit(tmp_path):
    """Lanes share one row while every beat's lanes fit its box, else one row per lane; a
    wide --cell fits them on one row."""
    vcd = demo_vcd(tmp_path)
    narrow = spartan("waves", str(vcd), "--text", "--from", "0", "--to", "90", "--cell", "4")
    wide = spartan("waves", str(vcd), "--text", "--from", "0", "--to", "90", "--cell", "18")
    assert "lane3" in narrow.stdout and "lane3" not in wide.stdout
    assert "|1 127 -1 -128" in wide.stdout and "s_axis_tdata lanes 0-3" in wide.stdout
    # Too narrow for a number: cut to ~, never a wrong number.
    tiny = spartan("waves", str(vcd), "--text", "--from", "0", "--to", "90", "--cell", "2")
    lane3 = next(line for line in tiny.stdout.splitlines() if line.strip().startswith("lane3"))
    assert "-128" not in lane3 and "~" in lane3 and "|5" in lane3


# --- simulated waveforms ---------------------------------------------------------------------

@pytest.mark.parametrize("sim", runner.sims())
def test_report_matches_testbench_census(sim):
    """The monitor under the generic random stimulus: per stream, the cycles the waveform
    report finds in each state (and the packets) are exactly those the testbench counted
    cycle by cycle while driving it (AxisSink.cycles on outputs, the same count on inputs)."""
    test_dir = runner.run("monitor", "spartan_rtl.tb.tb_streams", None, sim=sim, name="census",
                          waves=True, testcase="random_streams", seed=1234,
                          args={"beats": 150})
    census = json.loads((test_dir / "census.json").read_text())
    # The census counts edges after its start snapshot (taken at a rising edge) up to and
    # including its end snapshot's edge.
    res = spartan("waves", str(test_dir / "dump.vcd"), "--streams", "--json",
                  "--from", f"{census['from_ns'] + census['period_ns'] / 2}ns",
                  "--to", f"{census['to_ns']}ns")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)["streams"]
    assert set(report) == set(census["streams"]) == {"s_axis", "m_axis", "m_axis_stats"}
    for name, counted in census["streams"].items():
        got = report[name]
        for key in ("transfer", "stall", "starved", "idle"):
            assert got[key] == counted[key], (name, key, got, counted)
        if "packets" in got:
            assert got["packets"] == counted["packets"], (name, got, counted)
    # The stimulus exercised every state on the input, and the input saw all 150 beats.
    s = census["streams"]["s_axis"]
    assert s["transfer"] == 150 and min(s["stall"], s["starved"], s["idle"]) > 10, s


def test_sim_then_picture(tmp_path):
    """The two commands of docs/waveforms.md: ``spartan sim`` leaves a waveform and a GTKWave
    save file with every stream grouped (data, valid, ready, last); ``spartan waves`` draws it."""
    out = tmp_path / "monitor"
    res = spartan("sim", "monitor", "--seed", "7", "--cycles", "60", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "seed 7" in res.stdout
    vcd = out / "dump.vcd"
    assert vcd.exists() and (out / "spartan_monitor.json").exists()
    # --cycles: the waveform stops soon after 60 cycles of the 10 ns clock (the whole stimulus
    # with this seed runs for over 100).
    last = max(int(m) for m in re.findall(r"^#(\d+)", vcd.read_text(), re.M))
    assert 58 * 10_000 <= last <= 62 * 10_000, last  # ps
    gtkw = (out / "monitor.gtkw").read_text().splitlines()
    groups = [line[1:] for line in gtkw if line.startswith("-")]
    assert groups == ["s_axis (in)", "s_axis (in)", "m_axis (out)", "m_axis (out)",
                      "m_axis_stats (out)", "m_axis_stats (out)"]
    start = gtkw.index("-s_axis (in)")
    names = [line.rsplit(".", 1)[-1] for line in gtkw[start:start + 12]
             if line.startswith("spartan_monitor.")]
    assert names == ["s_axis_tdata[63:0]", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast"]
    vcd_text = vcd.read_text()
    for line in gtkw:
        if line.startswith("spartan_monitor."):
            leaf = re.sub(r"\[\d+:0\]$", "", line.split(".", 1)[1])
            assert re.search(rf"\$var wire \d+ \S+ {re.escape(leaf)}( \[|\s+\$end)", vcd_text), line
    png = out / "monitor.png"
    res = spartan("waves", str(vcd), "-o", str(png))
    assert res.returncode == 0, res.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"
    # The manifest spartan sim left beside the waveform decodes it: each cycle's lanes are the
    # signed bytes of tdata as another reader (vcdvcd) sees them, from the first transfer on.
    from vcdvcd import VCDVCD

    from spartan_rtl.vcd import find_signal, rising_edges, values_at
    from spartan_rtl.waves import first_transfer
    win = open_window(vcd, ["s_axis_t*"], first_transfer(vcd))
    assert win.manifest == out / "spartan_monitor.json"
    other = VCDVCD(str(vcd), store_tvs=True)
    edges = rising_edges(other[find_signal(other.signals, "clk")].tv)
    data = "s_axis_tdata[63:0]"     # (vcdvcd keeps a bus's range in its name)
    raw = {n: values_at(other[find_signal(other.signals, n)].tv, edges)
           for n in [data, "s_axis_tvalid", "s_axis_tready", "rst"]}
    k0 = win.index0
    assert raw["rst"][k0] == 0 and raw["s_axis_tvalid"][k0] and raw["s_axis_tready"][k0]
    assert not any(raw["s_axis_tvalid"][k] and raw["s_axis_tready"][k] and not raw["rst"][k]
                   for k in range(k0))
    _, split = win.bus_rows("s_axis_tdata")
    checked = 0
    for k in range(len(win.edges)):
        if raw["s_axis_tvalid"][k0 + k]:
            assert [texts[k] for _, _, texts in split] == lanes_of(raw[data][k0 + k], 8, 8), k
            checked += 1
    assert checked > 10


def test_sim_fst_through_vcd2fst(tmp_path):
    """``--waves fst``: the VCD is converted by vcd2fst (here a stand-in that records its call)
    and only the FST is kept; the save file names it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "vcd2fst"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$2.args\"\ncp \"$1\" \"$2\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "o"
    res = spartan("sim", "monitor", "--cycles", "40", "--waves", "fst", "-o", str(out), env=env)
    assert res.returncode == 0, res.stderr
    assert (out / "dump.fst").exists() and not (out / "dump.vcd").exists()
    assert (out / "dump.fst.args").read_text().split() == [str(out / "dump.vcd"),
                                                          str(out / "dump.fst")]
    assert f'[dumpfile] "{(out / "dump.fst").resolve()}"' in (out / "monitor.gtkw").read_text()


@pytest.mark.parametrize("args, fragments", [
    (["sim", "nosuch"], ["block must be one of"]),
    (["sim", "monitor", "--set", "lanes=3"], ["lanes must be a power of two"]),
    (["sim", "monitor", "--cycles", "0"], ["--cycles must be a positive integer"]),
    (["sim", "monitor", "--seed", "-1"], ["--seed must be an integer from 0"]),
    (["sim", "monitor", "--test", "nosuch"], ["--test must be a cocotb test"]),
    (["sim", "monitor", "--waves", "fst"], ["--waves fst needs vcd2fst"]),
])
def test_sim_errors_one_line_nothing_written(tmp_path, args, fragments):
    out = tmp_path / "out"
    def has_vcd2fst(folder):
        return bool(folder) and os.path.exists(os.path.join(folder, "vcd2fst"))
    env = dict(os.environ, PATH=os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if not has_vcd2fst(p)))
    res = spartan(*args, "-o", str(out), env=env)
    _one_line_error(res, *fragments)
    assert not out.exists()
