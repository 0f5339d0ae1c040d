"""The super-resolution net of shared/seeds/002 (an EDSR-like x4 upscaler) as a PyTorch module:
the twin of `sr_net` in tools/models/gen_models.py, module for node and name for name.

    head.0                      conv 3 -> 64
    body.{0,1}.body.{0,1,2}     residual blocks: conv 64 -> 64, LeakyReLU(0.1), conv 64 -> 64,
                                plus the block's input
    body.2                      conv 64 -> 64, plus head.0's output (the long skip)
    tail.0.{0,1,2,3}            conv 64 -> 128, PixelShuffle(2), conv 32 -> 64, PixelShuffle(2)
    tail.1                      conv 16 -> 3

Every conv is 3x3, stride 1, pad 1, with bias. PixelShuffle(r) is ONNX DepthToSpace(r) in mode
CRD: output channel c, row h*r + i, column w*r + j comes from input channel c*r*r + i*r + j.
The parameter names (`head.0.weight`, ..., `tail.1.bias`) are gen_models' initializer names, so
its weights load with load_state_dict(strict=True); tests/gpu/torchvision_models_test.py does
that and checks this module against gen_models' numpy reference.
"""
import math

import torch
from torch import nn

FEATURES = 64
LEAKY_SLOPE = 0.1
BIAS_STD = 0.01
# He-uniform gain of each conv (weight variance gain / fan_in), as gen_models.py's sr_net passes
# them: 2 / (1 + slope^2) before the LeakyReLU, 0.5 on the convs whose output is added to a skip
# (the sum then grows by half the skip's variance instead of doubling it), 1 elsewhere.
GAINS = {
    "head.0": 1.0,
    "body.0.body.0": 2.0 / (1 + LEAKY_SLOPE ** 2),
    "body.0.body.2": 0.5,
    "body.1.body.0": 2.0 / (1 + LEAKY_SLOPE ** 2),
    "body.1.body.2": 0.5,
    "body.2": 0.5,
    "tail.0.0": 1.0,
    "tail.0.2": 1.0,
    "tail.1": 1.0,
}


def _conv3x3(cin, cout):
    return nn.Conv2d(cin, cout, 3, padding=1, bias=True)


class ResBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.body = nn.Sequential(_conv3x3(channels, channels), nn.LeakyReLU(LEAKY_SLOPE),
                                  _conv3x3(channels, channels))

    def forward(self, x):
        return self.body(x) + x


class SRNet(nn.Module):
    def __init__(self):
        super().__init__()
        f = FEATURES
        self.head = nn.Sequential(_conv3x3(3, f))
        self.body = nn.Sequential(ResBlock(f), ResBlock(f), _conv3x3(f, f))
        self.tail = nn.Sequential(
            nn.Sequential(_conv3x3(f, 2 * f), nn.PixelShuffle(2),
                          _conv3x3(f // 2, f), nn.PixelShuffle(2)),
            _conv3x3(f // 4, 3))

    def forward(self, x):
        x = self.head(x)
        return self.tail(self.body(x) + x)

    def init_weights(self, generator):
        """gen_models' initialisation, drawn from `generator` (a CPU torch.Generator): weights
        uniform with variance GAINS[name] / fan_in, biases N(0, BIAS_STD^2). The same
        distributions as gen_models, not the same values (numpy draws those)."""
        with torch.no_grad():
            for name, m in self.named_modules():
                if not isinstance(m, nn.Conv2d):
                    continue
                fan_in = m.in_channels * m.kernel_size[0] * m.kernel_size[1]
                bound = math.sqrt(3.0 * GAINS[name] / fan_in)
                w = torch.rand(m.weight.shape, generator=generator) * (2 * bound) - bound
                m.weight.copy_(w)
                m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * BIAS_STD)
        return self
