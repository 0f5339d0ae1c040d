#!/usr/bin/env python3
"""CNN building blocks beyond the model zoo's, end to end on the CPU: small ONNX models built
with onnx.helper whose ops are those the zoo lacks (a style-transfer generator's reflection pads,
instance norms and tanh; a classic AlexNet's LRN; YOLOv4's Mish; attention-style channel pools;
a segmentation head's ArgMax; squeeze-excite with other gates; decomposed HardSwish, CBAM's
spatial attention and a one-channel mask head; a uint8 image input cast and normalised in the
graph; the comparisons, Where, Expand and Tile of exported post-processing). For each model:

  * `tessel run --device cpu` against ONNX Runtime (the independent oracle) on the same input;
  * the GPU pass pipeline (`tessel opt`, fp32 and fp16) run on the CPU against the model itself:
    the NHWC forms, fusions and fp32 islands keep the numbers;
  * `tessel explain --target sm_90a`: every node has a GPU kernel (0 unsupported), and the
    activations that follow a conv are fused into it;
  * `tessel compile --target sm_90a` (no GPU needed): every kernel of the engine, contraction or
    op kernel, is generated and compiled by NVRTC for the H100.

    python3 tests/models/check_more_ops.py --tessel build/src/cli/tessel

Exit code 0 when every check passes; one line per model.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# passes::gpu_pipeline(options), spelled once in tests/passes/gpu_pipeline_models.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "passes"))
from gpu_pipeline_models import PIPELINES  # noqa: E402

TOLERANCE = {"ort": 1e-4, "fp32": 1e-4, "fp16": 2e-2}


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def param(self, shape, scale=1.0, dtype=np.float32, values=None):
        name = "p%d" % len(self.inits)
        a = np.array(values, dtype) if values is not None else (
            self.rng.standard_normal(shape) * scale).astype(dtype)
        self.inits.append(numpy_helper.from_array(a, name))
        return name

    def op(self, op, inputs, **attrs):
        self.count += 1
        name = "%s_%d" % (op.lower(), self.count)
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1):
        pad = k // 2 if pad is None else pad
        w = self.param((cout, cin // group, k, k), np.sqrt(2.0 / (cin // group * k * k)))
        b = self.param((cout,), 0.1)
        return self.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group)

    def model(self, name, input_shape, out, out_type=TensorProto.FLOAT, opset=18, out_shape=None,
              in_type=TensorProto.FLOAT):
        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info("input", in_type, input_shape)],
            [helper.make_tensor_value_info(out, out_type, out_shape)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8 if opset <= 17 else 9 if opset <= 20 else 10
        # The output's shape, as ONNX's own shape inference gives it (the checker wants one).
        inferred = onnx.shape_inference.infer_shapes(m)
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            if vi.name == out and vi.type.tensor_type.HasField("shape"):
                m.graph.output[0].type.CopyFrom(vi.type)
        onnx.checker.check_model(m)
        return m


def style_net():
    """A fast-neural-style generator: reflection pads, 9x9 and 3x3 convs with instance norms,
    a residual block, a strided conv and a nearest upsample, tanh out."""
    b = Builder(1)
    pads = lambda p: b.param(None, values=[0, 0, p, p, 0, 0, p, p], dtype=np.int64)
    inorm = lambda x, c: b.op("InstanceNormalization",
                              [x, b.param(None, values=1 + 0.1 * b.rng.standard_normal(c)),
                               b.param((c,), 0.1)], epsilon=1e-5)
    x = b.op("Pad", ["input", pads(4)], mode="reflect")
    x = b.op("Relu", [inorm(b.conv(x, 3, 16, 9, pad=0), 16)])
    x = b.op("Relu", [inorm(b.conv(x, 16, 32, 3, stride=2), 32)])
    y = b.op("Pad", [x, pads(1)], mode="reflect")
    y = b.op("Relu", [inorm(b.conv(y, 32, 32, 3, pad=0), 32)])
    y = b.op("Pad", [y, pads(1)], mode="edge")
    y = inorm(b.conv(y, 32, 32, 3, pad=0), 32)
    x = b.op("Add", [x, y])
    x = b.op("Resize", [x, "", b.param(None, values=[1, 1, 2, 2])], mode="nearest")
    x = b.op("Pad", [x, pads(4)], mode="reflect")
    x = b.op("Tanh", [b.conv(x, 32, 3, 9, pad=0)])
    return b.model("style_net", [1, 3, 32, 32], x)


def classic_net():
    """A classic AlexNet/GoogLeNet stem with LRN, then Mish and Elu convs (YOLOv4), a
    CBAM-style channel attention from both global pools and a HardSigmoid gate, a log-softmax
    classifier."""
    b = Builder(2)
    x = b.op("Relu", [b.conv("input", 3, 16, 5, stride=2)])
    x = b.op("LRN", [x], size=5, alpha=1e-2, beta=0.75, bias=2.0)
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    x = b.op("Mish", [b.conv(x, 16, 32, 3)])
    x = b.op("Elu", [b.conv(x, 32, 32, 3)], alpha=0.5)
    avg = b.op("GlobalAveragePool", [x])
    mx = b.op("GlobalMaxPool", [x])
    gate = b.op("HardSigmoid", [b.conv(b.op("Sum", [avg, mx]), 32, 32, 1)], alpha=0.2, beta=0.5)
    x = b.op("Mul", [x, gate])
    x = b.op("ReduceMax", [x, b.param(None, values=[2, 3], dtype=np.int64)], keepdims=0)
    w = b.param((10, 32), 0.3)
    x = b.op("Gemm", [x, w, b.param((10,), 0.1)], transB=1)
    return b.model("classic_net", [2, 3, 40, 40], b.op("LogSoftmax", [x], axis=1))


def gates_net():
    """Gates as other exporters write them: YOLOv5's x * hardtanh(x + 3, 0, 6) / 6 and PyTorch's
    opset-13 x * HardSigmoid(x) (both HardSwish), relu6 as Min(Relu(.), 6); CBAM's spatial
    attention (channel mean and max, a 7x7 conv to one channel, sigmoid); a one-channel mask
    head stored as the NCHW output."""
    b = Builder(6)
    three, six = b.param(None, values=3.0), b.param(None, values=6.0)
    c = b.conv("input", 3, 16, 3, stride=2)
    clip = b.op("Clip", [b.op("Add", [c, three]), b.param(None, values=0.0), six])
    x = b.op("Div", [b.op("Mul", [c, clip]), six])
    c = b.conv(x, 16, 16, 3)
    x = b.op("Mul", [c, b.op("HardSigmoid", [c], alpha=1.0 / 6.0, beta=0.5)])
    c = b.conv(x, 16, 16, 3)
    relu6 = b.op("Min", [b.op("Relu", [b.op("Add", [three, c])]), six])
    x = b.op("Mul", [b.op("Mul", [relu6, b.param(None, values=1.0 / 6.0)]), c])
    axis = b.param(None, values=[1], dtype=np.int64)
    pooled = b.op("Concat", [b.op("ReduceMean", [x, axis]), b.op("ReduceMax", [x, axis])], axis=1)
    x = b.op("Mul", [x, b.op("Sigmoid", [b.conv(pooled, 2, 1, 7)])])
    return b.model("gates_net", [2, 3, 34, 30], b.op("Sigmoid", [b.conv(x, 16, 1, 3)]))


def uint8_net():
    """A deployment model's front: a uint8 NHWC image, cast, transposed and normalised in the
    graph (mean, then 1/std), into a strided stem and a classifier."""
    b = Builder(7)
    x = b.op("Transpose", [b.op("Cast", ["input"], to=TensorProto.FLOAT)], perm=[0, 3, 1, 2])
    x = b.op("Sub", [x, b.param(None, values=np.array([123.7, 116.3, 103.5]).reshape(1, 3, 1, 1))])
    x = b.op("Mul", [x, b.param(None, values=np.array([0.0171, 0.0175, 0.0174]).reshape(1, 3, 1, 1))])
    x = b.op("Relu", [b.conv(x, 3, 16, 3, stride=2)])
    x = b.op("GlobalAveragePool", [b.op("Relu", [b.conv(x, 16, 32, 3)])])
    x = b.op("Flatten", [x])
    return b.model("uint8_net", [2, 24, 20, 3], b.op("Gemm", [x, b.param((5, 32), 0.3)], transB=1),
                   in_type=TensorProto.UINT8)


def seg_head():
    """A segmentation head: a space-to-depth stem, convs with Selu and Softsign, a sum of three
    branches, a masked (Where/Greater) logit map, its class map by ArgMax."""
    b = Builder(3)
    x = b.op("SpaceToDepth", ["input"], blocksize=2)
    x = b.op("Selu", [b.conv(x, 12, 16, 3)])
    y = b.op("Softsign", [b.conv(x, 16, 16, 3)])
    z = b.op("Celu", [b.conv(x, 16, 16, 1)], alpha=0.7)
    x = b.op("Sum", [x, y, z])
    logits = b.conv(x, 16, 5, 1)
    mask = b.op("Greater", [logits, b.param(None, values=-0.5)])
    logits = b.op("Where", [mask, logits, b.param(None, values=-0.5)])
    return b.model("seg_head", [1, 3, 16, 24], b.op("ArgMax", [logits], axis=1, keepdims=0),
                   out_type=TensorProto.INT64)


def post_net():
    """Exported post-processing around a conv: Expand of a per-channel bias map, Tile, a
    ReduceSum/ReduceL2 normalisation, Softplus, Shrink and ThresholdedRelu."""
    b = Builder(4)
    x = b.conv("input", 3, 8, 3)
    bias = b.op("Expand", [b.param((8, 1, 1), 0.5), b.param(None, values=[1, 8, 12, 12], dtype=np.int64)])
    x = b.op("Softplus", [b.op("Add", [x, bias])])
    norm = b.op("ReduceL2", [x, b.param(None, values=[1], dtype=np.int64)], keepdims=1)
    x = b.op("Div", [x, b.op("Add", [norm, b.param(None, values=1e-3)])])
    x = b.op("Shrink", [x], lambd=0.05, bias=0.01)
    x = b.op("ThresholdedRelu", [b.conv(x, 8, 8, 3)], alpha=0.1)
    s = b.op("ReduceSum", [x, b.param(None, values=[2, 3], dtype=np.int64)], keepdims=1)
    return b.model("post_net", [1, 3, 12, 12], b.op("Tile", [s, b.param(None, values=[1, 1, 2, 3], dtype=np.int64)]))


def attention_net():
    """A BoTNet-style block: 1x1 convs to queries, keys and values, their flattened pixels
    multiplied (MatMul of two activations), a softmax over keys, the values weighted, back to
    an image and a residual conv; CumSum and GatherElements of exported post-processing."""
    b = Builder(5)
    x = b.op("Relu", [b.conv("input", 3, 16, 3, stride=2)])                       # [1,16,8,8]
    flat = lambda t: b.op("Reshape", [t, b.param(None, values=[1, 16, 64], dtype=np.int64)])
    q = b.op("Transpose", [flat(b.conv(x, 16, 16, 1))], perm=[0, 2, 1])            # [1,64,16]
    k = flat(b.conv(x, 16, 16, 1))                                                # [1,16,64]
    v = b.op("Transpose", [flat(b.conv(x, 16, 16, 1))], perm=[0, 2, 1])            # [1,64,16]
    att = b.op("Softmax", [b.op("Mul", [b.op("MatMul", [q, k]), b.param(None, values=0.25)])], axis=-1)
    y = b.op("Transpose", [b.op("MatMul", [att, v])], perm=[0, 2, 1])              # [1,16,64]
    y = b.op("Reshape", [y, b.param(None, values=[1, 16, 8, 8], dtype=np.int64)])
    x = b.op("Relu", [b.op("Add", [x, b.conv(y, 16, 16, 3)])])
    x = b.op("CumSum", [x, b.param(None, values=2, dtype=np.int64)])
    idx = b.param(None, values=b.rng.integers(-8, 8, (1, 16, 8, 3)), dtype=np.int64)
    return b.model("attention_net", [1, 3, 16, 16], b.op("GatherElements", [x, idx], axis=3))


def gn_unet():
    """A diffusion-UNet-style level at opset 21: GroupNormalization (per-channel affine) + SiLU
    residual blocks, a strided conv down, a nearest upsample and a skip Concat."""
    b = Builder(6)
    gn = lambda x, c, g: b.op("GroupNormalization", [x, b.param(None, values=1 + 0.1 * b.rng.standard_normal(c)),
                                                    b.param((c,), 0.1)], num_groups=g, epsilon=1e-5)
    silu = lambda x: b.op("Mul", [x, b.op("Sigmoid", [x])])
    x = b.conv("input", 3, 32, 3)
    h = b.conv(silu(gn(x, 32, 8)), 32, 32, 3)
    h = b.conv(silu(gn(h, 32, 8)), 32, 32, 3)
    skip = b.op("Add", [x, h])
    d = b.conv(skip, 32, 64, 3, stride=2)
    d = b.conv(silu(gn(d, 64, 16)), 64, 64, 3)
    u = b.op("Resize", [d, "", b.param(None, values=[1, 1, 2, 2])], mode="nearest")
    x = b.op("Concat", [u, skip], axis=1)
    x = b.conv(silu(gn(x, 96, 8)), 96, 3, 3)
    # (onnx's shape inference leaves GroupNormalization's output unshaped: given here.)
    return b.model("gn_unet", [1, 3, 16, 16], x, opset=21, out_shape=[1, 3, 16, 16])


def se_net():
    """EfficientNet-style squeeze-excite with 6 squeezed channels (no multiple of 8): the
    channel-alignment Pad before the expand conv folds into the squeeze conv (fuse)."""
    b = Builder(7)
    x = b.op("Relu", [b.conv("input", 3, 32, 3)])
    s = b.op("GlobalAveragePool", [x])
    s = b.conv(s, 32, 6, 1)
    s = b.op("Mul", [s, b.op("Sigmoid", [s])])
    g = b.op("Sigmoid", [b.conv(s, 6, 32, 1)])
    x = b.op("Mul", [x, g])
    return b.model("se_net", [2, 3, 8, 8], b.conv(x, 32, 16, 1))


def tcn_1d():
    """A 1-D CNN (audio / time series): Conv1d + BatchNorm + ReLU, MaxPool1d, a residual block,
    global average pool, a classifier. lift-1d makes it a 2-D chain: no node without a GPU
    kernel, BN folded, ReLU and the residual add in the conv epilogues."""
    b = Builder(8)

    def conv1(x, cin, cout, k):
        w, bias = b.param((cout, cin, k), np.sqrt(2.0 / (cin * k))), b.param((cout,), 0.1)
        return b.op("Conv", [x, w, bias], kernel_shape=[k], pads=[k // 2, k // 2])

    def bn(x, c):
        return b.op("BatchNormalization", [x, b.param(None, values=1 + 0.1 * b.rng.standard_normal(c)),
                                           b.param((c,), 0.1), b.param((c,), 0.1),
                                           b.param(None, values=b.rng.uniform(0.5, 1.5, c))])
    x = b.op("Relu", [bn(conv1("input", 4, 16, 5), 16)])
    x = b.op("MaxPool", [x], kernel_shape=[2], strides=[2])
    y = b.op("Relu", [bn(conv1(x, 16, 16, 3), 16)])
    x = b.op("Relu", [b.op("Add", [x, conv1(y, 16, 16, 3)])])
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    return b.model("tcn_1d", [2, 4, 64], b.op("Gemm", [x, b.param((5, 16), 0.3), b.param((5,), 0.1)], transB=1))


MODELS = [style_net, classic_net, seg_head, post_net, attention_net, gn_unet, se_net, tcn_1d,
          gates_net, uint8_net]


def rel_l2(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = np.linalg.norm(b)
    return np.linalg.norm(a - b) / (d if d > 0 else 1.0)


def tessel_run(tessel, model, x_path, out_dir):
    subprocess.run([tessel, "run", model, "--input", "input=" + x_path, "--output-dir", out_dir],
                   check=True, stdout=subprocess.DEVNULL)
    (name,) = [f for f in os.listdir(out_dir) if f.endswith(".npy")]
    return np.load(os.path.join(out_dir, name))


def check(tessel, d, m):
    name = m.graph.name
    path = os.path.join(d, name + ".onnx")
    onnx.save(m, path)
    shape = [dim.dim_value for dim in m.graph.input[0].type.tensor_type.shape.dim]
    if m.graph.input[0].type.tensor_type.elem_type == TensorProto.UINT8:
        x = np.random.default_rng(7).integers(0, 256, shape).astype(np.uint8)
    else:
        x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    x_path = os.path.join(d, name + ".input.npy")
    np.save(x_path, x)
    problems, notes = [], []
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    got = tessel_run(tessel, path, x_path, os.path.join(d, name + ".cpu"))
    exact = want.dtype.kind in "iu"
    err = float(np.mean(got != want)) if exact else rel_l2(got, want)
    notes.append("vs onnxruntime %.1e" % err)
    if got.shape != want.shape or err > (0.0 if exact else TOLERANCE["ort"]):
        problems.append("CPU run differs from onnxruntime (%s)" % notes[-1])
    for precision in ("fp32", "fp16"):
        tir = os.path.join(d, "%s.%s.tir" % (name, precision))
        subprocess.run([tessel, "opt", PIPELINES[precision], path, "-o", tir], check=True)
        out = tessel_run(tessel, tir, x_path, os.path.join(d, "%s.%s" % (name, precision)))
        # A class map in fp16 may flip where two logits are within fp16's rounding.
        err = float(np.mean(out != want)) if exact else rel_l2(out, want)
        bar = (0.0 if precision == "fp32" else 0.02) if exact else TOLERANCE[precision]
        notes.append("%s passes %.1e" % (precision, err))
        if out.shape != want.shape or err > bar:
            problems.append("the %s pipeline changes the output (%s)" % (precision, notes[-1]))
    explain = subprocess.run([tessel, "explain", path, "--target", "sm_90a"], check=True,
                             capture_output=True, text=True).stdout
    unsupported = re.search(r"(\d+) unsupported", explain)
    if not unsupported or unsupported.group(1) != "0":
        problems.append("nodes without a GPU kernel:\n" + explain)
    if name == "tcn_1d" and re.search(r"^\S+\s+(Conv|Relu|Add|BatchNormalization)\s", explain, re.M):
        problems.append("the 1-D net left an ONNX Conv, Relu, Add or BN standalone:\n" + explain)
    if name == "gates_net" and re.search(r"^\S+\s+(Clip|Min|Div|Add|HardSwish|HardSigmoid)\s", explain, re.M):
        problems.append("a decomposed HardSwish was not fused into its conv:\n" + explain)
    if name == "se_net" and re.search(r"^\S+align_channels\s+Pad", explain, re.M):
        problems.append("the squeeze's channel-alignment Pad was not folded into its conv:\n" + explain)
    compiled = subprocess.run([tessel, "compile", path, "--target", "sm_90a", "-o", os.path.join(d, name + ".tsl")],
                              capture_output=True, text=True, env=dict(os.environ, TESSEL_CACHE_DIR=os.path.join(d, "cache")))
    if compiled.returncode != 0:
        problems.append("compile for sm_90a failed: " + compiled.stderr.strip())
    # In these models these follow a conv or a normalization alone: each must be its epilogue
    # step (Sigmoid: the SiLU after a GroupNorm).
    for act in ("Tanh", "Mish", "Elu", "HardSigmoid", "Relu", "Sigmoid"):
        if re.search(r"^\S+\s+%s\s" % act, explain, re.M):
            problems.append("%s after a conv was not fused into its epilogue" % act)
    return problems, ", ".join(notes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", required=True, help="the tessel executable")
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as d:
        for make in MODELS:
            m = make()
            problems, notes = check(args.tessel, d, m)
            print("%-12s %s %s" % (m.graph.name, "ok  " if not problems else "FAIL", notes))
            failures += ["%s: %s" % (m.graph.name, p) for p in problems]
    for f in failures:
        print(f, file=sys.stderr)
    print("%d of %d models passed" % (len(MODELS) - len({f.split(":")[0] for f in failures}), len(MODELS)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
