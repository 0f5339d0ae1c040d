// The .tsl engine file without a GPU: a hand-made plan that uses every region kind written and
// read back byte for byte; every way a file can be damaged or wrong (truncated at every section
// boundary and inside sections, a flipped byte, bad magic, a newer format version, a
// well-formed file whose plan is inconsistent, a plan for another GPU); and a real plan cross-
// compiled by NVRTC for sm_90a and sm_80 on this CPU-only machine.
#include "runtime/engine_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "ir/ir_writer.h"
#include "ir/parser.h"
#include "device/cuda_api.h"
#include "compiler/compile_plan.h"
#include "compiler/profiles.h"
#include "runtime/engine.h"
#include "runtime/target.h"

namespace tessel::runtime {
namespace {

constexpr const char* kPath = "model.tsl";

Relocation reloc(Region r, uint32_t index, uint64_t offset, uint64_t bytes) {
  return {r, index, offset, bytes};
}

// A plan that uses every region and every kind of output source. Sizes: input x f32[2,3,4,4] is
// 384 bytes, output y f32[2,10] 80 bytes, the constant output f16[4] 8 bytes.
EnginePlan synthetic_plan() {
  EnginePlan p;
  p.target = recorded_target(device::known_device("sm_90a"));
  p.precision = Precision::kFp16;
  p.batch = {2, 2, 2};
  p.cubins = {std::string("\x7f"
                          "ELF\0cubin zero",
                          14),
              "cubin one"};
  p.arena_bytes = 4096;
  p.scratch_bytes = 512;
  p.workspace_bytes = {1024};
  p.constants = std::string(768, '\0');
  for (size_t i = 0; i < p.constants.size(); ++i) p.constants[i] = static_cast<char>(i * 7);
  PlanProfile& pp = p.profiles.emplace_back();
  pp.batch = 2;
  pp.inputs = {{"x", DType::kF32, {2, 3, 4, 4}, {}}};
  pp.outputs = {
      {"y", DType::kF32, {2, 10}, reloc(Region::kOutput, 0, 0, 80)},
      {"y_again", DType::kF32, {2, 10}, reloc(Region::kOutput, 0, 0, 80)},
      {"table", DType::kF16, {4}, reloc(Region::kConstants, 0, 512, 8)},
      {"x_through", DType::kF32, {2, 3, 4, 4}, reloc(Region::kInput, 0, 0, 384)},
  };
  PlanLaunch cast;
  cast.cubin = 0;
  cast.entry = "tessel_op_cast";
  cast.grid = {3, 1, 1};
  cast.block = {128, 1, 1};
  cast.params.resize(12);
  cast.params[0] = reloc(Region::kInput, 0, 0, 384);
  cast.params[8] = reloc(Region::kArena, 0, 0, 192);
  cast.node = "x.to_f16";
  cast.op = "Cast";
  cast.bytes = 576;
  cast.instruction = "SIMT";
  PlanLaunch fc;
  fc.cubin = 1;
  fc.entry = "tessel_gemm";
  fc.grid = {1, 2, 1};
  fc.block = {128, 1, 1};
  fc.smem_bytes = 49152;
  fc.grid_dependent = true;
  fc.params = {reloc(Region::kArena, 0, 0, 192),
               reloc(Region::kConstants, 0, 0, 256),
               reloc(Region::kOutput, 0, 0, 80),
               reloc(Region::kWorkspace, 0, 0, 1024),
               reloc(Region::kConstants, 0, 256, 40),
               reloc(Region::kScratch, 0, 0, 512),
               {},
               {}};
  fc.node = "fc";
  fc.op = "tessel.Gemm";
  fc.flops = 2 * 2 * 10 * 48;
  fc.bytes = 192 + 256 + 40 + 80;
  fc.instruction = "mma.sync";
  fc.schedule = "tc_32x32x64_s3_w16x16_sk1_r8";
  fc.epilogue = "bias(#0) -> relu -> store f32 plain(ld=n)";
  fc.operand_dtype = "f16";
  // A TMA descriptor of B (word 1): every field set, so that the round trip checks them all.
  device::TensorMapSpec map;
  map.mode = device::TensorMapSpec::Mode::kIm2col;
  map.type = device::TensorMapSpec::Type::kBF16;
  map.operand = 1;
  map.swizzle = device::TensorMapSpec::Swizzle::k128B;
  map.rank = 4;
  map.offset_bytes = 32;
  map.dims = {64, 5, 6, 2, 0};
  map.strides = {256, 1280, 7680, 0};
  map.box = {0, 0, 0, 0, 0};
  map.element_strides = {1, 2, 2, 1, 1};
  map.lower = {-1, -1, 0};
  map.upper = {-2, -1, 0};
  map.channels_per_pixel = 64;
  map.pixels_per_column = 128;
  fc.tensor_maps = {map};
  pp.launches = {cast, fc};
  return p;
}

// Two profiles of one dynamic engine, batch 1:2 (opt 2): synthetic_plan()'s at batch 2, and at
// batch 1 the same launches on tensors of half the size, the second launch's kernel and tensor
// map its own.
EnginePlan two_profile_plan() {
  EnginePlan p = synthetic_plan();
  p.batch = {1, 2, 2};
  PlanProfile one = p.profiles[0];
  one.batch = 1;
  one.inputs[0].shape[0] = 1;
  for (PlanTensor& y : one.outputs) y.shape[0] = 1;
  one.outputs = {one.outputs[0], one.outputs[1], one.outputs[3]};  // the constant does not scale
  one.outputs[0].source.bytes = one.outputs[1].source.bytes = 40;
  one.outputs[2].source.bytes = 192;
  one.launches[0].params[0].bytes = 192;
  one.launches[1].params[2].bytes = 40;
  one.launches[1].cubin = 2;
  one.launches[1].tensor_maps[0].dims[3] = 1;  // each profile's maps are its own: one image
  p.cubins.push_back("cubin two");
  p.profiles[0].outputs.erase(p.profiles[0].outputs.begin() + 2);
  p.profiles.insert(p.profiles.begin(), one);
  return p;
}

// The message of the UserError that `f` throws ("" when it throws none).
std::string user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::string& bytes) {
  return user_error([&] { parse_plan(bytes, kPath); });
}

uint64_t le(const std::string& s, size_t pos, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(s[pos + i])} << (8 * i);
  return v;
}

