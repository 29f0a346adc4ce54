"""cocotb testbench: the estimator's cycle model against the GEMM RTL on real-trace tiles.

Tiles are cut from the committed traces (data/traces/) exactly as spartan_rtl/estimate.py cuts a
layer: ``rows`` rows of one inner chunk of ``k`` columns of a streamed operand
(:data:`spartan_rtl.estimate.OPERANDS`: the forward ``A`` (M x K), the data gradient's output
error ``dY`` (M x N), the weight gradient's ``A^T`` (K x M) or ``dY^T`` (N x M)), quantised to
``width``-bit integers with the zero/nonzero pattern kept
(:func:`spartan_rtl.estimate.quantise`) and padded with zero columns to ``k``. Each tile is
sent twice, in the two forms the estimator times: its ZVC form (true masks, the core's sparse mode)
and its dense form (ones on the chunk's real columns, every element sent). Phase 1 (cycles): inputs
always valid, ``m_axis_c`` always ready, one tile at a time into an idle datapath; each tile's
cycles (first mask transfer to last ``C`` beat) are compared with
:func:`spartan_rtl.estimate.tile_cycles`. Phase 2 (results under stress): the same tiles
again with random idle cycles and back-pressure. Every ``C`` element of both phases is checked
against the golden product (:class:`spartan_rtl.tb.tb_gemm.GemmTB`'s scoreboard). Writes
``rtl_model.json``.
"""

import json

import cocotb
import numpy as np

from spartan_rtl.estimate import operand, quantise, tile_cycles
from spartan_rtl.golden.compactor import encode_row
from spartan_rtl.golden.traces import load
from spartan_rtl.tb.axis import Beat
from spartan_rtl.tb.tb_gemm import GemmTB


def trace_tiles(specs, width, k):
    """``[(spec, raw tile rows x k, real columns)]`` for the tile specifications."""
    cache, out = {}, []
    for spec in specs:
        if spec["file"] not in cache:
            cache[spec["file"]] = load(spec["file"])
        op = operand(cache[spec["file"]].layer(spec["layer"]), spec["gemm"])
        c0, r0 = spec["chunk"] * k, spec["row0"]
        part = op[r0:r0 + spec["rows"], c0:c0 + k]
        raw = np.zeros((part.shape[0], k), dtype=np.uint64)
        raw[:, :part.shape[1]] = quantise(part, width)
        out.append((spec, raw, part.shape[1]))
    return out


def send_dense(tb, a_raw, cols):
    """``a_raw`` with ones on its first ``cols`` columns as masks, those elements as data."""
    masks, data = [], []
    for r, row in enumerate(a_raw):
        mask, beats = encode_row(row[:cols], lanes=tb.lanes, width=tb.width,
                                 number_format="int", bypass=True)
        masks.append(Beat(mask, int(r == len(a_raw) - 1)))
        data.extend(Beat(b, int(i == len(beats) - 1)) for i, b in enumerate(beats))
    tb.tiles.append(np.asarray(a_raw, dtype=np.uint64))
    tb.tile_masks.append([m.data for m in masks])
    tb.src_mask.send(masks)
    tb.src_data.send(data)


async def _run(tb, tiles, records=None):
    for spec, raw, cols in tiles:
        for form in ("sparse", "dense"):
            start = len(tb.tiles)
            row0 = sum(len(t) for t in tb.tiles)
            if form == "sparse":
                tb.tile(raw)
            else:
                send_dense(tb, raw, cols)
            await tb.finish()
            if records is None:
                continue
            first = tb.src_mask.sent_cycles[row0]
            rtl = tb.sink.beat_cycles[-1] - first + 1
            records.append({**spec, "form": form, "cols": cols,
                            "nnz": int(sum(bin(m).count("1") for m in tb.tile_masks[start])),
                            "rtl_cycles": rtl,
                            "model_cycles": tile_cycles(tb.tile_masks[start], tb.timing)})


@cocotb.test()
async def trace_tiles_vs_model(dut):
    tb = GemmTB(dut)
    tiles = trace_tiles(tb.args["tiles"], tb.width, tb.k)
    await tb.start(idle=0.0, backpressure=0.0)
    tb.load_b()
    await tb.b_loaded()
    records = []
    await _run(tb, tiles, records)
    tb.stop()
    # Phase 2: the same tiles with random idle cycles and back-pressure (results only).
    await tb.start(idle=0.3, backpressure=0.3)
    tb.tiles, tb.tile_masks, tb.b_packets = [], [], []
    tb.load_b()
    await tb.b_loaded()
    await _run(tb, tiles)
    tb.stop()
    with open("rtl_model.json", "w") as f:
        json.dump({"params": tb.p, "records": records}, f)
    wrong = [r for r in records if r["rtl_cycles"] != r["model_cycles"]]
    assert not wrong, f"{len(wrong)} of {len(records)} tiles differ from the model: {wrong[:3]}"
