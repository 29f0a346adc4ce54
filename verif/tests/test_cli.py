"""The ``spartan`` command line (docs/interfaces.md#the-command-line): listing, generation,
and one-line errors with exit status 2 and nothing written."""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spartan_rtl.hw import blocks
from verif.tests.helpers import TOML_TEXT, assert_usage_error, config_cases, run_cli, snapshot


def spartan(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "spartan_rtl.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_list_names_every_block_and_parameter():
    out = spartan("list")
    assert out.returncode == 0, out.stderr
    for block in blocks.BLOCKS.values():
        assert f"{block.name}  (top {block.top})" in out.stdout
        for p in block.params:
            assert re.search(rf"^\s+{p.name}\s+default", out.stdout, re.M), p.name


def test_generate_writes_verilog_and_manifest(tmp_path):
    out = spartan("generate", "monitor", "--set", "lanes=4", "--set", "width=16",
                  "-o", str(tmp_path))
    assert out.returncode == 0, out.stderr
    verilog = (tmp_path / "spartan_monitor.v").read_text()
    doc = json.loads((tmp_path / "spartan_monitor.json").read_text())
    assert doc["block"] == "monitor" and doc["top"] == "spartan_monitor"
    assert doc["params"] == {"lanes": 4, "width": 16, "number_format": "int",
                             "max_tile_elems": 65536}
    for key in ("ports", "streams", "latency_cycles", "throughput_beats_per_cycle", "generator"):
        assert key in doc
    assert doc["generator"]["amaranth"] == "0.5.10"
    # The manifest's ports are exactly the Verilog module's ports, with the same widths.
    header = re.search(r"module spartan_monitor\((.*?)\);", verilog, re.S).group(1)
    assert sorted(p.strip() for p in header.split(",")) == sorted(p["name"] for p in doc["ports"])
    for port in doc["ports"]:
        decl = re.search(rf"^\s*(input|output)\s*(\[(\d+):0\])?\s*{port['name']};", verilog, re.M)
        assert decl, port["name"]
        assert decl.group(1) == {"in": "input", "out": "output"}[port["dir"]]
        assert (int(decl.group(3)) + 1 if decl.group(3) else 1) == port["width"]
    assert doc["streams"]["s_axis"]["beat_bits"] == 64
    assert doc["streams"]["s_axis"]["fields"][3] == {"name": "lane3", "lsb": 48, "width": 16}
    assert "module" in verilog and verilog.count("module ") == 1  # one flat module


def test_config_file_and_set_override(tmp_path):
    config = tmp_path / "cfg.toml"
    config.write_text('lanes = 16\nwidth = 32\nnumber_format = "fp"\n')
    out = spartan("generate", "monitor", "--config", str(config), "--set", "width=16",
                  "-o", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "out" / "spartan_monitor.json").read_text())
    assert (doc["params"]["lanes"], doc["params"]["width"], doc["params"]["number_format"]) == \
        (16, 16, "fp")


def test_help_is_plain_text():
    """Every command's --help: no reStructuredText markup (double backticks) from docstrings."""
    for command in ([], ["generate"], ["list"], ["sim"], ["waves"], ["bench"], ["estimate"],
                    ["fusesoc-gen"], ["fusesoc-library"]):
        out = spartan(*command, "--help")
        assert out.returncode == 0 and "``" not in out.stdout, (command, out.stdout[:300])


