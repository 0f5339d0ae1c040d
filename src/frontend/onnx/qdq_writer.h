// Writing QDQ ONNX models: the ONNX side of post-training quantization (src/quantize/). It
// finds the layers a QDQ model can quantize (Conv, Gemm, MatMul with a constant float weight)
// and rewrites a model with QuantizeLinear/DequantizeLinear pairs in TensorRT's placement:
// on the activation input of each chosen layer (symmetric int8, one scale per tensor, zero
// point 0) and a DequantizeLinear on its weight, stored as an int8 initializer with one
// symmetric scale per output channel (per tensor before opset 13, which has no `axis`).
// Biases stay float. Everything else in the model is kept as it was, so onnxruntime and
// TensorRT read the result as they read any QDQ model.
//
// A layer whose input is an activation of a per-channel affine chain (a pre-activation batch
// norm: DenseNet's, ResNet-v2's) also quantizes the chain's input, and where that is a
// Concat, each of the concat's inputs (QuantizableLayer::upstream), as onnxruntime's quantizer
// does around its quantized norms and concats. tessel's fold-qdq then runs the norm and its
// activation as one kernel from int8 to int8, and the concat holds int8 that the convs before
// it store into its slices; with the layer's input alone quantized, the concat and the norm
// stayed float kernels over 16-bit values, plus a QuantizeLinear per layer. A chain whose input
// a Conv, Gemm or MatMul computes is left alone: its norm folds into that layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::onnx {

// A Conv, Gemm or MatMul of the model's graph whose weight is a float initializer.
struct QuantizableLayer {
  int64_t node_index = 0;  // in the graph's node list as stored
  std::string name;        // the node's name, or "<op> #<index>" when it has none
  std::string op;
  std::string activation;  // the float input quantized per tensor (input 0; A of a MatMul)
  std::string weight;      // the initializer quantized per output channel
  std::string output;
  int64_t weight_axis = 0;  // the weight's output-channel axis
  // Float values quantized with the activation (see above): the input x of the chain
  //   activation = Relu|Clip|LeakyRelu?(affine+(x)),  affine: BatchNormalization, or Mul / Add
  //   of a per-channel or scalar constant
  // then, where a Concat computes x, the concat's computed inputs. Empty for most layers.
  std::vector<std::string> upstream;
};

// The quantizable layers of a serialized model, in graph order. `what` names the model in
// errors (a file that is no ONNX model is a UserError).
std::vector<QuantizableLayer> quantizable_layers(const std::string& model_bytes,
                                                 const std::string& what);

// The float values a QDQ model quantizes: the inputs of its QuantizeLinear nodes, in graph
// order.
std::vector<std::string> quantized_values(const std::string& model_bytes, const std::string& what);

// The model with `names` appended to its graph outputs (untyped: the importer infers them),
// so that a run of it returns those intermediate values too. Names already outputs are kept
// once.
std::string with_graph_outputs(const std::string& model_bytes,
                               const std::vector<std::string>& names, const std::string& what);

// One layer to quantize: its index in quantizable_layers() order's node_index, and the
// largest magnitude (the calibrated threshold) of its activation input and of each of its
// upstream values, in order (empty: the activation alone is quantized), and of its output
// (0: not calibrated; the output is then never quantized).
struct QdqLayer {
  int64_t node_index = 0;
  double activation_amax = 0;
  std::vector<double> upstream_amax = {};
  double output_amax = 0;
};

// The model rewritten with Q/DQ on the chosen layers (see above). A quantized activation
// gets one Q/DQ pair that every node reading it takes (a residual Add beside the conv too). A
// Concat of quantized values and chosen layers' outputs, one of them at least quantized, is
// quantized as well, and those outputs with it (to their output_amax; the concat to the
// largest of its inputs' thresholds): then it holds int8 for readers beside the chosen layers
// (DenseNet's block output, read by the final norm), where it was a float copy of dequantized
// values, and the layers store int8 into it;
// a float weight also read by a layer left in float stays as well. `base_dir` resolves external
// initializer data, which the result holds inline. Needs opset 10 (the first with QuantizeLinear):
// an older model is a UserError.
std::string write_qdq_model(const std::string& model_bytes, const std::vector<QdqLayer>& layers,
                            const std::string& what, const std::string& base_dir);

}  // namespace tessel::onnx
