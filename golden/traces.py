"""Activation traces: the file layout of real im2col GEMM inputs, its loader and validator.

A trace is one ``.npz`` file (``numpy.savez`` / ``savez_compressed``) holding, for one snapshot
of a network, the input of every layer's GEMM after im2col and, optionally, the error arriving
at every layer's output (what the backward pass streams). It is the input of
``spartan estimate FILE.npz`` and of the benchmarks that replay real activations; the committed
examples are in ``data/traces/`` (how they were made: ``data/traces/README.md``).

Layout (every key, nothing else)
    ``layers``          1-D array of str: the layer names, in network order. A name is
                        letters, digits, ``_`` and ``.``.
    ``a_<name>``        2-D array ``(M, K)``: the layer's im2col input (what
                        ``torch.nn.functional.unfold`` gives, transposed and the batch
                        stacked): row = one output position, in (image, out_y, out_x) order;
                        column = ``(c_in, k_y, k_x)``, ``c_in`` slowest, zero padding included.
                        dtype: float16/32/64 (finite; ``-0.0`` counts as zero) or a signed or
                        unsigned integer type.
    ``w_shape_<name>``  integer array of 4: the weight shape ``(C_out, C_in, k_h, k_w)``, so
                        ``N = C_out`` and ``K`` must equal ``C_in * k_h * k_w``. A fully
                        connected layer is ``(N, K, 1, 1)``.
    ``dy_<name>``       optional, 2-D array ``(M, N)``: the output error ``dY``, the gradient of
                        the loss with respect to the layer's output ``Y = A . W`` for the same
                        batch, after the masks of the layers that follow it (ReLU, max-pool
                        routing); row = output position in ``a_<name>``'s row order, column =
                        ``c_out``. Same dtypes as ``a_<name>``. Traces without it (the first
                        version of this layout) still load: their backward GEMMs have no
                        measured error.
    ``meta``            optional, a str: JSON describing how the trace was made.

So each layer defines a GEMM ``(M, K, N)``: ``A`` (M x K) times weights (K x N); with ``dy``
also the backward GEMMs ``dA = dY . W^T`` and ``dW = A^T . dY`` (golden/estimate.py).

Every violation raises :class:`TraceError` (a ``ValueError``) with a one-line message naming the
file, the key, what it must be and what it is.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["TraceError", "Layer", "Trace", "load", "save", "validate"]

_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
_A_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
             "uint8", "uint16", "uint32", "uint64")


class TraceError(ValueError):
    """A trace file that does not follow the layout; the message is one line."""


@dataclass(frozen=True)
class Layer:
    name: str
    a: np.ndarray           # (M, K) im2col input
    w_shape: tuple          # (C_out, C_in, k_h, k_w)
    dy: np.ndarray | None = None    # (M, N) output error, if the trace has it

    @property
    def gemm(self):
        """``(M, K, N)``."""
        return (self.a.shape[0], self.a.shape[1], self.w_shape[0])

    @property
    def nnz(self):
        return int(np.count_nonzero(self.a))

    @property
    def density(self):
        """Fraction of nonzero elements of the im2col input."""
        return self.nnz / self.a.size

    @property
    def dy_density(self):
        """Fraction of nonzero elements of the output error, ``None`` without one."""
        return None if self.dy is None else int(np.count_nonzero(self.dy)) / self.dy.size


@dataclass(frozen=True)
class Trace:
    path: str
    layers: tuple
    meta: dict = field(default_factory=dict)

    def layer(self, name):
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)


def _fail(path, message):
    raise TraceError(f"{path}: {' '.join(message.split())}")


def validate(arrays, path="trace"):
    """Check a ``{key: ndarray}`` mapping against the layout; return the :class:`Trace`."""
    keys = set(arrays)
    if "layers" not in keys:
        _fail(path, f"key 'layers' must be present, not missing (keys: {', '.join(sorted(keys)) or 'none'})")
    names = arrays["layers"]
    if names.ndim != 1 or names.dtype.kind != "U" or names.size == 0:
        _fail(path, f"key 'layers' must be a non-empty 1-D array of str, not "
                    f"{names.dtype} of shape {names.shape}")
    names = [str(n) for n in names]
    for name in names:
        if not _NAME.match(name):
            _fail(path, f"layer names must be letters, digits, '_' or '.', not {name!r}")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        _fail(path, f"layer names must be unique, not {dup!r} twice")
    expected = {"layers"}
    for name in names:
        for key in (f"a_{name}", f"w_shape_{name}"):
            if key not in keys:
                _fail(path, f"key {key!r} must be present (layer {name!r} is listed in 'layers'), "
                            f"not missing")
            expected.add(key)
        expected.add(f"dy_{name}")
    extra = sorted(keys - expected - {"meta"})
    if extra:
        _fail(path, f"keys must be 'layers', 'meta', and a_<name>/w_shape_<name>[/dy_<name>] for "
                    f"each listed layer, not {extra[0]!r}")
    meta = {}
    if "meta" in keys:
        raw = arrays["meta"]
        if raw.ndim != 0 or raw.dtype.kind != "U":
            _fail(path, f"key 'meta' must be a str, not {raw.dtype} of shape {raw.shape}")
        try:
            meta = json.loads(str(raw))
        except json.JSONDecodeError as e:
            _fail(path, f"key 'meta' must be JSON, not {str(raw)[:40]!r} ({e.msg})")
    layers = []
    for name in names:
        a, w = arrays[f"a_{name}"], arrays[f"w_shape_{name}"]
        _check_numbers(path, f"a_{name}", a, "M output positions, K = C_in*k_h*k_w")
        if w.dtype.kind not in "iu" or w.shape != (4,):
            _fail(path, f"key 'w_shape_{name}' must be 4 integers (C_out, C_in, k_h, k_w), not "
                        f"{w.dtype} of shape {w.shape}")
        w_shape = tuple(int(v) for v in w)
        if min(w_shape) < 1:
            _fail(path, f"key 'w_shape_{name}' must be positive, not {w_shape}")
        k = w_shape[1] * w_shape[2] * w_shape[3]
        if a.shape[1] != k:
            _fail(path, f"key 'a_{name}' must have K = C_in*k_h*k_w = {k} columns (w_shape "
                        f"{w_shape}), not {a.shape[1]}")
        dy = arrays.get(f"dy_{name}")
        if dy is not None:
            _check_numbers(path, f"dy_{name}", dy, "M output positions, N = C_out")
            if dy.shape != (a.shape[0], w_shape[0]):
                _fail(path, f"key 'dy_{name}' must have shape (M, C_out) = "
                            f"{(a.shape[0], w_shape[0])}, not {dy.shape}")
        layers.append(Layer(name, a, w_shape, dy))
    return Trace(str(path), tuple(layers), meta)


def _check_numbers(path, key, array, dims):
    """A 2-D, non-empty, finite array of one of the accepted dtypes."""
    if array.dtype.name not in _A_DTYPES:
        _fail(path, f"key {key!r} must have a float or integer dtype, not {array.dtype}")
    if array.ndim != 2 or 0 in array.shape:
        _fail(path, f"key {key!r} must be a 2-D array ({dims}), not shape {array.shape}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        _fail(path, f"key {key!r} must be finite, not containing NaN or infinity")


def load(path):
    """Read and validate a trace file; :class:`TraceError` on any problem."""
    path = Path(path)
    try:
        f = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        _fail(path, "file must exist, not missing")
    except (ValueError, OSError, EOFError) as e:
        _fail(path, f"file must be an .npz archive, not unreadable ({type(e).__name__}: {e})")
    if not isinstance(f, np.lib.npyio.NpzFile):
        _fail(path, "file must be an .npz archive, not a single .npy array")
    try:
        with f:
            arrays = {key: f[key] for key in f.files}
    except ValueError as e:
        # allow_pickle=False refuses object arrays (pickled Python objects).
        _fail(path, f"every array must be plain numbers or str, not pickled objects ({e})")
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        _fail(path, f"file must be an .npz archive, not corrupt ({type(e).__name__}: {e})")
    return validate(arrays, path)


def save(path, layers, meta=None):
    """Write ``layers`` (``[(name, a, w_shape[, dy]), ...]``, ``dy`` may be None) in the
    layout, compressed."""
    arrays = {"layers": np.array([name for name, *_ in layers], dtype=str)}
    for name, a, w_shape, *rest in layers:
        arrays[f"a_{name}"] = np.asarray(a)
        arrays[f"w_shape_{name}"] = np.asarray(w_shape, dtype=np.int64)
        if rest and rest[0] is not None:
            arrays[f"dy_{name}"] = np.asarray(rest[0])
    if meta is not None:
        arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    validate(arrays, path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
