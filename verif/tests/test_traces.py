"""Activation traces: the committed files in data/traces/, the layout's validator
(golden/traces.py) and the NumPy trainer that made them (verif/flows/capture_traces.py).
NumPy only: no PyTorch, no scikit-learn."""

import json
from pathlib import Path

import numpy as np
import pytest

from spartan_rtl.golden import traces
from verif.flows import capture_traces as cap

TRACE_DIR = Path(__file__).resolve().parents[2] / "data" / "traces"
FILES = sorted(TRACE_DIR.glob("*.npz"))

# The capture network (verif/flows/capture_traces.py docstring): 8x8 digits, 3x3 convs, padding 1,
# a 2x2 pool before conv3. im2col GEMM (M, K, N) for a batch of B images.
IMAGE = 8


def expected_gemms(batch):
    return {"conv1": (batch * IMAGE * IMAGE, 1 * 9, 8),
            "conv2": (batch * IMAGE * IMAGE, 8 * 9, 16),
            "conv3": (batch * (IMAGE // 2) ** 2, 16 * 9, 32)}


# --------------------------------------------------------------------- committed traces

def test_committed_traces_exist_and_are_small():
    assert len(FILES) >= 3
    assert sum(f.stat().st_size for f in FILES) < 5 * 2 ** 20


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_committed_trace_follows_the_layout(path):
    t = traces.load(path)
    assert [layer.name for layer in t.layers] == ["conv1", "conv2", "conv3"]
    probe = t.meta["probe_images"]
    for layer in t.layers:
        assert layer.gemm == expected_gemms(probe)[layer.name]
        assert layer.a.dtype == np.float32
        assert 0 < layer.density < 1
    # conv1 reads the image (pixel/16, so multiples of 1/16 in [0, 1]); the others read ReLU
    # outputs, never negative.
    a1 = t.layer("conv1").a
    assert a1.min() >= 0 and a1.max() <= 1 and np.array_equal(a1 * 16, np.round(a1 * 16))
    assert t.layer("conv2").a.min() >= 0 and t.layer("conv3").a.min() >= 0
    for layer in t.layers:
        m, _, n = layer.gemm
        assert layer.dy is not None and layer.dy.shape == (m, n) and layer.dy.dtype == np.float32
        assert 0 < layer.dy_density < 1


def _output(trace, name):
    """The ReLU output (B, C, H, W) that layer ``name`` reads, from its im2col input: with a
    3x3 kernel, stride 1 and padding 1, column (c, ky=1, kx=1) of row (b, y, x) is input
    (b, c, y, x)."""
    a = trace.layer(name).a
    c = a.shape[1] // 9
    side = IMAGE if name == "conv2" else IMAGE // 2
    return a[:, 4::9].reshape(-1, side, side, c).transpose(0, 3, 1, 2)


def _error(trace, name, side):
    dy = trace.layer(name).dy
    return dy.reshape(-1, side, side, dy.shape[1]).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_committed_errors_follow_the_relu_and_the_max_pool(path):
    """The structure rules of golden/networks.py on measured errors. conv1 (ReLU): dY is zero
    wherever conv1's output is. conv2 (ReLU, 2x2 max pool): at most one nonzero per window and
    channel, and a window has one exactly where its pooled output is nonzero (the error reaching
    it is a dense col2im sum), so density(dY) = density(pooled output) / 4."""
    t = traces.load(path)
    out1 = _output(t, "conv2")                       # conv1's ReLU output
    dy1 = _error(t, "conv1", IMAGE)
    assert not (dy1 != 0)[out1 == 0].any()
    pooled = _output(t, "conv3")                     # conv2's ReLU output, max-pooled
    dy2 = _error(t, "conv2", IMAGE)
    b, c = dy2.shape[:2]
    per_window = (dy2 != 0).reshape(b, c, IMAGE // 2, 2, IMAGE // 2, 2).sum(axis=(3, 5))
    assert per_window.max() == 1
    assert np.array_equal(per_window == 1, pooled > 0)
    assert t.layer("conv2").dy_density == pytest.approx(np.mean(pooled > 0) / 4)


@pytest.mark.parametrize("path", FILES[:1], ids=[f.name for f in FILES[:1]])
def test_committed_conv1_is_the_padded_image_unfolded(path):
    """Rows (image, y, x), columns (c, ky, kx): the centre column is the image itself, the
    (ky, kx) = (0, 0) column is the image shifted down-right by one with zeros at the border."""
    a = traces.load(path).layer("conv1").a
    images = a[:, 4].reshape(-1, IMAGE, IMAGE)
    top_left = a[:, 0].reshape(-1, IMAGE, IMAGE)
    assert np.array_equal(top_left[:, 1:, 1:], images[:, :-1, :-1])
    assert not top_left[:, 0, :].any() and not top_left[:, :, 0].any()


def test_training_progressed_across_the_committed_points():
    metas = [traces.load(f).meta for f in FILES]
    epochs = [m["epoch"] for m in metas]
    assert epochs == sorted(epochs) and epochs[0] == 0
    assert metas[-1]["test_accuracy"] > 0.9 > metas[0]["test_accuracy"]


def test_readme_lists_every_file_with_its_density():
    text = (TRACE_DIR / "README.md").read_text()
    for path in FILES:
        for layer in traces.load(path).layers:
            assert f"| `{path.name}` |" in text
            assert f"| {layer.name} | {' x '.join(map(str, layer.gemm))} | float32 | " \
                   f"{layer.density:.4f} | {layer.dy_density:.4f} |" in text


# --------------------------------------------------------------------- the trainer

def test_im2col_matches_a_direct_loop():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 4))
    cols, (oh, ow) = cap.im2col(x, 3, 1)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    assert (oh, ow) == (5, 4) and cols.shape == (2 * 5 * 4, 3 * 9)
    for b in range(2):
        for y in range(oh):
            for xx in range(ow):
                expect = xp[b, :, y:y + 3, xx:xx + 3].reshape(-1)   # (c, ky, kx), c slowest
                assert np.array_equal(cols[(b * oh + y) * ow + xx], expect)


def test_col2im_is_the_adjoint_of_im2col():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6, 5))
    cols, _ = cap.im2col(x, 3, 1)
    y = rng.standard_normal(cols.shape)
    assert np.vdot(cols, y) == pytest.approx(np.vdot(x, cap.col2im(y, x.shape, 3, 1)))


