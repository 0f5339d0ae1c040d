// Epilogues as data: per-element steps applied to the fp32 accumulator C[m, n] before the
// store, and the store map that places (m, n) in the output buffer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tessel::contraction {

enum class EpilogueOpKind {
  kScale,        // v *= scale[n]             (per output channel; operand = vector index)
  kBias,         // v += bias[n]
  kRelu,         // max(v, 0)
  kLeakyRelu,    // v < 0 ? alpha * v : v
  kClip,         // min(max(v, alpha), beta)  (relu6: alpha = 0, beta = 6)
  kSigmoid,      // 1 / (1 + exp(-v))
  kHardSwish,    // v * clip(v / 6 + 0.5, 0, 1)
  kSilu,         // v * sigmoid(v)
  kGelu,         // 0.5 * v * (1 + erf(v / sqrt(2)))
  kGeluTanh,     // 0.5 * v * (1 + tanh(sqrt(2/pi) * (v + 0.044715 v^3)))
  kResidualAdd,  // v += R[store_index(m, n)]  (R has the output's layout and dtype)
  // int8 (QDQ models, TensorRT semantics: symmetric, zero points 0):
  kMul,                // v *= alpha                (a DequantizeLinear after a fused quantize)
  kQuantize,           // v = clamp(rint(v / alpha), -128, 127): QuantizeLinear to int8 by the
                       //     scale alpha; the value stays a float (integral) until the store.
                       //     The kernels multiply by the f32 reciprocal: one step off the
                       //     division where the quotient is within an ulp of a tie
  kScaledResidualAdd,  // v += alpha * R[store_index(m, n)] (R int8, dequantized by its scale)
  kTanh,               // tanh(v)
  kMish,               // v * tanh(softplus(v))
  kHardSigmoid,        // clip(alpha * v + beta, 0, 1)
  kElu,                // v < 0 ? alpha * (e^v - 1) : v
  kRound,              // v = rint(v / alpha): an asymmetric QuantizeLinear's rounding, not
                       //     saturated (the clip after it takes qmin - z, qmax - z), before
                       //     a kMul back to float: a fake quantization. By the reciprocal, as
                       //     kQuantize: one step off the division within an ulp of a tie
  kSiluQuantizedGate,  // v * (min(rint(sigmoid(v) / alpha), 127) * beta): a SiLU whose gate is
                       //     quantized to int8 and dequantized (a QDQ model's; by the
                       //     reciprocal, as kQuantize)
  kQuantizeUnit,       // v = alpha + rint(clamp(v, 0, 1) * (beta - alpha)): a saturated rounding
                       //     to the integers of [alpha, beta] of a value the step before scaled
                       //     into [0, 1] (ops::fold_unit_quantize); the kernels saturate in that
                       //     step's FFMA (fma.rn.sat) and round by one FFMA with the magic number
};

struct EpilogueStep {
  EpilogueOpKind kind;
  float alpha = 0.0f;
  float beta = 0.0f;
  int operand = -1;  // index into the kernel's extra pointer operands, for scale/bias/residual
};

// Where C[b, m, n] goes. m is decomposed as (image, oh, ow) for conv-like outputs of shape
// [images, out_h, out_w, n] (NHWC); for GEMMs out_h = 1 and out_w = M.
struct StoreMap {
  enum class Kind {
    kPlain,         // out[m, n] row-major with row stride `ld` (>= n)
    kChannelSlice,  // out[m, channel_offset + n] in a buffer of `ld` channels (zero-copy concat)
    kDepthToSpace,  // NHWC depth_to_space by `block`: n = c*block^2 + i*block + j (CRD) or
                    // (i*block + j)*C + c (DCR); out[img, oh*block+i, ow*block+j, c]
    kNchw,          // channels first: out[img, n, oh, ow] (a graph output in ONNX's layout)
    kDepthToSpaceNchw,  // kDepthToSpace channels first: out[img, c, oh*block+i, ow*block+j]
  };
  // The NCHW kinds are contiguous along m (within an image row), not along n: the kernels
  // store them with consecutive threads walking m (tessel_epilogue.cuh). They take no ld,
  // channel_offset or batch dims.
  Kind kind = Kind::kPlain;
  int64_t ld = 0;  // 0: ld = n
  int64_t channel_offset = 0;
  int64_t out_h = 1, out_w = 0;  // conv output spatial extents (depth_to_space and NCHW)
  int block = 1;
  bool dcr = false;
};

// A prologue of A (a tessel.Conv's 'prologue', fuse-prologue): the kernel reads
// act(A * P[0, c] + P[1, c]) instead of A, with c = k % channels (A's channel: conv K dims are
// (kh, kw, ci), ci innermost), applied to the elements it loads and never to the zeros it
// fills in for padding. P is f32 [2, channels], the extra operand `operand`.
struct OperandPrologue {
  bool relu = false;
  int operand = -1;
  int64_t channels = 0;
};

// The stored value is C's (maps.c.dtype: the contraction's own dtype) converted to out_dtype.
// int8 contractions (int8_operands: B i8, A i8 or u8; acc_dtype i32): the steps start from
// float(acc), exactly converted where |acc| < 2^24 and rounded to nearest beyond; their C dtype
// is f32. An i8 (u8) out_dtype stores the value saturated to [-128, 127] ([0, 255]) and rounded
// to nearest even (a kQuantize step, or kRound and an integral clip, makes it integral first).
// residual_dtype is R's dtype where it differs from out_dtype (an int8 or uint8 residual of a
// float output: kScaledResidualAdd).
// Where C's dtype is a 16-bit float and out_dtype another dtype, the kernel rounds the fp32
// result to C's dtype first, as the Cast it replaces would (a fused "store f32" of an fp16
// conv writes exactly the fp16 values widened).
struct Epilogue {
  std::vector<EpilogueStep> steps;
  StoreMap store;
  DType out_dtype = DType::kF16;
  // The residual operand's dtype where it is not out_dtype (an i8 or u8 R of kScaledResidualAdd).
  std::optional<DType> residual_dtype;
  // Fused into A's loads, not after the contraction; here because it travels with the
  // epilogue's operands (extra pointers) from lowering to the generator.
  std::optional<OperandPrologue> a_prologue;
  std::string str() const;
};

// Bytes the epilogue reads from memory per output element besides the accumulator: the
// residual's element (f16 2, an int8 residual 1), 0 without one. Per-channel operands (scale,
// bias) are per column, not per element, and stay in cache.
int64_t read_bytes_per_output(const Epilogue& e);
// Transcendental activations (sigmoid, SiLU, GELU, tanh, Mish, ELU) per output: each costs the
// epilogue tens of instructions per element, which the TMA kernel's one warpgroup per tile
// finishes with a quarter of the warps of the mma.sync kernels (kernels::learned_factor).
int transcendentals_per_output(const Epilogue& e);

// What of an epilogue changes its kernel's time, as text: an A prologue (which only the
// mma.sync kernel applies), the bytes read per output, the store's kind (not its offsets), the
// output dtype, and the transcendental activations per output where there are any ("math1":
// ConvNeXt-T's GELU GEMMs measured 1.4x slower on the TMA kernel than on mma.sync, where
// ResNet-50's ReLU convolutions ran up to 1.9x faster); scales and cheap activations (ReLU, clip, hard-swish) cost about the
// same and are not in it. "prologue:read2:plain:f16", "read0:plain:f16:math1". The tuning
// database keys records by it (compiler/tuning_db.h).
std::string cost_str(const Epilogue& e);

}  // namespace tessel::contraction
