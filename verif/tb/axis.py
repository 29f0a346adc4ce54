"""cocotb AXI4-Stream helpers: a source, a sink that also checks the protocol, a clock/reset
bench and a scoreboard. Every helper takes a seeded ``random.Random`` so a failing run is
reproduced by its seed.

Timing discipline (the same in Verilator and Icarus): everything the testbench drives changes
just after a falling clock edge; after ``ReadOnly`` the DUT's combinational outputs have settled
to the values the next rising edge samples, so a transfer is recorded exactly when the DUT sees
one. No value is ever read right after a rising edge, where the two simulators differ.
"""

from __future__ import annotations

import json
import os
import random
from collections import deque
from dataclasses import dataclass

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["Beat", "AxisSource", "AxisSink", "Bench", "manifest", "test_args", "read_int",
           "check_sequence", "stream_fields", "decode"]

CLOCK_NS = 10


@dataclass(frozen=True)
class Beat:
    data: int
    last: int = 0
    user: int = 0


def manifest():
    with open(os.environ["SPARTAN_MANIFEST"]) as f:
        return json.load(f)


def test_args():
    return json.loads(os.environ.get("SPARTAN_ARGS", "{}"))


def read_int(handle):
    """An output's value as an int; X or Z is a test failure naming the signal."""
    value = handle.value
    try:
        return int(value)
    except ValueError:
        raise AssertionError(f"{handle._name} is {value} (X or Z)") from None


class AxisSource:
    """Drives ``<name>_tdata/_tvalid/_tlast/_tuser`` from a queue of :class:`Beat`.

    Before each beat it idles (``tvalid`` low) with probability ``idle``; while idle it drives
    random garbage on ``tdata`` so a DUT that reads data without ``tvalid`` shows up. Once
    ``tvalid`` is high it holds the beat until ``tready``.
    """

    def __init__(self, dut, name, clk, rng, *, idle=0.3, cycle=lambda: 0):
        self.name, self.clk, self.rng, self.idle = name, clk, rng, idle
        self._cycle = cycle
        self.tdata = getattr(dut, f"{name}_tdata")
        self.tvalid = getattr(dut, f"{name}_tvalid")
        self.tready = getattr(dut, f"{name}_tready")
        self.tlast = getattr(dut, f"{name}_tlast", None)
        self.tuser = getattr(dut, f"{name}_tuser", None)
        self._bits = len(self.tdata)
        self.queue = deque()
        self.sent = []
        self.sent_cycles = []  # the cycle of each transfer, as counted by ``cycle()``
        self._task = None

    def send(self, beats):
        self.queue.extend(beats)

    def start(self):
        self._task = cocotb.start_soon(self._run())
        return self

    def stop(self):
        """Stop driving (the beat in flight, if any, is dropped with the queue)."""
        if self._task is not None:
            self._task.cancel()
        self._task, self._current = None, None
        self.queue.clear()

    @property
    def idle_now(self):
        return not self.queue and self._current is None

    _current = None

    def _drive(self, beat):
        if beat is None:
            self.tvalid.value = 0
            self.tdata.value = self.rng.getrandbits(self._bits)
            if self.tlast is not None:
                self.tlast.value = self.rng.getrandbits(1)
            if self.tuser is not None:
                self.tuser.value = self.rng.getrandbits(len(self.tuser))
            return
        self.tvalid.value = 1
        self.tdata.value = beat.data
        if self.tlast is not None:
            self.tlast.value = beat.last
        if self.tuser is not None:
            self.tuser.value = beat.user

    async def _run(self):
        while True:
            await FallingEdge(self.clk)
            if self._current is None and self.queue and self.rng.random() >= self.idle:
                self._current = self.queue.popleft()
            self._drive(self._current)
            await ReadOnly()
            if self._current is not None and self.tready.value == 1:
                self.sent.append(self._current)
                self.sent_cycles.append(self._cycle())
                self._current = None


