#!/usr/bin/env python3
"""QDQ models as onnxruntime's own quantizer writes them, run by tessel's CPU reference and by
onnxruntime on the same input.

Tiny CNNs (tests/models/tiny_cnns.py: conv+relu+pool+residual add+gemm, and a MatMul dense
layer) are quantized with onnxruntime.quantization.quantize_static in QDQ format: per-tensor
and per-channel weights, QInt8 and QUInt8 activations, symmetric and asymmetric, at opsets 10,
11, 13, 17 and 21, and onnxruntime's com.microsoft Q/DQ ops. QuantizeLinear-21's output_dtype
(no zero point) is written by hand. What onnxruntime runs but tessel does not (a blocked
DequantizeLinear, 16-bit activations, 4-bit weights) must be refused with one line. The
per-tensor QUInt8 asymmetric models also run through the GPU's fp16 pipeline (on the CPU
reference), whose contractions must fuse their activations' Q/DQ pairs. A dense block with
pre-activation norms (tiny_preact: 13 stem channels, concats, norms after them) runs both ways,
and its symmetric int8 form through the fp16 pipeline must run each norm after a concat on the
depthwise kernel reading the integers, and hold its concats in one int8 buffer. An MBConv
(tiny_mbconv: SiLUs and a squeeze-excite gate) must fuse each SiLU whose gate the quantizer
quantized into its conv's epilogue. A ShuffleNet unit (tiny_shuffle) must move its channel
shuffle's int8 features and run the conv after it on int8.

onnxruntime runs with graph optimisations disabled, so that it evaluates the Q/DQ steps as
written. Every output of these models is requantized (a Q/DQ pair at the end), so tessel must
agree within one quantization step of the output: a last-bit difference in fp32 accumulation
order may move a value across a rounding boundary somewhere inside.

Exit code 0 when every model matches; prints one line per model and a count line.
"""
import argparse
import atexit
import logging
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_cnns  # noqa: E402

logging.getLogger().setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice


class Reader(CalibrationDataReader):
    def __init__(self, n=4, seed=3):
        rng = np.random.default_rng(seed)
        self.data = [{"input": rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)}
                     for _ in range(n)]

    def get_next(self):
        return self.data.pop(0) if self.data else None


def variants():
    """(name, model builder, opset, quantize_static keyword arguments)."""
    for model in ("tiny_classifier", "tiny_matmul"):
        for pc in (False, True):
            for act in (QuantType.QInt8, QuantType.QUInt8):
                for sym in (False, True):
                    name = f"{model}_op17_{'pc' if pc else 'pt'}_{act.name}_{'sym' if sym else 'asym'}"
                    yield name, model, 17, dict(per_channel=pc, activation_type=act,
                                                extra_options={"ActivationSymmetric": sym})
    # A dense block with pre-activation norms (fold-qdq's ChannelShiftOfIntegers), TensorRT's
    # symmetric int8 and onnxruntime's default QUInt8.
    yield ("tiny_preact_op17_pc_QInt8_sym", "tiny_preact", 17,
           dict(per_channel=True, activation_type=QuantType.QInt8, extra_options={"ActivationSymmetric": True}))
    yield ("tiny_preact_op17_pt_QUInt8_asym", "tiny_preact", 17,
           dict(per_channel=False, activation_type=QuantType.QUInt8, extra_options={"ActivationSymmetric": False}))
    # EfficientNet's MBConv: SiLUs and a squeeze-excite gate, each Sigmoid's output quantized.
    yield ("tiny_mbconv_op17_pc_QInt8_sym", "tiny_mbconv", 17,
           dict(per_channel=True, activation_type=QuantType.QInt8, extra_options={"ActivationSymmetric": True}))
    # ShuffleNet's channel shuffle between two convs, each move requantized to the same grid.
    yield ("tiny_shuffle_op17_pc_QInt8_sym", "tiny_shuffle", 17,
           dict(per_channel=True, activation_type=QuantType.QInt8, extra_options={"ActivationSymmetric": True}))
    # onnxruntime's own com.microsoft Q/DQ ops.
    yield ("tiny_classifier_op17_pc_QInt8_contrib", "tiny_classifier", 17,
           dict(per_channel=True, activation_type=QuantType.QInt8,
                extra_options={"UseQDQContribOps": True}))
    for opset in (10, 11, 13, 21):
        for pc in (False, True) if opset >= 13 else (False,):
            yield (f"tiny_classifier_op{opset}_{'pc' if pc else 'pt'}_QInt8_asym", "tiny_classifier",
                   opset, dict(per_channel=pc, activation_type=QuantType.QInt8))


