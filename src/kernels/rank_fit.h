// The order in which `tessel tune` measures candidates (kernels::rank_factor), written by
// bench/rank_fit.py: do not edit. ln(measured / estimate) per schedule class, shrunk by
// k / (k + 3) and centred, fitted to 2377 measurements of 34 contractions.
// Measured on an NVIDIA H200 (driver 580.159.04) on 2026-11-28 by tessel tune on torchvision
// models at batch 32: ResNet-50 (--budget 5m, the cost model's order of f1747b1; its estimate_us
// added afterwards by that commit's cost model for an H100's table row, sm_90, 132 SMs) and
// ResNeXt-50 32x4d (--budget 150s, the learned order of 78767c8 fitted on ResNet-50 alone). Logs
// in bench/tune_data.
#pragma once

namespace tessel::kernels::rank_fit {

constexpr int kCcMajor = 9;  // the measured GPU's: other architectures keep the estimate's order
struct ClassFactor {
  const char* schedule_class;  // kernels::rank_class
  double ln_factor;
  int measurements;
};
constexpr ClassFactor kClasses[] = {
    {"halo_16x16_n64", -0.0744756, 1},
    {"simt_64x64x16_s2", -0.00315943, 1},
    {"tc_128x128x128_s2", 0.00939681, 64},
    {"tc_128x128x128_s3", 0.0319289, 63},
    {"tc_128x128x32_s2", 0.144971, 16},
    {"tc_128x128x32_s3", -0.0184805, 31},
    {"tc_128x128x32_s4", -0.0184619, 29},
    {"tc_128x128x32_s5", -0.014086, 24},
    {"tc_128x128x64_s2", -0.000698264, 70},
    {"tc_128x128x64_s3", -0.00823621, 72},
    {"tc_128x128x64_s4", -0.00708782, 42},
    {"tc_128x128x64_s5", -0.0059451, 44},
    {"tc_128x256x128_s2", 0.00392435, 6},
    {"tc_128x256x64_s2", -0.0325021, 18},
    {"tc_128x256x64_s3", -0.103763, 20},
    {"tc_128x256x64_s4", -0.0950158, 20},
    {"tc_128x64x128_s2", 0.0388912, 20},
    {"tc_128x64x128_s3", 0.0712829, 8},
    {"tc_128x64x128_s4", 0.0557053, 8},
    {"tc_128x64x32_s2", -0.0120401, 58},
    {"tc_128x64x32_s3", -0.0924814, 114},
    {"tc_128x64x32_s4", -0.0887571, 99},
    {"tc_128x64x32_s5", 0.00387602, 54},
    {"tc_128x64x64_s2", 0.00554655, 58},
    {"tc_128x64x64_s3", -0.0432896, 88},
    {"tc_128x64x64_s4", 0.0295498, 40},
    {"tc_128x64x64_s5", 0.0540749, 10},
    {"tc_256x128x128_s2", 0.0902213, 8},
    {"tc_256x128x32_s2", 0.0481861, 4},
    {"tc_256x128x32_s3", 0.0322135, 6},
    {"tc_256x128x32_s4", -0.00465968, 2},
    {"tc_256x128x32_s5", -0.00862431, 2},
    {"tc_256x128x64_s2", -0.0136396, 14},
    {"tc_256x128x64_s3", -0.0762239, 24},
    {"tc_256x128x64_s4", -0.0690603, 24},
    {"tc_32x32x128_s2", 0.141296, 8},
    {"tc_32x32x128_s3", 0.0667412, 8},
    {"tc_32x32x128_s4", 0.08475, 8},
    {"tc_32x32x128_s5", 0.148048, 8},
    {"tc_32x32x64_s2", 0.188739, 4},
    {"tc_32x32x64_s3", 0.076233, 4},
    {"tc_32x32x64_s4", 0.0516989, 4},
    {"tc_32x32x64_s5", 0.0436611, 4},
    {"tc_64x128x128_s2", 0.0360672, 6},
    {"tc_64x128x128_s3", 0.0355105, 6},
    {"tc_64x128x128_s4", 0.0365434, 6},
    {"tc_64x128x32_s2", -0.00248669, 18},
    {"tc_64x128x32_s3", -0.0355343, 24},
    {"tc_64x128x32_s4", -0.115276, 35},
    {"tc_64x128x32_s5", -0.00164827, 16},
    {"tc_64x128x64_s2", 0.10911, 21},
    {"tc_64x128x64_s3", -0.0101174, 20},
    {"tc_64x128x64_s4", 0.06304, 6},
    {"tc_64x128x64_s5", 0.0255051, 6},
    {"tc_64x64x32_s4", 0.0706276, 2},
    {"tc_64x64x64_s2", 0.0461871, 2},
    {"tc_64x64x64_s3", -0.00405764, 8},
    {"tc_64x64x64_s5", 0.0661992, 2},
    {"tma_128x128x64_s3", -0.251658, 52},
    {"tma_128x128x64_s4", -0.310732, 52},
    {"tma_128x128x64_s5", -0.233435, 52},
    {"tma_128x64x64_s3", -0.198118, 4},
    {"tma_128x64x64_s4", -0.375446, 12},
    {"tma_128x64x64_s5", -0.412678, 16},
    {"tma_128x64x64_s6", -0.249596, 3},
    {"tma_128x64x64_s7", -0.222009, 2},
    {"tma_64x128x64_s7", -0.460541, 7},
    {"tma_64x256x64_s3", -0.452135, 38},
    {"tma_64x256x64_s4", -0.485955, 38},
    {"tma_64x64x64_s8", -0.296612, 3},
    {"wgmma_128x128x128_s3", 0.0975432, 66},
    {"wgmma_128x128x64_s3", 0.168613, 153},
    {"wgmma_128x128x64_s4", 0.00278384, 104},
    {"wgmma_128x128x64_s5", -0.00172824, 106},
    {"wgmma_128x256x64_s3", 0.156372, 44},
    {"wgmma_128x256x64_s4", 0.107544, 56},
    {"wgmma_128x64x128_s3", 0.0835134, 8},
    {"wgmma_128x64x128_s4", -0.0226525, 12},
    {"wgmma_128x64x64_s3", 0.0923582, 29},
    {"wgmma_128x64x64_s4", 0.00481264, 16},
    {"wgmma_128x64x64_s5", 0.00668919, 12},
    {"wgmma_256x128x64_s3", 0.170969, 28},
    {"wgmma_256x128x64_s4", 0.122798, 38},
    {"wgmma_64x128x128_s3", 0.006091, 2},
    {"wgmma_64x128x128_s4", -0.0619551, 2},
    {"wgmma_64x128x64_s3", 0.00907555, 10},
    {"wgmma_64x128x64_s4", 0.234496, 20},
    {"wgmma_64x128x64_s5", -0.0671935, 3},
    {"wgmma_64x64x64_s3", 0.0550062, 1},
};

}  // namespace tessel::kernels::rank_fit
