// Epilogue machinery shared by tessel's contraction kernels: the element-wise activation
// functions the generated epilogue calls, and the store of a staged fp32 slab through the
// problem's store map with vectorised global stores.
//
// Why stage through shared memory: an mma.sync accumulator fragment gives each thread two
// adjacent columns of a row (4-byte stores, 8 rows per warp instruction, half of every 32-byte
// sector wasted). Staging a slab of the tile in shared memory lets each thread read kStoreVec
// output elements that are contiguous in the *output* buffer, whatever the store map, and
// write them with one 8/16-byte store. The same pass reads the residual with the same vectors.
// Channels-last outputs are contiguous along n: consecutive threads walk the slab's columns.
// Channels-first (NCHW) outputs are contiguous along m, within an image row: consecutive
// threads walk its rows, and vectors run down a column.
//
// Contract with generated code (struct Problem):
//   using Out; using Index;  static constexpr int kM, kN;
//   using Residual;                      // the residual's element type (Out unless int8)
//   static constexpr bool kStoreAlongM;  // the output is contiguous along m, not n
//   static constexpr int kStoreVec;      // elements per store (contiguous in the output)
//   static constexpr int kStoreNStride;  // along n: distance in n between those elements (1,
//                                        // or block^2 for depth_to_space CRD); along m: 1
//   static constexpr int kResidual;      // epilogue operand index of the residual, or -1
//   static Index store_offset(int batch, int m, int n);  // element offset in the output
//   static int channel(int batch, int n);                // index into scale / bias vectors
//   static float epilogue(const KernelParams&, float v, int channel, float residual);
//   struct Lead;                          // the leading per-channel steps' operands (scale, bias)
//   static Lead lead_of(const KernelParams&, int channel);
//   static float apply_lead(Lead, float v);
//   static float after_lead(const KernelParams&, float v, int channel, float residual);
//                                        // epilogue = after_lead(apply_lead(lead_of(ch), v))
//   static float rounded(float v);       // v rounded to C's dtype where Out is another one
#pragma once

#include "tessel_activations.cuh"
#include "tessel_tile.cuh"

