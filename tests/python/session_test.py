#!/usr/bin/env python3
"""The Python module (tessel.InferenceSession, tessel.compile) against onnxruntime and the CLI.

  - a model with a symbolic batch, opened at batch 1 and at batch 3 on the CPU, matches
    onnxruntime on the same inputs; get_inputs()/get_outputs() agree with onnxruntime's NodeArgs
  - output_names chooses and orders the outputs; a DLPack host tensor is taken like a numpy
    array; the outputs are numpy arrays that DLPack consumers take
  - every bad input raises a Python exception with one line, and where the CLI reports the same
    mistake, the same line: a missing file, a file that is no model, an unsupported op, a wrong
    feed name, shape or element type, a missing feed, a CUDA tensor fed to a CPU session, an
    engine file on the CPU, device="cuda" without a GPU, compiling without a GPU or target
  - tessel.compile writes an engine file for an H100 here (NVRTC needs no GPU)
  - a session opened for a batch range (batch=(1, 4)) runs batch 1 and 3 on the CPU against
    onnxruntime and reports its batch dimension as "batch"; a dynamic engine compiled for an H100
    lists its profiles; every malformed range and out-of-range batch is one line, the CLI's
    where the CLI reports the same

    session_test.py --tessel build/src/cli/tessel --source .   (PYTHONPATH=build/python)
"""

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import tessel

ap = argparse.ArgumentParser()
ap.add_argument("--tessel", required=True, help="the tessel binary, for its error lines")
ap.add_argument("--source", required=True, help="repository root")
ARGS = ap.parse_args()
sys.path.insert(0, os.path.join(ARGS.source, "tests", "models"))
import tiny_cnns  # noqa: E402

WORK = tempfile.mkdtemp(prefix="tessel_py_session_")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)  # no folder left per test run
MODEL = os.path.join(WORK, "tiny_classifier.onnx")
onnx.save(tiny_cnns.tiny_classifier(batch="N"), MODEL)

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def cli_error(*args):
    """The line the tessel CLI prints for a user error, without its "error: " prefix."""
    r = subprocess.run([ARGS.tessel] + list(args), capture_output=True, text=True)
    assert r.returncode == 2, "tessel %s: exit %d, expected 2\n%s" % (args, r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0][len("error: "):]


def raises(exc_type, fn, *args, **kwargs):
    """Calls fn, which must raise exc_type; returns the message, which must be one line."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        msg = str(e)
        assert msg and "\n" not in msg, "not one line: %r" % msg
        return msg
    raise AssertionError("%s did not raise %s" % (getattr(fn, "__name__", fn), exc_type.__name__))


def ort_session(path):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def rel_l2(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


@test
def symbolic_batch_1_and_3_match_onnxruntime():
    ref = ort_session(MODEL)
    rng = np.random.default_rng(3)
    for batch in (1, 3):
        sess = tessel.InferenceSession(MODEL, device="cpu", batch=batch)
        (inp,) = sess.get_inputs()
        (out,) = sess.get_outputs()
        assert (inp.name, inp.shape, inp.type, inp.dtype) == (
            "input", [batch, 3, 32, 32], "tensor(float)", np.float32), inp
        assert (out.name, out.shape, out.type) == ("logits", [batch, 10], "tensor(float)"), out
        assert inp.type == ref.get_inputs()[0].type and out.type == ref.get_outputs()[0].type
        x = rng.uniform(-1, 1, size=(batch, 3, 32, 32)).astype(np.float32)
        (y,) = sess.run(None, {"input": x})
        (want,) = ref.run(None, {"input": x})
        assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (batch, 10)
        err = rel_l2(y, want)
        assert err < 1e-5, "batch %d: relative L2 error %g against onnxruntime" % (batch, err)
        # The batch items are independent: item 2 of batch 3 is not item 0's result.
        if batch == 3:
            assert rel_l2(y[2], y[0]) > 1e-3


def two_output_model(path):
    """x -> Relu -> a; x -> Sigmoid -> b; outputs (a, b)."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"),
         helper.make_node("Sigmoid", ["x"], ["b"], name="sigmoid")],
        "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


