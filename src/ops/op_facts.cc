// The op facts table: one row per registered op (ir/op_registry.h, OpFacts). Adding an op means
// adding its row here; a test checks that every registered op has one and no row names an op
// that does not exist.
#include "ops/op_facts.h"

#include <map>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tessel::ops {
namespace {

using ir::FlopRule;
using ir::GpuKernel;
using ir::NhwcForm;
using ir::OpFacts;
using ir::OpKind;

// Row builders: the common shapes of facts, refined per row where an op differs.
OpFacts unary(GpuKernel gpu = GpuKernel::kElementwise, bool fp16 = true) {
  return {.kind = OpKind::kElementwise, .nhwc = NhwcForm::kAgnostic, .gpu = gpu,
          .flops = FlopRule::kPerOutput, .in_place = true, .fp16 = fp16};
}
OpFacts broadcast(GpuKernel gpu = GpuKernel::kElementwise, bool fp16 = true) {
  return {.kind = OpKind::kBroadcast, .nhwc = NhwcForm::kBroadcast, .gpu = gpu,
          .flops = FlopRule::kPerOutput, .fp16 = fp16};
}
OpFacts other(OpKind kind, FlopRule flops = FlopRule::kPerOutput) {
  return {.kind = kind, .flops = flops};
}
OpFacts view() {
  return {.kind = OpKind::kView, .gpu = GpuKernel::kCopy, .flops = FlopRule::kZero,
          .in_place = true, .view = true, .fp16 = true};
}
OpFacts movement(NhwcForm nhwc, GpuKernel gpu = GpuKernel::kCopy) {
  return {.kind = OpKind::kDataMovement, .nhwc = nhwc, .gpu = gpu, .flops = FlopRule::kZero,
          .fp16 = true};
}
OpFacts tessel_form(OpKind kind, const char* form, FlopRule flops) {
  return {.kind = kind, .nhwc = NhwcForm::kTesselForm, .tessel_form = form, .flops = flops,
          .fp16 = true};
}
OpFacts nhwc_op(OpKind kind, GpuKernel gpu, FlopRule flops, std::vector<int> free_inputs = {}) {
  return {.kind = kind, .gpu = gpu, .flops = flops, .fp16 = true,
          .fp16_free_inputs = std::move(free_inputs)};
}
OpFacts quantization(FlopRule flops = FlopRule::kPerOutput) {
  return {.kind = OpKind::kQuantization, .nhwc = NhwcForm::kAxes, .flops = flops};
}
OpFacts shape() { return {.kind = OpKind::kShape, .flops = FlopRule::kZero}; }

const std::map<std::string, OpFacts>& table() {
  static const std::map<std::string, OpFacts> kFacts = [] {
    std::map<std::string, OpFacts> t;
    // Activations and other per-element math, each with its GPU expression (op_elementwise.cc):
    // the activations take fp16 storage, the rest of the math keeps the model's fp32.
    for (const char* op : {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
                           "Elu", "Selu", "Celu", "ThresholdedRelu", "Softsign", "Softplus", "Mish",
                           "Shrink", "Clip"})
      t[op] = unary();
    // Exact in fp16 whatever the input: fp16 storage. The rest of the math computes and stores
    // fp32 (choose-precision makes each such op an fp32 island with Casts at its edges).
    for (const char* op : {"Neg", "Abs", "Floor", "Ceil", "Round", "Sign"}) t[op] = unary();
    for (const char* op : {"Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Sin", "Cos"})
      t[op] = unary(GpuKernel::kElementwise, false);
    t["Gelu"] = unary();
    t["Not"] = unary(GpuKernel::kElementwise, false);
    t["Cast"] = unary(GpuKernel::kCopy);
    t["Cast"].fp16_free_inputs = {0};
    t["Cast"].fp16_free_output = true;
    t["Cast"].flops = FlopRule::kZero;
    t["Identity"] = view();
    t["Identity"].kind = OpKind::kElementwise;
    t["Identity"].nhwc = NhwcForm::kAgnostic;
    t["Dropout"] = unary(GpuKernel::kNone);  // canonicalize removes it (inference)
    t["Dropout"].fp16_free_inputs = {1};
    t["Dropout"].flops = FlopRule::kZero;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "PRelu"}) t[op] = broadcast();
    t["Pow"] = broadcast(GpuKernel::kElementwise, false);
    for (const char* op : {"Max", "Min", "Sum", "Mean"}) t[op] = broadcast();  // variadic
    // Comparisons, logic and the variadic ones: no NHWC form or GPU kernel yet.
    // Comparisons, logic, Where and Mod on the GPU (bool as one byte; float operands only: the
    // integer ones are shape arithmetic); their layout stays as the model wrote it.
    // Comparisons keep fp32 operands (two fp32 values can round to one fp16); Where picks
    // values exactly.
    for (const char* op : {"Mod", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual",
                           "And", "Or", "Xor", "Where"}) {
      t[op] = broadcast(GpuKernel::kElementwise, std::string_view(op) == "Where");
      t[op].nhwc = NhwcForm::kNone;
    }