namespace tessel {

__device__ __forceinline__ float load_f32(const void* p, int i) {
  return __ldg(static_cast<const float*>(p) + i);
}

// Loads / stores kVec consecutive elements of type T in accesses of up to 16 bytes: one,
// unless the elements are wider than the output's whose vector width the plan chose (an f32
// residual of an int8 output: 16 elements, 4 accesses). The offset is a multiple of kVec, so
// each access is aligned to its size.
template <typename T, int kVec>
struct OutVector {
  static constexpr int kBytes = kVec * int(sizeof(T));
  static constexpr int kChunk = kBytes < 16 ? kBytes : 16;
  static constexpr int kChunks = kBytes / kChunk;
  using Raw = typename Vec<kChunk>::type;
  union {
    Raw raw[kChunks];
    T elem[kVec];
  };
  __device__ __forceinline__ void load(const void* base, long long offset) {
    const Raw* src = reinterpret_cast<const Raw*>(static_cast<const T*>(base) + offset);
#pragma unroll
    for (int i = 0; i < kChunks; ++i) raw[i] = src[i];
  }
  __device__ __forceinline__ void store(void* base, long long offset) const {
    Raw* dst = reinterpret_cast<Raw*>(static_cast<T*>(base) + offset);
#pragma unroll
    for (int i = 0; i < kChunks; ++i) dst[i] = raw[i];
  }
};

// The residual's kV elements at output offset `off`, raw (R has the output's layout, in its
// own element type: an int8 R of a float output), and as floats (zeros without a residual).
// The raw load is non-coherent (the residual is read-only while the kernel runs, or, where
// the output overwrites it in place, read by the thread that then writes it), and is issued
// ahead of the stores: see kResidualBatch.
template <typename P, int kV>
struct ResidualVector {
  static constexpr bool kHas = P::kResidual >= 0;
  using R = typename P::Residual;
  OutVector<R, kV> raw;
  __device__ __forceinline__ void load(const KernelParams& p, typename P::Index off) {
    if constexpr (kHas) {
      const auto* src = reinterpret_cast<const typename OutVector<R, kV>::Raw*>(
          static_cast<const R*>(p.extra[P::kResidual]) + off);
#pragma unroll
      for (int i = 0; i < OutVector<R, kV>::kChunks; ++i) raw.raw[i] = __ldg(src + i);
    }
  }
  __device__ __forceinline__ void clear() {
    if constexpr (kHas)
#pragma unroll
      for (int i = 0; i < OutVector<R, kV>::kChunks; ++i) raw.raw[i] = typename OutVector<R, kV>::Raw{};
  }
  __device__ __forceinline__ float operator[](int i) const {
    if constexpr (kHas) return to_float(raw.elem[i]);
    return 0.0f;
  }
};

// Chunks whose residual loads a thread issues before it stores any of them: the stores and
// the loads may alias as far as the compiler knows, so a load after a store waits for it, and
// one DRAM round trip per chunk left ResNet-50's residual convs at 1.4 TB/s.
constexpr int kResidualBatch = 4;

// Asks L2 for the residual under a CTA's (kRows, kCols) output tile at (m_base, n_base) before
// its mainloop, one 128-byte line per prefetch, kThreads threads sharing the lines: the
// epilogue's residual loads then hit L2 instead of waiting on DRAM after the mainloop (a short-K
// residual conv, ResNet's 1x1 expansions, spends much of its time in that wait: the residual is
// as large as the output). Channels-last stores only (rows of contiguous channels); a hint:
// nothing waits for it. Measured on an H100 (docs/performance.md): ResNet-50's 56x56 residual
// convs on mma.sync 66 -> 57 us, its 28x28 ones 32 -> 34 us alone, the whole network at batch
// 32 1.418 -> 1.374 ms; the cp.async wgmma kernel does not call it (it lost 10% there).
template <typename P, int kRows, int kCols, int kThreads>
__device__ __forceinline__ void prefetch_residual(const KernelParams& p, int batch, int m_base,
                                                  int n_base, int tid) {
  if constexpr (P::kResidual >= 0 && !P::kStoreAlongM && P::kStoreNStride == 1) {
    using R = typename P::Residual;
    constexpr int kLine = 128;
    // A row's run of kCols elements touches at most this many lines, wherever it starts.
    constexpr int kLinesPerRow = (kCols * int(sizeof(R)) + kLine - 1) / kLine + 1;
    const int cols = min(kCols, P::kN - n_base);
    const R* base = static_cast<const R*>(p.extra[P::kResidual]);
    for (int i = tid; i < kRows * kLinesPerRow; i += kThreads) {
      const int m = m_base + i / kLinesPerRow;
      if (m >= P::kM || cols <= 0) continue;
      const char* row = reinterpret_cast<const char*>(base + P::store_offset(batch, m, n_base));
      const char* end = row + cols * int(sizeof(R));
      const char* line =
          reinterpret_cast<const char*>(reinterpret_cast<unsigned long long>(row) &
                                        ~static_cast<unsigned long long>(kLine - 1)) +
          (i % kLinesPerRow) * kLine;
      if (line < end) asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
    }
  }
}

// An epilogue's result in the output's type: from_float, but int8 by store_s8 (uint8 by
// store_u8), which rounds, and saturates unless the epilogue's last step quantized
// (kQuantized 1: saturate_s8_f to the store's range); kQuantized 2: v is 1.5 * 2^23 + q, q
// rounded and saturated already (a last quantize_unit: unit_round_magic), whose bits' low byte
// is q's (two's complement).
template <typename Out, int kQuantized>
struct StoreValue {
  __device__ __forceinline__ static Out of(float v) { return from_float<Out>(v); }
};
template <int kQuantized>
struct StoreValue<s8, kQuantized> {
  __device__ __forceinline__ static s8 of(float v) {
    return s8{kQuantized == 2 ? static_cast<signed char>(__float_as_int(v)) : store_s8<kQuantized == 0>(v)};
  }
};
template <int kQuantized>
struct StoreValue<u8q, kQuantized> {
  __device__ __forceinline__ static u8q of(float v) {
    return u8q{kQuantized == 2 ? static_cast<unsigned char>(__float_as_int(v)) : store_u8<kQuantized == 0>(v)};
  }
};

// Output element of the fp32 result v at channel ch; kLeadApplied: v has had the epilogue's
// leading per-channel steps (P::apply_lead) already.
template <typename P, bool kLeadApplied = false>
__device__ __forceinline__ typename P::Out finish_element(const KernelParams& p, float v, int ch,
                                                          float residual) {
  const float e = kLeadApplied ? P::after_lead(p, v, ch, residual) : P::epilogue(p, v, ch, residual);
  return StoreValue<typename P::Out, P::kQuantizedOut>::of(P::rounded(e));
}

// The kV values of a slab chunk along n, kS apart, from `at`: by 16-byte (8-byte) loads where
// they are adjacent (kS 1) and a multiple of 4 (2): one shared-memory request per 4 values
// instead of one per value, each of which a warp's lanes, a chunk of kV columns apart, sent to
// the same few banks (the TMA kernel's depth_to_space slabs: 12-way conflicts, 64% of its
// shared-load wavefronts, under Nsight Compute). Every slab's rows start 16-byte aligned (a
// pitch of a multiple of 4 floats from an aligned base) and a chunk's first column is a
// multiple of kV.
template <int kV, int kS>
__device__ __forceinline__ void slab_run(const float* at, float (&v)[kV]) {
  if constexpr (kS == 1 && kV % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kV; i += 4) {
      const float4 q = *reinterpret_cast<const float4*>(at + i);
      v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
    }
  } else if constexpr (kS == 1 && kV % 2 == 0) {
#pragma unroll
    for (int i = 0; i < kV; i += 2) {
      const float2 q = *reinterpret_cast<const float2*>(at + i);
      v[i] = q.x, v[i + 1] = q.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kV; ++i) v[i] = at[i * kS];
  }
}

