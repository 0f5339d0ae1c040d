// The depthwise kernel's tiling (templates/tessel_depthwise_tile.cuh): its name, the cost
// estimate that ranks tilings, and the chooser that picks the cheapest one that fits.
//
// The estimate, in SM cycles of an H100 (the op kernels are planned for it), is the largest
// of what bounds the kernel: the instructions the busiest SM issues (fp32 FMAs dominate
// large windows: a 7x7 layer does 49 per output and channel), the bytes it moves from L2
// (the input tile with its halo, the output), the DRAM traffic of the whole layer, and the
// chain of one CTA's tiles (a tile's load latency, exposed with one stage, and its compute).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <vector>

#include "core/error.h"
#include "kernels/arch.h"
#include "kernels/cuda/op_emit.h"

namespace tessel::kernels::cuda::op_detail {

namespace {

// Most fp32 registers the kernel may plan for one thread's accumulators, span row and
// weights (the rest of its ~40 registers are addresses and indices). Above this the
// compiler would spill or the SM would hold too few warps to hide shared-memory latency.
constexpr int kMaxPlannedRegs = 168;
// A thread's weights live in registers where they take at most this many.
constexpr int kMaxWeightRegs = 104;
// Registers besides the planned ones: addresses, indices, loop state.
constexpr int kBaseRegs = 30;
// The estimate's constants were fitted to 520 timings of tilings of the 46 depthwise layers of
// bench/workloads/conv2d_grouped.csv on an H100 (the fit picks, among the timed tilings of
// each layer, one within 3-5% of the fastest on geometric mean):
// latency of a tile's first copy from DRAM, in SM cycles (about 0.7 us at 1.98 GHz);
constexpr double kLoadLatency = 1440;
// the share of the SM's issue slots the kernel's instruction mix achieves (ncu: 2.7 of 4
// instructions per cycle with 12 warps on a 7x7 layer), and the resident warps it needs;
constexpr double kIssueEfficiency = 0.67;
constexpr double kFullWarps = 12;
// latency of a batch of weight loads from L2, in SM cycles;
constexpr double kL2Latency = 1030;
// the share of DRAM's bandwidth a streaming kernel reaches.
constexpr double kDramEfficiency = 0.835;
// The largest window the kernel unrolls (11x11); larger ones run the direct grouped kernel.
constexpr int kMaxTaps = 121;
// Bytes of one pixel's slab at least, where the channels have them.
constexpr int kMinSlabBytes = 64;
// Static shared memory per CTA (no opt-in above 48 KiB).
constexpr int kStaticSmem = 48 * 1024;

const device::DeviceInfo& planned_device() { return device::known_device("sm_90a"); }

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// Span rows (or columns) of a thread that some output reads.
int used_span_rows(const DepthwiseTiling& t) {
  int used = 0;
  for (int j = 0; j < t.span_rows(); ++j) used += t.span_row_used(j);
  return used;
}
int used_span_cols(const DepthwiseTiling& t) {
  int used = 0;
  for (int u = 0; u < t.span_cols(); ++u) used += t.span_col_used(u);
  return used;
}

// Instructions one thread issues per tile: the FMAs, the span's shared reads and f16 or int8
// conversions (int8: an xor per word, a prmt and a subtract per element: to_floats in
// tessel_op_common.cuh), weight reads (from shared memory at each use, or once per CTA into
// registers), the epilogue, the staging copies and the CTA's prologue (weights, bias).
double thread_instructions(const DepthwiseTiling& t, int elem_bytes) {
  const int frag_bytes = t.vec * elem_bytes;
  const double pixels = double(used_span_rows(t)) * used_span_cols(t);
  const double fma = double(t.rows_per_thread) * t.cols_per_thread * t.vec * t.taps();
  const double lds_x = pixels * ceil_div(frag_bytes, 16);
  const double cvt = elem_bytes == 4   ? 0
                     : elem_bytes == 2 ? pixels * t.vec
                                       : pixels * (2.0 * t.vec + ceil_div(t.vec, 4));
  const double weight_reads = double(t.rows_per_thread) * t.taps() * ceil_div(t.vec * 4, 16);
  const double lds_w = t.register_weights ? 0 : weight_reads;
  const double outputs = double(t.rows_per_thread) * t.cols_per_thread;
  const double epilogue = outputs * (2.0 * t.vec + 8);
  const double staging = double(ceil_div(t.chunks(), t.threads())) * 14;
  const double prologue = double(ceil_div(t.taps() * t.slab(), t.threads())) * 8 +
                          (t.register_weights ? t.taps() * ceil_div(t.vec * 4, 16) : 0) + 60;
  return fma + lds_x + cvt + lds_w + epilogue + staging + prologue;
}

// Bytes one thread reads from shared memory per tile: its span (weights read at each use
// are left out, as in the fit).
double thread_smem_bytes(const DepthwiseTiling& t, int elem_bytes) {
  const double pixels = double(used_span_rows(t)) * used_span_cols(t);
  return pixels * std::max(4, t.vec * elem_bytes);
}

}  // namespace

int depthwise_registers(const DepthwiseTiling& t) {
  // ptxas keeps the accumulators, a span row and the weights in registers; weights read from
  // shared memory at each use are hoisted into registers too, up to about 64.
  const int acc = t.rows_per_thread * t.cols_per_thread * t.vec;
  const int span = used_span_cols(t) * t.vec;
  const int weights = t.register_weights ? t.taps() * t.vec : std::min(t.taps() * t.vec, 64);
  return std::min(255, kBaseRegs + acc + span + weights);
}

std::optional<std::string> depthwise_tiling_refusal(const DepthwiseTiling& t, int elem_bytes) {
  if (t.taps() > kMaxTaps)
    return fmt::format("a {}x{} window, larger than the kernel unrolls", t.kernel_h, t.kernel_w);
  if (t.vec < 1 || t.stage_vec % t.vec != 0)
    return fmt::format("{} channels per thread do not divide the {}-channel copies", t.vec,
                       t.stage_vec);
  if (t.slab_vecs < 1 || t.slab() % t.stage_vec != 0)
    return fmt::format("a slab of {} channels is not a whole number of {}-channel copies", t.slab(),
                       t.stage_vec);
  if (t.col_groups < 1 || t.cols_per_thread < 1 || t.row_groups < 1 || t.rows_per_thread < 1)
    return "empty thread blocks";
  if (t.stages != 1 && t.stages != 2) return fmt::format("{} stages (1 or 2)", t.stages);
  if (t.tile_per_cta && t.stages != 1) return "two stages with one tile per CTA";
  if (t.threads() % 32 != 0 || t.threads() > 1024)
    return fmt::format("{} threads, not whole warps up to 1024", t.threads());
  if (t.smem_bytes(elem_bytes) > kStaticSmem)
    return fmt::format("{} bytes of shared memory, over the 48 KiB of static shared memory",
                       t.smem_bytes(elem_bytes));
  if (t.register_weights && t.taps() * t.vec > kMaxWeightRegs)
    return fmt::format("{} weights per thread do not fit in registers", t.taps() * t.vec);
  const int planned = t.rows_per_thread * t.cols_per_thread * t.vec + used_span_cols(t) * t.vec +
                      (t.register_weights ? t.taps() * t.vec : 0);
  if (planned > kMaxPlannedRegs)
    return fmt::format("{} registers per thread for accumulators, a span row and weights", planned);
  return std::nullopt;
}

int64_t depthwise_grid(const DepthwiseTiling& t, int elem_bytes) {
  const device::DeviceInfo& d = planned_device();
  const int64_t tiles = t.tiles();
  const int resident =
      resident_ctas(d, t.threads(), depthwise_registers(t), t.smem_bytes(elem_bytes));
  const int64_t slots = std::min<int64_t>(int64_t(std::max(resident, 1)) * d.sm_count, kMaxBlocks);
  if (t.tile_per_cta || tiles <= slots) return tiles;
  // Persistent CTAs, at most as many as fit at once, a multiple of the slab count so that
  // each keeps one slab, and as few as give no CTA more tiles than the fullest one has.
  const int64_t most = std::max<int64_t>(1, slots / t.slabs()) * t.slabs();
  const int64_t per_cta = (tiles + most - 1) / most;
  const int64_t even = ((tiles + per_cta - 1) / per_cta + t.slabs() - 1) / t.slabs() * t.slabs();
  return std::min(most, even);
}

double depthwise_cycles(const DepthwiseTiling& t, int elem_bytes) {
  const device::DeviceInfo& d = planned_device();
  const ArchFacts& f = arch_facts(d);
  const int resident =
      resident_ctas(d, t.threads(), depthwise_registers(t), t.smem_bytes(elem_bytes));
  if (resident == 0) return INFINITY;
  // The busiest SM's CTAs and tiles (the hardware hands CTAs to SMs as others finish; a
  // persistent grid is spread evenly).
  const int64_t grid = depthwise_grid(t, elem_bytes);
  const double sm_ctas = std::ceil(double(grid) / d.sm_count);
  const double sm_tiles = sm_ctas * std::ceil(double(t.tiles()) / grid);
  const int warps = t.threads() / 32;
  const double warp_instructions = warps * thread_instructions(t, elem_bytes);

  // Issue: fewer than kFullWarps resident warps per SM hide less of the shared-memory and
  // FMA latencies.
  const double sm_warps = std::min<double>(resident, sm_ctas) * warps;
  const double efficiency = kIssueEfficiency * std::min(1.0, sm_warps / kFullWarps);
  const double issue = sm_tiles * warp_instructions / (4 * efficiency);
  // Shared memory: 128 bytes per cycle, the span reads and the staged tile.
  const double tile_in = double(t.smem_x_elems()) * elem_bytes;
  const double smem = sm_tiles * (t.threads() * thread_smem_bytes(t, elem_bytes) + tile_in) / 128;
  // L2: the tile with its halo in, the outputs out, each CTA's weights.
  const double tile_out = double(t.tile_rows()) * t.tile_cols() * t.slab() * elem_bytes;
  const double l2 =
      (sm_tiles * (tile_in + tile_out) + sm_ctas * double(t.taps()) * t.slab() * elem_bytes) /
      f.l2_bytes_per_clk;
  // DRAM: the layer's input and output once.
  const double unique =
      (double(t.n) * t.h * t.w * t.c + double(t.n) * t.oh * t.ow * t.c) * elem_bytes;
  const double dram = unique / (double(f.dram_bytes_per_clk) * d.sm_count * kDramEfficiency);
  // Latency: a CTA waits for its first tile (the weights' batches of loads overlap it), then
  // computes; `resident` CTAs wait at once.
  const double batches = std::ceil(double(t.taps()) * t.slab() / (8.0 * t.threads()));
  const double first = std::max(kLoadLatency, batches * kL2Latency);
  const double tile_alone =
      warp_instructions / (4 * kIssueEfficiency * std::min(1.0, warps / kFullWarps));
  const double cta = first + (sm_tiles / sm_ctas) * tile_alone +
                     (t.stages == 1 ? (sm_tiles / sm_ctas - 1) * kLoadLatency : 0);
  const double latency = std::ceil(sm_ctas / resident) * cta;
  return std::max({issue + first, smem, l2, dram, latency});
}

std::string depthwise_tiling_name(const DepthwiseTiling& t) {
  return fmt::format("dw_v{}x{}_r{}x{}_c{}x{}_s{}_{}{}", t.vec, t.slab_vecs, t.rows_per_thread,
                     t.row_groups, t.cols_per_thread, t.col_groups, t.stages,
                     t.register_weights ? "wr" : "ws", t.tile_per_cta ? "_t" : "");
}

std::optional<DepthwiseTiling> parse_depthwise_tiling(const std::string& name,
                                                      const DepthwiseTiling& problem) {
  static const std::regex re(R"(dw_v(\d+)x(\d+)_r(\d+)x(\d+)_c(\d+)x(\d+)_s(\d+)_(wr|ws)(_t)?)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return std::nullopt;
  DepthwiseTiling t = problem;
  auto i = [&](int k) { return std::stoi(m[k].str()); };
  t.vec = i(1), t.slab_vecs = i(2), t.rows_per_thread = i(3), t.row_groups = i(4);
  t.cols_per_thread = i(5), t.col_groups = i(6), t.stages = i(7);
  t.register_weights = m[8].str() == "wr";
  t.tile_per_cta = m[9].matched;
  return t;
}

std::optional<DepthwiseTiling> choose_depthwise_tiling(const DepthwiseTiling& problem,
                                                       int elem_bytes) {
  // The space the estimate ranks, where sweeps of every kind of tiling (fragments of 1-8
  // channels, weights in registers or shared memory, blocks of 1x1 to 8x8 outputs, one or
  // two stages, persistent or one-tile-per-CTA grids) on an H100 over the 46 depthwise layers
  // of MobileNet-v2, EfficientNet-b0 and ConvNeXt-T at batch 1 and 32 found the fastest
  // within a few percent: 2 channels per thread, or 1 on small layers and 5x5 or larger
  // windows (8 channels read 16 bytes per pixel and convert them for fewer outputs); blocks of
  // 2 or 4 rows by 2, 3, 4 or 7 columns (7 fits 7- to 112-wide images); weights in registers;
  // one CTA per tile (the hardware balances them; a persistent grid is only as balanced as
  // its register estimate); on large layers tiles of 32 pixels or more. An int8 input (not
  // swept yet) is offered 4 channels too: a 32-bit shared read as the 2 f16 channels are, and
  // one xor of its conversion per 4 elements.
  const int64_t outputs = int64_t(problem.n) * problem.oh * problem.ow * problem.c;
  const bool small = outputs < (int64_t(1) << 20);
  const int taps = problem.kernel_h * problem.kernel_w;
  std::vector<int> vecs;
  for (int v : {1, 2, 4})
    if (problem.stage_vec % v == 0 &&
        (v == 4 ? elem_bytes == 1 : v == 2 || small || taps >= 25 || problem.stage_vec == 1))
      vecs.push_back(v);
  const int chunks = ceil_div(problem.c, problem.stage_vec);
  std::optional<DepthwiseTiling> best;
  double best_cycles = 0;
  // The second pass, for channel counts and images the first fits no whole warps to (3 or 20
  // channels, a 4x3 output), also takes idle threads, single rows and columns, larger groups.
  for (const bool relaxed : {false, true}) {
    if (best) break;
    const int most_groups = relaxed ? 32 : 8;
    for (int most = std::min(chunks, 16); most >= 1; --most) {
      // Slabs of at most `most` chunks, split evenly.
      const int slabs = ceil_div(chunks, most);
      const int slab_chunks = ceil_div(chunks, slabs);
      if (slab_chunks != most) continue;  // the same split as a larger `most`
      // At least 64 bytes of each pixel per slab where the channels have them: whole 32-byte
      // sectors from DRAM, and few requests per byte.
      if (slab_chunks * problem.stage_vec * elem_bytes <
          std::min(kMinSlabBytes, problem.c * elem_bytes))
        continue;
      for (const int vec : vecs) {
        const int slab_vecs = slab_chunks * problem.stage_vec / vec;
        for (int row_groups = 1; row_groups <= most_groups; ++row_groups)
          for (int col_groups = 1; col_groups <= most_groups; ++col_groups) {
            const int threads = slab_vecs * row_groups * col_groups;
            if (threads % 32 != 0 || threads > (relaxed ? 512 : 256)) continue;
            for (int rows : relaxed ? std::vector<int>{1, 2, 4} : std::vector<int>{2, 4})
              for (int cols :
                   relaxed ? std::vector<int>{1, 2, 4, 7} : std::vector<int>{2, 3, 4, 7}) {
                if (!relaxed) {
                  // No thread rows or columns wholly past the image; large layers in tiles
                  // of 32 pixels or more, 2 warps or more.
                  if ((row_groups - 1) * rows >= problem.oh ||
                      (col_groups - 1) * cols >= problem.ow)
                    continue;
                  if (!small && (row_groups * rows * col_groups * cols < 32 || threads < 64))
                    continue;
                }
                DepthwiseTiling t = problem;
                t.vec = vec, t.slab_vecs = slab_vecs;
                t.rows_per_thread = rows, t.row_groups = row_groups;
                t.cols_per_thread = cols, t.col_groups = col_groups;
                t.stages = 1, t.tile_per_cta = true;
                t.register_weights = t.taps() * t.vec <= kMaxWeightRegs;
                if (depthwise_tiling_refusal(t, elem_bytes)) continue;
                const double cycles = depthwise_cycles(t, elem_bytes);
                if (!best || cycles < best_cycles) best = t, best_cycles = cycles;
              }
          }
      }
    }
  }
  return best;
}

}  // namespace tessel::kernels::cuda::op_detail
