#!/usr/bin/env python3
"""Whole-model peers for tessel: torchvision models in PyTorch, exported to ONNX for tessel.

For each model: random weights, a few train-mode batches so that batch-norm statistics are
real, then eval; export with torch.onnx.export (opset 18) to DIR/<name>.onnx; time PyTorch
eager (fp16, channels_last, cudnn.benchmark) replayed as a CUDA graph, median of `reps`
replays; save a random input and PyTorch's fp32 output as .npy for the accuracy check.
Prints `name,pytorch_graph_ms` lines.

Usage: torch_models.py DIR [models] [batch]
"""
import os
import sys

import numpy as np
import torch
import torchvision

from torch_timing import graph_ms_per_call


def main():
    out = sys.argv[1]
    names = (sys.argv[2] if len(sys.argv) > 2 else "resnet50,mobilenet_v2").split(",")
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    for name in names:
        model = getattr(torchvision.models, name)(weights=None).cuda()
        model.train()
        with torch.no_grad():
            for _ in range(3):
                model(torch.randn(8, 3, 224, 224, device="cuda"))
        model.eval()
        x = torch.rand(batch, 3, 224, 224, device="cuda") * 2 - 1
        with torch.no_grad():
            ref = model(x).float().cpu().numpy()
        np.save(os.path.join(out, f"{name}.input.npy"), x.cpu().numpy())
        np.save(os.path.join(out, f"{name}.ref.npy"), ref)
        torch.onnx.export(model, (x,), os.path.join(out, f"{name}.onnx"), opset_version=18,
                          input_names=["input"], output_names=["output"])
        m16 = model.half().to(memory_format=torch.channels_last)
        x16 = x.half().to(memory_format=torch.channels_last)
        with torch.no_grad():
            ms = graph_ms_per_call(lambda: m16(x16))
        print(f"{name},{ms:.4f}", flush=True)


if __name__ == "__main__":
    main()