// Stores a (kRows, kCols) fp32 slab staged in shared memory (row pitch `pitch` floats) whose
// element (r, c) is C[batch, m_base + r, n_base + c]. kGroup threads cooperate (`t` is this
// thread's index among them).
//
// Along n, chunks of kStoreVec outputs:
//   chunk q -> row q / kChunksPerRow; within a row, the columns form runs of
//   kStoreVec*kStoreNStride, each split into kStoreNStride chunks whose elements are
//   kStoreNStride apart in n (and adjacent in the output).
// Along m, chunks of kStoreVec consecutive rows of one column:
//   chunk q -> column q / kRunsPerColumn, rows (q % kRunsPerColumn) * kStoreVec + [0, kStoreVec).
//   The plan makes kStoreVec divide the output width and the slab's rows and m_base, so that a
//   chunk never leaves an image row and is aligned there, and is all inside M or all outside.
// `rows` (<= kRows) limits the rows stored: the halo kernel's slab is 16 pixels of one image
// row, of which fewer than 16 may lie inside the image (a whole run of kStoreVec along m
// either way, since the vector divides the output width). kLeadApplied: the slab holds the
// values after the epilogue's leading per-channel steps (P::apply_lead).
template <typename P, int kRows, int kCols, int kGroup, bool kLeadApplied = false>
__device__ __forceinline__ void store_slab(const KernelParams& p, const float* slab, int pitch,
                                           int batch, int m_base, int n_base, int t,
                                           int rows = kRows) {
  constexpr int kV = P::kStoreVec;
  using Out = typename P::Out;
  constexpr bool kAlongM = P::kStoreAlongM;
  constexpr int kS = kAlongM ? 1 : P::kStoreNStride;
  constexpr int kRunsPerColumn = kRows / kV;   // along m
  constexpr int kChunksPerRow = kCols / kV;    // along n
  constexpr int kChunks = kAlongM ? kRunsPerColumn * kCols : kRows * kChunksPerRow;
  static_assert(!kAlongM || kRows % kV == 0, "store vectors tile the slab's columns");
  static_assert(kAlongM || kCols % (kV * kS) == 0, "store vectors tile the slab");
  constexpr int kIters = (kChunks + kGroup - 1) / kGroup;
  constexpr int kBatch = kIters < kResidualBatch ? kIters : kResidualBatch;
  // Chunk q's slab position (r, c) and output column n; false where it is not stored.
  auto locate = [&](int q, int& r, int& c, int& n) {
    if constexpr (kAlongM) {
      c = q / kRunsPerColumn;
      r = q % kRunsPerColumn * kV;
    } else {
      r = q / kChunksPerRow;
      const int cq = q % kChunksPerRow;
      c = (cq / kS) * (kV * kS) + cq % kS;
    }
    n = n_base + c;
    return (kChunks % kGroup == 0 || q < kChunks) && r < rows && m_base + r < P::kM && n < P::kN;
  };
#pragma unroll
  for (int i0 = 0; i0 < kIters; i0 += kBatch) {
    ResidualVector<P, kV> residual[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      int r, c, n;
      if (i0 + j < kIters && locate((i0 + j) * kGroup + t, r, c, n))
        residual[j].load(p, P::store_offset(batch, m_base + r, n));
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      int r, c, n;
      if (i0 + j >= kIters || !locate((i0 + j) * kGroup + t, r, c, n)) continue;
      const typename P::Index off = P::store_offset(batch, m_base + r, n);
      OutVector<Out, kV> ov;
      if constexpr (kAlongM) {
        const int ch = P::channel(batch, n);
#pragma unroll
        for (int i = 0; i < kV; ++i)
          ov.elem[i] = finish_element<P, kLeadApplied>(p, slab[(r + i) * pitch + c], ch, residual[j][i]);
      } else {
        float v[kV];
        slab_run<kV, kS>(slab + r * pitch + c, v);
#pragma unroll
        for (int i = 0; i < kV; ++i)
          ov.elem[i] = finish_element<P, kLeadApplied>(p, v[i], P::channel(batch, n + i * kS), residual[j][i]);
      }
      ov.store(p.c, off);
    }
  }
}

