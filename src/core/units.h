// Human-readable quantities for one-line summaries: 1.5 MiB, 25.6M.
#pragma once

#include <cstdint>
#include <string>

namespace tessel {

std::string human_bytes(int64_t b);  // 1.5 MiB, 800.0 KiB, 512 B
std::string human_count(double v);   // 25.6M, 4.1G

}  // namespace tessel
