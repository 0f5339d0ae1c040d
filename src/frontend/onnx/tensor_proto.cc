#include "frontend/onnx/tensor_proto.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/error.h"
#include "frontend/onnx/importer.h"

namespace tessel::onnx {
namespace {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

// raw_data and external files hold little-endian elements; tessel's buffers are native.
static_assert(std::endian::native == std::endian::little,
              "the ONNX importer copies little-endian tensor bytes without swapping");

std::string supported_elem_types() {
  std::string r;
  for (int i = 0; i <= static_cast<int>(DType::kBool); ++i) {
    if (!r.empty()) r += ", ";
    r += onnx_type_name(dtype_info(static_cast<DType>(i)).onnx_type);
  }
  return r;
}

// A non-negative integer written in decimal, the whole string and nothing else.
int64_t parse_external_int(const std::string& text, const std::string& key,
                           const std::string& what) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  TESSEL_USER_CHECK(ec == std::errc() && end == text.data() + text.size() && v >= 0)
      << what << ": external data '" << key << "' is '" << text
      << "', expected a non-negative integer";
  return v;
}

// The file named by `location`, which must stay inside `base_dir`: a model must not be able
// to make the compiler read arbitrary files of the machine it runs on.
fs::path resolve_external_path(const std::string& location, const std::string& what,
                               const std::string& base_dir) {
  TESSEL_USER_CHECK(!location.empty()) << what << ": external data has no 'location'";
  TESSEL_USER_CHECK(location.find('\0') == std::string::npos)
      << what << ": external data location contains a NUL character";
  fs::path rel(location);
  TESSEL_USER_CHECK(rel.is_relative())
      << what << ": external data location '" << location
      << "' is an absolute path; it must be relative to the model's folder";
  fs::path normal = rel.lexically_normal();
  TESSEL_USER_CHECK(!normal.empty() && *normal.begin() != ".." && normal != ".")
      << what << ": external data location '" << location
      << "' leaves the model's folder; it must name a file inside it";
  TESSEL_USER_CHECK(!base_dir.empty())
      << what << ": has external data '" << location
      << "', but the model was given as bytes without a folder to resolve it in";
  return fs::path(base_dir) / normal;
}

std::string read_external_data(const TensorProto& tp, size_t expected_bytes,
                               const std::string& what, const std::string& base_dir) {
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
  for (const auto& entry : tp.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = parse_external_int(entry.value(), "offset", what);
    else if (entry.key() == "length")
      length = parse_external_int(entry.value(), "length", what);
    // "checksum" and unknown keys carry nothing tessel needs.
  }
  fs::path file = resolve_external_path(location, what, base_dir);

  std::error_code ec;
  TESSEL_USER_CHECK(fs::is_regular_file(file, ec))
      << what << ": external data file '" << file.string() << "' does not exist or is not a file";
  uintmax_t size = fs::file_size(file, ec);
  TESSEL_USER_CHECK(!ec) << what << ": cannot read the size of external data file '"
                         << file.string() << "': " << ec.message();
  TESSEL_USER_CHECK(static_cast<uintmax_t>(offset) <= size)
      << what << ": external data offset " << offset << " is past the end of '" << file.string()
      << "' (" << size << " bytes)";
  uintmax_t available = size - static_cast<uintmax_t>(offset);
  uintmax_t n = length ? static_cast<uintmax_t>(*length) : available;
  TESSEL_USER_CHECK(n <= available)
      << what << ": external data file '" << file.string() << "' is too short: offset " << offset
      << " + length " << n << " > " << size << " bytes";
  TESSEL_USER_CHECK(n == expected_bytes)
      << what << ": external data in '" << file.string() << "' has " << n
      << " bytes, but the tensor's dims need " << expected_bytes;

  std::ifstream in(file, std::ios::binary);
  TESSEL_USER_CHECK(in) << what << ": cannot open external data file '" << file.string() << "'";
  std::string bytes(n, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  TESSEL_USER_CHECK(in.gcount() == static_cast<std::streamsize>(n))
      << what << ": could not read " << n << " bytes from external data file '" << file.string()
      << "'";
  return bytes;
}

// Little-endian element bytes (raw_data or an external file) into a tensor.
Tensor from_bytes(const std::string& bytes, DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  if (dtype == DType::kBool) {
    // Any non-zero byte is true; copying the byte itself would store a bool that is neither.
    bool* d = t.data<bool>();
    for (size_t i = 0; i < bytes.size(); ++i) d[i] = bytes[i] != 0;
  } else if (!bytes.empty()) {
    std::memcpy(t.raw(), bytes.data(), bytes.size());
  }
  return t;
}

// The typed field ONNX assigns to each element type (onnx.proto, TensorProto): float_data,
// double_data, int64_data, and int32_data for every type of 32 bits or fewer (f16 and bf16
// as their bit patterns).
Tensor from_typed_field(const TensorProto& tp, DType dtype, Shape shape, int64_t n,
                        const std::string& what) {
  auto check_count = [&](int count, const char* field) {
    TESSEL_USER_CHECK(count == n) << what << ": " << field << " has " << count
                                  << " values, but dims " << shape_str(shape) << " need " << n;
  };
  switch (dtype) {
    case DType::kF32: {
      check_count(tp.float_data_size(), "float_data");
      Tensor t(dtype, std::move(shape));
      std::copy(tp.float_data().begin(), tp.float_data().end(), t.data<float>());
      return t;
    }
    case DType::kF64: {
      check_count(tp.double_data_size(), "double_data");
      Tensor t(dtype, std::move(shape));
      std::copy(tp.double_data().begin(), tp.double_data().end(), t.data<double>());
      return t;
    }
    case DType::kI64: {
      check_count(tp.int64_data_size(), "int64_data");
      Tensor t(dtype, std::move(shape));
      std::copy(tp.int64_data().begin(), tp.int64_data().end(), t.data<int64_t>());
      return t;
    }
    case DType::kF16:
    case DType::kBF16: {
      check_count(tp.int32_data_size(), "int32_data");
      Tensor t(dtype, std::move(shape));
      uint16_t* d = t.data_u16();
      for (int i = 0; i < tp.int32_data_size(); ++i) d[i] = static_cast<uint16_t>(tp.int32_data(i));
      return t;
    }
    case DType::kI32:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: {
      check_count(tp.int32_data_size(), "int32_data");
      Tensor t(dtype, std::move(shape));
      for (int i = 0; i < tp.int32_data_size(); ++i) t.set_i64(i, tp.int32_data(i));
      return t;
    }
  }
  TESSEL_ICHECK(false) << "unhandled dtype " << dtype_name(dtype);
  return {};
}

}  // namespace

DType dtype_from_onnx_elem_type(int32_t elem_type, const std::string& what) {
  TESSEL_USER_CHECK(elem_type != TensorProto::UNDEFINED) << what << ": has no element type";
  std::optional<DType> dtype = dtype_from_onnx(elem_type);
  TESSEL_USER_CHECK(dtype) << what << ": element type " << onnx_type_name(elem_type)
                           << " is not supported (tessel supports " << supported_elem_types()
                           << ")";
  return *dtype;
}

Tensor tensor_from_proto(const TensorProto& tp, const std::string& what,
                         const std::string& base_dir) {
  DType dtype = dtype_from_onnx_elem_type(tp.data_type(), what);
  Shape shape(tp.dims().begin(), tp.dims().end());
  int64_t n = numel(shape, what);  // rejects negative dims and absurd element counts
  TESSEL_USER_CHECK(!tp.has_segment()) << what << ": segmented tensors are not supported";
  // n <= 2^40 and elements are at most 8 bytes: no overflow.
  size_t nbytes = static_cast<size_t>(n) * dtype_size(dtype);

  if (tp.data_location() == TensorProto::EXTERNAL) {
    return from_bytes(read_external_data(tp, nbytes, what, base_dir), dtype, std::move(shape));
  }
  if (tp.has_raw_data()) {
    TESSEL_USER_CHECK(tp.raw_data().size() == nbytes)
        << what << ": raw_data has " << tp.raw_data().size() << " bytes, but dims "
        << shape_str(shape) << " of " << dtype_name(dtype) << " need " << nbytes;
    return from_bytes(tp.raw_data(), dtype, std::move(shape));
  }
  return from_typed_field(tp, dtype, std::move(shape), n, what);
}

std::string folder_of(const std::string& path) {
  std::string folder = fs::path(path).parent_path().string();
  return folder.empty() ? "." : folder;
}

Tensor read_tensor_proto(const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  TESSEL_USER_CHECK(in && !fs::is_directory(path, ec)) << path << ": cannot open file";
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TensorProto tp;
  TESSEL_USER_CHECK(tp.ParseFromString(bytes))
      << path << ": not a serialized onnx TensorProto (protobuf parsing failed)";
  std::string what = path + ": tensor";
  if (!tp.name().empty()) what += " '" + tp.name() + "'";
  return tensor_from_proto(tp, what, folder_of(path));
}

}  // namespace tessel::onnx
