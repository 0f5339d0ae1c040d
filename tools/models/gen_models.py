#!/usr/bin/env python3
"""Generate ONNX CNN models with random weights for tessel's tests and benchmarks.

The architectures follow their published (torchvision) definitions; weights are random
(He init), written directly with onnx.helper -- no torch needed, only onnx and numpy.

    python3 tools/models/gen_models.py --out DIR [--models a,b,...] [--small]
        [--seed N] [--batch N] [--dynamic-batch] [--external-data] [--ref]

Every model: opset 17, ir_version 8, float32, one NCHW input "input", one output "output".

Random weights alone make a deep net a poor test subject: activations drift in scale
through 50 layers, every input gets the same top-1 class, and the net is chaotic (an
input change of 1e-3 moves the logits as much as a different input does), so fp16 or
int8 results could not be checked against fp32. So the generator runs the net once, while
it builds it, on a small calibration batch of N(0,1) "images" with a tiny numpy reference
(the *_ref functions below), and uses what it sees:
  * batch-norm running mean/var are the statistics of the calibration batch (as after
    training), so every BN really normalizes; gamma ~ 1 +- 0.1; beta ~ 1 +- 0.1 (most
    ReLUs active: with beta ~ 0 the random nets are chaotic); the last BN of each
    residual branch has gamma ~ 0.5 (a mild form of torchvision's zero_init_residual);
  * the last classifier layer is centred on the mean calibration feature (bias = -W.mu)
    and scaled so that logits vary across inputs with std ~2 (soft, input-dependent
    softmax, different top-1 for different inputs);
  * resnet18_int8_qdq takes its activation scales from the calibration ranges.
Everything is deterministic given --seed (each model has its own stream, so --models
does not change the weights of the others).
"""

import argparse
import collections
import os
import sys
import time
import zlib

# Single-threaded BLAS: the reference GEMMs are small, and OpenBLAS threads spin-waiting on
# a busy 2-core machine made generation 2-3x slower. (Set before numpy loads.)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

OPSET = 17
IR_VERSION = 8
LOGIT_STD = 2.0             # target std (over inputs) of the centred classifier logits
BN_BETA = 1.0               # mean BN beta (unit-variance pre-activations): ~84% of ReLUs on
RESIDUAL_GAMMA = 0.5        # gamma scale of the last BN of a residual branch
ACT_RANGE_MARGIN = 1.2      # int8: activation range = calibration range * margin
EXTERNAL_LIMIT = 1.5 * 2**30  # weights above this go to <name>.onnx.data (protobuf: 2 GiB)
# Calibration runs the reference in float64: the calibrated float32 parameters then do not
# depend on the BLAS build, CPU or thread count (bit-identical models across machines).
# Models without calibration (sr_net) compute --ref outputs in float32 (half the memory).
CALIB_DTYPE = np.float64


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _out_dim(n, k, s, p0, p1):
    return (n + p0 + p1 - k) // s + 1


# ---------------------------------------------------------------------------------------
# numpy reference of the ops used here (calibration and --ref outputs only)
# ---------------------------------------------------------------------------------------

