// Element types of tensors, and the facts about each (size, name, class) as one table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessel {

enum class DType : uint8_t { kF32, kF16, kBF16, kF64, kI8, kU8, kI32, kI64, kBool };

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // textual IR and CLI spelling: "f32", "i64", ...
  size_t size;            // bytes per element
  bool is_float;
  bool is_signed;
  int onnx_type;          // onnx::TensorProto_DataType
};

const DTypeInfo& dtype_info(DType t);
inline size_t dtype_size(DType t) { return dtype_info(t).size; }
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
inline bool is_float(DType t) { return dtype_info(t).is_float; }
inline bool is_integer(DType t) { return !dtype_info(t).is_float && t != DType::kBool; }
// The one-byte integers the int8 Tensor Core instructions take (mma.sync m16n8k32, wgmma k32:
// .s8 or .u8 for each integer operand): i8 (TensorRT's symmetric activations, every weight) and
// u8 (onnxruntime's default QUInt8 activations with zero point 0).
inline bool is_int8_operand(DType t) { return t == DType::kI8 || t == DType::kU8; }

std::optional<DType> dtype_from_name(std::string_view name);
std::optional<DType> dtype_from_onnx(int onnx_type);
// ONNX's name of an ONNX element type ("DOUBLE", "STRING", ...), for error messages.
std::string onnx_type_name(int onnx_type);

// Storage precision of activations and weights inside a compiled graph. Graph inputs and
// outputs keep the model's dtypes either way.
enum class Precision {
  kFp32,  // the model as given
  kFp16,  // fp16 storage, fp32 accumulation and epilogues (passes/choose_precision.cc)
};
const char* precision_name(Precision p);  // "fp32", "fp16"

}  // namespace tessel