class AxisSink:
    """Drives ``<name>_tready`` (low with probability ``backpressure`` each cycle), collects
    transferred beats, and checks the AXI4-Stream rule on the DUT's output: once ``tvalid`` is
    high, it stays high with ``tdata``/``tlast``/``tuser`` unchanged until the transfer."""

    def __init__(self, dut, name, clk, rng, *, backpressure=0.3, cycle=lambda: 0):
        self.name, self.clk, self.rng, self.backpressure = name, clk, rng, backpressure
        self._cycle = cycle
        self.tdata = getattr(dut, f"{name}_tdata")
        self.tvalid = getattr(dut, f"{name}_tvalid")
        self.tready = getattr(dut, f"{name}_tready")
        self.tlast = getattr(dut, f"{name}_tlast", None)
        self.tuser = getattr(dut, f"{name}_tuser", None)
        self.beats = []
        self.beat_cycles = []  # the cycle of each transfer, as counted by ``cycle()``
        self.cycles = {"transfer": 0, "stall": 0, "starved": 0, "idle": 0}
        self.hold = False  # True: tready low regardless of ``backpressure``
        self._task = None

    def start(self):
        self._task = cocotb.start_soon(self._run())
        return self

    def stop(self):
        if self._task is not None:
            self._task.cancel()
        self._task = None

    def _sample(self):
        return Beat(read_int(self.tdata),
                    read_int(self.tlast) if self.tlast is not None else 0,
                    read_int(self.tuser) if self.tuser is not None else 0)

    async def _run(self):
        pending = None
        while True:
            await FallingEdge(self.clk)
            ready = not self.hold and self.rng.random() >= self.backpressure
            self.tready.value = int(ready)
            await ReadOnly()
            valid = read_int(self.tvalid)
            if pending is not None:
                assert valid, f"{self.name}: tvalid dropped before the transfer of {pending}"
                now = self._sample()
                assert now == pending, f"{self.name}: beat changed while stalled: {pending} -> {now}"
            key = ("transfer" if ready else "stall") if valid else ("starved" if ready else "idle")
            self.cycles[key] += 1
            if valid:
                beat = self._sample()
                if ready:
                    self.beats.append(beat)
                    self.beat_cycles.append(self._cycle())
                    pending = None
                else:
                    pending = beat
            else:
                pending = None


class Bench:
    """Clock, reset and cycle counting for one DUT."""

    def __init__(self, dut, seed=None):
        self.dut = dut
        self.clk = dut.clk
        self.seed = cocotb.RANDOM_SEED if seed is None else seed
        self.rng = random.Random(self.seed)
        self.manifest = manifest()
        self.cycle = 0
        Clock(dut.clk, CLOCK_NS, unit="ns").start()
        cocotb.start_soon(self._count())
        limit = test_args().get("max_cycles")
        if limit:  # ``spartan sim --cycles N``: cut any testbench's stimulus after N cycles
            cocotb.start_soon(self._end_after(int(limit)))

    async def _count(self):
        while True:
            await RisingEdge(self.clk)
            self.cycle += 1

    async def _end_after(self, cycles):
        while self.cycle < cycles:
            await RisingEdge(self.clk)
        cocotb.end_test(f"stopped after {cycles} cycles (max_cycles)")

    def source(self, name, **kwargs):
        """A started :class:`AxisSource` on port ``name``, stamped with this bench's cycles."""
        return AxisSource(self.dut, name, self.clk, self.rng, cycle=lambda: self.cycle,
                          **kwargs).start()

    def sink(self, name, **kwargs):
        return AxisSink(self.dut, name, self.clk, self.rng, cycle=lambda: self.cycle,
                        **kwargs).start()

    def inputs(self):
        return [p["name"] for p in self.manifest["ports"] if p["dir"] == "in" and p["name"] != "clk"]

    async def reset(self, cycles=3):
        """Every input 0 (4-state Icarus starts them at X), ``rst`` high for ``cycles``."""
        for name in self.inputs():
            getattr(self.dut, name).value = 0
        self.dut.rst.value = 1
        for _ in range(cycles):
            await FallingEdge(self.clk)
        self.dut.rst.value = 0

    async def wait_until(self, condition, *, timeout, what):
        """Wait whole cycles until ``condition()``; fail after ``timeout`` cycles."""
        for _ in range(timeout):
            if condition():
                return
            await FallingEdge(self.clk)
        raise AssertionError(f"timed out after {timeout} cycles waiting for {what}")


def check_sequence(name, got, expected):
    """Scoreboard: every element, nothing lost, duplicated or reordered."""
    for index, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"{name}: element {index} is {g}, expected {e}"
    assert len(got) == len(expected), \
        f"{name}: {len(got)} elements received, expected {len(expected)}"


def stream_fields(manifest_doc, stream, key="fields"):
    """``{name: (lsb, width)}`` for a stream's ``tdata`` (or ``tuser``) fields."""
    return {f["name"]: (f["lsb"], f["width"]) for f in manifest_doc["streams"][stream][key]}


def decode(value, fields):
    return {name: (value >> lsb) & ((1 << width) - 1) for name, (lsb, width) in fields.items()}
