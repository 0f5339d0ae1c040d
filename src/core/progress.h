// Progress of a long step, for a progress bar: `done` of `total` units of `step` ("compiling
// kernels"). Called with done = 0 when a step starts and done = total when it ends, and from
// several threads at once while kernels compile.
#pragma once

#include <functional>
#include <string_view>

namespace tessel {

using ProgressFn = std::function<void(std::string_view step, int done, int total)>;

}  // namespace tessel
