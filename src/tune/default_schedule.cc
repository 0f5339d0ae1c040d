#include "tune/default_schedule.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace tessel::tune {
namespace {

using contraction::Contraction;

struct Tile {
  int m, n;
};

// The space (see the header). CTA tiles run from the 8-warp 128x256 / 256x128 tiles that
// reach peak on large problems down to 32x64 / 64x32 for skinny ones (N = 16, M = 49); warp
// tiles are multiples of the m16n8 instruction tile.
constexpr Tile kCtaTiles[] = {{128, 256}, {256, 128}, {128, 128}, {128, 64},
                              {64, 128},  {64, 64},   {64, 32},   {32, 64}};
constexpr Tile kWarpTiles[] = {{64, 64}, {64, 32}, {32, 64}, {32, 32}};
constexpr int kBlockK[] = {32, 64};
constexpr int kStages[] = {2, 3, 4, 5};
constexpr int kSplitK[] = {1, 2, 3, 4, 6, 8, 12, 16};
constexpr int kRaster[] = {1, 8};
constexpr int kMinWarps = 2, kMaxWarps = 8;

// Model constants, in SM clocks. Shared memory serves 128 bytes per clock per SM on sm_80
// and sm_90. A load that misses L2 takes ~600 clocks; `stages - 1` K steps are in flight to
// hide it. A split-K reduction costs about a kernel launch beyond its traffic.
constexpr double kSmemBytesPerClk = 128;
constexpr double kLoadLatency = 600;
constexpr double kSplitKOverhead = 2000;

// Split-K is for filling the SMs, not for its own sake: each split keeps this much of K.
constexpr int64_t kMinSplitKDepth = 256;
constexpr double kTieTolerance = 1.02;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double elements(const Shape& shape) {
  double n = 1;
  for (int64_t e : shape) n *= static_cast<double>(e);
  return n;
}

// Registers per thread. Tensor Cores: the f32 accumulators of the warp tile (wm*wn/32),
// double-buffered fragments (A: 4 registers per m16 x k16, B: 2 per n8 x k16), ~32 for
// addresses and loop state, 16 more per gather operand for its index arithmetic. SIMT: one
// accumulator per output of the thread plus the same overheads.
int estimate_regs(const Contraction& c, const Schedule& s) {
  int gathers = (c.a_gather ? 1 : 0) + (c.b_gather ? 1 : 0);
  int regs = 32 + 16 * gathers;
  if (s.instruction == Instruction::kSimt) {
    regs += s.block_m * s.block_n / s.threads();
  } else {
    regs += s.warp_m * s.warp_n / 32;
    regs += 2 * (s.warp_m / 16 * 4 + s.warp_n / 8 * 2);
  }
  return std::min(regs, 255);
}

bool split_is_legal(const Contraction& c, int block_k, int split) {
  int64_t k_tiles = ceil_div(c.k, block_k);
  int64_t per_split = ceil_div(k_tiles, split);
  return split <= k_tiles && (split - 1) * per_split < k_tiles;  // every split has a K tile
}

int64_t mn_tiles(const Contraction& c, const Schedule& s) {
  return c.batch * ceil_div(c.m, s.block_m) * ceil_div(c.n, s.block_n);
}

}  // namespace

size_t smem_bytes(const Contraction& c, const Schedule& s) {
  size_t a = static_cast<size_t>(s.block_m) * dtype_size(c.a_dtype);
  size_t b = static_cast<size_t>(s.block_n) * dtype_size(c.b_dtype);
  return (a + b) * s.block_k * s.stages;
}

ScheduleEstimate estimate(const Contraction& c, const Schedule& s, const DeviceInfoLite& device) {
  const ArchFacts& f = arch_facts(device);
  const double bm = s.block_m, bn = s.block_n, bk = s.block_k;
  const double ea = static_cast<double>(dtype_size(c.a_dtype));
  const double eb = static_cast<double>(dtype_size(c.b_dtype));
  const double ec = static_cast<double>(dtype_size(c.maps.c.dtype));

  ScheduleEstimate e;
  const int64_t tm = ceil_div(c.m, s.block_m), tn = ceil_div(c.n, s.block_n);
  e.tiles = c.batch * tm * tn * s.split_k;
  e.regs_per_thread = estimate_regs(c, s);
  e.ctas_per_sm = resident_ctas(device, s.threads(), e.regs_per_thread, smem_bytes(c, s));
  e.quantization = c.m * c.n > 0
                       ? static_cast<double>(tm * s.block_m) * static_cast<double>(tn * s.block_n) /
                             (static_cast<double>(c.m) * static_cast<double>(c.n))
                       : 1.0;
  e.intensity = 2 * bm * bn / (bm * ea + bn * eb);
  if (e.ctas_per_sm == 0 || device.sm_count <= 0) {
    e.cycles = std::numeric_limits<double>::infinity();
    return e;
  }
  const int64_t concurrency = static_cast<int64_t>(device.sm_count) * e.ctas_per_sm;
  e.waves = ceil_div(e.tiles, concurrency);
  e.wave_efficiency =
      e.waves > 0 ? static_cast<double>(e.tiles) / static_cast<double>(e.waves * concurrency) : 0;

  // The busiest SM gets ceil(tiles / SMs) tiles, `active` of them at a time.
  const int64_t busiest = ceil_div(e.tiles, device.sm_count);
  const int64_t active = std::max<int64_t>(1, std::min<int64_t>(e.ctas_per_sm, busiest));
  const int64_t rounds = ceil_div(busiest, active);
  const int64_t k_steps = ceil_div(ceil_div(c.k, s.block_k), s.split_k);

  // One K step of one CTA, per resource of the SM. Tensor Cores need a few warps per SM
  // sub-partition to cover ldmatrix and mma latencies: fewer than 8 resident warps lose
  // throughput (hiding = 0.5 + warps/16, capped at 1).
  const bool tensor_cores = s.instruction != Instruction::kSimt;
  const double rate =
      tensor_cores ? f.mma_flops_per_clk * (ea == 1 ? 2.0 : 1.0) : f.fma_flops_per_clk;
  const double hiding = std::min(1.0, 0.5 + static_cast<double>(active * s.warps()) / 16);
  const double math = 2 * bm * bn * bk / rate / hiding;
  const double smem =
      (s.warps() * (s.warp_m * ea + s.warp_n * eb) * bk + (bm * ea + bn * eb) * bk) /
      kSmemBytesPerClk;
  const double l2 = (bm * ea + bn * eb) * bk / f.l2_bytes_per_clk;
  const double latency = kLoadLatency / std::max(1, s.stages - 1);
  const double step = std::max({active * math, active * smem, active * l2, latency});

  const double out_bytes = s.split_k > 1 ? 4.0 : ec;  // split-K stores fp32 partials
  const double epilogue = active * bm * bn * out_bytes / f.dram_bytes_per_clk;
  const double dram_per_clk = static_cast<double>(f.dram_bytes_per_clk) * device.sm_count;
  double cycles = rounds * (k_steps * step + kLoadLatency + epilogue);
  if (s.split_k > 1) {
    const double outputs = static_cast<double>(c.batch) * c.m * c.n;
    cycles += outputs * (4.0 * s.split_k + ec) / dram_per_clk + kSplitKOverhead;
  }
  const double unique_bytes =
      elements(c.maps.a.shape) * ea + elements(c.maps.b.shape) * eb + elements(c.maps.c.shape) * ec;
  e.cycles = std::max(cycles, unique_bytes / dram_per_clk);
  return e;
}

