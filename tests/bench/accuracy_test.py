#!/usr/bin/env python3
"""bench/accuracy.py's bar, on made-up outputs: rel L2 within 1e-2, or within 1.5x of PyTorch's
own fp16 error on the same input, and top-1 agreement on 31 of 32 images, where an image whose
top-1 moves within 1.5x PyTorch fp16's own logit error (a near tie) counts for neither side."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import accuracy  # noqa: E402


def noisy(ref, rel, seed):
    """ref plus noise of relative L2 `rel`, not moving any row's top-1 class."""
    n = np.random.default_rng(seed).standard_normal(ref.shape)
    return ref + n * rel * np.linalg.norm(ref) / np.linalg.norm(n)


def main():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((32, 10))
    ref[np.arange(32), np.arange(32) % 10] += 50  # a clear top-1 per image
    failures = []

    def expect(what, r, ok):
        if r["ok"] != ok:
            failures.append("%s: ok=%s, expected %s (%s)" % (what, r["ok"], ok, accuracy.summary(r)))

    expect("5e-3, no PyTorch fp16", accuracy.check(noisy(ref, 5e-3, 1), ref), True)
    expect("2e-2, no PyTorch fp16", accuracy.check(noisy(ref, 2e-2, 1), ref), False)
    torch16 = noisy(ref, 1.6e-2, 2)
    expect("2e-2, PyTorch fp16 1.6e-2", accuracy.check(noisy(ref, 2e-2, 1), ref, torch16), True)
    expect("2.5e-2, PyTorch fp16 1.6e-2", accuracy.check(noisy(ref, 2.5e-2, 1), ref, torch16), False)
    small16 = noisy(ref, 1e-3, 2)  # the bar never drops below 1e-2
    expect("8e-3, PyTorch fp16 1e-3", accuracy.check(noisy(ref, 8e-3, 1), ref, small16), True)
    close = ref.copy()
    close[:2, 9] = close[:2].max(axis=1) - 1e-4  # two images with a near tie for top-1
    flipped = close.copy()
    flipped[:2, 9] += 2e-4  # ... which the output breaks the other way: 30/32 < 31
    exact16 = noisy(close, 1e-7, 3)  # PyTorch fp16 that tells the near ties apart
    r = accuracy.check(flipped, close, exact16)
    expect("two top-1 flips", r, False)
    if r.get("top1_same") != 30 or r.get("top1_near_ties") != 0 or r["rel_l2"] > r["rel_l2_bar"]:
        failures.append("two top-1 flips: %s (expected 30/32 within the rel L2 bar)" % accuracy.summary(r))
    # The same flips where PyTorch's own fp16 error on those logits exceeds the gap: near ties.
    r = accuracy.check(flipped, close, noisy(close, 1.6e-2, 2))
    expect("two top-1 flips inside PyTorch fp16's noise", r, True)
    if r.get("top1_same") != 30 or r.get("top1_near_ties") != 2 or "2 near ties" not in accuracy.summary(r):
        failures.append("near ties: %s (expected 30/32 + 2 near ties)" % accuracy.summary(r))
    # Without PyTorch's fp16 output there is no noise to measure: no near ties.
    r = accuracy.check(flipped, close)
    expect("two top-1 flips, no PyTorch fp16", r, False)
    # A flip to a class 2 logits below the reference's top-1, outside the noise (about 0.7 here),
    # stays a disagreement, though the rel L2 is within the bar.
    wide = ref.copy()
    wide[:2, 3] = wide[:2].max(axis=1) - 2.0
    far = wide.copy()
    far[:2, 3] += 2.1
    r = accuracy.check(far, wide, noisy(wide, 1.6e-2, 2))
    expect("two top-1 flips 2 logits away", r, False)
    if r.get("top1_same") != 30 or r.get("top1_near_ties") != 0 or r["rel_l2"] > r["rel_l2_bar"]:
        failures.append("far flips: %s (expected 30/32, no near ties, within the rel L2 bar)" %
                        accuracy.summary(r))
    if "1.5x PyTorch fp16" not in accuracy.summary(accuracy.check(noisy(ref, 2e-2, 1), ref, torch16)):
        failures.append("summary does not name the PyTorch fp16 bar")
    for f in failures:
        print("FAIL " + f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
