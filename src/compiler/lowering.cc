// contraction_of: tessel.Conv / tessel.Gemm attributes -> index maps + GPU epilogue.
#include "compiler/lowering.h"

#include <algorithm>

#include "kernels/contraction/ops_maps.h"
#include "core/error.h"
#include "ir/op_registry.h"
#include "ops/tessel_epilogue.h"
#include "passes/plan_memory.h"

namespace tessel::compiler {
namespace {

using contraction::EpilogueOpKind;

EpilogueOpKind gpu_kind(ops::EpilogueKind k) {
  switch (k) {
    case ops::EpilogueKind::kRelu: return EpilogueOpKind::kRelu;
    case ops::EpilogueKind::kLeakyRelu: return EpilogueOpKind::kLeakyRelu;
    case ops::EpilogueKind::kClip: return EpilogueOpKind::kClip;
    case ops::EpilogueKind::kSigmoid: return EpilogueOpKind::kSigmoid;
    case ops::EpilogueKind::kHardSwish: return EpilogueOpKind::kHardSwish;
    case ops::EpilogueKind::kSilu: return EpilogueOpKind::kSilu;
    case ops::EpilogueKind::kSiluQuantizedGate: return EpilogueOpKind::kSiluQuantizedGate;
    case ops::EpilogueKind::kGelu: return EpilogueOpKind::kGelu;
    case ops::EpilogueKind::kGeluTanh: return EpilogueOpKind::kGeluTanh;
    case ops::EpilogueKind::kAddResidual: return EpilogueOpKind::kResidualAdd;
    case ops::EpilogueKind::kMul: return EpilogueOpKind::kMul;
    case ops::EpilogueKind::kQuantize: return EpilogueOpKind::kQuantize;
    case ops::EpilogueKind::kAddScaledResidual: return EpilogueOpKind::kScaledResidualAdd;
    case ops::EpilogueKind::kTanh: return EpilogueOpKind::kTanh;
    case ops::EpilogueKind::kMish: return EpilogueOpKind::kMish;
    case ops::EpilogueKind::kHardSigmoid: return EpilogueOpKind::kHardSigmoid;
    case ops::EpilogueKind::kElu: return EpilogueOpKind::kElu;
    case ops::EpilogueKind::kRound: return EpilogueOpKind::kRound;
    case ops::EpilogueKind::kQuantizeUnit: return EpilogueOpKind::kQuantizeUnit;
  }
  TESSEL_ICHECK(false) << "unhandled epilogue kind " << static_cast<int>(k);
  return EpilogueOpKind::kRelu;
}

bool has_input(const ir::Node& n, int i) {
  return static_cast<int>(n.inputs.size()) > i && n.inputs[i] != ir::kNoValue;
}

// The dtype C is computed in: W's, f32 for int8 (the dequantized value).
DType node_dtype(const ir::Graph& g, const ir::Node& n) {
  const DType w = g.type(n.inputs.at(1)).dtype;
  return w == DType::kI8 ? DType::kF32 : w;
}

// [int8: the dequantization scale,] bias, then the node's steps; operands numbered in the
// order they are first read.
contraction::Epilogue epilogue_of(const ir::Graph& g, const ir::Node& n,
                                  std::vector<int>& extra_inputs) {
  contraction::Epilogue e;
  e.out_dtype = g.type(n.outputs.at(0)).dtype;  // out_dtype, or the node's dtype
  if (has_input(n, kScaleInput)) {
    e.steps.push_back({.kind = EpilogueOpKind::kScale, .operand = int(extra_inputs.size())});
    extra_inputs.push_back(kScaleInput);
  }
  if (has_input(n, kBiasInput)) {
    e.steps.push_back({.kind = EpilogueOpKind::kBias, .operand = int(extra_inputs.size())});
    extra_inputs.push_back(kBiasInput);
  }
  for (const ops::EpilogueStep& s : ops::read_epilogue(n)) {
    contraction::EpilogueStep step{.kind = gpu_kind(s.kind),
                                   .alpha = static_cast<float>(s.alpha),
                                   .beta = static_cast<float>(s.beta)};
    if (s.kind == ops::EpilogueKind::kAddResidual || s.kind == ops::EpilogueKind::kAddScaledResidual) {
      TESSEL_USER_CHECK(has_input(n, kResidualInput))
          << n.label() << ": epilogue step '" << ops::epilogue_name(s.kind) << "' needs the residual input R";
      step.operand = static_cast<int>(extra_inputs.size());
      extra_inputs.push_back(kResidualInput);
      // The kernel reads R in its own dtype (the op: in the node's; or i8 when scaled).
      e.residual_dtype = g.type(n.inputs[kResidualInput]).dtype;
    }
    e.steps.push_back(step);
  }
  if (const std::optional<ops::Prologue> pro = ops::read_prologue(n)) {
    // (A requantizing prologue is the depthwise kernels' alone: plan_node never lowers it.)
    TESSEL_ICHECK(!pro->requantize) << n.label() << ": a requantize prologue on a contraction";
    TESSEL_USER_CHECK(has_input(n, kPrologueInput))
        << n.label() << ": prologue '" << n.get_string("prologue", "") << "' needs its operand P (input 5)";
    e.a_prologue = contraction::OperandPrologue{
        .relu = pro->relu,
        .operand = static_cast<int>(extra_inputs.size()),
        .channels = g.type(n.inputs[kPrologueInput]).shape.at(1)};
    extra_inputs.push_back(kPrologueInput);
  }
  return e;
}

// The GPU epilogue reads R at the stored positions (contraction/epilogue.h), the op in the
// pre-store layout: the two agree only for a plain store. (R's dtype is the epilogue's
// residual_dtype, whatever the output's.)
void check_residual_store(const ir::Node& n, const ContractionSpec& spec,
                          bool plain_store) {
  const bool residual = std::find(spec.extra_inputs.begin(), spec.extra_inputs.end(),
                                  kResidualInput) != spec.extra_inputs.end();
  if (!residual) return;
  TESSEL_USER_CHECK(plain_store)
      << n.label() << ": a residual add before a " << n.get_string("store", "nhwc")
      << " store has no GPU epilogue (the kernel reads R in the stored layout)";

}

// Two entries of an ints attribute, or its default.
std::vector<int64_t> pair_attr(const ir::Node& n, const char* key, size_t count, int64_t def) {
  std::vector<int64_t> v = n.get_ints(key, std::vector<int64_t>(count, def));
  TESSEL_USER_CHECK(v.size() == count)
      << n.label() << ": attribute '" << key << "' has " << v.size() << " values, expected "
      << count;
  return v;
}

ContractionSpec conv_spec(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& x = g.type(n.inputs.at(0));
  const ir::TensorType& w = g.type(n.inputs.at(1));
  const bool nchw_input = ops::read_nchw_input(n);
  TESSEL_USER_CHECK(x.shape.size() == 4 && w.shape.size() == 4)
      << n.label() << ": expected " << (nchw_input ? "NCHW" : "NHWC")
      << " X and OHWI W of rank 4, got " << x.str() << " and " << w.str();
  // X's [N, H, W, C] in its memory order.
  const std::vector<int> nhwc =
      nchw_input ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{0, 1, 2, 3};
  contraction::Conv2dParams p;
  p.n = x.shape[nhwc[0]], p.h = x.shape[nhwc[1]], p.w = x.shape[nhwc[2]], p.ci = x.shape[nhwc[3]];
  p.co = w.shape[0], p.kh = w.shape[1], p.kw = w.shape[2];
  const std::vector<int64_t> strides = pair_attr(n, "strides", 2, 1);
  const std::vector<int64_t> dilations = pair_attr(n, "dilations", 2, 1);
  const std::vector<int64_t> pads = pair_attr(n, "pads", 4, 0);
  p.stride_h = strides[0], p.stride_w = strides[1];
  p.dilation_h = dilations[0], p.dilation_w = dilations[1];
  p.pad_top = pads[0], p.pad_left = pads[1], p.pad_bottom = pads[2], p.pad_right = pads[3];
  p.groups = n.get_int("group", 1);
  // X held in place in a Concat's buffer (passes/plan_memory.h: nested Concats, DenseNet's
  // blocks): read where it lies, rows of the buffer's channels.
  if (!nchw_input)
    if (const std::optional<passes::SliceOf> slice = passes::channel_slice_of(g, n.inputs[0])) {
      p.x_channels = slice->channels;
      p.x_channel_offset = slice->channel_offset;
    }
  TESSEL_USER_CHECK(p.groups >= 1 && p.ci % p.groups == 0 && p.co % p.groups == 0 &&
                    w.shape[3] * p.groups == p.ci)
      << n.label() << ": group " << p.groups << " does not split X " << x.str() << " and W "
      << w.str();

  ContractionSpec spec;
  // C in the node's dtype (W's): the epilogue converts it to out_dtype. An NCHW X keeps its
  // own dtype: the kernel converts it as it reads it.
  const contraction::OperandDTypes types{x.dtype, w.dtype, node_dtype(g, n)};
  spec.maps = nchw_input ? contraction::conv2d_nchw_input_maps(p, types)
                         : contraction::conv2d_nhwc_maps(p, types);
  spec.epilogue = epilogue_of(g, n, spec.extra_inputs);
  const ops::StoreMap store = ops::read_store(n);
  check_residual_store(n, spec, store.kind == ops::StoreMap::Kind::kNhwc);
  contraction::StoreMap& st = spec.epilogue.store;
  switch (store.kind) {
    case ops::StoreMap::Kind::kNhwc:
      st.kind = contraction::StoreMap::Kind::kPlain;
      break;
    case ops::StoreMap::Kind::kNchw:
      st.kind = contraction::StoreMap::Kind::kNchw;
      break;
    case ops::StoreMap::Kind::kDepthToSpace:
      st.kind = contraction::StoreMap::Kind::kDepthToSpace;
      break;
    case ops::StoreMap::Kind::kDepthToSpaceNchw:
      st.kind = contraction::StoreMap::Kind::kDepthToSpaceNchw;
      break;
  }
  if (store.kind != ops::StoreMap::Kind::kNhwc) {
    st.out_h = p.out_h();
    st.out_w = p.out_w();
  }
  if (store.depth_to_space()) {
    st.block = static_cast<int>(store.block);
    st.dcr = store.dcr;
  }
  return spec;
}

ContractionSpec gemm_spec(const ir::Graph& g, const ir::Node& n) {
  const ir::TensorType& a = g.type(n.inputs.at(0));
  const ir::TensorType& w = g.type(n.inputs.at(1));
  const contraction::GemmLayout layout{.trans_a = n.get_int("trans_a", 0) == 1,
                                       .trans_b = n.get_int("trans_b", 1) == 1};
  TESSEL_USER_CHECK(a.shape.size() == 2 && w.shape.size() == 2)
      << n.label() << ": expected A and W of rank 2, got " << a.str() << " and " << w.str();
  const int64_t m = a.shape[layout.trans_a ? 1 : 0], k = a.shape[layout.trans_a ? 0 : 1];
  const int64_t n_extent = w.shape[layout.trans_b ? 0 : 1];
  TESSEL_USER_CHECK(w.shape[layout.trans_b ? 1 : 0] == k)
      << n.label() << ": A " << a.str() << " and W " << w.str() << " disagree on K";
  ContractionSpec spec;
  spec.maps = contraction::gemm_maps(m, n_extent, k, layout, {a.dtype, w.dtype, node_dtype(g, n)});
  spec.epilogue = epilogue_of(g, n, spec.extra_inputs);
  check_residual_store(n, spec, true);
  return spec;
}

}  // namespace

bool is_contraction_op(const ir::Node& n) {
  return ir::OpRegistry::global().facts(n.op).gpu == ir::GpuKernel::kContraction;
}

ContractionSpec contraction_of(const ir::Graph& g, const ir::Node& n) {
  TESSEL_ICHECK(is_contraction_op(n)) << n.label() << " is not a tessel contraction";
  TESSEL_USER_CHECK(n.inputs.size() >= 2 && n.outputs.size() == 1)
      << n.label() << ": expected inputs (X, W, B?, R?, S?) and one output";
  return n.op == "tessel.Conv" ? conv_spec(g, n) : gemm_spec(g, n);
}

}  // namespace tessel::compiler
