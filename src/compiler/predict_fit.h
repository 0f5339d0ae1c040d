// The predictor's learned correction (compiler/predict.h), written by bench/predictor_fit.py: do
// not edit. Fitted to 2667 kernels of 28 profiles (efficientnet_b4_b1, efficientnet_v2_s_b1,
// efficientnet_v2_s_b8, inception_v3_b1, inception_v3_b32, inception_v3_b8, mnasnet1_0_b1,
// mnasnet1_0_b32, mobilenet_v2_b1, mobilenet_v2_b32, mobilenet_v2_b8, mobilenet_v3_small_b1,
// mobilenet_v3_small_b32, regnet_x_400mf_b1, regnet_x_400mf_b32, regnet_y_1_6gf_b1,
// regnet_y_1_6gf_b32, resnet50_b1, resnet50_b32, resnet50_b8, shufflenet_v2_x2_0_b1,
// shufflenet_v2_x2_0_b32, squeezenet1_1_b1, squeezenet1_1_b32, sr_net_b1, vgg16_b1, vgg16_b32,
// vgg16_b8), measured on an NVIDIA H200 (driver 580.159.04) on 2026-11-28 by tessel profile
// (bench/predictor_data/h200_2026-11-28.jsonl.gz). ln t = (kShared + the offsets of the kernel's
// group and kind) . x, x as predict.cc's learned_us.
#pragma once

namespace tessel::compiler::fit {

constexpr int kFeatures = 7;  // 1, ln A, ln(bytes/BW), ln(flops/TC), ln(CTAs/SMs), ln(threads/128), smem/64KiB
constexpr double kShared[kFeatures] = {0.367808, 1, -0.161832, 0.0192217, 0.222278, 0.0278189, 0.0681179};
constexpr double kFloorUs = 0.1, kMinWave = 0.03125;  // floors of x[2], x[3] and x[4]'s ratio
constexpr double kMinKernelUs = 1.3;  // the least time predicted for a launch
struct GroupOffset {
  const char* group;
  double w[kFeatures];
};
constexpr GroupOffset kGroups[] = {
    {"halo", {0.310536, 0, -0.153135, 0.148084, 0.40112, 0.630008, -0.0585901}},
    {"mma", {-0.18458, 0, 0.0349224, -0.0475374, -0.147974, -0.259312, -0.0396211}},
    {"op", {0.355025, 0, -0.0199847, 0.176452, -0.187483, 0.0180257, 0}},
    {"simt", {0, 0, 0, 0, 0, 0, 0}},
    {"tma", {-0.469764, 0, 0.0562666, -0.191504, 0.0339391, -0.380946, 0.13204}},
    {"wgmma", {-0.0112179, 0, 0.0819308, -0.0854946, -0.0996018, -0.00777567, -0.033829}},
    {"grouped", {0.225072, 0, 0.215575, 0.209147, -0.476647, -0.388636, -0.225737}},
    {"op:copy", {-0.0536539, 0, -0.178152, 0.123543, 0.114231, -0.0371901, 0}},
    {"op:depthwise_conv", {0.15072, 0, 0.0996046, -0.11945, -0.0758504, 0.0570138, 0}},
    {"op:elementwise", {-0.0388787, 0, -0.0625258, 0.0895216, -0.0135612, -0.0269487, 0}},
    {"op:pool", {0.29672, 0, -0.0637501, 0.0831081, 0.0522912, 0, 0}},
    {"op:reduce_columns", {-0.0109612, 0, 0.179129, 0.0252391, -0.301191, 0.0174715, 0}},
    {"op:transpose2d", {0.0110787, 0, 0.00570934, -0.0255096, 0.0365975, 0.00767916, 0}},
};
// A CUDA graph replay's time beyond its kernels' (each timed alone), per launch: of a
// launch predicted at kSmallKernelUs or more, and of a smaller one.
constexpr double kSmallKernelUs = 3.0;
constexpr double kLaunchGapUs = 0.5108, kSmallLaunchGapUs = -0.0728;

}  // namespace tessel::compiler::fit