    // Contractions: the ONNX forms become tessel.Conv / tessel.Gemm (convert-layout).
    t["Conv"] = tessel_form(OpKind::kContraction, "tessel.Conv", FlopRule::kConv);
    t["Gemm"] = tessel_form(OpKind::kContraction, "tessel.Gemm", FlopRule::kGemm);
    // A 2-D ConvTranspose becomes the stride-1 tessel.Conv of its phases (ops/
    // conv_transpose_phases.h); it keeps its own FLOP rule, the work of the ONNX op.
    t["ConvTranspose"] =
        tessel_form(OpKind::kContraction, "tessel.Conv", FlopRule::kConvTranspose);
    // A MatMul of two activations (attention) stays an ONNX MatMul: the op kernel's batched
    // product on CUDA cores.
    t["MatMul"] = {.kind = OpKind::kContraction, .gpu = GpuKernel::kMatMul, .flops = FlopRule::kGemm, .fp16 = true};
    // Free: the fp32 bias B, an int8 input's dequantization scale S, the prologue's P.
    t["tessel.Conv"] = nhwc_op(OpKind::kContraction, GpuKernel::kContraction, FlopRule::kConv, {2, 4, 5});
    t["tessel.Gemm"] = nhwc_op(OpKind::kContraction, GpuKernel::kContraction, FlopRule::kGemm, {2});

    // Windows.
    t["MaxPool"] = tessel_form(OpKind::kWindow, "tessel.MaxPool", FlopRule::kWindow);
    t["AveragePool"] = tessel_form(OpKind::kWindow, "tessel.AveragePool", FlopRule::kWindow);
    t["GlobalAveragePool"] =
        tessel_form(OpKind::kWindow, "tessel.GlobalAveragePool", FlopRule::kPerInput);
    t["GlobalMaxPool"] = tessel_form(OpKind::kWindow, "tessel.GlobalMaxPool", FlopRule::kPerInput);
    t["tessel.MaxPool"] = nhwc_op(OpKind::kWindow, GpuKernel::kWindow, FlopRule::kWindow);
    t["tessel.AveragePool"] = nhwc_op(OpKind::kWindow, GpuKernel::kWindow, FlopRule::kWindow);
    t["tessel.GlobalAveragePool"] =
        nhwc_op(OpKind::kWindow, GpuKernel::kWindow, FlopRule::kPerInput);
    t["tessel.GlobalMaxPool"] = nhwc_op(OpKind::kWindow, GpuKernel::kWindow, FlopRule::kPerInput);
    // LRN's window runs over channels: its NHWC form reads them contiguously; an LRN that stays
    // channels-first (not 4-D) runs the same kernel with a channel stride.
    t["LRN"] = tessel_form(OpKind::kWindow, "tessel.LRN", FlopRule::kPerOutput);
    t["LRN"].gpu = GpuKernel::kWindow;
    t["tessel.LRN"] = nhwc_op(OpKind::kWindow, GpuKernel::kWindow, FlopRule::kPerOutput);

