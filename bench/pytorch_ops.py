#!/usr/bin/env python3
"""PyTorch's time for each conv2d / GEMM workload of the CSV files, as a second vendor
reference beside `tessel bench-op` (which calls cuDNN and cuBLASLt directly).

conv2d: torch.nn.functional.conv2d on fp16 channels_last tensors with cudnn.benchmark
(PyTorch's cuDNN graph-API path); GEMM: torch.matmul on fp16. The library picks its
algorithm during the warm-up; then a CUDA graph of `batch` calls is replayed and timed with
CUDA events, so Python's per-call cost is not measured. Prints `name,us` lines.

Usage: pytorch_ops.py CONV2D_CSV GEMM_CSV [name filter] > pytorch.csv
"""
import csv
import sys

import torch
import torch.nn.functional as F

from torch_timing import graph_ms_per_call


def timed(fn):
    """Microseconds per call: a CUDA graph of 10 calls, median of 15 replays."""
    return graph_ms_per_call(fn, calls=10, reps=15) * 1000.0


def rows(path):
    return csv.reader(line for line in open(path) if line.strip() and not line.startswith("#"))


def main():
    conv_csv, gemm_csv = sys.argv[1], sys.argv[2]
    filt = sys.argv[3] if len(sys.argv) > 3 else ""
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    for row in rows(conv_csv):
        name, n, h, w, ci, co, kh, kw, s, p, d, g = row[0], *map(int, row[1:])
        if filt not in name:
            continue
        x = (torch.rand(n, ci, h, w, device="cuda", dtype=torch.float16) * 2 - 1).to(
            memory_format=torch.channels_last)
        wt = (torch.rand(co, ci // g, kh, kw, device="cuda", dtype=torch.float16) * 2 - 1).to(
            memory_format=torch.channels_last)
        print(f"{name},{timed(lambda: F.conv2d(x, wt, None, s, p, d, g)):.2f}", flush=True)
        del x, wt
    for row in rows(gemm_csv):
        name, m, n, k, lay = row[0], int(row[1]), int(row[2]), int(row[3]), row[4]
        if filt not in name:
            continue
        a = (torch.rand(k, m, device="cuda", dtype=torch.float16).t() if lay[0] == "T"
             else torch.rand(m, k, device="cuda", dtype=torch.float16))
        b = (torch.rand(n, k, device="cuda", dtype=torch.float16).t() if lay[1] == "T"
             else torch.rand(k, n, device="cuda", dtype=torch.float16))
        print(f"{name},{timed(lambda: torch.matmul(a, b)):.2f}", flush=True)


if __name__ == "__main__":
    main()
