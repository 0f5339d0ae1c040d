// Post-training quantization of an ONNX model (`tessel quantize`): calibrate the activation
// ranges on the CPU reference, quantize every Conv, Gemm and MatMul with a constant weight
// (symmetric int8, per-tensor activations, per-output-channel weights), measure how much each
// layer alone costs against fp32, and keep the most sensitive layers in float until the
// whole model meets the accuracy budget (then try each of them but the last back in int8,
// keeping those the budget allows). The result is a QDQ ONNX model
// (frontend/onnx/qdq_writer.h) that onnxruntime and TensorRT read as well as tessel. Besides
// each layer's input, the values before a pre-activation norm and a concat around it (the
// layer's upstream values, qdq_writer.h) are calibrated and quantized with the layer, and a
// concat of quantized values takes its layers' calibrated outputs with it.
//
// Agreement with fp32 is measured on the first graph output over the calibration set: for a
// classifier the fraction of rows whose top-1 class is unchanged; otherwise the relative L2
// error (Options::metric).
#pragma once

#include <string>
#include <vector>

#include "core/progress.h"
#include "core/tensor.h"
#include "frontend/onnx/importer.h"
#include "quantize/calibration.h"

namespace tessel::quantize {

// How agreement with fp32 is measured: top-1 (classifiers), relative L2, or top-1 where the
// first output has the shape (N, classes) with classes > 1 and relative L2 elsewhere.
enum class Metric { kAuto, kTop1, kRelL2 };

struct Options {
  Method method = Method::kEntropy;
  Metric metric = Metric::kAuto;
  double percentile = 99.99;  // for Method::kPercentile, in percent
  // Budgets: the largest top-1 agreement loss (a fraction, 0.01 = 1%) for classifiers, the
  // largest relative L2 error of the output otherwise.
  double max_top1_drop = 0.01;
  double max_rel_l2 = 0.05;
  onnx::ImportOptions import;  // batch and input shapes of the model
  int threads = 0;             // calibration samples run at once; 0: one per hardware thread
  ProgressFn progress;
};

// How far a quantized model's output is from fp32 over the calibration set.
struct Agreement {
  double top1_drop = 0;  // classifiers: 1 - fraction of rows with the fp32 top-1 class
  double rel_l2 = 0;     // relative L2 error of the whole output
};

struct LayerReport {
  std::string name, op;
  double input_amax = 0;  // calibrated threshold of the activation input
  double output_max = 0;  // largest |output| seen in calibration
  Agreement alone;        // this layer alone in int8, everything else float
  bool int8 = false;      // in int8 in the written model (false: kept float)
};

struct Result {
  std::string model_bytes;  // the QDQ model, serialized
  bool classifier = false;
  int64_t samples = 0;  // calibration samples (runs), each of the model's batch
  Agreement all_int8;   // every quantizable layer in int8
  Agreement final;      // the written model
  std::vector<LayerReport> layers;
  // Values the written model quantizes besides its int8 layers' inputs (a pre-activation
  // norm's input, the concats around it: qdq_writer.h), in graph order.
  std::vector<std::string> also_quantized;
};

// The budget is met when the metric of the model's kind is within its limit.
bool within_budget(const Agreement& a, bool classifier, const Options& options);

// Quantizes the model at `path`. `calibration` holds one entry per sample, each one tensor per
// graph input in order, of the imported graph's input types. UserErrors: an unreadable or
// invalid model, a model with no quantizable layer, an empty calibration set, inputs of the
// wrong type, activations that calibrate to non-finite values.
Result quantize_model(const std::string& path, const std::vector<std::vector<Tensor>>& calibration,
                      const Options& options);

}  // namespace tessel::quantize
