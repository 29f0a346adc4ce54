"""Expander: parameter checks, the golden expander on hand-worked malformed streams, amaranth.sim
unit tests, and the cocotb testbench in Verilator and Icarus over the compactor's covering set
of configurations (the round trip is in test_compactor.py)."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from spartan_rtl import runner
from spartan_rtl.golden.compactor import encode_stream, expand_stream
from spartan_rtl.golden.formats import pack_beat, unpack_beat
from spartan_rtl.hw.expander import BLOCK, Expander
from verif.tests.amsim import get_stream, put_stream, run_with_deadline
from verif.tests.helpers import (
    ZVC_AMSIM_CONFIGS,
    ZVC_BAD_PARAMETERS,
    ZVC_CONFIGS,
    config_id,
    dense_stream,
)


@pytest.mark.parametrize("kwargs, error, message", ZVC_BAD_PARAMETERS)
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error) as info:
        Expander(**kwargs)
    assert str(info.value) == message


def test_properties():
    e = Expander(lanes=2, width=8, number_format="int", cols=6)
    assert (e.lanes, e.width, e.number_format, e.cols, e.beats_per_row) == (2, 8, "int", 6, 3)
    with pytest.raises(AttributeError):
        e.cols = 8


def test_golden_expand_malformed():
    # lanes 2, width 8, cols 4. Row 0 needs 2 data beats, row 1 none, row 2 one.
    masks = [(0b1111, 0), (0b0000, 0), (0b0100, 1)]
    good = [(0x0201, 0), (0x0403, 1), (0x0009, 1)]
    beats, errors = expand_stream(masks, good, lanes=2, width=8, cols=4)
    assert beats == [(0x0201, 0), (0x0403, 0), (0, 0), (0, 0), (0, 0), (0x0009, 1)]
    assert errors == 0
    # A tlast too early in row 0 and one missing in row 2: same output, two error rows.
    bad = [(0x0201, 1), (0x0403, 1), (0x0009, 0)]
    assert expand_stream(masks, bad, lanes=2, width=8, cols=4) == (beats, 2)
    # Data still missing for row 2: it is not produced (the expander waits).
    assert expand_stream(masks, good[:2], lanes=2, width=8, cols=4) == (beats[:4], 0)


def sim_expander(config, masks, data, seed=1, idle=0.3, backpressure=0.3):
    lanes, width = config["lanes"], config["width"]
    expected, _ = expand_stream(masks, data, lanes=lanes, width=width, cols=config["cols"])
    rng = random.Random(seed)
    dut = Expander(**config)
    result = {"errors": 0}

    async def mask_source(ctx):
        await put_stream(ctx, dut.s_axis_mask, [{"data": m, "last": last} for m, last in masks],
                         rng, idle)

    async def data_source(ctx):
        await put_stream(ctx, dut.s_axis_data, [
            {"data": [int(x) for x in unpack_beat(t, lanes, width)], "last": last}
            for t, last in data], rng, idle)

    async def sink(ctx):
        result["out"] = await get_stream(ctx, dut.m_axis, len(expected), rng, backpressure)
        await ctx.tick().repeat(3)  # the last row's error pulse

    async def errors(ctx):
        async for _, _, error in ctx.tick().sample(dut.error):
            result["errors"] += error

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in (mask_source, data_source, sink):
        sim.add_testbench(tb)
    sim.add_testbench(errors, background=True)
    run_with_deadline(sim, 40 * (len(expected) + 50))
    return [(pack_beat(list(b.data), width), int(b.last)) for b in result["out"]], \
        result["errors"]


@pytest.mark.parametrize("config", ZVC_AMSIM_CONFIGS, ids=config_id)
def test_amaranth_sim(config):
    rng, np_rng = random.Random(3), np.random.default_rng(3)
    masks, data, _ = encode_stream(dense_stream(config, 12, rng, np_rng), **config)
    assert sim_expander(config, masks, data) == expand_stream(masks, data, lanes=config["lanes"],
                                                              width=config["width"],
                                                              cols=config["cols"])
    # Flip one data tlast: the same output, one error row.
    i = rng.randrange(len(data))
    flipped = data[:i] + [(data[i][0], 1 - data[i][1])] + data[i + 1:]
    beats, errors = sim_expander(config, masks, flipped)
    assert (beats, errors) == expand_stream(masks, flipped, lanes=config["lanes"],
                                            width=config["width"], cols=config["cols"])
    assert errors == 1


@pytest.mark.parametrize("config", [ZVC_CONFIGS[2],
                                    dict(lanes=4, width=8, number_format="int", cols=4)],
                         ids=config_id)
def test_latency(config):
    """The manifest's latencies (``info``), output always ready, into an idle expander: a row
    whose data beat is already valid gives its first output beat ``latency_cycles`` edges after
    its mask transfers; when the data beat comes late, the output beat that uses it transfers
    ``data_latency_cycles`` edges after it."""
    lanes, cols = config["lanes"], config["cols"]
    dut = Expander(**config)
    info = BLOCK.info(dut)
    mask = (1 << cols) - 1  # dense rows: every output beat uses a data beat

    async def row(ctx, data_delay):
        """One row; its data beats become valid ``data_delay`` edges after it starts. Returns
        the edges of the mask transfer, the first data transfer and the first output beat."""
        beats = cols // lanes
        edges, edge, sent_mask, sent_data, received = {}, 0, False, 0, 0
        ctx.set(dut.m_axis.ready, 1)
        while received < beats:
            ctx.set(dut.s_axis_mask.valid, not sent_mask)
            ctx.set(dut.s_axis_mask.payload, {"data": mask, "last": 1})
            data_valid = sent_data < beats and edge >= data_delay
            ctx.set(dut.s_axis_data.valid, data_valid)
            ctx.set(dut.s_axis_data.payload, {"data": [sent_data + 1] * lanes,
                                              "last": sent_data == beats - 1})
            _, _, mask_ready, data_ready, out_valid = await ctx.tick().sample(
                dut.s_axis_mask.ready, dut.s_axis_data.ready, dut.m_axis.valid)
            edge += 1
            if not sent_mask and mask_ready:
                sent_mask, edges["mask"] = True, edge
            if data_valid and data_ready:
                sent_data += 1
                edges.setdefault("data", edge)
            if out_valid:
                received += 1
                edges.setdefault("out", edge)
            assert edge < 200, f"row not expanded: {edges}"
        ctx.set(dut.s_axis_mask.valid, 0)
        ctx.set(dut.s_axis_data.valid, 0)
        return edges

    results = []

    async def bench(ctx):
        for delay in (0, 20):
            results.append(await row(ctx, delay))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    on_time, late = results
    assert on_time["out"] - on_time["mask"] == info["latency_cycles"]
    assert late["out"] - late["data"] == info["data_latency_cycles"]


@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", ZVC_CONFIGS, ids=config_id)
def test_expander(config, sim):
    runner.run("expander", "spartan_rtl.tb.tb_expander", config, sim=sim, name="regression",
               args={"tiles": 30})
