"""cocotb AXI4-Stream helpers: a source, a sink that also checks the protocol, a clock/reset
bench and a scoreboard. Every helper takes a seeded ``random.Random`` so a failing run is
reproduced by its seed.

Timing discipline (the same in Verilator and Icarus): the stream drivers are cocotbext-axi's
``AxiStreamSource`` and ``AxiStreamSink`` (with :func:`pauses` generators), which sample and drive
at the rising edge as in every cocotbext-axi bench; everything this module adds drives just after
a falling clock edge and reads after ``ReadOnly``, when the DUT's combinational outputs have
settled to the values the next rising edge samples, so a transfer is recorded exactly when the
DUT sees one.

Padding (docs/interfaces.md#lane-packing-and-tdata-width): a ``tdata`` port is whole bytes, the
payload its low ``beat_bits``. A source given ``bits`` drives random pad bits above the payload
(fixed for a beat while it waits, as AXI4-Stream wants, redrawn for the next), so every test
also shows that a block ignores them; a sink given ``bits`` fails on any pad bit that is not 0
while ``tvalid`` is high. :class:`Bench` takes ``bits`` from the manifest.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections import deque
from dataclasses import dataclass

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotb_bus.bus import Bus
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from spartan_rtl.handshake import counters, cycle_state

__all__ = ["Beat", "AxisSource", "AxisSink", "Bench", "manifest", "test_args", "read_int", "pauses",
           "check_sequence", "stream_fields", "decode", "pack_bytes", "unpack_bytes"]

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


def pauses(rng, probability):
    """A cocotbext-axi pause generator: each cycle paused with ``probability`` (idle cycles on
    a source, back-pressure on a sink), drawn from the testbench's seeded ``rng``."""
    while True:
        yield rng.random() < probability


def read_int(handle):
    """An output's value as an int; X or Z is a test failure naming the signal."""
    value = handle.value
    try:
        return int(value)
    except ValueError:
        raise AssertionError(f"{handle._name} is {value} (X or Z)") from None


class _BeatBus(Bus):
    """Port ``<name>_*`` as cocotbext-axi's source sees it, the port's ``tlast`` standing in
    for ``tid``. cocotbext-axi sets ``tlast`` only on a frame's last beat, but drives ``tid``
    beat by beat in step with ``tdata``; our stimulus sets ``tlast`` per beat (a malformed
    stream has one anywhere, or none at its end), so every :class:`Beat` is a one-beat frame
    whose ``tid`` is the beat's ``last``."""

    _signals = ["tdata"]
    _optional_signals = ["tvalid", "tready", "tid", "tuser"]   # what cocotbext-axi looks for

    def __init__(self, dut, name):
        super().__init__(dut, name, self._signals, optional_signals={
            "tvalid": "tvalid", "tready": "tready", "tid": "tlast", "tuser": "tuser"})


def _quiet(dut, name):
    """cocotbext-axi logs its banner at construction and a line per frame, here per beat:
    warnings only, on the logger it will take (``cocotb.<top>.<port>``)."""
    logging.getLogger(f"cocotb.{dut._name}.{name}").setLevel(logging.WARNING)


