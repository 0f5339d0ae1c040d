// Internal to the CUDA layer: the on-disk cache of compiled kernels.
//
// One file per kernel, <cache_dir>/kernels/<key as 16 hex digits>.cubin:
//   offset  size  field
//        0     8  magic "TSLKCUBN"
//        8     4  format version (kFormatVersion), little endian like every field
//       12     4  header size in bytes (40)
//       16     8  key the entry was stored under
//       24     8  payload length in bytes
//       32     8  FNV-1a 64 checksum of the payload
//       40     -  payload: u64 cubin length, cubin bytes, NVRTC log (the rest)
// Entries are written to a temporary file in the same directory and renamed into place, so a
// reader sees a whole entry or none, even with several processes compiling at once. An entry
// that fails any check (truncated by a crash, a flipped byte, another format version) is
// deleted and reported as a miss, and the kernel is compiled afresh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/hash.h"

namespace tessel::device::detail {

inline constexpr uint32_t kCacheFormatVersion = 1;


struct CacheEntry {
  std::string cubin;
  std::string log;
};

// The entry stored under `key` in `dir`, or nothing (no entry, or a corrupt one, now deleted).
std::optional<CacheEntry> cache_load(const std::string& dir, uint64_t key);

// Stores `entry` under `key`, creating `dir` if needed. Throws UserError if the directory
// cannot be written, naming it and how to choose another.
void cache_store(const std::string& dir, uint64_t key, const CacheEntry& entry);

// The cache directory the environment asks for, given the values of TESSEL_CACHE_DIR,
// XDG_CACHE_HOME and HOME (null when unset); "" disables the cache. cache_dir() passes getenv.
std::string default_cache_dir(const char* tessel_cache_dir, const char* xdg_cache_home,
                              const char* home);

// The file an entry lives in (exposed for tests that damage entries on purpose).
std::string cache_entry_path(const std::string& dir, uint64_t key);

}  // namespace tessel::device::detail