class HostDlpack:
    """A tensor that speaks only DLPack (no numpy type, no buffer protocol)."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@test
def output_names_and_dlpack_feeds():
    path = two_output_model(os.path.join(WORK, "two.onnx"))
    sess = tessel.InferenceSession(path, device="cpu", batch=2)
    x = np.array([[-1, 0.5, 2, -3], [4, -5, 0, 1]], dtype=np.float32)
    b, a = sess.run(["b", "a"], {"x": HostDlpack(x)})
    np.testing.assert_allclose(a, np.maximum(x, 0), rtol=0, atol=0)
    np.testing.assert_allclose(b, 1 / (1 + np.exp(-x)), rtol=1e-6)
    (only,) = sess.run(["a"], {"x": x})
    np.testing.assert_array_equal(only, a)
    # The outputs are numpy arrays: DLPack consumers take them too.
    np.testing.assert_array_equal(np.from_dlpack(a), a)
    # A nested list takes the input's element type.
    (a2,) = sess.run(["a"], {"x": x.tolist()})
    np.testing.assert_array_equal(a2, a)


@test
def missing_file_is_the_clis_line():
    msg = raises(tessel.Error, tessel.InferenceSession, "/nonexistent/m.onnx", device="cpu")
    assert msg == cli_error("run", "/nonexistent/m.onnx", "--device", "cpu"), msg
    assert msg == "/nonexistent/m.onnx: cannot open file"


@test
def not_a_model_is_the_clis_line():
    path = os.path.join(WORK, "garbage.onnx")
    with open(path, "wb") as f:
        f.write(b"\x08\x96\x01 this is not protobuf \xff\xfe")
    msg = raises(tessel.Error, tessel.InferenceSession, path, device="cpu")
    assert msg == cli_error("run", path, "--device", "cpu"), msg


@test
def unsupported_op_is_the_clis_line():
    g = helper.make_graph([helper.make_node("Det", ["x"], ["y"], name="det")], "det",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(WORK, "det.onnx")
    onnx.save(m, path)
    msg = raises(tessel.Error, tessel.InferenceSession, path, device="cpu")
    assert msg == cli_error("run", path, "--device", "cpu"), msg
    assert "Det" in msg, msg


@test
def wrong_feeds_raise_one_line():
    sess = tessel.InferenceSession(MODEL, device="cpu", batch=1)
    x = np.zeros((1, 3, 32, 32), np.float32)
    msg = raises(tessel.InvalidArgument, sess.run, None, {"input": x, "extra": x})
    assert msg == "input 'extra': the model has no input named 'extra' (inputs: input)", msg
    msg = raises(tessel.InvalidArgument, sess.run, None, {})
    assert msg == "input 'input' is not fed (inputs: input)", msg
    msg = raises(tessel.InvalidArgument, sess.run, ["nope"], {"input": x})
    assert msg == "output 'nope': the model has no output named 'nope' (outputs: logits)", msg
    msg = raises(tessel.InvalidArgument, sess.run, None, {"input": np.zeros((3, 3, 32, 32),
                                                                               np.float32)})
    assert msg == ("input 'input': expected f32[1,3,32,32], got f32[3,3,32,32] (the session was "
                   "opened for batch 1: open one with batch=3, or with a range such as "
                   "batch=(1, 3))"), msg
    msg = raises(tessel.InvalidArgument, sess.run, None, {"input": x.astype(np.float64)})
    assert msg == "input 'input': expected f32[1,3,32,32], got f64[1,3,32,32]", msg
    msg = raises(tessel.InvalidArgument, sess.run, None, {"input": x.astype(np.complex64)})
    assert msg.startswith("input 'input': expected tensor(float), got numpy complex64"), msg
    # The CLI says the same of a wrong .npy input, in its words.
    np.save(os.path.join(WORK, "x64.npy"), x.astype(np.float64))
    line = cli_error("run", MODEL, "--device", "cpu", "--input",
                     "input=" + os.path.join(WORK, "x64.npy"))
    assert line.startswith("input 'input': expected f32[1,3,32,32], got f64[1,3,32,32]"), line
    # A tessel.InvalidArgument is a ValueError and a tessel.Error.
    assert issubclass(tessel.InvalidArgument, ValueError)
    assert issubclass(tessel.InvalidArgument, tessel.Error)


class FakeCudaTensor:
    """Says it lives on CUDA device 0; never asked for its data here."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        raise AssertionError("a CPU session must not read a CUDA tensor")