class AxisSource:
    """Drives ``<name>_tdata/_tvalid/_tlast/_tuser`` from a queue of :class:`Beat`, through
    cocotbext-axi's ``AxiStreamSource`` with a :func:`pauses` generator: each cycle idle with
    probability ``idle``; a beat once valid is held until ``tready``. What the library lacks,
    on top: random pad bits above the ``bits``-bit payload (one draw per beat; default none),
    random garbage on ``tdata``/``tlast``/``tuser`` in idle cycles (a DUT that reads data
    without ``tvalid`` shows up), and each transfer recorded with its cycle (``sent``,
    ``sent_cycles``, counted by ``cycle()``) and checked against the beat that was due.
    """

    def __init__(self, dut, name, clk, rng, *, idle=0.3, cycle=lambda: 0, bits=None):
        self.dut, self.name, self.clk, self.rng, self.idle = dut, name, clk, rng, idle
        self._cycle = cycle
        self.tdata = getattr(dut, f"{name}_tdata")
        self.tvalid = getattr(dut, f"{name}_tvalid")
        self.tready = getattr(dut, f"{name}_tready")
        self.tlast = getattr(dut, f"{name}_tlast", None)
        self.tuser = getattr(dut, f"{name}_tuser", None)
        self._bits = len(self.tdata)
        self.bits = self._bits if bits is None else bits
        if not 0 < self.bits <= self._bits:
            raise ValueError(f"bits of {name} must be from 1 to {self._bits}, not {self.bits}")
        self.sent = []
        self.sent_cycles = []  # the cycle of each transfer, as counted by ``cycle()``
        self._due = deque()    # (beat, tdata word) handed to the driver, not yet transferred
        self._driver = self._task = None

    def send(self, beats):
        for beat in beats:
            word = self._with_pad(beat)
            self._due.append((beat, word))
            if self._driver is not None:
                self._driver.send_nowait(AxiStreamFrame([word], tid=[beat.last],
                                                        tuser=[beat.user]))

    def start(self):
        _quiet(self.dut, self.name)
        self._driver = AxiStreamSource(_BeatBus(self.dut, self.name), self.clk, byte_lanes=1)
        self._driver.set_pause_generator(pauses(self.rng, self.idle))
        due, self._due = self._due, deque()
        self.send(beat for beat, _ in due)
        self._task = cocotb.start_soon(self._watch())
        return self

    def clear(self):
        """Drop the beats not yet on the port; the one on it (if any) still transfers."""
        on_port = len(self._due) - self._driver.count()
        self._driver.clear()
        while len(self._due) > on_port:
            self._due.pop()

    def stop(self):
        """Stop driving (the beat in flight, if any, is dropped with the queue)."""
        if self._driver is not None:
            self._driver.clear_pause_generator()
            self._driver._handle_reset(True)   # the library's own stop: ends its coroutine
        if self._task is not None:
            self._task.cancel()
        self._driver = self._task = None
        self._due.clear()

    @property
    def idle_now(self):
        return not self._due

    def _with_pad(self, beat):
        if beat.data >> self.bits:
            raise ValueError(f"{self.name}: beat data {beat.data:#x} is wider than the "
                             f"{self.bits}-bit payload")
        if self.bits == self._bits:   # no pad: no draw, the stimulus of unpadded ports unchanged
            return beat.data
        return beat.data | self.rng.getrandbits(self._bits - self.bits) << self.bits

    def _garbage(self):
        self.tdata.value = self.rng.getrandbits(self._bits)
        if self.tlast is not None:
            self.tlast.value = self.rng.getrandbits(1)
        if self.tuser is not None:
            self.tuser.value = self.rng.getrandbits(len(self.tuser))

    async def _watch(self):
        while True:
            await FallingEdge(self.clk)
            if not read_int(self.tvalid):
                self._garbage()
            await ReadOnly()
            if read_int(self.tvalid) and read_int(self.tready):
                beat, word = self._due.popleft()
                driven = read_int(self.tdata)
                assert driven == word, \
                    f"{self.name}: the driver put {driven:#x} on the port, not {word:#x}"
                self.sent.append(beat)
                self.sent_cycles.append(self._cycle())