void put_le(std::string& s, size_t pos, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s[pos + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// FNV-1a 64 of the payload written into the header, so that a test can damage a section's
// structure without tripping the checksum first.
void reseal(std::string& file) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = kEngineHeaderBytes; i < file.size(); ++i) {
    h ^= static_cast<uint8_t>(file[i]);
    h *= 0x100000001b3ull;
  }
  put_le(file, 24, h, 8);
}

// Offset of each section's tag, in file order.
std::vector<size_t> section_offsets(const std::string& file) {
  std::vector<size_t> r;
  for (size_t pos = kEngineHeaderBytes; pos < file.size(); pos += 12 + le(file, pos + 4, 8))
    r.push_back(pos);
  return r;
}

TEST(EngineFile, RoundTripIsExact) {
  const EnginePlan plan = synthetic_plan();
  ASSERT_EQ(check_plan(plan), std::nullopt);
  const std::string bytes = serialize_plan(plan);
  EXPECT_EQ(bytes.substr(0, 8), "TSLENGIN");
  EXPECT_EQ(le(bytes, 8, 4), kEngineFormatVersion);
  EXPECT_EQ(le(bytes, 16, 8), bytes.size() - kEngineHeaderBytes);
  const EnginePlan back = parse_plan(bytes, kPath);
  EXPECT_EQ(back, plan);
  EXPECT_EQ(serialize_plan(back), bytes);
  const std::vector<size_t> sections = section_offsets(bytes);
  ASSERT_EQ(sections.size(), 5u);
  std::string tags;
  for (size_t s : sections) tags += bytes.substr(s, 4) + " ";
  EXPECT_EQ(tags, "TRGT SIZE CNST CUBN PRFL ");
}

// A dynamic engine's profiles, batch range and shared regions survive the file byte for byte.
TEST(EngineFile, MultiProfileRoundTrip) {
  const EnginePlan plan = two_profile_plan();
  ASSERT_EQ(check_plan(plan), std::nullopt);
  const std::string bytes = serialize_plan(plan);
  const EnginePlan back = parse_plan(bytes, kPath);
  EXPECT_EQ(back, plan);
  ASSERT_EQ(back.profiles.size(), 2u);
  EXPECT_EQ(back.batch, (BatchRange{1, 2, 2}));
  EXPECT_TRUE(back.batch.dynamic());
  EXPECT_EQ(back.profile_for(1), &back.profiles[0]);
  EXPECT_EQ(back.profile_for(3), nullptr);
  EXPECT_EQ(serialize_plan(back), bytes);
  // Each profile's launch keeps its own tensor map.
  ASSERT_EQ(back.profiles[0].launches[1].tensor_maps.size(), 1u);
  ASSERT_EQ(back.profiles[1].launches[1].tensor_maps.size(), 1u);
  EXPECT_EQ(back.profiles[0].launches[1].tensor_maps[0].dims[3], 1u);
  EXPECT_EQ(back.profiles[1].launches[1].tensor_maps[0].dims[3], 2u);
  EXPECT_EQ(back.profiles[1].launches[1].tensor_maps, plan.profiles[1].launches[1].tensor_maps);
  // Inputs and outputs are allocated at the larger profile's size, once.
  EXPECT_EQ(io_buffer_bytes(back, Region::kInput, 0), 384u);
  EXPECT_EQ(io_buffer_bytes(back, Region::kOutput, 0), 80u);
  EXPECT_EQ(device_bytes(back), 4096u + 768 + 512 + 1024 + 384 + 256);
}