def test_saved_errors_are_the_gradients_of_the_conv_outputs():
    """``dys`` is what the (finite-difference-checked) parameter gradients are made of:
    dL/db = column sums of dY, dL/dW = dY^T . A."""
    rng = np.random.default_rng(5)
    net = cap.Net(rng)
    _, grads = net.backward(net.forward(rng.random((2, 1, IMAGE, IMAGE))), np.array([3, 8]))
    for name, *_ in cap.CONVS:
        dy = net.dys[name]
        assert dy.shape == (net.cols[name].shape[0], cap.Net.weight_shape(name)[0])
        assert np.allclose(grads[f"{name}.b"], dy.sum(0))
        assert np.allclose(grads[f"{name}.w"], dy.T @ net.cols[name])


def test_backprop_matches_finite_differences():
    rng = np.random.default_rng(3)
    net = cap.Net(rng)
    net.params = {k: v.astype(np.float64) + (0.1 * rng.standard_normal(v.shape)
                                             if k.endswith(".b") else 0)
                  for k, v in net.params.items()}
    x, labels = rng.random((3, 1, IMAGE, IMAGE)), np.array([1, 4, 7])
    _, grads = net.backward(net.forward(x), labels)
    for key, p in net.params.items():
        for _ in range(3):
            idx = tuple(int(rng.integers(0, s)) for s in p.shape)
            old = p[idx]
            p[idx] = old + 1e-6
            plus, _ = net.backward(net.forward(x), labels)
            p[idx] = old - 1e-6
            minus, _ = net.backward(net.forward(x), labels)
            p[idx] = old
            assert grads[key][idx] == pytest.approx((plus - minus) / 2e-6, rel=1e-4, abs=1e-8), key