// The along-n form of store_slab, written to shared memory instead of global: the slab's
// (kRows, kCols) outputs, finished (epilogue steps, residual), as a dense row-major
// (kRows, kCols) tile of Out at `staging`, for a bulk tensor store to take from there (the TMA
// kernel). Positions outside M or N are finished from zero residuals and clipped by the store.
template <typename P, int kRows, int kCols, int kGroup>
__device__ __forceinline__ void stage_slab(const KernelParams& p, const float* slab, int pitch,
                                           int m_base, int n_base, int t, typename P::Out* staging) {
  constexpr int kV = P::kStoreVec;
  static_assert(!P::kStoreAlongM && P::kStoreNStride == 1, "a plain or channel-slice store");
  using Out = typename P::Out;
  constexpr int kChunksPerRow = kCols / kV;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kCols % kV == 0, "store vectors tile the slab");
  constexpr int kIters = (kChunks + kGroup - 1) / kGroup;
  constexpr int kBatch = kIters < kResidualBatch ? kIters : kResidualBatch;
#pragma unroll
  for (int i0 = 0; i0 < kIters; i0 += kBatch) {
    ResidualVector<P, kV> residual[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int q = (i0 + j) * kGroup + t;
      const int m = m_base + q / kChunksPerRow, n = n_base + q % kChunksPerRow * kV;
      if (i0 + j < kIters && (kChunks % kGroup == 0 || q < kChunks) && m < P::kM && n < P::kN)
        residual[j].load(p, P::store_offset(0, m, n));
      else
        residual[j].clear();
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int q = (i0 + j) * kGroup + t;
      if (i0 + j >= kIters || (kChunks % kGroup != 0 && q >= kChunks)) continue;
      const int r = q / kChunksPerRow;
      const int c = q % kChunksPerRow * kV;
      const int n = n_base + c;
      OutVector<Out, kV> ov;
      float v[kV];
      slab_run<kV, 1>(slab + r * pitch + c, v);
#pragma unroll
      for (int i = 0; i < kV; ++i)  // columns past N (clipped by the store) read no channel operands
        ov.elem[i] = n + i < P::kN ? finish_element<P>(p, v[i], P::channel(0, n + i), residual[j][i])
                                   : from_float<Out>(0.0f);
      ov.store(staging, r * kCols + c);
    }
  }
}

}  // namespace tessel
