#!/usr/bin/env python3
"""Whole-model peers for tessel: torchvision's ResNet-50, VGG-16, MobileNet-v2 and Inception-v3,
and the super-resolution net of shared/seeds/002 (bench/sr_net.py), in PyTorch and exported to
ONNX for tessel.

Random weights made usable (build_model), the way tools/models/gen_models.py makes its own (its
docstring and README say why each step is needed):
  * batch norm: gamma ~ 1 +- 0.1, beta ~ 1 +- 0.1 (gen_models found random nets with calibrated
    batch norm and beta ~ 0 chaotic: a small input change moved the logits as much as another
    input did), the last BN of each residual branch at half gamma;
  * a few batches of random images (random_images) in train mode, so that the running
    statistics are real: the exact mean of the batch statistics (momentum None), not
    torchvision's momentum-0.1 blend with the initial mean 0 / var 1;
  * eval, and the last Linear centred on the mean calibration feature and scaled so that the
    logits vary across inputs with std 2: different images get different top-1 classes, so
    top-1 agreement means something.
sr_net has neither batch norm nor classifier; its initialisation is SRNet.init_weights.

Per model and batch (main): a random input and PyTorch's fp32 output (TF32 off) as .npy; the ONNX
file of torch.onnx.export (opset 18, input "input", output "output", everything else the
exporter's defaults, the file left as written); then, in fp16 channels_last with
cudnn.benchmark, the median milliseconds per call of
  * eager, captured and replayed as a CUDA graph (torch_timing.graph_ms_per_call), and
  * torch.compile(mode="reduce-overhead") (its own CUDA graphs), CUDA events around each call.
Appends `name,batch,eager_graph_ms,compile_ms` to --csv (and prints it); nan where torch.compile
failed, with the reason on stderr. Progress and the exported graphs' op counts go to stderr.

    torch_models.py --out DIR --csv FILE --runs resnet50:1,resnet50:32,sr_net:1
        [--seed N] [--sr-size 720x1280] [--reps 50] [--no-compile]

Writes DIR/<name>_b<batch>.onnx (+ its .data), .input.npy, .ref.npy and .torch16.npy
(PyTorch's own fp16 output, for comparison); use a fresh DIR (an export does not clear an older
run's files). tests/gpu/torchvision_models_test.py uses build_model, make_input, reference,
export_onnx, to_fp16 and output_fp16 from here.
"""
import argparse
import collections
import contextlib
import gc
import math
import os
import sys
import time
import traceback
import zlib

import numpy as np
import torch
import torchvision
from torch import nn
from torchvision.models.mobilenetv2 import InvertedResidual
from torchvision.models.resnet import Bottleneck

from sr_net import SRNet
from torch_timing import graph_ms_per_call

# The model lists (bench/zoo.py, which needs no torch: scripts/gpu_models.sh reads the zoo there).
from zoo import CLASSIFIERS, MODELS, PREDICTOR_TEST, SEGMENTATION, VIDEO, ZOO  # noqa: E402

# A video classifier's clip: frames x height x width (torchvision's video models' training size).
VIDEO_CLIP = (16, 112, 112)

SR_SIZE = (720, 1280)   # the seed's frame
OPSET = 18
# gen_models.py's values.
BN_BETA = 1.0
RESIDUAL_GAMMA = 0.5
LOGIT_STD = 2.0
# Calibration: CALIB_BATCHES train-mode batches of CALIB_BATCH images. 64 images: enough that
# the statistics and the classifier centring do not over-fit them (fresh inputs would get larger,
# peakier logits), cheap on a GPU.
CALIB_BATCHES = 4
CALIB_BATCH = 16


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _generator(seed, name, purpose):
    """A CPU generator per model and purpose: a model's weights and inputs do not depend on which
    other models or batch sizes run."""
    return torch.Generator().manual_seed(zlib.crc32(("%d/%s/%s" % (seed, name, purpose)).encode()))


def input_size(name, sr_size=SR_SIZE):
    """(H, W) of the model's input."""
    if name == "sr_net":
        return tuple(sr_size)
    return (299, 299) if name == "inception_v3" else (224, 224)


