#!/usr/bin/env python3
"""Single-GEMM ONNX models for `tessel tune --log` (bench/rank_fit.py's tune_data): an fp32 input
times a constant weight of random values, the shapes no model log has (large square GEMMs, wide
ones, FC layers whose weights stream from DRAM).

    gemm_models.py OUT_DIR      writes OUT_DIR/<name>.onnx for each shape below
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

# name, M, N, K, and whether the weight is stored [N, K] (Gemm transB = 1, a Linear layer) or
# [K, N] (MatMul).
SHAPES = [("sq4096", 4096, 4096, 4096, False), ("sq8192", 8192, 8192, 8192, False),
          ("g4096_1024_4096", 4096, 1024, 4096, False), ("g2048_8192_2048", 2048, 8192, 2048, False),
          ("fc6_b32", 32, 4096, 25088, True), ("fc_b64_4096_9216", 64, 4096, 9216, True)]


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(1)
    for name, m, n, k, trans_b in SHAPES:
        b = rng.standard_normal((n, k) if trans_b else (k, n), dtype=np.float32) * 0.02
        node = (h.make_node("Gemm", ["a", "b"], ["c"], transB=1) if trans_b
                else h.make_node("MatMul", ["a", "b"], ["c"]))
        graph = h.make_graph([node], name, [h.make_tensor_value_info("a", T.FLOAT, [m, k])],
                             [h.make_tensor_value_info("c", T.FLOAT, [m, n])], [nh.from_array(b, "b")])
        onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), f"{out}/{name}.onnx")
        print("wrote", name)


if __name__ == "__main__":
    main()
