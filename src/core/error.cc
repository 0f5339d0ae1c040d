#include "core/error.h"

namespace tessel::detail {

ErrorReporter::ErrorReporter(Kind kind, const char* file, int line, const char* condition)
    : kind_(kind), file_(file), line_(line), condition_(condition) {}

ErrorReporter::~ErrorReporter() noexcept(false) {
  if (kind_ == Kind::kUser) throw UserError(stream_.str());
  std::ostringstream full;
  full << "internal error at " << file_ << ":" << line_;
  if (condition_) full << ": check '" << condition_ << "' failed";
  std::string detail = stream_.str();
  if (!detail.empty()) full << ": " << detail;
  throw InternalError(full.str());
}

}  // namespace tessel::detail
