#include "ir/attribute.h"

namespace tessel::ir {

const char* attribute_kind(const Attribute& a) {
  static constexpr const char* kNames[] = {"int",    "float",   "string", "ints",
                                           "floats", "strings", "tensor"};
  return kNames[a.index()];
}

bool attribute_equal(const Attribute& a, const Attribute& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, Tensor>) {
          return bitwise_equal(x, y);
        } else {
          return x == y;
        }
      },
      a);
}

}  // namespace tessel::ir