# --------------------------------------------------------------------- the validator

def good_arrays():
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, size=(10, 18)).astype(np.int8)
    return {"layers": np.array(["c1", "fc.0"]),
            "a_c1": a, "w_shape_c1": np.array([4, 2, 3, 3]),
            "a_fc.0": np.ones((2, 5), np.float16), "w_shape_fc.0": np.array([7, 5, 1, 1]),
            "meta": np.array(json.dumps({"source": "test"}))}


def test_save_load_round_trip_and_density(tmp_path):
    arrays = good_arrays()
    arrays["a_c1"][0, :4] = 0
    layers = [(n, arrays[f"a_{n}"], arrays[f"w_shape_{n}"]) for n in ("c1", "fc.0")]
    traces.save(tmp_path / "t.npz", layers, {"source": "test"})
    t = traces.load(tmp_path / "t.npz")
    assert [(layer.name, layer.gemm) for layer in t.layers] == [("c1", (10, 18, 4)),
                                                                 ("fc.0", (2, 5, 7))]
    assert t.meta == {"source": "test"}
    c1 = t.layer("c1")
    assert c1.a.dtype == np.int8 and np.array_equal(c1.a, arrays["a_c1"])
    assert c1.nnz == np.count_nonzero(arrays["a_c1"])


def test_errors_round_trip_and_old_traces_still_load(tmp_path):
    arrays = good_arrays()
    dy = np.zeros((10, 4), np.float32)
    dy[::3, 1] = -0.5
    layers = [("c1", arrays["a_c1"], arrays["w_shape_c1"], dy),
              ("fc.0", arrays["a_fc.0"], arrays["w_shape_fc.0"])]
    traces.save(tmp_path / "new.npz", layers)
    t = traces.load(tmp_path / "new.npz")
    assert np.array_equal(t.layer("c1").dy, dy) and t.layer("c1").dy_density == 4 / 40
    assert t.layer("fc.0").dy is None and t.layer("fc.0").dy_density is None
    # A file of the first layout (no dy_ keys at all), written without golden/traces.py.
    np.savez(tmp_path / "old.npz", layers=np.array(["c1"]), a_c1=arrays["a_c1"],
             w_shape_c1=arrays["w_shape_c1"])
    old = traces.load(tmp_path / "old.npz")
    assert old.layer("c1").dy is None and old.meta == {}


def test_negative_zero_counts_as_zero():
    arrays = good_arrays()
    arrays["a_fc.0"] = np.array([[-0.0, 0.0, 1.0, -2.0, 0.5]] * 2, np.float32)
    assert traces.validate(arrays).layer("fc.0").density == pytest.approx(0.6)


def _without(key):
    def change(arrays):
        del arrays[key]
    return change


def _set(key, value):
    def change(arrays):
        arrays[key] = value
    return change


