#!/usr/bin/env python3
"""Writes a QDQ int8 model with onnxruntime's quantizer, the way a TensorRT user would ask it to.

    python3 bench/quantize_ort.py MODEL.onnx OUT.onnx [--samples 8] [--seed 0] [--calib X.npy]
                                  [--activations s8|u8]

quantize_static in the QDQ format, int8 activations and weights, both symmetric (zero points 0:
TensorRT's semantics, what tessel's int8 kernels take), weights per output channel, min-max
ranges from --samples random normal inputs, or from --calib (a .npy of the model's one input,
as bench/torch_models.py saves it; the models here have random weights: the ranges are as
meaningful as the model). --activations u8: onnxruntime's own default instead, uint8
activations with zero points (asymmetric; tessel runs their convs in fp16 with the Q/DQ pair as
a fake quantization in the epilogue), weights still symmetric int8. The batch dimension of a
dynamic-batch model is calibrated at 1 and stays dynamic. Needs onnxruntime (not on the GPU machine: run it here and carry OUT).
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                      QuantType, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


class RandomReader(CalibrationDataReader):
    def __init__(self, model, samples, seed, calib=None):
        rng = np.random.default_rng(seed)
        inputs = []
        init = {i.name for i in model.graph.initializer}
        for i in model.graph.input:
            if i.name in init:
                continue
            shape = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
            inputs.append((i.name, shape))
        if calib is not None:
            if len(inputs) != 1:
                sys.exit("--calib: the model has %d inputs, expected one" % len(inputs))
            self.batches = iter([{inputs[0][0]: np.load(calib).astype(np.float32)}])
            return
        self.batches = iter([{n: rng.standard_normal(s).astype(np.float32) for n, s in inputs}
                             for _ in range(samples)])

    def get_next(self):
        return next(self.batches, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calib", help="calibrate on this .npy input (one batch) instead")
    ap.add_argument("--activations", choices=("s8", "u8"), default="s8",
                    help="s8: symmetric int8 (TensorRT's semantics); u8: asymmetric uint8, onnxruntime's default")
    args = ap.parse_args()
    u8 = args.activations == "u8"
    with tempfile.TemporaryDirectory() as d:
        pre = os.path.join(d, "pre.onnx")
        quant_pre_process(args.model, pre, skip_symbolic_shape=True)
        model = onnx.load(pre)
        quantize_static(pre, args.out, RandomReader(model, args.samples, args.seed, args.calib),
                        quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8 if u8 else QuantType.QInt8,
                        weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                        extra_options={"ActivationSymmetric": not u8, "WeightSymmetric": True})
    print("wrote %s (%.1f MB)" % (args.out, os.path.getsize(args.out) / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
