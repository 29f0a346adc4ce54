"""Helpers for fast ``amaranth.sim`` unit tests of the Amaranth components (no Verilog, no
cocotb): run testbenches, push and pull stream beats with random idle and back-pressure, read
and write registers over AXI4-Lite."""

from __future__ import annotations

from amaranth.sim import Simulator

__all__ = ["simulate", "run_with_deadline", "put_stream", "get_stream", "axil_write",
           "axil_read"]


def simulate(dut, *testbenches, vcd=None, deadline_cycles=200_000):
    """Run async ``testbenches`` (each ``async def tb(ctx)``) against ``dut`` with a clock,
    failing (not hanging) when they still wait after ``deadline_cycles``: a design that loses
    a beat leaves its testbench waiting for ever."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run_until(deadline_cycles * 1e-8)
    else:
        run_with_deadline(sim, deadline_cycles)


def run_with_deadline(sim, cycles):
    """``sim.run()``, failing instead of hanging when a testbench still waits after ``cycles``
    clock cycles (lost beats)."""
    steps = 0
    while sim.advance():
        steps += 1
        assert steps < 4 * cycles, f"simulation still running after {cycles} cycles"


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


async def axil_write(ctx, dut, addr, value):
    ctx.set(dut.s_axil_awaddr, addr)
    ctx.set(dut.s_axil_wdata, value)
    ctx.set(dut.s_axil_wstrb, 0xF)
    ctx.set(dut.s_axil_awvalid, 1)
    ctx.set(dut.s_axil_wvalid, 1)
    ctx.set(dut.s_axil_bready, 1)
    aw = w = False
    while not (aw and w):
        _, _, awready, wready = await ctx.tick().sample(dut.s_axil_awready, dut.s_axil_wready)
        aw, w = aw or awready, w or wready
        ctx.set(dut.s_axil_awvalid, not aw)
        ctx.set(dut.s_axil_wvalid, not w)
    valid = 0
    while not valid:
        _, _, valid, resp = await ctx.tick().sample(dut.s_axil_bvalid, dut.s_axil_bresp)
    ctx.set(dut.s_axil_bready, 0)
    assert resp == 0, f"write {addr:#x}: bresp {resp}"


async def axil_read(ctx, dut, addr):
    ctx.set(dut.s_axil_araddr, addr)
    ctx.set(dut.s_axil_arvalid, 1)
    await ctx.tick().until(dut.s_axil_arready)
    ctx.set(dut.s_axil_arvalid, 0)
    ctx.set(dut.s_axil_rready, 1)
    valid = 0
    while not valid:
        _, _, valid, data, resp = await ctx.tick().sample(dut.s_axil_rvalid, dut.s_axil_rdata,
                                                          dut.s_axil_rresp)
    ctx.set(dut.s_axil_rready, 0)
    assert resp == 0, f"read {addr:#x}: rresp {resp}"
    return data