// Plans whose profiles contradict each other or the batch range.
TEST(EngineFile, InconsistentProfilesAreCorrupt) {
  struct Case {
    std::function<void(EnginePlan&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](EnginePlan& p) { p.profiles.clear(); }, "no profiles"},
      {[](EnginePlan& p) { std::swap(p.profiles[0], p.profiles[1]); },
       "profile 1 after profile 2"},
      {[](EnginePlan& p) { p.batch = {1, 4, 2}; },
       "profiles 1 to 2 for batch range 1:4 (opt 2)"},
      {[](EnginePlan& p) { p.batch.opt = 3; }, "batch range 1:2 (opt 3)"},
      {[](EnginePlan& p) { p.batch = {0, 2, 2}; }, "batch range 0:2 (opt 2)"},
      {[](EnginePlan& p) { p.profiles[0].inputs[0].name = "z"; },
       "profile 2: input 'x' differs from profile 1's"},
      {[](EnginePlan& p) { p.profiles[1].outputs.pop_back(); },
       "profile 2: 1 inputs and 2 outputs, profile 1 has 1 and 3"},
      {[](EnginePlan& p) {
         p.profiles[0].inputs[0].shape = {3, 3, 4, 4};
         p.profiles[0].launches[0].params[0].bytes = 576;
       },
       "profile 1: input 'x' has shape [3,3,4,4], which does not lead with the batch"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[2].bytes = 80; },
       "profile 1: launch 1 ('fc') word 2 addresses bytes [0, 0 + 80) of output 0, which has 40 "
       "bytes"},
      // Every profile's tensor maps are checked, not only the first's or the largest's.
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[1] = {}; },
       "profile 1: launch 1 ('fc') tensor map 0 maps parameter word 1, which holds no address"},
      {[](EnginePlan& p) { p.profiles[1].launches[1].tensor_maps[0].pixels_per_column = 300; },
       "profile 2: launch 1 ('fc') tensor map 0: im2col map of 300 pixels per column (1 to 256)"},
  };
  for (const Case& c : cases) {
    EnginePlan plan = two_profile_plan();
    c.edit(plan);
    EXPECT_EQ(parse_error(serialize_plan(plan)), "engine file model.tsl is corrupt: " + c.error);
  }
}

