"""The formal flow itself (verif/flows/formal/): the harness finds every channel, a stream that
breaks the handshake rules fails, a correct one passes, and one real block check runs shallow.
``make formal`` runs every check to its full depth."""

import pytest
from amaranth.hdl import Module, Signal, Value
from amaranth.hdl._ast import Assert
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from spartan_rtl.hw import blocks
from verif.flows import formal


class RegisterSlice(wiring.Component):
    """A one-entry stream register; ``broken`` loads it whether or not the output was taken."""

    def __init__(self, broken):
        self.broken = broken
        super().__init__({"s_axis": In(stream.Signature(4)), "m_axis": Out(stream.Signature(4))})

    def elaborate(self, platform):
        m = Module()
        load = self.m_axis.ready | ~self.m_axis.valid
        m.d.comb += self.s_axis.ready.eq(load)
        with m.If(load | self.broken):
            m.d.sync += [self.m_axis.valid.eq(self.s_axis.valid),
                         self.m_axis.payload.eq(self.s_axis.payload)]
        return m


def _run(tmp_path, dut, depth, props=(), prove=None):
    check = formal.Check("toy", "toy", {}, depth)
    return formal.run_check(check, harness=formal.Harness(dut, props), workdir=tmp_path,
                            echo=lambda *a: None, prove=prove)


def test_stability_violation_is_found(tmp_path):
    result = _run(tmp_path, RegisterSlice(broken=True), depth=4)
    assert result["status"] == "FAIL"
    # The counterexample points at the stability assertion of the harness.
    assert result["failures"] and all("formal/harness.py" in f["where"]
                                      for f in result["failures"])
    assert (tmp_path / "toy" / "check_bmc" / "engine_0" / "trace.vcd").exists()


def test_compliant_stream_passes(tmp_path):
    result = _run(tmp_path, RegisterSlice(broken=False), depth=6)
    assert result["status"] == "PASS"
    # A held beat is taken at the earliest in step 2: loaded on edge 1, held one cycle.
    assert result["covers"] == {"reached": 1, "total": 1, "last_step": 2}