@pytest.mark.parametrize("args, message", [
    (["generate", "monitor", "--set", "lanes=3"],
     "lanes must be a power of two from 1 to 64, not 3"),
    (["generate", "nosuch"], "block must be one of"),
    (["generate", "monitor", "--set", "colour=3"], "parameter must be one of lanes"),
    (["generate", "monitr"], "not 'monitr' (did you mean 'monitor'?)"),
    (["generate", "monitor", "--set", "lane=4"], "not 'lane' (did you mean 'lanes'?)"),
    (["generate", "monitor", "--set", "lanes=eight"],
     "lanes must be a power of two from 1 to 64, not 'eight'"),
    (["generate", "monitor", "--set", "width=1.5"],
     "width must be an integer from 1 to 64, not '1.5'"),
    (["generate", "monitor", "--set", "lanes"], "--set must be NAME=VALUE, not 'lanes'"),
    (["generate", "monitor", "--config", "/nonexistent/cfg.toml"],
     "--config must be a readable TOML file, not '/nonexistent/cfg.toml'"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, args, message):
    out_dir = tmp_path / "out"
    out = spartan(*args, "-o", str(out_dir))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spartan: error: "), out.stderr
    assert message in lines[0], out.stderr
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_bad_toml_and_bad_value_in_config(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("lanes = = 3\n")
    out = spartan("generate", "monitor", "--config", str(broken), "-o", str(tmp_path / "o"))
    assert out.returncode == 2 and "--config must be a readable TOML file" in out.stderr
    typed = tmp_path / "typed.toml"
    typed.write_text('lanes = "8"\n')
    out = spartan("generate", "monitor", "--config", str(typed), "-o", str(tmp_path / "o"))
    assert out.returncode == 2
    assert out.stderr.strip() == \
        "spartan: error: lanes must be a power of two from 1 to 64, not '8'"


def test_generate_replaces_existing_files_whole(tmp_path):
    for lanes in (8, 2):
        out = spartan("generate", "monitor", "--set", f"lanes={lanes}", "-o", str(tmp_path))
        assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "spartan_monitor.json").read_text())
    assert doc["params"]["lanes"] == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# --- derived defaults ----------------------------------------------------------------------

def test_n_par_follows_n_when_not_set(tmp_path):
    """``generate gemm --set k=32 --set n=32``: n_par, not given, is 32 (docs/interfaces.md,
    "Blocks"), in the manifest and the regenerate command; given, it is checked as given."""
    out = spartan("generate", "gemm", "--set", "k=32", "--set", "n=32", "-o", str(tmp_path / "g"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "g" / "spartan_gemm.json").read_text())
    assert doc["params"]["n_par"] == 32
    assert "--set n_par=32" in (tmp_path / "g" / "spartan_gemm.core").read_text()
    bad = spartan("generate", "gemm", "--set", "k=32", "--set", "n=32", "--set", "n_par=64",
                  "-o", str(tmp_path / "bad"))
    assert bad.returncode == 2 and not (tmp_path / "bad").exists()
    assert bad.stderr == ("spartan: error: n_par must be a multiple of lanes (8) dividing n (32), "
                          "not 64\n")


@pytest.mark.parametrize("block, given, derived", [
    ("gemm", {"n": 96}, {"n_par": 32}),     # the largest power of two dividing n
    ("gemm", {"n": 1024}, {"n_par": 64}),   # up to the fixed default
    ("gemm", {"lanes": 8, "n": 24}, {"n_par": 8}),
    ("gemm", {"n": 32, "n_par": 16}, {"n_par": 16}),   # given: kept
    ("core", {"k": 16, "n": 16}, {"n_par": 16}),
    ("engine", {"n": 32, "lanes": 16}, {"n_par": 32, "data_width": 128}),
    ("engine", {"width": 16}, {"data_width": 128}),
])
def test_derived_defaults(block, given, derived):
    params = blocks.get(block).resolve(given)
    assert {name: params[name] for name in derived} == derived


def test_derived_defaults_equal_the_fixed_ones_at_the_defaults():
    """So an unchanged configuration (``make rtl``) generates the same Verilog as before."""
    for block in blocks.BLOCKS.values():
        assert block.resolve({}) == {p.name: p.default for p in block.params}, block.name


def test_derived_default_out_of_range_says_how_it_came_about():
    with pytest.raises(ValueError) as info:
        blocks.get("engine").resolve({"lanes": 2})
    assert str(info.value) == ("data_width must be a power of two from 32 to 1024, not 16 (its "
                               "default when not set: lanes*width)")
    out = spartan("list", "engine")
    assert re.search(r"^    data_width .*; when not set: lanes\*width$", out.stdout, re.M)
    assert re.search(r"^    n_par .*; when not set: the largest power of two up to 64 that "
                     r"divides n$", out.stdout, re.M)


def test_gemm_constructor_derives_n_par():
    from spartan_rtl.hw.gemm import SparseGemm
    assert SparseGemm(k=32, n=32).n_par == 32 and SparseGemm(n=32, n_par=8).n_par == 8


# --- the elaboration-size bound (docs/interfaces.md, "Elaboration size") -----------------------

OVER_BOUND = [
    # The largest GEMM `spartan list gemm` advertised: out of 6 GB after 8 minutes.
    ("gemm", dict(lanes=1, k=1024, n=1024, k_par=64, n_par=256, b_banks=64),
     "k must be smaller, and other parameters too (elaboration size 892928, over the bound "
     "200000"),
    ("gemm", dict(k_par=2, k=1024), "k must be at most 528 with the other parameters as given "
     "(elaboration size 640016,"),
    ("gemm", dict(k_par=64, n_par=256, n=256), "k_par must be at most 32"),
    ("gemm", dict(k=1024, n=1024, n_par=256, width=16), "n must be at most 512"),
    ("core", dict(k_par=2, k=1024), "k must be at most 528"),
    ("engine", dict(acc_rows=4096), "acc_rows must be at most 2048"),
]


@pytest.mark.parametrize("block, values, message", OVER_BOUND)
def test_size_bound_refuses_before_elaborating(tmp_path, block, values, message):
    """One line naming the parameter and the bound, exit status 2, nothing written, and at
    once: the refusal comes before anything is built."""
    import time
    sets = [a for name, v in values.items() for a in ("--set", f"{name}={v}")]
    start = time.monotonic()
    status, stdout, stderr = run_cli("generate", block, *sets, "-o", str(tmp_path / "out"))
    assert time.monotonic() - start < 5
    assert_usage_error(status, stdout, stderr, message, "spartan list " + block,
                       "about 6 GB of memory and 5 minutes")
    assert stderr.rstrip().endswith(f", not {values[stderr.split()[2]]}"), stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=re.escape(message)):
        blocks.get(block).build(**values)


