"""Capture real training activations: ``python -m verif.flows.capture_traces`` (extra ``traces``).

Trains a small ReLU CNN on scikit-learn's ``load_digits`` (1797 8x8 handwritten digits that
ship inside the package, so it runs offline) and, at several points of training, saves the
im2col input of every conv layer for a fixed probe batch, and the error ``dY`` arriving at each
conv layer's output when that batch's loss is back-propagated (no update is made from it), as a
trace (layout and loader: golden/traces.py) under data/traces/, with data/traces/README.md
describing the result.

The network and its training are plain NumPy (forward and backward through im2col), not
PyTorch: PyTorch's PyPI wheel for Linux pulls in several GB of CUDA packages. ``im2col`` here
produces exactly what ``torch.nn.functional.unfold`` does (transposed, batch stacked).

Network (NCHW, stride 1, zero padding 1, biases, He initialisation)::

    conv1  1 -> 8,  3x3   8x8   ReLU
    conv2  8 -> 16, 3x3   8x8   ReLU, 2x2 max pool -> 4x4
    conv3 16 -> 32, 3x3   4x4   ReLU, global average pool
    fc    32 -> 10              softmax cross-entropy

SGD with momentum, fixed seeds: the run is deterministic up to floating-point summation order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from verif.flows import ROOT

OUT_DIR = ROOT / "data" / "traces"
SEED = 2021
PROBE_IMAGES = 64
CAPTURE_EPOCHS = (0, 1, 4, 15)
BATCH = 32
LR = 0.05
MOMENTUM = 0.9

#: (name, C_in, C_out, kernel); every conv has stride 1 and padding 1.
CONVS = (("conv1", 1, 8, 3), ("conv2", 8, 16, 3), ("conv3", 16, 32, 3))
CLASSES = 10


def im2col(x, k, pad):
    """``x`` (B, C, H, W) -> (B*H_out*W_out, C*k*k), stride 1: row (b, oy, ox), column
    (c, ky, kx) with c slowest, the zero padding included."""
    b, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))  # B C OH OW k k
    oh, ow = win.shape[2], win.shape[3]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(b * oh * ow, c * k * k), (oh, ow)


def col2im(cols, shape, k, pad):
    """Adjoint of :func:`im2col`: scatter-add (B*OH*OW, C*k*k) back to ``shape`` (B, C, H, W)."""
    b, c, h, w = shape
    oh, ow = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    win = cols.reshape(b, oh, ow, c, k, k).transpose(0, 3, 4, 5, 1, 2)  # B C ky kx OH OW
    xp = np.zeros((b, c, h + 2 * pad, w + 2 * pad), dtype=cols.dtype)
    for ky in range(k):
        for kx in range(k):
            xp[:, :, ky:ky + oh, kx:kx + ow] += win[:, :, ky, kx]
    return xp[:, :, pad:pad + h, pad:pad + w]


class Net:
    """The CNN above; ``forward`` keeps what ``backward`` needs and the im2col inputs."""

    def __init__(self, rng):
        self.params = {}
        for name, cin, cout, k in CONVS:
            fan_in = cin * k * k
            self.params[f"{name}.w"] = (rng.standard_normal((cout, fan_in)) *
                                        np.sqrt(2.0 / fan_in)).astype(np.float32)
            self.params[f"{name}.b"] = np.zeros(cout, np.float32)
        cout = CONVS[-1][2]
        self.params["fc.w"] = (rng.standard_normal((CLASSES, cout)) *
                               np.sqrt(1.0 / cout)).astype(np.float32)
        self.params["fc.b"] = np.zeros(CLASSES, np.float32)

    @staticmethod
    def weight_shape(name):
        for n, cin, cout, k in CONVS:
            if n == name:
                return (cout, cin, k, k)
        raise KeyError(name)

    def forward(self, x):
        self.cache = {}
        self.cols = {}
        for name, cin, cout, k in CONVS:
            cols, (oh, ow) = im2col(x, k, 1)
            self.cols[name] = cols
            y = cols @ self.params[f"{name}.w"].T + self.params[f"{name}.b"]
            y = y.reshape(x.shape[0], oh, ow, cout).transpose(0, 3, 1, 2)
            relu = np.maximum(y, 0)
            self.cache[name] = (x.shape, cols, y > 0)
            x = relu
            if name == "conv2":
                b, c, h, w = x.shape
                windows = x.reshape(b, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5) \
                    .reshape(b, c, h // 2, w // 2, 4)
                # The error goes to ONE position per window, the first maximum (as PyTorch
                # does): equal maxima are common (zeros, and identical patches of background).
                first = np.argmax(windows, axis=-1)
                route = (np.arange(4) == first[..., None]).reshape(b, c, h // 2, w // 2, 2, 2) \
                    .transpose(0, 1, 2, 4, 3, 5)
                self.cache["pool"] = (x.shape, route)
                x = windows.max(axis=-1)
        self.cache["gap"] = x.shape
        feat = x.mean(axis=(2, 3))
        self.cache["fc"] = feat
        return feat @ self.params["fc.w"].T + self.params["fc.b"]

    def backward(self, logits, labels):
        """Softmax cross-entropy loss and gradients of every parameter. Keeps in ``self.dys``
        each conv layer's output error ``dY`` (rows in im2col row order, columns ``c_out``):
        the gradient with respect to the conv output after its ReLU mask and, for conv2, the
        max-pool routing."""
        n = logits.shape[0]
        z = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        loss = float(-np.log(p[np.arange(n), labels] + 1e-12).mean())
        d = p
        d[np.arange(n), labels] -= 1
        d /= n
        grads = {"fc.w": d.T @ self.cache["fc"], "fc.b": d.sum(0)}
        dfeat = d @ self.params["fc.w"]
        b, c, h, w = self.cache["gap"]
        dx = np.broadcast_to(dfeat[:, :, None, None] / (h * w), (b, c, h, w))
        self.dys = {}
        for name, cin, cout, k in reversed(CONVS):
            if name == "conv2":
                shape, mask = self.cache["pool"]
                dx = (mask * dx[:, :, :, None, :, None]).reshape(shape)
            in_shape, cols, active = self.cache[name]
            dy = (dx * active).transpose(0, 2, 3, 1).reshape(-1, cout)
            self.dys[name] = dy
            grads[f"{name}.w"] = dy.T @ cols
            grads[f"{name}.b"] = dy.sum(0)
            if name != CONVS[0][0]:
                dx = col2im(dy @ self.params[f"{name}.w"], in_shape, k, 1)
        return loss, grads


def load_data(rng):
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]   # N 1 8 8, values 0..1
    y = digits.target.astype(np.int64)
    order = rng.permutation(len(y))
    x, y = x[order], y[order]
    split = int(0.8 * len(y))
    return (x[:split], y[:split]), (x[split:], y[split:])


def accuracy(net, x, y):
    return float((net.forward(x).argmax(1) == y).mean())


def capture(net, probe, probe_labels, epoch, step, accs, out_dir):
    net.backward(net.forward(probe), probe_labels)
    layers = [(name, net.cols[name].astype(np.float32), Net.weight_shape(name),
               net.dys[name].astype(np.float32)) for name, *_ in CONVS]
    meta = {
        "dataset": "sklearn.datasets.load_digits (8x8, values/16)",
        "network": "conv1 1->8, conv2 8->16 +maxpool2, conv3 16->32 +GAP, fc 32->10; "
                   "3x3, stride 1, pad 1, ReLU",
        "trainer": "verif/flows/capture_traces.py (NumPy), SGD momentum",
        "seed": SEED, "epoch": epoch, "step": step, "batch": BATCH, "lr": LR,
        "momentum": MOMENTUM, "probe_images": len(probe),
        "probe": "the first images of the held-out 20 % split",
        "dy": "d loss / d conv output for the probe batch and its labels (mean cross-entropy "
              "over the batch), after the ReLU mask and, for conv2, the max-pool routing",
        "train_accuracy": round(accs[0], 4), "test_accuracy": round(accs[1], 4),
    }
    from spartan_rtl.golden import traces
    path = Path(out_dir) / f"digits_cnn_epoch{epoch:02d}.npz"
    traces.save(path, layers, meta)
    return path, meta


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m verif.flows.capture_traces",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(OUT_DIR), metavar="DIR")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(SEED)
    (xtr, ytr), (xte, yte) = load_data(rng)
    probe, probe_labels = xte[:PROBE_IMAGES], yte[:PROBE_IMAGES]
    net = Net(rng)
    velocity = {k: np.zeros_like(v) for k, v in net.params.items()}
    step = 0
    captured = []
    for epoch in range(max(CAPTURE_EPOCHS) + 1):
        if epoch in CAPTURE_EPOCHS:
            accs = (accuracy(net, xtr, ytr), accuracy(net, xte, yte))
            path, meta = capture(net, probe, probe_labels, epoch, step, accs, args.output)
            captured.append(path)
            print(f"epoch {epoch:2d} step {step:5d} train {accs[0]:.3f} test {accs[1]:.3f} "
                  f"-> {path}")
        if epoch == max(CAPTURE_EPOCHS):
            break
        order = rng.permutation(len(ytr))
        for i in range(0, len(order), BATCH):
            idx = order[i:i + BATCH]
            loss, grads = net.backward(net.forward(xtr[idx]), ytr[idx])
            for k, g in grads.items():
                velocity[k] = MOMENTUM * velocity[k] - LR * g.astype(np.float32)
                net.params[k] += velocity[k]
            step += 1
    readme = Path(args.output) / "README.md"
    readme.write_text(readme_text(captured))
    print(f"-> {readme}")
    return 0


def readme_text(paths):
    """data/traces/README.md: how the traces were made, their layout, what they measure."""
    from spartan_rtl.golden import traces
    doc = traces.__doc__
    layout = doc[doc.index("Layout"):doc.index("Every violation")].rstrip()
    rows = []
    for path in paths:
        t = traces.load(path)
        for layer in t.layers:
            m, k, n = layer.gemm
            rows.append(f"| `{Path(path).name}` | {t.meta['epoch']} | {t.meta['step']} | "
                        f"{t.meta['test_accuracy']:.3f} | {layer.name} | {m} x {k} x {n} | "
                        f"{layer.a.dtype} | {layer.density:.4f} | {layer.dy_density:.4f} |")
    return f"""# Real training activations

