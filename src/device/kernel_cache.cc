// The on-disk kernel cache: file format, atomic writes, corruption checks, and its directory.
#include "device/kernel_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "core/error.h"
#include "device/cuda_api.h"

namespace tessel::device {
namespace detail {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'T', 'S', 'L', 'K', 'C', 'U', 'B', 'N'};
constexpr size_t kHeaderSize = 40;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t get_le(std::string_view in, size_t offset, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(in[offset + i])) << (8 * i);
  return v;
}

// Parses a whole entry file; nothing if any check fails.
std::optional<CacheEntry> parse_entry(std::string_view file, uint64_t key) {
  if (file.size() < kHeaderSize + 8) return std::nullopt;
  if (file.substr(0, 8) != std::string_view(kMagic, 8)) return std::nullopt;
  if (get_le(file, 8, 4) != kCacheFormatVersion) return std::nullopt;
  if (get_le(file, 12, 4) != kHeaderSize) return std::nullopt;
  if (get_le(file, 16, 8) != key) return std::nullopt;
  const uint64_t payload_len = get_le(file, 24, 8);
  if (payload_len != file.size() - kHeaderSize) return std::nullopt;
  std::string_view payload = file.substr(kHeaderSize);
  if (fnv1a64(payload) != get_le(file, 32, 8)) return std::nullopt;
  const uint64_t cubin_len = get_le(payload, 0, 8);
  if (cubin_len == 0 || cubin_len > payload.size() - 8) return std::nullopt;
  CacheEntry e;
  e.cubin = std::string(payload.substr(8, cubin_len));
  e.log = std::string(payload.substr(8 + cubin_len));
  return e;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Set by set_cache_dir(); overrides the environment.
std::mutex& dir_mutex() {
  static std::mutex mu;
  return mu;
}
std::optional<std::string>& dir_override() {
  static std::optional<std::string> dir;
  return dir;
}

}  // namespace


std::string default_cache_dir(const char* tessel_cache_dir, const char* xdg_cache_home,
                              const char* home) {
  // TESSEL_CACHE_DIR set but empty disables the cache, like set_cache_dir("").
  if (tessel_cache_dir) return tessel_cache_dir;
  if (xdg_cache_home && *xdg_cache_home) return (fs::path(xdg_cache_home) / "tessel").string();
  if (home && *home) return (fs::path(home) / ".cache" / "tessel").string();
  return "";
}

std::string cache_entry_path(const std::string& dir, uint64_t key) {
  return (fs::path(dir) / "kernels" / (hex16(key) + ".cubin")).string();
}

std::optional<CacheEntry> cache_load(const std::string& dir, uint64_t key) {
  const std::string path = cache_entry_path(dir, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  in.close();
  std::optional<CacheEntry> entry = parse_entry(file, key);
  if (!entry) {
    // Never load a damaged entry, and delete it so the rebuilt kernel replaces it. Another
    // process may have replaced it already; losing that fresh entry only costs a compile.
    std::error_code ec;
    fs::remove(path, ec);
  }
  return entry;
}

void cache_store(const std::string& dir, uint64_t key, const CacheEntry& entry) {
  const std::string path = cache_entry_path(dir, key);
  const fs::path folder = fs::path(path).parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  TESSEL_USER_CHECK(!ec) << "cannot create the kernel cache directory '" << folder.string()
                         << "': " << ec.message()
                         << " (set TESSEL_CACHE_DIR to a writable directory, or to an empty "
                            "value to disable the cache)";

  std::string payload;
  put_u64(payload, entry.cubin.size());
  payload += entry.cubin;
  payload += entry.log;
  std::string file(kMagic, 8);
  put_u32(file, kCacheFormatVersion);
  put_u32(file, kHeaderSize);
  put_u64(file, key);
  put_u64(file, payload.size());
  put_u64(file, fnv1a64(payload));
  file += payload;

  // Unique per process and thread; same directory as the entry, so the rename is atomic.
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp = folder / ("." + hex16(key) + "." + std::to_string(getpid()) + "." +
                                 std::to_string(counter++) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      TESSEL_USER_ERROR() << "cannot write the kernel cache entry '" << tmp.string()
                          << "' (disk full or read-only?); set TESSEL_CACHE_DIR to a "
                             "writable directory, or to an empty value to disable the cache";
    }
  }
  // No fsync: after a crash a renamed entry may be empty or partial, and the checksum turns
  // that into a rebuild, which is cheaper than syncing every compile.
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    TESSEL_USER_ERROR() << "cannot rename '" << tmp.string() << "' to '" << path
                        << "': " << ec.message();
  }
}

}  // namespace detail

std::string cache_dir() {
  std::lock_guard lock(detail::dir_mutex());
  if (const auto& dir = detail::dir_override()) return *dir;
  return detail::default_cache_dir(std::getenv("TESSEL_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"),
                                   std::getenv("HOME"));
}

void set_cache_dir(const std::string& dir) {
  std::lock_guard lock(detail::dir_mutex());
  detail::dir_override() = dir;
}

}  // namespace tessel::device