def test_a_step_killed_by_a_signal_runs_once_more(tmp_path, monkeypatch):
    """A tool that dies of a signal is no verdict: the check runs again, once, and a second
    death is an ERROR."""
    from verif.flows.formal import run as formal_run
    real, calls = formal_run.subprocess.run, []

    def killed_first(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1 or kill_always:
            return formal_run.subprocess.CompletedProcess(
                args, 1, "SBY [toy/check_bmc] base: finished (returncode=-7)\n", "")
        return real(*args, **kwargs)

    monkeypatch.setattr(formal_run.subprocess, "run", killed_first)
    kill_always = False
    assert _run(tmp_path, RegisterSlice(broken=False), depth=4)["status"] == "PASS"
    assert len(calls) == 2
    kill_always, calls[:] = True, []
    assert _run(tmp_path, RegisterSlice(broken=False), depth=4)["status"] == "ERROR"
    assert len(calls) == 2


def test_induction_proves_a_compliant_stream(tmp_path):
    result = _run(tmp_path, RegisterSlice(broken=False), depth=6, prove=2)
    assert result["status"] == "PROVEN" and result["k"] == 2


def test_induction_base_case_finds_the_violation(tmp_path):
    result = _run(tmp_path, RegisterSlice(broken=True), depth=4, prove=4)
    assert result["status"] == "FAIL"


class TwinCounters(wiring.Component):
    """A register slice whose payload is the beat XOR ``up ^ ~down``: ``up`` counts up, and
    ``down`` counts down from all ones, so from reset ``up == ~down`` and the payload is the
    beat, stable at every depth. From a state where they differ (unreachable, and kept forever)
    the XOR changes every cycle and the held payload with it, so k-induction closes only with
    the invariant ``up == ~down``."""

    def __init__(self):
        super().__init__({"s_axis": In(stream.Signature(4)), "m_axis": Out(stream.Signature(4))})
        self.up, self.down = Signal(2), Signal(2, init=0b11)

    def elaborate(self, platform):
        m = Module()
        beat = Signal(4)
        m.d.sync += [self.up.eq(self.up + 1), self.down.eq(self.down - 1)]
        load = self.m_axis.ready | ~self.m_axis.valid
        m.d.comb += [self.s_axis.ready.eq(load),
                     self.m_axis.payload.eq(beat ^ (self.up ^ ~self.down))]
        with m.If(load):
            m.d.sync += [self.m_axis.valid.eq(self.s_axis.valid), beat.eq(self.s_axis.payload)]
        return m


def test_induction_needs_the_invariant(tmp_path):
    assert _run(tmp_path / "bare", TwinCounters(), depth=6, prove=6)["status"] == "UNPROVEN"

    def invariant(m, dut, h):
        m.d.comb += Assert(dut.up == ~dut.down, "twin counters disagree")
    result = _run(tmp_path / "inv", TwinCounters(), depth=6, props=(invariant,), prove=2)
    assert result["status"] == "PROVEN"


class Silent(wiring.Component):
    """Never offers a beat: trivially stable, so its check must say the bound proved nothing."""

    def __init__(self):
        super().__init__({"m_axis": Out(stream.Signature(4))})

    def elaborate(self, platform):
        return Module()


def test_an_output_that_never_transfers_is_vacuous(tmp_path):
    result = _run(tmp_path, Silent(), depth=4)
    assert result["status"] == "VACUOUS"
    assert result["covers"] == {"reached": 0, "total": 1, "last_step": None}


class Wire(wiring.Component):
    """``m_axis`` is ``s_axis``: its outputs are stable exactly when its inputs are."""

    def __init__(self):
        super().__init__({"s_axis": In(stream.Signature(4)), "m_axis": Out(stream.Signature(4))})

    def elaborate(self, platform):
        m = Module()
        wiring.connect(m, wiring.flipped(self.s_axis), wiring.flipped(self.m_axis))
        return m


def test_input_rules_are_assumed(tmp_path):
    """A wire's output is stable only because the harness assumes the input is: the pass
    shows the assumptions are in force (without them the free input would break it)."""
    assert _run(tmp_path, Wire(), depth=4)["status"] == "PASS"


def test_channels_of_the_engine_master():
    """The AXI4 master's flat ``m_axi_*`` ports are channels too: AW, W, AR out, B, R in."""
    found = {c.name: c.output for c in formal.channels(formal.CHECKS["engine_writer"].dut())}
    assert found == {"cmd": False, "data": False, "m_axi_aw": True, "m_axi_w": True,
                     "m_axi_b": False}
    found = {c.name: c.output for c in formal.channels(formal.CHECKS["engine_reader"].dut())}
    assert found == {"cmd": False, "beats": True, "m_axi_ar": True, "m_axi_r": False}


def test_channels_of_the_core():
    core = blocks.get("core")
    dut = core.build(**core.resolve(formal.CHECKS["core"].params))
    found = {c.name: c.output for c in formal.channels(dut)}
    assert found == {"s_axis_a": False, "s_axis_b": False, "m_axis_c": True,
                     "s_axil_aw": False, "s_axil_w": False, "s_axil_ar": False,
                     "s_axil_b": True, "s_axil_r": True}


def test_every_block_has_a_check():
    assert {c.block for c in formal.CHECKS.values()} >= set(blocks.BLOCKS) - {"roundtrip"}


def test_unknown_check_is_one_line_and_exit_2(capsys):
    assert formal.main(["nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("check must be one of monitor_protocol,") and err.endswith("not 'nope'")
    assert "\n" not in err


class Tamper(wiring.Component):
    """``dut`` with bit 0 of one output stream's payload (or of one output port) inverted: the
    block's own properties (not just stability) must catch it."""

    def __init__(self, dut, stream_name):
        self.dut = dut
        self.stream_name = stream_name
        super().__init__(dut.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        for name, member in self.signature.members.items():
            outer, inner = getattr(self, name), getattr(self.dut, name)
            if member.is_port:
                pair = (outer, inner) if member.flow == Out else (inner, outer)
                m.d.comb += pair[0].eq(pair[1] ^ 1 if name == self.stream_name else pair[1])
            elif member.flow == In:
                m.d.comb += [inner.valid.eq(outer.valid), inner.payload.eq(outer.payload),
                             outer.ready.eq(inner.ready)]
            else:
                payload = Value.cast(inner.payload)
                if name == self.stream_name:
                    payload = payload ^ 1
                m.d.comb += [outer.valid.eq(inner.valid), outer.payload.eq(payload),
                             inner.ready.eq(outer.ready)]
        return m


@pytest.mark.parametrize("check,stream_name", [("monitor", "m_axis_stats"),
                                               ("compactor", "m_axis_data"),
                                               ("compactor", "m_axis_mask"),
                                               ("expander", "m_axis"),
                                               ("expander_elements", "m_axis")])
def test_block_properties_catch_a_corrupted_output(tmp_path, check, stream_name):
    """(A proof check fails in its base case.)"""
    chk = formal.CHECKS[check]
    dut = Tamper(chk.dut(), stream_name)
    result = formal.run_check(chk, depth=8, workdir=tmp_path, echo=lambda *a: None,
                              harness=formal.Harness(dut, chk.props))
    assert result["status"] == "FAIL"


@pytest.mark.parametrize("check,port", [("engine_reader", "m_axi_araddr"),
                                        ("engine_writer", "m_axi_wlast")])
def test_engine_master_rules_catch_a_corrupted_port(tmp_path, check, port):
    """An AR address off its word, a ``wlast`` off its burst's last beat: the AXI4 burst rules
    fail (in BMC, a few cycles deep)."""
    chk = formal.CHECKS[check]
    result = formal.run_check(chk, depth=6, workdir=tmp_path, echo=lambda *a: None, prove=0,
                              harness=formal.Harness(Tamper(chk.dut(), port), chk.props))
    assert result["status"] == "FAIL" and result["failures"], result


@pytest.mark.parametrize("name,depth", [("engine_reader", 6), ("engine_writer", 7)])
def test_engine_master_shallow(tmp_path, name, depth):
    """The engine's AXI4 master checks, BMC at a shallow depth (seconds; ``make formal``
    proves them): every assertion holds and every cover (a held AR/AW/W beat taken, a burst
    of more than one beat after a stall, a burst cut at 4 KB, in step 5 behind the reader's
    register slice; ``wlast`` after a stall, the last, in step 6) is reached."""
    result = formal.run_check(formal.CHECKS[name], depth=depth, workdir=tmp_path,
                              echo=lambda *a: None, prove=0)
    assert result["status"] == "PASS" and result["covers"]["reached"] == \
        result["covers"]["total"], result


@pytest.mark.parametrize("name", ["expander"])
def test_block_check_shallow(tmp_path, name):
    """One real block check at a shallow depth, so the flow is exercised on every run."""
    result = formal.run_check(formal.CHECKS[name], depth=6, workdir=tmp_path, echo=lambda *a: None)
    assert result["status"] == "PASS", result


def test_block_proof(tmp_path):
    """One real k-induction proof (the replicated GEMM's output, a few seconds), so the prove
    flow and the FIFO invariants it relies on (``platform="formal"``) are exercised on every
    run; covers to a shallow depth."""
    result = formal.run_check(formal.CHECKS["gemm"], depth=8, workdir=tmp_path,
                              echo=lambda *a: None)
    assert result["status"] == "PROVEN" and result["k"] == formal.CHECKS["gemm"].prove, result


def test_block_proof_needs_its_invariants(tmp_path):
    """The broadcast GEMM's output (``OutputQueue``) is stable at every depth only with the
    harness's invariant on the block's own credit counts (found by name in the elaborated
    block, ``Internals``): without it the induction step finds a state that breaks stability
    (the documented reason it was bounded), with it the proof closes."""
    chk = formal.CHECKS["gemm_broadcast"]
    bare = formal.Check(chk.name, chk.block, chk.params, chk.depth, (), prove=chk.prove)
    # Covers to depth 10: the first held C beat is taken in step 8.
    assert formal.run_check(bare, depth=10, workdir=tmp_path / "bare",
                            echo=lambda *a: None)["status"] == "UNPROVEN"
    result = formal.run_check(chk, depth=10, workdir=tmp_path / "inv", echo=lambda *a: None)
    assert result["status"] == "PROVEN", result


def test_internals_name_block_signals():
    """Invariants name signals local to a block's elaborate: found by name and submodule path,
    and a name that is missing (a renamed signal) or ambiguous raises rather than proving
    something else."""
    from amaranth.hdl._ir import Fragment
    monitor = blocks.get("monitor")
    dut = monitor.build(**monitor.resolve(formal.CHECKS["monitor_protocol"].params))
    internals = formal.Internals(Fragment.get(dut, "formal"))
    assert internals["stats_fifo/level"].name == "level"
    assert internals["waiting"].name == "waiting"
    with pytest.raises(LookupError, match="0 signals 'no_such_signal'"):
        internals["no_such_signal"]
    with pytest.raises(LookupError, match="0 signals 'nowhere/level'"):
        internals["nowhere/level"]
    core = blocks.get("core")
    dut = core.build(**core.resolve(formal.CHECKS["core"].params))
    # A register whose name differs from its local variable in ``elaborate`` (the walker's
    # ``left`` is the signal ``words_left``; its ``addr``, ``burst_addr``, beside the port
    # ``addr``) is found by the variable's name; a memory's row through a read port the
    # harness adds.
    writer = formal.CHECKS["engine_writer"].dut()
    internals = formal.Internals(*formal.elaborate_keeping_locals(writer, "formal"))
    assert internals["walker/left"].name == "words_left" and len(internals["walker/left"]) == 16
    assert len(internals["walker/addr"]) == 32 and internals["row"] is not internals["word"]
    assert len(internals.row("lengths/storage", 6)) == 9
    with pytest.raises(IndexError):
        internals.row("lengths/storage", 7)
    # The core holds several FIFOs: "level" alone is ambiguous.
    with pytest.raises(LookupError) as ambiguous:
        formal.Internals(Fragment.get(dut, "formal"))["level"]
    assert int(str(ambiguous.value).split()[0]) > 1


def test_every_check_elaborates():
    """Every check's harness converts, so every signal its invariants name (local to hw/*.py)
    is still there, in seconds and without a solver; ``make formal`` runs the proofs."""
    from amaranth.back import rtlil
    for chk in formal.CHECKS.values():
        assert "$check" in rtlil.convert(chk.harness(), ports=[], platform="formal"), chk.name


def test_expander_elements_proof(tmp_path):
    """The expander's conservation proof (a tagged row's elements, its invariants over the
    block's registers) closes, and its covers (a held beat taken, a tagged nonzero element
    checked) are reached."""
    chk = formal.CHECKS["expander_elements"]
    result = formal.run_check(chk, depth=6, workdir=tmp_path, echo=lambda *a: None)
    assert result["status"] == "PROVEN" and result["covers"]["reached"] == 2, result
