// The .tsl engine file: an EnginePlan (engine_plan.h) on disk, written by `tessel compile` and
// loaded by `tessel run/bench/profile model.tsl` without compiling anything.
//
// Little-endian throughout. A 32-byte header, then the payload:
//   offset  size  field
//        0     8  magic "TSLENGIN"
//        8     4  format version (kEngineFormatVersion): fixed at this offset in every version
//       12     4  section count (5)
//       16     8  payload length in bytes
//       24     8  FNV-1a 64 checksum of the payload
//       32     -  payload: sections, each a 4-byte tag, a u64 body length, the body
// The sections, in this order (str = u32 length + bytes; blob = u64 length + bytes):
//   TRGT  target: str arch, str device name, u32 SMs, u64 smem per block, u32 cc major, u32 cc
//         minor; u8 precision (0 fp32, 1 fp16); i64 batch min, max, opt; str tessel version
//   SIZE  u64 arena bytes, u64 scratch bytes, u32 workspace count, u64 bytes each
//   CNST  the constant image (the section body), shared by every profile
//   CUBN  u32 count, a blob each
//   PRFL  u32 profile count; each: i64 batch; u32 input count, inputs; u32 output count,
//         outputs; u32 launch count, launches. A tensor: str name, str dtype ("f32"), u32 rank,
//         i64 extents; an output then its source relocation. A launch: u32 cubin, str entry,
//         u32 grid[3], u32 block[3], u32 smem bytes, u8 grid-dependent (0 or 1), u32 word
//         count, relocations; then str
//         node, str op, i64 flops, i64 bytes, str instruction, str schedule, i64 predicted time
//         in nanoseconds; u32 tensor map count, tensor maps
// A relocation: u8 region (Region's value), u32 index, u64 offset, u64 bytes.
// A tensor map (device::TensorMapSpec): u8 mode, u8 element type, u8 operand word, u8 rank,
// u8 swizzle; i64 offset bytes; u64 dims[5], u64 strides[4]; u32 box[5], u32 element
// strides[5], i32 lower[3], i32 upper[3], u32 channels per pixel, u32 pixels per column.
//
// Reading trusts nothing: the magic, the version, the header against the file's size, the
// checksum, every length against the bytes left, and then check_plan() on the result, all
// before anything large is allocated. Each failure is a UserError naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/engine_plan.h"

namespace tessel::runtime {

// 2: each launch's predicted time; 3: TMA descriptors of launches (main) or profiles (the
// dynbatch branch), two different layouts that shipped as 3; 4: both, a launch's TMA
// descriptors inside its profile; 5: each launch's analytical time beside its prediction;
// 6: a contraction launch's epilogue; 7: a contraction launch's operand dtype; 8: whether a
// launch's kernel waits on the grid before it (programmatic dependent launch)
inline constexpr uint32_t kEngineFormatVersion = 8;
inline constexpr size_t kEngineHeaderBytes = 32;

// The file's bytes. Writes `plan` as it is: serializing does not check it (check_plan).
std::string serialize_plan(const EnginePlan& plan);

// Parses and checks `bytes` (the whole file); `path` names it in errors.
//  "engine file P is truncated: ..."         shorter than its header says
//  "P is not a tessel engine file"            wrong magic
//  "P has engine format version N; this tessel reads version M; recompile it with tessel compile"
//  "engine file P is corrupt: ..."            checksum mismatch, a malformed section, or a plan
//                                             check_plan() refuses
EnginePlan parse_plan(std::string_view bytes, const std::string& path);

// Writes atomically (a temporary file beside `path`, renamed over it): a reader never sees
// half a file. UserError when the file cannot be written.
void write_engine_file(const EnginePlan& plan, const std::string& path);

// Reads and parses `path` (parse_plan's errors, and "P: cannot open file"). The header is read
// and checked against the file's size before the rest is read.
EnginePlan read_engine_file(const std::string& path);

// True when `path` names an engine file: a .tsl extension, or the engine magic at its start.
bool is_engine_file(const std::string& path);

}  // namespace tessel::runtime
