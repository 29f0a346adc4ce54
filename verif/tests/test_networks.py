"""golden/networks.py against the three architectures, derived here layer by layer from their
definitions (torchvision's AlexNet, VGG-16 configuration "D", ResNet-18 with BasicBlocks) with
the output-size formula out = floor((in + 2*pad - k) / stride) + 1, and against the published
per-network multiply-accumulate totals."""

import pytest

from spartan_rtl.golden import networks

IMAGE = 224


def out_size(size, k, stride, pad):
    return (size + 2 * pad - k) // stride + 1


class Walker:
    """Follows a 3 x 224 x 224 image through conv and pool layers, recording conv GEMMs."""

    def __init__(self):
        self.c, self.hw, self.gemms = 3, IMAGE, []
        self.pooled = {}   # conv name -> (its output side, the pooled side)

    def conv(self, name, cout, k, stride=1, pad=0, cin=None, hw=None):
        cin = self.c if cin is None else cin
        hw = self.hw if hw is None else hw
        out = out_size(hw, k, stride, pad)
        self.gemms.append((name, out * out, cin * k * k, cout))
        return out

    def step(self, name, cout, k, stride=1, pad=0):
        self.hw = self.conv(name, cout, k, stride, pad)
        self.c = cout

    def pool(self, k, stride, pad=0):
        before = self.hw
        self.hw = out_size(self.hw, k, stride, pad)
        self.pooled[self.gemms[-1][0]] = (before, self.hw)


def alexnet():
    w = Walker()
    w.step("conv1", 64, 11, 4, 2)
    w.pool(3, 2)
    w.step("conv2", 192, 5, 1, 2)
    w.pool(3, 2)
    w.step("conv3", 384, 3, 1, 1)
    w.step("conv4", 256, 3, 1, 1)
    w.step("conv5", 256, 3, 1, 1)
    w.pool(3, 2)
    return w


def vgg16():
    w = Walker()
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    stage, index = 1, 1
    for item in cfg:
        if item == "M":
            w.pool(2, 2)
            stage, index = stage + 1, 1
        else:
            w.step(f"conv{stage}_{index}", item, 3, 1, 1)
            index += 1
    return w


def resnet18():
    w = Walker()
    w.step("conv1", 64, 7, 2, 3)
    w.pool(3, 2, 1)
    for layer, (width, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)], start=1):
        for block in range(2):
            s = stride if block == 0 else 1
            cin, hw = w.c, w.hw
            name = f"layer{layer}.{block}"
            w.step(f"{name}.conv1", width, 3, s, 1)
            w.step(f"{name}.conv2", width, 3, 1, 1)
            if s != 1 or cin != width:
                w.conv(f"{name}.downsample", width, 1, s, 0, cin=cin, hw=hw)
    return w


DERIVED = {"alexnet": alexnet, "vgg16": vgg16, "resnet18": resnet18}

#: Published multiply-accumulates of the whole network (torchvision's model table, "GFLOPS"
#: counted as MACs): 0.71, 15.47 and 1.81 G. The classifier is not a conv GEMM: its MACs are
#: the fully connected layers' in_features * out_features.
PUBLISHED_GMACS = {"alexnet": 0.71, "vgg16": 15.47, "resnet18": 1.81}
FC_MACS = {"alexnet": 9216 * 4096 + 4096 * 4096 + 4096 * 1000,
           "vgg16": 25088 * 4096 + 4096 * 4096 + 4096 * 1000,
           "resnet18": 512 * 1000}


@pytest.mark.parametrize("network", DERIVED)
def test_shapes_match_the_architecture(network):
    table = [(g.name, g.m, g.k, g.n) for g in networks.layers(network)]
    assert table == DERIVED[network]().gemms


@pytest.mark.parametrize("network", DERIVED)
def test_total_macs_match_published_figures(network):
    total = networks.total_macs(network) + FC_MACS[network]
    assert total / 1e9 == pytest.approx(PUBLISHED_GMACS[network], rel=0.01)


def test_known_layer_shapes():
    # Hand-worked: AlexNet conv1 (224 + 4 - 11) // 4 + 1 = 55; VGG conv5_3 14x14, 512*9;
    # ResNet-18's last block conv at 7x7.
    assert networks.layers("alexnet")[0].m == 55 * 55
    assert networks.layers("vgg16")[-1].m == 14 * 14
    assert networks.layers("resnet18")[-1].m == 7 * 7
    assert len(networks.layers("resnet18")) == 20 and len(networks.layers("vgg16")) == 13


