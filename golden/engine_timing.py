"""Cycle model of the layer engine (placeholder, being written)."""

from __future__ import annotations

import numpy as np


def write_layers(path, layers):
    """``layers``: ``[{"op", "mode", "a", "b"}, ...]`` (raw elements as stored) to ``path``
    (the operands of verif/tb/tb_engine_timing.py's ``timing_layers``)."""
    arrays = {"count": np.array(len(layers))}
    for i, layer in enumerate(layers):
        arrays[f"op{i}"] = np.array(int(layer["op"]))
        arrays[f"mode{i}"] = np.array(int(layer["mode"]))
        arrays[f"a{i}"] = np.asarray(layer["a"], dtype=np.uint64)
        arrays[f"b{i}"] = np.asarray(layer["b"], dtype=np.uint64)
    np.savez_compressed(path, **arrays)


def read_layers(path):
    """The layers :func:`write_layers` wrote."""
    with np.load(path) as f:
        return [{"op": int(f[f"op{i}"]), "mode": int(f[f"mode{i}"]), "a": f[f"a{i}"],
                 "b": f[f"b{i}"]} for i in range(int(f["count"]))]
