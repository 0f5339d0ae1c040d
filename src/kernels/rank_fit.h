// The order in which `tessel tune` measures candidates (kernels::rank_factor), written by
// bench/rank_fit.py: do not edit. ln(measured / estimate) per schedule class, shrunk by
// k / (k + 3) and centred, fitted to 1471 measurements of 23 contractions.
// Measured on an NVIDIA H200 (driver 580.159.04) on 2026-11-28 by tessel tune --budget 5m on
// torchvision ResNet-50 at batch 32 (bench/tune_data/h200_2026-11-28.resnet50_b32.jsonl.gz; its
// estimate_us added afterwards by the cost model of f1747b1 for an H100's table row, sm_90, 132
// SMs).
#pragma once

namespace tessel::kernels::rank_fit {

constexpr int kCcMajor = 9;  // the measured GPU's: other architectures keep the estimate's order
struct ClassFactor {
  const char* schedule_class;  // kernels::rank_class
  double ln_factor;
  int measurements;
};
constexpr ClassFactor kClasses[] = {
    {"tc_128x128x128_s2", 0.00598735, 44},
    {"tc_128x128x128_s3", 0.0237011, 43},
    {"tc_128x128x32_s2", 0.147602, 16},
    {"tc_128x128x32_s3", -0.0265081, 17},
    {"tc_128x128x32_s4", -0.0228621, 15},
    {"tc_128x128x32_s5", -0.0238883, 10},
    {"tc_128x128x64_s2", -0.00567001, 36},
    {"tc_128x128x64_s3", -0.0176903, 36},
    {"tc_128x128x64_s4", -0.00447521, 24},
    {"tc_128x128x64_s5", -0.00545426, 24},
    {"tc_128x256x128_s2", 0.00600741, 6},
    {"tc_128x256x64_s2", -0.0640435, 6},
    {"tc_128x256x64_s3", -0.0938259, 6},
    {"tc_128x256x64_s4", -0.0895566, 6},
    {"tc_128x64x128_s2", 0.0416082, 20},
    {"tc_128x64x128_s3", 0.0735553, 8},
    {"tc_128x64x128_s4", 0.0579777, 8},
    {"tc_128x64x32_s2", -0.00906922, 58},
    {"tc_128x64x32_s3", -0.0820727, 58},
    {"tc_128x64x32_s4", -0.0746635, 57},
    {"tc_128x64x32_s5", 0.00683616, 54},
    {"tc_128x64x64_s2", 0.00851748, 58},
    {"tc_128x64x64_s3", -0.036591, 60},
    {"tc_128x64x64_s4", 0.0324564, 40},
    {"tc_128x64x64_s5", 0.0564785, 10},
    {"tc_256x128x128_s2", 0.0924937, 8},
    {"tc_256x128x32_s2", 0.0499716, 4},
    {"tc_256x128x32_s3", -0.0298368, 4},
    {"tc_256x128x32_s4", -0.00340984, 2},
    {"tc_256x128x32_s5", -0.00737447, 2},
    {"tc_256x128x64_s2", -0.026544, 8},
    {"tc_256x128x64_s3", -0.0956306, 8},
    {"tc_256x128x64_s4", -0.0854201, 8},
    {"tc_64x128x128_s2", 0.0381502, 6},
    {"tc_64x128x128_s3", 0.0375935, 6},
    {"tc_64x128x128_s4", 0.0386265, 6},
    {"tc_64x128x32_s2", 0.00019153, 18},
    {"tc_64x128x32_s3", -0.0168984, 16},
    {"tc_64x128x32_s4", -0.0251599, 16},
    {"tc_64x128x32_s5", 0.000982966, 16},
    {"tc_64x128x64_s2", 0.111844, 21},
    {"tc_64x128x64_s3", -0.0074004, 20},
    {"tc_64x128x64_s4", 0.0651231, 6},
    {"tc_64x128x64_s5", 0.0275882, 6},
    {"tc_64x64x32_s4", 0.0718775, 2},
    {"tc_64x64x64_s2", 0.047437, 2},
    {"tc_64x64x64_s3", -0.00178521, 8},
    {"tc_64x64x64_s5", 0.067449, 2},
    {"tma_128x128x64_s3", -0.221425, 20},
    {"tma_128x128x64_s4", -0.287376, 20},
    {"tma_128x128x64_s5", -0.229713, 20},
    {"tma_128x64x64_s3", -0.137358, 2},
    {"tma_128x64x64_s4", -0.177184, 2},
    {"tma_128x64x64_s5", -0.18373, 2},
    {"tma_128x64x64_s6", -0.117477, 1},
    {"tma_128x64x64_s7", -0.220759, 2},
    {"tma_64x128x64_s7", -0.435222, 6},
    {"tma_64x256x64_s3", -0.37285, 10},
    {"tma_64x256x64_s4", -0.398399, 10},
    {"tma_64x64x64_s8", -0.295049, 3},
    {"wgmma_128x128x128_s3", 0.11687, 58},
    {"wgmma_128x128x64_s3", 0.0561809, 89},
    {"wgmma_128x128x64_s4", -0.026896, 58},
    {"wgmma_128x128x64_s5", -0.0313331, 58},
    {"wgmma_128x256x64_s3", 0.150441, 28},
    {"wgmma_128x256x64_s4", 0.0782344, 28},
    {"wgmma_128x64x128_s3", 0.0857858, 8},
    {"wgmma_128x64x128_s4", -0.0764843, 8},
    {"wgmma_128x64x64_s3", 0.0951898, 29},
    {"wgmma_128x64x64_s4", 0.00744388, 16},
    {"wgmma_128x64x64_s5", 0.00918887, 12},
    {"wgmma_256x128x64_s3", 0.171961, 22},
    {"wgmma_256x128x64_s4", 0.0789274, 22},
    {"wgmma_64x128x128_s3", 0.00734084, 2},
    {"wgmma_64x128x128_s4", -0.0607053, 2},
    {"wgmma_64x128x64_s3", 0.0114791, 10},
    {"wgmma_64x128x64_s4", -0.0710753, 4},
    {"wgmma_64x128x64_s5", -0.0656312, 3},
    {"wgmma_64x64x64_s3", 0.0557874, 1},
};

}  // namespace tessel::kernels::rank_fit