TEST(EngineFile, WriteIsAtomicAndReadsBack) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessel_engine_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.tsl").string();
  std::ofstream(path) << "an older file, replaced whole";
  write_engine_file(synthetic_plan(), path);
  EXPECT_EQ(read_engine_file(path), synthetic_plan());
  EXPECT_TRUE(is_engine_file(path));
  // Only the file itself: the temporary it was written through was renamed over it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  // The magic decides where the extension does not.
  const std::string renamed = (dir / "engine.bin").string();
  std::filesystem::rename(path, renamed);
  EXPECT_TRUE(is_engine_file(renamed));
  std::ofstream(dir / "model.onnx") << "\x08\x07 protobuf";
  EXPECT_FALSE(is_engine_file((dir / "model.onnx").string()));
  EXPECT_EQ(user_error([&] { read_engine_file((dir / "none.tsl").string()); }),
            (dir / "none.tsl").string() + ": cannot open file");
  EXPECT_NE(user_error([&] {
              write_engine_file(synthetic_plan(), (dir / "no/such/m.tsl").string());
            }).find("no/such/m.tsl: cannot open for writing"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// Cut at every section boundary (tag, length, body), at every byte of the header and at
// interior offsets of every section: "truncated", whatever the cut.
TEST(EngineFile, TruncatedAtAnyCut) {
  const std::string bytes = serialize_plan(synthetic_plan());
  std::vector<size_t> cuts;
  for (size_t c = 0; c <= kEngineHeaderBytes; ++c) cuts.push_back(c);
  for (size_t s : section_offsets(bytes)) {
    const size_t body = s + 12, end = body + le(bytes, s + 4, 8);
    for (size_t c : {s, s + 2, s + 4, s + 8, body, body + 1, (body + end) / 2, end - 1})
      cuts.push_back(c);
  }
  for (size_t c = kEngineHeaderBytes; c < bytes.size(); c += 37) cuts.push_back(c);
  cuts.push_back(bytes.size() - 1);
  for (size_t cut : cuts) {
    ASSERT_LT(cut, bytes.size());
    const std::string e = parse_error(bytes.substr(0, cut));
    EXPECT_EQ(
        e.rfind("engine file model.tsl is truncated: it has " + std::to_string(cut) + " bytes", 0),
        0u)
        << "cut at " << cut << ": " << e;
  }
  EXPECT_EQ(parse_error(bytes.substr(0, 100)),
            "engine file model.tsl is truncated: it has 100 bytes, its header says 32 + " +
                std::to_string(bytes.size() - 32));
  EXPECT_EQ(parse_error(bytes.substr(0, 20)),
            "engine file model.tsl is truncated: it has 20 bytes, shorter than the 32-byte header");
}

TEST(EngineFile, FlippedByteIsAChecksumMismatch) {
  const std::string bytes = serialize_plan(synthetic_plan());
  for (size_t pos :
       {kEngineHeaderBytes, kEngineHeaderBytes + 50, bytes.size() / 2, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[pos] = static_cast<char>(damaged[pos] ^ 0x10);
    EXPECT_EQ(parse_error(damaged).rfind(
                  "engine file model.tsl is corrupt: checksum mismatch (stored 0x", 0),
              0u)
        << "flip at " << pos << ": " << parse_error(damaged);
  }
  std::string damaged = bytes;
  damaged[24] ^= 1;  // the stored checksum itself
  EXPECT_NE(parse_error(damaged).find("checksum mismatch"), std::string::npos);
  EXPECT_EQ(parse_error(bytes + "x"),
            "engine file model.tsl is corrupt: 1 bytes after the end its header gives");
}

TEST(EngineFile, BadMagic) {
  EXPECT_EQ(parse_error("GIF89a, a picture and not an engine at all"),
            "model.tsl is not a tessel engine file");
  EXPECT_EQ(parse_error("TSX"), "model.tsl is not a tessel engine file");
  std::string bytes = serialize_plan(synthetic_plan());
  bytes[3] = 'X';
  EXPECT_EQ(parse_error(bytes), "model.tsl is not a tessel engine file");
}

TEST(EngineFile, NewerFormatVersion) {
  std::string bytes = serialize_plan(synthetic_plan());
  put_le(bytes, 8, kEngineFormatVersion + 1, 4);
  EXPECT_EQ(parse_error(bytes),
            "model.tsl has engine format version " + std::to_string(kEngineFormatVersion + 1) +
                "; this tessel reads version " + std::to_string(kEngineFormatVersion) +
                "; recompile it with tessel compile");
  // The version is read before the rest of the header: a short file of another version says so.
  EXPECT_NE(parse_error(bytes.substr(0, 12)).find("has engine format version"), std::string::npos);
}

// Files of the formats before (version 2: no profiles, no tensor maps; version 3: profiles or
// tensor maps, never both) are refused by their version, with the fix.
TEST(EngineFile, OlderFormatVersion) {
  for (uint32_t version : {2u, 3u}) {
    std::string bytes = serialize_plan(synthetic_plan());
    put_le(bytes, 8, version, 4);
    EXPECT_EQ(parse_error(bytes), "model.tsl has engine format version " +
                                      std::to_string(version) + "; this tessel reads version " +
                                      std::to_string(kEngineFormatVersion) +
                                      "; recompile it with tessel compile");
  }
}

// Files whose checksum holds but whose sections do not: a reader that trusted their counts or
// lengths would read out of bounds or allocate without limit.
TEST(EngineFile, MalformedSectionsInASealedFile) {
  const std::string bytes = serialize_plan(synthetic_plan());
  const std::vector<size_t> at = section_offsets(bytes);
  auto damaged = [&](const std::function<void(std::string&)>& edit) {
    std::string b = bytes;
    edit(b);
    reseal(b);
    return parse_error(b);
  };
  EXPECT_EQ(
      damaged([&](std::string& b) { b.replace(at[0], 4, "XXXX"); }),
      "engine file model.tsl is corrupt: the section list: section 0 is 'XXXX', expected 'TRGT'");
  // TRGT's first field is the arch string's length.
  EXPECT_EQ(damaged([&](std::string& b) { put_le(b, at[0] + 12, 1000, 4); }),
            "engine file model.tsl is corrupt: section TRGT: it ends inside a string");
  // CUBN starts with the cubin count, PRFL with the profile count.
  EXPECT_NE(damaged([&](std::string& b) {
              put_le(b, at[3] + 12, 1000000, 4);
            }).find("section CUBN: it claims 1000000 cubins in "),
            std::string::npos);
  EXPECT_NE(damaged([&](std::string& b) {
              put_le(b, at[4] + 12, 1000000, 4);
            }).find("section PRFL: it claims 1000000 profiles in "),
            std::string::npos);
  // A section longer than what is left of the payload.
  EXPECT_EQ(damaged([&](std::string& b) { put_le(b, at[4] + 4, 1u << 30, 8); }),
            "engine file model.tsl is corrupt: the section list: it ends inside a section body");
  // SIZE one byte longer than its fields.
  EXPECT_EQ(damaged([&](std::string& b) {
              const uint64_t length = le(b, at[1] + 4, 8);
              b.insert(at[1] + 12 + length, 1, '\0');
              put_le(b, at[1] + 4, length + 1, 8);
              put_le(b, 16, le(b, 16, 8) + 1, 8);
            }),
            "engine file model.tsl is corrupt: section SIZE: 1 bytes left over at its end");
  // A launch's grid-dependent flag (after its entry, grid, block and shared memory) is 0 or 1.
  const size_t fc_entry = bytes.find("tessel_gemm");
  ASSERT_NE(fc_entry, std::string::npos);
  const size_t fc_flag = fc_entry + std::string("tessel_gemm").size() + 12 + 12 + 4;
  ASSERT_EQ(bytes[fc_flag], 1);
  EXPECT_EQ(damaged([&](std::string& b) { b[fc_flag] = 2; }),
            "engine file model.tsl is corrupt: section PRFL: a launch's grid-dependent flag is 2");
  std::string sections = bytes;
  put_le(sections, 12, 7, 4);
  EXPECT_EQ(parse_error(sections), "engine file model.tsl is corrupt: 7 sections, expected 5");
}

// Plans that are wrong, serialized by the writer (which does not check): well-formed, sealed
// files that the reader must refuse before anything is allocated or launched.
TEST(EngineFile, InconsistentPlansAreCorrupt) {
  struct Case {
    std::function<void(EnginePlan&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](EnginePlan& p) { p.profiles[0].launches[1].cubin = 5; }, "launch 1 ('fc') uses cubin 5 of 2"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[0].offset = 4000; },
       "launch 1 ('fc') word 0 addresses bytes [4000, 4000 + 192) of arena, which has 4096 bytes"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[4].offset = 760; },
       "launch 1 ('fc') word 4 addresses bytes [760, 760 + 40) of constants, which has 768 bytes"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[3].index = 3; },
       "launch 1 ('fc') word 3 addresses workspace 3 of 1"},
      {[](EnginePlan& p) { p.profiles[0].launches[0].params[0] = reloc(Region::kInput, 0, 8, 384); },
       "launch 0 ('x.to_f16') word 0 addresses bytes [8, 8 + 384) of input 0, which has 384 bytes"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[6] = reloc(Region::kNull, 0, 64, 0); },
       "launch 1 ('fc') word 6 is null but has index 0, offset 64, bytes 0"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[1].index = 1; },
       "launch 1 ('fc') word 1 addresses constants number 1 of 1"},
      {[](EnginePlan& p) { p.profiles[0].launches[0].params.resize(17); },
       "launch 0 ('x.to_f16') has 17 parameter words, at most 16"},
      {[](EnginePlan& p) { p.profiles[0].launches[0].grid[1] = 0; },
       "launch 0 ('x.to_f16') has an invalid grid or block"},
      {[](EnginePlan& p) {
         p.profiles[0].launches[0].block = {32, 32, 2};
       },
       "launch 0 ('x.to_f16') has 2048 threads per block"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].entry.clear(); }, "launch 1 ('fc') has no kernel name"},
      {[](EnginePlan& p) { p.profiles[0].outputs[0].source = reloc(Region::kArena, 0, 0, 80); },
       "output 0 'y' is read from arena"},
      {[](EnginePlan& p) { p.profiles[0].outputs[1].source.index = 2; },
       "output 1 'y_again' is read from output 2"},
      {[](EnginePlan& p) { p.profiles[0].outputs[2].source.offset = 764; },
       "output 2 'table' addresses bytes [764, 764 + 8) of constants, which has 768 bytes"},
      {[](EnginePlan& p) { p.profiles[0].outputs[2].source.bytes = 4; }, "output 2 'table' is read as 4 bytes"},
      {[](EnginePlan& p) {
         p.profiles[0].inputs[0].shape = {2, -3};
       },
       "input 'x' has a malformed shape [2,-3]"},
      {[](EnginePlan& p) {
         p.profiles[0].inputs[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
       },
       "input 'x' has a malformed shape [1099511627776,1099511627776]"},
      {[](EnginePlan& p) { p.arena_bytes = uint64_t{1} << 50; },
       "a region of 1125899906842624 bytes"},
      {[](EnginePlan& p) { p.workspace_bytes.resize(70000); },
       "70005 workspaces, inputs and outputs"},
      {[](EnginePlan& p) { p.cubins[1].clear(); }, "cubin 1 is empty"},
      {[](EnginePlan& p) { p.profiles[0].batch = 0; }, "batch 0"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].params[1] = {}; },
       "launch 1 ('fc') tensor map 0 maps parameter word 1, which holds no address"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].tensor_maps[0].operand = 9; },
       "launch 1 ('fc') tensor map 0: tensor map of operand 9 (0 to 7 expected)"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].tensor_maps[0].strides[0] = 100; },
       "launch 1 ('fc') tensor map 0: tensor map stride 100 bytes of dim 1 (a multiple of 16 below 2^40)"},
      {[](EnginePlan& p) { p.profiles[0].launches[1].tensor_maps[0].pixels_per_column = 512; },
       "launch 1 ('fc') tensor map 0: im2col map of 512 pixels per column (1 to 256)"},
      {[](EnginePlan& p) {
         std::vector<device::TensorMapSpec>& maps = p.profiles[0].launches[1].tensor_maps;
         maps.resize(5, maps[0]);
       },
       "launch 1 ('fc') has 5 tensor maps, at most 4"},
  };
  for (const Case& c : cases) {
    EnginePlan plan = synthetic_plan();
    c.edit(plan);
    EXPECT_EQ(parse_error(serialize_plan(plan)), "engine file model.tsl is corrupt: " + c.error);
  }
  // A region number no Region has: refused while reading, before check_plan.
  EnginePlan plan = synthetic_plan();
  plan.profiles[0].launches[1].params[7].region = static_cast<Region>(9);
  EXPECT_EQ(parse_error(serialize_plan(plan)),
            "engine file model.tsl is corrupt: section PRFL: unknown region 9");
  plan = synthetic_plan();
  plan.profiles[0].launches[1].tensor_maps[0].mode = static_cast<device::TensorMapSpec::Mode>(7);
  EXPECT_EQ(parse_error(serialize_plan(plan)),
            "engine file model.tsl is corrupt: section PRFL: unknown tensor map mode 7");
}