BAD = [
    (_without("layers"), "key 'layers' must be present, not missing"),
    (_set("layers", np.array([1, 2])),
     "key 'layers' must be a non-empty 1-D array of str, not int64"),
    (_set("layers", np.array(["c1", "bad name"])),
     "layer names must be letters, digits, '_' or '.', not 'bad name'"),
    (_set("layers", np.array(["c1", "c1"])), "layer names must be unique, not 'c1' twice"),
    (_without("a_c1"),
     "key 'a_c1' must be present (layer 'c1' is listed in 'layers'), not missing"),
    (_without("w_shape_fc.0"), "key 'w_shape_fc.0' must be present (layer 'fc.0' is listed"),
    (_set("a_conv9", np.ones((2, 2))),
     "keys must be 'layers', 'meta', and a_<name>/w_shape_<name>[/dy_<name>] for each listed "
     "layer, not 'a_conv9'"),
    (_set("dy_conv9", np.ones((2, 2))),
     "keys must be 'layers', 'meta', and a_<name>/w_shape_<name>[/dy_<name>] for each listed "
     "layer, not 'dy_conv9'"),
    (_set("dy_c1", np.ones((10, 3), np.float32)),
     "key 'dy_c1' must have shape (M, C_out) = (10, 4), not (10, 3)"),
    (_set("dy_c1", np.ones((10, 4), bool)),
     "key 'dy_c1' must have a float or integer dtype, not bool"),
    (_set("dy_c1", np.ones(4, np.float32)),
     "key 'dy_c1' must be a 2-D array (M output positions, N = C_out), not shape (4,)"),
    (_set("dy_c1", np.full((10, 4), np.inf)),
     "key 'dy_c1' must be finite, not containing NaN or infinity"),
    (_set("a_c1", np.ones((10, 18), np.complex64)),
     "key 'a_c1' must have a float or integer dtype, not complex64"),
    (_set("a_c1", np.ones((10, 18), bool)),
     "key 'a_c1' must have a float or integer dtype, not bool"),
    (_set("a_c1", np.ones((10, 18), "<U1")),
     "key 'a_c1' must have a float or integer dtype, not <U1"),
    (_set("a_c1", np.ones((2, 5, 18), np.int8)),
     "key 'a_c1' must be a 2-D array (M output positions, K = C_in*k_h*k_w), not shape (2, 5, 18)"),
    (_set("a_c1", np.ones((0, 18), np.int8)),
     "key 'a_c1' must be a 2-D array (M output positions, K = C_in*k_h*k_w), not shape (0, 18)"),
    (_set("a_c1", np.full((10, 18), np.nan)),
     "key 'a_c1' must be finite, not containing NaN or infinity"),
    (_set("a_c1", np.ones((10, 17), np.int8)),
     "key 'a_c1' must have K = C_in*k_h*k_w = 18 columns (w_shape (4, 2, 3, 3)), not 17"),
    (_set("w_shape_c1", np.array([4.0, 2, 3, 3])),
     "key 'w_shape_c1' must be 4 integers (C_out, C_in, k_h, k_w), not float64 of shape (4,)"),
    (_set("w_shape_c1", np.array([4, 18])),
     "key 'w_shape_c1' must be 4 integers (C_out, C_in, k_h, k_w), not int64 of shape (2,)"),
    (_set("w_shape_c1", np.array([0, 2, 3, 3])),
     "key 'w_shape_c1' must be positive, not (0, 2, 3, 3)"),
    (_set("meta", np.array(3)), "key 'meta' must be a str, not int64 of shape ()"),
    (_set("meta", np.array("{oops")), "key 'meta' must be JSON, not '{oops'"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_trace_one_line_error(tmp_path, change, message):
    arrays = good_arrays()
    change(arrays)
    path = tmp_path / "user.npz"
    np.savez(path, **arrays)
    with pytest.raises(traces.TraceError) as info:
        traces.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


@pytest.mark.parametrize("write, message", [
    (lambda p: p.write_text("layers,a\n1,2\n"), "file must be an .npz archive, not unreadable"),
    (lambda p: np.save(p.with_suffix(".npy"), np.ones(3)) or p.with_suffix(".npy").rename(p),
     "file must be an .npz archive, not a single .npy array"),
    (lambda p: np.savez(p, layers=np.array(["c1"]), a_c1=np.array([{}, 1], dtype=object)),
     "every array must be plain numbers or str, not pickled objects"),
    (lambda p: None, "file must exist, not missing"),
], ids=["text", "npy", "pickled", "missing"])
def test_unreadable_file_one_line_error(tmp_path, write, message):
    path = tmp_path / "user.npz"
    write(path)
    with pytest.raises(traces.TraceError) as info:
        traces.load(path)
    assert message in str(info.value) and "\n" not in str(info.value)
