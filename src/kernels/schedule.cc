#include "kernels/schedule.h"

#include <map>
#include <sstream>

namespace tessel::kernels {

const char* instruction_name(Instruction i) {
  switch (i) {
    case Instruction::kMmaSync: return "mma.sync";
    case Instruction::kWgmma: return "wgmma";
    case Instruction::kSimt: return "SIMT";
  }
  return "SIMT";
}

std::string Schedule::name() const {
  // "tc_128x128x32_s3_w64x64_sk1_r8"; vector widths are appended only when narrower than
  // the full 8 (e.g. "_v4x8"), so the common names stay short and every schedule's is unique.
  std::ostringstream os;
  if (mainloop == Mainloop::kHalo) {
    os << "halo_" << tile_h() << "x" << tile_w << "_n" << block_n << "_w" << warp_m << "x" << warp_n
       << "_c" << ctas;
    if (groups_per_tile > 0) os << "_g" << groups_per_tile;
    return os.str();
  }
  if (mainloop == Mainloop::kTma) {
    os << "tma_" << block_m << "x" << block_n << "x" << block_k << "_s" << stages << "_r" << raster
       << "_c" << ctas;
    if (warp_m != block_m || warp_n != block_n) os << "_w" << warp_m << "x" << warp_n;  // cooperative
    if (row_windows) os << "_rw";
    return os.str();
  }
  switch (instruction) {
    case Instruction::kMmaSync:
      os << "tc";
      break;
    case Instruction::kWgmma:
      os << "wgmma";
      break;
    case Instruction::kSimt:
      os << "simt";
      break;
  }
  os << "_" << block_m << "x" << block_n << "x" << block_k << "_s" << stages << "_w" << warp_m
     << "x" << warp_n << "_sk" << split_k << "_r" << raster;
  if (a_vec != 8 || b_vec != 8) os << "_v" << a_vec << "x" << b_vec;
  if (groups_per_tile > 0) os << "_g" << groups_per_tile;
  return os.str();
}

std::string Schedule::family() const {
  const std::string n = name();
  return n.substr(0, n.find('_'));
}

std::vector<size_t> family_spread_order(const std::vector<Schedule>& ranked, int per_family) {
  std::map<std::string, int> taken;
  std::vector<size_t> first, rest;
  for (size_t i = 0; i < ranked.size(); ++i)
    (taken[ranked[i].family()]++ < per_family ? first : rest).push_back(i);
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

}  // namespace tessel::kernels