    // Normalization: folded into the preceding conv where it can be (fold-batch-norm).
    t["BatchNormalization"] = {.kind = OpKind::kNormalization, .flops = FlopRule::kPerOutput,
                               .fp16 = true, .fp16_free_inputs = {1, 2, 3, 4}};
    // Per (image, channel) over the pixels: its NHWC form reduces columns of pixels; a
    // channels-first one that stays so (not 4-D) reduces rows.
    t["InstanceNormalization"] =
        tessel_form(OpKind::kNormalization, "tessel.InstanceNormalization", FlopRule::kPerOutput);
    t["InstanceNormalization"].gpu = GpuKernel::kReduce;
    t["tessel.InstanceNormalization"] =
        nhwc_op(OpKind::kNormalization, GpuKernel::kReduce, FlopRule::kPerOutput);
    // Per (image, group of channels) over those channels and the pixels: likewise.
    t["GroupNormalization"] =
        tessel_form(OpKind::kNormalization, "tessel.GroupNormalization", FlopRule::kPerOutput);
    t["GroupNormalization"].gpu = GpuKernel::kReduce;
    t["tessel.GroupNormalization"] = nhwc_op(OpKind::kNormalization, GpuKernel::kReduce, FlopRule::kPerOutput);
    // Over the trailing dims: ConvNeXt's channels-last LayerNorm reads NHWC data as it is.
    t["LayerNormalization"] = {.kind = OpKind::kNormalization, .gpu = GpuKernel::kReduce,
                               .flops = FlopRule::kPerOutput, .fp16 = true};

    // Reductions.
    t["Softmax"] = {.kind = OpKind::kReduction, .nhwc = NhwcForm::kAxes,
                    .gpu = GpuKernel::kReduce, .fp16 = true};
    t["LogSoftmax"] = t["Softmax"];
    t["ReduceMean"] = {.kind = OpKind::kReduction, .nhwc = NhwcForm::kAxes,
                       .gpu = GpuKernel::kReduce, .flops = FlopRule::kPerInput, .fp16 = true};
    // The other float reductions run the same kernels as ReduceMean (op_reduce.cc). Max and
    // Min take fp16 storage as they are (no rounding); the sums keep the model's fp32 (a sum of
    // many activations can pass fp16's 65504).
    for (const char* op : {"ReduceMax", "ReduceMin"}) {
      t[op] = t["ReduceMean"];
      t[op].flops = FlopRule::kPerInput;
    }
    for (const char* op : {"ReduceSum", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                           "ReduceLogSum", "ReduceLogSumExp"}) {
      t[op] = t["ReduceMean"];
      t[op].fp16 = false;
    }
    // ArgMax / ArgMin read fp16 as it is (the comparisons are exact); their output is int64.
    for (const char* op : {"ArgMax", "ArgMin"})
      t[op] = {.kind = OpKind::kReduction, .gpu = GpuKernel::kReduce, .flops = FlopRule::kPerInput, .fp16 = true};
    t["CumSum"] = other(OpKind::kReduction, FlopRule::kPerInput);
    t["CumSum"].gpu = GpuKernel::kReduce;  // float data: fp32 running sums (model's fp32 kept)

    // Data movement and views.
    t["Transpose"] = movement(NhwcForm::kNone);
    t["Transpose"].nhwc = NhwcForm::kNone;
    for (const char* op : {"Concat", "Split", "Slice", "Pad"}) t[op] = movement(NhwcForm::kAxes);
    t["DepthToSpace"] = tessel_form(OpKind::kDataMovement, "tessel.DepthToSpace", FlopRule::kZero);
    t["tessel.DepthToSpace"] = nhwc_op(OpKind::kDataMovement, GpuKernel::kCopy, FlopRule::kZero);
    t["SpaceToDepth"] = tessel_form(OpKind::kDataMovement, "tessel.SpaceToDepth", FlopRule::kZero);
    t["SpaceToDepth"].gpu = GpuKernel::kCopy;  // a channels-first one that stays so
    t["tessel.SpaceToDepth"] = nhwc_op(OpKind::kDataMovement, GpuKernel::kCopy, FlopRule::kZero);
    t["Gather"] = {.kind = OpKind::kDataMovement, .gpu = GpuKernel::kCopy,
                   .flops = FlopRule::kZero, .fp16 = true};
    t["GatherElements"] = {.kind = OpKind::kDataMovement, .gpu = GpuKernel::kCopy, .flops = FlopRule::kZero,
                           .fp16 = true};
    for (const char* op : {"Tile", "Expand"})  // strided copies (stride 0 along repeats)
      t[op] = {.kind = OpKind::kDataMovement, .gpu = GpuKernel::kCopy, .flops = FlopRule::kZero, .fp16 = true};
    for (const char* op : {"Reshape", "Flatten"}) {
      t[op] = view();
      t[op].nhwc = NhwcForm::kAxes;  // NHWC data read directly where the flat order agrees
    }
    for (const char* op : {"Squeeze", "Unsqueeze"}) t[op] = view();
    t["Resize"] = {.kind = OpKind::kDataMovement, .nhwc = NhwcForm::kAxes,
                   .gpu = GpuKernel::kResize, .flops = FlopRule::kPerOutput, .fp16 = true,
                   .fp16_free_inputs = {1, 2}};
    t["Upsample"] = {.kind = OpKind::kDataMovement, .gpu = GpuKernel::kResize};

