// Raw PTX instructions used by tessel's generated contraction kernels, one small function or
// struct each, kept apart from their traits (which thread holds which fragment element lives
// with the kernels that use them, tessel_mma_mainloop.cuh).
//
// Self-contained on purpose: NVRTC compiles these with no include path, so fp16, bf16 and int8
// are handled as raw bit patterns and converted with cvt instructions, not cuda_fp16.h.
// PTX ISA references (PTX ISA 8.x, "Parallel Synchronization and Communication Instructions"
// and "Warp Level Matrix Multiply-Accumulate Instructions"):
//   mma.sync m16n8k16          9.7.14.5.8  (sm_80+)
//   mma.sync m16n8k32 .s8/.u8  9.7.14.5.10 (sm_80+; "Matrix Fragments for mma.m16n8k32";
//                              .atype and .btype are .s8 or .u8 independently)
//   ldmatrix                   9.7.14.5.15 (sm_75+)
//   cp.async / commit / wait   9.7.9.25    (sm_80+)
#pragma once

namespace tessel {

using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;

// Element tags: the kernels are written over storage types; these name the arithmetic.
struct f16 {
  u16 bits;
};
struct bf16 {
  u16 bits;
};
// int8 (QDQ models: symmetric, zero point 0), one byte.
struct s8 {
  signed char bits;
};
// uint8 (onnxruntime's default QUInt8 activations, zero point 0), one byte: the A operand of
// an int8 contraction (B stays s8), its output or residual. Named apart from the op kernels'
// storage alias u8 (tessel_op_common.cuh), which includes this file.
struct u8q {
  unsigned char bits;
};

// ---- Conversions ------------------------------------------------------------------------
__device__ __forceinline__ float to_float(f16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
__device__ __forceinline__ float to_float(bf16 x) { return __uint_as_float(u32(x.bits) << 16); }
__device__ __forceinline__ float to_float(float x) { return x; }
// int8 by the float bits of 1.5 * 2^23 + x (exact: the ulp there is 1): an integer add and a
// float subtract, full-rate instructions, where cvt.f32.s8 issues at a quarter of the rate.
constexpr float kRoundingMagic = 12582912.0f;  // 1.5 * 2^23, bits 0x4B400000
__device__ __forceinline__ float to_float(s8 x) {
  return __fsub_rn(__int_as_float(0x4B400000 + int(x.bits)), kRoundingMagic);
}
__device__ __forceinline__ float to_float(u8q x) {
  return __fsub_rn(__int_as_float(0x4B400000 + int(x.bits)), kRoundingMagic);
}
// A pair of one-byte values (bits 0-7 and 8-15 of `pair`) as floats, two instructions each
// where to_float's sign extension, integer add and float subtract take three (the int8
// residual of the TMA kernel's register epilogue): one LOP3 puts the low byte under the float
// bits of 2^23 (an int8's sign bit flipped, so that it reads b + 128) and one float add takes
// the magic number away; the high byte stays in bits 8-15, 2^23 + 256 (b + 128), and one FFMA
// by 2^-8 takes it away. All exact: the ulp there is 1 (2^-8 after the scaling).
template <typename T>
struct SignedByte {
  static constexpr bool value = false;
};
template <>
struct SignedByte<s8> {
  static constexpr bool value = true;
};
template <typename T>
__device__ __forceinline__ float2 byte_pair_to_float2(u32 pair) {
  static_assert(sizeof(T) == 1, "one-byte values");
  constexpr bool kSigned = SignedByte<T>::value;
  // (pair & mask) ^ bits as one lop3 (0xF0 & 0xCC ^ 0xAA = 0x6A).
  u32 lo, hi;
  asm("lop3.b32 %0, %1, 0xFF, %2, 0x6A;" : "=r"(lo) : "r"(pair), "r"(kSigned ? 0x4B000080u : 0x4B000000u));
  asm("lop3.b32 %0, %1, 0xFF00, %2, 0x6A;" : "=r"(hi) : "r"(pair), "r"(kSigned ? 0x4B008000u : 0x4B000000u));
  return make_float2(__fsub_rn(__uint_as_float(lo), kSigned ? 8388736.0f : 8388608.0f),
                     __fmaf_rn(__uint_as_float(hi), 0.00390625f, kSigned ? -32896.0f : -32768.0f));
}

// A fused QuantizeLinear to int8, zero point 0 (the contraction and grouped-conv epilogues):
// round half to even of v * (1 / scale), saturated; the result stays a float until the store.
// (The reference divides: where v / scale is within an ulp of a tie, the two may round one
// step apart.) Saturating first and rounding after is the same (127.5 rounds to the even 128,
// saturated to 127 either way; NaN saturates to -128 either way), and lets a float add of
// 1.5 * 2^23 round half to even (|v| <= 128: the ulp there is 1) in place of rintf's
// quarter-rate instruction.
// lo, hi: integers of [-128, 127] to saturate to instead, the relu or clip steps that follow
// a quantize in a folded QDQ chain (ops::fold_requantize) taken by the same two instructions
// (rounding and an integral clamp commute).
// saturate_s8_f: the saturation alone, for a last step whose int8 store does the rounding
// (store_s8<false>): the two instructions of rounding here would be repeated there.
__device__ __forceinline__ float saturate_s8_f(float v, float inv_scale, float lo = -128.0f,
                                               float hi = 127.0f) {
  return fminf(fmaxf(v * inv_scale, lo), hi);
}
__device__ __forceinline__ float quantize_s8_f(float v, float inv_scale, float lo = -128.0f,
                                               float hi = 127.0f) {
  return __fsub_rn(__fadd_rn(saturate_s8_f(v, inv_scale, lo, hi), kRoundingMagic), kRoundingMagic);
}
// quantize_s8_f followed by a multiplication by m (a QDQ model's DequantizeLinear after the
// QuantizeLinear, with the next quantize's division folded in): the rounding's second add
// and the multiplication as one fma, fma(v + M, m, -M * m) = round((v + M - M) * m), exact
// where M * m is (the host passes m with at most 22 significant bits, so that 1.5 * 2^23 * m
// fits the 24 of a float, and minus_magic_m = -M * m).
__device__ __forceinline__ float quantize_mul_s8_f(float v, float inv_scale, float lo, float hi,
                                                   float m, float minus_magic_m) {
  return __fmaf_rn(__fadd_rn(saturate_s8_f(v, inv_scale, lo, hi), kRoundingMagic), m, minus_magic_m);
}
// quantize_unit (ops::fold_unit_quantize): the multiplication before it scaled its value into
// [0, 1], and saturates there, in the same instruction (fma.rn.sat, mul.rn.sat, add.rn.sat:
// the result clamped to [0, 1], NaN to 0), where a clamp takes two FMNMX; sat_f where no such
// multiplication precedes it.
__device__ __forceinline__ float fma_sat(float a, float b, float c) {
  float d;
  asm("fma.rn.sat.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}
__device__ __forceinline__ float mul_sat(float a, float b) {
  float d;
  asm("mul.rn.sat.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
__device__ __forceinline__ float add_sat(float a, float b) {
  float d;
  asm("add.rn.sat.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
__device__ __forceinline__ float sat_f(float a) {
  float d;
  asm("cvt.sat.f32.f32 %0, %1;" : "=f"(d) : "f"(a));
  return d;
}
// Then its rounding of w in [0, 1] to the integers of [lo, hi], as 1.5 * 2^23 + q: one FFMA,
// w * (hi - lo) exact in it, plus 1.5 * 2^23 + lo (exact: |lo| < 2^22; lo and hi are literals,
// so both sums fold at compile time), rounded once where the ulp is 1, half to even (1.5 * 2^23
// is even: q's own parity decides a tie, as the quantize's). The low byte of its bits is q's,
// for a one-byte store.
__device__ __forceinline__ float unit_round_magic(float w, float lo, float hi) {
  return __fmaf_rn(w, hi - lo, kRoundingMagic + lo);
}
// The whole step where nothing before it saturated: q as a float.
__device__ __forceinline__ float quantize_unit_f(float v, float lo, float hi) {
  return __fsub_rn(unit_round_magic(sat_f(v), lo, hi), kRoundingMagic);
}

// An epilogue's int8 store: v saturated and rounded half to even (NaN gives -128), as the low
// byte of the bits of v + 1.5 * 2^23 (two's complement), full-rate instructions where
// cvt.rni.sat.s8.f32 issues at a quarter of the rate. kSaturate false: v lies in [-128, 127]
// already (the epilogue's last step saturated it: saturate_s8_f), and is only rounded.
template <bool kSaturate = true>
__device__ __forceinline__ signed char store_s8(float v) {
  const float c = kSaturate ? fminf(fmaxf(v, -128.0f), 127.0f) : v;
  return static_cast<signed char>(__float_as_int(__fadd_rn(c, kRoundingMagic)));
}
// The uint8 store likewise: saturated to [0, 255] (NaN gives 0) unless the last step did
// (saturate_s8_f with the bounds 0 and 255), rounded by the same add; the low byte of the bits.
template <bool kSaturate = true>
__device__ __forceinline__ unsigned char store_u8(float v) {
  const float c = kSaturate ? fminf(fmaxf(v, 0.0f), 255.0f) : v;
  return static_cast<unsigned char>(__float_as_int(__fadd_rn(c, kRoundingMagic)));
}

template <typename T>
__device__ __forceinline__ T from_float(float f);
template <>
__device__ __forceinline__ f16 from_float<f16>(float f) {
  f16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
  return r;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float f) {
  bf16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
  return r;
}
template <>
__device__ __forceinline__ float from_float<float>(float f) {
  return f;
}
// Round to nearest even, saturated to [-128, 127] (NaN -> 0): QuantizeLinear's store.
template <>
__device__ __forceinline__ s8 from_float<s8>(float f) {
  int r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(f));
  return s8{static_cast<signed char>(r)};
}
// Round to nearest even, saturated to [0, 255] (NaN -> 0).
template <>
__device__ __forceinline__ u8q from_float<u8q>(float f) {
  unsigned r;
  asm("cvt.rni.sat.u8.f32 %0, %1;" : "=r"(r) : "f"(f));
  return u8q{static_cast<unsigned char>(r)};
}

// An accumulator as the fp32 value the epilogue starts from: int32 sums rounded to nearest
// (exact below 2^24 in magnitude).
__device__ __forceinline__ float acc_to_float(float x) { return x; }
__device__ __forceinline__ float acc_to_float(int x) {
  float f;
  asm("cvt.rn.f32.s32 %0, %1;" : "=f"(f) : "r"(x));
  return f;
}

// ---- Shared-memory addresses --------------------------------------------------------------
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ---- mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 ----------------------
// D = A * B + D with A 16x16 (row), B 16x8 (col), D 16x8 fp32. Operand registers as produced
// by ldmatrix (see MmaFragments in tessel_mma_mainloop.cuh for the element placement).
template <typename T>
struct MmaM16N8K16;

template <>
struct MmaM16N8K16<f16> {
  __device__ __forceinline__ static void fma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

template <>
struct MmaM16N8K16<bf16> {
  __device__ __forceinline__ static void fma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// ---- mma.sync.aligned.m16n8k32.row.col.s32.{s8,u8}.s8.s32 ----------------------------------
// D = A * B + D with A 16x32 (row), B 32x8 (col), D 16x8 int32 (wrapping, not .satfinite: a
// sum of K products of at most 2^15 each (u8 A: 255 * 128) cannot overflow for K < 2^16).
struct MmaM16N8K32S8 {
  __device__ __forceinline__ static void fma(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
// A uint8 (onnxruntime's activations), B int8 (the weights): the same fragments.
struct MmaM16N8K32U8S8 {
  __device__ __forceinline__ static void fma(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// ---- ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 -------------------------------------
// Four 8x8 b16 matrices; lanes 8i..8i+7 give the 16-byte row addresses of matrix i. Without
// .trans lane l receives in r[i] the elements (row l/4, cols 2*(l%4), 2*(l%4)+1) of matrix i;
// with .trans it receives (rows 2*(l%4), 2*(l%4)+1, col l/4), i.e. the transpose.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// Two matrices: lanes 0-15 give the row addresses (the others' are ignored).
__device__ __forceinline__ void ldmatrix_x2(u32 (&r)[2], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ---- cp.async with zero fill ---------------------------------------------------------------
// Copies Bytes from global to shared without a register round trip. When `valid` is false the
// source size is 0: nothing is read and the destination is zero-filled, which is how padding
// and out-of-range rows/columns become zeros. `src` must still be a mapped address, so callers
// pass the operand's base pointer for invalid elements. 16 bytes use .cg (bypass L1) unless
// kL1: an operand whose rows one CTA reads again at nearby k (a convolution window, shifted by
// one pixel per kw) is cached in L1 (.ca) so that the re-reads do not go to L2. 8 and 4 bytes
// only exist as .ca.
template <int Bytes, bool kL1 = false>
struct CpAsync;

template <>
struct CpAsync<16, false> {
  __device__ __forceinline__ static void copy(u32 dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
  }
};
template <>
struct CpAsync<16, true> {
  __device__ __forceinline__ static void copy(u32 dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
  }
};
template <bool kL1>
struct CpAsync<8, kL1> {
  __device__ __forceinline__ static void copy(u32 dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 8 : 0));
  }
};
template <bool kL1>
struct CpAsync<4, kL1> {
  __device__ __forceinline__ static void copy(u32 dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 4 : 0));
  }
};

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- Plain loads and stores of 1..16 bytes -------------------------------------------------
// A vector of Bytes bytes as one register-sized unit, so that a contiguous run of elements
// moves with one instruction.
template <int Bytes>
struct Vec;
template <>
struct Vec<1> {
  using type = unsigned char;
};
template <>
struct Vec<2> {
  using type = u16;
};
template <>
struct Vec<4> {
  using type = u32;
};
template <>
struct Vec<8> {
  using type = uint2;
};
template <>
struct Vec<16> {
  using type = uint4;
};

// Read-only global load through the non-coherent path (operands are never written by the
// kernel that reads them).
template <int Bytes>
__device__ __forceinline__ typename Vec<Bytes>::type ld_global_nc(const void* p) {
  return __ldg(reinterpret_cast<const typename Vec<Bytes>::type*>(p));
}
template <>
__device__ __forceinline__ u16 ld_global_nc<2>(const void* p) {
  u16 v;
  asm volatile("ld.global.nc.u16 %0, [%1];\n" : "=h"(v) : "l"(p));
  return v;
}

// 16 or 8 bytes of 32-bit words stored to global memory as one instruction. A uint4-typed
// store of values computed one by one may otherwise reach the PTX as four 4-byte stores.
__device__ __forceinline__ void st_global_v4(void* p, u32 a, u32 b, u32 c, u32 d) {
  asm volatile(
      "{\n  .reg .u64 g;\n  cvta.to.global.u64 g, %0;\n  st.global.v4.b32 [g], {%1, %2, %3, %4};\n}\n" ::"l"(p),
      "r"(a), "r"(b), "r"(c), "r"(d)
      : "memory");
}
__device__ __forceinline__ void st_global_v2(void* p, u32 a, u32 b) {
  asm volatile("{\n  .reg .u64 g;\n  cvta.to.global.u64 g, %0;\n  st.global.v2.b32 [g], {%1, %2};\n}\n" ::"l"(p),
               "r"(a), "r"(b)
               : "memory");
}

// ---- Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90) ------------------------
// Every generated kernel's first statement (emit.cc, op_kernels.cc). The host launches such a
// kernel as a programmatic dependent of the one before it in the stream (device::launch,
// LaunchConfig::programmatic): the grid is set up ahead and its CTAs are dispatched the moment
// the kernel before it completes, without the launch gap of a plain stream dependency. `wait`
// blocks until every prerequisite grid has completed and its writes are visible, so nothing
// below it reads an input early or overwrites a buffer still being read; a kernel launched
// without the attribute returns from it at once. No kernel issues `launch_dependents`, so the
// next kernel is dispatched at completion: issued at the start, it let the next grid's CTAs
// onto whichever SMs had room while this one ran, packing a small grid onto a few SMs (H200,
// whole models against no programmatic launch: ResNet-50 batch 1 +5.0%, MobileNet-v2 +2.3%;
// dispatch at completion: -3.9% and -9.8%). Nor behind a per-launch flag, only where the next
// grid's CTAs each fill an SM (branch early-trigger, 2026-11-30): where it fired it gained
// nothing in whole models, and its mere presence (`@!P PREEXIT`, not taken) cost MobileNet-v2
// and EfficientNet-b0 at batch 1 3% against kernels without it. Below sm_90: nothing.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace tessel