def conv_ref(x, w, b, stride, pads, group):
    """Conv2d, NCHW/OIHW, pads = (top, left, bottom, right), no dilation. Computes in
    x's dtype."""
    dt = x.dtype
    w = w.astype(dt, copy=False)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    pt, pl, pb, pr = pads
    ho, wo = _out_dim(h, kh, sh, pt, pb), _out_dim(wd, kw, sw, pl, pr)
    if any(pads):
        x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))

    def tap(t, i, j, r0, r1):   # input pixels under kernel tap (i, j) for output rows r0:r1
        return t[:, :, r0 * sh + i:(r1 - 1) * sh + i + 1:sh, j:j + sw * (wo - 1) + 1:sw]

    if group > 1 and cg == 1 and o == c == group:           # depthwise: shift and add
        y = np.zeros((n, o, ho, wo), dt)
        for i in range(kh):
            for j in range(kw):
                y += tap(x, i, j, 0, ho) * w[None, :, 0, i, j, None, None]
    else:                                                   # im2col + GEMM, in row blocks
        y = np.empty((n, o, ho, wo), dt)
        xt = x.transpose(1, 0, 2, 3)                        # C N H W: one GEMM per block
        og = o // group
        rb = max(1, min(ho, (64 << 20) // (8 * cg * kh * kw * n * wo)))  # im2col <= ~64 MB
        for r0 in range(0, ho, rb):
            r1 = min(ho, r0 + rb)
            for g in range(group):
                xg = xt[g * cg:(g + 1) * cg]
                if kh == kw == 1 and sh == sw == 1:
                    col = xg[:, :, r0:r1].reshape(cg, -1)
                else:
                    col = np.empty((cg, kh, kw, n, r1 - r0, wo), dt)
                    for i in range(kh):
                        for j in range(kw):
                            col[:, i, j] = tap(xg, i, j, r0, r1)
                    col = col.reshape(cg * kh * kw, -1)
                out = (w[g * og:(g + 1) * og].reshape(og, -1) @ col).reshape(og, n, r1 - r0, wo)
                y[:, g * og:(g + 1) * og, r0:r1] = out.transpose(1, 0, 2, 3)
    if b is not None:
        y += b[None, :, None, None]
    return y


def pool_ref(x, kind, kernel, stride, pads, count_include_pad=False):
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = stride
    pt, pl, pb, pr = pads
    ho, wo = _out_dim(h, kh, sh, pt, pb), _out_dim(w, kw, sw, pl, pr)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    ones = np.pad(np.ones((h, w), np.float32), ((pt, pb), (pl, pr)))
    acc = np.full((n, c, ho, wo), fill, x.dtype)
    cnt = np.zeros((ho, wo), np.float32)
    for i in range(kh):
        for j in range(kw):
            win = (slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw))
            if kind == "max":
                np.maximum(acc, xp[(Ellipsis,) + win], out=acc)
            else:
                acc += xp[(Ellipsis,) + win]
                cnt += ones[win]
    if kind == "avg":
        acc /= (kh * kw) if count_include_pad else cnt
    return acc


def depth_to_space_ref(x, bs, mode):
    n, c, h, w = x.shape
    if mode == "CRD":
        y = x.reshape(n, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:  # DCR
        y = x.reshape(n, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    return np.ascontiguousarray(y).reshape(n, c // (bs * bs), h * bs, w * bs)


def quantize_ref(x, scale, zp, axis=None):
    """QuantizeLinear: saturate(round_half_even(x / scale) + zp)."""
    info = np.iinfo(zp.dtype)
    if axis is not None:
        shape = [1] * x.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    q = np.rint(x / scale) + zp.astype(np.float32)
    return np.clip(q, info.min, info.max).astype(zp.dtype)


def dequantize_ref(q, scale, zp, axis=None):
    if axis is not None:
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    diff = (q.astype(np.int32) - zp.astype(np.int32)).astype(np.float32)
    return (diff * scale).astype(np.float32)


# ---------------------------------------------------------------------------------------
# graph builder
# ---------------------------------------------------------------------------------------

class GraphBuilder:
    """Builds one ONNX graph. Tensor and node names follow torchvision's module paths
    ("layer1.0.conv1" node -> "layer1.0.conv1.weight" initializer). Shapes are tracked for
    every tensor; with ref_batch > 0, also the values for that many N(0,1) inputs, of
    which the first `calib` (if any) are the calibration batch."""

    def __init__(self, name, seed, input_chw, batch=1, ref_batch=0, calib=0):
        self.name = name
        self.rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        self.batch = batch
        self.model = onnx.ModelProto()     # filled in place: no copies of big tensors
        self.graph = self.model.graph
        self.names = set()
        self.shape = {"input": (batch,) + tuple(input_chw)}   # tensor -> shape (model batch)
        self.val = None                                       # tensor -> reference value
        self.ncal = calib                                       # calibration samples
        self.dtype = CALIB_DTYPE if calib else np.float32       # reference arithmetic
        if ref_batch:
            crng = np.random.default_rng([seed, zlib.crc32(name.encode()), 1])
            x = crng.standard_normal((ref_batch,) + tuple(input_chw), np.float32)
            self.val = {"input": x.astype(self.dtype)}
        self.consts = {}
        self.nbytes = 0                       # bytes of all initializers
        self.qdq_cache = {}

    # -- naming, initializers, nodes ------------------------------------------------------
    def _unique(self, name):
        base, k = name, 1
        while name in self.names:
            name = "%s_%d" % (base, k)
            k += 1
        self.names.add(name)
        return name

    def param(self, name, array):
        name = self._unique(name)
        t = self.graph.initializer.add()
        t.name = name
        t.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        t.dims.extend(array.shape)
        t.raw_data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"),
                                                         copy=False).tobytes()
        self.nbytes += array.nbytes
        self.shape[name] = tuple(array.shape)
        if self.val is not None:
            self.val[name] = array
        return name

    def const(self, name, value, dtype=np.float32):
        """A shared scalar initializer (Clip bounds, Dropout ratio...)."""
        if name not in self.consts:
            self.consts[name] = self.param(name, np.array(value, dtype))
        return self.consts[name]

    def node(self, op, inputs, name, shape, value=None, **attrs):
        name = self._unique(name)
        self.graph.node.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        self.shape[name] = tuple(shape)
        if self.val is not None and value is not None:
            self.val[name] = value() if callable(value) else value
        return name

    def has_val(self, *xs):
        return self.val is not None and all(x in self.val for x in xs)

    def calib_val(self, x):
        """x's values on the calibration batch, or None when not calibrating."""
        return self.val[x][:self.ncal] if self.ncal and self.has_val(x) else None

    def v(self, x):
        return self.val[x]

    def channels(self, x):
        return self.shape[x][1]

    # -- random weights ---------------------------------------------------------------------
    def he(self, shape, fan_in, gain=2.0):
        """Kaiming (He) uniform: U(-a, a) with a = sqrt(3 * gain / fan_in), i.e. variance
        gain / fan_in; gain 2 before a ReLU, 1 before a linear use. (Uniform rather than
        normal only because numpy draws it ~2x faster.)"""
        w = self.rng.random(shape, np.float32)
        w -= np.float32(0.5)
        w *= np.float32(2.0 * np.sqrt(3.0 * gain / fan_in))
        return w

    def noise(self, shape, std=0.01):
        """N(0, std^2) float32 values (biases, BN parameters)."""
        return self.rng.standard_normal(shape, np.float32) * np.float32(std)

    # -- layers ---------------------------------------------------------------------------
    def conv(self, x, name, cout, k, stride=1, pad=0, group=1, bias=False, gain=2.0):
        """Conv2d (no dilation), He-initialised; bias: small random values."""
        cin = self.channels(x)
        kh, kw = _pair(k)
        sh, sw = _pair(stride)
        ph, pw = _pair(pad)
        pads = (ph, pw, ph, pw)
        w = self.he((cout, cin // group, kh, kw), cin // group * kh * kw, gain)
        inputs = [x, self.param(name + ".weight", w)]
        b = None
        if bias:
            b = self.noise((cout,))
            inputs.append(self.param(name + ".bias", b))
        n, _, h, wd = self.shape[x]
        shape = (n, cout, _out_dim(h, kh, sh, ph, ph), _out_dim(wd, kw, sw, pw, pw))
        val = ((lambda: conv_ref(self.v(x), w, b, (sh, sw), pads, group))
               if self.has_val(x) else None)
        return self.node("Conv", inputs, name, shape, val, kernel_shape=[kh, kw],
                         strides=[sh, sw], pads=list(pads), group=group, dilations=[1, 1])

    def bn_params(self, c, xv=None, gamma_scale=1.0):
        """gamma, beta, running mean, running var for c channels. Given xv, the calibration
        values of the BN input, mean/var are its batch statistics (the BN then normalizes,
        as in a trained net); without, mean ~ 0 and var ~ 1."""
        gamma = np.clip(1.0 + self.noise((c,), 0.1), 0.5, 1.5) * np.float32(gamma_scale)
        beta = self.noise((c,), 0.1) + np.float32(BN_BETA)
        if xv is not None:
            mean = xv.mean(axis=(0, 2, 3), dtype=np.float64).astype(np.float32)
            var = xv.var(axis=(0, 2, 3), dtype=np.float64)
            var = np.maximum(var, 1e-2 * var.mean() + 1e-6).astype(np.float32)
        else:
            mean = self.noise((c,), 0.1)
            var = self.rng.uniform(0.8, 1.2, (c,)).astype(np.float32)
        return gamma.astype(np.float32), beta.astype(np.float32), mean, var

    def bn(self, x, name, eps=1e-5, gamma_scale=1.0):
        gamma, beta, mean, var = self.bn_params(
            self.channels(x), self.calib_val(x), gamma_scale)
        inputs = [x] + [self.param(name + s, a) for s, a in
                        ((".weight", gamma), (".bias", beta),
                         (".running_mean", mean), (".running_var", var))]
        shp = (1, -1, 1, 1)
        val = (lambda: ((self.v(x) - mean.reshape(shp)) / np.sqrt(var.reshape(shp) + eps)
                        * gamma.reshape(shp) + beta.reshape(shp))
               ) if self.has_val(x) else None
        return self.node("BatchNormalization", inputs, name, self.shape[x], val, epsilon=eps)

    def relu(self, x, name):
        val = (lambda: np.maximum(self.v(x), 0)) if self.has_val(x) else None
        return self.node("Relu", [x], name, self.shape[x], val)

    def relu6(self, x, name):
        """ReLU6 as Clip(x, 0, 6) with min/max initializers (opset >= 11 form)."""
        lo, hi = self.const("relu6.min", 0.0), self.const("relu6.max", 6.0)
        val = (lambda: np.clip(self.v(x), 0, 6)) if self.has_val(x) else None
        return self.node("Clip", [x, lo, hi], name, self.shape[x], val)

    def leaky_relu(self, x, name, alpha):
        val = (lambda: np.where(self.v(x) > 0, self.v(x), np.float32(alpha) * self.v(x))
               ) if self.has_val(x) else None
        return self.node("LeakyRelu", [x], name, self.shape[x], val, alpha=float(alpha))

    def add(self, a, b, name):
        val = (lambda: self.v(a) + self.v(b)) if self.has_val(a, b) else None
        return self.node("Add", [a, b], name, self.shape[a], val)

    def _pool(self, op, kind, x, name, k, stride, pad, **attrs):
        kh, kw = _pair(k)
        sh, sw = _pair(stride)
        ph, pw = _pair(pad)
        pads = (ph, pw, ph, pw)
        n, c, h, w = self.shape[x]
        shape = (n, c, _out_dim(h, kh, sh, ph, ph), _out_dim(w, kw, sw, pw, pw))
        cip = bool(attrs.get("count_include_pad", 0))
        val = (lambda: pool_ref(self.v(x), kind, (kh, kw), (sh, sw), pads, cip)
               ) if self.has_val(x) else None
        return self.node(op, [x], name, shape, val, kernel_shape=[kh, kw], strides=[sh, sw],
                         pads=list(pads), **attrs)

    def maxpool(self, x, name, k, stride, pad=0):
        return self._pool("MaxPool", "max", x, name, k, stride, pad)

    def avgpool(self, x, name, k, stride, pad=0, count_include_pad=0):
        return self._pool("AveragePool", "avg", x, name, k, stride, pad,
                          count_include_pad=count_include_pad)

    def global_avgpool(self, x, name):
        n, c = self.shape[x][:2]
        val = (lambda: self.v(x).mean(axis=(2, 3), keepdims=True)) if self.has_val(x) else None
        return self.node("GlobalAveragePool", [x], name, (n, c, 1, 1), val)

    def flatten(self, x, name):
        s = self.shape[x]
        val = (lambda: self.v(x).reshape(self.v(x).shape[0], -1)) if self.has_val(x) else None
        return self.node("Flatten", [x], name, (s[0], int(np.prod(s[1:]))), val, axis=1)

    def concat(self, xs, name):
        s = self.shape[xs[0]]
        shape = (s[0], sum(self.shape[x][1] for x in xs)) + s[2:]
        val = ((lambda: np.concatenate([self.v(x) for x in xs], axis=1))
               if self.has_val(*xs) else None)
        return self.node("Concat", xs, name, shape, val, axis=1)

    def dropout(self, x, name, ratio=0.5):
        """Inference Dropout (identity). Since opset 12 `ratio` is an input, not an attribute."""
        r = self.const("dropout.ratio", ratio)
        val = (lambda: self.v(x)) if self.has_val(x) else None
        return self.node("Dropout", [x, r], name, self.shape[x], val)

    def depth_to_space(self, x, name, bs, mode="CRD"):
        n, c, h, w = self.shape[x]
        val = (lambda: depth_to_space_ref(self.v(x), bs, mode)) if self.has_val(x) else None
        return self.node("DepthToSpace", [x], name, (n, c // (bs * bs), h * bs, w * bs), val,
                         blocksize=bs, mode=mode)

    def gemm(self, x, name, nout, gain=2.0, classifier=False):
        """Linear layer as Gemm(transB=1), weight [nout, K] like torch.nn.Linear.
        classifier=True: the final layer, centred and scaled on the calibration batch."""
        k = self.shape[x][1]
        w = self.he((nout, k), k, gain)
        b = self.noise((nout,))
        if classifier and self.calib_val(x) is not None:
            f = self.calib_val(x).astype(np.float64)
            mu = f.mean(axis=0)
            z = (f - mu) @ w.T.astype(np.float64)
            if z.std() > 0:
                w = (w * (LOGIT_STD / z.std())).astype(np.float32)
            b = (-(w.astype(np.float64) @ mu) + self.noise((nout,))).astype(np.float32)
        inputs = [x, self.param(name + ".weight", w), self.param(name + ".bias", b)]
        val = (lambda: self.v(x) @ w.T + b) if self.has_val(x) else None
        return self.node("Gemm", inputs, name, (self.shape[x][0], nout), val, transB=1)

    # -- QDQ --------------------------------------------------------------------------------
    def qdq_activation(self, x):
        """QuantizeLinear -> DequantizeLinear on an activation, per-tensor scale from the
        calibration range. Non-negative tensors (after ReLU) get uint8 with zero point 0;
        signed ones int8 symmetric. One pair per tensor, shared by all its consumers."""
        if x in self.qdq_cache:
            return self.qdq_cache[x]
        xv, cv = self.v(x), self.calib_val(x)
        lo, hi = float(cv.min()), float(cv.max())
        if lo < 0:
            scale = max(abs(lo), abs(hi)) * ACT_RANGE_MARGIN / 127.0
            zp = np.array(0, np.int8)
        else:
            scale = hi * ACT_RANGE_MARGIN / 255.0
            zp = np.array(0, np.uint8)
        scale = np.array(max(scale, 1e-8), np.float32)
        s = self.param(x + "_scale", scale)
        z = self.param(x + "_zero_point", zp)
        q = self.node("QuantizeLinear", [x, s, z], x + "_QuantizeLinear", self.shape[x],
                      lambda: quantize_ref(xv, scale, zp))
        dq = self.node("DequantizeLinear", [q, s, z], x + "_DequantizeLinear", self.shape[x],
                       lambda: dequantize_ref(self.v(q), scale, zp).astype(self.dtype))
        self.qdq_cache[x] = dq
        return dq

    def qdq_weight(self, name, w):
        """int8 initializer + DequantizeLinear, per-output-channel (axis 0), symmetric."""
        absmax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
        scale = np.maximum(absmax / 127.0, 1e-12).astype(np.float32)
        zp = np.zeros(w.shape[0], np.int8)
        q = quantize_ref(w, scale, zp, axis=0)
        qn = self.param(name + "_quantized", q)
        s = self.param(name + "_scale", scale)
        z = self.param(name + "_zero_point", zp)
        return self.node("DequantizeLinear", [qn, s, z], name + "_DequantizeLinear", w.shape,
                         lambda: dequantize_ref(q, scale, zp, axis=0), axis=0)

    def conv_bn_folded_qdq(self, x, name, cout, k, stride=1, pad=0, eps=1e-5,
                           gamma_scale=1.0):
        """Conv + BN folded into the conv (weight * gamma/sigma, bias = beta - mean *
        gamma/sigma), quantized: Q/DQ on the input, int8 per-channel weight + DQ, float bias."""
        xq = self.qdq_activation(x)
        cin = self.channels(x)
        kh, kw = _pair(k)
        w = self.he((cout, cin, kh, kw), cin * kh * kw)
        ph, pw = _pair(pad)
        pre = conv_ref(self.calib_val(xq), w, None, _pair(stride), (ph, pw, ph, pw), 1)
        gamma, beta, mean, var = self.bn_params(cout, pre, gamma_scale)
        f = gamma / np.sqrt(var + eps)
        wf = (w * f[:, None, None, None]).astype(np.float32)
        bf = (beta - mean * f).astype(np.float32)
        wdq = self.qdq_weight(name + ".weight", wf)
        cin, kh, kw = wf.shape[1:]
        n, _, h, wd = self.shape[x]
        sh, sw = _pair(stride)
        shape = (n, cout, _out_dim(h, kh, sh, ph, ph), _out_dim(wd, kw, sw, pw, pw))
        b = self.param(name + ".bias", bf)
        return self.node("Conv", [xq, wdq, b], name, shape,
                         lambda: conv_ref(self.v(xq), self.v(wdq), bf, (sh, sw),
                                          (ph, pw, ph, pw), 1),
                         kernel_shape=[kh, kw], strides=[sh, sw], pads=[ph, pw, ph, pw],
                         group=1, dilations=[1, 1])

    def gemm_qdq(self, x, name, nout):
        """Classifier Gemm with Q/DQ on the activation and an int8 per-channel weight."""
        xq = self.qdq_activation(x)
        k = self.shape[x][1]
        w = self.he((nout, k), k, 1.0)
        f = self.calib_val(xq).astype(np.float64)
        mu = f.mean(axis=0)
        z = (f - mu) @ w.T.astype(np.float64)
        w = (w * (LOGIT_STD / max(z.std(), 1e-12))).astype(np.float32)
        wdq = self.qdq_weight(name + ".weight", w)
        wd = self.v(wdq).astype(np.float64)
        b = (-(wd @ mu) + self.noise((nout,))).astype(np.float32)
        bn = self.param(name + ".bias", b)
        return self.node("Gemm", [xq, wdq, bn], name, (self.shape[x][0], nout),
                         lambda: self.v(xq) @ self.v(wdq).T + b, transB=1)

    # -- model ------------------------------------------------------------------------------
    def finish(self, out, dynamic_batch=False):
        """Rename the last tensor to "output" and build the ModelProto."""
        for nd in self.graph.node:
            nd.output[:] = ["output" if o == out else o for o in nd.output]
            nd.input[:] = ["output" if i == out else i for i in nd.input]
        self.shape["output"] = self.shape[out]
        if self.val is not None and out in self.val:
            self.val["output"] = self.val[out]
        batch = "N" if dynamic_batch else self.batch
        dims = lambda s: [batch] + list(s[1:])   # noqa: E731
        self.graph.name = self.name
        self.graph.input.append(helper.make_tensor_value_info(
            "input", TensorProto.FLOAT, dims(self.shape["input"])))
        self.graph.output.append(helper.make_tensor_value_info(
            "output", TensorProto.FLOAT, dims(self.shape["output"])))
        model = self.model
        model.ir_version = IR_VERSION
        model.opset_import.append(helper.make_opsetid("", OPSET))
        model.producer_name, model.producer_version = "tessel-gen_models", "1"
        model.doc_string = "%s with random weights (tools/models/gen_models.py)" % self.name
        return model


# ---------------------------------------------------------------------------------------
# architectures
# ---------------------------------------------------------------------------------------

def resnet_stem(g):
    """torchvision's ResNet stem: conv 7x7/2, BN, ReLU, max pool 3x3/2."""
    x = g.conv("input", "conv1", 64, 7, 2, 3)
    x = g.relu(g.bn(x, "bn1"), "relu")
    return g.maxpool(x, "maxpool", 3, 2, 1)


def resnet50_blocks():
    """ResNet-50's bottlenecks in order: (name prefix, planes, stride, projection shortcut)."""
    inplanes = 64
    for li, (planes, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2),
                                                   (512, 3, 2)), 1):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            yield "layer%d.%d." % (li, bi), planes, s, bi == 0 and (s != 1 or inplanes != planes * 4)
            inplanes = planes * 4


def resnet50(g):
    """torchvision resnet50 (v1.5: the stride sits on the 3x3 conv of a bottleneck)."""
    x = resnet_stem(g)
    for p, planes, s, project in resnet50_blocks():
        idn = x
        y = g.relu(g.bn(g.conv(x, p + "conv1", planes, 1), p + "bn1"), p + "relu")
        y = g.relu(g.bn(g.conv(y, p + "conv2", planes, 3, s, 1), p + "bn2"), p + "relu")
        y = g.bn(g.conv(y, p + "conv3", planes * 4, 1, gain=1.0), p + "bn3",
                 gamma_scale=RESIDUAL_GAMMA)
        if project:
            idn = g.bn(g.conv(x, p + "downsample.0", planes * 4, 1, s, gain=1.0),
                       p + "downsample.1")
        x = g.relu(g.add(y, idn, p + "add"), p + "relu")
    x = g.flatten(g.global_avgpool(x, "avgpool"), "flatten")
    return g.gemm(x, "fc", 1000, gain=1.0, classifier=True)


def preact_resnet50(g):
    """ResNet-50 v2 (He et al., "Identity Mappings in Deep Residual Networks", 2016): the
    bottlenecks pre-activated (BN, ReLU, 1x1 conv; BN, ReLU, 3x3 conv; BN, ReLU, 1x1 conv) and
    added to the identity unactivated; a projection shortcut reads its block's pre-activated
    input; BN and ReLU before the pool. The first norm of each block reads the residual stream
    (a sum, not a conv), so it cannot fold into a conv: int8 runs it on the integers only where
    its input is quantized too."""
    x = resnet_stem(g)
    for p, planes, s, project in resnet50_blocks():
        pre = g.relu(g.bn(x, p + "bn1"), p + "relu1")
        idn = g.conv(pre, p + "downsample", planes * 4, 1, s, gain=1.0) if project else x
        y = g.conv(pre, p + "conv1", planes, 1)
        y = g.conv(g.relu(g.bn(y, p + "bn2"), p + "relu2"), p + "conv2", planes, 3, s, 1)
        y = g.conv(g.relu(g.bn(y, p + "bn3"), p + "relu3"), p + "conv3", planes * 4, 1,
                   gain=RESIDUAL_GAMMA ** 2)
        x = g.add(y, idn, p + "add")
    x = g.relu(g.bn(x, "bn_final"), "relu_final")
    x = g.flatten(g.global_avgpool(x, "avgpool"), "flatten")
    return g.gemm(x, "fc", 1000, gain=1.0, classifier=True)


def vgg16(g, small=False):
    """torchvision vgg16 (no BN). The adaptive 7x7 avg-pool is omitted (identity at 224).
    Small mode: 32x32 input -> 512x1x1 features, classifier hidden width 256, not 4096."""
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M"]
    x, i = "input", 0
    for v in cfg:
        if v == "M":
            x = g.maxpool(x, "features.%d" % i, 2, 2)
            i += 1
        else:
            x = g.conv(x, "features.%d" % i, v, 3, 1, 1, bias=True)
            x = g.relu(x, "features.%d" % (i + 1))
            i += 2
    x = g.flatten(x, "flatten")
    hidden = 256 if small else 4096
    x = g.relu(g.gemm(x, "classifier.0", hidden), "classifier.1")
    x = g.dropout(x, "classifier.2")
    x = g.relu(g.gemm(x, "classifier.3", hidden), "classifier.4")
    x = g.dropout(x, "classifier.5")
    return g.gemm(x, "classifier.6", 1000, gain=1.0, classifier=True)


def mobilenet_v2(g):
    """torchvision mobilenet_v2 (width 1.0); classifier Dropout omitted."""
    def cbr(x, p, cout, k, stride=1, group=1):
        x = g.conv(x, p + ".0", cout, k, stride, (k - 1) // 2, group)
        return g.relu6(g.bn(x, p + ".1"), p + ".2")

    x = cbr("input", "features.0", 32, 3, 2)
    cin, idx = 32, 1
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            p = "features.%d.conv" % idx
            hidden = cin * t
            y, j = x, 0
            if t != 1:
                y, j = cbr(y, "%s.%d" % (p, 0), hidden, 1), 1
            y = cbr(y, "%s.%d" % (p, j), hidden, 3, stride, group=hidden)
            y = g.conv(y, "%s.%d" % (p, j + 1), c, 1, gain=1.0)
            residual = stride == 1 and cin == c
            y = g.bn(y, "%s.%d" % (p, j + 2), gamma_scale=RESIDUAL_GAMMA if residual else 1.0)
            if residual:
                y = g.add(x, y, "features.%d.add" % idx)
            x, cin, idx = y, c, idx + 1
    x = cbr(x, "features.18", 1280, 1)
    x = g.flatten(g.global_avgpool(x, "avgpool"), "flatten")
    return g.gemm(x, "classifier.1", 1000, gain=1.0, classifier=True)


def inception_v3(g):
    """torchvision inception_v3 (aux_logits=False, transform_input=False). Pool branches
    use AveragePool 3x3/1 pad 1 with count_include_pad=0 (TF-Inception semantics;
    torchvision's F.avg_pool2d default would count the padding)."""
    def basic(x, p, cout, k, stride=1, pad=0):
        x = g.conv(x, p + ".conv", cout, k, stride, pad)
        return g.relu(g.bn(x, p + ".bn", eps=1e-3), p + ".relu")

    def avg_branch(x, p, cout):
        y = g.avgpool(x, p + ".avg_pool", 3, 1, 1, count_include_pad=0)
        return basic(y, p + ".branch_pool", cout, 1)

    def block_a(x, p, pool_features):
        b1 = basic(x, p + ".branch1x1", 64, 1)
        b5 = basic(basic(x, p + ".branch5x5_1", 48, 1), p + ".branch5x5_2", 64, 5, 1, 2)
        b3 = basic(x, p + ".branch3x3dbl_1", 64, 1)
        b3 = basic(b3, p + ".branch3x3dbl_2", 96, 3, 1, 1)
        b3 = basic(b3, p + ".branch3x3dbl_3", 96, 3, 1, 1)
        return g.concat([b1, b5, b3, avg_branch(x, p, pool_features)], p + ".concat")

    def block_b(x, p):
        b3 = basic(x, p + ".branch3x3", 384, 3, 2)
        bd = basic(x, p + ".branch3x3dbl_1", 64, 1)
        bd = basic(bd, p + ".branch3x3dbl_2", 96, 3, 1, 1)
        bd = basic(bd, p + ".branch3x3dbl_3", 96, 3, 2)
        return g.concat([b3, bd, g.maxpool(x, p + ".max_pool", 3, 2)], p + ".concat")

    def block_c(x, p, c7):
        b1 = basic(x, p + ".branch1x1", 192, 1)
        b7 = basic(x, p + ".branch7x7_1", c7, 1)
        b7 = basic(b7, p + ".branch7x7_2", c7, (1, 7), 1, (0, 3))
        b7 = basic(b7, p + ".branch7x7_3", 192, (7, 1), 1, (3, 0))
        bd = basic(x, p + ".branch7x7dbl_1", c7, 1)
        bd = basic(bd, p + ".branch7x7dbl_2", c7, (7, 1), 1, (3, 0))
        bd = basic(bd, p + ".branch7x7dbl_3", c7, (1, 7), 1, (0, 3))
        bd = basic(bd, p + ".branch7x7dbl_4", c7, (7, 1), 1, (3, 0))
        bd = basic(bd, p + ".branch7x7dbl_5", 192, (1, 7), 1, (0, 3))
        return g.concat([b1, b7, bd, avg_branch(x, p, 192)], p + ".concat")

    def block_d(x, p):
        b3 = basic(basic(x, p + ".branch3x3_1", 192, 1), p + ".branch3x3_2", 320, 3, 2)
        b7 = basic(x, p + ".branch7x7x3_1", 192, 1)
        b7 = basic(b7, p + ".branch7x7x3_2", 192, (1, 7), 1, (0, 3))
        b7 = basic(b7, p + ".branch7x7x3_3", 192, (7, 1), 1, (3, 0))
        b7 = basic(b7, p + ".branch7x7x3_4", 192, 3, 2)
        return g.concat([b3, b7, g.maxpool(x, p + ".max_pool", 3, 2)], p + ".concat")

    def block_e(x, p):
        b1 = basic(x, p + ".branch1x1", 320, 1)
        b3 = basic(x, p + ".branch3x3_1", 384, 1)
        b3 = g.concat([basic(b3, p + ".branch3x3_2a", 384, (1, 3), 1, (0, 1)),
                       basic(b3, p + ".branch3x3_2b", 384, (3, 1), 1, (1, 0))],
                      p + ".branch3x3.concat")
        bd = basic(x, p + ".branch3x3dbl_1", 448, 1)
        bd = basic(bd, p + ".branch3x3dbl_2", 384, 3, 1, 1)
        bd = g.concat([basic(bd, p + ".branch3x3dbl_3a", 384, (1, 3), 1, (0, 1)),
                       basic(bd, p + ".branch3x3dbl_3b", 384, (3, 1), 1, (1, 0))],
                      p + ".branch3x3dbl.concat")
        return g.concat([b1, b3, bd, avg_branch(x, p, 192)], p + ".concat")

    x = basic("input", "Conv2d_1a_3x3", 32, 3, 2)
    x = basic(x, "Conv2d_2a_3x3", 32, 3)
    x = basic(x, "Conv2d_2b_3x3", 64, 3, 1, 1)
    x = g.maxpool(x, "maxpool1", 3, 2)
    x = basic(x, "Conv2d_3b_1x1", 80, 1)
    x = basic(x, "Conv2d_4a_3x3", 192, 3)
    x = g.maxpool(x, "maxpool2", 3, 2)
    x = block_a(x, "Mixed_5b", 32)
    x = block_a(x, "Mixed_5c", 64)
    x = block_a(x, "Mixed_5d", 64)
    x = block_b(x, "Mixed_6a")
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = block_c(x, name, c7)
    x = block_d(x, "Mixed_7a")
    x = block_e(x, "Mixed_7b")
    x = block_e(x, "Mixed_7c")
    x = g.flatten(g.global_avgpool(x, "avgpool"), "flatten")
    return g.gemm(x, "fc", 1000, gain=1.0, classifier=True)


def densenet121(g):
    """torchvision densenet121: growth rate 32, bottleneck 4 x 32, dense blocks of 6, 12, 24 and 16
    pre-activation layers (BN, ReLU, 1x1 conv; BN, ReLU, 3x3 conv), each taking the concatenation
    of every earlier feature map of its block; transitions (BN, ReLU, 1x1 conv halving the
    channels, 2x2 average pool) between blocks; BN and ReLU before the classifier."""
    growth = 32
    x = g.conv("input", "features.conv0", 64, 7, 2, 3)
    x = g.relu(g.bn(x, "features.norm0"), "features.relu0")
    x = g.maxpool(x, "features.pool0", 3, 2, 1)
    channels = 64
    for bi, layers in enumerate((6, 12, 24, 16), 1):
        feats = [x]
        for li in range(1, layers + 1):
            p = "features.denseblock%d.denselayer%d." % (bi, li)
            y = g.concat(feats, p + "cat") if len(feats) > 1 else feats[0]
            y = g.conv(g.relu(g.bn(y, p + "norm1"), p + "relu1"), p + "conv1", 4 * growth, 1)
            y = g.conv(g.relu(g.bn(y, p + "norm2"), p + "relu2"), p + "conv2", growth, 3, 1, 1)
            feats.append(y)
        x = g.concat(feats, "features.denseblock%d.cat" % bi)
        channels += layers * growth
        if bi < 4:
            p = "features.transition%d." % bi
            x = g.conv(g.relu(g.bn(x, p + "norm"), p + "relu"), p + "conv", channels // 2, 1)
            x = g.avgpool(x, p + "pool", 2, 2)
            channels //= 2
    x = g.relu(g.bn(x, "features.norm5"), "features.relu5")
    x = g.flatten(g.global_avgpool(x, "avgpool"), "flatten")
    return g.gemm(x, "classifier", 1000, gain=1.0, classifier=True)


def sr_net(g):
    """EDSR-like x4 super-resolution net of shared/seeds/002 (TVM issue, kice): head conv,
    2 residual blocks (conv, LeakyRelu 0.1, conv, +), body conv + head skip, tail with two
    conv + DepthToSpace(2, CRD) stages and a final conv to RGB. All convs 3x3 pad 1 + bias."""
    head = g.conv("input", "head.0", 64, 3, 1, 1, bias=True, gain=1.0)
    x = head
    for i in range(2):
        p = "body.%d.body." % i
        y = g.conv(x, p + "0", 64, 3, 1, 1, bias=True, gain=2.0 / (1 + 0.1 ** 2))
        y = g.leaky_relu(y, p + "1", 0.1)
        y = g.conv(y, p + "2", 64, 3, 1, 1, bias=True, gain=0.5)
        x = g.add(y, x, "body.%d.add" % i)
    x = g.conv(x, "body.2", 64, 3, 1, 1, bias=True, gain=0.5)
    x = g.add(x, head, "body.add")
    x = g.conv(x, "tail.0.0", 128, 3, 1, 1, bias=True, gain=1.0)
    x = g.depth_to_space(x, "tail.0.1", 2, "CRD")
    x = g.conv(x, "tail.0.2", 64, 3, 1, 1, bias=True, gain=1.0)
    x = g.depth_to_space(x, "tail.0.3", 2, "CRD")
    return g.conv(x, "tail.1", 3, 3, 1, 1, bias=True, gain=1.0)


def resnet18_int8_qdq(g):
    """torchvision resnet18 with BN folded into the convs, in QDQ form: every conv (and the
    fc) sees QuantizeLinear->DequantizeLinear on its activation input (input image: int8
    symmetric; post-ReLU tensors: uint8, zero point 0) and an int8 per-channel (axis 0)
    symmetric weight followed by DequantizeLinear; biases stay float. Residual Adds,
    ReLUs and pools run in float."""
    x = g.conv_bn_folded_qdq("input", "conv1", 64, 7, 2, 3)
    x = g.maxpool(g.relu(x, "relu"), "maxpool", 3, 2, 1)
    inplanes = 64
    for li, (planes, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), 1):
        for bi in range(2):
            p = "layer%d.%d." % (li, bi)
            s = stride if bi == 0 else 1
            idn = x
            y = g.conv_bn_folded_qdq(x, p + "conv1", planes, 3, s, 1)
            y = g.relu(y, p + "relu")
            y = g.conv_bn_folded_qdq(y, p + "conv2", planes, 3, 1, 1,
                                     gamma_scale=RESIDUAL_GAMMA)
            if bi == 0 and (s != 1 or inplanes != planes):
                idn = g.conv_bn_folded_qdq(x, p + "downsample.0", planes, 1, s)
            x = g.relu(g.add(y, idn, p + "add"), p + "relu")
            inplanes = planes
    x = g.flatten(g.global_avgpool(x, "avgpool"), "flatten")
    return g.gemm_qdq(x, "fc", 1000)


# name -> (builder, full input CHW, small input CHW, calibration batch full, small).
# Calibration batches are as small as keeps the BN statistics and the classifier centring
# from over-fitting (too few samples: logits of fresh inputs come out larger and peakier);
# 16 where the small variant's last feature map is 1x1. 0: nothing to calibrate (sr_net
# has no BN and no classifier).
MODELS = {
    "resnet50": (resnet50, (3, 224, 224), (3, 64, 64), 4, 8),
    "preact_resnet50": (preact_resnet50, (3, 224, 224), (3, 64, 64), 4, 8),
    "vgg16": (vgg16, (3, 224, 224), (3, 32, 32), 4, 8),
    "mobilenet_v2": (mobilenet_v2, (3, 224, 224), (3, 64, 64), 4, 8),
    # 75 is the smallest input for which every inception spatial dim stays >= 1 (final 1x1)
    "inception_v3": (inception_v3, (3, 299, 299), (3, 75, 75), 4, 16),
    "densenet121": (densenet121, (3, 224, 224), (3, 32, 32), 4, 8),
    "sr_net": (sr_net, (3, 720, 1280), (3, 16, 24), 0, 0),
    "resnet18_int8_qdq": (resnet18_int8_qdq, (3, 224, 224), (3, 32, 32), 4, 16),
}


Built = collections.namedtuple("Built", "model nbytes ref_input ref_output")


def build(name, small=False, seed=0, batch=1, dynamic_batch=False, ref=False):
    """Build one model: a Built(model, nbytes of weights, ref_input, ref_output). The
    references are the first `batch` calibration samples and the numpy reference output
    (None when nothing was computed: sr_net without ref=True)."""
    fn, full_chw, small_chw, calib_full, calib_small = MODELS[name]
    chw = small_chw if small else full_chw
    calib = calib_small if small else calib_full
    ref_batch = max(calib, batch if ref else 0)
    g = GraphBuilder(name, seed, chw, batch, ref_batch, calib)
    out = fn(g, small) if fn is vgg16 else fn(g)
    model = g.finish(out, dynamic_batch)
    ref_in = ref_out = None
    if g.val is not None and "output" in g.val:
        ref_in = g.val["input"][:batch].astype(np.float32)
        ref_out = g.val["output"][:batch].astype(np.float32)
    return Built(model, g.nbytes, ref_in, ref_out)


def count_params(model):
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer)


def save(model, path, external):
    data = os.path.basename(path) + ".data"
    data_path = os.path.join(os.path.dirname(path), data)
    if os.path.exists(data_path):          # onnx appends to an existing data file
        os.remove(data_path)
    if external:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data, size_threshold=1024)
    else:
        onnx.save_model(model, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", default="all",
                    help="comma-separated subset of: " + ",".join(MODELS))
    ap.add_argument("--small", action="store_true", help="small input sizes (fast CPU tests)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dynamic-batch", action="store_true",
                    help='write the batch dimension as the symbol "N"')
    ap.add_argument("--external-data", action="store_true",
                    help="weights in DIR/<name>.onnx.data (automatic above 1.5 GiB)")
    ap.add_argument("--ref", action="store_true",
                    help="also write <name>.input.npy / <name>.output.npy from the numpy "
                         "reference (float32; int8 model: may differ by rounding ties)")
    args = ap.parse_args(argv)

    names = list(MODELS) if args.models == "all" else [m.strip() for m in args.models.split(",")]
    bad = [m for m in names if m not in MODELS]
    if bad:
        ap.error("unknown model(s): %s (known: %s)" % (", ".join(bad), ", ".join(MODELS)))
    if args.batch < 1:
        ap.error("--batch must be >= 1")
    os.makedirs(args.out, exist_ok=True)

    t_all = time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        model, nbytes, ref_in, ref_out = build(name, args.small, args.seed, args.batch,
                                               args.dynamic_batch, args.ref)
        t_build = time.perf_counter() - t0
        external = args.external_data or nbytes > EXTERNAL_LIMIT
        path = os.path.join(args.out, name + ".onnx")
        nodes, params = len(model.graph.node), count_params(model)
        dims = lambda vi: "x".join(d.dim_param or str(d.dim_value)   # noqa: E731
                                   for d in vi.type.tensor_type.shape.dim)
        in_shape, out_shape = dims(model.graph.input[0]), dims(model.graph.output[0])
        save(model, path, external)
        if args.ref and ref_in is not None:
            np.save(os.path.join(args.out, name + ".input.npy"), ref_in)
            np.save(os.path.join(args.out, name + ".output.npy"), ref_out)
        print("%-18s %-40s input=%-14s output=%-14s nodes=%-4d params=%-11d %s%.2fs "
              "(build %.2fs)" % (name, path, in_shape, out_shape, nodes, params,
                                 "external-data " if external else "",
                                 time.perf_counter() - t0, t_build), flush=True)
    print("generated %d model(s) in %.2fs" % (len(names), time.perf_counter() - t_all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
