#!/usr/bin/env python3
"""Random small CNNs, differential-tested on the CPU: shapes and block orders no hand-written
model has, so that a pass's assumption about its neighbours shows up as a wrong number.

Each seed builds one ONNX model (onnx.helper) from a random input (batch 1 or 2, 1 to 16
channels, odd or even sizes 5 to 33) and 3 to 7 random blocks, each one of:
  conv (1x1 to 5x5, stride 1 or 2, dilation 1 or 2, any padding, group 1, 2, 4 or depthwise,
       with or without bias), optionally followed by a BatchNormalization and an activation
       (Relu, LeakyRelu, Clip 0..6, Sigmoid, Tanh, HardSwish, HardSigmoid, Elu, a per-channel
       PRelu, SiLU as x * sigmoid(x));
  a residual add of a 3x3 conv branch; a concat of two conv branches; a squeeze-excite gate;
  a max or average pool (2x2 or 3x3, stride 1 or 2, padded or not); a nearest 2x upsample;
  a DepthToSpace (DCR or CRD) after a conv to 4x the channels; a ConvTranspose of stride 2;
  the blocks of exported graphs (RandomNet.more): a channel shuffle, a split with one branch
  convolved, a ConvNeXt block (7x7 depthwise, channels-last LayerNorm, MatMuls and an erf
  GELU between Transposes, a layer scale), a GroupNorm as Reshape + InstanceNormalization +
  Reshape with SiLU, reflect / edge / zero pads, a channel softmax, a strided crop;
and ends in the tensor itself or a global average pool, flatten and Gemm.

For each model (the checks of check_more_ops.py): `tessel run --device cpu` against ONNX
Runtime; the GPU pass pipeline (`tessel opt --pipeline`, fp32 and fp16) run on the CPU against
ONNX Runtime; and `tessel explain --target sm_90a`, where every node has a GPU kernel. With
--qdq, each model is first quantized by onnxruntime's quantizer (check_qdq says what is
compared).

    python3 tests/models/random_cnns.py --tessel build/src/cli/tessel [--seeds 0:12] [--qdq]

Exit code 0 when every model passes; one line per model, and what failed.
"""
import argparse
import logging
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_more_ops import TOLERANCE, Builder, rel_l2, tessel_run  # noqa: E402
from gpu_pipeline_models import PIPELINES  # noqa: E402  (on the path check_more_ops set)