    // Quantization: the QDQ ops follow the layout (a per-channel axis is remapped) and run as
    // element-wise kernels; the integer contractions run on the CPU reference. Their float
    // side takes fp16 (opset 19's forms): DequantizeLinear's output, whose dtype is its scale's
    // (converted with it). QuantizeLinear's x and scale keep their dtypes: a QDQ model's
    // f32 input is quantized as the model says, with no Cast kernel to fp16 before it (one
    // launch fewer; the f16 rounding could move a value across a rounding tie), and an fp16
    // tensor is read as it is.
    t["QuantizeLinear"] = quantization();
    t["QuantizeLinear"].gpu = GpuKernel::kElementwise;
    t["QuantizeLinear"].fp16 = true;
    t["QuantizeLinear"].fp16_free_inputs = {0, 1};
    t["DequantizeLinear"] = quantization();
    t["DequantizeLinear"].gpu = GpuKernel::kElementwise;
    t["DequantizeLinear"].fp16 = true;
    // fuse-mul-quantize's pair (a squeeze-excite gate's Mul and the QuantizeLinear after it):
    // made after the layout and precision passes, one element-wise kernel.
    // integer-readers makes it before them, from a Mul of an int8 tensor's DequantizeLinear: the
    // scales (inputs 2 and 4) keep their f32.
    t["tessel.MulQuantizeLinear"] = {.kind = OpKind::kQuantization, .gpu = GpuKernel::kElementwise,
                                     .flops = FlopRule::kPerOutput, .fp16 = true,
                                     .fp16_free_inputs = {2, 4}};
    // integer-readers' mean of an int8 tensor, requantized (a squeeze-excite mean, a classifier's
    // pool): the reduction kernels, int8 in and out, its scales kept in f32.
    t["tessel.QLinearReduceMean"] = {.kind = OpKind::kQuantization, .gpu = GpuKernel::kReduce,
                                     .flops = FlopRule::kPerInput, .fp16 = true,
                                     .fp16_free_inputs = {1, 3}};
    t["ConvInteger"] = quantization(FlopRule::kConv);
    t["ConvInteger"].nhwc = NhwcForm::kNone;
    t["QLinearConv"] = quantization(FlopRule::kConv);
    t["QLinearConv"].nhwc = NhwcForm::kNone;
    t["MatMulInteger"] = quantization(FlopRule::kGemm);
    t["MatMulInteger"].nhwc = NhwcForm::kNone;
    t["QLinearMatMul"] = quantization(FlopRule::kGemm);
    t["QLinearMatMul"].nhwc = NhwcForm::kNone;

    // Shape arithmetic: evaluated at compile time.
    for (const char* op : {"Shape", "Size", "Constant", "ConstantOfShape", "Range"}) t[op] = shape();
    t["Shape"].fp16 = true;
    t["Shape"].fp16_free_inputs = {0};
    return t;
  }();
  return kFacts;
}

}  // namespace

void attach_op_facts(ir::OpRegistry& r) {
  for (const auto& [op, facts] : table()) r.set_facts(op, facts);
}

std::vector<std::string> ops_without_facts(const ir::OpRegistry& r) {
  std::vector<std::string> missing;
  for (const std::string& op : r.names())
    if (!table().count(op)) missing.push_back(op);
  return missing;
}

}  // namespace tessel::ops
