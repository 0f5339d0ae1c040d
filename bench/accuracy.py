"""tessel's output against PyTorch's fp32 output: relative L2 error and, for classifiers, top-1
agreement, with the bar a model must clear. One definition for scripts/gpu_models.sh's report
(bench/models_report.py) and tests/gpu/torchvision_models_test.py. numpy only."""
import math

import numpy as np

MAX_REL_L2 = 1e-2          # fp16 storage against an fp32 reference
TORCH_FP16_FACTOR = 1.5    # ... or within 1.5x of PyTorch's own fp16 error on the same input
MIN_TOP1_FRACTION = 31 / 32  # same top-1 class on at least 31 of 32 images


def rel_l2(got, ref):
    """||got - ref|| / ||ref|| in float64 (nan when got has a nan; 0/0 reads as 0)."""
    got = np.asarray(got, np.float64).ravel()
    ref = np.asarray(ref, np.float64).ravel()
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(got - ref) / (denom if denom > 0 else 1.0))


def top1_needed(images):
    """Images that must keep their top-1 class: 31 of 32, and every one of fewer than 32."""
    return math.ceil(MIN_TOP1_FRACTION * images)


def rel_l2_bar(torch16_rel_l2=None):
    """The largest rel L2 that passes: MAX_REL_L2, or TORCH_FP16_FACTOR x PyTorch's own fp16
    error where that is known and larger (a deep fp16 network's error is the format's, not the
    compiler's: EfficientNet-b4's PyTorch fp16 output is 1.6e-2 from its fp32 one)."""
    if torch16_rel_l2 is None or not math.isfinite(torch16_rel_l2):
        return MAX_REL_L2
    return max(MAX_REL_L2, TORCH_FP16_FACTOR * torch16_rel_l2)


def check(got, ref, torch16=None):
    """A dict: `ok`, and `problem` (a sentence) or `rel_l2` and `rel_l2_bar`; for an (images,
    classes) output also `top1_same`, `top1_of`, `top1_needed`, `top1_near_ties` (images whose
    top-1 differs within PyTorch fp16's own noise: they count towards `top1_needed`) and
    `ref_classes` (distinct top-1 classes in the reference: with one class for all images,
    top-1 agreement would say little).
    torch16: PyTorch's own fp16 output on the same input, which sets the alternative bar."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return {"ok": False, "problem": "output shape %s, expected %s" % (got.shape, ref.shape)}
    r = {"rel_l2": rel_l2(got, ref)}
    if torch16 is not None and np.asarray(torch16).shape == ref.shape:
        r["torch16_rel_l2"] = rel_l2(torch16, ref)
    r["rel_l2_bar"] = rel_l2_bar(r.get("torch16_rel_l2"))
    ok = math.isfinite(r["rel_l2"]) and r["rel_l2"] <= r["rel_l2_bar"]
    if ref.ndim == 2 and ref.shape[1] > 1:
        ref_top1, got_top1 = ref.argmax(axis=1), got.argmax(axis=1)
        same = int((got_top1 == ref_top1).sum())
        r.update(top1_same=same, top1_of=int(ref.shape[0]), top1_needed=top1_needed(ref.shape[0]),
                 ref_classes=int(np.unique(ref_top1).size))
        # A near tie: the reference's logit of the class chosen instead is within
        # TORCH_FP16_FACTOR x PyTorch fp16's own largest logit error on that image of the
        # reference's top-1 logit. fp16 itself cannot tell such classes apart (random-weight
        # RegNets have several per batch), so these images count for neither side.
        ties = 0
        if "torch16_rel_l2" in r:
            rows = np.arange(ref.shape[0])
            ref64, t16 = ref.astype(np.float64), np.asarray(torch16, np.float64)
            noise = TORCH_FP16_FACTOR * np.abs(t16 - ref64).max(axis=1)
            gap = ref64[rows, ref_top1] - ref64[rows, got_top1]
            ties = int(((got_top1 != ref_top1) & (gap <= noise)).sum())
        r["top1_near_ties"] = ties
        ok = ok and same + ties >= r["top1_needed"]
    r["ok"] = bool(ok)
    return r


def summary(r):
    """One line for a check() result: 'rel L2 1.3e-03 (<= 1e-02), same top-1 32/32 (>= 31; the
    reference has 27 classes)'."""
    if "problem" in r:
        return r["problem"]
    bar = r.get("rel_l2_bar", MAX_REL_L2)
    s = "rel L2 %.2e (<= %.2g%s)" % (r["rel_l2"], bar, "" if bar == MAX_REL_L2 else
                                     ": 1.5x PyTorch fp16's %.2e" % r["torch16_rel_l2"])
    if "top1_same" in r:
        ties = r.get("top1_near_ties", 0)
        s += ", same top-1 %d/%d%s (>= %d; the reference has %d classes)" % (
            r["top1_same"], r["top1_of"],
            " + %d near ties (within 1.5x PyTorch fp16's own logit error)" % ties if ties else "",
            r["top1_needed"], r["ref_classes"])
    return s