Generated by `python -m verif.flows.capture_traces` (needs the `traces` extra: scikit-learn); do not
edit by hand. Tests and benchmarks read these files with NumPy only.

## How they were made

{__doc__.split(chr(10), 2)[2].strip()}

Seed {SEED}; batch {BATCH}; learning rate {LR}; momentum {MOMENTUM}; 80/20 train/test split of
the 1797 images after a seeded shuffle. At the start of each epoch in {list(CAPTURE_EPOCHS)}
(epoch 0 = the untrained network) the first {PROBE_IMAGES} held-out images go through the
network and the im2col input of every conv layer is saved: one file per epoch. conv1's input is
the image itself (about half the pixels of a digit are 0, and the padding adds zeros); conv2's
is conv1's ReLU output; conv3's is conv2's ReLU output after max pooling. The same batch's loss
(with its labels) is then back-propagated without updating anything, and each conv layer's output
error `dY` is saved beside its input: zero wherever the layer's ReLU output was zero, and for
conv2 also wherever the 2x2 max pool did not route the error (at most one of four positions).

## File layout (`golden/traces.py` loads and validates it)

```
{layout}
```

The same layout is the input of `spartan estimate FILE.npz` (docs/estimate.md). To dump
your own network's im2col inputs, per conv layer:
`torch.nn.functional.unfold(x, k, padding=p, stride=s).transpose(1, 2).reshape(-1, C*k*k)`.

## What they hold

density = nonzero elements / elements of the im2col input (the GEMM's `A`); dY density = the
same for the output error (the backward GEMMs' operand).

| file | epoch | step | test accuracy | layer | M x K x N | dtype | density | dY density |
|---|---:|---:|---:|---|---|---|---:|---:|
""" + "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.exit(main())
