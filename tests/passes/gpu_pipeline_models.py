#!/usr/bin/env python3
"""The GPU pass pipeline end to end on small model-zoo networks, on the CPU.

For each model: generate it (tools/models/gen_models.py --small), run it with `tessel run`,
rewrite it with `tessel opt --passes=<GPU pipeline>` for fp16 and fp32, run the resulting
textual IR on the same seeded input, and check
  * the outputs agree: max |out - ref| <= tol * max |ref|, tol 2e-2 (fp16) / 1e-4 (fp32);
  * the form the lowering expects: every conv a tessel.Conv with its BN, activation, residual
    and depth_to_space fused (no such op left standalone), and only the two edge Transposes
    (none carries a layout_reason).

    python3 tests/passes/gpu_pipeline_models.py --tessel build/src/cli/tessel --source .

Exits non-zero with a message per failure. (sr_net and mobilenet_v2 keep it to ~10 s: depthwise
convs, ReLU6 clips, residual adds, global pool + dense, subpixel stores, a 3-channel tail.)

Then int8: sr_net and mobilenet_v2 quantized by `tessel quantize` (one random calibration
input). The form, through the fp16 pipeline, for both: every group-1 conv over a multiple of 8
input channels an int8 tessel.Conv (else it says why in int8_refusal), every depthwise conv
reading its int8 input, no QuantizeLinear or DequantizeLinear of a constant left. The numbers, for sr_net through the fp32 pipeline (in the
fp16 one the float stem's fp16 rounding moves its quantized outputs, which is fp16's error,
not int8's): its outputs against the QDQ model's own on the CPU. The int8 convolutions compute the same sums, but an fp32 rounding
difference moves a value that sits on a rounding boundary of the next QuantizeLinear one int8
step, and what reads it moves too: at most 1% of the outputs may differ by more than 1e-3 of
the output range (a wrong scale or operand moves nearly all of them). mobilenet_v2 is too deep
for that: with random weights its QDQ output moves by ~10% of its range when its input moves
by 1e-6, so only its form is checked; the arithmetic is checked per op in fold_qdq_test and
fuse_int8_test.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

MODELS = ["sr_net", "mobilenet_v2"]
# `tessel opt --pipeline`: passes::gpu_pipeline(options) of src/passes/pipeline.cc, the passes
# compile runs, for each precision.
PIPELINES = {"fp16": "--pipeline=gpu-fp16", "fp32": "--pipeline=gpu-fp32"}
TOLERANCE = {"fp16": 2e-2, "fp32": 1e-4}
# In these models every one of these ops follows a conv and must be fused into it (or folded).
UNFUSED = ("Conv", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Add", "DepthToSpace",
           "tessel.DepthToSpace")


def run_model(tessel, model, out_dir):
    subprocess.run([tessel, "run", model, "--seed", "7", "--output-dir", out_dir], check=True,
                   stdout=subprocess.DEVNULL)
    return np.load(os.path.join(out_dir, "output.npy")).astype(np.float64)


def check_form(tir):
    """Problems with the rewritten graph's form, as messages."""
    ops = re.findall(r"= ([A-Za-z.]+)\(", tir)
    problems = []
    for op in UNFUSED:
        if op in ops:
            problems.append("%d %s left" % (ops.count(op), op))
    if ops.count("Transpose") > 2 or "layout_reason" in tir:
        problems.append("%d Transposes (interior ones: %s)" % (
            ops.count("Transpose"), re.findall(r'layout_reason = "([^"]*)"', tir)))
    return problems