Schedule simt_schedule(const Contraction& c) {
  Schedule s;
  s.instruction = Instruction::kSimt;
  s.block_m = 64;
  s.block_n = 64;
  s.block_k = 16;
  s.warp_m = 32;  // 2 x 4 warps of 32x16: 256 threads, 4x4 outputs each
  s.warp_n = 16;
  s.stages = 2;
  s.split_k = 1;
  s.raster = 1;
  s.a_vec = c.a_vec;
  s.b_vec = c.b_vec;
  return s;
}

std::vector<Schedule> enumerate_schedules(const Contraction& c, const DeviceInfoLite& device) {
  if (!contraction::tensor_core_eligible(c) || device.cc_major < 8) return {simt_schedule(c)};
  std::vector<Schedule> space;
  for (Tile cta : kCtaTiles) {
    for (Tile warp : kWarpTiles) {
      if (cta.m % warp.m != 0 || cta.n % warp.n != 0) continue;
      int warps = (cta.m / warp.m) * (cta.n / warp.n);
      if (warps < kMinWarps || warps > kMaxWarps) continue;
      for (int block_k : kBlockK) {
        for (int stages : kStages) {
          for (int split : kSplitK) {
            if (!split_is_legal(c, block_k, split)) continue;
            for (int raster : kRaster) {
              Schedule s;
              s.instruction = Instruction::kMmaSync;
              s.block_m = cta.m;
              s.block_n = cta.n;
              s.block_k = block_k;
              s.warp_m = warp.m;
              s.warp_n = warp.n;
              s.stages = stages;
              s.split_k = split;
              s.raster = raster;
              s.a_vec = c.a_vec;
              s.b_vec = c.b_vec;
              if (resident_ctas(device, s.threads(), estimate_regs(c, s), smem_bytes(c, s)) < 1)
                continue;
              space.push_back(s);
            }
          }
        }
      }
    }
  }
  if (space.empty()) return {simt_schedule(c)};
  return space;
}

Schedule default_schedule(const Contraction& c, const DeviceInfoLite& device) {
  std::vector<Schedule> space = enumerate_schedules(c, device);
  if (space.front().instruction == Instruction::kSimt) return space.front();

  // Raster does not enter the estimate: it is set for the winner below.
  auto wanted = [&](const Schedule& s, bool shallow_ok) {
    if (s.raster != 1) return false;
    if (s.stages != 3 && s.stages != 4 && !(shallow_ok && s.stages == 2)) return false;
    if (s.split_k == 1) return true;
    return mn_tiles(c, s) < device.sm_count && c.k / s.split_k >= kMinSplitKDepth;
  };
  struct Candidate {
    Schedule s;
    ScheduleEstimate e;
  };
  std::vector<Candidate> candidates;
  for (bool shallow_ok : {false, true}) {  // 2 stages only if 3 do not fit shared memory
    for (const Schedule& s : space)
      if (wanted(s, shallow_ok)) candidates.push_back({s, estimate(c, s, device)});
    if (!candidates.empty()) break;
  }
  if (candidates.empty()) return simt_schedule(c);

  double best = std::numeric_limits<double>::infinity();
  for (const Candidate& x : candidates) best = std::min(best, x.e.cycles);
  const Candidate* pick = nullptr;
  auto order = [&](const Candidate& x) {
    return std::make_tuple(x.e.quantization, x.s.split_k, smem_bytes(c, x.s), x.s.name());
  };
  for (const Candidate& x : candidates)
    if (x.e.cycles <= best * kTieTolerance && (!pick || order(x) < order(*pick))) pick = &x;

  Schedule s = pick->s;
  const int64_t concurrency = static_cast<int64_t>(device.sm_count) * pick->e.ctas_per_sm;
  if (pick->e.tiles > concurrency && ceil_div(c.m, s.block_m) >= 8 && ceil_div(c.n, s.block_n) >= 8)
    s.raster = 8;
  return s;
}

}  // namespace tessel::tune
