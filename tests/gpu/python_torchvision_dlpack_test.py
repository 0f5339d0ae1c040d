#!/usr/bin/env python3
"""torchvision's ResNet-50 through the Python module on CUDA tensors handed over by PyTorch:
exported with a symbolic batch, opened as one dynamic-batch session for batch (1, 8), and run at
batch 1, 3 (between profiles) and 8 on torch CUDA tensors, with the outputs taken back by
torch.from_dlpack without a copy, each against PyTorch's fp32 output (bench/accuracy.py's bar:
relative L2 <= 1e-2 or 1.5x PyTorch's own fp16 error, and the same top-1 class on every image).
At batch 8 (a profile) the feed is read where it lies and a preallocated torch output is written
in place (same data_ptr, no NaN left).

Exits 77 (skipped) without PyTorch and torchvision with CUDA, without a CUDA device or where the
module does not import.

    python_torchvision_dlpack_test.py --source .   (PYTHONPATH=build/python)
"""

import argparse
import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import traceback

ap = argparse.ArgumentParser()
ap.add_argument("--source", required=True)
ap.add_argument("--model", default="resnet50")
ARGS = ap.parse_args()
try:
    import numpy as np
    import torch
    import torchvision  # noqa: F401
    import tessel
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available() or not tessel.cuda_available():
    print("skipped: no CUDA device (torch %s, tessel %s)"
          % (torch.cuda.is_available(), tessel._core.cuda_available()[1]))
    sys.exit(77)
sys.path.insert(0, os.path.join(ARGS.source, "bench"))
import accuracy  # noqa: E402
import torch_models as tm  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


try:
    work = tempfile.mkdtemp(prefix="tessel_py_dlpack_")
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # no folder left per test run
    onnx_path = os.path.join(work, ARGS.model + ".onnx")
    model = tm.build_model(ARGS.model)
    x0 = tm.make_input(ARGS.model, 1).cuda()
    with contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x0,), onnx_path, opset_version=tm.OPSET,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
    sess = tessel.InferenceSession(onnx_path, device="cuda", precision="fp16", batch=(1, 8),
                                   opt_batch=8)
    check(sess.profiles == [1, 2, 4, 8], "profiles %s" % sess.profiles)
    check(sess.get_inputs()[0].shape[0] == tessel.BATCH_DIM, "symbolic batch in get_inputs()")
    print("compiled in %.1f s" % (sess.compile_ms / 1e3))

    for batch in (1, 3, 8):
        x = tm.make_input(ARGS.model, batch, seed=batch).cuda().contiguous()
        ref = tm.reference(model, x)
        (y,) = sess.run(None, {"input": x})  # torch's current stream
        yt = torch.from_dlpack(y)
        torch.cuda.current_stream().synchronize()
        check(yt.is_cuda and tuple(yt.shape) == (batch, 1000),
              "batch %d: a CUDA output of shape %s" % (batch, tuple(yt.shape)))
        r = accuracy.check(yt.float().cpu().numpy(), ref)
        check(r["ok"], "batch %d: %s" % (batch, accuracy.summary(r)))

    # io binding at a profile batch: the caller's output tensor is written in place.
    x = tm.make_input(ARGS.model, 8, seed=11).cuda().contiguous()
    ref = tm.reference(model, x)
    out = torch.full((8, 1000), float("nan"), device="cuda")
    ptr = out.data_ptr()
    (z,) = sess.run(None, {"input": x}, outputs=[out])
    torch.cuda.current_stream().synchronize()
    check(out.data_ptr() == ptr and not torch.isnan(out).any().item(),
          "preallocated output written in place")
    r = accuracy.check(out.cpu().numpy(), ref)
    check(r["ok"], "io binding, batch 8: %s" % accuracy.summary(r))
    # The feed is not modified by the run.
    x_before = x.clone()
    sess.run(None, {"input": x})
    torch.cuda.current_stream().synchronize()
    check(torch.equal(x, x_before), "the feed is read, not written")
except Exception:
    traceback.print_exc()
    failures.append("exception")

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
