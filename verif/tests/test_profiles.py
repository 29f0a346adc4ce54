"""A block's verification knowledge lives in one place, its profile (verif/tb/profile.py): every
flow reads it from there. Checked by adding a block the way docs/architecture.md says (a module
with its ``Block``, one registry entry, a testbench with its ``PROFILE``, a benchmark beside it)
and asking each flow what it now does for that block, with no flow edited."""

import sys

import pytest
from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

import spartan_rtl.tb
from spartan_rtl import bench, sim
from spartan_rtl.hw import blocks, params
from spartan_rtl.hw.block import Block
from spartan_rtl.tb import profile

TESTBENCH = '''
import cocotb

from spartan_rtl.tb.profile import Profile, Waiver

PROFILE = Profile(stimulus=("flow", {"beats": 5}), synth_sizes=({"lanes": 4},), mutants=3,
                  mutant_tests=(["flow"], {"beats": 40}), fuzz_examples=7,
                  coverage_waivers=(Waiver(r"=> \\S*held$", lambda p: p["lanes"] == 1,
                                           "one lane: nothing is ever held"),))


@cocotb.test()
async def flow(dut):   # nothing simulates it here: the flows only look it up
    pass
'''


class Delay(wiring.Component):
    """The added block: one register stage on a stream."""

    def __init__(self, lanes):
        layout = data.StructLayout({"data": data.ArrayLayout(8, lanes), "last": 1})
        super().__init__({"s_axis": In(stream.Signature(layout)),
                          "m_axis": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.m_axis.ready | ~self.m_axis.valid):
            m.d.sync += [self.m_axis.valid.eq(self.s_axis.valid),
                         self.m_axis.payload.eq(self.s_axis.payload)]
        m.d.comb += self.s_axis.ready.eq(self.m_axis.ready | ~self.m_axis.valid)
        return m


DELAY = Block(name="delay", top="spartan_delay", summary="one register stage",
              params=(params.lanes_param(),), build=lambda **p: Delay(p["lanes"]),
              info=lambda c: {"latency_cycles": 1, "throughput_beats_per_cycle": 1.0})


@pytest.fixture
def added_block(tmp_path, monkeypatch):
    (tmp_path / "tb_delay.py").write_text(TESTBENCH)
    (tmp_path / "bench_delay.py").write_text("def run(quick):\n    return {}\n\n\n"
                                             "def report(figures):\n    return ''\n")
    monkeypatch.setattr(spartan_rtl.tb, "__path__", [*spartan_rtl.tb.__path__, str(tmp_path)])
    monkeypatch.setitem(blocks.BLOCKS, DELAY.name, DELAY)   # the one line in hw/blocks.py
    yield DELAY
    for name in ("spartan_rtl.tb.tb_delay", "spartan_rtl.tb.bench_delay"):
        sys.modules.pop(name, None)


def test_every_flow_reads_the_added_blocks_profile(added_block):
    from verif.flows import coverage, mutants, synth
    from verif.tests import fuzz

    assert sim.stimulus("delay") == ("spartan_rtl.tb.tb_delay", "flow", {"beats": 5})
    assert sim.stimulus("delay", "flow") == ("spartan_rtl.tb.tb_delay", "flow", {})
    with pytest.raises(ValueError, match="--test must be a cocotb test of verif/tb/tb_delay.py"):
        sim.stimulus("delay", "Profile")
    assert list(bench._discover()) == ["monitor", "compactor", "gemm", "core", "engine",
                                       "delay", "estimate"]
    assert "delay" in mutants.default_blocks() and profile.of("delay").mutant_tests[0] == ["flow"]
    assert synth.sizes(added_block) == [{}, {"lanes": 4}]
    text = "[cond_then] assign x = a ? b : c;  => core.held"
    assert coverage.reason_for("delay", text, {"lanes": 1}) == "one lane: nothing is ever held"
    assert coverage.reason_for("delay", text, {"lanes": 2}) is None
    assert fuzz.examples("delay") in (7, 7 * fuzz.LONG_FACTOR)


def test_a_block_without_testbench_gets_the_generic_defaults(monkeypatch):
    monkeypatch.setitem(blocks.BLOCKS, DELAY.name, DELAY)
    assert profile.of("delay") == profile.Profile(stimulus=None)
    assert sim.stimulus("delay") == sim.GENERIC
