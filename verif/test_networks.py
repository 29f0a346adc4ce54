"""golden/networks.py against the three architectures, derived here layer by layer from their
definitions (torchvision's AlexNet, VGG-16 configuration "D", ResNet-18 with BasicBlocks) with
the output-size formula out = floor((in + 2*pad - k) / stride) + 1, and against the published
per-network multiply-accumulate totals."""

import pytest

from golden import networks

IMAGE = 224


def out_size(size, k, stride, pad):
    return (size + 2 * pad - k) // stride + 1


class Walker:
    """Follows a 3 x 224 x 224 image through conv and pool layers, recording conv GEMMs."""

    def __init__(self):
        self.c, self.hw, self.gemms = 3, IMAGE, []

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
        self.hw = out_size(self.hw, k, stride, pad)


def alexnet():
    w = Walker()
    w.step("conv1", 64, 11, 4, 2)
    w.pool(3, 2)
    w.step("conv2", 192, 5, 1, 2)
    w.pool(3, 2)
    w.step("conv3", 384, 3, 1, 1)
    w.step("conv4", 256, 3, 1, 1)
    w.step("conv5", 256, 3, 1, 1)
    return w.gemms


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
    return w.gemms


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
    return w.gemms


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
    assert table == DERIVED[network]()


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
    macs = [m * k * n for _, m, k, n in alexnet()]
    expected = sum(macs) / (macs[0] + 0.425 * sum(macs[1:]))
    assert networks.ideal_speedup("alexnet") == pytest.approx(expected)
    assert 1 < networks.ideal_speedup("resnet18") < 1 / 0.55


def test_unknown_network():
    with pytest.raises(ValueError, match="network must be one of alexnet, vgg16, resnet18, not 'lenet'"):
        networks.layers("lenet")
