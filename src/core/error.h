// Errors in tessel come in two kinds (STYLE.md, "From Halide"):
//  - UserError: the user's input is wrong (bad model, unsupported op, wrong shape). The CLI
//    prints it as one "error: ..." line and exits with code 2.
//  - InternalError: an invariant of the compiler is broken. It names the invariant.
// Both are built with a stream and thrown at the end of the full expression, so the message
// is only formatted on failure:
//   TESSEL_USER_CHECK(w.rank() == 4) << "Conv '" << name << "': weight has rank " << w.rank();
//   TESSEL_ICHECK(id >= 0) << "value id out of range";
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessel {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UserError : public Error {
 public:
  using Error::Error;
};

class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {

// Collects a message and throws from its destructor. Only ever a temporary inside a macro.
class ErrorReporter {
 public:
  enum class Kind { kUser, kInternal };
  ErrorReporter(Kind kind, const char* file, int line, const char* condition);
  ErrorReporter(const ErrorReporter&) = delete;
  ErrorReporter& operator=(const ErrorReporter&) = delete;
  [[noreturn]] ~ErrorReporter() noexcept(false);

  template <typename T>
  ErrorReporter& operator<<(const T& x) {
    stream_ << x;
    return *this;
  }

 private:
  Kind kind_;
  const char* file_;
  int line_;
  const char* condition_;
  std::ostringstream stream_;
};

}  // namespace detail
}  // namespace tessel

#define TESSEL_USER_ERROR()                                                                   \
  ::tessel::detail::ErrorReporter(::tessel::detail::ErrorReporter::Kind::kUser, __FILE__, \
                                  __LINE__, nullptr)

#define TESSEL_USER_CHECK(cond) \
  if (cond) {                   \
  } else                        \
    ::tessel::detail::ErrorReporter(::tessel::detail::ErrorReporter::Kind::kUser, __FILE__, \
                                    __LINE__, nullptr)

#define TESSEL_ICHECK(cond) \
  if (cond) {               \
  } else                    \
    ::tessel::detail::ErrorReporter(::tessel::detail::ErrorReporter::Kind::kInternal, \
                                    __FILE__, __LINE__, #cond)
