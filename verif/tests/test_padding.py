"""Byte-padded ``tdata`` (docs/interfaces.md#lane-packing-and-tdata-width): every stream's
``tdata`` port is whole bytes, the payload keeps its low bits, output pad bits are 0 and input
pad bits change nothing.

Expected widths come from the documented payload formulas (``lanes*width`` for elements,
``cols``/``k`` for a mask, ``lanes*acc_width`` for ``C``, the monitor's record from its field
widths), never from the generator. Three levels:

- the generated files: the Verilog's port declarations, the manifest and the instantiation
  template, at every block's defaults and at a configuration whose payloads are not whole bytes;
- amaranth.sim, two copies of each padded top side by side, random inputs every cycle, one copy
  with pad bits 0 and one with random pad bits: every output equal in every cycle and every
  output pad bit 0 (and a top broken either way is caught);
- cocotb, both simulators: each block's own testbench at the non-byte configuration, whose
  sources drive random pad bits and whose sinks fail on a pad bit that is not 0
  (spartan_rtl.tb.axis), with the scoreboards checking every element; and a top whose output
  pad bits are not 0 fails there.
"""

import json
import random
import re

import pytest
from amaranth.hdl import Elaboratable, Module, Shape
from amaranth.lib.wiring import In

from spartan_rtl import runner
from spartan_rtl.hw import blocks, emit
from spartan_rtl.hw.axis import AxisTop, stream_fields
from verif.flows.lint import lint
from verif.tests.amsim import simulate


def _bytes(bits):
    return (bits + 7) // 8 * 8