device::DeviceInfo a100() {
  device::DeviceInfo d;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.cc_major = 8;
  d.cc_minor = 0;
  d.sm_count = 108;
  d.smem_per_block_optin = 163 * 1024;
  d.global_mem = size_t{80} << 30;
  return d;
}

device::DeviceInfo h100() {
  device::DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.smem_per_block_optin = 227 * 1024;
  d.global_mem = size_t{80} << 30;
  return d;
}

TEST(EngineFile, PlanAgainstDevice) {
  const EnginePlan plan = synthetic_plan();
  EXPECT_EQ(user_error([&] { check_plan_device(plan, h100(), kPath); }), "");
  EXPECT_EQ(user_error([&] { check_plan_device(plan, a100(), kPath); }),
            "model.tsl was compiled for sm_90a (NVIDIA H100 SXM, 132 SMs), this device is sm_80 "
            "(NVIDIA A100-SXM4-80GB, 108 SMs); recompile it with tessel compile");
  // Another H100 with less shared memory per block than a launch asks for.
  device::DeviceInfo small = h100();
  small.smem_per_block_optin = 40 * 1024;
  EXPECT_EQ(
      user_error([&] { check_plan_device(plan, small, kPath); }),
      "model.tsl needs 49152 bytes of shared memory per block (node 'fc'), this device "
      "(sm_90a (NVIDIA H100 80GB HBM3, 132 SMs)) allows 40960; recompile it with tessel compile");
  device::DeviceInfo tiny = h100();
  tiny.global_mem = 4096;
  EXPECT_EQ(user_error([&] { check_plan_device(plan, tiny, kPath); }),
            "model.tsl needs " + std::to_string(device_bytes(plan)) +
                " bytes of device memory, this device (sm_90a (NVIDIA H100 80GB HBM3, 132 SMs)) "
                "has 4096");
}

