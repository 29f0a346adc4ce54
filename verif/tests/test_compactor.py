"""Compaction engine: parameter checks, the golden model on hand-worked examples, amaranth.sim
unit tests, and the cocotb testbenches (compactor alone, and the compactor -> expander round
trip) in Verilator and Icarus over a covering set of configurations."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from spartan_rtl import runner
from spartan_rtl.golden.compactor import (
    compressed_bits,
    compression_ratio,
    decode_tile,
    encode_stream,
    encode_tile,
)
from spartan_rtl.golden.formats import pack_beat, unpack_beat
from spartan_rtl.hw import blocks
from spartan_rtl.hw.compactor import BLOCK, Compactor
from spartan_rtl.tb.tb_compactor_roundtrip import ROUNDTRIP_BLOCK
from verif.tests.amsim import get_stream, put_stream, run_with_deadline
from verif.tests.helpers import (
    ZVC_AMSIM_CONFIGS,
    ZVC_BAD_PARAMETERS,
    ZVC_CONFIGS,
    config_id,
    dense_stream,
)

# The parameter sets, shared with the expander: verif/tests/helpers.py.

# --- parameters -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, message", ZVC_BAD_PARAMETERS)
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error) as info:
        Compactor(**kwargs)
    assert str(info.value) == message


def test_properties_and_limits():
    c = Compactor(lanes=4, width=16, number_format="fp", cols=12)
    assert (c.lanes, c.width, c.number_format, c.cols, c.beats_per_row) == (4, 16, "fp", 12, 3)
    assert c.data_depth >= c.beats_per_row  # a whole row fits: the row in progress can finish
    with pytest.raises(AttributeError):
        c.lanes = 8
    # The range the issue asks for: lanes 1-64, width 1-64, cols up to at least 1024.
    BLOCK.resolve(dict(lanes=64, width=64, cols=1024))
    BLOCK.resolve(dict(lanes=1, width=1, cols=1024))


# --- the golden model, on examples worked by hand from the ZVC format ---------------------------
# (docs/interfaces.md#compactor-and-the-zvc-format)

def test_golden_worked_example():
    # lanes 4, width 8, cols 8. Row 0: nonzeros at 1, 4, 6, 7 -> mask 0b1101_0010, one beat.
    # Row 1: five nonzeros -> two beats, the second zero-filled. Row 2: empty -> no data beat.
    tile = [[0, 5, 0, 0, 7, 0, 9, 3],
            [1, 2, 3, 4, 5, 0, 0, 0],
            [0] * 8]
    c = encode_tile(tile, lanes=4, width=8, number_format="int")
    assert c.masks == [(0b11010010, 0), (0b00011111, 0), (0, 1)]
    assert c.data == [(0x03090705, 1), (0x04030201, 0), (0x00000005, 1)]
    assert decode_tile([m for m, _ in c.masks], [d for d, _ in c.data], cols=8, lanes=4,
                       width=8).tolist() == tile
    # 3 masks of 8 bits + 3 beats of 32 bits = 120 bits for 3*8*8 = 192 dense bits.
    assert compressed_bits(tile, lanes=4, width=8, number_format="int") == 120
    assert compression_ratio(tile, lanes=4, width=8, number_format="int") == 192 / 120
    # Bypass: every mask all ones, the rows unchanged, zeros included.
    b = encode_tile(tile, lanes=4, width=8, number_format="int", bypass=True)
    assert b.masks == [(0xFF, 0), (0xFF, 0), (0xFF, 1)]
    assert [d for d, _ in b.data] == [0x00000500, 0x03090007, 0x04030201, 0x5, 0, 0]
    assert [last for _, last in b.data] == [0, 1, 0, 1, 0, 1]


def test_golden_fp_zeros():
    # fp16: 0x8000 is -0.0 (a zero), 0x8001 the smallest negative number (not a zero).
    tile = [[0x8000, 0x0000, 0x8001, 0x0001]]
    c = encode_tile(tile, lanes=2, width=16, number_format="fp")
    assert c.masks == [(0b1100, 1)]
    assert c.data == [(0x0001_8001, 1)]


def test_golden_malformed_rows():
    # lanes 2, cols 4 (2 beats a row); a tlast after one beat closes the row with zeros.
    beats = [(0x0102, 1, 0),                 # tile 1: half a row, compressed
             (0x0300, 0, 1), (0x0004, 1, 0),  # tile 2: a whole row, bypass
             (0x0000, 1, 1)]                 # tile 3: half a row, bypass
    masks, data, errors = encode_stream(beats, lanes=2, width=8, cols=4, number_format="int")
    assert masks == [(0b0011, 1), (0b1111, 1), (0b0011, 1)]
    assert data == [(0x0102, 1), (0x0300, 0), (0x0004, 1), (0x0000, 1)]
    assert errors == 2


# --- amaranth.sim: the component before Verilog --------------------------------------------

def sim_compactor(config, beats, seed=1, idle=0.3, backpressure=0.3):
    """Drive ``beats`` ``(tdata, tlast, tuser)`` through the component; returns the mask and
    data beats as ``(tdata, tlast)`` and the number of ``error`` pulses."""
    lanes, width = config["lanes"], config["width"]
    masks, data, _ = encode_stream(beats, **config)
    rng = random.Random(seed)
    dut = Compactor(**config)
    result = {"errors": 0}

    async def source(ctx):
        await put_stream(ctx, dut.s_axis, [
            {"data": [int(x) for x in unpack_beat(t, lanes, width)], "last": last,
             "user": {"bypass": user}}
            for t, last, user in beats], rng, idle)

    async def mask_sink(ctx):
        result["masks"] = await get_stream(ctx, dut.m_axis_mask, len(masks), rng, backpressure)

    async def data_sink(ctx):
        result["data"] = await get_stream(ctx, dut.m_axis_data, len(data), rng, backpressure)

    async def errors(ctx):
        async for _, _, error in ctx.tick().sample(dut.error):
            result["errors"] += error

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(mask_sink)
    sim.add_testbench(data_sink)
    sim.add_testbench(errors, background=True)
    run_with_deadline(sim, 40 * (len(beats) + 50))
    got_masks = [(int(b.data), int(b.last)) for b in result["masks"]]
    got_data = [(pack_beat(list(b.data), width), int(b.last)) for b in result["data"]]
    return got_masks, got_data, result["errors"]


@pytest.mark.parametrize("config", ZVC_AMSIM_CONFIGS, ids=config_id)
def test_amaranth_sim(config):
    rng, np_rng = random.Random(2), np.random.default_rng(2)
    beats = dense_stream(config, 12, rng, np_rng)
    # And one row cut short by tlast, when a row has more than one beat.
    per_row = config["cols"] // config["lanes"]
    if per_row > 1:
        beats.append((pack_beat([7] * config["lanes"], config["width"]), 1, 0))
    masks, data, errors = encode_stream(beats, **config)
    assert sim_compactor(config, beats) == (masks, data, errors)
    assert errors == (per_row > 1)


LATENCY_CASES = [  # (config, which beats of the row hold its nonzeros)
    (dict(lanes=8, width=8, number_format="int", cols=64), "all"),
    (dict(lanes=8, width=8, number_format="int", cols=64), "last"),
    (dict(lanes=4, width=8, number_format="int", cols=4), "all"),     # a row per beat
]


@pytest.mark.parametrize("config, nonzero", LATENCY_CASES,
                         ids=[f"{config_id(c)}-{n}" for c, n in LATENCY_CASES])
def test_latency(config, nonzero):
    """The manifest's latencies (``info``): into an idle compactor, both outputs always ready,
    a row's mask transfers ``latency_cycles`` edges after the row's last input beat. Its first
    data beat transfers ``data_latency_cycles`` edges after it when that beat is made by the
    row's last input beat (``nonzero`` "last", or a one-beat row), and one edge after the mask
    when it was made earlier (it waits for the mask's grant)."""
    lanes, beats = config["lanes"], config["cols"] // config["lanes"]
    dut = Compactor(**config)
    info = BLOCK.info(dut)
    edges = {}

    async def bench(ctx):
        ctx.set(dut.m_axis_mask.ready, 1)
        ctx.set(dut.m_axis_data.ready, 1)
        sent, edge = 0, 0
        await ctx.tick().repeat(2)
        while "data" not in edges:
            value = sent + 1 if nonzero == "all" or sent == beats - 1 else 0
            ctx.set(dut.s_axis.valid, sent < beats)
            ctx.set(dut.s_axis.payload, {"data": [value] * lanes, "last": sent == beats - 1,
                                         "user": {"bypass": 0}})
            _, _, ready, mask_valid, data_valid = await ctx.tick().sample(
                dut.s_axis.ready, dut.m_axis_mask.valid, dut.m_axis_data.valid)
            edge += 1
            if sent < beats and ready:
                sent += 1
                if sent == beats:
                    edges["last_in"] = edge
            if mask_valid and "mask" not in edges:
                edges["mask"] = edge
            if data_valid and "data" not in edges:
                edges["data"] = edge
            assert edge < 100, f"no data beat: {edges}"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert edges["mask"] - edges["last_in"] == info["latency_cycles"]
    if nonzero == "last" or beats == 1:
        assert edges["data"] - edges["last_in"] == info["data_latency_cycles"]
    else:
        assert edges["data"] - edges["mask"] == 1


# --- cocotb in Verilator and Icarus --------------------------------------------------------

@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", ZVC_CONFIGS, ids=config_id)
def test_compactor(config, sim):
    runner.run("compactor", "spartan_rtl.tb.tb_compactor", config, sim=sim, name="regression",
               args={"tiles": 30})


ROUND_TRIP_CONFIGS = [ZVC_CONFIGS[0], ZVC_CONFIGS[2]]


@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", ROUND_TRIP_CONFIGS, ids=config_id)
def test_round_trip(config, sim, monkeypatch):
    # The round-trip harness is a test-only block: registered for this test alone.
    monkeypatch.setitem(blocks.BLOCKS, ROUNDTRIP_BLOCK.name, ROUNDTRIP_BLOCK)
    runner.run(ROUNDTRIP_BLOCK.name, "spartan_rtl.tb.tb_compactor_roundtrip", config, sim=sim,
               name="regression", args={"tiles": 20})
