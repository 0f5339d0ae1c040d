#include "kernels/estimate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/dtype.h"
#include "kernels/kernel_rules.h"
#include "kernels/rank_fit.h"

namespace tessel::kernels {
namespace {

using contraction::Contraction;
using contraction::Major;

// Model constants. Those marked "fitted" were fitted (least squares on log time, plus a
// ranking term that rewards picking the fastest default kernel) to 8,028 kernel timings on an
// H100 SXM (132 SMs, 1980 MHz) of 2026-11-21: the lead's probe (.device/4/probe.err: 1,991
// candidates over the 70 conv2d and GEMM workloads of shared/workloads, ci=3 convs also
// padded to ci=4) and 6,037 more from two runs of every default kernel (default_schedule.cc)
// on every workload, with split-K where the M x N tiles leave SMs idle. Every timing is a CUDA
// graph of 10 launches on one operand set, median of 9 replays. The others are datasheet
// values.
//
// Shared memory serves 128 bytes per clock per SM (sm_80, sm_90).
constexpr double kSmemBytesPerClk = 128;
// The generated kernels sustain the mma.sync rate of the arch table (the fit, bounded by it,
// settled there) and, fitted, 84% of the wgmma rate (the same warps issue the loads: there
// are no producer warps).
constexpr double kMmaSyncSustained = 1.0;
constexpr double kWgmmaSustained = 0.84;
// Fitted: resident warps per SM sub-partition at which the Tensor Cores reach that rate
// (fewer leave ldmatrix/mma latencies exposed).
constexpr double kMmaSyncWarpsToSaturate = 2.0;
constexpr double kWgmmaWarpsToSaturate = 1.875;
// Fitted: the load latency a pipeline must cover, in clocks: L2 hits, plus this much more
// when an operand streams from DRAM (each of its bytes loaded once, so none hits L2).
constexpr double kL2Latency = 120;
constexpr double kStreamingExtraLatency = 165;
// Fitted: a streamed operand's DRAM latency under load, in clocks, for Little's law: its
// bandwidth is at most the bytes the resident CTAs keep in flight over this latency. VGG-16's
// fc6 at batch 32 (32 x 4096 x 25088, 205 MB of weights, H200, 2026-11-29): cp.async wgmma
// 64x64 with split-K 2, 128 CTAs each 3 k-tiles of 8 KB ahead, streamed them at 1354 bytes
// per clock, 78.2 us, where 256 CTAs of mma.sync 32x64 with split-K 4 (twice the bytes in
// flight) took 56.3.
constexpr double kDramLatency = 2300;
// Fitted: a k-tile's barrier and cp.async wait on a CTA's serial path, in clocks.
constexpr double kKTileOverhead = 130;
// Fitted: issue cost per load vector per SM, in clocks: a cp.async (4 to 16 bytes), a 2-byte
// register-path load (ld.global + st.shared: ci=3 activations; 8 of them cost 3x one 16-byte
// cp.async), and the extra address arithmetic of a gathered vector (implicit GEMM).
constexpr double kAsyncVectorClk = 0.35;
constexpr double kRegisterPathVectorClk = 0.14;
constexpr double kGatherVectorClk = 0.17;
// Fitted: epilogue store bandwidth, bytes per clock, of a whole SM and of one CTA alone.
constexpr double kEpilogueBytesPerClkSm = 7.3;
constexpr double kEpilogueBytesPerClkCta = 5.9;
// Fitted: how much a CTA's serial path stretches per other CTA resident on its SM.
constexpr double kContention = 0.28;
// Fitted: time per spilled register (fraction of the kernel per register above 255 / 255).
constexpr double kSpillPenalty = 1.5;
// Fitted: split-K. The last CTA of a tile reads each other split's fp32 partial tile at this
// many bytes per clock, one split after another, then a fixed cost (fences, the counter).
constexpr double kSplitKBytesPerClk = 27;
constexpr double kSplitKFixed = 2400;
// Fitted: the fixed cost of a launch inside a CUDA graph.
constexpr double kLaunchMicroseconds = 0.83;

constexpr int kMaxRegs = 255;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double elements(const Shape& shape) {
  double n = 1;
  for (int64_t e : shape) n *= static_cast<double>(e);
  return n;
}

// Loads (vectors) per thread per k-tile of one operand: the loader's rows per thread.
int loads_per_thread(const Contraction& c, const Schedule& s, bool is_a) {
  const bool k_major = (is_a ? c.a_major : c.b_major) == Major::kK;
  const int rows_of_block = is_a ? s.block_m : s.block_n;
  const int tile_rows = k_major ? rows_of_block : s.block_k;
  const int tile_cols = k_major ? s.block_k : rows_of_block;
  const int vec = std::max(1, is_a ? s.a_vec : s.b_vec);
  const int row_step = std::max(1, s.threads() / std::max(1, tile_cols / vec));
  return std::max(1, tile_rows / row_step);
}

// 2-byte vectors cannot use cp.async (4, 8 or 16 bytes): they go through registers.
bool register_path(const Contraction& c, const Schedule& s, bool is_a) {
  const size_t bytes = (is_a ? s.a_vec : s.b_vec) * dtype_size(is_a ? c.a_dtype : c.b_dtype);
  return s.instruction != Instruction::kSimt && bytes < 4;
}

}  // namespace

int estimate_regs(const Contraction& c, const Schedule& s) {
  // TMA: the copy engine computes every operand address; the consumers hold accumulators.
  // With a producer warpgroup, setmaxnreg fixes the launch at 168 per thread (384 threads: the
  // whole register file).
  if (s.tma_producer_warpgroup()) return 168;
  if (s.mainloop == Mainloop::kTma) return 40 + s.warp_m * s.warp_n / 128;
  const int gathers = (c.a_gather ? 1 : 0) + (c.b_gather ? 1 : 0);
  int regs = 32 + 16 * gathers;  // addresses, loop state, gather index arithmetic
  if (s.instruction == Instruction::kSimt) return regs + s.block_m * s.block_n / s.threads();
  const int acc = s.warp_m * s.warp_n / (32 * warps_per_warp_tile(s.instruction));
  regs += acc;
  if (s.instruction == Instruction::kMmaSync) {
    regs += 2 * (s.warp_m / 16 * 4 + s.warp_n / 8 * 2);  // A, B fragments, double-buffered
  }
  if (s.split_k > 1) regs += acc;  // the fixup's sums
  // The register path holds a k-tile in flight while the current one computes; with a single
  // k-tile per split there is nothing to prefetch.
  const int64_t k_tiles = ceil_div(ceil_div(c.k, s.block_k), s.split_k);
  for (bool is_a : {true, false})
    if (k_tiles > 1 && register_path(c, s, is_a)) regs += 4 * loads_per_thread(c, s, is_a);
  return regs;
}

double launch_cycles(const device::DeviceInfo& device) {
  return kLaunchMicroseconds * arch_facts(device).clock_mhz;
}

ScheduleEstimate estimate(const Contraction& c, const Schedule& s, const device::DeviceInfo& device,
                          int64_t epilogue_read_bytes, int64_t epilogue_store_bytes) {
  const ArchFacts& f = arch_facts(device);
  const double bm = s.block_m, bn = s.block_n, bk = s.block_k;
  const double ea = static_cast<double>(dtype_size(c.a_dtype));
  const double eb = static_cast<double>(dtype_size(c.b_dtype));
  // The output's element as the epilogue stores it.
  const double ec = static_cast<double>(epilogue_store_bytes > 0 ? epilogue_store_bytes
                                                                 : dtype_size(c.maps.c.dtype));
  const bool wgmma = s.instruction == Instruction::kWgmma;
  const bool simt = s.instruction == Instruction::kSimt;
  const bool tma = s.mainloop == Mainloop::kTma;
  const std::optional<TmaLayout> tma_walk = tma ? tma_layout(c, s) : std::nullopt;

  ScheduleEstimate e;
  const int64_t tm = ceil_div(c.m, s.block_m), tn = ceil_div(c.n, s.block_n);
  const int64_t tiles_mn = c.batch * tm * tn;
  e.tiles = tiles_mn * s.split_k;
  e.regs_per_thread = estimate_regs(c, s);
  e.ctas_per_sm =
      resident_ctas(device, s.threads(), std::min(e.regs_per_thread, kMaxRegs), smem_bytes(c, s));
  e.quantization = c.m * c.n > 0
                       ? static_cast<double>(tm * s.block_m) * static_cast<double>(tn * s.block_n) /
                             (static_cast<double>(c.m) * static_cast<double>(c.n))
                       : 1.0;
  e.intensity = 2 * bm * bn / (bm * ea + bn * eb);
  if (e.ctas_per_sm == 0 || device.sm_count <= 0) {
    e.cycles = e.microseconds = std::numeric_limits<double>::infinity();
    return e;
  }
  const int64_t concurrency = static_cast<int64_t>(device.sm_count) * e.ctas_per_sm;
  e.waves = ceil_div(e.tiles, concurrency);
  e.wave_efficiency = static_cast<double>(e.tiles) / static_cast<double>(e.waves * concurrency);

  // The busiest SM gets ceil(tiles / SMs) tiles, `active` of them at a time.
  const int64_t busiest = ceil_div(e.tiles, device.sm_count);
  const int64_t active = std::max<int64_t>(1, std::min<int64_t>(e.ctas_per_sm, busiest));
  const int64_t rounds = ceil_div(busiest, active);
  // TMA walks K tap by tap in 64-channel chunks (a padded last chunk per tap).
  const int64_t k_tiles = tma_walk ? tma_walk->taps * tma_walk->chunks : ceil_div(c.k, s.block_k);
  const int64_t k_steps = ceil_div(k_tiles, s.split_k);
  e.k_steps = k_steps;

  // An operand streams when each of its bytes is loaded once (one tile column or row, as the
  // weights of a batch-32 FC layer): then no load hits L2.
  const double tile_bytes = (bm * ea + bn * eb) * bk;  // A and B slices of one k-tile
  const double passes = static_cast<double>(tiles_mn) * static_cast<double>(k_tiles) * bk;
  const double unique_a = elements(c.maps.a.shape) * ea, unique_b = elements(c.maps.b.shape) * eb;
  const bool a_streams = unique_a >= passes * bm * ea, b_streams = unique_b >= passes * bn * eb;
  const bool streams = a_streams || b_streams;
  const double latency = kL2Latency + (streams ? kStreamingExtraLatency : 0);

  // One k-tile of one CTA, per SM resource, when `active` CTAs share the SM.
  const bool int8 = !simt && ea == 1;  // m16n8k32 / wgmma k32: the int8 rate of the table
  const double rate =
      simt    ? f.fma_flops_per_clk
      : wgmma ? (int8 ? f.wgmma_s8_ops_per_clk : f.wgmma_flops_per_clk) * kWgmmaSustained
              : (int8 ? f.mma_s8_ops_per_clk : f.mma_flops_per_clk) * kMmaSyncSustained;
  const double saturate = wgmma ? kWgmmaWarpsToSaturate : kMmaSyncWarpsToSaturate;
  const double flops = 2 * bm * bn * bk;
  const double warps_per_smsp = static_cast<double>(active * s.warps()) / 4;
  const double math = flops / (rate * std::min(1.0, warps_per_smsp / saturate));
  // Shared memory: mma.sync warps read their A and B slices with ldmatrix; a wgmma warpgroup
  // reads A once and B once per m64 instruction; the loads write the tile.
  const double reads = wgmma ? s.warp_tiles() * (s.warp_m * ea + s.warp_n * eb * s.warp_m / 64) * bk
                             : s.warp_tiles() * (s.warp_m * ea + s.warp_n * eb) * bk;
  const double smem = (reads + tile_bytes) / kSmemBytesPerClk;
  const double l2 = tile_bytes / f.l2_bytes_per_clk;
  double issue = tma ? 2 * kAsyncVectorClk : 0;  // TMA: two copies per k-tile, one thread
  bool sync_loads = false;
  for (bool is_a : {true, false}) {
    if (tma) break;
    const int vec = std::max(1, is_a ? s.a_vec : s.b_vec);
    const double vectors = (is_a ? bm : bn) * bk / vec;
    const bool reg_path = register_path(c, s, is_a);
    sync_loads = sync_loads || reg_path;
    const bool gather = is_a ? c.a_gather : c.b_gather;
    issue += vectors * ((reg_path ? kRegisterPathVectorClk : kAsyncVectorClk) +
                        (gather ? kGatherVectorClk : 0));
  }
  const double per_sm = active * std::max({math, smem, l2, issue});

  // A CTA's own serial path per k-tile: its math on the sub-partitions its warps cover, or the
  // latency its pipeline leaves exposed (wgmma loads run stages - 2 k-tiles ahead).
  const double own_math =
      flops / (rate * std::min(1.0, static_cast<double>(s.warps()) / 4 / saturate));
  // Loads run stages - 1 k-tiles ahead (wgmma without TMA: stages - 2).
  const int ahead = std::max(1, s.stages - (wgmma && !tma ? 2 : 1));
  const double serial_step = sync_loads ? std::max(latency, own_math) + kKTileOverhead
                                        : std::max(latency / ahead, own_math + kKTileOverhead);
  // The epilogue's traffic per CTA: its stores (split-K: fp32 partials) and what it reads (a
  // residual as large as the output, read by the one split that finishes the tile).
  const double read = static_cast<double>(epilogue_read_bytes);
  const double out_bytes = bm * bn * ((s.split_k > 1 ? 4.0 : ec) + read / s.split_k);
  const double serial =
      k_steps * std::max(serial_step * (1 + kContention * (active - 1)), per_sm / active) +
      latency + out_bytes / kEpilogueBytesPerClkCta;
  const double shared = k_steps * per_sm + active * out_bytes / kEpilogueBytesPerClkSm;
  double cycles = rounds * std::max(serial, shared);
  if (e.regs_per_thread > kMaxRegs) {
    cycles *= 1 + kSpillPenalty * (e.regs_per_thread - kMaxRegs) / kMaxRegs;
  }
  if (s.split_k > 1)
    cycles += (s.split_k - 1) * (kL2Latency + bm * bn * 4 / kSplitKBytesPerClk) + kSplitKFixed;
  const double unique = unique_a + unique_b + elements(c.maps.c.shape) * (ec + read);
  e.dram_cycles = unique / (static_cast<double>(f.dram_bytes_per_clk) * device.sm_count);
  // Where DRAM bounds the kernel, a streamed operand arrives no faster than the resident CTAs
  // keep its bytes in flight over the loaded latency. (Below that bound the serial path's
  // streaming latency, fitted on unloaded DRAM, is the one that counts.)
  if (streams && e.dram_cycles >= cycles) {
    const double streamed = ((a_streams ? bm * ea : 0) + (b_streams ? bn * eb : 0)) * bk;
    const double resident = static_cast<double>(std::min(e.tiles, concurrency));
    e.dram_cycles = std::max(e.dram_cycles, unique * kDramLatency / (resident * ahead * streamed));
  }
  e.cycles = std::max(cycles, e.dram_cycles);
  e.microseconds = kLaunchMicroseconds + e.cycles / f.clock_mhz;
  return e;
}

std::string rank_class(const Schedule& s) {
  const std::string name = s.name();
  size_t end = std::string::npos, from = 0;
  for (int field = 0; field < 3; ++field) {
    end = name.find('_', from);
    if (end == std::string::npos) break;
    from = end + 1;
  }
  // A cooperative TMA schedule's warpgroup tile ("_w64x128", its name's last field) makes a
  // class of its own: the same tile ping-pong runs another kernel.
  const size_t warp = name.rfind("_w");
  const bool cooperative = s.mainloop == Mainloop::kTma && warp != std::string::npos && warp > end;
  return name.substr(0, end) + (cooperative ? name.substr(warp) : "");
}

namespace {

// The fit's name prefix for c's families and classes (bench/rank_fit.py): int8 operands
// (contraction::int8_operands, as kernels::block_k_scale counts them: a u8 A moves and
// multiplies as an i8 one) have their own.
std::string fit_prefix(const Contraction& c) {
  return contraction::int8_operands(c) ? "i8_" : "";
}

const rank_fit::Family* fitted_family(const std::string& name) {
  for (const rank_fit::Family& f : rank_fit::kFamilies)
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace

std::string fitted_class(const Contraction& c, const Schedule& s) {
  return fit_prefix(c) + rank_class(s);
}

bool has_learned_factor(const Contraction& c, const device::DeviceInfo& device) {
  if (device.cc_major != rank_fit::kCcMajor) return false;
  // Every fit has mma.sync's reference family of each dtype it measured (tc, i8_tc).
  return fitted_family(fit_prefix(c) + "tc") != nullptr;
}

double learned_factor(const Contraction& c, const Schedule& s, const ScheduleEstimate& e,
                      const device::DeviceInfo& device, int64_t epilogue_read_bytes,
                      int epilogue_transcendentals) {
  if (device.cc_major != rank_fit::kCcMajor || device.sm_count <= 0) return 1.0;
  if (e.k_steps < 1 || e.tiles < 1) return 1.0;  // no estimate to correct (infinite)
  const std::string cls = fitted_class(c, s);
  const std::string name = rank_class(s);
  const rank_fit::Family* f = fitted_family(fit_prefix(c) + name.substr(0, name.find('_')));
  if (!f) return 1.0;
  double ln = f->intercept + f->ln_k_steps * std::log(static_cast<double>(e.k_steps)) +
              f->ln_tiles_per_sm * std::log(static_cast<double>(e.tiles) / device.sm_count) +
              f->residual * (epilogue_read_bytes > 0 ? 1.0 : 0.0) +
              f->transcendentals * epilogue_transcendentals;
  for (const rank_fit::ClassOffset& o : rank_fit::kClasses)
    if (cls == o.schedule_class) ln += o.ln_offset;
  return std::exp(ln);
}

double tuning_rank(const Contraction& c, const Schedule& s, const device::DeviceInfo& device,
                   int64_t epilogue_read_bytes, int epilogue_transcendentals) {
  const ScheduleEstimate e = estimate(c, s, device);
  return e.microseconds *
         learned_factor(c, s, e, device, epilogue_read_bytes, epilogue_transcendentals);
}

}  // namespace tessel::kernels