@test
def cuda_tensor_on_a_cpu_session_raises():
    sess = tessel.InferenceSession(MODEL, device="cpu")
    msg = raises(tessel.InvalidArgument, sess.run, None, {"input": FakeCudaTensor()})
    assert msg == ("input 'input' is a CUDA tensor, and this session runs on the CPU "
                   "(device='cpu'): pass host tensors"), msg


@test
def bad_session_arguments_raise():
    msg = raises(tessel.InvalidArgument, tessel.InferenceSession, MODEL, device="tpu")
    assert msg == "device 'tpu': expected 'cpu' or 'cuda'", msg
    msg = raises(tessel.InvalidArgument, tessel.InferenceSession, MODEL, device="cpu", batch=0)
    assert msg == "batch 0: expected a positive int or a range (min, max)", msg
    msg = raises(tessel.Error, tessel.InferenceSession, MODEL, device="cuda", precision="fp8")
    assert msg == "precision 'fp8': expected 'fp16' or 'fp32'", msg


@test
def cuda_without_a_gpu_raises():
    ok, why = tessel._core.cuda_available()
    if ok:
        print("  (a CUDA device is present: the no-GPU error is not provoked here)")
        return
    assert not tessel.cuda_available()
    msg = raises(tessel.Error, tessel.InferenceSession, MODEL, device="cuda")
    assert msg == "no CUDA device: " + why, msg
    assert msg == cli_error("run", MODEL, "--device", "cuda"), msg
    msg = raises(tessel.Error, tessel.compile, MODEL, os.path.join(WORK, "m.tsl"))
    assert msg == cli_error("compile", MODEL, "-o", os.path.join(WORK, "m.tsl")), msg
    assert "--target sm_90a" in msg, msg


@test
def compile_for_an_h100_and_load():
    engine = os.path.join(WORK, "tiny_b2.tsl")
    result = tessel.compile(MODEL, engine, target="sm_90a", batch=2)
    assert os.path.getsize(engine) > 0
    assert result.summary.startswith("compiled " + MODEL + " for "), result.summary
    assert "batch 2" in result.summary and result.summary.endswith("-> " + engine)
    ops = {l.op for l in result.launches}
    assert "tessel.Conv" in ops and all(l.instruction in ("mma.sync", "wgmma", "SIMT")
                                        for l in result.launches), result.launches
    assert any(l.instruction != "SIMT" for l in result.launches), "no Tensor Core launch"
    assert tessel._core.is_engine_file(engine) and not tessel._core.is_engine_file(MODEL)
    msg = raises(tessel.Error, tessel.InferenceSession, engine, device="cpu")
    assert msg == engine + " is a compiled engine: it runs on the GPU only", msg
    if not tessel.cuda_available():
        msg = raises(tessel.Error, tessel.InferenceSession, engine)
        assert msg.startswith("no CUDA device: "), msg
    msg = raises(tessel.Error, tessel.compile, MODEL, engine, target="sm_42")
    assert msg == cli_error("compile", MODEL, "-o", engine, "--target", "sm_42"), msg


@test
def batch_range_runs_1_and_3_on_the_cpu_against_onnxruntime():
    ref = ort_session(MODEL)
    sess = tessel.InferenceSession(MODEL, device="cpu", batch=(1, 4))
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert inp.shape == [tessel.BATCH_DIM, 3, 32, 32] and out.shape == ["batch", 10], (inp, out)
    assert sess.batch_range == (1, 4) and sess.opt_batch == 4 and sess.profiles == []
    # onnxruntime names the symbolic dim by the model's dim_param; both are strings.
    assert isinstance(ref.get_inputs()[0].shape[0], str)
    rng = np.random.default_rng(5)
    for batch in (1, 3):
        x = rng.uniform(-1, 1, size=(batch, 3, 32, 32)).astype(np.float32)
        (y,) = sess.run(None, {"input": x})
        (want,) = ref.run(None, {"input": x})
        assert y.shape == (batch, 10), y.shape
        err = rel_l2(y, want)
        assert err < 1e-5, "batch %d: relative L2 error %g against onnxruntime" % (batch, err)
    # The same session again at batch 1 after 3 (the graphs per batch are kept apart).
    x = rng.uniform(-1, 1, size=(1, 3, 32, 32)).astype(np.float32)
    assert rel_l2(sess.run(None, {"input": x})[0], ref.run(None, {"input": x})[0]) < 1e-5


