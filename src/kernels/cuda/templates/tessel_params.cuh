// The parameter block every generated contraction kernel takes by value. Plain C++ with no
// device code, so the host launcher (contraction_kernel.cc) includes this same definition:
// host and device cannot disagree on the layout.
#pragma once

namespace tessel {

constexpr int kMaxEpilogueOperands = 4;

struct KernelParams {
  const void* a;
  const void* b;
  void* c;
  void* workspace;  // split-K partials and tile counters; null when split_k == 1
  const void* extra[kMaxEpilogueOperands];  // epilogue operands (scale, bias, residual), by
                                            // EpilogueStep::operand
};

// The second parameter of a TMA kernel (tessel_tma.cuh), passed by value as a
// __grid_constant__: the CUtensorMap descriptors of A, B and, where the kernel has them, C (its
// bulk stores) and the residual (its bulk loads), encoded by the launcher.
struct alignas(64) TensorMaps {
  unsigned char map[4][128];
};

}  // namespace tessel