// Each region at least 256 bytes; the outputs that share a buffer or are not computed take none.
TEST(EngineFile, DeviceBytesCountsEveryRegionOnce) {
  // arena 4096, constants 768, scratch 512, workspace 1024, input 384, output y 80 -> 256.
  EXPECT_EQ(device_bytes(synthetic_plan()), 4096u + 768 + 512 + 1024 + 384 + 256);
  EXPECT_EQ(tensor_core_launches(synthetic_plan().profiles[0]), 1);
}

TEST(EngineFile, KnownTargets) {
  const device::DeviceInfo& h = device::known_device("sm_90a");
  EXPECT_EQ(h.sm_count, 132);
  EXPECT_EQ(h.smem_per_block_optin, 227u * 1024);
  EXPECT_EQ(h.cc_major * 10 + h.cc_minor, 90);
  const device::DeviceInfo& a = device::known_device("sm_80");
  EXPECT_EQ(a.sm_count, 108);
  EXPECT_EQ(a.smem_per_block_optin, 163u * 1024);
  EXPECT_EQ(h100().arch(), "sm_90a");
  EXPECT_EQ(user_error([] { device::known_device("sm_75"); }),
            "unknown target 'sm_75': tessel compiles for sm_90a (NVIDIA H100 SXM), sm_80 (NVIDIA "
            "A100 SXM)");
}

// The engine file records the target's name, compute capability, SMs and shared memory, and
// nothing else of the device: a plan compiled here equals the plan read back.
TEST(EngineFile, RecordedTargetKeepsWhatTheFileStores) {
  device::DeviceInfo d = h100();
  d.l2_bytes = 50u << 20;
  d.peak_tensor_tflops = 989.4;
  d.peak_tensor_int8_tops = 1978.9;
  const device::DeviceInfo t = recorded_target(d);
  EXPECT_EQ(t.name, d.name);
  EXPECT_EQ(t.arch(), "sm_90a");
  EXPECT_EQ(t.sm_count, 132);
  EXPECT_EQ(t.smem_per_block_optin, 227u * 1024);
  EXPECT_EQ(t.l2_bytes, 0u);
  EXPECT_EQ(t.peak_tensor_tflops, 0);
  EXPECT_EQ(t.peak_tensor_int8_tops, 0);
}

