"""Conv layers of AlexNet, VGG-16 and ResNet-18 as im2col GEMMs, with input densities.

Conventions
    ImageNet resolution (3 x 224 x 224), batch 1, the torchvision definitions of the three
    networks (AlexNet is torchvision's single-tower variant: 64/192/384/256/256 channels, no
    groups). Each conv layer is a GEMM ``C = A . B``: ``A`` the im2col input, ``M`` = output
    positions (H_out * W_out), ``K`` = C_in * k_h * k_w; ``B`` the weights, ``N`` = C_out.
    MACs = M * K * N. Pooling, batch norm, ReLU and the fully connected classifiers are not
    GEMMs of a conv layer and are left out. ResNet's 1x1 stride-2 shortcut convolutions
    (``downsample``) are included.

Input density (nonzero fraction of ``A``)
    From the sparsity the authors' released monitor code reports (the bands of the issue), the
    midpoint of each band, density = 1 - sparsity:

    ==========================================  ===========  ========  =======
    layers                                      band         sparsity  density
    ==========================================  ===========  ========  =======
    first conv of each network (the image)      dense        0 %       1.0
    AlexNet conv2-conv5                         50-65 %      57.5 %    0.425
    VGG-16 stage s = 1..5 (conv1_2 ... conv5_3) 35-60 %      see below
    ResNet-18, input inside a block (conv2)     40-50 %      45 %      0.55
    ResNet-18, input = a block's output         30-40 %      35 %      0.65
    ==========================================  ===========  ========  =======

    VGG-16's band rises by stage; it is spread linearly over the five stages, so its mean is
    the band's midpoint (47.5 %): stage 1 35 %, 2 41.25 %, 3 47.5 %, 4 53.75 %, 5 60 %
    (densities 0.65, 0.5875, 0.525, 0.4625, 0.40). A layer's stage is the stage it belongs to
    (conv2_1 reads stage 1's pooled output and is in stage 2). ResNet-18's stem output (after
    max pooling) feeds layer1.0 like a block output and takes that band; every ``conv1`` and
    ``downsample`` of a block reads a block output, every ``conv2`` a value inside the block.

What follows each conv layer, and the density of its output error ``dY``
    A training step runs three GEMMs per conv layer (spartan_rtl/estimate.py): forward (streams the
    input ``A``), data gradient ``dA = dY . W^T`` (streams ``dY``; not run for the first layer,
    whose input is the image) and weight gradient ``dW = A^T . dY`` (streams, per slice of
    output positions, whichever of ``A`` and ``dY`` is sparser). ``dY``'s density follows from
    what comes after the conv (``after``), each rule with its assumption:

    ``relu``          dY is zero wherever the ReLU output is zero. The error arriving at the
                      ReLU output is taken nonzero everywhere (it is the next layer's data
                      gradient, a dense sum), so density(dY) = density of the ReLU output,
                      taken equal to the band of the next layer's input (the band measures
                      that input, im2col padding aside).
    ``relu+maxpool``  each pooled output passes its error to one position, its window's
                      maximum; a pooled output of 0 (all four, or nine, inputs ReLU-zero) passes
                      an error that the ReLU mask then zeroes. So the nonzeros of dY are the
                      nonzero pooled outputs: density(dY) = density(pooled output) x (pooled
                      positions / conv output positions), the pooled density being the next
                      layer's input band (2x2/2: a quarter of it). AlexNet's 3x3/2 windows
                      overlap, two may pick the same maximum: there it is an upper bound. The
                      last conv's pooled output feeds the classifier, which has no band: its
                      own stage's band is taken.
    ``bn+...``        batch normalisation between the conv and its ReLU (ResNet-18, every
                      conv including the stem and the downsample shortcuts): BN's backward,
                      dx = g/s (dy - mean(dy) - x^ mean(dy x^)) per channel, mixes every
                      position's error, so dY is dense (1.0) whatever the ReLU zeroed.

    ``dy_basis`` carries the assumption of each layer's number; ``ideal_speedup`` weights the
    GEMMs' bounds by their MACs.

How spartan_rtl/estimate.py uses the table (spartan bench estimate, docs/results.md)
    Per-layer and whole-network speedup of the adaptive core over dense, from the cycle model
    on unstructured random masks at each GEMM's streamed-operand density (forward: ``density``;
    dgrad: ``dy_density``; wgrad: the form with less work,
    :func:`spartan_rtl.estimate.estimate_wgrad`'s rule), and the profiling-overhead
    comparison, against :func:`ideal_speedup`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConvGemm", "NETWORKS", "PAPER", "layers", "ideal_speedup", "gemm_ideal",
           "total_macs", "relu", "relu_maxpool", "batch_norm"]


@dataclass(frozen=True)
class ConvGemm:
    name: str
    m: int          # output positions
    k: int          # C_in * k_h * k_w
    n: int          # C_out
    density: float  # nonzero fraction of the im2col input
    band: str       # where the density comes from
    after: str = "relu"         # what follows the conv (module docstring)
    dy_density: float = 1.0     # nonzero fraction of the output error dY
    dy_basis: str = ""          # the assumption behind dy_density
    first: bool = False         # the network's first layer: no data gradient

    @property
    def macs(self):
        return self.m * self.k * self.n

    @property
    def has_dgrad(self):
        return not self.first


def relu(out_density, basis):
    """``(after, dY density, assumption)`` of a conv followed by a ReLU alone."""
    return ("relu", out_density,
            f"ReLU: dY zero where the output is; output density {out_density:g} ({basis}); "
            f"arriving error nonzero everywhere")


def relu_maxpool(pooled_density, conv_hw, pool_hw, window, basis):
    """... followed by a ReLU and a ``window`` max pool from ``conv_hw``^2 to ``pool_hw``^2
    positions: one routed position per nonzero pooled output."""
    share = pool_hw ** 2 / conv_hw ** 2
    bound = "; windows overlap: upper bound" if window == "3x3/2" else ""
    return ("relu+maxpool", pooled_density * share,
            f"ReLU + max pool {window}: one position per nonzero pooled output, pooled density "
            f"{pooled_density:g} ({basis}) x {pool_hw}^2/{conv_hw}^2 positions{bound}")


def batch_norm(after):
    """... with batch normalisation between the conv and what follows (``after``)."""
    return (after, 1.0, "batch norm before the ReLU: its backward mixes every position's error "
                        "of a channel, dY dense")


FIRST = "first conv: the image, dense"
ALEX = "AlexNet conv2-5: 50-65 % sparse, midpoint 57.5 %"
VGG = "VGG-16 stage {}: 35-60 % by stage, linear, {} %"
RES_IN = "ResNet-18 inside a block: 40-50 % sparse, midpoint 45 %"
RES_OUT = "ResNet-18 block output: 30-40 % sparse, midpoint 35 %"


def _vgg(stage):
    sparsity = (35.0, 41.25, 47.5, 53.75, 60.0)[stage - 1]
    return 1 - sparsity / 100, VGG.format(stage, f"{sparsity:g}")


def _table(rows):
    return tuple(ConvGemm(name, m, k, n, density, band, *error, first=i == 0)
                 for i, (name, m, k, n, density, band, error) in enumerate(rows))


NEXT = "next layer's input band"
CLASSIFIER = "classifier input: no band, this stage's band taken"


# name, M, K, N, density, band. Output sizes: AlexNet 55 -> (pool) 27 -> (pool) 13;
# VGG-16 224, 112, 56, 28, 14; ResNet-18 112 -> (pool) 56, 28, 14, 7.
# name, M, K, N, density, band, (after, dY density, dY assumption).
_ALEXNET = _table([
    ("conv1", 55 * 55, 3 * 11 * 11, 64, 1.0, FIRST, relu_maxpool(0.425, 55, 27, "3x3/2", NEXT)),
    ("conv2", 27 * 27, 64 * 5 * 5, 192, 0.425, ALEX, relu_maxpool(0.425, 27, 13, "3x3/2", NEXT)),
    ("conv3", 13 * 13, 192 * 3 * 3, 384, 0.425, ALEX, relu(0.425, NEXT)),
    ("conv4", 13 * 13, 384 * 3 * 3, 256, 0.425, ALEX, relu(0.425, NEXT)),
    ("conv5", 13 * 13, 256 * 3 * 3, 256, 0.425, ALEX,
     relu_maxpool(0.425, 13, 6, "3x3/2", CLASSIFIER)),
])

def _vgg_pool(stage, hw, basis=NEXT):
    """ReLU + 2x2/2 max pool at the end of a stage, its pooled output read by stage+1."""
    return relu_maxpool(_vgg(min(stage + 1, 5))[0], hw, hw // 2, "2x2/2", basis)


_VGG16 = _table([
    ("conv1_1", 224 * 224, 3 * 9, 64, 1.0, FIRST, relu(_vgg(1)[0], NEXT)),
    ("conv1_2", 224 * 224, 64 * 9, 64, *_vgg(1), _vgg_pool(1, 224)),
    ("conv2_1", 112 * 112, 64 * 9, 128, *_vgg(2), relu(_vgg(2)[0], NEXT)),
    ("conv2_2", 112 * 112, 128 * 9, 128, *_vgg(2), _vgg_pool(2, 112)),
    ("conv3_1", 56 * 56, 128 * 9, 256, *_vgg(3), relu(_vgg(3)[0], NEXT)),
    ("conv3_2", 56 * 56, 256 * 9, 256, *_vgg(3), relu(_vgg(3)[0], NEXT)),
    ("conv3_3", 56 * 56, 256 * 9, 256, *_vgg(3), _vgg_pool(3, 56)),
    ("conv4_1", 28 * 28, 256 * 9, 512, *_vgg(4), relu(_vgg(4)[0], NEXT)),
    ("conv4_2", 28 * 28, 512 * 9, 512, *_vgg(4), relu(_vgg(4)[0], NEXT)),
    ("conv4_3", 28 * 28, 512 * 9, 512, *_vgg(4), _vgg_pool(4, 28)),
    ("conv5_1", 14 * 14, 512 * 9, 512, *_vgg(5), relu(_vgg(5)[0], NEXT)),
    ("conv5_2", 14 * 14, 512 * 9, 512, *_vgg(5), relu(_vgg(5)[0], NEXT)),
    ("conv5_3", 14 * 14, 512 * 9, 512, *_vgg(5), _vgg_pool(5, 14, CLASSIFIER)),
])

_RESNET18 = _table([
    ("conv1", 112 * 112, 3 * 7 * 7, 64, 1.0, FIRST,
     batch_norm("bn+relu+maxpool")),
    ("layer1.0.conv1", 56 * 56, 64 * 9, 64, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer1.0.conv2", 56 * 56, 64 * 9, 64, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
    ("layer1.1.conv1", 56 * 56, 64 * 9, 64, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer1.1.conv2", 56 * 56, 64 * 9, 64, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
    ("layer2.0.conv1", 28 * 28, 64 * 9, 128, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer2.0.conv2", 28 * 28, 128 * 9, 128, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
    ("layer2.0.downsample", 28 * 28, 64, 128, 0.65, RES_OUT,
     batch_norm("bn+add+relu")),
    ("layer2.1.conv1", 28 * 28, 128 * 9, 128, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer2.1.conv2", 28 * 28, 128 * 9, 128, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
    ("layer3.0.conv1", 14 * 14, 128 * 9, 256, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer3.0.conv2", 14 * 14, 256 * 9, 256, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
    ("layer3.0.downsample", 14 * 14, 128, 256, 0.65, RES_OUT,
     batch_norm("bn+add+relu")),
    ("layer3.1.conv1", 14 * 14, 256 * 9, 256, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer3.1.conv2", 14 * 14, 256 * 9, 256, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
    ("layer4.0.conv1", 7 * 7, 256 * 9, 512, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer4.0.conv2", 7 * 7, 512 * 9, 512, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
    ("layer4.0.downsample", 7 * 7, 256, 512, 0.65, RES_OUT,
     batch_norm("bn+add+relu")),
    ("layer4.1.conv1", 7 * 7, 512 * 9, 512, 0.65, RES_OUT,
     batch_norm("bn+relu")),
    ("layer4.1.conv2", 7 * 7, 512 * 9, 512, 0.55, RES_IN,
     batch_norm("bn+add+relu")),
])

NETWORKS = {"alexnet": _ALEXNET, "vgg16": _VGG16, "resnet18": _RESNET18}

#: The paper's figures (Dong et al., TPDS 2021) our estimates are reported beside:
#: conv-layer training speedup on ImageNet, and the profiling-overhead reduction.
PAPER = {"speedup": {"alexnet": 3.4, "vgg16": 2.14, "resnet18": 2.02},
         "profiling_overhead_reduction": 52.5}


def layers(network):
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, not {network!r}")
    return NETWORKS[network]


def total_macs(network):
    return sum(layer.macs for layer in layers(network))


def gemm_ideal(layer, gemm):
    """``(MACs, useful MACs)`` of one GEMM of a layer: useful = those whose streamed element is
    nonzero (forward: A's density; dgrad: dY's, none for the first layer; wgrad: the sparser
    operand's, streamed per slice)."""
    if gemm == "forward":
        return layer.macs, layer.macs * layer.density
    if gemm == "dgrad":
        return (layer.macs, layer.macs * layer.dy_density) if layer.has_dgrad else (0, 0)
    if gemm == "wgrad":
        return layer.macs, layer.macs * min(layer.density, layer.dy_density)
    raise ValueError(f"gemm must be one of forward, dgrad, wgrad, not {gemm!r}")


def ideal_speedup(network, gemms=("forward", "dgrad", "wgrad")):
    """Dense MACs over useful MACs (:func:`gemm_ideal`), MAC-weighted over the layers and the
    ``gemms`` of each: the bound of a core that skips zeros of the streamed operand only."""
    pairs = [gemm_ideal(g, name) for g in layers(network) for name in gemms]
    return sum(m for m, _ in pairs) / sum(u for _, u in pairs)