def output_step(model, output):
    """The scale of the DequantizeLinear that writes `output` (one step of its grid)."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if output in n.output and n.op_type == "DequantizeLinear":
            return float(np.max(inits[n.input[1]]))
    return None


def without_q_zero_points(model):
    """QuantizeLinear-21 with output_dtype INT8 instead of a zero point (all zero points 0)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and len(n.input) == 3:
            del n.input[2]
            n.attribute.append(helper.make_attribute("output_dtype", onnx.TensorProto.INT8))
    return m


def blocked(model):
    """A weight DequantizeLinear rewritten as blocked quantization (block_size 4 on axis 1)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0].endswith("weight_quantized") \
                and n.input[0].startswith("fc."):
            w = numpy_helper.to_array(inits[n.input[0]])  # (10, 16)
            blocks = (w.shape[0], w.shape[1] // 4)
            for i, dtype in ((1, np.float32), (2, np.int8)):
                t = inits[n.input[i]]
                t.CopyFrom(numpy_helper.from_array(np.full(blocks, 0.01 if i == 1 else 0, dtype),
                                                   t.name))
            del n.attribute[:]
            n.attribute.extend([helper.make_attribute("axis", 1),
                                helper.make_attribute("block_size", 4)])
            return m
    raise RuntimeError("no fc weight DequantizeLinear")


def run_tessel(tessel, path, x, work):
    npy = path + ".input.npy"
    np.save(npy, x)
    out_dir = path + ".out"
    r = subprocess.run([tessel, "run", path, "--device", "cpu", "--input", f"input={npy}",
                        "--output-dir", out_dir], capture_output=True, text=True)
    return r, out_dir


def through_gpu_pipeline(tessel, path, x, work):
    """The model through the GPU's fp16 pass pipeline (tessel opt), run on the CPU reference,
    against onnxruntime with graph optimisations off: (relative L2 error, the pipeline's IR
    file), or (None, why it did not run)."""
    tir = path + ".gpu-fp16.tir"
    r = subprocess.run([tessel, "opt", "--pipeline", "gpu-fp16", "-o", tir, path],
                       capture_output=True, text=True)
    r2, out_dir = (run_tessel(tessel, tir, x, work) if r.returncode == 0 else (r, None))
    if r2.returncode != 0:
        return None, f"{r.stderr.strip()} {r2.stderr.strip()}"
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"input": x})[0]
    got = np.load(os.path.join(out_dir, sess.get_outputs()[0].name + ".npy")).astype(np.float64)
    if got.shape != expected.shape:
        return None, f"output shape {got.shape}, expected {expected.shape}"
    return float(np.linalg.norm(got - expected) / np.linalg.norm(expected)), tir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", required=True, help="path of the tessel binary")
    ap.add_argument("--keep", help="write the models here and keep them")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="tessel_qdq_")
    if not args.keep:
        atexit.register(shutil.rmtree, work, ignore_errors=True)  # no folder left per test run
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    passed = failed = 0

    cases = []
    for name, model, opset, kw in variants():
        fp32 = os.path.join(work, f"{model}_op{opset}.onnx")
        if not os.path.exists(fp32):
            onnx.save(tiny_cnns.MODELS[model](opset=opset), fp32)
        path = os.path.join(work, name + ".onnx")
        quantize_static(fp32, path, Reader(), quant_format=QuantFormat.QDQ,
                        weight_type=QuantType.QInt8, **kw)
        cases.append((name, path))
        if name == "tiny_classifier_op21_pc_QInt8_asym":
            sym = os.path.join(work, "tiny_classifier_op21_pc_QInt8_sym.onnx")
            quantize_static(fp32, sym, Reader(), quant_format=QuantFormat.QDQ,
                            weight_type=QuantType.QInt8, per_channel=True,
                            activation_type=QuantType.QInt8,
                            extra_options={"ActivationSymmetric": True})
            path21 = os.path.join(work, "tiny_classifier_op21_output_dtype.onnx")
            onnx.save(without_q_zero_points(onnx.load(sym)), path21)
            cases.append(("tiny_classifier_op21_output_dtype", path21))

    for name, path in cases:
        model = onnx.load(path)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        expected = sess.run(None, {"input": x})[0]
        r, out_dir = run_tessel(args.tessel, path, x, work)
        if r.returncode != 0:
            print(f"FAIL {name}: tessel exited {r.returncode}: {r.stderr.strip()}")
            failed += 1
            continue
        out = sess.get_outputs()[0].name
        got = np.load(os.path.join(out_dir, out + ".npy"))
        step = output_step(model, out)
        diff = np.abs(got.astype(np.float64) - expected).max()
        steps = diff / step if step else float("nan")
        ok = got.shape == expected.shape and step is not None and diff <= step * 1.0001
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max |diff| {diff:.3g} = {steps:.2f} output steps")
        passed += ok
        failed += not ok

    # onnxruntime's default QUInt8 (asymmetric) activations through the GPU's fp16 pipeline, run
    # on the CPU reference: a conv reading a uint8 activation of zero point 0 is an int8
    # contraction storing uint8, one with another zero point a float conv taking its
    # activation's QuantizeLinear -> DequantizeLinear pair as a fake quantization (fuse), which
    # `explain` counts as a fused epilogue, where before the pair stayed two elementwise kernels. fp16 storage moves values
    # across rounding boundaries inside, so this checks a relative L2 bound, not one step.
    for name, path in cases:
        if "QUInt8_asym" not in name or "_pt_" not in name:
            continue
        err, tir = through_gpu_pipeline(args.tessel, path, x, work)
        ex = subprocess.run([args.tessel, "explain", path, "--target", "sm_90a"], capture_output=True,
                            text=True)
        summary = [l for l in ex.stdout.splitlines() if "fused epilogues" in l]
        fused = int(summary[-1].split(", ")[-1].split()[0]) if summary else 0
        # The convs and the dense layer reading a uint8 activation of zero point 0 (after a
        # ReLU) run on the int8 Tensor Cores (u8 A by i8 weights): all of tiny_classifier's
        # but the RGB stem.
        int8 = sum("Tensor Cores (" in l and " int8)" in l for l in ex.stdout.splitlines())
        int8_wanted = 4 if name.startswith("tiny_classifier") else 0
        if err is None:
            print(f"FAIL {name} gpu-fp16: {tir}")
            failed += 1
            continue
        ok = err <= 5e-2 and fused >= 2 and int8 >= int8_wanted
        print(f"{'ok  ' if ok else 'FAIL'} {name} gpu-fp16 pipeline: rel L2 {err:.2e}, "
              f"{fused} fused epilogues, {int8} int8 contractions")
        passed += ok
        failed += not ok

    # TensorRT-style int8 through the GPU's fp16 pipeline: the pre-activation norm after each
    # concat (a per-channel shift of the dequantized integers) is a 1x1 depthwise conv reading
    # them, which takes the ReLU and QuantizeLinear after it, one int8 kernel each. Each concat
    # of features of different scales holds their integers, which that depthwise conv reads in
    # place, requantized to the concat's scale as it loads them: the features are stored into
    # one int8 buffer, and only the first concat (of the pool's output, which no conv stores)
    # runs a copy kernel.
    for name, path in cases:
        if name != "tiny_preact_op17_pc_QInt8_sym":
            continue
        err, tir = through_gpu_pipeline(args.tessel, path, x, work)
        ex = subprocess.run([args.tessel, "explain", path, "--target", "sm_90a"], capture_output=True,
                            text=True)
        shifts = sum("a per-channel shift of int8 values" in l for l in ex.stdout.splitlines())
        requantized = sum("read requantized to another scale" in l for l in ex.stdout.splitlines())
        pr = subprocess.run([args.tessel, "predict", path, "--target", "sm_90a"], capture_output=True,
                            text=True)
        copies = sum(l.split()[1:2] == ["Concat"] for l in pr.stdout.splitlines())
        if err is None:
            print(f"FAIL {name} gpu-fp16: {tir}")
            failed += 1
            continue
        ok = err <= 5e-2 and shifts >= 3 and requantized == 3 and copies == 1 and pr.returncode == 0
        print(f"{'ok  ' if ok else 'FAIL'} {name} gpu-fp16 pipeline: rel L2 {err:.2e}, "
              f"{shifts} norms on the depthwise kernel, {requantized} reading their concat requantized, "
              f"{copies} concat copy kernels")
        passed += ok
        failed += not ok

    def pipeline_ir(name):
        """Case `name` through the fp16 pipeline: (rel L2 against onnxruntime, the IR's text), or
        None after a FAIL line where it did not run."""
        err, tir = through_gpu_pipeline(args.tessel, dict(cases)[name], x, work)
        if err is None:
            print(f"FAIL {name} gpu-fp16: {tir}")
            return None
        return err, open(tir).read()

    # The MBConv through the fp16 pipeline: each SiLU whose gate the quantizer quantized (Sigmoid,
    # QuantizeLinear, DequantizeLinear, Mul) is one silu_qgate step of its conv's epilogue (the
    # stem, the expansion, the depthwise and the squeeze-excite reduce convs), not five kernels;
    # the squeeze-excite gate's Mul and the QuantizeLinear after it are one op.
    name = "tiny_mbconv_op17_pc_QInt8_sym"
    if (r := pipeline_ir(name)) is None:
        failed += 1
    else:
        err, text = r
        gates = text.count('"silu_qgate"')
        se = text.count("tessel.MulQuantizeLinear(")
        ok = err <= 5e-2 and gates == 4 and se == 1
        print(f"{'ok  ' if ok else 'FAIL'} {name} gpu-fp16 pipeline: rel L2 {err:.2e}, "
              f"{gates} SiLUs with quantized gates fused, {se} gate Mul with its QuantizeLinear")
        passed += ok
        failed += not ok

    # The ShuffleNet unit through the fp16 pipeline: the channel shuffle moves the int8
    # features (no QuantizeLinear or DequantizeLinear left between the two convs), and the conv
    # after it, whose input convert-layout's NHWC Transpose follows the shuffle, is an int8 conv.
    name = "tiny_shuffle_op17_pc_QInt8_sym"
    if (r := pipeline_ir(name)) is None:
        failed += 1
    else:
        err, text = r
        lines = text.splitlines()
        # The input's QuantizeLinear and DequantizeLinear stay (the stem's edge).
        qdq = sum((" = QuantizeLinear(" in l or " = DequantizeLinear(" in l) and '@"input_' not in l
                  for l in lines)
        conv = [l for l in lines if l.endswith('@"conv"')]
        int8_conv = len(conv) == 1 and "int8_refusal" not in conv[0] and "dequant_scale" in conv[0]
        moves = [l for l in lines
                 if any(l.endswith(f'@"shuffle.{m}"') for m in ("reshape", "transpose", "reshape_back"))]
        int8_moves = len(moves) == 3 and all(": i8[" in l for l in moves)
        ok = err <= 5e-2 and int8_conv and int8_moves and qdq == 0
        print(f"{'ok  ' if ok else 'FAIL'} {name} gpu-fp16 pipeline: rel L2 {err:.2e}, conv after "
              f"the shuffle int8: {int8_conv}, shuffle on int8: {int8_moves}, {qdq} Q/DQ nodes left")
        passed += ok
        failed += not ok

    # What onnxruntime runs and tessel refuses, with one line each: blocked quantization, and
    # 16- and 4-bit types (tessel has 8-bit integers only).
    refused = []
    src = os.path.join(work, "tiny_classifier_op21_pc_QInt8_asym.onnx")
    path = os.path.join(work, "tiny_classifier_op21_blocked.onnx")
    onnx.save(blocked(onnx.load(src)), path)
    refused.append((path, "blocked quantization"))
    fp32 = os.path.join(work, "tiny_classifier_op21.onnx")
    for name, kw, message in (
            ("QInt16", dict(activation_type=QuantType.QInt16), "element type INT16 is not supported"),
            ("QInt4_weights", dict(activation_type=QuantType.QUInt8, weight_type=QuantType.QInt4,
                                   per_channel=True), "element type INT4 is not supported")):
        path = os.path.join(work, f"tiny_classifier_op21_{name}.onnx")
        kw.setdefault("weight_type", QuantType.QInt8)
        quantize_static(fp32, path, Reader(), quant_format=QuantFormat.QDQ, **kw)
        refused.append((path, message))
    for path, message in refused:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, {"input": x})
        r, _ = run_tessel(args.tessel, path, x, work)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode == 2 and len(lines) == 1 and message in lines[0]
        print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(path)[:-5]}: refused "
              f"(exit {r.returncode}): {r.stderr.strip()}")
        passed += ok
        failed += not ok

    print(f"qdq models: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