TEST(EngineFile, LoadAndMemoryInfoWithoutGpu) {
  if (device::cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(user_error([] { Engine::load(synthetic_plan(), kPath); }).rfind("no CUDA device: ", 0),
            0u);
  EXPECT_EQ(user_error([] { device::memory_info(); }).rfind("no CUDA device: ", 0), 0u);
}

// A dense layer with bias and relu: in fp16 a Cast of the input and a tessel.Gemm on Tensor
// Cores whose epilogue adds the bias, applies the relu and stores f32.
ir::Graph dense_model(int64_t batch = 2) {
  testing::IrWriter w(3);
  const std::string b = std::to_string(batch);
  w.input("x", "f32[" + b + ",64]");
  w.constant("w", {32, 64}, -0.5, 0.5);
  w.constant("b", {32}, -0.5, 0.5);
  w.node("%y = Gemm(%x, %w, %b) {transB = 1} : f32[" + b + ",32] @\"fc\"");
  w.node("%z = Relu(%y) : f32[" + b + ",32] @\"relu\"");
  return w.graph("z");
}

// Cross-compiled for both known targets with NVRTC, on a machine that may have no GPU. What
// holds whatever the pass pipeline chooses around it: the dense layer is one Tensor Core
// launch whose words address the output buffer, the f16 weights and the f32 bias copy.
TEST(EngineFile, CrossCompiledPlans) {
  const auto cache = std::filesystem::temp_directory_path() / "tessel_engine_file_test_cache";
  device::set_cache_dir(cache.string());
  std::vector<EnginePlan> plans;
  for (const char* arch : {"sm_90a", "sm_80"}) {
    SCOPED_TRACE(arch);
    const compiler::CompiledPlan compiled =
        compiler::compile_plan(dense_model(), {}, device::known_device(arch));
    const EnginePlan& p = compiled.plan;
    EXPECT_EQ(p.target, recorded_target(device::known_device(arch)));
    EXPECT_EQ(p.batch, (BatchRange{2, 2, 2}));
    EXPECT_EQ(p.precision, Precision::kFp16);
    EXPECT_EQ(p.tessel_version, kTesselVersion);
    ASSERT_EQ(p.profiles[0].inputs.size(), 1u);
    EXPECT_EQ(p.profiles[0].inputs[0], (PlanTensor{"x", DType::kF32, {2, 64}, {}}));
    ASSERT_EQ(p.profiles[0].outputs.size(), 1u);
    EXPECT_EQ(p.profiles[0].outputs[0],
              (PlanTensor{"z", DType::kF32, {2, 32}, reloc(Region::kOutput, 0, 0, 256)}));
    for (const std::string& cubin : p.cubins)
      EXPECT_EQ(cubin.substr(0, 4),
                "\x7f"
                "ELF");
    int gemms = 0;
    for (const PlanLaunch& l : p.profiles[0].launches) {
      EXPECT_LT(l.cubin, p.cubins.size());
      // Every kernel enters through grid_dependency_wait, so each launch may follow the one
      // before it as a programmatic dependent (a no-op in the sm_80 kernels).
      EXPECT_TRUE(l.grid_dependent) << l.node;
      if (l.op != "tessel.Gemm") {
        EXPECT_EQ(l.epilogue, "") << l.node;  // op kernels have none
        EXPECT_EQ(l.operand_dtype, "") << l.node;
        continue;
      }
      ++gemms;
      EXPECT_EQ(l.node, "fc");
      EXPECT_EQ(l.flops, 2 * 2 * 32 * 64);
      EXPECT_TRUE(l.instruction == "mma.sync" ||
                  (l.instruction == "wgmma" && p.target.arch() == "sm_90a"))
          << l.instruction;
      EXPECT_FALSE(l.schedule.empty());
      // The bias and the ReLU run in the GEMM's epilogue, and the launch says so (for tools).
      EXPECT_NE(l.epilogue.find("bias(#0) -> relu -> store"), std::string::npos) << l.epilogue;
      EXPECT_EQ(l.operand_dtype, "f16");  // the fp16 engine's GEMM
      ASSERT_EQ(l.params.size(), 8u);
      EXPECT_EQ(l.params[2], reloc(Region::kOutput, 0, 0, 256));  // C
      EXPECT_EQ(l.params[1].region, Region::kConstants);          // B: the f16 weights
      EXPECT_EQ(l.params[1].bytes, 32u * 64 * 2);
      EXPECT_EQ(l.params[4].region, Region::kConstants);  // extra[0]: the bias, as f32
      EXPECT_EQ(l.params[4].bytes, 32u * 4);
      EXPECT_TRUE(l.params[0].region == Region::kArena || l.params[0].region == Region::kInput);
    }
    EXPECT_EQ(gemms, 1);
    EXPECT_EQ(tensor_core_launches(p.profiles[0]), 1);
    EXPECT_EQ(parse_plan(serialize_plan(p), kPath), p);
    EXPECT_EQ(user_error([&] { check_plan_device(p, h100(), kPath); }).empty(),
              p.target.arch() == "sm_90a");
    plans.push_back(p);
  }
  EXPECT_NE(plans[0].cubins, plans[1].cubins);
}

// A dynamic engine cross-compiled for batch 1:4 (opt 3): profiles 1, 2, 3, 4, each the plan a
// static compile for its batch makes, with the weights stored once and the file round-tripping.
TEST(EngineFile, CrossCompiledDynamicPlan) {
  device::set_cache_dir(
      (std::filesystem::temp_directory_path() / "tessel_engine_file_test_cache").string());
  const device::DeviceInfo& h = device::known_device("sm_90a");
  const compiler::CompiledPlan dynamic = compiler::compile_profiles(
      [](int64_t b) { return dense_model(b); }, {1, 4, 3}, {}, h);
  const EnginePlan& p = dynamic.plan;
  EXPECT_EQ(p.batch, (BatchRange{1, 4, 3}));
  ASSERT_EQ(p.profiles.size(), 4u);
  uint64_t largest_arena = 0;
  for (size_t k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    const int64_t b = static_cast<int64_t>(k) + 1;
    const PlanProfile& got = p.profiles[k];
    const EnginePlan alone = compiler::compile_plan(dense_model(b), {}, h).plan;
    const PlanProfile& want = alone.profiles[0];
    EXPECT_EQ(got.batch, b);
    EXPECT_EQ(got.inputs, want.inputs);
    EXPECT_EQ(got.outputs, want.outputs);
    ASSERT_EQ(got.launches.size(), want.launches.size());
    for (size_t i = 0; i < got.launches.size(); ++i) {
      const PlanLaunch& g = got.launches[i];
      const PlanLaunch& w = want.launches[i];
      EXPECT_EQ(p.cubins[g.cubin], alone.cubins[w.cubin]);
      EXPECT_EQ(g.entry, w.entry);
      EXPECT_EQ(g.grid, w.grid);
      EXPECT_EQ(g.flops, w.flops);
      ASSERT_EQ(g.params.size(), w.params.size());
      for (size_t j = 0; j < g.params.size(); ++j) {
        EXPECT_EQ(g.params[j].region, w.params[j].region);
        EXPECT_EQ(g.params[j].bytes, w.params[j].bytes);
        // The same constant bytes, wherever the shared image keeps them.
        if (g.params[j].region == Region::kConstants) {
          EXPECT_EQ(p.constants.substr(g.params[j].offset, g.params[j].bytes),
                    alone.constants.substr(w.params[j].offset, w.params[j].bytes));
        }
      }
    }
    largest_arena = std::max(largest_arena, alone.arena_bytes);
    // The weights are not stored once per profile.
    EXPECT_LE(p.constants.size(), alone.constants.size());
  }
  EXPECT_EQ(p.arena_bytes, largest_arena);
  EXPECT_EQ(p.profiles[0].launches[0].flops * 4, p.profiles[3].launches[0].flops);
  EXPECT_EQ(parse_plan(serialize_plan(p), kPath), p);
  // A model whose input does not lead with the batch has no dynamic batch.
  EXPECT_EQ(user_error([&] {
              compiler::compile_profiles([](int64_t) { return dense_model(2); }, {1, 4, 4}, {}, h);
            }),
            "batch range 1:4: input 'x' is f32[2,64] at batch 1; a batch range needs every input "
            "and output to lead with the batch (a symbolic first dimension)");
}

// A 3x3 conv, 256 -> 256 channels on 14x14 (ResNet-50's layer 3), which the cost model runs on
// the H100 with the TMA kernel (default_schedule_test), then a ReLU.
ir::Graph tma_conv_model(int64_t batch) {
  testing::IrWriter w(5);
  const std::string nchw = "f32[" + std::to_string(batch) + ",256,14,14]";
  w.input("x", nchw);
  w.constant("w", {256, 256, 3, 3}, -0.05, 0.05);
  w.node("%y = Conv(%x, %w) {pads = [1, 1, 1, 1]} : " + nchw + " @\"conv\"");
  w.node("%z = Relu(%y) : " + nchw + " @\"relu\"");
  return w.graph("z");
}

// A dynamic engine whose kernels read through TMA descriptors: each profile keeps the maps its
// own batch compiled to (the im2col map's image count differs between them), and they survive
// the file inside their profile.
TEST(EngineFile, CrossCompiledDynamicPlanWithTensorMaps) {
  device::set_cache_dir(
      (std::filesystem::temp_directory_path() / "tessel_engine_file_test_cache").string());
  const device::DeviceInfo& h = device::known_device("sm_90a");
  const EnginePlan p =
      compiler::compile_profiles([](int64_t b) { return tma_conv_model(b); }, {16, 32, 32}, {}, h)
          .plan;
  ASSERT_EQ(p.profiles.size(), 2u);
  std::vector<const PlanLaunch*> convs;
  for (const PlanProfile& got : p.profiles) {
    SCOPED_TRACE(got.batch);
    const EnginePlan alone = compiler::compile_plan(tma_conv_model(got.batch), {}, h).plan;
    ASSERT_EQ(got.launches.size(), alone.profiles[0].launches.size());
    for (size_t i = 0; i < got.launches.size(); ++i) {
      EXPECT_EQ(got.launches[i].tensor_maps, alone.profiles[0].launches[i].tensor_maps);
      if (got.launches[i].node == "conv") convs.push_back(&got.launches[i]);
    }
  }
  ASSERT_EQ(convs.size(), 2u);
  for (const PlanLaunch* conv : convs) {
    EXPECT_EQ(conv->schedule.rfind("tma_", 0), 0u) << conv->schedule;
    ASSERT_GE(conv->tensor_maps.size(), 2u);
    EXPECT_EQ(conv->tensor_maps[0].mode, device::TensorMapSpec::Mode::kIm2col);
  }
  // The activation's map spans the profile's images: [C, W, H, N], innermost first.
  EXPECT_EQ(convs[0]->tensor_maps[0].dims[3], 16u);
  EXPECT_EQ(convs[1]->tensor_maps[0].dims[3], 32u);
  EXPECT_EQ(check_plan(p), std::nullopt);
  EXPECT_EQ(parse_plan(serialize_plan(p), kPath), p);
}

// Every kind of graph output: a computed value (listed twice: the second reads the first's
// buffer), a graph input passed through, and a constant read from the constant image.
TEST(EngineFile, GraphOutputSources) {
  device::set_cache_dir(
      (std::filesystem::temp_directory_path() / "tessel_engine_file_test_cache").string());
  const ir::Graph g = ir::parse_graph(R"(graph @g opset 17 {
  input %x : f32[2,3]
  const %c : f32[2] = [1.5, -2.0]
  %y = Relu(%x) : f32[2,3] @"relu"
  output %y
  output %y
  output %x
  output %c
})");
  const EnginePlan p = compiler::compile_plan(g, {}, device::known_device("sm_90a")).plan;
  ASSERT_EQ(p.profiles[0].outputs.size(), 4u);
  EXPECT_EQ(p.profiles[0].outputs[0].source, reloc(Region::kOutput, 0, 0, 24));
  EXPECT_EQ(p.profiles[0].outputs[1].source, reloc(Region::kOutput, 0, 0, 24));
  EXPECT_EQ(p.profiles[0].outputs[2].source, reloc(Region::kInput, 0, 0, 24));
  const Relocation c = p.profiles[0].outputs[3].source;
  ASSERT_EQ(c.region, Region::kConstants);
  ASSERT_EQ(c.bytes, 8u);
  float values[2];
  std::memcpy(values, p.constants.data() + c.offset, sizeof values);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);
  // The last launch writes y into output 0's buffer; nothing writes output 1's.
  ASSERT_FALSE(p.profiles[0].launches.empty());
  const std::vector<Relocation>& words = p.profiles[0].launches.back().params;
  EXPECT_NE(std::find(words.begin(), words.end(), reloc(Region::kOutput, 0, 0, 24)), words.end());
  EXPECT_EQ(region_bytes(p, p.profiles[0], Region::kOutput, 1), 0u);
}

}  // namespace
}  // namespace tessel::runtime