def random_images(batch, h, w, gen):
    """Random float32 NCHW images on the CPU: N(0,1) pixel noise at a per-image contrast
    exp(N(0, 0.5^2)), plus a per-image, per-channel offset N(0,1) (a colour cast).

    Why not plain N(0,1) pixels: such images differ only in their noise, which global pooling
    averages away, so the features entering the classifier vary across images by a few percent
    of their common mean. fp16 rounding, relative to that mean, is then amplified as much
    relative to what tells images apart: with fp16 weights and activations (emulated on the
    CPU by rounding PyTorch's), ResNet-50's logits were off by 1.4e-2 (rel L2) with 2 of 32
    top-1 classes changed; with these images, 4.6e-3 and at most 1."""
    offset = torch.randn(batch, 3, 1, 1, generator=gen)
    contrast = torch.exp(0.5 * torch.randn(batch, 1, 1, 1, generator=gen))
    return offset + contrast * torch.randn(batch, 3, h, w, generator=gen)


def model_images(name, batch, gen, sr_size=SR_SIZE):
    """Random inputs of the model's kind: images [N, 3, H, W], or for a video model clips
    [N, 3, T, H, W] whose frames are such images."""
    if name in VIDEO:
        t, h, w = VIDEO_CLIP
        return random_images(batch * t, h, w, gen).reshape(batch, t, 3, h, w).transpose(1, 2).contiguous()
    h, w = input_size(name, sr_size)
    return random_images(batch, h, w, gen)


def make_input(name, batch, seed=0, sr_size=SR_SIZE):
    """The model's input: random images like those it was calibrated on."""
    return model_images(name, batch, _generator(seed, name, "input%d" % batch), sr_size)


@contextlib.contextmanager
def exact_fp32():
    """No TF32 in fp32 cuDNN convolutions inside the block (PyTorch allows it by default; matmuls
    are fp32 by default): references must be fp32 results. The previous setting is restored, so
    that torch.compile later sees PyTorch's defaults."""
    cudnn = torch.backends.cudnn
    if hasattr(cudnn, "conv") and hasattr(cudnn.conv, "fp32_precision"):
        # torch >= 2.9: the new API only. (While it says "ieee", reading the legacy
        # cudnn.allow_tf32 raises; nothing here does.)
        saved = cudnn.conv.fp32_precision
        cudnn.conv.fp32_precision = "ieee"
        try:
            yield
        finally:
            cudnn.conv.fp32_precision = saved
    else:
        saved = cudnn.allow_tf32
        cudnn.allow_tf32 = False
        try:
            yield
        finally:
            cudnn.allow_tf32 = saved


def free_cuda():
    gc.collect()
    torch.cuda.empty_cache()


def residual_branch_ends(model):
    """The last batch norm of each residual branch: ResNet bottlenecks' bn3, and that of the
    MobileNet-v2 inverted residuals that have a skip."""
    for m in model.modules():
        if isinstance(m, Bottleneck):
            yield m.bn3
        elif isinstance(m, InvertedResidual) and m.use_res_connect:
            yield m.conv[-1]


# The batch norms of image and video CNNs.
BATCH_NORMS = (nn.BatchNorm2d, nn.BatchNorm3d)


def init_batch_norm(model, gen):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, BATCH_NORMS):
                c = m.num_features
                m.weight.copy_((1 + 0.1 * torch.randn(c, generator=gen)).clamp(0.5, 1.5))
                m.bias.copy_(BN_BETA + 0.1 * torch.randn(c, generator=gen))
        for bn in residual_branch_ends(model):
            bn.weight.mul_(RESIDUAL_GAMMA)


def calibrate_batch_norm(model, batches):
    """Running statistics := the mean of the batch statistics over `batches` (train mode with
    momentum None, a cumulative average)."""
    bns = [m for m in model.modules() if isinstance(m, BATCH_NORMS)]
    if not bns:
        return
    momenta = [bn.momentum for bn in bns]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        for x in batches:
            model(x)
    for bn, momentum in zip(bns, momenta):
        bn.momentum = momentum