@pytest.mark.parametrize("block, values, message", OVER_BOUND)
def test_size_bound_suggestion_is_accepted(block, values, message):
    """"at most V with the other parameters as given": V is accepted, the next value up of the
    parameter is not."""
    b = blocks.get(block)
    with pytest.raises(ValueError) as info:
        b.resolve(values)
    m = re.match(r"(\w+) must be at most (\d+) with the other parameters as given", str(info.value))
    if m is None:
        return
    name, best = m.group(1), int(m.group(2))
    p = b.resolve({**values, name: best})
    assert b.size_bound.estimate(p) <= b.size_bound.limit
    param = b.param(name)
    above = next(v for v in range(best + 1, values[name] + 1) if param.ok(v)
                 and b._valid({**p, name: v}))
    with pytest.raises(ValueError, match="elaboration size"):
        b.resolve({**values, name: above})


def test_size_bound_keeps_the_declared_sizes():
    """Every block's defaults, the sizes `make synth` synthesises, the ranges `spartan explore`
    sweeps and the sizes the tests elaborate are within the bound."""
    import itertools

    from spartan_rtl.explore_jobs import DEFAULT_RANGES
    from spartan_rtl.hw import params
    from verif.flows import synth
    for block in blocks.BLOCKS.values():
        for size in synth.sizes(block):
            p = block.resolve(size)
            if block.size_bound is not None:
                assert block.size_bound.estimate(p) <= block.size_bound.limit / 4, (block, size)
    engine, swept = blocks.get("engine"), 0
    for values in itertools.product(*DEFAULT_RANGES.values()):
        p = params.resolve(engine.params, dict(zip(DEFAULT_RANGES, values)))
        if engine._valid(p):    # the combinations the engine's other rules allow
            assert engine.size_bound.estimate(p) <= engine.size_bound.limit, p
            swept += 1
    assert swept > 100
    gemm = blocks.get("gemm")
    for values in (dict(k=1024), dict(k=1024, n=1024, n_par=256), dict(k_par=64, n_par=64),
                   dict(k_par=2, k=256, lanes=64), dict(sparse=False, k_par=2, k=1024)):
        gemm.resolve(values)      # measured in well under the budget (docs/interfaces.md)


def test_list_states_the_bound():
    out = spartan("list", "gemm")
    line = next(x for x in out.stdout.splitlines() if x.strip().startswith("(size bound)"))
    assert "k*n*width*(k_par/b_banks)/64" in line and "at most 200000" in line
    assert "about 6 GB of memory and 5 minutes" in line
    out = spartan("list")
    bounded = [b.split()[0] for b in out.stdout.split("\n") if b and not b.startswith(" ")]
    bounds = out.stdout.count("(size bound)")
    assert bounds == sum(blocks.get(b).size_bound is not None for b in bounded) == 3
    docs = (Path(__file__).resolve().parents[2] / "docs" / "interfaces.md").read_text()
    section = docs[docs.index("### Elaboration size"):]
    for block in ("gemm", "engine"):
        bound = blocks.get(block).size_bound
        assert f"at most {bound.limit}" in section
        for _, formula, _ in bound.terms:
            assert formula in section, formula


