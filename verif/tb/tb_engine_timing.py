"""Timing runs of the layer engine on given operands (golden/engine_timing.py's measurements).

``timing_layers`` runs the layers of ``args["layers"]`` (a ``.npz`` written by
:func:`spartan_rtl.golden.engine_timing.write_layers`: per layer ``op``, ``mode``, the
operands ``a``, ``b`` as stored) one after another on
:class:`spartan_rtl.tb.tb_engine.EngineTB` with a zero-wait memory (no pause on any channel,
the registers' bus too), each layer checked like every layer of that testbench (results,
memory, counters, table, bus counters), each START after ``CTRL.CLEAR`` and ``FORGET``. It
writes ``args["out"]`` (default ``timing.json``): per layer ``LAYER_CYCLES``,
``A_WORDS``/``B_WORDS``/``C_WORDS``, the tile counters, and, with ``args["probe"]``, per
step the cycles of the core's stream events seen inside the design (first and last ``B`` beat
into the GEMM, first and last ``A`` beat into the monitor, last ``C`` beat out of the GEMM)
and of every transfer on AR, R, W and B, counted from the first cycle ``LAYER_CYCLES`` counts
(golden/engine_timing.py's times are :data:`~spartan_rtl.golden.engine_timing.CHECK_CYCLES`
later: they start after the descriptor checks).

Because the operands come from the file, the cycle model sees exactly the matrices the RTL
computed (the engine's own testbench draws its operands from its seed).
"""

from __future__ import annotations

import json

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from spartan_rtl.golden.engine_timing import read_layers
from spartan_rtl.tb.axis import read_int, test_args
from spartan_rtl.tb.tb_engine import EngineTB

#: The design's signals the probe reads (the flattened Verilog's names, hw/engine.py).
PROBES = {"a_valid": "core.a__valid", "a_ready": "core.a__ready",
          "a_last": "core.a__payload.last", "b_valid": "core.b__valid",
          "b_ready": "core.b__ready", "b_last": "core.b__payload.last", "c_done": "core.c_done",
          "layer_cycles": "core.LAYER_CYCLES_LAYER_CYCLES"}
#: Row-level probes (the sparse build's; absent names are skipped).
ROW_PROBES = {"mask_valid": "core.compactor.m_axis_mask__valid",
              "mask_ready": "core.compactor.m_axis_mask__ready",
              "pass_valid": "core.gemm.datapath.i_pass__valid",
              "pass_push": "core.gemm.datapath.i_pass__payload.push",
              "data_valid": "core.compactor.m_axis_data__valid",
              "data_ready": "core.compactor.m_axis_data__ready",
              "data_r_en": "core.compactor.data_fifo.r_en",
              "data_level": "core.compactor.data_fifo.level",
              "room": "core.compactor.room"}


