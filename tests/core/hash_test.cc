// The one hash (core/hash.h): FNV-1a 64 test vectors, and field framing of Hasher.
#include <gtest/gtest.h>

#include <string>

#include "core/hash.h"

namespace tessel {
namespace {

TEST(Hash, Fnv1a64TestVectors) {
  // From the FNV reference test suite (Fowler, Noll, Vo).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cull, "usable at compile time");
}

TEST(Hash, ContinuesFromAGivenHash) {
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
}

TEST(Hash, FieldsAreLengthPrefixed) {
  EXPECT_NE(Hasher().add("ab").add("c").value(), Hasher().add("a").add("bc").value());
  EXPECT_EQ(Hasher().add("ab").add("c").value(), Hasher().add("ab").add("c").value());
}

TEST(Hash, IntegersHashAsTheirLittleEndianBytes) {
  // Kernel-cache keys written before Hasher existed hashed integers this way; keeping it keeps
  // every cached kernel valid.
  const std::string le("\x01\x02\x00\x00\x00\x00\x00\x00", 8);
  EXPECT_EQ(Hasher().add(uint64_t{0x0201}).value(), fnv1a64(le));
}

}  // namespace
}  // namespace tessel
