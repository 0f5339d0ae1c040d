#include "core/dtype.h"

#include <array>

#include "core/error.h"

namespace tessel {
namespace {

// onnx_type values follow onnx.proto's TensorProto.DataType.
constexpr std::array<DTypeInfo, 9> kDTypes = {{
    {DType::kF32, "f32", 4, true, true, 1},
    {DType::kF16, "f16", 2, true, true, 10},
    {DType::kBF16, "bf16", 2, true, true, 16},
    {DType::kF64, "f64", 8, true, true, 11},
    {DType::kI8, "i8", 1, false, true, 3},
    {DType::kU8, "u8", 1, false, false, 2},
    {DType::kI32, "i32", 4, false, true, 6},
    {DType::kI64, "i64", 8, false, true, 7},
    {DType::kBool, "bool", 1, false, false, 9},
}};

constexpr bool table_is_indexed_by_enum() {
  for (size_t i = 0; i < kDTypes.size(); ++i)
    if (static_cast<size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(table_is_indexed_by_enum(), "kDTypes must be in DType enum order");

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  size_t i = static_cast<size_t>(t);
  TESSEL_ICHECK(i < kDTypes.size()) << "bad dtype " << i;
  return kDTypes[i];
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_onnx(int onnx_type) {
  for (const auto& info : kDTypes)
    if (info.onnx_type == onnx_type) return info.dtype;
  return std::nullopt;
}

std::string onnx_type_name(int onnx_type) {
  static constexpr std::array<const char*, 24> kNames = {
      "UNDEFINED", "FLOAT",     "UINT8",      "INT8",         "UINT16",      "INT16",
      "INT32",     "INT64",     "STRING",     "BOOL",         "FLOAT16",     "DOUBLE",
      "UINT32",    "UINT64",    "COMPLEX64",  "COMPLEX128",   "BFLOAT16",    "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1"};
  if (onnx_type >= 0 && onnx_type < static_cast<int>(kNames.size())) return kNames[onnx_type];
  return "type#" + std::to_string(onnx_type);
}

const char* precision_name(Precision p) { return p == Precision::kFp16 ? "fp16" : "fp32"; }

}  // namespace tessel
