#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace tessel {
namespace {

const char kMagic[] = "\x93NUMPY";

std::string descr_of(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kF16: return "<f2";
    case DType::kF64: return "<f8";
    case DType::kI8: return "|i1";
    case DType::kU8: return "|u1";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
    case DType::kBool: return "|b1";
    case DType::kBF16: break;
  }
  TESSEL_USER_ERROR() << "npy: dtype " << dtype_name(t) << " has no .npy encoding";
}

DType dtype_of_descr(const std::string& d, const std::string& what) {
  static const std::pair<const char*, DType> kTable[] = {
      {"<f4", DType::kF32}, {"<f2", DType::kF16}, {"<f8", DType::kF64}, {"|i1", DType::kI8},
      {"|u1", DType::kU8},  {"<i4", DType::kI32}, {"<i8", DType::kI64}, {"|b1", DType::kBool},
      {"i1", DType::kI8},   {"u1", DType::kU8},   {"b1", DType::kBool}};
  for (auto& [name, t] : kTable)
    if (d == name) return t;
  TESSEL_USER_ERROR() << what << ": unsupported .npy dtype '" << d
                      << "' (supported: <f4 <f2 <f8 |i1 |u1 <i4 <i8 |b1)";
}

// Finds 'key': in the header dict and returns the text after the colon.
std::string dict_field(const std::string& header, const std::string& key,
                       const std::string& what) {
  size_t k = header.find("'" + key + "'");
  TESSEL_USER_CHECK(k != std::string::npos) << what << ": .npy header has no '" << key << "'";
  size_t colon = header.find(':', k);
  TESSEL_USER_CHECK(colon != std::string::npos) << what << ": malformed .npy header";
  size_t b = header.find_first_not_of(' ', colon + 1);
  TESSEL_USER_CHECK(b != std::string::npos) << what << ": malformed .npy header";
  return header.substr(b);
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  TESSEL_USER_CHECK(bytes.size() >= 10 && std::memcmp(bytes.data(), kMagic, 6) == 0)
      << what << ": not a .npy file (bad magic)";
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    TESSEL_USER_CHECK(bytes.size() >= 12) << what << ": truncated .npy header";
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    TESSEL_USER_ERROR() << what << ": unsupported .npy version " << major;
  }
  TESSEL_USER_CHECK(header_start + header_len <= bytes.size())
      << what << ": truncated .npy header";
  std::string header = bytes.substr(header_start, header_len);

  std::string descr_text = dict_field(header, "descr", what);
  TESSEL_USER_CHECK(descr_text.size() > 2 && descr_text[0] == '\'')
      << what << ": malformed descr in .npy header";
  size_t descr_end = descr_text.find('\'', 1);
  TESSEL_USER_CHECK(descr_end != std::string::npos) << what << ": malformed descr";
  DType dtype = dtype_of_descr(descr_text.substr(1, descr_end - 1), what);

  std::string fortran = dict_field(header, "fortran_order", what);
  TESSEL_USER_CHECK(fortran.rfind("False", 0) == 0)
      << what << ": Fortran-ordered .npy arrays are not supported";

  std::string shape_text = dict_field(header, "shape", what);
  TESSEL_USER_CHECK(!shape_text.empty() && shape_text[0] == '(')
      << what << ": malformed shape in .npy header";
  size_t close = shape_text.find(')');
  TESSEL_USER_CHECK(close != std::string::npos) << what << ": malformed shape";
  Shape shape;
  std::string inner = shape_text.substr(1, close - 1);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    size_t pos = 0;
    long long v = 0;
    try {
      v = std::stoll(item.substr(b), &pos);
    } catch (const std::exception&) {
      TESSEL_USER_ERROR() << what << ": malformed dimension '" << item << "' in .npy shape";
    }
    TESSEL_USER_CHECK(v >= 0) << what << ": negative dimension in .npy shape";
    shape.push_back(v);
  }
  int64_t n = numel(shape, what);
  size_t data_start = header_start + header_len;
  size_t need = static_cast<size_t>(n) * dtype_size(dtype);
  TESSEL_USER_CHECK(bytes.size() - data_start >= need)
      << what << ": truncated .npy data (" << bytes.size() - data_start << " bytes, expected "
      << need << ")";
  Tensor t(dtype, shape);
  if (need) std::memcpy(t.raw(), bytes.data() + data_start, need);
  return t;
}

Tensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TESSEL_USER_CHECK(f.good()) << path << ": cannot open file";
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_npy(ss.str(), path);
}

std::string serialize_npy(const Tensor& t) {
  std::string dict = "{'descr': '" + descr_of(t.dtype()) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i) {
    dict += std::to_string(t.shape()[i]);
    if (t.shape().size() == 1 || i + 1 < t.shape().size()) dict += ",";
    if (i + 1 < t.shape().size()) dict += " ";
  }
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  out += dict;
  out.append(reinterpret_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string bytes = serialize_npy(t);
  std::ofstream f(path, std::ios::binary);
  TESSEL_USER_CHECK(f.good()) << path << ": cannot open file for writing";
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TESSEL_USER_CHECK(f.good()) << path << ": write failed";
}

}  // namespace tessel
