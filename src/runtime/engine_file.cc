// The .tsl engine file: serialize_plan / parse_plan and the atomic file I/O around them.
#include "runtime/engine_file.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"

namespace tessel::runtime {
namespace {

constexpr std::string_view kMagic = "TSLENGIN";
constexpr uint32_t kSectionCount = 5;
constexpr const char* kSectionTags[kSectionCount] = {"TRGT", "SIZE", "CNST", "CUBN", "PRFL"};
constexpr int kRegionCount = static_cast<int>(Region::kOutput) + 1;

// The smallest encodings, which bound the counts a section may claim.
constexpr size_t kMinRelocationBytes = 1 + 4 + 8 + 8;
constexpr size_t kMinTensorBytes = 4 + 4 + 4;
constexpr size_t kMinLaunchBytes = 4 + 4 + 7 * 4 + 4 + 4 + 4 + 8 + 8 + 4 + 4 + 8 + 4;
constexpr size_t kMinProfileBytes = 8 + 4 + 4 + 4;
// A TensorMapSpec's encoding: 5 bytes, the offset, 5 dims, 4 strides, 5 + 5 + 3 + 3 + 2 u32.
constexpr size_t kTensorMapBytes = 5 + 8 + 5 * 8 + 4 * 8 + 18 * 4;

class Writer {
 public:
  void u8(uint8_t v) { out_ += static_cast<char>(v); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void blob(std::string_view s) {
    u64(s.size());
    out_ += s;
  }
  void raw(std::string_view s) { out_ += s; }
  void relocation(const Relocation& r) {
    u8(static_cast<uint8_t>(r.region));
    u32(r.index);
    u64(r.offset);
    u64(r.bytes);
  }
  void tensor_map(const device::TensorMapSpec& m) {
    u8(static_cast<uint8_t>(m.mode));
    u8(static_cast<uint8_t>(m.type));
    u8(m.operand);
    u8(m.rank);
    u8(static_cast<uint8_t>(m.swizzle));
    i64(m.offset_bytes);
    for (uint64_t d : m.dims) u64(d);
    for (uint64_t s : m.strides) u64(s);
    for (uint32_t b : m.box) u32(b);
    for (uint32_t e : m.element_strides) u32(e);
    for (int32_t c : m.lower) u32(static_cast<uint32_t>(c));
    for (int32_t c : m.upper) u32(static_cast<uint32_t>(c));
    u32(m.channels_per_pixel);
    u32(m.pixels_per_column);
  }
  void tensor(const PlanTensor& t) {
    str(t.name);
    str(dtype_name(t.dtype));
    u32(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) i64(d);
  }
  std::string& bytes() { return out_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

uint64_t read_le(std::string_view s, size_t pos, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(s[pos + i])} << (8 * i);
  return v;
}

// Reads one section's body. Every read is bounds-checked, and a count is checked against the
// bytes left before anything is reserved for it. Failures are "corrupt" errors naming the
// section: TESSEL_CORRUPT(reader) << "detail".
class Reader {
 public:
  Reader(std::string_view data, const std::string& path, std::string section)
      : data_(data), path_(path), section_(std::move(section)) {}

  uint8_t u8() { return static_cast<uint8_t>(bytes(1, "a byte")[0]); }
  uint32_t u32() { return static_cast<uint32_t>(read_le(bytes(4, "a u32"), 0, 4)); }
  uint64_t u64() { return read_le(bytes(8, "a u64"), 0, 8); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::string str() {
    const uint32_t n = u32();
    return std::string(bytes(n, "a string"));
  }
  std::string blob() {
    const uint64_t n = u64();
    return std::string(bytes(n, "a blob"));
  }
  std::string_view bytes(uint64_t n, const char* what);
  std::string_view rest() { return bytes(left(), "the rest"); }
  // An item count, each item taking at least `min_item_bytes`.
  uint32_t count(size_t min_item_bytes, const char* what);
  Relocation relocation();
  PlanTensor tensor();
  device::TensorMapSpec tensor_map();
  PlanLaunch launch();
  void expect_end();
  std::string prefix() const { return "engine file " + path_ + " is corrupt: " + section_ + ": "; }

 private:
  size_t left() const { return data_.size() - pos_; }
  std::string_view data_;
  size_t pos_ = 0;
  const std::string& path_;
  std::string section_;
};

#define TESSEL_CORRUPT(reader) TESSEL_USER_ERROR() << (reader).prefix()

std::string_view Reader::bytes(uint64_t n, const char* what) {
  if (n > left()) TESSEL_CORRUPT(*this) << "it ends inside " << what;
  std::string_view r = data_.substr(pos_, n);
  pos_ += n;
  return r;
}

uint32_t Reader::count(size_t min_item_bytes, const char* what) {
  const uint32_t n = u32();
  if (n > left() / min_item_bytes)
    TESSEL_CORRUPT(*this) << "it claims " << n << " " << what << " in " << left() << " bytes";
  return n;
}

Relocation Reader::relocation() {
  Relocation r;
  const uint8_t region = u8();
  if (region >= kRegionCount) TESSEL_CORRUPT(*this) << "unknown region " << int{region};
  r.region = static_cast<Region>(region);
  r.index = u32();
  r.offset = u64();
  r.bytes = u64();
  return r;
}

PlanTensor Reader::tensor() {
  PlanTensor t;
  t.name = str();
  const std::string dtype = str();
  const std::optional<DType> d = dtype_from_name(dtype);
  if (!d) TESSEL_CORRUPT(*this) << "tensor '" << t.name << "' has unknown dtype '" << dtype << "'";
  t.dtype = *d;
  const uint32_t rank = count(8, "extents");
  for (uint32_t i = 0; i < rank; ++i) t.shape.push_back(i64());
  return t;
}

device::TensorMapSpec Reader::tensor_map() {
  device::TensorMapSpec m;
  const uint8_t mode = u8(), type = u8();
  if (mode > 1) TESSEL_CORRUPT(*this) << "unknown tensor map mode " << int{mode};
  if (type > 2) TESSEL_CORRUPT(*this) << "unknown tensor map element type " << int{type};
  m.mode = static_cast<device::TensorMapSpec::Mode>(mode);
  m.type = static_cast<device::TensorMapSpec::Type>(type);
  m.operand = u8();
  m.rank = u8();
  const uint8_t swizzle = u8();
  if (swizzle > 2) TESSEL_CORRUPT(*this) << "tensor map swizzle " << int{swizzle};
  m.swizzle = static_cast<device::TensorMapSpec::Swizzle>(swizzle);
  m.offset_bytes = i64();
  for (uint64_t& d : m.dims) d = u64();
  for (uint64_t& s : m.strides) s = u64();
  for (uint32_t& b : m.box) b = u32();
  for (uint32_t& e : m.element_strides) e = u32();
  for (int32_t& c : m.lower) c = static_cast<int32_t>(u32());
  for (int32_t& c : m.upper) c = static_cast<int32_t>(u32());
  m.channels_per_pixel = u32();
  m.pixels_per_column = u32();
  return m;
}

PlanLaunch Reader::launch() {
  PlanLaunch l;
  l.cubin = u32();
  l.entry = str();
  for (uint32_t& g : l.grid) g = u32();
  for (uint32_t& b : l.block) b = u32();
  l.smem_bytes = u32();
  const uint8_t dependent = u8();
  if (dependent > 1) TESSEL_CORRUPT(*this) << "a launch's grid-dependent flag is " << int{dependent};
  l.grid_dependent = dependent == 1;
  const uint32_t words = count(kMinRelocationBytes, "parameter words");
  for (uint32_t w = 0; w < words; ++w) l.params.push_back(relocation());
  l.node = str();
  l.op = str();
  l.flops = i64();
  l.bytes = i64();
  l.instruction = str();
  l.schedule = str();
  l.epilogue = str();
  l.operand_dtype = str();
  l.predicted_us = static_cast<double>(i64()) / 1000.0;
  l.analytical_us = static_cast<double>(i64()) / 1000.0;
  const uint32_t maps = count(kTensorMapBytes, "tensor maps");
  for (uint32_t m = 0; m < maps; ++m) l.tensor_maps.push_back(tensor_map());
  return l;
}

void Reader::expect_end() {
  if (left() != 0) TESSEL_CORRUPT(*this) << left() << " bytes left over at its end";
}

// Checks the header against the file's size and returns the payload's length. `header` holds
// the file's first min(size, 32) bytes; `file_bytes` is the whole file's size.
uint64_t check_header(std::string_view header, uint64_t file_bytes, const std::string& path) {
  const size_t magic_seen = std::min(header.size(), kMagic.size());
  TESSEL_USER_CHECK(header.substr(0, magic_seen) == kMagic.substr(0, magic_seen))
      << path << " is not a tessel engine file";
  TESSEL_USER_CHECK(file_bytes >= 12)
      << "engine file " << path << " is truncated: it has " << file_bytes
      << " bytes, shorter than the " << kEngineHeaderBytes << "-byte header";
  const uint32_t version = static_cast<uint32_t>(read_le(header, 8, 4));
  TESSEL_USER_CHECK(version == kEngineFormatVersion)
      << path << " has engine format version " << version << "; this tessel reads version "
      << kEngineFormatVersion << "; recompile it with tessel compile";
  TESSEL_USER_CHECK(file_bytes >= kEngineHeaderBytes)
      << "engine file " << path << " is truncated: it has " << file_bytes
      << " bytes, shorter than the " << kEngineHeaderBytes << "-byte header";
  const uint64_t payload = read_le(header, 16, 8);
  const uint64_t present = file_bytes - kEngineHeaderBytes;
  TESSEL_USER_CHECK(present >= payload)
      << "engine file " << path << " is truncated: it has " << file_bytes
      << " bytes, its header says " << kEngineHeaderBytes << " + " << payload;
  TESSEL_USER_CHECK(present == payload)
      << "engine file " << path << " is corrupt: " << present - payload
      << " bytes after the end its header gives";
  return payload;
}

void write_launch(Writer& w, const PlanLaunch& l) {
  w.u32(l.cubin);
  w.str(l.entry);
  for (uint32_t g : l.grid) w.u32(g);
  for (uint32_t b : l.block) w.u32(b);
  w.u32(l.smem_bytes);
  w.u8(l.grid_dependent ? 1 : 0);
  w.u32(static_cast<uint32_t>(l.params.size()));
  for (const Relocation& r : l.params) w.relocation(r);
  w.str(l.node);
  w.str(l.op);
  w.i64(l.flops);
  w.i64(l.bytes);
  w.str(l.instruction);
  w.str(l.schedule);
  w.str(l.epilogue);
  w.str(l.operand_dtype);
  w.i64(static_cast<int64_t>(l.predicted_us * 1000.0 + 0.5));  // nanoseconds
  w.i64(static_cast<int64_t>(l.analytical_us * 1000.0 + 0.5));
  w.u32(static_cast<uint32_t>(l.tensor_maps.size()));
  for (const device::TensorMapSpec& m : l.tensor_maps) w.tensor_map(m);
}

void write_sections(const EnginePlan& plan, const std::function<void(const char*, Writer&)>& put) {
  Writer w;
  const device::DeviceInfo& t = plan.target;
  w.str(t.arch());
  w.str(t.name);
  w.u32(static_cast<uint32_t>(t.sm_count));
  w.u64(t.smem_per_block_optin);
  w.u32(static_cast<uint32_t>(t.cc_major));
  w.u32(static_cast<uint32_t>(t.cc_minor));
  w.u8(plan.precision == Precision::kFp16 ? 1 : 0);
  w.i64(plan.batch.min);
  w.i64(plan.batch.max);
  w.i64(plan.batch.opt);
  w.str(plan.tessel_version);
  put("TRGT", w);

  w = Writer();
  w.u64(plan.arena_bytes);
  w.u64(plan.scratch_bytes);
  w.u32(static_cast<uint32_t>(plan.workspace_bytes.size()));
  for (uint64_t b : plan.workspace_bytes) w.u64(b);
  put("SIZE", w);

  w = Writer();
  w.raw(plan.constants);
  put("CNST", w);

  w = Writer();
  w.u32(static_cast<uint32_t>(plan.cubins.size()));
  for (const std::string& c : plan.cubins) w.blob(c);
  put("CUBN", w);

  w = Writer();
  w.u32(static_cast<uint32_t>(plan.profiles.size()));
  for (const PlanProfile& p : plan.profiles) {
    w.i64(p.batch);
    w.u32(static_cast<uint32_t>(p.inputs.size()));
    for (const PlanTensor& x : p.inputs) w.tensor(x);
    w.u32(static_cast<uint32_t>(p.outputs.size()));
    for (const PlanTensor& y : p.outputs) {
      w.tensor(y);
      w.relocation(y.source);
    }
    w.u32(static_cast<uint32_t>(p.launches.size()));
    for (const PlanLaunch& l : p.launches) write_launch(w, l);
  }
  put("PRFL", w);
}

void read_target(Reader& r, EnginePlan& plan) {
  device::DeviceInfo& t = plan.target;
  const std::string arch = r.str();
  t.name = r.str();
  t.sm_count = static_cast<int>(r.u32());
  t.smem_per_block_optin = r.u64();
  t.cc_major = static_cast<int>(r.u32());
  t.cc_minor = static_cast<int>(r.u32());
  // The arch is recorded for readers of the bytes; it follows from the compute capability.
  if (arch != t.arch()) TESSEL_CORRUPT(r) << "target arch " << arch << " does not match compute capability " << t.cc_major << "." << t.cc_minor;
  const uint8_t precision = r.u8();
  if (precision > 1) TESSEL_CORRUPT(r) << "unknown precision " << int{precision};
  plan.precision = precision == 1 ? Precision::kFp16 : Precision::kFp32;
  plan.batch.min = r.i64();
  plan.batch.max = r.i64();
  plan.batch.opt = r.i64();
  plan.tessel_version = r.str();
}

void read_sizes(Reader& r, EnginePlan& plan) {
  plan.arena_bytes = r.u64();
  plan.scratch_bytes = r.u64();
  const uint32_t n = r.count(8, "workspaces");
  for (uint32_t i = 0; i < n; ++i) plan.workspace_bytes.push_back(r.u64());
}

void read_constants(Reader& r, EnginePlan& plan) { plan.constants = std::string(r.rest()); }

void read_cubins(Reader& r, EnginePlan& plan) {
  const uint32_t n = r.count(8, "cubins");
  for (uint32_t i = 0; i < n; ++i) plan.cubins.push_back(r.blob());
}

void read_profiles(Reader& r, EnginePlan& plan) {
  const uint32_t n = r.count(kMinProfileBytes, "profiles");
  for (uint32_t k = 0; k < n; ++k) {
    PlanProfile p;
    p.batch = r.i64();
    const uint32_t inputs = r.count(kMinTensorBytes, "inputs");
    for (uint32_t i = 0; i < inputs; ++i) p.inputs.push_back(r.tensor());
    const uint32_t outputs = r.count(kMinTensorBytes + kMinRelocationBytes, "outputs");
    for (uint32_t i = 0; i < outputs; ++i) {
      p.outputs.push_back(r.tensor());
      p.outputs.back().source = r.relocation();
    }
    const uint32_t launches = r.count(kMinLaunchBytes, "launches");
    for (uint32_t i = 0; i < launches; ++i) p.launches.push_back(r.launch());
    plan.profiles.push_back(std::move(p));
  }
}

}  // namespace

std::string serialize_plan(const EnginePlan& plan) {
  Writer payload;
  write_sections(plan, [&](const char* tag, Writer& body) {
    payload.raw(std::string_view(tag, 4));
    payload.u64(body.bytes().size());
    payload.raw(body.bytes());
  });
  Writer file;
  file.raw(kMagic);
  file.u32(kEngineFormatVersion);
  file.u32(kSectionCount);
  file.u64(payload.bytes().size());
  file.u64(fnv1a64(payload.bytes()));
  file.raw(payload.bytes());
  return std::move(file.bytes());
}

EnginePlan parse_plan(std::string_view bytes, const std::string& path) {
  const uint64_t payload_bytes =
      check_header(bytes.substr(0, kEngineHeaderBytes), bytes.size(), path);
  const std::string_view payload = bytes.substr(kEngineHeaderBytes, payload_bytes);
  const uint64_t stored = read_le(bytes, 24, 8), computed = fnv1a64(payload);
  if (stored != computed) {
    std::ostringstream hex;
    hex << std::hex << std::setfill('0') << "stored 0x" << std::setw(16) << stored
        << ", computed 0x" << std::setw(16) << computed;
    TESSEL_USER_ERROR() << "engine file " << path << " is corrupt: checksum mismatch (" << hex.str()
                        << ")";
  }
  const uint32_t sections = static_cast<uint32_t>(read_le(bytes, 12, 4));
  TESSEL_USER_CHECK(sections == kSectionCount)
      << "engine file " << path << " is corrupt: " << sections << " sections, expected "
      << kSectionCount;

  EnginePlan plan;
  Reader sections_reader(payload, path, "the section list");
  using SectionReader = void (*)(Reader&, EnginePlan&);
  const SectionReader readers[kSectionCount] = {read_target, read_sizes, read_constants,
                                                read_cubins, read_profiles};
  for (uint32_t i = 0; i < kSectionCount; ++i) {
    const std::string_view tag = sections_reader.bytes(4, "a section tag");
    if (tag != kSectionTags[i])
      TESSEL_CORRUPT(sections_reader)
          << "section " << i << " is '" << tag << "', expected '" << kSectionTags[i] << "'";
    const uint64_t length = sections_reader.u64();
    Reader body(sections_reader.bytes(length, "a section body"), path,
                "section " + std::string(tag));
    readers[i](body, plan);
    body.expect_end();
  }
  sections_reader.expect_end();
  if (std::optional<std::string> why = check_plan(plan))
    TESSEL_USER_ERROR() << "engine file " << path << " is corrupt: " << *why;
  return plan;
}

void write_engine_file(const EnginePlan& plan, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string bytes = serialize_plan(plan);
  const std::string temp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    TESSEL_USER_CHECK(f.good()) << path << ": cannot open for writing";
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      TESSEL_USER_ERROR() << path << ": writing failed (disk full?)";
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    TESSEL_USER_ERROR() << path << ": cannot write: " << ec.message();
  }
}

EnginePlan read_engine_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  const std::streamoff end = f.good() ? static_cast<std::streamoff>(f.tellg()) : -1;
  TESSEL_USER_CHECK(end >= 0) << path << ": cannot open file";
  const uint64_t size = static_cast<uint64_t>(end);
  f.seekg(0);
  std::string bytes(static_cast<size_t>(std::min<uint64_t>(size, kEngineHeaderBytes)), '\0');
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TESSEL_USER_CHECK(f.gcount() == static_cast<std::streamsize>(bytes.size()))
      << path << ": reading failed";
  // The header's sizes agree with the file's before the rest is read into memory.
  check_header(bytes, size, path);
  bytes.resize(static_cast<size_t>(size));
  f.read(bytes.data() + kEngineHeaderBytes,
         static_cast<std::streamsize>(size - kEngineHeaderBytes));
  TESSEL_USER_CHECK(f.good()) << path << ": reading failed";
  return parse_plan(bytes, path);
}

bool is_engine_file(const std::string& path) {
  if (std::filesystem::path(path).extension() == ".tsl") return true;
  std::ifstream f(path, std::ios::binary);
  std::string head(kMagic.size(), '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  return f.good() && head == kMagic;
}

#undef TESSEL_CORRUPT

}  // namespace tessel::runtime
