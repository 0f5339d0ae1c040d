#!/usr/bin/env python3
"""The Python module's CUDA path with PyTorch: CUDA tensors in (read in place), DLPack arrays
out on the device, on torch's current stream or a given one, into preallocated outputs, all
matching the host run of the same session and tessel's CPU reference. Exits 77 (skipped)
without PyTorch with CUDA, without a CUDA device, or where the module does not import.

    python_cuda_test.py --source .   (PYTHONPATH=build/python)
"""

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import traceback

ap = argparse.ArgumentParser()
ap.add_argument("--source", required=True)
ARGS = ap.parse_args()
try:
    import numpy as np
    import onnx
    import torch
    import tessel
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available() or not tessel.cuda_available():
    print("skipped: no CUDA device (torch %s, tessel %s)"
          % (torch.cuda.is_available(), tessel._core.cuda_available()[1]))
    sys.exit(77)
sys.path.insert(0, os.path.join(ARGS.source, "tests", "models"))
import tiny_cnns  # noqa: E402

work = tempfile.mkdtemp(prefix="tessel_py_cuda_")
atexit.register(shutil.rmtree, work, ignore_errors=True)  # no folder left per test run
model = os.path.join(work, "tiny.onnx")
onnx.save(tiny_cnns.tiny_classifier(batch="N"), model)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


try:
    sess = tessel.InferenceSession(model, device="cuda", precision="fp32", batch=3)
    cpu = tessel.InferenceSession(model, device="cpu", batch=3)
    x = torch.rand(3, 3, 32, 32, device="cuda") * 2 - 1
    (want,) = cpu.run(None, {"input": x.cpu().numpy()})
    (host,) = sess.run(None, {"input": x.cpu().numpy()})
    check(isinstance(host, np.ndarray), "host feeds give numpy outputs")

    # torch's current stream, outputs allocated by tessel.
    (y,) = sess.run(None, {"input": x})
    y = torch.from_dlpack(y)
    torch.cuda.current_stream().synchronize()
    check(y.device.type == "cuda" and y.shape == (3, 10), "a CUDA output of shape (3, 10)")
    check(np.array_equal(y.cpu().numpy(), host), "the device run equals the host run")
    err = np.linalg.norm(y.cpu().numpy() - want) / np.linalg.norm(want)
    check(err < 1e-3, "fp32 engine vs CPU reference: relative L2 %g" % err)

    # A stream of the caller's, preallocated outputs written in place.
    s = torch.cuda.Stream()
    out = torch.full((3, 10), float("nan"), device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        (z,) = sess.run(None, {"input": x}, stream=s, outputs=[out])
    s.synchronize()
    check(np.array_equal(out.cpu().numpy(), host), "preallocated output written in place")

    # The input's storage is read where it is, so it must be row-major.
    try:
        sess.run(None, {"input": x.transpose(2, 3)})
        check(False, "a non-contiguous CUDA feed was accepted")
    except tessel.Error as e:
        check("not contiguous" in str(e), "non-contiguous feed message: %s" % e)
except Exception:
    traceback.print_exc()
    failures.append("exception")

print("%d passed, %d failed" % (0 if failures else 1, 1 if failures else 0))
sys.exit(1 if failures else 0)
