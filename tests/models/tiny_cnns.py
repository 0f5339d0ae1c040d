"""Tiny float CNNs built with onnx.helper, for the int8 tests: small enough (3x32x32 inputs, a
few channels) that the CPU reference runs them in milliseconds.

  tiny_classifier: conv+relu, maxpool, a residual block (conv+relu, conv, add, relu), global
                   average pool, flatten, gemm -> (N, 10) logits
  tiny_matmul:     conv+relu, averagepool, reshape, matmul + add (a dense layer written as
                   MatMul) -> (N, 8)
  tiny_preact:     a dense block with pre-activation norms (DenseNet's layer: batch norm and
                   ReLU before each conv, the norm after a concat left unfolded), 13 stem
                   channels, growth 8 -> (N, 10) logits
  tiny_mbconv:     EfficientNet's MBConv: SiLU written as Sigmoid and Mul (as torch exports
                   it), a 1x1 expansion, depthwise 3x3, squeeze-excite (mean, 1x1, SiLU, 1x1,
                   Sigmoid, Mul), 1x1 projection -> (N, 10) logits
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def param(self, name, shape, scale):
        a = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(a, name))
        return name

    def node(self, op, inputs, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x, name, cin, cout, k=3, stride=1):
        fan_in = cin * k * k
        w = self.param(name + ".weight", (cout, cin, k, k), np.sqrt(2.0 / fan_in))
        b = self.param(name + ".bias", (cout,), 0.1)
        return self.node("Conv", [x, w, b], name, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[k // 2] * 4)

    def norm(self, x, name, c):
        """BatchNormalization with random statistics (a pre-activation norm: no conv before it
        to fold into)."""
        scale = self.param(name + ".scale", (c,), 0.3)
        self.inits[-1] = numpy_helper.from_array(numpy_helper.to_array(self.inits[-1]) + 1.0, scale)
        bias = self.param(name + ".bias", (c,), 0.2)
        mean = self.param(name + ".mean", (c,), 0.2)
        var = self.param(name + ".var", (c,), 0.2)
        self.inits[-1] = numpy_helper.from_array(np.abs(numpy_helper.to_array(self.inits[-1])) + 0.5, var)
        return self.node("BatchNormalization", [x, scale, bias, mean, var], name)

    def classifier(self, x, c, weight_scale, name, batch, opset):
        """The head of a classifier over x (c channels): global average pool, flatten, a
        10-way dense layer -> the model `name` of input (batch, 3, 32, 32), output logits."""
        x = self.node("GlobalAveragePool", [x], "gap")
        x = self.node("Flatten", [x], "flatten", axis=1)
        w = self.param("fc.weight", (10, c), weight_scale)
        bias = self.param("fc.bias", (10,), 0.1)
        self.node("Gemm", [x, w, bias], "logits", transB=1)
        return self.model(name,
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 32, 32])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
                          opset)

    def model(self, name, inputs, outputs, opset):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8 if opset <= 17 else 9
        onnx.checker.check_model(m)
        return m


def tiny_classifier(batch=1, opset=17, seed=0):
    b = _Builder(seed)
    x = b.node("Relu", [b.conv("input", "conv1", 3, 8)], "relu1")
    x = b.node("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])  # 8x16x16
    y = b.node("Relu", [b.conv(x, "block.conv1", 8, 8)], "block.relu1")
    y = b.conv(y, "block.conv2", 8, 8)
    x = b.node("Relu", [b.node("Add", [x, y], "block.add")], "block.relu2")
    x = b.node("Relu", [b.conv(x, "conv2", 8, 16, stride=2)], "relu2")  # 16x8x8
    return b.classifier(x, 16, 0.5, "tiny_classifier", batch, opset)


def tiny_matmul(batch=1, opset=17, seed=1):
    b = _Builder(seed)
    x = b.node("Relu", [b.conv("input", "conv1", 3, 4, stride=2)], "relu1")  # 4x16x16
    x = b.node("AveragePool", [x], "pool1", kernel_shape=[4, 4], strides=[4, 4])  # 4x4x4
    b.inits.append(numpy_helper.from_array(np.array([batch, 64], np.int64), "flat_shape"))
    x = b.node("Reshape", [x, "flat_shape"], "flat")
    w = b.param("dense.weight", (64, 8), 0.2)
    bias = b.param("dense.bias", (8,), 0.1)
    x = b.node("MatMul", [x, w], "dense.matmul")
    b.node("Add", [x, bias], "out")
    return b.model("tiny_matmul",
                   [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 32, 32])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, 8])], opset)


def tiny_preact(batch=1, opset=17, seed=2):
    b = _Builder(seed)
    x = b.node("Relu", [b.conv("input", "stem", 3, 13)], "stem.relu")
    x = b.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])  # 13x16x16
    features, c = [x], 13
    for i in range(3):
        cat = features[0] if i == 0 else b.node("Concat", features, f"cat{i}", axis=1)
        y = b.node("Relu", [b.norm(cat, f"layer{i}.norm1", c)], f"layer{i}.relu1")
        y = b.conv(y, f"layer{i}.conv1", c, 16, k=1)
        y = b.node("Relu", [b.norm(y, f"layer{i}.norm2", 16)], f"layer{i}.relu2")
        features.append(b.conv(y, f"layer{i}.conv2", 16, 8))
        c += 8
    x = b.node("Concat", features, "cat", axis=1)
    x = b.node("Relu", [b.norm(x, "norm", c)], "relu")
    return b.classifier(x, c, 0.3, "tiny_preact", batch, opset)


def tiny_mbconv(batch=1, opset=17, seed=4):
    b = _Builder(seed)

    def silu(x, name):
        return b.node("Mul", [x, b.node("Sigmoid", [x], name + ".sigmoid")], name)

    x = silu(b.conv("input", "stem", 3, 16, stride=2), "stem.silu")  # 16x16x16
    y = silu(b.conv(x, "expand", 16, 64, k=1), "expand.silu")
    w = b.param("dw.weight", (64, 1, 3, 3), 0.5)
    bias = b.param("dw.bias", (64,), 0.1)
    y = silu(b.node("Conv", [y, w, bias], "dw", kernel_shape=[3, 3], pads=[1] * 4, group=64), "dw.silu")
    if opset >= 18:  # axes became an input
        b.inits.append(numpy_helper.from_array(np.array([2, 3], np.int64), "se.axes"))
        s = b.node("ReduceMean", [y, "se.axes"], "se.mean", keepdims=1)
    else:
        s = b.node("ReduceMean", [y], "se.mean", axes=[2, 3], keepdims=1)
    s = silu(b.conv(s, "se.reduce", 64, 8, k=1), "se.silu")
    s = b.node("Sigmoid", [b.conv(s, "se.expand", 8, 64, k=1)], "se.gate")
    y = b.node("Mul", [y, s], "se.mul")
    x = b.node("Add", [x, b.conv(y, "project", 64, 16, k=1)], "residual")
    return b.classifier(x, 16, 0.3, "tiny_mbconv", batch, opset)


def tiny_shuffle(batch=1, opset=17, seed=5):
    """A ShuffleNet-v2 unit: a stem, a 1x1 conv, the channel shuffle (Reshape to 4 groups,
    Transpose, Reshape back, in NCHW), a 3x3 conv, each conv with its ReLU."""
    b = _Builder(seed)
    x = b.node("Relu", [b.conv("input", "stem", 3, 32, stride=2)], "stem.relu")  # 32x16x16
    x = b.node("Relu", [b.conv(x, "pw", 32, 32, k=1)], "pw.relu")
    b.inits.append(numpy_helper.from_array(np.array([batch, 4, 8, 16, 16], np.int64), "shuffle.groups"))
    b.inits.append(numpy_helper.from_array(np.array([batch, 32, 16, 16], np.int64), "shuffle.channels"))
    x = b.node("Reshape", [x, "shuffle.groups"], "shuffle.reshape")
    x = b.node("Transpose", [x], "shuffle.transpose", perm=[0, 2, 1, 3, 4])
    x = b.node("Reshape", [x, "shuffle.channels"], "shuffle.reshape_back")
    x = b.node("Relu", [b.conv(x, "conv", 32, 32)], "conv.relu")
    return b.classifier(x, 32, 0.3, "tiny_shuffle", batch, opset)


MODELS = {"tiny_classifier": tiny_classifier, "tiny_matmul": tiny_matmul, "tiny_preact": tiny_preact,
          "tiny_mbconv": tiny_mbconv, "tiny_shuffle": tiny_shuffle}