class AxisSink:
    """Drives ``<name>_tready`` through cocotbext-axi's ``AxiStreamSink`` with a :func:`pauses`
    generator (not ready with probability ``backpressure`` each cycle; never while ``hold``),
    and on top of it, what the library lacks: each transfer recorded as a :class:`Beat` with
    its cycle (``beats``, ``beat_cycles``), the cycles counted by handshake state (``cycles``),
    and the AXI4-Stream rule checked on the DUT's output: once ``tvalid`` is high, it stays
    high with ``tdata``/``tlast``/``tuser`` unchanged until the transfer. ``bits``: the payload
    width; every ``tdata`` bit above it must be 0 whenever ``tvalid`` is high (default: no
    pad)."""

    def __init__(self, dut, name, clk, rng, *, backpressure=0.3, cycle=lambda: 0, bits=None):
        self.dut, self.name, self.clk, self.rng = dut, name, clk, rng
        self.backpressure = backpressure
        self._cycle = cycle
        self.tdata = getattr(dut, f"{name}_tdata")
        self.tvalid = getattr(dut, f"{name}_tvalid")
        self.tready = getattr(dut, f"{name}_tready")
        self.tlast = getattr(dut, f"{name}_tlast", None)
        self.tuser = getattr(dut, f"{name}_tuser", None)
        self.bits = len(self.tdata) if bits is None else bits
        self.beats = []
        self.beat_cycles = []  # the cycle of each transfer, as counted by ``cycle()``
        self.cycles = counters()
        self.hold = False  # True: tready low regardless of ``backpressure``
        self._driver = self._task = None

    def start(self):
        _quiet(self.dut, self.name)
        self._driver = AxiStreamSink(AxiStreamBus.from_prefix(self.dut, self.name), self.clk,
                                     byte_lanes=1)
        self._driver.set_pause_generator(self._pauses())
        self._task = cocotb.start_soon(self._watch())
        return self

    def stop(self):
        if self._driver is not None:
            self._driver.clear_pause_generator()
            self._driver._handle_reset(True)
        if self._task is not None:
            self._task.cancel()
        self._driver = self._task = None

    def _pauses(self):
        for paused in pauses(self.rng, self.backpressure):
            yield self.hold or paused

    def _sample(self):
        data = read_int(self.tdata)
        assert not data >> self.bits, \
            (f"{self.name}: pad bits tdata[{len(self.tdata) - 1}:{self.bits}] are "
             f"{data >> self.bits:#x} with tvalid high, must be 0")
        return Beat(data,
                    read_int(self.tlast) if self.tlast is not None else 0,
                    read_int(self.tuser) if self.tuser is not None else 0)

    async def _watch(self):
        pending = None
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()
            valid, ready = read_int(self.tvalid), read_int(self.tready)
            if pending is not None:
                assert valid, f"{self.name}: tvalid dropped before the transfer of {pending}"
                now = self._sample()
                assert now == pending, \
                    f"{self.name}: beat changed while stalled: {pending} -> {now}"
            self.cycles[cycle_state(valid, ready)] += 1
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
        """A started :class:`AxisSource` on port ``name``, stamped with this bench's cycles,
        with random pad bits above the manifest's payload width."""
        return AxisSource(self.dut, name, self.clk, self.rng, cycle=lambda: self.cycle,
                          bits=self.payload_bits(name), **kwargs).start()

    def sink(self, name, **kwargs):
        """A started :class:`AxisSink` on port ``name`` that checks the pad bits are 0."""
        return AxisSink(self.dut, name, self.clk, self.rng, cycle=lambda: self.cycle,
                        bits=self.payload_bits(name), **kwargs).start()

    def payload_bits(self, name):
        return self.manifest["streams"][name]["beat_bits"]

    def inputs(self):
        return [p["name"] for p in self.manifest["ports"]
                if p["dir"] == "in" and p["name"] != "clk"]

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

    async def drain(self, expected, *, timeout, quiet=10):
        """The end of every testbench's run: wait until each sink of ``expected`` (``{sink:
        beats}``) has received its beats (fail after ``timeout`` cycles), then ``quiet`` more
        cycles, so a beat too many arrives before the scoreboard counts them."""
        what = " and ".join(f"{n} {sink.name} beats" for sink, n in expected.items())
        await self.wait_until(lambda: all(len(s.beats) >= n for s, n in expected.items()),
                              timeout=timeout, what=what)
        for _ in range(quiet):
            await FallingEdge(self.clk)


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


def pack_bytes(elements, lanes, width, tdata_width, rng=None):
    """``elements`` as the bytes of a cocotbext-axi frame on a ``tdata_width``-bit port (byte
    lanes of 8 bits, the bus's own): ``lanes`` elements of ``width`` bits to a beat, lane 0
    lowest, ``tdata_width // 8`` bytes a beat, little-endian. The pad bits above the payload are
    random with ``rng``, else 0."""
    if len(elements) % lanes:
        raise ValueError(f"elements must be a multiple of lanes ({lanes}), not {len(elements)}")
    mask, payload, out = (1 << width) - 1, lanes * width, bytearray()
    for i in range(0, len(elements), lanes):
        word = sum((int(e) & mask) << (j * width) for j, e in enumerate(elements[i:i + lanes]))
        if rng is not None and tdata_width > payload:
            word |= rng.getrandbits(tdata_width - payload) << payload
        out += word.to_bytes(tdata_width // 8, "little")
    return bytes(out)


def unpack_bytes(data, lanes, width, tdata_width, name):
    """The inverse of :func:`pack_bytes` for a received frame; a pad bit that is not 0 fails,
    naming stream ``name`` and the beat."""
    size, mask, payload, out = tdata_width // 8, (1 << width) - 1, lanes * width, []
    assert len(data) % size == 0, f"{name}: {len(data)} bytes, not whole {size}-byte beats"
    for i in range(0, len(data), size):
        word = int.from_bytes(bytes(data[i:i + size]), "little")
        assert not word >> payload, (f"{name}: beat {i // size}: pad bits "
                                     f"tdata[{tdata_width - 1}:{payload}] are "
                                     f"{word >> payload:#x}, must be 0")
        out += [(word >> (j * width)) & mask for j in range(lanes)]
    return out