# --- list, version -------------------------------------------------------------------------

def test_list_one_block():
    out = spartan("list", "gemm")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("gemm  (top spartan_gemm)") and "monitor" not in out.stdout
    for p in blocks.get("gemm").params:
        assert re.search(rf"^\s+{p.name}\s+default", out.stdout, re.M), p.name


def test_version():
    from importlib import metadata
    out = spartan("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == (f"spartan-rtl {metadata.version('spartan-rtl')} "
                                  f"(amaranth {metadata.version('amaranth')})")


# --- the generated file set -----------------------------------------------------------------

def test_generate_writes_the_whole_set_readable_by_all(tmp_path):
    """Under a private umask (077) every generated file is still 0644
    (docs/interfaces.md#the-generated-files)."""
    out = subprocess.run([sys.executable, "-m", "spartan_rtl.cli", "generate", "monitor", "--set",
                          "lanes=2", "--name", "mon2", "-o", str(tmp_path / "new" / "dir")],
                         capture_output=True, text=True, preexec_fn=lambda: os.umask(0o077))
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "new" / "dir"
    names = ["mon2.v", "mon2.json", "mon2_inst.v", "mon2.core", "mon2.f", "mon2.vlt", "mon2.sdc",
             "mon2.xdc", "mon2.ipxact.xml"]
    assert out.stdout.split() == [str(folder / n) for n in names]
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    for p in folder.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    doc = json.loads((folder / "mon2.json").read_text())
    assert doc["top"] == "mon2" and doc["clock"]["target_mhz"] == 100.0
    assert re.search(r"^module mon2\(", (folder / "mon2.v").read_text(), re.M)
    assert (folder / "mon2.f").read_text() == "mon2.vlt\nmon2.v\n"


# --- one line, exit 2, nothing written ------------------------------------------------------

@pytest.mark.parametrize("argv, fragment", [
    ([], "the following arguments are required: command"),
    (["generate"], "the following arguments are required: block"),
    (["generate", "monitor", "--bogus"], "unrecognized arguments: --bogus"),
    (["generate", "monitor", "-o"], "argument -o/--output: expected one argument"),
    (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
    (["list", "nosuch"], "block must be one of monitor, compactor"),
    (["list", "monitor", "extra"], "unrecognized arguments: extra"),
    (["generate", "monitor", "--set", "=3"], "--set must be NAME=VALUE, not '=3'"),
    (["generate", "monitor", "extra\nline"], "unrecognized arguments: extra\\nline"),
    (["generate", "monitor", "-o", ""], "-o must be a directory path, not ''"),
    (["generate", "monitor", "--set", "lanes=4", "--set", "lanes=x"], "lanes must be"),
])
def test_argument_mistakes_are_one_line(tmp_path, argv, fragment):
    before = snapshot(tmp_path)
    assert_usage_error(*run_cli(*argv), fragment)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", ["1abc", "a-b", "", "module", "wire", "logic", "a b", "a$b",
                                  "x" * 129, "caf\u00e9", "a.b", "\\escaped", "a\nb"])
def test_bad_name(tmp_path, name):
    assert_usage_error(*run_cli("generate", "monitor", "--name", name, "-o", str(tmp_path / "o")),
                       "--name must be a Verilog identifier", repr(name))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("mhz", ["0", "-5", "nan", "inf", "fast", "1e9", "", "0x10"])
def test_bad_clock(tmp_path, mhz):
    assert_usage_error(*run_cli("generate", "monitor", "--clock-mhz", mhz, "-o",
                                str(tmp_path / "o")),
                       "--clock-mhz must be a clock frequency in MHz from 0.001 to 5000")
    assert not (tmp_path / "o").exists()


