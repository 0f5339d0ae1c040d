// The benchmark's device helpers: their CUDA source and launches.
#include "bench/reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>

#include "device/cuda_api.h"

namespace tessel::bench {

namespace rt = device;

// Header-free on purpose: NVRTC has no built-in cuda_fp16.h, and a toolkit include path would
// tie the benchmark to where the toolkit is installed. fp16 is converted with PTX cvt.
const char* const kReferenceSource = R"(
typedef unsigned short half_bits;
typedef unsigned long long u64;

__device__ __forceinline__ float h2f(half_bits h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ half_bits f2h(float f) {
  half_bits h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// splitmix64 (Steele, Lea, Flood 2014): a stateless mix, so element i of a tensor is a
// function of (seed, i) alone.
__device__ __forceinline__ u64 splitmix64(u64 x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#define GRID_STRIDE_LOOP(i, count)                                             \
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < (count);       \
       i += (u64)gridDim.x * blockDim.x)

extern "C" __global__ void fill_uniform_f16(half_bits* out, u64 count, u64 seed) {
  const u64 key = splitmix64(seed);
  GRID_STRIDE_LOOP(i, count) {
    const float u = (float)(splitmix64(key + i) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = f2h(2.0f * u - 1.0f);
  }
}

// One thread per output y[n][oh][ow][co].
extern "C" __global__ void conv2d_nhwc_reference(
    const half_bits* x, const half_bits* w, float* y, int N, int H, int W, int CI, int CO,
    int KH, int KW, int stride, int pad, int dilation, int groups, int OH, int OW) {
  const int cig = CI / groups, cog = CO / groups;
  GRID_STRIDE_LOOP(idx, (u64)N * OH * OW * CO) {
    const int co = (int)(idx % CO);
    u64 t = idx / CO;
    const int ow = (int)(t % OW);
    t /= OW;
    const int oh = (int)(t % OH);
    const int n = (int)(t / OH);
    const int g = co / cog;
    float acc = 0.0f;
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh * stride - pad + kh * dilation;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = ow * stride - pad + kw * dilation;
        if (iw < 0 || iw >= W) continue;
        const half_bits* xp = x + (((u64)n * H + ih) * W + iw) * CI + (u64)g * cig;
        const half_bits* wp = w + (((u64)co * KH + kh) * KW + kw) * cig;
        for (int c = 0; c < cig; ++c) acc = fmaf(h2f(xp[c]), h2f(wp[c]), acc);
      }
    }
    y[idx] = acc;
  }
}

// One thread per output c[m][n]. a_km: A is stored (k, m); b_nk: B is stored (n, k).
extern "C" __global__ void gemm_reference(const half_bits* a, const half_bits* b, float* c,
                                          int M, int N, int K, int a_km, int b_nk) {
  GRID_STRIDE_LOOP(idx, (u64)M * N) {
    const u64 m = idx / N, n = idx % N;
    float acc = 0.0f;
    for (u64 k = 0; k < (u64)K; ++k) {
      const float av = h2f(a_km ? a[k * M + m] : a[m * K + k]);
      const float bv = h2f(b_nk ? b[n * K + k] : b[k * N + n]);
      acc = fmaf(av, bv, acc);
    }
    c[idx] = acc;
  }
}

// sums[0] += sum (out - ref)^2, sums[1] += sum ref^2 over finite outputs (in double: a 4K
// image has 10^8 terms); nonfinite counts the rest; max_abs_bits is max |out - ref| as float
// bits (ordered like the floats, being non-negative).
extern "C" __global__ void compare_f16(const half_bits* out, const float* ref, u64 count,
                                       double* sums, u64* nonfinite, unsigned* max_abs_bits) {
  double e2 = 0.0, r2 = 0.0;
  u64 bad = 0;
  float max_abs = 0.0f;
  GRID_STRIDE_LOOP(i, count) {
    const float o = h2f(out[i]);
    const float r = ref[i];
    if (!(fabsf(o) <= 3.402823466e38f)) {  // NaN or Inf
      ++bad;
      continue;
    }
    const double d = (double)o - (double)r;
    e2 += d * d;
    r2 += (double)r * r;
    max_abs = fmaxf(max_abs, fabsf(o - r));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    e2 += __shfl_down_sync(0xffffffffu, e2, offset);
    r2 += __shfl_down_sync(0xffffffffu, r2, offset);
    bad += __shfl_down_sync(0xffffffffu, bad, offset);
    max_abs = fmaxf(max_abs, __shfl_down_sync(0xffffffffu, max_abs, offset));
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums[0], e2);
    atomicAdd(&sums[1], r2);
    atomicAdd(nonfinite, bad);
    atomicMax(max_abs_bits, __float_as_uint(max_abs));
  }
}
)";

