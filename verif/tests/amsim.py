"""Helpers for fast ``amaranth.sim`` unit tests of the Amaranth components (no Verilog, no
cocotb): run testbenches, push and pull stream beats with random idle and back-pressure."""

from __future__ import annotations

from amaranth.sim import Simulator

__all__ = ["simulate", "put_stream", "get_stream"]


def simulate(dut, *testbenches, vcd=None, deadline_cycles=200_000):
    """Run async ``testbenches`` (each ``async def tb(ctx)``) against ``dut`` with a clock."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run_until(deadline_cycles * 1e-8)
    else:
        sim.run()


async def put_stream(ctx, stream, payloads, rng, idle=0.3):
    """Send every payload on ``stream`` (a sink of the DUT), idling at random between beats."""
    for payload in payloads:
        while rng.random() < idle:
            ctx.set(stream.valid, 0)
            await ctx.tick()
        ctx.set(stream.payload, payload)
        ctx.set(stream.valid, 1)
        await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def get_stream(ctx, stream, count, rng, backpressure=0.3):
    """Receive ``count`` payloads from ``stream`` (a source of the DUT), with random
    back-pressure; returns them as Python values (``ctx.get`` of the payload)."""
    received = []
    while len(received) < count:
        ready = rng.random() >= backpressure
        ctx.set(stream.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if ready and valid:
            received.append(payload)
    ctx.set(stream.ready, 0)
    return received
