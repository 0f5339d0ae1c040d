#!/usr/bin/env python3
"""`tessel quantize` end to end on tiny CNNs (tests/models/tiny_cnns.py): every calibration
method writes a QDQ model that onnxruntime loads and runs, and that tessel's CPU reference
runs to the same numbers; the float fallback; and each user error as one line with exit 2.

Exit code 0 when every check passes; prints one line per check and a count line.
"""
import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import tiny_cnns  # noqa: E402

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")


def tessel(args, *argv):
    return subprocess.run([args.tessel, *argv], capture_output=True, text=True)


def ort_run(path, x, optimize=False):
    opts = ort.SessionOptions()
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0]


def tessel_run(args, path, x, work):
    npy = os.path.join(work, "x.npy")
    np.save(npy, x)
    out = os.path.join(work, "out")
    r = tessel(args, "run", path, "--device", "cpu", "--input", f"input={npy}",
               "--output-dir", out)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    name = onnx.load(path).graph.output[0].name
    return np.load(os.path.join(out, name + ".npy"))


def rel_l2(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def qdq_summary(path):
    m = onnx.load(path)
    ops = [n.op_type for n in m.graph.node]
    axes = {n.input[0]: [a.i for a in n.attribute if a.name == "axis"]
            for n in m.graph.node if n.op_type == "DequantizeLinear"}
    int8 = [t.name for t in m.graph.initializer if t.data_type == onnx.TensorProto.INT8
            and len(t.dims) >= 2]
    return ops.count("QuantizeLinear"), axes, int8


def expect_error(args, name, argv, message):
    r = tessel(args, "quantize", *argv)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") \
        and message in lines[0]
    check(f"error {name}", ok, f"exit {r.returncode}: {r.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tessel_quantize_")
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # no folder left per test run
    rng = np.random.default_rng(5)

    classifier = os.path.join(work, "tiny_classifier.onnx")
    onnx.save(tiny_cnns.tiny_classifier(), classifier)
    dense = os.path.join(work, "tiny_matmul.onnx")
    onnx.save(tiny_cnns.tiny_matmul(), dense)
    calib = os.path.join(work, "calib")
    os.makedirs(calib)
    samples = rng.uniform(-1, 1, (8, 1, 3, 32, 32)).astype(np.float32)
    for i, s in enumerate(samples):
        np.save(os.path.join(calib, f"{i:03d}.npy"), s)
    x = rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    fp32 = ort_run(classifier, x)

    # Every method: a QDQ model onnxruntime loads and runs as tessel does.
    for method in ("minmax", "percentile", "entropy"):
        out = os.path.join(work, f"classifier_{method}.onnx")
        r = tessel(args, "quantize", classifier, "--calib", calib, "--method", method, "-o", out)
        if r.returncode != 0:
            check(f"quantize --method {method}", False, r.stderr.strip())
            continue
        n_q, axes, int8 = qdq_summary(out)
        check(f"quantize --method {method} writes Q/DQ", n_q == 5 and len(int8) == 5 and
              axes.get("conv1.weight_int8") == [0] and axes.get("fc.weight_int8") == [0],
              f"{n_q} QuantizeLinear, int8 weights {len(int8)}, axes {axes}")
        onnx.checker.check_model(onnx.load(out))
        want = ort_run(out, x)
        got = tessel_run(args, out, x, work)
        err = rel_l2(got, want)
        fused = ort_run(out, x, optimize=True)  # onnxruntime's own int8 kernels
        check(f"quantize --method {method}: tessel CPU vs onnxruntime", err < 1e-3,
              f"rel L2 {err:.2e}; int8 vs fp32 rel L2 {rel_l2(want, fp32):.2e} (onnxruntime "
              f"int8 kernels {rel_l2(fused, fp32):.2e}), top-1 {np.argmax(want)} vs fp32 "
              f"{np.argmax(fp32)}")
        check(f"quantize --method {method}: per-layer report", "int8" in r.stdout and
              "top-1 agreement" in r.stdout, r.stdout.strip().splitlines()[-2])

    # A dense block with pre-activation norms (tiny_preact): each norm's input and the concats
    # around it are quantized with the layers (the pool's output, the concats, the features
    # the convs add), so that tessel's GPU plan keeps the concats int8 and runs each norm on
    # the integers; onnxruntime runs the written model to tessel's CPU numbers.
    preact = os.path.join(work, "preact.onnx")
    onnx.save(tiny_cnns.tiny_preact(), preact)
    out = os.path.join(work, "preact.int8.onnx")
    r = tessel(args, "quantize", preact, "--calib", calib, "--method", "minmax",
               "--max-top1-drop", "100", "-o", out)
    ok, detail = r.returncode == 0, r.stderr.strip()
    if ok:
        quantized = {n.input[0] for n in onnx.load(out).graph.node if n.op_type == "QuantizeLinear"}
        want_q = {"pool", "cat1", "cat2", "cat", "layer0.conv2", "layer1.conv2", "layer2.conv2"}
        err = rel_l2(tessel_run(args, out, x, work), ort_run(out, x))
        plan = tessel(args, "explain", out).stdout.splitlines()
        kinds = {line.split()[0]: line.split()[1:3] for line in plan if len(line.split()) > 2}
        cats_int8 = all(kinds.get(c, ["", ""])[1].startswith("i8") for c in ("cat1", "cat2", "cat"))
        float_ops = [n for n, (op, _) in kinds.items() if op in ("Mul", "Add", "Relu")]
        reported = "also quantized: 7 values besides the int8 layers' inputs" in r.stdout
        ok = want_q <= quantized and err < 1e-3 and cats_int8 and not float_ops and reported
        detail = (f"missing Q/DQ on {sorted(want_q - quantized)}, rel L2 vs onnxruntime {err:.2e}, "
                  f"concats int8 {cats_int8}, float Mul/Add/Relu kernels {float_ops}, "
                  f"reported {reported}")
    check("pre-activation norms: their inputs and the concats quantized", ok, detail)

    # Opset 11: no `axis` on DequantizeLinear yet, so weights get one scale per tensor.
    op11 = os.path.join(work, "classifier_op11.onnx")
    onnx.save(tiny_cnns.tiny_classifier(opset=11), op11)
    out = os.path.join(work, "classifier_op11.int8.onnx")
    r = tessel(args, "quantize", op11, "--calib", calib, "--method", "minmax", "-o", out)
    ok = r.returncode == 0
    detail = r.stderr.strip()
    if ok:
        n_q, axes, _ = qdq_summary(out)
        err = rel_l2(tessel_run(args, out, x, work), ort_run(out, x))
        ok = n_q == 5 and axes.get("conv1.weight_int8") == [] and err < 1e-3
        detail = f"{n_q} QuantizeLinear, conv1 weight axis {axes.get('conv1.weight_int8')}, " \
                 f"rel L2 vs onnxruntime {err:.2e}"
    check("opset 11: per-tensor weights", ok, detail)

    # A dense layer written as MatMul, random calibration, one stacked .npy file.
    out = os.path.join(work, "dense.onnx")
    stacked = os.path.join(work, "stacked")
    os.makedirs(stacked)
    np.save(os.path.join(stacked, "all.npy"), samples.reshape(8, 3, 32, 32))
    for flags in (["--calib-random", "4", "--seed", "3"], ["--calib", stacked]):
        r = tessel(args, "quantize", dense, *flags, "--method", "percentile", "-o", out)
        ok = r.returncode == 0
        if ok:
            n_q, axes, _ = qdq_summary(out)
            err = rel_l2(tessel_run(args, out, x, work), ort_run(out, x))
            ok = n_q == 2 and axes.get("dense.weight_int8") == [1] and err < 1e-3
            detail = f"{n_q} QuantizeLinear, axes {axes}, rel L2 vs onnxruntime {err:.2e}; " + \
                r.stdout.strip().splitlines()[-2]
        else:
            detail = r.stderr.strip()
        check(f"quantize MatMul model {' '.join(flags)}", ok, detail)
        if "8 sample" not in r.stdout and flags[0] == "--calib":
            check("a stacked .npy is 8 samples", False, r.stdout)

    # External data and a symbolic batch: the written model, in another folder, holds its data
    # inline and keeps the symbol.
    ext_dir = os.path.join(work, "external")
    os.makedirs(ext_dir)
    m = tiny_cnns.tiny_classifier()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    ext = os.path.join(ext_dir, "classifier.onnx")
    onnx.save(m, ext, save_as_external_data=True, location="classifier.onnx.data",
              size_threshold=0)
    batch2 = os.path.join(work, "batch2")
    os.makedirs(batch2)
    np.save(os.path.join(batch2, "all.npy"), samples.reshape(4, 2, 3, 32, 32)[0])
    out_ext = os.path.join(work, "classifier_from_external.onnx")
    r = tessel(args, "quantize", ext, "--batch", "2", "--calib", batch2, "--method", "minmax",
               "-o", out_ext)
    ok = r.returncode == 0
    detail = r.stderr.strip()
    if ok:
        x2 = np.concatenate([x, x])
        err = rel_l2(ort_run(out_ext, x2)[:1], ort_run(out_ext, x))
        ok = err < 1e-6 and "2 sample(s)" not in r.stdout and "1 sample(s)" in r.stdout
        detail = f"batch-2 vs batch-1 rel L2 {err:.1e}; " + r.stdout.splitlines()[0]
    check("external data and a symbolic batch", ok, detail)

    # Two inputs: one subfolder per sample with <input>.npy each.
    two = os.path.join(work, "two_inputs.onnx")
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c", "bias_map"], ["y"])], "two",
        [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 8, 8]),
         helper.make_tensor_value_info("bias_map", onnx.TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, two)
    per_sample = os.path.join(work, "per_sample")
    for k in range(3):
        d = os.path.join(per_sample, f"s{k}")
        os.makedirs(d)
        np.save(os.path.join(d, "input.npy"), rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32))
        np.save(os.path.join(d, "bias_map.npy"), rng.uniform(-1, 1, (1, 4, 8, 8)))  # f64: converted
    r = tessel(args, "quantize", two, "--calib", per_sample, "-o", out)
    check("two inputs, a subfolder per sample", r.returncode == 0 and "3 sample(s)" in r.stdout,
          r.stdout.splitlines()[0] if r.returncode == 0 else r.stderr.strip())
    os.remove(os.path.join(per_sample, "s1", "bias_map.npy"))
    expect_error(args, "two inputs, a file missing", [two, "--calib", per_sample, "-o", out],
                 "s1/bias_map.npy is missing (the model has 2 inputs")

    # Float fallback: a budget nothing int8 meets keeps every layer float.
    r = tessel(args, "quantize", dense, "--calib", calib, "--metric", "rel-l2",
               "--max-rel-l2", "0", "-o", out)
    n_q, _, _ = qdq_summary(out) if r.returncode == 0 else (-1, None, None)
    check("fallback to float under a zero budget", r.returncode == 0 and n_q == 0 and
          r.stdout.count("float (fallback)") == 2, r.stdout.strip().splitlines()[-2]
          if r.returncode == 0 else r.stderr.strip())

    # User errors: one line, exit 2.
    expect_error(args, "missing model", [os.path.join(work, "nope.onnx"), "--calib-random", "2",
                                         "-o", out], "no such model file")
    expect_error(args, "missing calibration folder",
                 [classifier, "--calib", os.path.join(work, "nope"), "-o", out], "no such folder")
    expect_error(args, "no calibration", [classifier, "-o", out], "--calib DIR or --calib-random N")
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    np.save(os.path.join(bad, "a.npy"), np.zeros((1, 3, 16, 16), np.float32))
    expect_error(args, "wrong .npy shape", [classifier, "--calib", bad, "-o", out],
                 "holds f32[1,3,16,16], expected f32[1,3,32,32] (input 'input')")
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    expect_error(args, "empty calibration folder", [classifier, "--calib", empty, "-o", out],
                 "no .npy files")
    relu = os.path.join(work, "relu.onnx")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["input"], ["y"])], "relu",
        [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3, 32, 32])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, relu)
    expect_error(args, "no quantizable layer", [relu, "--calib-random", "2", "-o", out],
                 "no quantizable layer")
    conv = os.path.join(work, "conv.onnx")
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
        [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 32, 32])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, conv)
    expect_error(args, "top-1 of a 4-D output", [conv, "--calib-random", "2", "--metric", "top1",
                                                  "-o", out],
                 "top-1 agreement needs a first output of shape (N, classes); it has f32[1,4,32,32]")
    old = os.path.join(work, "opset9.onnx")
    onnx.save(tiny_cnns.tiny_classifier(opset=9), old)
    expect_error(args, "opset 9", [old, "--calib-random", "2", "-o", out],
                 "quantizing needs opset 10 or newer")

    print(f"quantize: {sum(RESULTS)} passed, {len(RESULTS) - sum(RESULTS)} failed")
    return 0 if all(RESULTS) and RESULTS else 1


if __name__ == "__main__":
    sys.exit(main())