@test
def gathered_pieces_run_as_their_concatenation():
    # A server's batch: requests of 2, 1 and 3 rows, read where they lie, against onnxruntime
    # on the concatenation.
    ref = ort_session(MODEL)
    sess = tessel.InferenceSession(MODEL, device="cpu", batch=(1, 8))
    rng = np.random.default_rng(11)
    xs = [rng.uniform(-1, 1, size=(n, 3, 32, 32)).astype(np.float32) for n in (2, 1, 3)]
    (y,) = sess.run_gathered(None, {"input": xs})
    (want,) = ref.run(None, {"input": np.concatenate(xs)})
    assert y.shape == (6, 10), y.shape
    assert rel_l2(y, want) < 1e-5, rel_l2(y, want)
    (again,) = sess.run_gathered(["logits"], {"input": [np.concatenate(xs)]})
    assert np.array_equal(again, y)
    # What is refused, in one line each.
    msg = raises(tessel.Error, sess.run_gathered, None, {"input": [xs[0], xs[1][:, :2]]})
    assert msg == "input 'input' is f32[1,2,32,32], expected f32[N,3,32,32]", msg
    msg = raises(tessel.InvalidArgument, sess.run_gathered, None, {"input": [xs[0].astype(np.float16)]})
    assert msg == ("input 'input': a piece is numpy float16[2, 3, 32, 32], expected "
                   "tensor(float)"), msg
    msg = raises(tessel.InvalidArgument, sess.run_gathered, None, {"input": xs[0]})
    assert msg == "input 'input': expected a non-empty list of arrays", msg
    msg = raises(tessel.InvalidArgument, sess.run_gathered, None, {"input": []})
    assert msg == "input 'input': expected a non-empty list of arrays", msg
    msg = raises(tessel.InvalidArgument, sess.run_gathered, None, {})
    assert msg == "input 'input' is not fed (inputs: input)", msg
    msg = raises(tessel.Error, sess.run_gathered, None, {"input": xs * 2})
    assert msg == "batch 12 is outside the session's batch range 1:8", msg