def center_classifier(model, batches):
    """The last Linear: bias = -W mu for the mean feature mu it sees on `batches`, W scaled so
    that its outputs vary with std LOGIT_STD (gen_models' gemm(classifier=True)). Eval mode."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:  # a convolutional classifier (SqueezeNet): nothing to centre
        return
    fc = linears[-1]
    feats = []
    hook = fc.register_forward_hook(lambda mod, args, out: feats.append(args[0].double()))
    try:
        with torch.no_grad():
            for x in batches:
                model(x)
    finally:
        hook.remove()
    f = torch.cat(feats)
    mu = f.mean(dim=0)
    w = fc.weight.detach().double()
    std = ((f - mu) @ w.t()).std()
    if std > 0:
        w = w * (LOGIT_STD / std)
    with torch.no_grad():
        fc.weight.copy_(w)
        fc.bias.copy_(-(w @ mu))


class SegmentationOut(nn.Module):
    """A torchvision segmentation model's "out" tensor alone (its forward returns a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def build_model(name, seed=0):
    """The model in fp32 eval mode on the GPU, with usable random weights (module docstring)."""
    # torchvision's constructors draw their initial weights from the global generator.
    torch.manual_seed(zlib.crc32(("%d/%s/weights" % (seed, name)).encode()))
    if name == "sr_net":
        return SRNet().init_weights(_generator(seed, name, "weights")).cuda().eval()
    if name == "inception_v3":
        # The inference graph: the auxiliary classifier only exists in train mode (where it
        # would also demand 299x299 calibration images); images are used as given.
        model = torchvision.models.inception_v3(weights=None, aux_logits=False,
                                                transform_input=False, init_weights=True)
    elif name in CLASSIFIERS or name in ZOO or name in PREDICTOR_TEST:
        # googlenet's auxiliary classifiers exist in train mode only, like inception_v3's.
        kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        model = getattr(torchvision.models, name)(weights=None, **kwargs)
    elif name in VIDEO:
        model = getattr(torchvision.models.video, name)(weights=None)
    elif name in SEGMENTATION:
        kwargs = {} if name.startswith("lraspp") else {"aux_loss": False}
        model = SegmentationOut(getattr(torchvision.models.segmentation, name)(
            weights=None, weights_backbone=None, **kwargs))
    else:
        raise ValueError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))
    init_batch_norm(model, _generator(seed, name, "batch_norm"))
    model = model.cuda()
    gen = _generator(seed, name, "calibration")
    batches = [model_images(name, CALIB_BATCH, gen).cuda() for _ in range(CALIB_BATCHES)]
    with exact_fp32():
        calibrate_batch_norm(model, batches)
        model.eval()
        if name not in SEGMENTATION:
            center_classifier(model, batches)
    return model


def reference(model, x):
    """The fp32 model's output on x as a numpy array."""
    with exact_fp32(), torch.no_grad():
        return model(x.cuda()).float().cpu().numpy()


def to_fp16(model, x):
    """PyTorch's fast inference form of the model (converted in place) and of its input: fp16,
    channels_last, on the GPU."""
    layout = torch.channels_last_3d if x.dim() == 5 else torch.channels_last
    return (model.half().to(memory_format=layout), x.cuda().half().to(memory_format=layout))


def output_fp16(model16, x16):
    """PyTorch's own fp16 output as float32 numpy: the error a mature fp16 engine makes on these
    random nets, for comparison with tessel's."""
    with torch.no_grad():
        return model16(x16).float().cpu().numpy()


def export_onnx(model, x, path):
    """torch.onnx.export as it comes (opset 18; weights as external data next to `path`). The
    exporter's progress lines go to stderr, keeping stdout for results."""
    with contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x,), path, opset_version=OPSET,
                          input_names=["input"], output_names=["output"])


