#include "kernels/contraction/epilogue.h"

#include <sstream>
#include <string>

namespace tessel::contraction {
namespace {

std::string step_str(const EpilogueStep& s) {
  std::ostringstream os;
  auto operand = [&] { os << "(#" << s.operand << ")"; };
  switch (s.kind) {
    case EpilogueOpKind::kScale:
      os << "scale";
      operand();
      break;
    case EpilogueOpKind::kBias:
      os << "bias";
      operand();
      break;
    case EpilogueOpKind::kRelu:
      os << "relu";
      break;
    case EpilogueOpKind::kLeakyRelu:
      os << "leaky_relu(" << s.alpha << ")";
      break;
    case EpilogueOpKind::kClip:
      os << "clip(" << s.alpha << ", " << s.beta << ")";
      break;
    case EpilogueOpKind::kSigmoid:
      os << "sigmoid";
      break;
    case EpilogueOpKind::kHardSwish:
      os << "hardswish";
      break;
    case EpilogueOpKind::kSilu:
      os << "silu";
      break;
    case EpilogueOpKind::kSiluQuantizedGate:
      os << "silu_qgate(" << s.alpha << ", " << s.beta << ")";
      break;
    case EpilogueOpKind::kGelu:
      os << "gelu";
      break;
    case EpilogueOpKind::kGeluTanh:
      os << "gelu_tanh";
      break;
    case EpilogueOpKind::kResidualAdd:
      os << "residual_add";
      operand();
      break;
    case EpilogueOpKind::kMul:
      os << "mul(" << s.alpha << ")";
      break;
    case EpilogueOpKind::kQuantize:
      os << "quantize(" << s.alpha << ")";
      break;
    case EpilogueOpKind::kScaledResidualAdd:
      os << "residual_add(scale=" << s.alpha << ")";
      operand();
      break;
    case EpilogueOpKind::kTanh:
      os << "tanh";
      break;
    case EpilogueOpKind::kMish:
      os << "mish";
      break;
    case EpilogueOpKind::kHardSigmoid:
      os << "hard_sigmoid(" << s.alpha << ", " << s.beta << ")";
      break;
    case EpilogueOpKind::kElu:
      os << "elu(" << s.alpha << ")";
      break;
    case EpilogueOpKind::kRound:
      os << "round(" << s.alpha << ")";
      break;
    case EpilogueOpKind::kQuantizeUnit:
      os << "quantize_unit(" << s.alpha << ", " << s.beta << ")";
      break;
  }
  return os.str();
}

const char* store_kind_name(StoreMap::Kind kind) {
  switch (kind) {
    case StoreMap::Kind::kPlain:
      return "plain";
    case StoreMap::Kind::kChannelSlice:
      return "channel_slice";
    case StoreMap::Kind::kDepthToSpace:
      return "depth_to_space";
    case StoreMap::Kind::kDepthToSpaceNchw:
      return "depth_to_space_nchw";
    case StoreMap::Kind::kNchw:
      return "nchw";
  }
  return "?";
}

std::string store_str(const StoreMap& s) {
  std::ostringstream os;
  os << store_kind_name(s.kind);
  switch (s.kind) {
    case StoreMap::Kind::kPlain:
      os << "(ld=";
      if (s.ld == 0)
        os << "n";
      else
        os << s.ld;
      os << ")";
      break;
    case StoreMap::Kind::kChannelSlice:
      os << "(offset=" << s.channel_offset << ", ld=" << s.ld << ")";
      break;
    case StoreMap::Kind::kDepthToSpace:
    case StoreMap::Kind::kDepthToSpaceNchw:
      os << "(block=" << s.block << ", " << (s.dcr ? "DCR" : "CRD") << ", out=" << s.out_h << "x"
         << s.out_w << ")";
      break;
    case StoreMap::Kind::kNchw:
      os << "(out=" << s.out_h << "x" << s.out_w << ")";
      break;
  }
  return os.str();
}

}  // namespace

std::string Epilogue::str() const {
  // "bias(#0) -> relu -> store f16 plain(ld=n)"
  std::string s;
  if (a_prologue)
    s += "A prologue affine(#" + std::to_string(a_prologue->operand) + ")" +
         (a_prologue->relu ? " -> relu" : "") + " | ";
  for (const EpilogueStep& step : steps) s += step_str(step) + " -> ";
  return s + "store " + std::string(dtype_name(out_dtype)) + " " + store_str(store);
}

int64_t read_bytes_per_output(const Epilogue& e) {
  int64_t bytes = 0;
  for (const EpilogueStep& s : e.steps) {
    if (s.kind == EpilogueOpKind::kResidualAdd || s.kind == EpilogueOpKind::kScaledResidualAdd)
      bytes += static_cast<int64_t>(dtype_size(e.residual_dtype.value_or(e.out_dtype)));
  }
  return bytes;
}

int transcendentals_per_output(const Epilogue& e) {
  int n = 0;
  for (const EpilogueStep& s : e.steps) {
    switch (s.kind) {
      case EpilogueOpKind::kSigmoid:
      case EpilogueOpKind::kSilu:
      case EpilogueOpKind::kSiluQuantizedGate:
      case EpilogueOpKind::kGelu:
      case EpilogueOpKind::kGeluTanh:
      case EpilogueOpKind::kTanh:
      case EpilogueOpKind::kMish:
      case EpilogueOpKind::kElu:
        ++n;
        break;
      default:
        break;
    }
  }
  return n;
}

std::string cost_str(const Epilogue& e) {
  const int math = transcendentals_per_output(e);
  return std::string(e.a_prologue ? "prologue:" : "") + "read" +
         std::to_string(read_bytes_per_output(e)) + ":" + store_kind_name(e.store.kind) + ":" +
         std::string(dtype_name(e.out_dtype)) + (math > 0 ? ":math" + std::to_string(math) : "");
}

}  // namespace tessel::contraction