@test
def malformed_ranges_and_batches_raise_one_line():
    def open_(**kw):
        return tessel.InferenceSession(MODEL, device="cpu", **kw)
    cases = [
        (dict(batch=(0, 4)), "batch (0, 4): the smallest batch is 0, expected at least 1"),
        (dict(batch=(8, 4)), "batch (8, 4): the range is empty (8 > 4)"),
        (dict(batch="1:4"), "batch '1:4': pass a batch size (8) or a range as a tuple, "
                            "batch=(1, 64)"),
        (dict(batch="x"), "batch 'x': pass a batch size (8) or a range as a tuple, batch=(1, 64)"),
        (dict(batch=(1, 2, 3)), "batch (1, 2, 3): expected a positive int or a range (min, max) "
                                "of two ints"),
        (dict(batch=(1.0, 4)), "batch (1.0, 4): expected a positive int or a range (min, max) "
                               "of two ints"),
        (dict(batch=True), "batch True: expected a positive int or a range (min, max) of two "
                           "ints"),
        (dict(batch=(1, 4), opt_batch=5), "opt_batch 5 is outside the batch range (1, 4)"),
        (dict(batch=4, opt_batch=2), "opt_batch 2: it applies to a batch range such as "
                                     "batch=(1, 64)"),
        (dict(opt_batch=0), "opt_batch 0: expected a positive int"),
    ]
    for kw, want in cases:
        msg = raises(tessel.InvalidArgument, open_, **kw)
        assert msg == want, (kw, msg)
    sess = open_(batch=(1, 4))
    x5 = np.zeros((5, 3, 32, 32), np.float32)
    msg = raises(tessel.InvalidArgument, sess.run, None, {"input": x5})
    assert msg == "input 'input': batch 5 is outside the session's batch range (1, 4)", msg
    msg = raises(tessel.InvalidArgument, sess.run, None, {"input": np.zeros((2, 3, 8, 8),
                                                                               np.float32)})
    assert msg == "input 'input': expected f32[N,3,32,32], got f32[2,3,8,8]", msg
    # _core checks again on its own, in the C++ session's words.
    msg = raises(tessel.Error, sess._session.run, [x5])
    assert msg == "batch 5 is outside the session's batch range 1:4", msg
    # A static session's wrong batch suggests a range.
    msg = raises(tessel.InvalidArgument, open_(batch=2).run, None, {"input": x5})
    assert msg.endswith("(the session was opened for batch 2: open one with batch=5, or with a "
                        "range such as batch=(1, 5))"), msg
    # The CLI's words for the same mistakes.
    engine = os.path.join(WORK, "never.tsl")
    for spec, want in (("0:4", "--batch '0:4': the smallest batch is 0, expected at least 1"),
                       ("8:4", "--batch '8:4': the range is empty (8 > 4)"),
                       ("x", "--batch 'x': expected a batch size such as 8 or a range such as "
                             "1:64")):
        assert cli_error("compile", MODEL, "-o", engine, "--target", "sm_90a", "--batch",
                         spec) == want
    # A model whose input has a fixed batch has no range to run.
    fixed = os.path.join(WORK, "fixed.onnx")
    onnx.save(tiny_cnns.tiny_classifier(batch=2), fixed)
    msg = raises(tessel.Error, tessel.InferenceSession, fixed, device="cpu", batch=(1, 4))
    assert msg == ("batch range 1:4: input 'input' is f32[2,3,32,32] at batch 1; a batch range "
                   "needs every input and output to lead with the batch (a symbolic first "
                   "dimension)"), msg
    assert msg == cli_error("compile", fixed, "-o", engine, "--target", "sm_90a", "--batch",
                            "1:4")


@test
def dynamic_engine_for_an_h100_lists_its_profiles():
    engine = os.path.join(WORK, "tiny_dyn.tsl")
    result = tessel.compile(MODEL, engine, target="sm_90a", batch=(1, 6), opt_batch=3)
    assert result.profiles == [1, 2, 3, 4, 6], result.profiles
    assert "batch 1:6 (profiles 1, 2, 3, 4, 6; opt 3)" in result.summary, result.summary
    # A profile at every multiple of 3 too; profile_every only with a range.
    every = tessel.compile(MODEL, os.path.join(WORK, "tiny_dyn3.tsl"), target="sm_90a",
                           batch=(1, 8), profile_every=3)
    assert every.profiles == [1, 2, 3, 4, 6, 8], every.profiles
    for bad, msg in ((dict(batch=4, profile_every=2),
                      "profile_every 2: it applies to a batch range such as batch=(1, 64)"),
                     (dict(batch=(1, 8), profile_every=0),
                      "profile_every 0: expected a positive int")):
        try:
            tessel.compile(MODEL, os.path.join(WORK, "never.tsl"), target="sm_90a", **bad)
            raise AssertionError("compile took %r" % bad)
        except tessel.Error as e:
            assert str(e) == msg, str(e)
    assert any(l.instruction != "SIMT" for l in result.launches), result.launches
    # A batch outside the engine's range is refused before the GPU is looked for.
    line = cli_error("run", engine, "--device", "cuda", "--batch", "7")
    assert line == engine + ": batch 7 is outside the engine's batch range 1:6", line
    line = cli_error("bench", engine, "--batch", "9")
    assert line == engine + ": batch 9 is outside the engine's batch range 1:6", line
    line = cli_error("profile", engine, "--batch", "0")
    assert line == "--batch '0': the smallest batch is 0, expected at least 1", line
    if not tessel.cuda_available():
        assert cli_error("run", engine, "--device", "cuda", "--batch", "5").startswith(
            "no CUDA device: ")


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