namespace {

constexpr unsigned kBlock = 256;  // a multiple of 32: compare_f16 reduces whole warps

struct Kernels {
  std::shared_ptr<rt::Module> module;
  void* fill = nullptr;
  void* conv = nullptr;
  void* gemm = nullptr;
  void* compare = nullptr;
};

const Kernels& kernels() {
  static std::mutex mu;
  static std::unique_ptr<Kernels> k;
  std::lock_guard lock(mu);
  if (!k) {
    rt::CompileOptions o;
    o.arch = rt::device_info(0).arch();
    auto loaded = std::make_unique<Kernels>();
    loaded->module = rt::Module::load(rt::compile(kReferenceSource, "bench_reference", o).cubin);
    loaded->fill = loaded->module->function("fill_uniform_f16");
    loaded->conv = loaded->module->function("conv2d_nhwc_reference");
    loaded->gemm = loaded->module->function("gemm_reference");
    loaded->compare = loaded->module->function("compare_f16");
    k = std::move(loaded);
  }
  return *k;
}

// A grid-stride launch over `count` items: enough blocks to fill the device many times over,
// few enough that no grid limit matters.
void launch_over(void* f, size_t count, void** args, void* stream) {
  rt::LaunchConfig c;
  c.grid[0] = static_cast<unsigned>(std::clamp<size_t>((count + kBlock - 1) / kBlock, 1, 65535));
  c.block[0] = kBlock;
  c.stream = stream;
  rt::launch(f, c, args);
}

}  // namespace

void fill_uniform_f16(uint64_t ptr, size_t count, uint64_t seed, void* stream) {
  unsigned long long n = count;
  unsigned long long s = seed;
  void* args[] = {&ptr, &n, &s};
  launch_over(kernels().fill, count, args, stream);
}

void conv2d_reference(const ConvWorkload& c, uint64_t x, uint64_t w, uint64_t y_f32, void* stream) {
  int dims[] = {static_cast<int>(c.n),        static_cast<int>(c.h),      static_cast<int>(c.w),
                static_cast<int>(c.ci),       static_cast<int>(c.co),     static_cast<int>(c.kh),
                static_cast<int>(c.kw),       static_cast<int>(c.stride), static_cast<int>(c.pad),
                static_cast<int>(c.dilation), static_cast<int>(c.groups), static_cast<int>(c.oh()),
                static_cast<int>(c.ow())};
  void* args[3 + std::size(dims)] = {&x, &w, &y_f32};
  for (size_t i = 0; i < std::size(dims); ++i) args[3 + i] = &dims[i];
  launch_over(kernels().conv, c.y_elems(), args, stream);
}

void gemm_reference(const GemmWorkload& g, uint64_t a, uint64_t b, uint64_t c_f32, void* stream) {
  int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  int a_km = g.layout == GemmLayout::kTN;
  int b_nk = g.layout == GemmLayout::kNT;
  void* args[] = {&a, &b, &c_f32, &m, &n, &k, &a_km, &b_nk};
  launch_over(kernels().gemm, g.c_elems(), args, stream);
}

Comparison compare_f16(uint64_t out, uint64_t ref_f32, size_t count) {
  struct Totals {
    double sums[2];
    unsigned long long nonfinite;
    unsigned max_abs_bits;
  };
  rt::DeviceBuffer totals(sizeof(Totals));
  totals.fill_bytes(0);
  uint64_t sums = totals.ptr();
  uint64_t nonfinite = sums + offsetof(Totals, nonfinite);
  uint64_t max_abs = sums + offsetof(Totals, max_abs_bits);
  unsigned long long n = count;
  void* args[] = {&out, &ref_f32, &n, &sums, &nonfinite, &max_abs};
  launch_over(kernels().compare, count, args, nullptr);
  Totals t;
  totals.download(&t, sizeof(t));  // synchronous on the default stream: waits for the kernel

  Comparison c;
  c.nonfinite = t.nonfinite;
  c.rel_l2 = t.sums[1] > 0 ? std::sqrt(t.sums[0] / t.sums[1]) : std::sqrt(t.sums[0]);
  float max_abs_f;
  std::memcpy(&max_abs_f, &t.max_abs_bits, sizeof(max_abs_f));
  c.max_abs = max_abs_f;
  return c;
}

}  // namespace tessel::bench