def output_cases(tmp):
    """(-o argument, fragment of the message) for each kind of unusable output path; sets up
    what each needs under ``tmp``."""
    (tmp / "afile").write_text("keep\n")
    out = tmp / "out"
    out.mkdir()
    (out / "spartan_gemm.v").write_text("// an earlier version: must survive\n")
    (out / "spartan_gemm.json").mkdir()   # a folder where the manifest goes
    return [
        (tmp / "afile", "-o must be a directory or a path where one can be created"),
        (tmp / "afile" / "sub" / "deeper", "('" + str(tmp / "afile") + "' is a file)"),
        (out, "spartan_gemm.json there is no regular file"),
        (tmp / ("x" * 300), "-o must be a path whose every name has at most"),
        (tmp.joinpath(*["d" * 200] * 25), "-o must be a path shorter than"),
        (Path("/proc/spartan-out/rtl"), "-o must be a writable directory"),
    ]


def test_bad_output_paths_change_nothing(tmp_path):
    """Each unusable ``-o``: one line naming it, exit 2, the folder exactly as before (no new
    folders, the existing ``.v`` untouched), and quickly: the paths are checked before the
    block is built."""
    import time
    for target, fragment in output_cases(tmp_path):
        before = snapshot(tmp_path)
        start = time.monotonic()
        status, stdout, stderr = run_cli("generate", "gemm", "-o", str(target))
        assert_usage_error(status, stdout, stderr, fragment)
        assert time.monotonic() - start < 2, "checked after elaborating"
        assert snapshot(tmp_path) == before, target
    assert not Path("/proc/spartan-out").exists()


@pytest.mark.parametrize("fail_on", ["replace", "rename"])
def test_failure_while_writing_restores_the_folder(tmp_path, monkeypatch, fail_on):
    """The set is written as one: a rename failing halfway (into an existing folder: the third
    replace; a new folder: its rename) leaves every old file as it was and no new entry."""
    existing = tmp_path / "existing"
    assert run_cli("generate", "monitor", "--set", "lanes=2", "-o", str(existing))[0] == 0
    (existing / "mine.txt").write_text("not ours\n")
    target = existing if fail_on == "replace" else tmp_path / "fresh" / "rtl"
    before = snapshot(tmp_path)
    real = getattr(os, fail_on)
    calls = []

    def failing(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) == (3 if fail_on == "replace" else 1) and ".spartan" not in str(dst):
            raise OSError(28, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, fail_on, failing)
    status, stdout, stderr = run_cli("generate", "monitor", "--set", "lanes=4", "-o", str(target))
    assert_usage_error(status, stdout, stderr, "No space left on device")
    monkeypatch.undo()
    assert snapshot(tmp_path) == before


def test_internal_error_says_bug_exit_70(tmp_path, monkeypatch):
    """A failure inside the work (here the emitter) is no usage error: one line saying it is a
    bug, exit status 70, the traceback only with --debug (anywhere on the line)."""
    from spartan_rtl.hw import emit

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(emit, "to_verilog", broken)
    status, stdout, stderr = run_cli("generate", "monitor", "-o", str(tmp_path / "o"))
    lines = stderr.splitlines()
    assert status == 70 and len(lines) == 1 and "Traceback" not in stderr
    assert lines[0].startswith("spartan: internal error (a bug, please report it): ")
    assert "KeyError" in lines[0] and "--debug" in lines[0]
    status, stdout, stderr = run_cli("generate", "monitor", "--debug", "-o", str(tmp_path / "o"))
    assert status == 70 and "Traceback" in stderr and "in broken" in stderr
    assert stderr.splitlines()[-1].startswith("spartan: internal error (a bug")
    assert not (tmp_path / "o").exists()


# --- --config ---------------------------------------------------------------------------

def test_bad_config_files(tmp_path):
    for path, fragment in config_cases(tmp_path):
        before = snapshot(tmp_path)
        assert_usage_error(*run_cli("generate", "monitor", "--config", str(path), "-o",
                                    str(tmp_path / "o")), fragment)
        assert snapshot(tmp_path) == before, path


# --- probes: random input, the contract holds -------------------------------------------

PROBE = settings(max_examples=60, derandomize=True, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


def probe(tmp_path, argv):
    """Run ``argv`` with the emitter replaced by a recorder: returns (status, generated?) and
    asserts the contract for anything but success."""
    from spartan_rtl.hw import emit
    calls = []
    before = snapshot(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emit, "generate", lambda *a, **k: calls.append((a, k)) or [])
        status, stdout, stderr = run_cli(*argv)
    if status != 0:
        assert_usage_error(status, stdout, stderr)
        assert not calls
    else:
        assert calls or "usage:" in stdout, (stdout, stderr)
    assert snapshot(tmp_path) == before
    return status, bool(calls)


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                max_size=12)


