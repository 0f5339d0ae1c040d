#!/usr/bin/env python3
"""`tessel compare` (python/tessel/compare.py, run through the tessel binary and as
`python -m tessel compare`):

  - the tiny classifier against onnxruntime passes, output by output, and --bisect finds every
    intermediate value in agreement
  - a deliberately broken layer (one conv's weights changed; one ReLU made a LeakyReLU), run by
    tessel against the intact model in onnxruntime (--reference-model), fails, and --bisect names
    exactly that layer: not a layer before it, not one after
  - user errors: one "error: ..." line, exit code 2

    compare_test.py --tessel build/src/cli/tessel --source .   (PYTHONPATH=build/python)
"""

import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import onnx
from onnx import numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("--tessel", required=True)
ap.add_argument("--source", required=True)
ARGS = ap.parse_args()
sys.path.insert(0, os.path.join(ARGS.source, "tests", "models"))
import tiny_cnns  # noqa: E402

WORK = tempfile.mkdtemp(prefix="tessel_py_compare_")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)  # no folder left per test run
GOOD = os.path.join(WORK, "tiny.onnx")
onnx.save(tiny_cnns.tiny_classifier(batch="N"), GOOD)


def tessel_compare(*args):
    return subprocess.run([ARGS.tessel, "compare"] + list(args), capture_output=True, text=True)


def python_compare(*args):
    return subprocess.run([sys.executable, "-m", "tessel", "compare"] + list(args),
                          capture_output=True, text=True)


def broken(name, edit):
    """The tiny classifier with `edit(model)` applied: one layer computes something else."""
    m = onnx.load(GOOD)
    edit(m)
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    return path


def scale_weight(m, init_name, factor):
    for i, t in enumerate(m.graph.initializer):
        if t.name == init_name:
            w = numpy_helper.to_array(t) * np.float32(factor)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(w.astype(np.float32), t.name))
            return
    raise AssertionError("no initializer " + init_name)


def relu_to_leaky(m, node_name):
    for n in m.graph.node:
        if n.name == node_name:
            assert n.op_type == "Relu"
            n.op_type = "LeakyRelu"
            n.attribute.append(onnx.helper.make_attribute("alpha", 0.5))
            return
    raise AssertionError("no node " + node_name)


def check(cond, what, r):
    assert cond, "%s\nexit %d\nstdout:\n%s\nstderr:\n%s" % (what, r.returncode, r.stdout, r.stderr)


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


@test
def intact_model_passes_with_bisect():
    r = tessel_compare(GOOD, "--against", "onnxruntime", "--device", "cpu", "--batch", "2",
                       "--bisect")
    check(r.returncode == 0, "the intact model should pass", r)
    check("tessel cpu (reference executor) vs onnxruntime" in r.stdout, "header", r)
    check(re.search(r"^output logits +f32\[2,10\] +max abs \S+ +max rel \S+ +PASS$", r.stdout,
                    re.M), "the logits line", r)
    check("1 passed, 0 failed" in r.stdout, "the count line", r)
    # Every Conv, Relu, MaxPool, Add, ... output (13 values) compared and in agreement.
    check(re.search(r"^bisect: all 13 intermediate values compared agree", r.stdout, re.M),
          "bisect over the intact model", r)


@test
def broken_layers_are_found():
    cases = [
        ("broken_conv", lambda m: scale_weight(m, "block.conv2.weight", 1.05), "block.conv2",
         "Conv"),
        ("broken_relu", lambda m: relu_to_leaky(m, "block.relu1"), "block.relu1", "LeakyRelu"),
    ]
    for name, edit, layer, op in cases:
        path = broken(name, edit)
        # Without --bisect: the output fails.
        r = tessel_compare(path, "--against", "onnxruntime", "--reference-model", GOOD,
                           "--device", "cpu")
        check(r.returncode == 1, name + ": the output should fail", r)
        check(re.search(r"^output logits .* FAIL at \[", r.stdout, re.M), name + ": FAIL line", r)
        check("0 passed, 1 failed" in r.stdout, name + ": count line", r)
        # With it: the broken layer, by name.
        r = python_compare(path, "--against", "onnxruntime", "--reference-model", GOOD,
                           "--device", "cpu", "--bisect")
        check(r.returncode == 1, name + ": exit 1 with --bisect", r)
        m = re.search(r"^bisect: \d+ of 13 intermediate values compared; first divergence at "
                      r"layer '([^']+)' \((\w+)\), output '([^']+)'", r.stdout, re.M)
        check(m, name + ": no bisect line", r)
        check(m.group(1) == layer and m.group(2) == op and m.group(3) == layer,
              name + ": bisect named %s, expected %s" % (m.group(1), layer), r)


@test
def inputs_from_npy_are_used():
    x = np.random.default_rng(5).uniform(-1, 1, size=(1, 3, 32, 32)).astype(np.float32)
    npy = os.path.join(WORK, "x.npy")
    np.save(npy, x)
    r = tessel_compare(GOOD, "--against", "onnxruntime", "--device", "cpu", "--input",
                       "input=" + npy)
    check(r.returncode == 0, "compare with a .npy input", r)
    check("inputs: input f32[1,3,32,32]\n" in r.stdout or
          "inputs: input f32[1,3,32,32]" in r.stdout.splitlines()[0], "the given input", r)
    check("(random" not in r.stdout.splitlines()[0], "a given input is not random", r)


def expect_error(r, message):
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2, "exit code 2 for: " + message, r)
    check(len(lines) == 1 and lines[0] == "error: " + message, "the error line: " + message, r)


@test
def user_errors_are_one_line():
    expect_error(tessel_compare("/nonexistent.onnx", "--against", "onnxruntime"),
                 "/nonexistent.onnx: cannot open file")
    expect_error(tessel_compare(GOOD, "--against", "cpu", "--device", "cpu"),
                 "--against cpu compares tessel's GPU engine with its CPU reference: it needs "
                 "--device cuda")
    expect_error(tessel_compare(GOOD, "--against", "onnxruntime", "--device", "cpu", "--input",
                                "nope=x.npy"),
                 "--input 'nope=x.npy': the model has no input named 'nope'")
    expect_error(tessel_compare(GOOD, "--against", "onnxruntime", "--device", "cpu", "--input",
                                "input=/nonexistent.npy"),
                 "/nonexistent.npy: cannot read a .npy file ([Errno 2] No such file or "
                 "directory: '/nonexistent.npy')")
    r = tessel_compare(GOOD)
    check(r.returncode == 2 and r.stderr.startswith("error: the following arguments are required: "
                                                    "--against"), "a missing --against", r)
    r = tessel_compare(GOOD, "--against", "tensorrt")
    check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, "a bad --against", r)
    # tessel's own errors reach the command line as the CLI prints them.
    ok = subprocess.run([ARGS.tessel, "run", "/nonexistent.onnx"], capture_output=True, text=True)
    expect_error(python_compare("/nonexistent.onnx", "--against", "onnxruntime"),
                 ok.stderr.strip()[len("error: "):])
    r = subprocess.run([sys.executable, "-m", "tessel", "frobnicate"], capture_output=True,
                       text=True)
    expect_error(r, "unknown command 'frobnicate' (commands: compare, serve)")


passed = failed = 0
for fn in TESTS:
    try:
        fn()
        passed += 1
        print("PASS", fn.__name__)
    except Exception:
        failed += 1
        print("FAIL", fn.__name__)
        traceback.print_exc()
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
