#include "kernels/default_schedule.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "kernels/contraction/grouped.h"

namespace tessel::kernels {
namespace {

using contraction::Contraction;

struct Tile {
  int m, n;
};

// The space (see the header). CTA tiles run from the 8-warp 128x256 / 256x128 tiles that
// reach peak on large problems down to 32x32 for tiny ones (GEMM 512x16x512, M = 49); warp
// tiles are multiples of the m16n8k16 instruction tile, warpgroup tiles of m64nNk16.
constexpr Tile kMmaCtaTiles[] = {{256, 128}, {128, 256}, {128, 128}, {128, 64},
                                 {64, 128},  {64, 64},   {128, 32},  {32, 128},
                                 {256, 32},  {64, 32},   {32, 64},   {32, 32}};
constexpr Tile kMmaWarpTiles[] = {{64, 64}, {64, 32}, {32, 64}, {32, 32},
                                  {32, 16}, {16, 32}, {16, 16}};
constexpr int kMmaBlockK[] = {32, 64, 128};
constexpr int kMmaStages[] = {2, 3, 4, 5};
constexpr int kMinWarps = 2, kMaxWarps = 8;
constexpr Tile kWgmmaCtaTiles[] = {{256, 128}, {128, 256}, {128, 128},
                                   {128, 64},  {64, 128},  {64, 64}};
constexpr Tile kWgmmaGroupTiles[] = {{128, 128}, {64, 256}, {64, 128}, {128, 64}, {64, 64}};
constexpr int kWgmmaBlockK[] = {64, 128};
constexpr int kWgmmaStages[] = {3, 4, 5};
constexpr int kMaxWarpgroups = 2;
constexpr int kTmaStages[] = {3, 4, 5, 6, 8};
constexpr int kSplitK[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16};
constexpr int kRaster[] = {1, 8};

// The default kernels: configurations measured on an H100 SXM over all 70 public workloads
// (2026-11-21; see estimate.cc), from the 8-warp tiles of large GEMMs to the 4-warp 32x32 tiles
// of tiny ones. `sm90_scale` is each one's residual: measured time / estimate, fitted with the
// model's constants (it carries what the model does not: e.g. the 255-register kernels of
// 64x64 warp tiles, the spills of 128x64x64). Other architectures were not measured: 1.
// sm90_scale 0: a kernel ranked only where the learned correction ranks the defaults.
struct DefaultKernel {
  Instruction instruction;
  int block_m, block_n, block_k, stages, warp_m, warp_n;
  double sm90_scale;
};
constexpr Instruction kMma = Instruction::kMmaSync, kWg = Instruction::kWgmma;
// clang-format off
constexpr DefaultKernel kDefaultKernels[] = {
    // instr  CTA tile      k   stages  warp tile   sm90_scale
    {kMma,   256, 128,   32,  3,      64, 64,     0.79},
    {kMma,   128, 256,   32,  3,      64, 64,     0.74},
    {kMma,   128, 128,   32,  4,      64, 64,     0.83},
    {kMma,   128, 128,   32,  3,      64, 64,     0.74},
    {kMma,   128,  64,   32,  3,      64, 32,     1.05},
    {kMma,   128,  64,   32,  3,      32, 64,     0.85},
    {kMma,   128,  64,   32,  4,      32, 64,     1.0},
    {kMma,   128,  64,   64,  3,      64, 64,     1.25},
    {kMma,    64,  64,   32,  3,      32, 32,     1.0},
    {kMma,    64,  64,   32,  4,      32, 32,     1.2},
    {kMma,    64,  64,   64,  3,      32, 32,     0.89},
    {kMma,   128,  32,   32,  3,      32, 32,     0.96},
    {kMma,   256,  32,   32,  3,      64, 32,     1.06},
    {kMma,    64,  32,   64,  3,      32, 16,     1.06},
    {kMma,    64,  32,   64,  4,      32, 16,     1.11},
    {kMma,    64,  32,   64,  3,      32, 32,     0.96},
    {kMma,    64,  32,   32,  5,      32, 32,     1.06},
    {kMma,    32,  64,   64,  3,      32, 32,     0.89},
    {kMma,    32,  64,   64,  3,      16, 32,     1.05},
    {kMma,    32,  64,   64,  4,      16, 32,     0.89},
    {kMma,    32,  64,  128,  3,      32, 32,     1.33},
    {kMma,    32,  32,   64,  4,      16, 16,     1.2},
    {kMma,    32,  32,  128,  3,      16, 16,     1.0},
    // Not measured on the public workloads (no residual): ranked only by the learned correction
    // (Hopper; int8's with block_k doubled where the fit has int8 measurements). Tune's best on
    // DenseNet-121's BN + ReLU prologue 1x1 convs at batch 32 (H200, 2026-11-28), which only
    // mma.sync runs: e.g. 25088 x 128 x 256, 14.2 us (64x128x32, raster 8) against 15.9 for the
    // default of the time (256x128x32).
    {kMma,    64, 128,   32,  4,      32, 64,     0},
    {kMma,    64, 128,   64,  3,      32, 32,     0},
    {kWg,    256, 128,   64,  4,     128, 128,    0.94},
    {kWg,    128, 256,   64,  4,      64, 256,    0.84},
    {kWg,    128, 128,   64,  4,      64, 128,    0.94},
    {kWg,    128, 128,   64,  4,     128, 128,    1.06},
    {kWg,    128,  64,   64,  4,      64, 64,     1.13},
    {kWg,     64, 128,   64,  4,      64, 128,    0.94},
    {kWg,     64,  64,   64,  5,      64, 64,     1.27},
};
// The TMA kernel (Mainloop::kTma): persistent, two consumer warpgroups alternating whole
// tiles, so one's epilogue overlaps the other's mainloop; as many stages as fit beside the
// epilogue's slabs, one CTA per SM. sm90_scale: measured / estimated time over ResNet-50's 22
// batch-32 convolutions on an H100 (2026-11-25, docs/performance.md), times the ratio of this
// table's residuals to the same run's measured ones for the mma.sync and wgmma kernels (0.77),
// so that the two fits share a scale.
struct TmaKernel {
  int block_m, block_n, stages;
  double sm90_scale;
};
constexpr TmaKernel kTmaKernels[] = {
    {128, 128, 4, 0.78}, {64, 256, 4, 0.73}, {128, 64, 7, 0.66}, {64, 128, 7, 0.65}, {64, 64, 8, 0.57},
};
// clang-format on

// Split-K is for filling the SMs, not for its own sake: each split keeps this much of K.
constexpr int64_t kMinSplitKDepth = 128;
constexpr double kTieTolerance = 1.02;
// Raster 8 for every default: CTAs running together then share A and B tiles in L2, and on
// the calibration set it was never slower than raster 1 on average (2.4% faster where both
// tile counts are >= 8, 1-2% on small grids, where the order matters less than the code).
constexpr int kDefaultRaster = 8;
// The persistent TMA kernel walks its tiles in raster 1 (a CTA's successive tiles, and the
// CTAs running together, sweep N before M). Measured on an H200 (2026-11-28): raster 1 was
// faster than raster 8 on 20 of the 21 TMA rows of conv2d.csv at batch 32, by 2-8% with the
// operands streamed from DRAM (bench-op); and in ResNet-50, operands in L2, tune's best for the
// 128x128 tile was 4 stages and raster 1 on every layer that tried it (layer 3's 1x1 convs: 23.0
// -> 13.6 us, 21.7 -> 12.8 us against 5 stages and raster 8).
constexpr int kTmaDefaultRaster = 1;
// Except where the weights (B) outgrow a quarter of L2: raster 1 then streams all of B past
// each band of M tiles, from DRAM each time, where raster 8 reuses each B tile for 8 bands.
// tune of single-GEMM models (H200, 2026-11-29, tma 128x128, 4 stages, raster 1 -> 8):
// 4096^3 (B 32 MB) 234.6 -> 216.0 us, 2048 x 8192 x 2048 (32 MB) 133.6 -> 114.4, 8192^3
// (128 MB) 2171.5 -> 1855.3; 4096 x 1024 x 4096 (B 8 MB) even (53.1 against 53.4).
int tma_raster(const Contraction& c, const device::DeviceInfo& device) {
  // A device described without its L2 (schedule tests): the H100's 50 MB.
  const double l2 = device.l2_bytes > 0 ? static_cast<double>(device.l2_bytes) : 50.0 * (1 << 20);
  const double b_bytes = static_cast<double>(numel(c.maps.b.shape) * dtype_size(c.b_dtype));
  return b_bytes > l2 / 4 ? kDefaultRaster : kTmaDefaultRaster;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t mn_tiles(const Contraction& c, const Schedule& s) {
  return c.batch * ceil_div(c.m, s.block_m) * ceil_div(c.n, s.block_n);
}

Schedule make(Instruction instruction, Tile cta, Tile warp, int block_k, int stages, int split,
              int raster, const Contraction& c) {
  Schedule s;
  s.instruction = instruction;
  s.block_m = cta.m;
  s.block_n = cta.n;
  s.block_k = block_k;
  s.warp_m = warp.m;
  s.warp_n = warp.n;
  s.stages = stages;
  s.split_k = split;
  s.raster = raster;
  s.a_vec = std::min(c.a_vec, max_vector_elements(c.a_dtype));
  s.b_vec = std::min(c.b_vec, max_vector_elements(c.b_dtype));
  return s;
}

// int8 contractions (mma.sync m16n8k32) take k-tiles of twice the elements: the same bytes
// per k-tile, shared-memory row and k-step (32 bytes) as the 16-bit kernels, so the f16
// configurations carry over with block_k doubled.
int block_k_scale(const Contraction& c) {
  return contraction::int8_operands(c) ? 2 : 1;
}

// Whether c's TMA schedules also come in k-tiles of one 64-byte row (kernels::check_tma): where
// a tap's channels would leave its last 128-byte row at most half full (64 or 192 int8
// channels, 32 f16 ones, a GEMM's K of 64 int8), they move and multiply half the zeros.
// `taps_only`: only for convolutions of several taps (the defaults' rule: on the H200, ResNet-50
// int8's 3x3 64 -> 64 convs went 16.9 -> 15.4 us against mma.sync, while on 1x1 convs, a tile of
// few k-tiles, the unmeasured classes lost as often as they won: MobileNet-v2 int8's 1x1 320 ->
// 1280 5.9 -> 9.5 us, fp16's 32 -> 192 6.9 -> 9.1, its 96 -> 576 8.7 -> 8.1). The channels per
// tap are the contraction's, whatever the tile: one layout says.
bool tma_half_rows(const Contraction& c, bool taps_only) {
  Schedule full = tma_schedule(64, 64, 2, 1, 0);
  full.block_k *= block_k_scale(c);  // one 128-byte row
  const std::optional<TmaLayout> l = tma_layout(c, full);
  const int64_t rest = l ? l->channels % full.block_k : 0;
  return rest > 0 && rest <= full.block_k / 2 && (!taps_only || l->taps > 1);
}

// Whether c is an int8 1x1 conv or GEMM whose whole K is one 64-byte row, more than half of it
// data (33 to 64 channels): a 128-byte k-tile would multiply as many zeros as products.
bool int8_k_in_half_row(const Contraction& c) {
  if (!contraction::int8_operands(c)) return false;
  Schedule half = tma_schedule(64, 64, 2, 1, 0);
  half.block_k = 64;  // one 64-byte row of int8
  const std::optional<TmaLayout> l = tma_layout(c, half);
  return l && l->taps == 1 && l->chunks == 1 && 2 * l->channels > half.block_k;
}

// `full` (k-tiles of one 128-byte row), and the same in 64-byte rows where `half_rows`.
std::vector<Schedule> tma_rows(const Schedule& full, bool half_rows) {
  std::vector<Schedule> out = {full};
  if (half_rows) {
    out.push_back(full);
    out.back().block_k /= 2;
  }
  return out;
}

// A persistent kernel's CTAs: as many as are resident on the device at once.
int persistent_ctas(const Contraction& c, const Schedule& s, const device::DeviceInfo& device) {
  const int regs = std::min(estimate_regs(c, s), 255);
  return device.sm_count * resident_ctas(device, s.threads(), regs, smem_bytes(c, s));
}

// A halo schedule's CTAs resident per SM, registers counted at 128 per thread (the halo
// kernels' order of magnitude); 0 where the schedule is illegal or does not fit.
int halo_resident(const Contraction& c, const Schedule& s, const device::DeviceInfo& device) {
  if (check_schedule(c, s)) return 0;
  return resident_ctas(device, s.threads(), 128, smem_bytes(c, s));
}

// Legal for the kernels and resident on the device (shared memory, registers).
bool runs(const Contraction& c, const Schedule& s, const device::DeviceInfo& device) {
  if (check_schedule(c, s)) return false;
  const int regs = std::min(estimate_regs(c, s), 255);  // the compiler spills beyond 255
  return resident_ctas(device, s.threads(), regs, smem_bytes(c, s)) >= 1;
}

// The share of the persistent CTAs' tile slots that s's tiles fill over its rounds: 1 where
// every CTA takes as many tiles, 0.5 where the last round has half of them idle.
double wave_fill(const Contraction& c, const Schedule& s, const device::DeviceInfo& device) {
  const int64_t tiles = mn_tiles(c, s);
  const int64_t ctas = persistent_ctas(c, s, device);
  return double(tiles) / double(ceil_div(tiles, ctas) * ctas);
}

// The output elements a persistent CTA of s covers at most: its rounds of tiles times a tile's
// (rows past M and columns past N included: a 256-row tile of 49 pixels is 256 rows of work).
int64_t round_area(const Contraction& c, const Schedule& s, const device::DeviceInfo& device) {
  return ceil_div(mn_tiles(c, s), persistent_ctas(c, s, device)) * s.block_m * s.block_n;
}

// default_large_gemm's 1x1 cases (its comment): s, a cooperative 256-row tile, on c, an int8 1x1
// conv or GEMM of at least 4 k-tiles (a 256x64 then in 4 stages of 128-byte rows) or whose K is
// one 64-byte row (s in 64-byte k-tiles; its tiles filling the SMs twice), where its tiles fill
// the CTAs as well as the ping-pong 128x64's would.
// half_row_k: int8_k_in_half_row(c).
std::optional<Schedule> cooperative_1x1(const Contraction& c, Schedule s, bool half_row_k,
                                        const device::DeviceInfo& device) {
  if (s.block_n == 64 && !half_row_k) s.stages = 4;
  const std::optional<TmaLayout> l = tma_layout(c, s);
  if (!l || l->taps != 1 || !runs(c, s, device)) return std::nullopt;
  if (half_row_k ? mn_tiles(c, s) < 2 * int64_t{device.sm_count} : c.k < 4 * s.block_k)
    return std::nullopt;
  Schedule ping_pong = tma_schedule(128, 64, 5, s.raster, 0);
  ping_pong.block_k = s.block_k;
  if (!runs(c, ping_pong, device) || wave_fill(c, s, device) < wave_fill(c, ping_pong, device) ||
      round_area(c, s, device) > round_area(c, ping_pong, device))
    return std::nullopt;
  return s;
}

// A large 16-bit GEMM (A a plain matrix: a GEMM or a 1x1 stride-1 conv) whose 128x256 tiles
// fill the SMs at least twice over a K of at least 32 k-tiles takes the TMA kernel's cooperative
// 128x256 tile (both consumer warpgroups on each tile, 64 rows each): half the operand bytes
// per multiply of a 128x128 tile, where the mainloop, not the epilogue or the grid's last
// wave, is the time. H200, 2026-11-29 (bench-op, NN: B read MN-major), 4096^3: 191.8 us
// against 208-212 for the ping-pong 128x128 and the cooperative 256x128 and 128x128, and 183.1
// for cuBLASLt; 8192^3: 1752 against the ping-pong's 1815 (cuBLASLt 1637). The learned ranking
// has no measured class for it (tune's logs with it: bench/tune_data/checks/h200_2026-11-29c.*;
// refitted with them, the ranking put it on ConvNeXt-B's GEMMs, 8% slower).
//
// int8: the cooperative 256x128 tile (k-tiles of 128 channels) on a GEMM or a 1x1 conv (strided
// too) whose tiles fill the SMs twice, N wasting at most an eighth of them, whatever K: there the
// mainloop is a few k-tiles, and a tile's epilogue and the next one's loads are the time, which
// the persistent kernel overlaps and the mma.sync defaults do not. H200, 2026-11-29, ResNet-50's
// batch-32 1x1 convs (bench-op --int8, operands from DRAM, default -> 256x128; cuDNN int8 in
// brackets): 56x56 256 -> 128 22.9 -> 16.6 us (16.7), 28x28 128 -> 512 15.6 -> 12.1 (16.0), the
// 256 -> 512 stride-2 downsample 20.9 -> 14.1 (15.6), 56x56 64 -> 256 22.6 -> 21.7 (29.7). With
// fewer tiles it loses (28x28 512 -> 128, 98 tiles: 8.6 -> 10.1 us), as on 64-wide outputs
// (56x56 64 -> 64: 9.3 -> 11.7). Whole models (onnxruntime's QDQ): ResNet-50 batch 32 0.789 ->
// 0.748 ms and ResNeXt-50 1.062 -> 0.973 (before the strided 1x1 convs joined), ResNet-50 batch
// 256 4.936 -> 4.424, DenseNet-121 batch 32 1.486 -> 1.458. The int8 fit of the learned
// ranking, given a 90-second tune of ResNet-50 that measured these classes
// (bench/tune_data/checks/h200_2026-11-29d.*), still ranks mma.sync first there: its estimate
// charges every tile the epilogue's time.
//
// An int8 1x1 conv or GEMM that the 256x128 tile cannot take (fewer than twice the SMs' tiles, or
// 64 output channels, which 128-wide tiles would half waste) takes the ping-pong 128x64 tile in 5
// stages on the same terms, with K of at least one 128-channel k-tile. Tune logs of ResNet-50,
// DenseNet-121 and ResNeXt-50 int8 at batch 32 (H200, 2026-11-29/30, bench/tune_data/checks), on
// the 1x1 convs whose 128x64 tiles fill the SMs twice: 128x64 s5 against the ranked default, us:
// 56x56 256 -> 64 7.6 against 13.1 (mma.sync 128x64; five logs agree), 28x28 512 -> 128 5.9
// against 6.7 (TMA 64x128 s7), 28x28 512 -> 256 9.2 / 10.2, 14x14 256 -> 1024 7.4 / 8.0 and with
// the residual 9.8 / 10.2, 7x7 512 -> 2048 6.8 / 8.3, the 1024 -> 2048 stride-2 downsample with
// the residual 12.7 / 14.0, DenseNet-121's 28x28 128-output convs over 128 to 480 channels 5.0-6.6
// against 5.8-8.5, ResNeXt-50's 10.3 / 11.1 and 10.2 / 10.8; slower on one shape only, 14x14
// 1024 -> 512 (8.2 against 8.0 us, the same in three logs). Not over K of less than a k-tile
// (56x56 64 -> 64: mma.sync 7.0 us), nor over 24 or 32 channels (MobileNet-v2's 56x56 144 -> 24:
// 18.2 against 10.5), nor a conv of several taps (the ranking's).
//
// An int8 conv of several taps into outputs that 128-wide tiles would waste (64 or 192
// channels) takes the cooperative 256x64 tile in 6 stages, on the same terms (its tiles fill the
// SMs twice), in 64-byte k-tiles where the taps' channels leave half rows: B's k-tile serves
// 256 rows instead of the ping-pong 128x64's 128. Tune log of ResNet-50 int8 at batch 32 (H200,
// 2026-11-30, bench/tune_data/checks/h200_2026-11-30d.*), 56x56 64 -> 64 3x3 (392 tiles):
// 256x64 in 4, 5, 6 or 8 stages 12.2-12.8 us, every ping-pong 128x64 (the ranked default s7
// 15.3) 14.2-15.3. In the models (tessel profile, the ranked 128x64 s7 -> this): ResNet-50 int8
// 14.4-15.9 -> 11.9-12.2 us at batch 32, 105-118 -> 90-94 at batch 256; ResNet-18 int8 (uint8
// activations, a residual, an f16 output among them) 14.7-18.9 -> 11.8-18.0 and 106-131 ->
// 85-103 (one of four 134.5 -> 136.2). Not on 1x1 convs: 56x56 256 -> 64 7.7 on the 128x64
// against 8.0. Nor where a tap's channels leave zeros in its k-tiles: Inception-v3 int8's
// 147x147 32 -> 64 3x3 (32 channels in 64-byte rows) took 131 us against mma.sync's 82.
//
// An int8 1x1 conv or GEMM of at least 4 k-tiles takes a cooperative 256-row tile where its
// tiles fill the persistent CTAs' rounds at least as well as the ping-pong 128x64's (wave_fill):
// the 256x128 where they number fewer than twice the SMs (more take it above, whatever K), else
// the 256x64 in 4 stages (the most that fit in 128-byte rows), and where a CTA's rounds of them
// cover no more outputs than its rounds of 128x64 tiles (round_area). A 256-row tile reads B once
// for 256 rows, and where its rounds are as full it loses nothing to the smaller tile. Tune logs of
// ResNet-50 int8 at batch 32 (H200, 2026-11-30, bench/tune_data/checks/h200_2026-11-30d/e.*),
// against the 128x64 rule's tile, us: 7x7 512 -> 2048 (K 512) 6.2 / 7.0 (112 tiles, fill 0.85,
// against 416, 0.79), with a residual 7.5 / 8.2-8.6 and 9.4-9.6 / 10.2-10.3, the 1024 -> 2048
// stride-2 downsample (K 1024, a residual) 10.0 / 11.6-12.0; on the 256x64, 14x14 1024 -> 256
// (K 1024, 100 tiles, 0.76, against 196, 0.74) 5.3-5.5 / 6.0-6.1 (the ranked 64x128), 28x28
// 512 -> 256 (K 512, 392 tiles against 784, both 0.99) 8.6-8.7 / 9.1-9.2. Where the 256-row
// tiles fill less it loses: 14x14 1024 -> 512 on the 256x128 (100 tiles, 0.76, against 392,
// 0.99) 8.4-8.5 / 8.1-8.2. Not below 4 k-tiles: 56x56 256 -> 64 (K 256) 8.0 on the 256x64 / 7.7.
//
// An int8 1x1 conv or GEMM whose whole K is one 64-byte row, more than half of it data
// (int8_k_in_half_row: 33 to 64 channels), takes the cooperative 256-row tiles in 64-byte
// k-tiles: the 256x128 where N is a multiple of 128 and its tiles fill the SMs twice, as above,
// else the 256x64 in 6 stages where its tiles fill the SMs twice and the CTAs' rounds as the
// 128x64's would (the 1x1 case above). A 128-byte k-tile multiplies as many zeros as products and
// moves as many zero bytes. H200, 2026-11-30, bench-op --int8 (scale, bias, ReLU, int8 out;
// 128-byte rows -> 64-byte rows), us: 56x56 64 -> 256 16.8 -> 15.0 at batch 32, 101.1 -> 92.1 at
// batch 256; 56x56 64 -> 64 (mma.sync 256x32 before) 9.0 -> 6.4 and 48.3 -> 35.7 (the ping-pong
// 128x64 in 64-byte rows 7.2 and 39.4, the 64x64 9.0 and 52.0). In the models (tessel profile):
// ResNet-50 int8's layer-1 1x1 convs 1.0-1.7 us faster each at batch 32, 1.3-12.9 at 256, its
// batch-8 64 -> 256 convs (392 tiles of 256x64) 10.9 -> 7.8; without the fill condition
// MobileNet-v2 int8's 14x14 64 -> 384 at batch 64 (294 tiles of 256x64, fill 0.74, against the
// 128x64's 588, 0.89) went from mma.sync's 6.6 us to 10.9.
std::optional<Schedule> default_large_gemm(const Contraction& c, const device::DeviceInfo& device) {
  if (!has_wgmma(device)) return std::nullopt;
  const bool int8 = contraction::int8_operands(c);
  const int raster = tma_raster(c, device);
  // An int8 contraction's candidates: the cooperative 256x128, the cooperative 256x64 (convs of
  // several taps), then the ping-pong 128x64 (1x1 convs and GEMMs).
  std::vector<Schedule> tiles = {int8 ? tma_schedule(256, 128, 3, raster, 0, /*cooperative=*/true)
                                      : tma_schedule(128, 256, 3, raster, 0, /*cooperative=*/true)};
  if (int8) {
    tiles.push_back(tma_schedule(256, 64, 6, raster, 0, /*cooperative=*/true));
    tiles.push_back(tma_schedule(128, 64, 5, raster, 0));
  }
  const bool half_rows = tma_half_rows(c, /*taps_only=*/true);
  const bool half_row_k = int8_k_in_half_row(c);
  for (Schedule s : tiles) {
    s.block_k *= block_k_scale(c);
    const bool wide_coop = s.block_m == 256 && s.block_n == 64;
    if ((wide_coop && half_rows) || (s.block_m == 256 && half_row_k)) s.block_k /= 2;
    const bool few_tiles = mn_tiles(c, s) < 2 * int64_t{device.sm_count};
    const std::optional<Schedule> one_by_one = int8 && s.block_m == 256 && (few_tiles || wide_coop)
                                                   ? cooperative_1x1(c, s, half_row_k, device)
                                                   : std::nullopt;
    if (one_by_one) s = *one_by_one;
    const std::optional<TmaLayout> l = tma_layout(c, s);
    // int8 also takes a conv gathered by the im2col map: a strided 1x1 (a downsample), and on
    // the 256x128 tile a windowed one, where its tiles fill the SMs twice as for a GEMM (tune,
    // ResNet-50 int8 at batch 256, H200, 2026-11-30: the 3x3 convs 28x28 128 -> 128 48.9
    // against the ranked ping-pong 64x128's 55.3 us, its stride-2 one 51.9 / 55.9, 14x14 256 ->
    // 256 39.2 / 46.5, stride 2 44.1 / 48.5; at batch 32 their tiles fill the SMs less than
    // twice and the ranking keeps them).
    if (!l || (l->a_im2col && !int8) || (few_tiles && !one_by_one) || !runs(c, s, device)) continue;
    if (int8 ? ceil_div(c.n, s.block_n) * s.block_n * 8 > 9 * c.n : l->taps * l->chunks < 32)
      continue;
    if (wide_coop && !one_by_one &&
        (l->taps == 1 || c.n % 128 == 0 || l->channels % s.block_k != 0))
      continue;
    if (int8 && !wide_coop && s.block_n == 64 && (l->taps != 1 || c.k < s.block_k)) continue;
    s.ctas = persistent_ctas(c, s, device);
    return s;
  }
  return std::nullopt;
}

// An int8 conv of several taps over a long K (16 k-tiles or more: the mainloop is the time)
// whose ping-pong 64x128 tiles, the ranking's usual pick there, take more than one wave of the
// SMs and at most two, while 128x128 tiles fit one: the ping-pong 128x128 in 4 stages. The
// second wave of 64x128 tiles is the first one's length on a few SMs, and a 128x128 tile reads
// B once for 128 rows, not 64. Tune log of ResNet-50 int8 at batch 32 (H200, 2026-11-30,
// bench/tune_data/checks/h200_2026-11-30d.*), 14x14 256 -> 256 3x3 and its stride-2 form (18
// k-tiles; 196 tiles of 64x128, 98 of 128x128): 8.7 us against the ranked 64x128's 9.9 and 9.7,
// the cooperative 128x128 the same 8.7; in the model 9.9-10.0 -> 8.7 each, and ResNet-18
// int8's three (a residual, an f16 output) 10.3-11.5 -> 8.6-10.9. Not where the 64x128 tiles
// fill the SMs three times (28x28 128 -> 128: 64x128 9.1, 128x128 10.0) or fit one wave (7x7
// 512 -> 512: 100 tiles, 9.5), nor over fewer k-tiles (a 14x14 1x1 1024 -> 512, 8 k-tiles:
// 8.0 against 9.9).
std::optional<Schedule> default_one_wave_window(const Contraction& c, const device::DeviceInfo& device) {
  if (!has_wgmma(device) || !contraction::int8_operands(c)) return std::nullopt;
  const int raster = tma_raster(c, device);
  Schedule wide = tma_schedule(128, 128, 4, raster, 0);
  wide.block_k *= block_k_scale(c);
  const std::optional<TmaLayout> l = tma_layout(c, wide);
  const int64_t sms = device.sm_count;
  const int64_t narrow_tiles = mn_tiles(c, tma_schedule(64, 128, 7, raster, 0));
  if (!l || l->taps < 2 || l->taps * l->chunks < 16 || narrow_tiles <= sms || narrow_tiles > 2 * sms ||
      mn_tiles(c, wide) > sms || !runs(c, wide, device))
    return std::nullopt;
  wide.ctas = persistent_ctas(c, wide, device);
  return wide;
}

// The row-window form of TMA schedule s (Schedule::row_windows) with the most stages that fit,
// at most s's and no fewer than 3 (a stage holds B of a kernel row's taps as well: the 128x64
// tile in 128-byte rows fits 4); s itself where the conv's runs or the device allow none.
Schedule row_window_form(const Contraction& c, const Schedule& s, const device::DeviceInfo& device) {
  Schedule rows = s;
  rows.row_windows = true;
  for (; rows.stages >= 3; --rows.stages)
    if (tma_layout(c, rows) && runs(c, rows, device)) {
      rows.ctas = persistent_ctas(c, rows, device);
      return rows;
    }
  return s;
}

// A 16-bit stride-1 windowed conv whose taps leave their last 128-byte row at most half full
// (tma_half_rows: 32, 96, 160, ... channels; not fewer than 32, whose rows would be mostly
// zeros, as an RGB stem's padded 8) into a multiple of 64 outputs takes the TMA
// kernel's cooperative 256-row tile in 64-byte rows: 256 x 128 where N is a multiple of 128,
// else 256 x 64. The halo kernel took these convs (default_halo yields only 64-channel taps
// to the TMA kernel), and the ranking puts them on the ping-pong 128x64 in half rows, which
// loses to both. H200, 2026-11-29, bench-op (halo kernel with row reuse -> this tile; cuDNN in
// brackets; us): 1440p 32 -> 64 420.2 -> 414.5 (339.6; the ping-pong 128x64 536.6); 720p 32 ->
// 64 112.9 -> 108.8 (91.6); 8 x 256^2 32 -> 64 65.7 -> 59.3 (56.8); 720p 96 -> 64 276.6 -> 250.9
// (277.8; full rows 404.1); 720p 32 -> 128 218.4 -> 139.9 (137.3). In the SR net the 32 -> 64
// conv stores depth_to_space, by bulk stores here and through the slab in the halo kernel:
// 508 -> 458 us. A 32-wide output keeps the halo kernel (1080p 32 -> 32: 127.7 against 233.1),
// as do convs of fewer than 4 tiles per SM (the halo kernel's own bound).
std::optional<Schedule> default_half_row_window(const Contraction& c, const device::DeviceInfo& device,
                                                bool learned) {
  const std::optional<contraction::ConvWindow> w = contraction::conv_window(c);
  if (!learned || !has_wgmma(device) || !w || contraction::int8_operands(c) || c.n % 64 != 0) return std::nullopt;
  if (w->kernel_h * w->kernel_w < 2 || w->stride_h != 1 || w->stride_w != 1 || w->dilation_h != 1 ||
      w->dilation_w != 1 || w->channels % 32 != 0 || !tma_half_rows(c, /*taps_only=*/true))
    return std::nullopt;
  const bool wide = c.n % 128 == 0;
  Schedule s = tma_schedule(256, wide ? 128 : 64, wide ? 4 : 6, tma_raster(c, device), 0, /*cooperative=*/true);
  s.block_k /= 2;  // 64-byte rows
  if (!runs(c, s, device) || mn_tiles(c, s) < 4 * int64_t{device.sm_count}) return std::nullopt;
  // 64 outputs over whole 128-pixel runs: the ping-pong 128x64 in row windows (Schedule::
  // row_windows; bench-op, H200: 1440p 32 -> 64 412.6 -> 398.2 us, 720p 107.2 -> 101.8; the
  // 128-wide tile of 32 -> 128 lost, 139.9 -> 145.6).
  if (!wide) {
    Schedule half = tma_schedule(128, 64, 6, s.raster, 0);
    half.block_k = s.block_k;
    const Schedule rows = row_window_form(c, half, device);
    if (rows.row_windows) return rows;
  }
  s.ctas = persistent_ctas(c, s, device);
  return s;
}

// The ping-pong 128x64 TMA pick over a 16-bit conv in 128-byte rows, with A in row windows
// where the output width is whole 128-pixel runs (Schedule::row_windows): A crosses L2 once per
// kernel row instead of once per tap (the im2col map's 9 boxes of a 3x3 conv held its L2 at
// 69% in Nsight Compute), with the most stages that fit (row_window_form). H200, 2026-11-29,
// bench-op (im2col 7 stages -> row windows 4; cuDNN): the SR net's 720p 64 -> 64 146.8 -> 111.0
// us (141.4), 8 x 256^2 64 -> 64 82.1 -> 63.4 (83.0). Wider tiles gained nothing (128 outputs at 720p: the 128x128 pick 201.7,
// in row windows of 2 stages 222.2; 512^2 128 -> 128: 112.4 against 114.7-129.8), nor a
// 96-channel conv in 128x64 (249.7 in the cooperative half-row tile, 245.5): they keep theirs.
Schedule with_row_windows(const Contraction& c, const Schedule& ranked, const device::DeviceInfo& device) {
  if (ranked.mainloop != Mainloop::kTma || ranked.block_m != 128 || ranked.block_n != 64 ||
      ranked.warp_m != ranked.block_m || ranked.block_k * dtype_size(c.a_dtype) != 128 ||
      contraction::int8_operands(c))
    return ranked;
  return row_window_form(c, ranked, device);
}

void add_family(const Contraction& c, const device::DeviceInfo& device, Instruction instruction,
                Tile cta, Tile warp, int block_k, int stages, std::vector<Schedule>* space) {
  for (int split : kSplitK)
    for (int raster : kRaster) {
      Schedule s = make(instruction, cta, warp, block_k, stages, split, raster, c);
      if (runs(c, s, device)) space->push_back(s);
    }
}

struct Ranked {
  Schedule s;
  double score;  // predicted clocks, launch included
};

// The smallest score; within the tie tolerance of it, the least split-K.
Schedule pick(const std::vector<Ranked>& ranked) {
  double best = std::numeric_limits<double>::infinity();
  for (const Ranked& r : ranked) best = std::min(best, r.score);
  const Ranked* chosen = nullptr;
  for (const Ranked& r : ranked) {
    if (r.score > best * kTieTolerance) continue;
    if (!chosen || std::tie(r.s.split_k, r.score) < std::tie(chosen->s.split_k, chosen->score))
      chosen = &r;
  }
  return chosen->s;
}

}  // namespace

Schedule halo_schedule(const Contraction& c, int tile_h, int tile_w, int warp_m, int warp_n,
                       int ctas, int groups_per_tile) {
  Schedule s;
  s.instruction = Instruction::kMmaSync;
  s.mainloop = Mainloop::kHalo;
  s.tile_w = tile_w;
  s.block_m = tile_h * tile_w;
  s.warp_m = warp_m;
  s.warp_n = warp_n;
  s.groups_per_tile = groups_per_tile;
  std::optional<contraction::ConvWindow> w;
  if (groups_per_tile > 0) {
    w = contraction::grouped_conv_geometry(c);
    s.block_n = w ? groups_per_tile * static_cast<int>(w->out_channels) : 0;
  } else {
    w = contraction::conv_window(c);
    s.block_n = warp_n > 0 ? static_cast<int>((c.n + warp_n - 1) / warp_n * warp_n) : 0;
  }
  s.block_k = w ? halo_k_padded(*w) : 0;
  s.ctas = ctas;
  return s;
}

Schedule tma_schedule(int block_m, int block_n, int stages, int raster, int ctas, bool cooperative) {
  Schedule s;
  s.instruction = Instruction::kWgmma;
  s.mainloop = Mainloop::kTma;
  s.block_m = block_m;
  s.warp_m = cooperative ? block_m / 2 : block_m;
  s.block_n = s.warp_n = block_n;
  s.block_k = 64;
  s.stages = stages;
  s.raster = raster;
  s.ctas = ctas;
  return s;
}

std::optional<Schedule> parse_schedule(const std::string& name, const Contraction& c) {
  int a = 0, b = 0, d = 0, e = 0, f = 0, g = 0, h = 0, i = 0, j = 0, v1 = 8, v2 = 8, used = 0;
  if (std::sscanf(name.c_str(), "halo_%dx%d_n%d_w%dx%d_c%d%n", &a, &b, &d, &e, &f, &g, &used) ==
      6) {
    int groups = 0;
    if (std::sscanf(name.c_str() + used, "_g%d%n", &groups, &j) == 1 && groups > 0) used += j;
    if (used != static_cast<int>(name.size())) return std::nullopt;
    Schedule s = halo_schedule(c, a, b, e, f, g, groups);
    if (s.block_n != d) return std::nullopt;  // the name's N tile must be this problem's
    return s;
  }
  if (std::sscanf(name.c_str(), "tma_%dx%dx%d_s%d_r%d_c%d%n", &a, &b, &d, &e, &i, &g, &used) == 6) {
    // "_w<m>x<n>": the warpgroup tile where it is not the CTA tile (cooperative).
    if (std::sscanf(name.c_str() + used, "_w%dx%d%n", &f, &h, &j) == 2) used += j;
    else f = a, h = b;
    const bool row_windows = name.compare(used, std::string::npos, "_rw") == 0;
    if (row_windows) used += 3;
    if (used != static_cast<int>(name.size())) return std::nullopt;
    Schedule s = tma_schedule(a, b, e, i, g);
    s.row_windows = row_windows;
    s.block_k = d;  // 128 for int8; half of it in 64-byte rows
    s.warp_m = f;
    s.warp_n = h;
    return s;
  }
  char kind[8] = {};
  const int n = std::sscanf(name.c_str(), "%7[a-z]_%dx%dx%d_s%d_w%dx%d_sk%d_r%d%n", kind, &a, &b,
                            &d, &e, &f, &g, &h, &i, &used);
  if (n != 9) return std::nullopt;
  // Optional suffixes, in this order: "_v<a>x<b>" (narrow vectors), "_g<n>" (packed groups).
  if (std::sscanf(name.c_str() + used, "_v%dx%d%n", &v1, &v2, &j) == 2) used += j;
  int groups = 0;
  j = 0;
  if (std::sscanf(name.c_str() + used, "_g%d%n", &groups, &j) == 1) used += j;
  if (used != static_cast<int>(name.size()) || groups < 0) return std::nullopt;
  Schedule s;
  const std::string k = kind;
  if (k == "tc") s.instruction = Instruction::kMmaSync;
  else if (k == "wgmma") s.instruction = Instruction::kWgmma;
  else if (k == "simt") s.instruction = Instruction::kSimt;
  else return std::nullopt;
  s.block_m = a, s.block_n = b, s.block_k = d, s.stages = e, s.warp_m = f, s.warp_n = g;
  s.split_k = h, s.raster = i, s.a_vec = v1, s.b_vec = v2;
  s.groups_per_tile = groups;
  return s;
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
  // At most 4 elements per load: a 16-column K-major tile (or 16-row MN-major one) over 256
  // threads needs 16 * vec rows per pass to fit its 64 (check_schedule's loader rule).
  s.a_vec = std::min(c.a_vec, 4);
  s.b_vec = std::min(c.b_vec, 4);
  return s;
}

std::vector<Schedule> enumerate_schedules(const Contraction& c, const device::DeviceInfo& device) {
  if (!contraction::tensor_core_eligible(c) || device.cc_major < 8) return {simt_schedule(c)};
  std::vector<Schedule> space;
  for (Tile cta : kMmaCtaTiles) {
    for (Tile warp : kMmaWarpTiles) {
      if (cta.m % warp.m != 0 || cta.n % warp.n != 0) continue;
      const int warps = (cta.m / warp.m) * (cta.n / warp.n);
      if (warps < kMinWarps || warps > kMaxWarps) continue;
      for (int block_k : kMmaBlockK)
        for (int stages : kMmaStages)
          add_family(c, device, Instruction::kMmaSync, cta, warp, block_k * block_k_scale(c),
                     stages, &space);
    }
  }
  if (has_wgmma(device)) {
    for (Tile cta : kWgmmaCtaTiles) {
      for (Tile group : kWgmmaGroupTiles) {
        if (cta.m % group.m != 0 || cta.n % group.n != 0) continue;
        if ((cta.m / group.m) * (cta.n / group.n) > kMaxWarpgroups) continue;
        for (int block_k : kWgmmaBlockK)
          for (int stages : kWgmmaStages)
            add_family(c, device, Instruction::kWgmma, cta, group, block_k, stages, &space);
      }
    }
  }
  if (has_wgmma(device)) {
    const bool half_rows = tma_half_rows(c, /*taps_only=*/false);
    // Each warpgroup tile ping-pong (the CTA tile) and cooperative (a CTA tile of twice its rows).
    for (Tile tile : kWgmmaGroupTiles)
      for (bool cooperative : {false, true})
        for (int stages : kTmaStages)
          for (int raster : kRaster) {
            const int block_m = cooperative ? 2 * tile.m : tile.m;
            Schedule full = tma_schedule(block_m, tile.n, stages, raster, 0, cooperative);
            full.block_k *= block_k_scale(c);
            for (Schedule s : tma_rows(full, half_rows)) {
              if (!runs(c, s, device)) continue;
              s.ctas = persistent_ctas(c, s, device);
              space.push_back(s);
              // ... and in row windows, where the conv's runs allow them (Schedule::row_windows;
              // 16-bit: int8 ones are not GPU-tested).
              s.row_windows = true;
              if (contraction::int8_operands(c) || !tma_layout(c, s) || !runs(c, s, device)) continue;
              s.ctas = persistent_ctas(c, s, device);
              space.push_back(s);
            }
          }
  }
  if (space.empty()) return {simt_schedule(c)};
  return space;
}

namespace {

// The halo kernel's pick, where it applies. Measured on an H100 (docs/performance.md, the
// EDSR workloads): it beats the implicit-GEMM kernels 1.2-2.9x on large stride-1 3x3 convs of
// 16-64 input channels (body 64->64 at 720p 191 vs 262 µs, 64->128 356 vs 392 µs, 32->64 at
// 1440p 452 vs 554 µs, 16->3 at 4K 340 vs 1145 µs). Per N tile: N <= 8 (an RGB output) takes
// 32x16-pixel tiles in 8 warps of 64x8 (bandwidth-bound: big tiles re-read less halo), N <= 16
// 16x16 tiles in 4 warps of 64x16, both with several CTAs per SM; N <= 64
// 16x16 tiles in 8 warps of 64x32; wider N 16x16 tiles in 64x32 warps too, 12 of them for 96
// outputs, 16 for 128 (H200, 7x7/2 stems over 224x224x3 at batch 32: 96 outputs 81.9 us, 128
// outputs 104.6; 8x16 tiles in 64x32 warps 92.9 and 110.5). Wider warp tiles spill (the
// kernel rules' accumulator bound). The CTAs are persistent: as many as are resident at once (with
// ~128 registers per thread, the kernels' order of magnitude). Only where the spatial tiles
// are many (>= 4 per SM): below that, the implicit-GEMM kernels' smaller tiles and split-K
// fill the SMs better, and the halo kernel was not measured there; except for a stem reading
// the f32 NCHW input, which only the halo kernel takes on Tensor Cores.
std::optional<Schedule> default_halo(const Contraction& c, const device::DeviceInfo& device,
                                     bool learned) {
  if (device.cc_major < 8 || !contraction::conv_window(c)) return std::nullopt;
  // {N from, N to, tile_h, tile_w, warp_m, warp_n}, in order of preference.
  const int candidates[][6] = {{1, 8, 32, 16, 64, 8},
                               {9, 16, 16, 16, 64, 16},
                               {17, 64, 16, 16, 64, 32},
                               {17, 64, 8, 16, 64, 32},
                               {65, 128, 16, 16, 64, 32},
                               {65, 128, 8, 16, 64, 32}};
  // A 1x1 conv has no halo to share between taps: there the halo kernel is one more GEMM
  // tiling. It measured well for narrow outputs (EfficientNet-b0's 112x112 32->16
  // projection at batch 32: 13.6 µs, 2.8 TB/s) and badly for wide ones (its 16->96
  // expansion: 162.7 µs on the 8x16/n128 tile, 0.55 TB/s), so 1x1 convs of N > 16 rank
  // the implicit-GEMM and TMA kernels instead.
  const std::optional<contraction::ConvWindow> window = contraction::conv_window(c);
  const bool pointwise = window->kernel_h == 1 && window->kernel_w == 1;
  // A stem's f32 NCHW input has no other Tensor Core kernel: the halo kernel however few its
  // tiles and whatever its width wastes (the alternative is SIMT).
  const bool only_tensor_core_path = !contraction::tensor_core_eligible(c);
  // An NHWC stem of a few unpadded channels (fuse drops convert-layout's channel Pad where the
  // halo kernel stages such pixels, halo_tap_pairs) has no other fast path either: the GEMM
  // kernels read it in 2-byte vectors (ResNet's 7x7/2 stem at batch 32 over 224x224x3, H200:
  // 150.0 us against 59.8 on the halo kernel), so a width the halo tiles waste some of does not
  // send it there.
  const bool few_channel_stem =
      !window->nchw_input && window->channels % 8 != 0 && halo_tap_pairs(*window);
  // Where the TMA kernel walks the taps in whole 64-channel chunks, it beat the halo kernel on
  // every such layer tune measured (H200, 2026-11-28: VGG-16's 224x224 and 112x112 3x3 convs of
  // 64 channels at batch 32, 321.6 -> 250.9 and 162.3 -> 96.1 us; the SR net's 720p ones, 206
  // -> 156 and 406 -> 326 us): those outputs of more than 16 channels go to the ranked
  // defaults. With 32 channels per tap (the SR net's 4x-upscaled 3x3 conv) the chunk would be
  // half padding; tune found nothing faster than the halo kernel there.
  const bool tma_takes = learned && has_wgmma(device) && window->channels % 64 == 0 &&
                         runs(c, tma_schedule(128, 64, 7, kTmaDefaultRaster, 0), device);
  for (const auto& [n_from, n_to, th, tw, wm, wn] : candidates) {
    if (pointwise && n_from > 16 && !only_tensor_core_path) continue;
    if (tma_takes && n_from > 16 && !only_tensor_core_path) continue;
    // A width that is no multiple of the tile computes (and discards) the last tile column's
    // pixels past the edge: taken up to 5% of the width (seed_large_32_300_300_64, 300 wide:
    // 583 vs 797 µs for the implicit GEMM). At 14% (ResNet's 56-wide layers) 16x16 tiles still
    // won (30.5 vs 32.9 µs) but 8x16 ones lost (33.2 µs), so such widths keep the GEMM kernels.
    const int64_t out_w = window->out_w;
    const int64_t padded_w = (out_w + tw - 1) / tw * tw;
    if (c.n < n_from || c.n > n_to) continue;
    if ((padded_w - out_w) * 100 > out_w * 5 && !only_tensor_core_path && !few_channel_stem) continue;
    // Persistent CTAs (ctas 1 until resident is known), double-buffered.
    Schedule s = halo_schedule(c, th, tw, wm, wn, 1);
    const int resident = halo_resident(c, s, device);
    const std::optional<HaloLayout> layout = halo_layout(c, s);
    if (resident < 1 || !layout ||
        (layout->tiles < 4 * int64_t{device.sm_count} && !only_tensor_core_path))
      continue;
    s.ctas = resident * device.sm_count;
    return s;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Schedule> packed_groups_schedule(const Contraction& c,
                                               const device::DeviceInfo& device,
                                               std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<Schedule> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
  if (!l) return refuse("not a grouped contraction of channels-last operands");
  if (!contraction::tensor_core_eligible(c) || device.cc_major < 8)
    return refuse("not Tensor Core eligible on this device");
  if (contraction::is_int8_operand(c.a_dtype))
    return refuse("int8 operands: the packed-groups kernel takes f16 or bf16 (the dense mma.sync "
                  "kernel runs the groups as a batch)");
  const int cog = static_cast<int>(l->n_per_group), cig = static_cast<int>(l->ci_padded);
  if (cog % 8 != 0)
    return refuse(std::to_string(cog) + " output channels per group (the packed-groups kernel "
                  "gives each mma n8 fragment one group: a multiple of 8)");
  // A k-tile of whole taps whose row swizzles: 32 columns, or a multiple of 64, up to 128.
  int block_k = 0;
  for (int taps = 1; taps * cig <= std::max(128, cig) && block_k == 0; ++taps)
    if (taps * cig == 32 || (taps * cig) % 64 == 0) block_k = taps * cig;
  if (block_k == 0 || block_k > 128)
    return refuse(std::to_string(l->ci_per_group) + " input channels per group: no k-tile of "
                  "whole taps of 32 or a multiple of 64 columns up to 128");
  // N tile: as many whole groups as fit 64 channels (32 for groups of 8: measured on
  // ResNeXt-50's and RegNet-Y's 8-channel groups at batch 32, 64x32 tiles of 4 groups beat
  // 64x64 tiles of 8 by 1.2x), one group of more, always a multiple of 16 channels (two n8
  // fragments per warp step): the fewest groups that make one where none fits (24 -> 48).
  const int tile_channels = cog == 8 ? 32 : 64;
  int groups_per_tile = 0;
  for (int g = 1; g * cog <= std::max(tile_channels, cog); ++g)
    if ((g * cog) % 16 == 0) groups_per_tile = g;
  for (int g = 1; groups_per_tile == 0 && g * cog <= 128; ++g)
    if ((g * cog) % 16 == 0) groups_per_tile = g;
  const int block_n = groups_per_tile * cog;
  if (groups_per_tile == 0 || block_n > 128)
    return refuse(std::to_string(cog) + " output channels per group (at most 128 in one tile)");
  // Warp tiles: 16 channels for groups of up to 16 (one or two groups of 8), 64 for N tiles of
  // 128, else 32 (a group of 32, half of one of 64); where that does not nest with the groups,
  // the first of 48, 16, 32, 64 that does (two groups of 24).
  const auto nests = [&](int wn) { return block_n % wn == 0 && (wn % cog == 0 || cog % wn == 0); };
  int warp_n = cog <= 16 ? 16 : block_n >= 128 && block_n % 64 == 0 ? 64 : 32;
  if (!nests(warp_n)) {
    warp_n = 0;
    for (int wn : {48, 16, 32, 64})
      if (warp_n == 0 && nests(wn)) warp_n = wn;
  }
  if (warp_n == 0)
    return refuse(std::to_string(cog) + " output channels per group: no warp tile of 16, 32, 48 "
                  "or 64 channels nests with the groups");
  const int warps_n = block_n / warp_n;
  const int64_t n_tiles = (l->groups + groups_per_tile - 1) / groups_per_tile;
  const int a_cols = groups_per_tile * block_k;  // A's shared-memory row: every group's k-tile
  // The largest M tile that still gives every SM two CTAs (the smallest where none does), with
  // at most 16 KiB of A per stage (the layer is memory-bound and its K short: CTAs in flight
  // matter more than reuse); then the deepest pipeline, no deeper than the k-tiles, that keeps
  // two CTAs per SM.
  std::string last = "no M tile of 128, 64 or 32 rows takes its warps";
  std::optional<Schedule> fallback;
  for (int block_m : {128, 64, 32}) {
    // 4 warps where the M tile has 16 rows for each (fewer for a 32-row tile of one warp
    // column), warp tiles of at most 64 rows.
    int warps_m = std::max(1, std::min(4 / warps_n, block_m / 16));
    while (block_m / warps_m > 64) warps_m *= 2;
    const int warp_m = block_m / warps_m;
    if (warp_m < 16 || warp_m % 16 != 0 || warps_m * warps_n > 8) continue;
    if (block_m > 32 && block_m * a_cols * 2 > 16 * 1024) continue;
    const int64_t ctas = n_tiles * ((c.m + block_m - 1) / block_m);
    if (block_m > 32 && ctas < 2 * int64_t{device.sm_count}) continue;
    const int64_t k = l->k_per_group / l->ci_per_group * l->ci_padded;  // the kernel's K
    const int64_t k_tiles = (k + block_k - 1) / block_k;
    // Narrower B vectors where an N tile of 48 rows does not split evenly over the threads.
    for (int b_vec : {8, 4}) {
      for (int stages : {4, 3, 2}) {
        if (stages > std::max<int64_t>(2, k_tiles)) continue;
        Schedule s = make(Instruction::kMmaSync, {block_m, block_n}, {warp_m, warp_n}, block_k,
                          stages, 1, kDefaultRaster, c);
        s.groups_per_tile = groups_per_tile;
        s.b_vec = std::min(s.b_vec, b_vec);
        if (std::optional<std::string> r = check_schedule(c, s)) {
          last = *r;
          continue;
        }
        if (!runs(c, s, device)) {
          last = "does not fit the SM";
          continue;
        }
        if (resident_ctas(device, s.threads(), 128, smem_bytes(c, s)) >= 2) return s;
        if (!fallback) fallback = s;
      }
    }
  }
  if (fallback) return fallback;
  return refuse("no packed-groups schedule fits: " + last);
}

bool dense_groups_wide(const Contraction& c) {
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
  return l && l->n_per_group >= kDenseGroupsMinChannels && l->ci_per_group % 8 == 0;
}

bool runs_groups_as_batch(const Schedule& s) { return s.instruction == Instruction::kMmaSync; }

// The grouped halo kernel's warp tile width for groups of `cog` output channels: 16 for groups
// of 8 or 16, 32 for multiples of 32, else one group of a multiple of 16 or two (24 -> 48).
namespace {
int grouped_warp_n(int cog) {
  return cog <= 16 ? 16 : cog % 32 == 0 ? 32 : cog % 16 == 0 ? cog : 2 * cog;
}
}  // namespace

std::optional<Schedule> grouped_halo_schedule(const Contraction& c,
                                              const device::DeviceInfo& device) {
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
  const std::optional<contraction::ConvWindow> w = contraction::grouped_conv_geometry(c);
  if (!l || !w || device.cc_major < 8 || !contraction::tensor_core_eligible(c) ||
      contraction::is_int8_operand(c.a_dtype))
    return std::nullopt;
  const int cog = static_cast<int>(l->n_per_group);
  if (cog % 8 != 0 || w->channels % 8 != 0) return std::nullopt;
  // The N tile: whole groups up to 32 channels (64 for groups wider than 16), at least one
  // group; warp tiles of grouped_warp_n channels.
  const int tile_channels = cog <= 16 ? 32 : 64;
  const int groups_per_tile =
      static_cast<int>(std::min<int64_t>(l->groups, std::max(1, tile_channels / cog)));
  const int warp_n = grouped_warp_n(cog);
  if (warp_n > 64 || (groups_per_tile * cog) % warp_n != 0) return std::nullopt;
  // Strided: a tile's halo is about 4x its outputs, and where a group's K is longer than 72
  // the packed kernel's k-tiles use the SM better (H100, batch 32: ResNeXt's 56x56 stride-2
  // layer of groups of 8, halo 37.2 vs packed 47.3 us; its 28x28 one of groups of 16, 24.6 vs
  // 20.0).
  if ((w->stride_h > 1 || w->stride_w > 1) && w->channels > 8) return std::nullopt;
  // A width that is no multiple of 16 computes the last tile column's pixels past the edge:
  // taken up to 1/7 (56, 28 and 14 wide: 12.5%); 7 wide would waste 56%.
  const int64_t padded_w = (w->out_w + 15) / 16 * 16;
  if ((padded_w - w->out_w) * 7 > w->out_w) return std::nullopt;
  // Output tiles of 8 x 16 pixels (an m16 fragment is 16 pixels of one row) in warp tiles of
  // 32 pixels: 8 warps for two warp columns (ResNeXt's 56x56 groups of 8 at batch 32: 33.2 us,
  // against 38.8 for 4 warps of 64 pixels and 42.9 for 16x16 tiles). An image of at most 16
  // rows, an even number, is one tile high (RegNet-Y's 14x14 groups of 8: 6.0 us, against 6.5
  // to 8.2 for 8-row tiles, whose second row of tiles computes 2 rows of 8).
  const bool one_tile_high = w->out_h <= 16 && w->out_h % 2 == 0;
  // 8 CTAs per SM (more than are resident: the rest start as the first finish), a multiple
  // of the slices; where that covers every tile, each CTA computes one (a single halo buffer).
  auto with_ctas = [&](int tile_h) {
    Schedule s = halo_schedule(c, tile_h, 16, 32, warp_n, 0, groups_per_tile);
    if (const std::optional<HaloLayout> l = halo_layout(c, s))
      s.ctas = static_cast<int>(std::max<int64_t>(1, 8 * int64_t{device.sm_count} / l->slices) *
                                l->slices);
    return s;
  };
  Schedule s = with_ctas(one_tile_high ? static_cast<int>(w->out_h) : 8);
  if (halo_resident(c, s, device) < 1) s = with_ctas(8);
  const int resident = halo_resident(c, s, device);
  const std::optional<HaloLayout> layout = halo_layout(c, s);
  // A work item (slice x tile) for every SM at least (batch 1 keeps the packed kernel's
  // smaller tiles; RegNet-Y's 14x14 groups of 8 at batch 32, 224 items of 14x16: 6.0 us,
  // against 10.8 on the packed kernel).
  if (!layout || resident < 1 || layout->tiles * layout->slices < int64_t{device.sm_count})
    return std::nullopt;
  return s;
}

std::vector<Schedule> grouped_schedules(const Contraction& c, const device::DeviceInfo& device) {
  std::vector<Schedule> out;
  const std::optional<contraction::GroupedLayout> l = contraction::grouped_layout(c);
  if (!l || !contraction::tensor_core_eligible(c) || device.cc_major < 8) return out;
  // The packed kernel's default with other M tiles and pipeline depths.
  if (std::optional<Schedule> packed = packed_groups_schedule(c, device))
    for (int block_m : {32, 64, 128})
      for (int stages : {2, 3, 4}) {
        Schedule s = *packed;
        s.block_m = block_m;
        s.warp_m = std::min(packed->warp_m, block_m);
        s.stages = stages;
        if (runs(c, s, device)) out.push_back(s);
      }
  // The grouped halo kernel: slices of 1 to 8 groups, warp tiles nesting with the groups,
  // output tiles 16 wide and 4 to 16 rows (7 and 14: RegNet's 14x14 and 28x28 images), 2 to 16
  // warps; one CTA per tile. Nearest the default's shape first (8 warps, 128 pixels, 32
  // channels), so that a small --per-layer still tries its neighbours.
  const int cog = static_cast<int>(l->n_per_group);
  std::vector<std::pair<int, Schedule>> halos;
  if (contraction::grouped_conv_geometry(c) && !contraction::is_int8_operand(c.a_dtype)) {
    for (int groups : {1, 2, 4, 8}) {
      if (groups > l->groups || groups * cog > 128) continue;
      for (int warp_n : {8, 16, 32, 48, 64}) {
        if ((groups * cog) % warp_n != 0 || (warp_n % cog != 0 && cog % warp_n != 0)) continue;
        for (int tile_h : {4, 7, 8, 14, 16})
          for (int warp_m : {16, 32, 64}) {
            if ((tile_h * 16) % warp_m != 0) continue;
            const int warps = tile_h * 16 / warp_m * (groups * cog / warp_n);
            if (warps < 2 || warps > 16) continue;
            const Schedule s = halo_schedule(c, tile_h, 16, warp_m, warp_n, 0, groups);
            if (halo_resident(c, s, device) < 1) continue;
            const int distance = 4 * std::abs(warps - 8) + std::abs(tile_h * 16 - 128) / 16 +
                                 std::abs(groups * cog - 32) / 8 +
                                 std::abs(warp_n - grouped_warp_n(cog)) / 8;
            halos.push_back({distance, s});
          }
      }
    }
  }
  std::stable_sort(halos.begin(), halos.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [distance, s] : halos) out.push_back(s);
  return out;
}

Schedule default_schedule(const Contraction& c, const device::DeviceInfo& device,
                          bool mma_sync_only, int64_t epilogue_read_bytes,
                          int epilogue_transcendentals) {
  // On the architecture the learned correction was fitted on, contractions of the dtypes it
  // measured (16-bit; int8 with families of its own) are ranked by it (estimate.h,
  // learned_factor) instead of the table's sm90_scale residuals.
  const bool learned = has_learned_factor(c, device);
  // Before the eligibility test: the halo kernel also takes a stem's f32 NCHW input.
  if (!mma_sync_only) {
    if (std::optional<Schedule> half = default_half_row_window(c, device, learned)) return *half;
    if (std::optional<Schedule> halo = default_halo(c, device, learned)) return *halo;
    if (contraction::grouped_layout(c)) {
      if (std::optional<Schedule> halo = grouped_halo_schedule(c, device)) return *halo;
      if (std::optional<Schedule> packed = packed_groups_schedule(c, device)) return *packed;
    }
  }
  // A grouped conv that no grouped kernel takes: wide groups as a batch of dense GEMMs, on the
  // kernels that run them so (runs_groups_as_batch); narrow ones stay off Tensor Cores.
  const bool dense_groups = contraction::grouped_layout(c).has_value();
  if (dense_groups && !dense_groups_wide(c)) return simt_schedule(c);
  // Whether the ranking may offer schedule s.
  auto offered = [&](const Schedule& s) {
    return !(mma_sync_only && s.instruction != Instruction::kMmaSync) &&
           !(dense_groups && !runs_groups_as_batch(s));
  };
  if (!contraction::tensor_core_eligible(c) || device.cc_major < 8) return simt_schedule(c);
  if (!mma_sync_only && !dense_groups) {
    if (std::optional<Schedule> large = default_large_gemm(c, device)) return *large;
    if (std::optional<Schedule> wave = default_one_wave_window(c, device)) return *wave;
  }
  const double launch = launch_cycles(device);
  const bool hopper = device.cc_major == 9;
  auto split_wanted = [&](const Schedule& s) {
    return s.split_k == 1 ||
           (mn_tiles(c, s) < device.sm_count && c.k / s.split_k >= kMinSplitKDepth);
  };
  // A candidate's score in clocks. The table's residual scales the kernel's own time, not the
  // DRAM bound under it. The learned correction was fitted to whole measured times against
  // estimates without the epilogue's reads (tune's log, its residual term standing for them):
  // it scales those, with no floor. A floor is the same for every candidate of a contraction
  // (its unique bytes), so it only ties them: ResNet-50's layer-1 residual 1x1 convs, whose
  // DRAM bound with the residual (34.8 us) is above every learned score, went to the first
  // kernel of the table among the ties (mma.sync 128x128, 51.4 us; TMA 64x256, 37.4).
  auto score = [&](const Schedule& s, double sm90_scale) {
    if (learned) {
      const double clock = arch_facts(device).clock_mhz;  // clocks per microsecond
      return tuning_rank(c, s, device, epilogue_read_bytes, epilogue_transcendentals) * clock;
    }
    const ScheduleEstimate e = estimate(c, s, device, epilogue_read_bytes);
    return launch + std::max(sm90_scale * e.cycles, e.dram_cycles);
  };
  std::vector<Ranked> ranked;
  for (const DefaultKernel& k : kDefaultKernels) {
    if (k.instruction == Instruction::kWgmma && (mma_sync_only || !has_wgmma(device))) continue;
    if (k.sm90_scale == 0 && !learned) continue;
    // int8: the mma.sync configurations with block_k doubled (their sm90_scale residuals, used
    // where no learned correction ranks them, were fitted on f16 kernels). The cp.async wgmma
    // kernel takes no int8 (rules); the TMA one does.
    const int block_k =
        k.instruction == Instruction::kMmaSync ? k.block_k * block_k_scale(c) : k.block_k;
    for (int split : kSplitK) {
      Schedule s = make(k.instruction, {k.block_m, k.block_n}, {k.warp_m, k.warp_n}, block_k,
                        k.stages, split, kDefaultRaster, c);
      if (!offered(s) || !split_wanted(s) || !runs(c, s, device)) continue;
      ranked.push_back({s, score(s, hopper ? k.sm90_scale : 1.0)});
    }
  }
  if (!mma_sync_only && has_wgmma(device)) {
    const bool half_rows = tma_half_rows(c, /*taps_only=*/true);
    const int raster = tma_raster(c, device);
    for (const TmaKernel& k : kTmaKernels) {
      Schedule full = tma_schedule(k.block_m, k.block_n, k.stages, raster, 0);
      full.block_k *= block_k_scale(c);  // one 128-byte row: 128 int8
      for (Schedule s : tma_rows(full, half_rows)) {
        if (!offered(s) || !runs(c, s, device)) continue;
        s.ctas = persistent_ctas(c, s, device);
        ranked.push_back({s, score(s, k.sm90_scale)});
      }
    }
  }
  if (ranked.empty()) {
    // A device too small for every default kernel: rank the whole space.
    const std::vector<Schedule> space = enumerate_schedules(c, device);
    if (space.front().instruction == Instruction::kSimt) return space.front();
    for (const Schedule& s : space)
      if (s.raster == kDefaultRaster && split_wanted(s) && offered(s))
        ranked.push_back({s, launch + estimate(c, s, device, epilogue_read_bytes).cycles});
  }
  return with_row_windows(c, pick(ranked), device);
}

}  // namespace tessel::kernels
