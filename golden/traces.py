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
                        connected layer is ``(N, K, 1, 1)``. Entries from 1 to 2**31 - 1,
                        and ``M x C_out`` at most 2**31 (the output the estimate models).
    ``dy_<name>``       optional, 2-D array ``(M, N)``: the output error ``dY``, the gradient of
                        the loss with respect to the layer's output ``Y = A . W`` for the same
                        batch, after the masks of the layers that follow it (ReLU, max-pool
                        routing); row = output position in ``a_<name>``'s row order, column =
                        ``c_out``. Same dtypes as ``a_<name>``. Traces without it (the first
                        version of this layout) still load: their backward GEMMs have no
                        measured error.
    ``meta``            optional, a str of at most 2**20 characters: a JSON object describing
                        how the trace was made.

Each key is a ``.npy`` member of the archive (no other member), read without unpickling;
the arrays hold at most 4 GiB in all.

So each layer defines a GEMM ``(M, K, N)``: ``A`` (M x K) times weights (K x N); with ``dy``
also the backward GEMMs ``dA = dY . W^T`` and ``dW = A^T . dY`` (spartan_rtl/estimate.py).

Every violation raises :class:`TraceError` (a ``ValueError``) with a one-line message naming the
file, the key, what it must be and what it is.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["TraceError", "Layer", "Trace", "load", "save", "validate"]

_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
_A_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
             "uint8", "uint16", "uint32", "uint64")


#: Largest entry of ``w_shape_<name>``.
MAX_DIM = (1 << 31) - 1
#: Largest ``M x C_out`` of a layer: the output (and its error) the estimate holds as a mask.
MAX_OUTPUT = 1 << 31
#: Longest ``meta`` string.
MAX_META_CHARS = 1 << 20


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
        listed = ", ".join(sorted(keys)) or "none"
        _fail(path, f"key 'layers' must be present, not missing (keys: {listed})")
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
        if len(str(raw)) > MAX_META_CHARS:
            _fail(path, f"key 'meta' must be at most {MAX_META_CHARS} characters, not "
                        f"{len(str(raw))}")
        try:
            meta = json.loads(str(raw))
        except json.JSONDecodeError as e:
            _fail(path, f"key 'meta' must be JSON, not {str(raw)[:40]!r} ({e.msg})")
        except RecursionError:
            _fail(path, "key 'meta' must be JSON nested a few levels deep, not thousands")
        except ValueError as e:   # an integer of more digits than Python converts
            _fail(path, f"key 'meta' must be JSON with numbers Python reads, not ({e})")
        if not isinstance(meta, dict):
            _fail(path, f"key 'meta' must be a JSON object, not {type(meta).__name__}")
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
        if max(w_shape) > MAX_DIM:
            _fail(path, f"key 'w_shape_{name}' must be at most {MAX_DIM} each, not {w_shape}")
        if a.shape[0] * w_shape[0] > MAX_OUTPUT:
            # Without dy_<name> the estimate models a dense (M, C_out) error of this size.
            _fail(path, f"layer {name!r} must have M x C_out at most {MAX_OUTPUT}, not "
                        f"{a.shape[0]} x {w_shape[0]}")
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
    """Read and validate a trace file; :class:`TraceError` on any problem. The archive is read
    member by member: each must be a ``.npy`` array whose header declares no more data than the
    member holds (a header claiming a huge shape is refused before anything is allocated),
    at most :data:`MAX_BYTES` in all, and no pickled object is ever loaded."""
    path = Path(path)
    try:
        # stat before open: opening a named pipe would wait for a writer.
        if not stat.S_ISREG(os.stat(path).st_mode) and not path.is_dir():
            _fail(path, "file must be a regular file, not a device, pipe or socket")
        with open(path, "rb") as f:
            magic = f.read(6)
    except FileNotFoundError:
        _fail(path, "file must exist, not missing")
    except OSError as e:
        _fail(path, f"file must be a readable .npz archive, not unreadable ({e.strerror})")
    if magic == b"\x93NUMPY":
        _fail(path, "file must be an .npz archive, not a single .npy array")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        _fail(path, f"file must be an .npz archive, not unreadable ({type(e).__name__}: {e})")
    with archive:
        arrays, total = {}, 0
        for info in archive.infolist():
            if not info.filename.endswith(".npy") or info.is_dir():
                _fail(path, f"every member must be a .npy array, not {info.filename!r}")
            key = info.filename[:-len(".npy")]
            if key in arrays:
                _fail(path, f"every key must appear once, not {key!r} twice")
            arrays[key] = _member(path, archive, info, key)
            total += arrays[key].nbytes
            if total > MAX_BYTES:
                _fail(path, f"the arrays must hold at most {MAX_BYTES} bytes in all, not more")
    return validate(arrays, path)


#: Bytes of array data a trace may hold (the estimate keeps them all in memory).
MAX_BYTES = 1 << 32

#: The readers of each ``.npy`` header version numpy writes.
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0}


def _member(path, archive, info, key):
    """One member as an array, read from its ``.npy`` header and data without numpy's pickle
    path; any damage (cut short, bad CRC, corrupt compression, malformed header) is named."""
    bad = None
    try:
        with archive.open(info) as m:
            version = np.lib.format.read_magic(m)
            if version not in _NPY_HEADERS:
                bad = f"a .npy array of format version 1.0 or 2.0, not {version}"
            else:
                shape, fortran, dtype = _NPY_HEADERS[version](m)
                nbytes = math.prod(shape) * dtype.itemsize
                if dtype.hasobject:
                    bad = "pickled"
                elif nbytes > info.file_size:
                    bad = (f"as large as its header declares (shape {shape}, {dtype}: "
                           f"{nbytes} bytes), not a {info.file_size}-byte member")
                else:
                    data = bytearray(nbytes)
                    if m.readinto(data) != nbytes:
                        bad = "as long as its header declares, not cut short"
                    else:
                        return np.frombuffer(data, dtype=dtype).reshape(
                            shape, order="F" if fortran else "C")
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, RuntimeError,
            NotImplementedError) as e:
        bad = f"a readable .npy array, not corrupt ({type(e).__name__}: {e})"
    if bad == "pickled":
        _fail(path, f"every array must be plain numbers or str, not pickled objects (key {key!r})")
    _fail(path, f"key {key!r} must be {bad}")


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