def _stats_bits(lanes, max_tile_elems):
    """The monitor's record (docs/interfaces.md#monitor): nnz and elems of
    bit_length(max_tile_elems) bits, zero_beats of bit_length(ceil(max/lanes)), sparse 1."""
    return 2 * max_tile_elems.bit_length() + (-(-max_tile_elems // lanes)).bit_length() + 1


def payloads(block, p):
    """``{stream: payload bits}`` as docs/interfaces.md defines each block's streams."""
    if block == "monitor":
        return {"s_axis": p["lanes"] * p["width"], "m_axis": p["lanes"] * p["width"],
                "m_axis_stats": _stats_bits(p["lanes"], p["max_tile_elems"])}
    if block == "compactor":
        return {"s_axis": p["lanes"] * p["width"], "m_axis_mask": p["cols"],
                "m_axis_data": p["lanes"] * p["width"]}
    if block == "expander":
        return {"s_axis_mask": p["cols"], "s_axis_data": p["lanes"] * p["width"],
                "m_axis": p["lanes"] * p["width"]}
    if block == "gemm":
        return {"s_axis_b": p["lanes"] * p["width"], "s_axis_a_mask": p["k"],
                "s_axis_a_data": p["lanes"] * p["width"], "m_axis_c": p["lanes"] * p["acc_width"]}
    assert block == "core"
    return {"s_axis_a": p["lanes"] * p["width"], "s_axis_b": p["lanes"] * p["width"],
            "m_axis_c": p["lanes"] * p["acc_width"]}


#: One configuration per block in which every stream's payload is not whole bytes.
NON_BYTE = {
    "monitor": dict(lanes=4, width=3, number_format="int", max_tile_elems=100),
    "compactor": dict(lanes=4, width=3, number_format="int", cols=12),
    "expander": dict(lanes=4, width=3, number_format="int", cols=12),
    "gemm": dict(lanes=4, width=5, signed=True, acc_width=13, k=20, n=8, k_par=1, n_par=4),
    "core": dict(lanes=4, width=5, signed=True, acc_width=13, k=20, n=8, k_par=4, n_par=8,
                 table_depth=4),
}
CASES = [(b, {}) for b in NON_BYTE] + list(NON_BYTE.items())


def case_id(case):
    block, config = case
    return f"{block}-{'nonbyte' if config else 'defaults'}"


def test_non_byte_configurations_have_no_whole_byte_payload():
    """The premise of the configurations below: every payload needs padding."""
    for block, config in NON_BYTE.items():
        p = blocks.get(block).resolve(config)
        assert all(bits % 8 for bits in payloads(block, p).values()), (block, payloads(block, p))


def _declared_widths(verilog):
    return {name: int(msb) + 1 if msb else 1 for msb, name in
            re.findall(r"^\s*(?:input|output)\s+(?:\[(\d+):0\]\s+)?(\w+);", verilog, re.M)}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_generated_tdata_is_whole_bytes(case, tmp_path):
    block_name, config = case
    block = blocks.get(block_name)
    emit.generate(block, config, tmp_path)
    doc = json.loads((tmp_path / f"{block.top}.json").read_text())
    verilog = (tmp_path / f"{block.top}.v").read_text()
    template = (tmp_path / f"{block.top}_inst.v").read_text()
    declared = _declared_widths(verilog)
    ports = {p["name"]: p["width"] for p in doc["ports"]}
    expected = payloads(block_name, doc["params"])
    assert set(doc["streams"]) == set(expected)
    for name, bits in expected.items():
        s, port = doc["streams"][name], f"{name}_tdata"
        assert (s["beat_bits"], s["tdata_width"]) == (bits, _bytes(bits)), name
        assert declared[port] == ports[port] == _bytes(bits), name
        assert f"wire [{_bytes(bits) - 1}:0] {port};" in template, name
        # the payload is where it was: the fields end at the payload's top, below the pad
        assert max(f["lsb"] + f["width"] for f in s["fields"]) == bits, name
    # nothing but tdata is padded: every other port is as wide as before
    for p in doc["ports"]:
        if not p["name"].endswith("_tdata"):
            assert declared[p["name"]] == p["width"]
    # `verilator -Wall` (make lint's waivers) finds exactly the input pad bits unused: they
    # reach no logic. Output pads are constants and raise nothing.
    code, output = lint(tmp_path / f"{block.top}.v")
    findings = set(re.findall(r"^%Warning-\w+: \S+: (.*)$", output, re.M))
    assert findings == {f"Bits of signal are not used: '{n}_tdata'[{_bytes(b) - 1}:{b}]"
                        for n, b in expected.items()
                        if doc["streams"][n]["dir"] == "in" and b % 8}, output


# --- amaranth.sim: pad bits 0 out, ignored in ----------------------------------------------

class _Pair(Elaboratable):
    """Two tops of one configuration, side by side, sharing nothing but the clock."""

    def __init__(self, clean, dirty):
        self.clean, self.dirty = clean, dirty

    def elaborate(self, platform):
        m = Module()
        m.submodules.clean, m.submodules.dirty = self.clean, self.dirty
        return m


def _payloads(inner):
    """``{tdata port: payload bits}`` from the manifest's ``streams``."""
    return {f"{n}_tdata": s["beat_bits"] for n, s in stream_fields(inner).items()}


def _differential(block_name, config, make_top=AxisTop, cycles=400, seed=1):
    """Random values on every input of two tops every cycle, ``clean`` with 0 in its pad bits
    and ``dirty`` with random ones. Returns ``(mismatches, transfers)``: the first few
    ``(cycle, port, clean, dirty)`` where an output differs or has a pad bit set, and the
    transfers seen per output stream (the comparison is not vacuous)."""
    block = blocks.get(block_name)
    params = block.resolve(config)
    clean, dirty = (make_top(block.build(**params)) for _ in range(2))
    streams = stream_fields(clean.inner)
    payload = {f"{n}_tdata": bits for n, bits in payloads(block_name, params).items()}
    members = clean.signature.members
    inputs = [(n, Shape.cast(m.shape).width) for n, m in members.items() if m.flow == In]
    outputs = [n for n, m in members.items() if m.flow != In]
    rng = random.Random(seed)
    mismatches, transfers = [], {n: 0 for n, s in streams.items() if s["dir"] == "out"}

    async def bench(ctx):
        for cycle in range(cycles):
            for name, width in inputs:
                value = rng.getrandbits(width)
                # valid high 3 times in 4: enough beats through to reach every output
                if name.endswith("_tvalid") or name.endswith("_tready"):
                    value = int(rng.random() < 0.75)
                ctx.set(getattr(dirty, name), value)
                ctx.set(getattr(clean, name), value & ((1 << payload.get(name, width)) - 1))
            for name in outputs:
                a, b = ctx.get(getattr(clean, name)), ctx.get(getattr(dirty, name))
                pad = payload.get(name)
                if a != b or (pad is not None and (a >> pad or b >> pad)):
                    mismatches.append((cycle, name, a, b))
            for s in transfers:
                transfers[s] += ctx.get(getattr(clean, f"{s}_tvalid")) and \
                    ctx.get(getattr(clean, f"{s}_tready"))
            if len(mismatches) >= 5:
                return
            await ctx.tick()

    simulate(_Pair(clean, dirty), bench)
    return mismatches, transfers


@pytest.mark.parametrize("block_name", list(NON_BYTE))
def test_output_pad_is_zero_and_input_pad_ignored(block_name):
    mismatches, transfers = _differential(block_name, NON_BYTE[block_name])
    assert not mismatches, f"(cycle, port, pad 0 in, random pad in): {mismatches}"
    assert all(transfers.values()), f"an output never transferred: {transfers}"


class _PadOnes(AxisTop):
    """Broken: drives every output pad bit 1."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        for port, bits in _payloads(self.inner).items():
            if self.signature.members[port].flow != In:
                m.d.comb += getattr(self, port)[bits:].eq(-1)   # the later assignment wins
        return m


class _PadLeaks(AxisTop):
    """Broken: an input's pad bits reach its payload (XORed into its low bits)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        for port, bits in _payloads(self.inner).items():
            if self.signature.members[port].flow == In:
                flat = getattr(self, port)
                data = getattr(self.inner, port[:-len("_tdata")]).payload["data"].as_value()
                m.d.comb += data.eq(flat[:bits] ^ flat[bits:])   # the later assignment wins
        return m


@pytest.mark.parametrize("broken", [_PadOnes, _PadLeaks], ids=lambda c: c.__name__)
def test_differential_catches_broken_padding(broken):
    """The comparison above fails on a top that drives its pad bits or reads them (the
    monitor passes ``s_axis`` to ``m_axis``, so both show there)."""
    mismatches, _ = _differential("monitor", NON_BYTE["monitor"], broken, cycles=50)
    assert any(m[1] == "m_axis_tdata" for m in mismatches), mismatches


# --- cocotb, both simulators ----------------------------------------------------------------

#: The block's own testbench, and the tests of it that run at the non-byte configuration (the
#: random traffic and the protocol checks; the rest only repeat them at more cycles).
TESTBENCHES = {
    "monitor": ("spartan_rtl.tb.tb_monitor", None),
    "compactor": ("spartan_rtl.tb.tb_compactor", None),
    "expander": ("spartan_rtl.tb.tb_expander", None),
    "gemm": ("spartan_rtl.tb.tb_gemm", ["random_traffic", "edge_tiles"]),
    # The register tests too: the odd widths reach the CONFIG_* registers (acc_width 13...).
    "core": ("spartan_rtl.tb.tb_core", ["adaptive_passes", "malformed_tile", "registers",
                                        "every_register_written"]),
}


@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("block_name", list(NON_BYTE))
def test_testbench_with_random_pad_bits(block_name, sim):
    tb, testcase = TESTBENCHES[block_name]
    runner.run(block_name, tb, NON_BYTE[block_name], sim=sim, name="padding", testcase=testcase,
               seed=3)


@pytest.mark.parametrize("sim", runner.sims())
def test_sink_fails_on_a_pad_bit_set(sim, tmp_path):
    """The monitor with its output pad bits driven 1 fails its own testbench, by the sinks'
    pad check (the scoreboards compare the payload only after it)."""
    block = blocks.get("monitor")
    config = NON_BYTE["monitor"]
    broken = tmp_path / "broken.v"
    broken.write_text(emit.to_verilog(_PadOnes(block.build(**block.resolve(config))), block.top))
    built = runner.build("monitor", config, sim=sim, verilog=broken, build_dir=tmp_path / "b")
    with pytest.raises(runner.SimulationFailed, match="pad bits tdata"):
        runner.run("monitor", "spartan_rtl.tb.tb_monitor", config, sim=sim, name="broken",
                   testcase="random_traffic", seed=3, built=built)