def test_densities_are_the_band_midpoints():
    for network in DERIVED:
        first, *rest = networks.layers(network)
        assert first.density == 1.0
        assert all(0 < g.density < 1 for g in rest)
    assert all(g.density == pytest.approx(1 - 0.575) for g in networks.layers("alexnet")[1:])
    for g in networks.layers("resnet18")[1:]:
        inside = g.name.endswith("conv2")   # conv1 and downsample read a block's output
        assert g.density == pytest.approx(1 - (0.45 if inside else 0.35)), g.name
    # VGG-16: 35-60 % rising by stage, mean over the stages = the midpoint 47.5 %.
    by_stage = {}
    for g in networks.layers("vgg16")[1:]:
        by_stage.setdefault(int(g.name[4]), set()).add(round(1 - g.density, 6))
    sparsity = [by_stage[s].pop() for s in range(1, 6)]
    assert sparsity == sorted(sparsity) and sparsity[0] == 0.35 and sparsity[-1] == 0.6
    assert sum(sparsity) / 5 == pytest.approx(0.475)


def test_ideal_speedup_is_mac_weighted_inverse_density():
    # AlexNet by hand: conv1 dense, the rest at 0.425.
    macs = [m * k * n for _, m, k, n in alexnet().gemms]
    expected = sum(macs) / (macs[0] + 0.425 * sum(macs[1:]))
    assert networks.ideal_speedup("alexnet", ("forward",)) == pytest.approx(expected)
    assert 1 < networks.ideal_speedup("resnet18", ("forward",)) < 1 / 0.55


# dY densities worked by hand from the structure rules (golden/networks.py docstring):
# ReLU alone: the next layer's input band; ReLU + max pool: the pooled output's band times
# pooled / conv positions; batch norm: dense.
HAND_DY = {
    ("alexnet", "conv1"): 0.425 * 27 ** 2 / 55 ** 2,    # pool 3x3/2 55 -> 27, conv2 reads it
    ("alexnet", "conv2"): 0.425 * 13 ** 2 / 27 ** 2,
    ("alexnet", "conv3"): 0.425,
    ("alexnet", "conv4"): 0.425,
    ("alexnet", "conv5"): 0.425 * 6 ** 2 / 13 ** 2,     # classifier input: its own band
    ("vgg16", "conv1_1"): 0.65,                         # conv1_2 reads it, stage 1
    ("vgg16", "conv1_2"): 0.5875 / 4,                   # pooled, read by stage 2
    ("vgg16", "conv3_2"): 0.525,
    ("vgg16", "conv4_3"): 0.40 / 4,
    ("vgg16", "conv5_3"): 0.40 / 4,
    ("resnet18", "layer1.0.conv1"): 1.0,
    ("resnet18", "layer3.1.conv2"): 1.0,
    ("resnet18", "layer4.0.downsample"): 1.0,
}


@pytest.mark.parametrize("network, name", HAND_DY, ids=[f"{n}-{c}" for n, c in HAND_DY])
def test_output_error_density_from_structure(network, name):
    g = next(g for g in networks.layers(network) if g.name == name)
    assert g.dy_density == pytest.approx(HAND_DY[network, name])
    assert g.dy_basis   # every number carries its assumption


@pytest.mark.parametrize("network", DERIVED)
def test_what_follows_each_conv_is_the_architecture(network):
    """Max pools where the architecture pools (walked above), batch norm throughout ResNet-18,
    and only the first layer without a data gradient."""
    walked = DERIVED[network]()
    for i, g in enumerate(networks.layers(network)):
        assert ("maxpool" in g.after) == (g.name in walked.pooled), g.name
        assert g.after.startswith("bn") == (network == "resnet18"), g.name
        assert g.has_dgrad == (i > 0)
        if g.name in walked.pooled and network != "resnet18":
            conv, pooled = walked.pooled[g.name]
            assert f"{pooled}^2/{conv}^2" in g.dy_basis


def test_whole_step_ideal_by_hand():
    # AlexNet: forward at the input densities; dgrad (conv2-5) at dY's; wgrad at the sparser.
    table = networks.layers("alexnet")
    macs = [g.macs for g in table]
    dy = [HAND_DY["alexnet", g.name] for g in table]
    a = [1.0] + [0.425] * 4
    useful = (sum(m * d for m, d in zip(macs, a)) + sum(m * d for m, d in zip(macs[1:], dy[1:]))
              + sum(m * min(x, y) for m, x, y in zip(macs, a, dy)))
    assert networks.ideal_speedup("alexnet") == pytest.approx((2 * sum(macs) + sum(macs[1:]))
                                                              / useful)
    assert networks.ideal_speedup("alexnet", ("dgrad",)) == pytest.approx(
        sum(macs[1:]) / sum(m * d for m, d in zip(macs[1:], dy[1:])))
    # ResNet-18: batch norm leaves dY dense, so the data gradient has nothing to skip.
    assert networks.ideal_speedup("resnet18", ("dgrad",)) == 1.0
    with pytest.raises(ValueError, match="gemm must be one of forward, dgrad, wgrad, not 'x'"):
        networks.gemm_ideal(table[0], "x")


def test_unknown_network():
    message = "network must be one of alexnet, vgg16, resnet18, not 'lenet'"
    with pytest.raises(ValueError, match=message):
        networks.layers("lenet")
