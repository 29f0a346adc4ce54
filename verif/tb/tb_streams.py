"""Generic cocotb stimulus for any block, from its manifest alone: random beats (random data,
``tlast`` ending packets of random length, random ``tuser``, random ``tdata`` pad bits) with
random idle cycles into every input stream, random back-pressure on every output stream; other
inputs stay 0. Every output's ``tdata`` pad bits are checked to be 0 (:class:`AxisSink`).

``spartan sim`` uses it for a block whose testbench has no ``random_traffic`` test. It checks
nothing about the block's function (the block's own testbench does); it also takes a *census*:
the cycles each stream spends in transfer / stall / starved / idle between two rising edges,
counted by :class:`spartan_rtl.tb.axis.AxisSink` (outputs) and by an equivalent watcher (inputs),
written to ``census.json`` — the reference the waveform report (``spartan waves --streams``) is
tested against.

Test arguments (``SPARTAN_ARGS``): ``beats`` per input stream (default 200), ``idle``,
``backpressure`` (default 0.3), ``packet`` (mean packet length in beats, default 6),
``quiet`` (cycles without a transfer that end the run, default 40), ``timeout`` (cycles,
default 20 per beat + 1000: a block that deadlocks on malformed traffic still stops).
"""

import json

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from spartan_rtl.handshake import counters, cycle_state
from spartan_rtl.tb.axis import CLOCK_NS, Beat, Bench, read_int, test_args


class Watch:
    """Per-cycle handshake states of an input stream, counted like :class:`AxisSink` does."""

    def __init__(self, dut, name, clk):
        self.valid = getattr(dut, f"{name}_tvalid")
        self.ready = getattr(dut, f"{name}_tready")
        self.clk = clk
        self.cycles = counters()
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()
            valid, ready = read_int(self.valid), read_int(self.ready)
            self.cycles[cycle_state(valid, ready)] += 1


def _snapshot(counters, packets):
    return {name: {**dict(c.cycles), "packets": packets[name]()} for name, c in counters.items()}


@cocotb.test()
async def random_streams(dut):
    """Random traffic on every stream of the manifest; writes ``census.json``."""
    args = test_args()
    bench = Bench(dut)
    doc, rng = bench.manifest, bench.rng
    ports = {p["name"] for p in doc["ports"]}
    await bench.reset()
    counters, packets, sources, sinks = {}, {}, [], []
    for name, stream in doc["streams"].items():
        if stream["dir"] == "in":
            src = bench.source(name, idle=args.get("idle", 0.3))
            bits = src.bits   # the payload: the source adds random pad bits itself
            user_bits = len(src.tuser) if src.tuser is not None else 0
            beats = []
            for i in range(args.get("beats", 200)):
                last = f"{name}_tlast" in ports and (rng.random() < 1 / args.get("packet", 6)
                                                    or i == args.get("beats", 200) - 1)
                beats.append(Beat(rng.getrandbits(bits), int(last),
                                  rng.getrandbits(user_bits) if user_bits else 0))
            src.send(beats)
            sources.append(src)
            counters[name] = Watch(dut, name, bench.clk)
            packets[name] = lambda s=src: sum(b.last for b in s.sent)
        else:
            sink = bench.sink(name, backpressure=args.get("backpressure", 0.3))
            sinks.append(sink)
            counters[name] = sink
            packets[name] = lambda s=sink: sum(b.last for b in s.beats)
    for _ in range(2):
        await RisingEdge(bench.clk)
    start_ns, start = get_sim_time("ns"), _snapshot(counters, packets)
    quiet, last_total = 0, -1
    for _ in range(args.get("timeout", 20 * args.get("beats", 200) + 1000)):
        await RisingEdge(bench.clk)
        total = sum(len(s.beats) for s in sinks) + sum(len(s.sent) for s in sources)
        quiet = quiet + 1 if total == last_total else 0
        last_total = total
        if all(s.idle_now for s in sources) and quiet >= args.get("quiet", 40):
            break
    end_ns, end = get_sim_time("ns"), _snapshot(counters, packets)
    census = {"from_ns": start_ns, "to_ns": end_ns, "period_ns": CLOCK_NS,
              "streams": {name: {k: end[name][k] - start[name][k] for k in end[name]}
                          for name in counters}}
    with open("census.json", "w") as f:
        json.dump(census, f, indent=2)

