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

How golden/estimate.py uses the table (spartan bench estimate, docs/results.md)
    Per-layer and whole-network speedup of the adaptive core over dense, from the cycle model
    on unstructured random masks of these densities, for the forward GEMM (M, K, N) and the
    weight-gradient GEMM dW = A^T . dY, which reuses the same sparse activations (shape
    (K, M, N) with the sparse operand transposed); the profiling-overhead comparison. The
    bound they are reported against is :func:`ideal_speedup` (1 / density, MAC-weighted).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConvGemm", "NETWORKS", "PAPER", "layers", "ideal_speedup", "total_macs"]


@dataclass(frozen=True)
class ConvGemm:
    name: str
    m: int          # output positions
    k: int          # C_in * k_h * k_w
    n: int          # C_out
    density: float  # nonzero fraction of the im2col input
    band: str       # where the density comes from

    @property
    def macs(self):
        return self.m * self.k * self.n


FIRST = "first conv: the image, dense"
ALEX = "AlexNet conv2-5: 50-65 % sparse, midpoint 57.5 %"
VGG = "VGG-16 stage {}: 35-60 % by stage, linear, {} %"
RES_IN = "ResNet-18 inside a block: 40-50 % sparse, midpoint 45 %"
RES_OUT = "ResNet-18 block output: 30-40 % sparse, midpoint 35 %"


def _vgg(stage):
    sparsity = (35.0, 41.25, 47.5, 53.75, 60.0)[stage - 1]
    return 1 - sparsity / 100, VGG.format(stage, f"{sparsity:g}")


def _table(rows):
    return tuple(ConvGemm(name, m, k, n, density, band) for name, m, k, n, density, band in rows)


# name, M, K, N, density, band. Output sizes: AlexNet 55 -> (pool) 27 -> (pool) 13;
# VGG-16 224, 112, 56, 28, 14; ResNet-18 112 -> (pool) 56, 28, 14, 7.
_ALEXNET = _table([
    ("conv1", 55 * 55, 3 * 11 * 11, 64, 1.0, FIRST),
    ("conv2", 27 * 27, 64 * 5 * 5, 192, 0.425, ALEX),
    ("conv3", 13 * 13, 192 * 3 * 3, 384, 0.425, ALEX),
    ("conv4", 13 * 13, 384 * 3 * 3, 256, 0.425, ALEX),
    ("conv5", 13 * 13, 256 * 3 * 3, 256, 0.425, ALEX),
])

_VGG16 = _table([
    ("conv1_1", 224 * 224, 3 * 9, 64, 1.0, FIRST),
    ("conv1_2", 224 * 224, 64 * 9, 64, *_vgg(1)),
    ("conv2_1", 112 * 112, 64 * 9, 128, *_vgg(2)),
    ("conv2_2", 112 * 112, 128 * 9, 128, *_vgg(2)),
    ("conv3_1", 56 * 56, 128 * 9, 256, *_vgg(3)),
    ("conv3_2", 56 * 56, 256 * 9, 256, *_vgg(3)),
    ("conv3_3", 56 * 56, 256 * 9, 256, *_vgg(3)),
    ("conv4_1", 28 * 28, 256 * 9, 512, *_vgg(4)),
    ("conv4_2", 28 * 28, 512 * 9, 512, *_vgg(4)),
    ("conv4_3", 28 * 28, 512 * 9, 512, *_vgg(4)),
    ("conv5_1", 14 * 14, 512 * 9, 512, *_vgg(5)),
    ("conv5_2", 14 * 14, 512 * 9, 512, *_vgg(5)),
    ("conv5_3", 14 * 14, 512 * 9, 512, *_vgg(5)),
])

_RESNET18 = _table([
    ("conv1", 112 * 112, 3 * 7 * 7, 64, 1.0, FIRST),
    ("layer1.0.conv1", 56 * 56, 64 * 9, 64, 0.65, RES_OUT),
    ("layer1.0.conv2", 56 * 56, 64 * 9, 64, 0.55, RES_IN),
    ("layer1.1.conv1", 56 * 56, 64 * 9, 64, 0.65, RES_OUT),
    ("layer1.1.conv2", 56 * 56, 64 * 9, 64, 0.55, RES_IN),
    ("layer2.0.conv1", 28 * 28, 64 * 9, 128, 0.65, RES_OUT),
    ("layer2.0.conv2", 28 * 28, 128 * 9, 128, 0.55, RES_IN),
    ("layer2.0.downsample", 28 * 28, 64, 128, 0.65, RES_OUT),
    ("layer2.1.conv1", 28 * 28, 128 * 9, 128, 0.65, RES_OUT),
    ("layer2.1.conv2", 28 * 28, 128 * 9, 128, 0.55, RES_IN),
    ("layer3.0.conv1", 14 * 14, 128 * 9, 256, 0.65, RES_OUT),
    ("layer3.0.conv2", 14 * 14, 256 * 9, 256, 0.55, RES_IN),
    ("layer3.0.downsample", 14 * 14, 128, 256, 0.65, RES_OUT),
    ("layer3.1.conv1", 14 * 14, 256 * 9, 256, 0.65, RES_OUT),
    ("layer3.1.conv2", 14 * 14, 256 * 9, 256, 0.55, RES_IN),
    ("layer4.0.conv1", 7 * 7, 256 * 9, 512, 0.65, RES_OUT),
    ("layer4.0.conv2", 7 * 7, 512 * 9, 512, 0.55, RES_IN),
    ("layer4.0.downsample", 7 * 7, 256, 512, 0.65, RES_OUT),
    ("layer4.1.conv1", 7 * 7, 512 * 9, 512, 0.65, RES_OUT),
    ("layer4.1.conv2", 7 * 7, 512 * 9, 512, 0.55, RES_IN),
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


def ideal_speedup(network):
    """Dense MACs over nonzero-input MACs: the 1/density bound, MAC-weighted over the layers."""
    table = layers(network)
    return sum(g.macs for g in table) / sum(g.macs * g.density for g in table)