class RandomNet:
    """The blocks, on one Builder, tracking the current tensor's channels and size."""

    def __init__(self, seed):
        self.b = Builder(1000 + seed)
        self.r = self.b.rng
        self.batch = int(self.r.choice([1, 2]))
        self.c = int(self.r.choice([1, 3, 4, 8, 16]))
        self.h, self.w = (int(v) for v in self.r.integers(5, 34, size=2))
        self.input_shape = [self.batch, self.c, self.h, self.w]
        self.x = "input"
        self.log = []

    def choice(self, options):
        return options[int(self.r.integers(len(options)))]

    def conv(self, x, cin, cout, k, stride=1, dilation=1, pad=None, group=1, bias=True, h=None, w=None):
        """A conv of `x` ([cin, h, w]); returns it with its output size."""
        h, w = (self.h, self.w) if h is None else (h, w)
        pad = (k // 2) * dilation if pad is None else pad
        oh = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
        ow = (w + 2 * pad - dilation * (k - 1) - 1) // stride + 1
        wt = self.b.param((cout, cin // group, k, k), np.sqrt(2.0 / (cin // group * k * k)))
        ins = [x, wt] + ([self.b.param((cout,), 0.1)] if bias else [])
        y = self.b.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], dilations=[dilation] * 2,
                      pads=[pad] * 4, group=group)
        return y, oh, ow

    def activation(self, x, c):
        kind = self.choice(["Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid",
                            "Elu", "PRelu", "SiLU", None])
        self.log[-1] += "+" + str(kind)
        if kind is None:
            return x
        if kind == "LeakyRelu":
            return self.b.op(kind, [x], alpha=0.1)
        if kind == "Clip":
            return self.b.op(kind, [x, self.b.param(None, values=0.0), self.b.param(None, values=6.0)])
        if kind == "PRelu":
            return self.b.op(kind, [x, self.b.param((c, 1, 1), 0.2)])
        if kind == "SiLU":
            return self.b.op("Mul", [x, self.b.op("Sigmoid", [x])])
        return self.b.op(kind, [x])

    def bn(self, x, c):
        r = self.r
        return self.b.op("BatchNormalization",
                         [x, self.b.param(None, values=1 + 0.1 * r.standard_normal(c)),
                          self.b.param((c,), 0.1), self.b.param((c,), 0.1),
                          self.b.param(None, values=0.5 + r.random(c))], epsilon=1e-5)

    def block(self):
        kind = self.choice(["conv", "conv", "conv", "residual", "concat", "se", "pool", "upsample",
                            "depth_to_space", "conv_transpose", "shuffle", "split", "convnext",
                            "group_norm", "pad", "softmax", "crop"])
        c, h, w = self.c, self.h, self.w
        small = min(h, w)
        if kind == "conv":
            k = int(self.choice([1, 3, 3, 5]))
            stride = int(self.choice([1, 1, 2])) if small >= 4 else 1
            dilation = int(self.choice([1, 1, 2])) if k > 1 and small >= 2 * k else 1
            groups = [g for g in (1, 1, 2, 4, c) if c % g == 0]
            group = int(self.choice(groups))
            cout = c if group == c and group > 1 else int(self.choice([g * group for g in (1, 2, 4, 8)]))
            pad = int(self.r.integers(0, k // 2 * dilation + 1)) if self.r.random() < 0.3 else None
            self.log.append("conv%dx%d/s%d/d%d/g%d:%d->%d" % (k, k, stride, dilation, group, c, cout))
            oh = (h + 2 * (k // 2 * dilation if pad is None else pad) - dilation * (k - 1) - 1) // stride + 1
            if oh < 1 or (w + 2 * (k // 2 * dilation if pad is None else pad) - dilation * (k - 1) - 1) // stride + 1 < 1:
                self.log[-1] += "(skipped)"
                return
            y, h, w = self.conv(self.x, c, cout, k, stride, dilation, pad, group, bias=self.r.random() < 0.7)
            if self.r.random() < 0.5:
                y = self.bn(y, cout)
                self.log[-1] += "+bn"
            self.x, self.c, self.h, self.w = self.activation(y, cout), cout, h, w
        elif kind == "residual":
            self.log.append("residual:%d" % c)
            y, _, _ = self.conv(self.x, c, c, 3)
            y = self.activation(y, c)
            self.x = self.b.op("Add", [self.x, y])
        elif kind == "concat":
            c1, c2 = int(self.choice([4, 8, 16])), int(self.choice([4, 8, 24]))
            self.log.append("concat:%d+%d" % (c1, c2))
            y1, _, _ = self.conv(self.x, c, c1, 1)
            y2, _, _ = self.conv(self.x, c, c2, 3)
            self.x = self.b.op("Concat", [self.b.op("Relu", [y1]), y2], axis=1)
            self.c = c1 + c2
        elif kind == "se":
            self.log.append("se:%d" % c)
            s = self.b.op("GlobalAveragePool", [self.x])
            s, _, _ = self.conv(s, c, max(1, c // 2), 1, h=1, w=1)
            s, _, _ = self.conv(self.b.op("Relu", [s]), max(1, c // 2), c, 1, h=1, w=1)
            self.x = self.b.op("Mul", [self.x, self.b.op("Sigmoid", [s])])
        elif kind == "pool":
            if small < 3:
                return
            op = self.choice(["MaxPool", "AveragePool"])
            k = int(self.choice([2, 3]))
            stride = int(self.choice([1, 2]))
            pad = int(self.choice([0, k // 2])) if k == 3 else 0
            self.log.append("%s%d/s%d/p%d" % (op, k, stride, pad))
            attrs = dict(kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4)
            if op == "AveragePool":
                attrs["count_include_pad"] = int(self.choice([0, 1]))
            self.x = self.b.op(op, [self.x], **attrs)
            self.h = (h + 2 * pad - k) // stride + 1
            self.w = (w + 2 * pad - k) // stride + 1
        elif kind == "upsample":
            if max(h, w) > 24:
                return
            self.log.append("upsample2x")
            self.x = self.b.op("Resize", [self.x, "", self.b.param(None, values=[1.0, 1.0, 2.0, 2.0])],
                               mode="nearest")
            self.h, self.w = 2 * h, 2 * w
        elif kind == "depth_to_space":
            if max(h, w) > 20:
                return
            mode = self.choice(["DCR", "CRD"])
            cout = int(self.choice([2, 4, 8]))
            self.log.append("depth_to_space:%s:%d" % (mode, cout))
            y, _, _ = self.conv(self.x, c, 4 * cout, 3)
            self.x = self.b.op("DepthToSpace", [y], blocksize=2, mode=mode)
            self.c, self.h, self.w = cout, 2 * h, 2 * w
        elif kind == "conv_transpose":
            if max(h, w) > 20:
                return
            cout = int(self.choice([4, 8]))
            k = int(self.choice([2, 3, 4]))
            pad = (k - 1) // 2 if k > 2 else 0
            out_pad = 1 if k == 3 else 0
            self.log.append("conv_transpose%d:%d->%d" % (k, c, cout))
            wt = self.b.param((c, cout, k, k), np.sqrt(1.0 / (c * k * k)))
            self.x = self.b.op("ConvTranspose", [self.x, wt, self.b.param((cout,), 0.1)], kernel_shape=[k, k],
                               strides=[2, 2], pads=[pad] * 4, output_padding=[out_pad] * 2)
            self.c = cout
            self.h = (h - 1) * 2 - 2 * pad + k + out_pad
            self.w = (w - 1) * 2 - 2 * pad + k + out_pad
        else:
            self.more(kind)

    def more(self, kind):
        """The blocks of exported graphs: channel shuffle, split branches, a ConvNeXt block
        (channels-last LayerNorm and MatMuls between Transposes), a GroupNorm as Reshape +
        InstanceNormalization + Reshape, reflect / edge pads, a channel softmax, a crop."""
        b, c, h, w = self.b, self.c, self.h, self.w
        i64 = lambda v: b.param(None, values=v, dtype=np.int64)
        if kind == "shuffle" and c % 2 == 0:
            self.log.append("shuffle:%d" % c)
            x = b.op("Reshape", [self.x, i64([0, 2, c // 2, h, w])])
            x = b.op("Transpose", [x], perm=[0, 2, 1, 3, 4])
            self.x = b.op("Reshape", [x, i64([0, c, h, w])])
        elif kind == "split" and c % 2 == 0:
            self.log.append("split:%d" % c)
            s = c // 2
            x1 = b.op("Split", [self.x, i64([s, s])], axis=1)
            b.nodes[-1].output[:] = [x1 + "_a", x1 + "_b"]  # two outputs
            y, _, _ = self.conv(x1 + "_b", s, s, 3)
            self.x = b.op("Concat", [x1 + "_a", b.op("Relu", [y])], axis=1)
        elif kind == "convnext" and c >= 4:  # a LayerNorm over 2 values is +-1, all rounding
            self.log.append("convnext:%d" % c)
            y, _, _ = self.conv(self.x, c, c, 7, group=c)
            y = b.op("Transpose", [y], perm=[0, 2, 3, 1])
            y = b.op("LayerNormalization", [y, b.param(None, values=1 + 0.1 * self.r.standard_normal(c)),
                                            b.param((c,), 0.1)], axis=-1, epsilon=1e-6)
            y = b.op("Add", [b.op("MatMul", [y, b.param((c, 4 * c), np.sqrt(1.0 / c))]), b.param((4 * c,), 0.1)])
            y = b.op("Mul", [b.op("Mul", [y, b.param(None, values=0.5)]),
                             b.op("Add", [b.op("Erf", [b.op("Div", [y, b.param(None, values=1.4142135)])]),
                                          b.param(None, values=1.0)])])
            y = b.op("Add", [b.op("MatMul", [y, b.param((4 * c, c), np.sqrt(0.5 / c))]), b.param((c,), 0.1)])
            y = b.op("Mul", [y, b.param((c,), 0.5)])
            self.x = b.op("Add", [self.x, b.op("Transpose", [y], perm=[0, 3, 1, 2])])
        elif kind == "group_norm" and c % 2 == 0:
            g = int(self.choice([g for g in (1, 2, 4, 8) if c % g == 0]))
            self.log.append("group_norm:%d/%d" % (c, g))
            x = b.op("Reshape", [self.x, i64([0, g, -1])])
            x = b.op("InstanceNormalization", [x, b.param(None, values=np.ones(g)), b.param(None, values=np.zeros(g))],
                     epsilon=1e-5)
            x = b.op("Reshape", [x, i64([0, c, h, w])])
            x = b.op("Add", [b.op("Mul", [x, b.param((c, 1, 1), 0.5)]), b.param((c, 1, 1), 0.1)])
            self.x = b.op("Mul", [x, b.op("Sigmoid", [x])])
        elif kind == "pad" and min(h, w) > 2:
            mode = self.choice(["reflect", "edge", "constant"])
            p = [int(v) for v in self.r.integers(0, 3, size=4)]
            self.log.append("pad:%s:%s" % (mode, p))
            self.x = b.op("Pad", [self.x, i64([0, 0, p[0], p[1], 0, 0, p[2], p[3]])], mode=mode)
            self.h, self.w = h + p[0] + p[2], w + p[1] + p[3]
        elif kind == "softmax":
            self.log.append("softmax")
            self.x = b.op("Softmax", [self.x], axis=1)
        elif kind == "crop" and min(h, w) > 4:
            self.log.append("crop")
            self.x = b.op("Slice", [self.x, i64([1, 1]), i64([h - 1, w - 2]), i64([2, 3])])
            self.h, self.w = h - 2, w - 3

    def build(self, name):
        for _ in range(int(self.r.integers(3, 8))):
            self.block()
        if self.x == "input":  # every block drawn was skipped: one conv, so the graph has a node
            self.log.append("conv3x3:%d->8" % self.c)
            self.x, self.h, self.w = self.conv(self.x, self.c, 8, 3)
            self.c = 8
        if self.r.random() < 0.4:
            self.log.append("head")
            x = self.b.op("Flatten", [self.b.op("GlobalAveragePool", [self.x])], axis=1)
            self.x = self.b.op("Gemm", [x, self.b.param((10, self.c), 0.3), self.b.param((10,), 0.1)], transB=1)
        return self.b.model(name, self.input_shape, self.x)


def check(tessel, d, seed):
    net = RandomNet(seed)
    name = "random_%d" % seed
    m = net.build(name)
    path = os.path.join(d, name + ".onnx")
    onnx.save(m, path)
    x = np.random.default_rng(seed).standard_normal(net.input_shape).astype(np.float32)
    x_path = os.path.join(d, name + ".input.npy")
    np.save(x_path, x)
    problems = []
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    runs = [("cpu", path, TOLERANCE["ort"])]
    for precision in ("fp32", "fp16"):
        tir = os.path.join(d, "%s.%s.tir" % (name, precision))
        p = subprocess.run([tessel, "opt", PIPELINES[precision], path, "-o", tir], capture_output=True, text=True)
        if p.returncode != 0:
            problems.append("%s pipeline failed: %s" % (precision, p.stderr.strip()))
            continue
        runs.append((precision, tir, TOLERANCE[precision]))
    for what, model, bar in runs:
        try:
            got = tessel_run(tessel, model, x_path, os.path.join(d, "%s.%s" % (name, what)))
        except subprocess.CalledProcessError as e:
            problems.append("%s run failed (%s)" % (what, e))
            continue
        err = rel_l2(got, want) if got.shape == want.shape else float("inf")
        if not err <= bar:
            problems.append("%s differs from onnxruntime: rel L2 %.2e > %g" % (what, err, bar))
    p = subprocess.run([tessel, "explain", path, "--target", "sm_90a"], capture_output=True, text=True)
    unsupported = re.search(r"(\d+) unsupported", p.stdout)
    if p.returncode != 0 or not unsupported or unsupported.group(1) != "0":
        problems.append("explain: %s" % (p.stderr.strip() or [l for l in p.stdout.splitlines() if "unsupported" in l]))
    shape = "x".join(map(str, net.input_shape))
    print("%-10s %-12s %s: %s" % (name, shape, " ".join(net.log), "; ".join(problems) or "ok"))
    return problems


def check_qdq(tessel, d, seed):
    """The model quantized by onnxruntime's quantizer (QDQ, symmetric int8 activations,
    per-channel int8 weights, calibrated on four random inputs): `tessel run` against
    onnxruntime's run of the same QDQ model (these nets' reductions are short enough for its
    s8s8 CPU kernels not to saturate). They agree exactly but where a value sits on a
    quantization tie: tessel's reference averages a pool in double, onnxruntime in float, and
    the last bit decides the tie (found on seed 112: 9 of 360 pooled values one step apart),
    which the layers after it spread; rel L2 2e-2 allows that. Then through the fp16 GPU pipeline against tessel's own QDQ run (0.1: fp16
    floats around the int8 convs move values across rounding boundaries, which later Q/DQ
    steps amplify), with every node on a GPU kernel in `explain`."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice

    net = RandomNet(seed)
    name = "random_qdq_%d" % seed
    fp32 = os.path.join(d, name + ".fp32.onnx")
    onnx.save(net.build(name), fp32)
    rng = np.random.default_rng(seed)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = [{"input": rng.standard_normal(net.input_shape).astype(np.float32)} for _ in range(4)]

        def get_next(self):
            return self.data.pop(0) if self.data else None

    path = os.path.join(d, name + ".onnx")
    quantize_static(fp32, path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": True})
    x = rng.standard_normal(net.input_shape).astype(np.float32)
    x_path = os.path.join(d, name + ".input.npy")
    np.save(x_path, x)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    problems = []
    try:
        got = tessel_run(tessel, path, x_path, os.path.join(d, name + ".cpu"))
        err = rel_l2(got, want) if got.shape == want.shape else float("inf")
        if not err <= 2e-2:
            problems.append("the QDQ model's CPU run differs from onnxruntime's: rel L2 %.2e" % err)
        tir = os.path.join(d, name + ".fp16.tir")
        p = subprocess.run([tessel, "opt", PIPELINES["fp16"], path, "-o", tir], capture_output=True, text=True)
        if p.returncode != 0:
            problems.append("fp16 pipeline failed: %s" % p.stderr.strip())
        else:
            out = tessel_run(tessel, tir, x_path, os.path.join(d, name + ".fp16"))
            err = rel_l2(out, got) if out.shape == got.shape else float("inf")
            if not err <= 0.1:
                problems.append("the fp16 pipeline moves the QDQ output by %.2e (rel L2)" % err)
    except subprocess.CalledProcessError as e:
        problems.append("run failed (%s)" % e)
    p = subprocess.run([tessel, "explain", path, "--target", "sm_90a"], capture_output=True, text=True)
    unsupported = re.search(r"(\d+) unsupported", p.stdout)
    if p.returncode != 0 or not unsupported or unsupported.group(1) != "0":
        problems.append("explain: %s" % (p.stderr.strip() or [l for l in p.stdout.splitlines() if "not supported" in l]))
    int8 = len(re.findall(r"int8", p.stdout))
    print("%-14s %s: %s (%d int8 mentions)" % (name, " ".join(net.log), "; ".join(problems) or "ok", int8))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--seeds", default="0:12", help="FIRST:END, the seeds to build")
    ap.add_argument("--qdq", action="store_true", help="quantize each model with onnxruntime's quantizer first")
    args = ap.parse_args()
    first, end = (int(v) for v in args.seeds.split(":"))
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        for seed in range(first, end):
            failed += bool((check_qdq if args.qdq else check)(args.tessel, d, seed))
    print("%d of %d random models failed" % (failed, end - first))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
