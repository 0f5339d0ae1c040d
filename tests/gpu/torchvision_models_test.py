#!/usr/bin/env python3
"""torchvision's ResNet-50, VGG-16, MobileNet-v2 and Inception-v3 and the super-resolution net,
exported by PyTorch and run by tessel on the GPU, against PyTorch's fp32 outputs.

Each model is built as the benchmark builds it (bench/torch_models.py: usable random weights,
calibrated batch norm), exported with torch.onnx.export (opset 18, the file as the exporter
writes it) and run with `tessel run --device cuda` (fp16) on PyTorch's input. The bar
(bench/accuracy.py): relative L2 error <= 1e-2 and, for the classifiers, the same top-1 class on
at least 31 of 32 images. Classifiers run at batch 32 so that the top-1 count means something;
sr_net at batch 1 and 180x320, a quarter of the benchmark's 720x1280 per side (the same layers
on 1/16 of the pixels keeps the test short; scripts/gpu_models.sh measures 720p). resnet50 also
goes through `tessel compile` -> .tsl -> `tessel run`. First, bench/sr_net.py is checked to be
the network tools/models/gen_models.py writes: loaded with gen_models' weights, it reproduces
gen_models' numpy reference.

Exit status 0 when everything passes, 1 when something fails, 77 (CTest: skipped) on a machine
without PyTorch/torchvision, without a CUDA device or without the tessel binary.

    python3 tests/gpu/torchvision_models_test.py --tessel .device/bin/tessel
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

SKIP = 77
BATCH = 32
SR_SIZE = (180, 320)
VIA_TSL = ("resnet50",)
MODELS = ("resnet50", "vgg16", "mobilenet_v2", "inception_v3", "sr_net")
# Two fp32 evaluations of the same net (numpy, PyTorch on the CPU) differ only in summation
# order, ~1e-6; a different connection (a wrong skip, another pixel-shuffle order) is O(1).
TWIN_MAX_REL_L2 = 1e-4


def missing_requirement(tessel):
    """Why this machine cannot run the test, or None."""
    if not (os.path.isfile(tessel) and os.access(tessel, os.X_OK)):
        return "no tessel binary at %s" % tessel
    try:
        import torch
        import torchvision  # noqa: F401  (bench/torch_models.py builds the models with it)
    except ImportError as e:
        return "PyTorch or torchvision is not installed (%s)" % e
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is false)"
    return None


def tessel_cmd(tessel, *args):
    """(ok, output, seconds) of one tessel command."""
    t0 = time.time()
    r = subprocess.run([tessel] + list(args), capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr, time.time() - t0


def check_sr_twin(source, accuracy):
    """bench/sr_net.py's SRNet holding gen_models' sr_net weights (small input) reproduces
    gen_models' numpy reference output. True when it does."""
    import torch
    from onnx import numpy_helper
    sys.path.insert(0, os.path.join(source, "tools", "models"))
    import gen_models
    from sr_net import SRNet

    built = gen_models.build("sr_net", small=True, ref=True)
    state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
             for t in built.model.graph.initializer}
    net = SRNet()
    net.load_state_dict(state)  # strict: the same parameter names and shapes
    with torch.no_grad():
        got = net(torch.from_numpy(built.ref_input)).numpy()
    if got.shape != built.ref_output.shape:
        print("FAIL sr_net twin: output shape %s, expected %s" % (got.shape, built.ref_output.shape))
        return False
    err = accuracy.rel_l2(got, built.ref_output)
    ok = err <= TWIN_MAX_REL_L2
    print("%s sr_net twin: bench/sr_net.py with gen_models' weights against gen_models' "
          "reference: rel L2 %.1e (<= %.0e)" % ("ok  " if ok else "FAIL", err, TWIN_MAX_REL_L2))
    return ok


def check_model(tessel, name, work, accuracy, tm):
    """Export one model and check tessel's outputs: a list of booleans, one per way it ran."""
    batch = 1 if name == "sr_net" else BATCH
    model = tm.build_model(name)
    x = tm.make_input(name, batch, sr_size=SR_SIZE)
    ref = tm.reference(model, x)
    onnx_path = os.path.join(work, name + ".onnx")
    tm.export_onnx(model, x.cuda(), onnx_path)
    torch16 = tm.output_fp16(*tm.to_fp16(model, x))
    del model  # the GPU memory goes to tessel
    tm.free_cuda()
    inp = os.path.join(work, name + ".input.npy")
    np.save(inp, x.numpy())

    def run(model_path, how):
        """`tessel run` on model_path (.onnx or .tsl), checked against ref; one line."""
        label = "%s (b%d, %s)" % (name, batch, how)
        out_dir = os.path.join(work, "%s.%s.out" % (name, how.replace(" ", "_")))
        ok, log, secs = tessel_cmd(tessel, "run", model_path, "--device", "cuda",
                                   "--input", "input=" + inp, "--output-dir", out_dir)
        if not ok:
            print("FAIL %s: tessel run failed:\n%s" % (label, log[-3000:]))
            return False
        r = accuracy.check(np.load(os.path.join(out_dir, "output.npy")), ref, torch16)
        print("%s %s: %s (%.1f s in tessel)" % ("ok  " if r["ok"] else "FAIL", label,
                                                accuracy.summary(r), secs))
        if not r["ok"]:
            print("     exported graph: %s" % tm.describe_onnx(onnx_path))
        return r["ok"]

    results = [run(onnx_path, "onnx")]
    if name in VIA_TSL:
        tsl = os.path.join(work, name + ".tsl")
        ok, log, _ = tessel_cmd(tessel, "compile", onnx_path, "-o", tsl, "--precision", "fp16")
        if ok:
            results.append(run(tsl, "compiled .tsl"))
        else:
            print("FAIL %s: tessel compile failed:\n%s" % (name, log[-3000:]))
            results.append(False)
    print("     for comparison, PyTorch's own fp16 output: %s"
          % accuracy.summary(accuracy.check(torch16, ref)))
    return results


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", required=True, help="path of the tessel binary")
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(here)),
                    help="repository root (default: this file's)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    args = ap.parse_args()

    why = missing_requirement(args.tessel)
    if why:
        print("SKIPPED: " + why)
        return SKIP
    # bench/ holds the model definitions and the accuracy bar shared with the benchmark; they
    # import torch, so only now.
    sys.path.insert(0, os.path.join(args.source, "bench"))
    import accuracy
    import torch_models as tm

    results = []
    try:
        results.append(check_sr_twin(args.source, accuracy))
    except Exception:
        print("FAIL sr_net twin:\n" + traceback.format_exc())
        results.append(False)
    work = tempfile.mkdtemp(prefix="tessel_torchvision_")
    for name in args.models.split(","):
        try:
            results += check_model(args.tessel, name, work, accuracy, tm)
        except Exception:
            print("FAIL %s:\n%s" % (name, traceback.format_exc()))
            results.append(False)
        tm.free_cuda()
    passed, failed = results.count(True), results.count(False)
    print("torchvision models: %d passed, %d failed" % (passed, failed))
    if failed:
        print("files kept in %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