def check_int8_form(tir):
    """Problems with the int8 form of a rewritten QDQ model, as messages, and the number of int8
    convs and of depthwise convs (each must read its int8 input: fold-qdq's int8-input form)."""
    problems = []
    types = dict(re.findall(r"(%[\w.]+) : ([a-z0-9]+)\[", tir))  # inputs and constants
    types.update(re.findall(r"(?m)^ *(%[\w.]+) = .* : ([a-z0-9]+)\[[0-9,]*\] @", tir))  # nodes'
    shapes = dict(re.findall(r"(%[\w.]+) : [a-z0-9]+\[([0-9,]*)\]", tir))
    convs = re.findall(r"(%[\w.]+) = tessel\.Conv\((%[\w.]+), (%[\w.]+)[^)]*\)(.*)", tir)
    int8 = depthwise = 0
    for out, x, w, rest in convs:
        if types.get(w) == "i8":
            int8 += 1
        elif "group =" not in rest and "int8_refusal" not in rest:
            problems.append("%s is a float conv and says no int8_refusal" % out)
        if "group =" in rest and shapes.get(w, "").endswith(",1"):
            depthwise += 1
            if types.get(x) != "i8":
                problems.append("the depthwise conv %s reads %s, not its int8 input" % (
                    out, types.get(x)))
    if int8 == 0:
        problems.append("no int8 tessel.Conv")
    for line in tir.splitlines():
        m = re.search(r"= (QuantizeLinear|DequantizeLinear)\((%[\w.]+)", line)
        if m and m.group(2) in types and line.count("const") == 0 and re.search(
                r"const " + re.escape(m.group(2)) + " ", tir):
            problems.append("a %s of the constant %s" % (m.group(1), m.group(2)))
    return problems, int8, depthwise


def check_int8(tessel, d, model, failures):
    onnx_path = os.path.join(d, model + ".onnx")
    qdq = os.path.join(d, model + ".int8.onnx")
    subprocess.run([tessel, "quantize", onnx_path, "--calib-random", "1", "-o", qdq], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tir = os.path.join(d, model + ".int8.tir")
    subprocess.run([tessel, "opt", PIPELINES["fp16"], qdq, "-o", tir], check=True)
    with open(tir) as f:
        problems, int8, depthwise = check_int8_form(f.read())
    failures += ["%s int8: %s" % (model, p) for p in problems]
    if model != "sr_net":
        print("%-14s int8  %d int8 convs, %d depthwise convs reading int8 (form only)" % (
            model, int8, depthwise))
        if model == "mobilenet_v2" and depthwise == 0:
            failures.append("%s int8: no depthwise conv" % model)
        return
    ref = run_model(tessel, qdq, os.path.join(d, model + ".int8.ref"))
    subprocess.run([tessel, "opt", PIPELINES["fp32"], qdq, "-o", tir], check=True)
    out = run_model(tessel, tir, os.path.join(d, model + ".int8.out"))
    off = np.mean(np.abs(out - ref) > 1e-3 * np.abs(ref).max())
    print("%-14s int8  %d int8 convs, %.3f%% of outputs off by more than 1e-3 of the range" % (
        model, int8, 100 * off))
    if not off <= 0.01:
        failures.append("%s int8: %.3g%% of the outputs differ" % (model, 100 * off))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", required=True, help="the tessel executable")
    ap.add_argument("--source", required=True, help="the tessel source tree")
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(args.source, "tools/models/gen_models.py"),
                        "--out", d, "--small", "--models", ",".join(MODELS)], check=True,
                       stdout=subprocess.DEVNULL)
        for m in MODELS:
            onnx_path = os.path.join(d, m + ".onnx")
            ref = run_model(args.tessel, onnx_path, os.path.join(d, m + ".ref"))
            for precision, passes in PIPELINES.items():
                tir = os.path.join(d, "%s.%s.tir" % (m, precision))
                subprocess.run([args.tessel, "opt", passes, onnx_path, "-o", tir],
                               check=True)
                with open(tir) as f:
                    failures += ["%s %s: %s" % (m, precision, p) for p in check_form(f.read())]
                out = run_model(args.tessel, tir, os.path.join(d, "%s.%s" % (m, precision)))
                err = np.abs(out - ref).max() / np.abs(ref).max()
                print("%-14s %s  max error / max |ref| = %.2e" % (m, precision, err))
                if not err <= TOLERANCE[precision]:
                    failures.append("%s %s: relative error %.3g > %g" % (
                        m, precision, err, TOLERANCE[precision]))
        for m in MODELS:
            check_int8(args.tessel, d, m, failures)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