@PROBE
@given(items=st.lists(st.tuples(st.one_of(st.sampled_from(["lanes", "width", "cols", "k"]),
                                          _text),
                                st.sampled_from(["=", "", "==", " = "]), _text),
                      min_size=1, max_size=3),
       block=st.sampled_from(list(blocks.BLOCKS)))
def test_probe_random_sets(tmp_path, block, items):
    argv = ["generate", block, "-o", str(tmp_path / "o")]
    for name, sep, value in items:
        argv += ["--set", f"{name}{sep}{value}"]
    status, generated = probe(tmp_path, argv)
    assert generated == (status == 0)


@PROBE
@given(words=st.lists(st.one_of(_text, st.sampled_from(
    ["--set", "--config", "--name", "--clock-mhz", "--axi-names", "-o", "--", "-", "monitor",
     "gemm", "lanes=4", "--debug"])), max_size=6))
def test_probe_random_arguments(tmp_path, monkeypatch, words):
    """Any words after ``generate`` (options in any order, missing or doubled values): either
    a generation or the one-line error; ``--help`` prints help and exits 0."""
    monkeypatch.chdir(tmp_path)   # a bare word may be taken as -o's folder: only ever here
    status, generated = probe(tmp_path, ["generate", *words])
    assert status in (0, 2)


@PROBE
@given(text=TOML_TEXT)
def test_probe_random_toml(tmp_path, text):
    config = tmp_path / "c.toml"
    config.write_text(text)
    status, generated = probe(tmp_path, ["generate", "monitor", "--config", str(config),
                                         "-o", str(tmp_path / "o")])
    assert generated == (status == 0)


@PROBE
@given(name=_text)
def test_probe_random_names(tmp_path, name):
    status, generated = probe(tmp_path, ["generate", "expander", "--name", name, "-o",
                                         str(tmp_path / "o")])
    from spartan_rtl.hw import ip
    legal = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name) is not None
    assert generated == (status == 0)
    assert status == (0 if legal and name not in ip._KEYWORDS else 2)


@PROBE
@given(parts=st.lists(st.one_of(_text, st.sampled_from(["..", ".", "afile", "x" * 256])),
                      min_size=1, max_size=4))
def test_probe_random_output_paths(tmp_path, parts):
    (tmp_path / "afile").touch()
    status, generated = probe(tmp_path, ["generate", "monitor", "-o",
                                         str(tmp_path.joinpath(*parts))])
    assert generated == (status == 0)


# --- spartan sim: the verdict ---------------------------------------------------------------

def test_sim_ends_with_pass_or_fail(tmp_path, monkeypatch):
    """``spartan sim`` prints its verdict last: ``PASS`` (exit 0), or ``FAIL <reason>`` (exit
    1) when the testbench fails, here a real run whose result is then declared failed. The
    configuration is test_waves.py's, so the Verilator build is shared."""
    args = ["sim", "monitor", "--seed", "7", "--cycles", "60"]
    passed = spartan(*args, "-o", str(tmp_path / "pass"))
    assert passed.returncode == 0, passed.stderr
    lines = passed.stdout.splitlines()
    assert lines[-1] == "PASS"
    # What it does, before it does it, and how long each step took.
    assert lines[0] == "building monitor with Verilator ..."
    assert re.fullmatch(r"built in \d+\.\d s \(\S+/monitor/verilator-\w+\)", lines[1]), lines
    assert lines[2].startswith("running monitor: spartan_rtl.tb.tb_monitor.")
    assert "seed 7, 60 cycles max" in lines[2] and re.fullmatch(r"ran in \d+\.\d s", lines[3])
    from spartan_rtl import runner
    real_run = runner.run

    def failing_run(*a, **k):
        real_run(*a, **k)
        raise AssertionError("scoreboard: 1 element differs (injected)\nmore detail")

    monkeypatch.setattr(runner, "run", failing_run)
    status, stdout, stderr = run_cli(*args, "-o", str(tmp_path / "fail"))
    last = stdout.splitlines()[-1]
    assert status == 1 and last.startswith("FAIL the testbench failed: scoreboard: 1 element "
                                           "differs (injected)"), (status, stdout, stderr)
    assert "PASS" not in stdout and (tmp_path / "fail" / "dump.vcd").exists()