class _Probe:
    """Per cycle (the values the next rising edge samples), the core's stream handshakes."""

    def __init__(self, dut):
        self.dut = dut
        # Verilator names them as escaped identifiers: a backslash, the name, a space.
        self.h = {k: dut._id(f"\\{v} ", extended=False) for k, v in PROBES.items()}
        self.rows = {}
        for k, v in ROW_PROBES.items():
            try:
                self.rows[k] = dut._id(f"\\{v} ", extended=False)
            except AttributeError:      # the dense-only twin: no compactor
                pass
        self.ports = {name: getattr(dut, f"m_axi_{name}")
                      for name in ("arvalid", "arready", "rvalid", "rready", "wvalid", "wready",
                                   "bvalid", "bready")}
        self.events = None
        self.cycle = 0

    def arm(self):
        self.events = {"b_first": [], "b_last": [], "a_first": [], "a_last": [], "c_last": [],
                       "ar": [], "r": [], "w": [], "bresp": [], "a_beat": [], "mask": [],
                       "push": []}
        self.first_count = None
        self._b_open = self._a_open = False
        self._last_lc = None

    async def run(self):
        h = self.h
        falling, readonly = FallingEdge(self.dut.clk), ReadOnly()
        while True:
            await falling
            await readonly
            self.cycle += 1
            e = self.events
            if e is None:
                continue
            lc = read_int(h["layer_cycles"])
            # The first cycle LAYER_CYCLES counts: it reads 0 there (START zeroed it) and 1
            # at the next sample.
            if lc == 1 and self._last_lc == 0:
                self.first_count = self.cycle - 1
            self._last_lc = lc
            if read_int(h["b_valid"]) and read_int(h["b_ready"]):
                if not self._b_open:
                    e["b_first"].append(self.cycle)
                    self._b_open = True
                if read_int(h["b_last"]):
                    e["b_last"].append(self.cycle)
                    self._b_open = False
            r = self.rows
            if "mask_valid" in r:
                if read_int(r["mask_valid"]) and read_int(r["mask_ready"]):
                    e["mask"].append(self.cycle)
                if read_int(r["pass_valid"]) and read_int(r["pass_push"]):
                    e["push"].append(self.cycle)
                if read_int(r["data_valid"]) and read_int(r["data_ready"]):
                    e.setdefault("data_take", []).append(self.cycle)
                if read_int(r["data_r_en"]):
                    e.setdefault("data_r_en", []).append(self.cycle)
                # The data FIFO's level and the compactor's room: [cycle, value] at each change.
                for name, probe in (("level", "data_level"), ("room", "room")):
                    value, changes = read_int(r[probe]), e.setdefault(name, [])
                    if not changes or changes[-1][1] != value:
                        changes.append([self.cycle, value])
            if read_int(h["a_valid"]) and read_int(h["a_ready"]):
                e["a_beat"].append(self.cycle)
                if not self._a_open:
                    e["a_first"].append(self.cycle)
                    self._a_open = True
                if read_int(h["a_last"]):
                    e["a_last"].append(self.cycle)
                    self._a_open = False
            if read_int(h["c_done"]):
                e["c_last"].append(self.cycle)
            for name, valid, ready in (("ar", "arvalid", "arready"), ("r", "rvalid", "rready"),
                                       ("w", "wvalid", "wready"), ("bresp", "bvalid", "bready")):
                if read_int(self.ports[valid]) and read_int(self.ports[ready]):
                    e[name].append(self.cycle)

    def take(self):
        """The layer's events, in cycles from the first counted cycle (0)."""
        e, self.events = self.events, None
        start = self.first_count
        return {k: ([[c - start, value] for c, value in v] if k in ("level", "room")
                    else [c - start for c in v]) for k, v in e.items()}


@cocotb.test(skip="layers" not in test_args())
async def timing_layers(dut):
    """The layers of ``args["layers"]``, their figures to ``args["out"]`` (module docstring)."""
    tb = EngineTB(dut)
    args = tb.args
    layers = read_layers(args["layers"])
    await tb.start(bus_idle=0.0, mem_idle=0.0)
    for channel in tb.ram.channels():
        channel.clear_pause_generator()
        channel.pause = False
    probe = _Probe(dut) if args.get("probe") else None
    if probe is not None:
        cocotb.start_soon(probe.run())
    results = []
    for i, layer in enumerate(layers):
        op, a, b = layer["op"], layer["a"], layer["b"]
        await tb.ctrl(mode=layer["mode"], clear=True, forget=True)
        if probe is not None:
            probe.arm()
        await tb.run_layer(op, a, b, mode=layer["mode"])
        counters = await tb.read_counters(("LAYER_CYCLES", "A_WORDS", "B_WORDS", "C_WORDS",
                                           "TILES_DENSE", "TILES_SPARSE", "MACS_DONE"))
        M = a.shape[0]
        K = a.shape[1] if op in (0, 2) else b.shape[0]
        N = b.shape[1]
        row = {"op": op, "mode": layer["mode"], "M": M, "K": K, "N": N, **counters}
        if probe is not None:
            row["steps"] = probe.take()
        results.append(row)
        dut._log.info(f"layer {i}: OP {op} M {M} K {K} N {N} mode {layer['mode']}: "
                      f"{counters['LAYER_CYCLES']} cycles")
    with open(args.get("out", "timing.json"), "w") as f:
        json.dump({"params": tb.p, "layers": results}, f)
