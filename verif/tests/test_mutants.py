"""The mutation generator of verif/flows/mutants.py (seconds, no simulator build): every operator
changes exactly one line into different, still well-formed Verilog, the choice is a function of
the seed, and Verilator accepts a sample of the mutants of a real block."""

import re
import subprocess

import pytest

from spartan_rtl import toolchain
from spartan_rtl.tb import profile
from verif.flows import mutants
from verif.tests.helpers import YOSYS_STYLE_MODULE as SAMPLE


def test_every_kind_has_sites():
    kinds = {s.kind for s in mutants.sites(SAMPLE)}
    assert kinds == set(mutants.KINDS)


def test_sites_change_one_line_each():
    original = SAMPLE.split("\n")
    for s in mutants.sites(SAMPLE):
        changed = s.apply(SAMPLE).split("\n")
        assert len(changed) == len(original)
        diff = [i for i, (x, y) in enumerate(zip(original, changed)) if x != y]
        assert diff == [s.line - 1], s
        assert changed[s.line - 1].rstrip().endswith((";", ")")), s


@pytest.mark.parametrize("before, after", [
    ("assign _000_ = \\core.count  + 4'h1;", "assign _000_ = \\core.count  - 4'h1;"),
    ("assign _003_ = a <= b;", "assign _003_ = a > b;"),
    ("assign _003_ = a <= b;", "assign _003_ = a < b;"),
    ("assign s_axis_tready = ~ _003_;", "assign s_axis_tready = _003_;"),
    ("assign s_axis_tready = ~ _003_;", "assign s_axis_tready = ~(~ _003_);"),
    ("assign m_axis_tvalid = _003_ & (| \\core.count );",
     "assign m_axis_tvalid = _003_ | (| \\core.count );"),
    ("assign m_axis_tvalid = _003_ & (| \\core.count );",
     "assign m_axis_tvalid = _003_ & (& \\core.count );"),
    ("assign _001_ = en ? _000_ : \\core.count ;", "assign _001_ = _000_;"),
    ("assign _001_ = en ? _000_ : \\core.count ;", "assign _001_ = \\core.count ;"),
    ("assign _001_ = en ? _000_ : \\core.count ;", "assign _001_ = en ? \\core.count  : _000_;"),
    ("if (en)", "if (1'h1)"),
    ("if (en)", "if (1'h0)"),
    ("assign _002_ = rst ? 4'h0 : _001_;", "assign _002_ = rst ? 4'h1 : _001_;"),
    ("assign _000_ = \\core.count  + 4'h1;", "assign _000_ = \\core.count  + 4'h0;"),
    ("\\core.count  <= _002_;", "\\core.count  <= _002_ & 4'hb;"),
    ("\\core.count  <= _002_;", "\\core.count  <= _002_ | 4'h4;"),
])
def test_operators(before, after):
    """Each operator of the module docstring, on a line written the way Yosys writes it."""
    pairs = {(s.before.strip(), s.after.strip()) for s in mutants.sites(SAMPLE)}
    assert (before, after) in pairs


def test_enable_only_on_the_hold_multiplexer():
    """The reset multiplexer is not an enable: only ``_001_`` (whose arm is the register)."""
    enables = [s for s in mutants.sites(SAMPLE) if s.kind == "enable" and "assign" in s.before]
    assert {s.before.split()[1] for s in enables} == {"_001_"}


def test_selection_deterministic_distinct_and_spread():
    a = mutants.select(SAMPLE, 12, seed=5, block="t")
    assert a == mutants.select(SAMPLE, 12, seed=5, block="t")
    assert a != mutants.select(SAMPLE, 12, seed=6, block="t")
    texts = {m.apply(SAMPLE) for m in a}
    assert len(texts) == len(a) == 12 and SAMPLE not in texts
    assert {m.kind for m in a} == set(mutants.KINDS)  # the kinds take turns


def test_selection_runs_out_gracefully():
    every = mutants.select(SAMPLE, 10_000, seed=1)
    assert 12 < len(every) < len(mutants.sites(SAMPLE))  # stuck: one bit per register


def _lint(text, tmp_path, name):
    """Verilator's parser and elaboration; warnings (a mutant may make a comparison constant:
    ``UNSIGNED``, which a build refuses, and the campaign counts as invalid) don't fail it."""
    path = tmp_path / f"{name}.v"
    path.write_text(text)
    env = toolchain.sim_env()
    return subprocess.run(["verilator", "--lint-only", "-Wno-fatal", *toolchain.VERILATOR_WAIVERS,
                           str(path)], env=env, capture_output=True, text=True)


def test_sample_mutants_are_valid_verilog(tmp_path):
    assert _lint(SAMPLE, tmp_path, "orig").returncode == 0
    for k, m in enumerate(mutants.select(SAMPLE, 30, seed=1)):
        r = _lint(m.apply(SAMPLE), tmp_path, f"m{k}")
        assert r.returncode == 0 and "%Error" not in r.stderr, (m, r.stderr)


def test_monitor_mutants_are_valid_verilog(tmp_path):
    """The real thing: the monitor's emitted Verilog and its campaign's first mutants."""
    text = mutants.rtl("monitor")
    chosen = mutants.select(text, 16, seed=1, block="monitor")
    assert len(chosen) == 16
    for k, m in enumerate(chosen):
        assert re.sub(r"\s+", "", m.before) != re.sub(r"\s+", "", m.after)
        r = _lint(m.apply(text), tmp_path, f"monitor{k}")
        assert r.returncode == 0 and "%Error" not in r.stderr, (m, r.stderr)


def test_declared_configurations_are_campaigns_of_their_own():
    """``BLOCK@NAME`` mutates the configuration the block's profile declares: the GEMM with
    several column groups and its two weight sets, the engine's dense-only twin; an undeclared
    name is refused."""
    assert mutants.campaign_names("gemm") == ["gemm", "gemm@live", "gemm@sets"]
    assert mutants.campaign_names("monitor") == ["monitor"]
    assert "gemm@live" in mutants.default_blocks() and "engine@twin" not in \
        mutants.default_blocks()                       # the engine runs only when named
    # ... and named, with its profile's count (it drew none before: 0 meant "only named")
    assert {b: profile.of(b).mutants for b in ("core", "engine")} == {"core": 6, "engine": 40}
    assert not {"core", "engine"} & set(mutants.default_blocks())
    assert mutants.configuration("gemm") == ("gemm", None)
    assert mutants.configuration("engine@twin") == ("engine", {"sparse": False})
    with pytest.raises(ValueError, match="no mutant configuration 'wide'"):
        mutants.configuration("gemm@wide")
    live = mutants.rtl("gemm@live")
    assert live != mutants.rtl("gemm")