def describe_onnx(path):
    """What the exporter wrote: opset, op counts, DepthToSpace modes, external initializers."""
    try:
        import onnx
        m = onnx.load(path, load_external_data=False)
    except Exception as e:  # only a log line is lost
        return "(not inspected: %s)" % e
    ops = collections.Counter(n.op_type for n in m.graph.node)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), "?")
    modes = [a.s.decode() for n in m.graph.node if n.op_type == "DepthToSpace"
             for a in n.attribute if a.name == "mode"]
    external = sum(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    return "opset %s, %d nodes (%s)%s, %d of %d initializers external" % (
        opset, len(m.graph.node), ", ".join("%s %d" % kv for kv in ops.most_common()),
        "; DepthToSpace modes %s" % ",".join(modes) if modes else "", external,
        len(m.graph.initializer))


def time_compiled(model16, x16, reps, what, warm=5):
    """Median ms per call of torch.compile(model16, mode="reduce-overhead") on x16, CUDA events
    around each call, after the compiling call and `warm` more (reduce-overhead records its
    CUDA graph during those). nan, with the reason logged, when compilation or a call fails."""
    try:
        torch.compiler.reset()
        compiled = torch.compile(model16, mode="reduce-overhead", dynamic=False)
        # Tells the CUDA-graph trees that a new iteration starts (the previous outputs are dead).
        mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)
        with torch.no_grad():
            t0 = time.perf_counter()
            compiled(x16)
            torch.cuda.synchronize()
            log("%s: torch.compile's first call (compilation) took %.1f s"
                % (what, time.perf_counter() - t0))
            for _ in range(warm):
                mark_step()
                compiled(x16)
            torch.cuda.synchronize()
            ts = []
            for _ in range(reps):
                mark_step()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                compiled(x16)
                end.record()
                end.synchronize()
                ts.append(start.elapsed_time(end))
        ts.sort()
        return ts[len(ts) // 2]
    except Exception as e:  # no triton, an inductor bug...: a nan in the table, not a crash
        log("%s: torch.compile failed: %s: %s" % (what, type(e).__name__, str(e)[:2000]))
        return math.nan
    finally:
        torch.compiler.reset()
        free_cuda()


def run_model(name, batches, args):
    """Files and timings for one model at each batch size; False if an export failed."""
    t0 = time.perf_counter()
    torch.backends.cudnn.benchmark = False
    model = build_model(name, args.seed)
    log("%s: built and calibrated in %.1f s" % (name, time.perf_counter() - t0))
    ok = True
    inputs = {}
    for b in batches:
        base = os.path.join(args.out, "%s_b%d" % (name, b))
        x = make_input(name, b, args.seed, args.sr_size)
        inputs[b] = x
        np.save(base + ".input.npy", x.numpy())
        np.save(base + ".ref.npy", reference(model, x))
        t0 = time.perf_counter()
        try:
            export_onnx(model, x.cuda(), base + ".onnx")
            log("%s b%d: exported in %.1f s: %s" % (name, b, time.perf_counter() - t0,
                                                    describe_onnx(base + ".onnx")))
        except Exception:
            log("%s b%d: export failed:\n%s" % (name, b, traceback.format_exc()))
            ok = False
        free_cuda()
    # The fp32 model is no longer needed: time its fp16 channels_last form.
    torch.backends.cudnn.benchmark = True
    for b in batches:
        what = "%s b%d" % (name, b)
        model16, x16 = to_fp16(model, inputs[b])
        base = os.path.join(args.out, "%s_b%d" % (name, b))
        np.save(base + ".torch16.npy", output_fp16(model16, x16))
        try:
            with torch.no_grad():
                eager = graph_ms_per_call(lambda: model16(x16), reps=args.reps)
        except Exception:
            log("%s: eager timing failed:\n%s" % (what, traceback.format_exc()))
            eager = math.nan
        compiled = math.nan if args.no_compile else time_compiled(model16, x16, args.reps, what)
        line = "%s,%d,%.4f,%.4f" % (name, b, eager, compiled)
        with open(args.csv, "a") as f:
            f.write(line + "\n")
        print(line, flush=True)
        del x16
        free_cuda()
    return ok


def parse_runs(text):
    """'resnet50:1,resnet50:32,sr_net:1' -> {model: [batches]} in order of first mention."""
    runs = {}
    for item in text.split(","):
        name, _, batch = item.strip().partition(":")
        if name not in MODELS:
            raise argparse.ArgumentTypeError("unknown model %r (known: %s)"
                                             % (name, ", ".join(MODELS)))
        if not batch.isdigit() or int(batch) < 1:
            raise argparse.ArgumentTypeError("%r: expected model:batch with batch >= 1" % item)
        runs.setdefault(name, []).append(int(batch))
    return runs


def parse_size(text):
    h, sep, w = text.partition("x")
    if not (sep and h.isdigit() and w.isdigit()):
        raise argparse.ArgumentTypeError("%r: expected HxW" % text)
    return int(h), int(w)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for the .onnx and .npy files")
    ap.add_argument("--csv", required=True, help="append name,batch,eager_ms,compile_ms here")
    ap.add_argument("--runs", required=True, type=parse_runs,
                    help="comma-separated model:batch (models: %s)" % ", ".join(MODELS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sr-size", type=parse_size, default=SR_SIZE, help="sr_net input HxW")
    ap.add_argument("--reps", type=int, default=50, help="timed calls per measurement")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (nan)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log("torch %s, torchvision %s, %s" % (torch.__version__, torchvision.__version__,
                                          torch.cuda.get_device_name()))
    failed = []
    for name, batches in args.runs.items():
        try:
            if not run_model(name, batches, args):
                failed.append(name)
        except Exception:  # the next model still runs
            log("%s failed:\n%s" % (name, traceback.format_exc()))
            failed.append(name)
        free_cuda()
    if failed:
        log("failed: %s" % ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
