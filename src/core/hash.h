// The one hash of tessel: FNV-1a, 64 bit. Tiny, dependency-free and ample for what it does
// here: kernel names (equal generated source, equal name), kernel-cache keys, and the checksums
// of cache entries and engine files, which catch truncation and flipped bytes (not forgery:
// engine files are bounded by check_plan instead).
#pragma once

#include <cstdint>
#include <string_view>

namespace tessel {

inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;

// FNV-1a of `data`, continuing from `hash` (the offset basis starts a new hash).
constexpr uint64_t fnv1a64(std::string_view data, uint64_t hash = kFnvOffsetBasis) {
  for (char c : data) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// A hash over a sequence of fields. Each field is hashed with its length first, so ("ab", "c")
// and ("a", "bc") differ.
class Hasher {
 public:
  Hasher& add(std::string_view field) {
    add(static_cast<uint64_t>(field.size()));
    hash_ = fnv1a64(field, hash_);
    return *this;
  }
  Hasher& add(uint64_t value) {
    for (int i = 0; i < 8; ++i) {  // little-endian bytes, as the cache files store integers
      hash_ ^= static_cast<uint8_t>(value >> (8 * i));
      hash_ *= 0x100000001b3ull;
    }
    return *this;
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = kFnvOffsetBasis;
};

}  // namespace tessel
