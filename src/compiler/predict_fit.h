// The predictor's learned correction (compiler/predict.h), written by bench/predictor_fit.py: do
// not edit. Fitted to 2907 kernels of 32 profiles (efficientnet_b4_b1, efficientnet_v2_s_b1,
// efficientnet_v2_s_b8, inception_v3_b1, inception_v3_b32, inception_v3_b8, mnasnet1_0_b1,
// mnasnet1_0_b32, mobilenet_v2_b1, mobilenet_v2_b1_int8, mobilenet_v2_b32, mobilenet_v2_b32_int8,
// mobilenet_v2_b8, mobilenet_v3_small_b1, mobilenet_v3_small_b32, regnet_x_400mf_b1,
// regnet_x_400mf_b32, regnet_y_1_6gf_b1, regnet_y_1_6gf_b32, resnet50_b1, resnet50_b1_int8,
// resnet50_b32, resnet50_b32_int8, resnet50_b8, shufflenet_v2_x2_0_b1, shufflenet_v2_x2_0_b32,
// squeezenet1_1_b1, squeezenet1_1_b32, sr_net_b1, vgg16_b1, vgg16_b32, vgg16_b8), measured on an
// NVIDIA H200 by tessel profile: the fp16 runs on 2026-11-28 (driver 580.159.04;
// bench/predictor_data/h200_2026-11-28.jsonl.gz), the int8 ones on 2026-11-29
// (h200_2026-11-29_int8.jsonl.gz). ln t = (kShared + the offsets of the kernel's group and kind) .
// x, x as predict.cc's learned_us.
#pragma once

namespace tessel::compiler::fit {

constexpr int kFeatures = 7;  // 1, ln A, ln(bytes/BW), ln(flops/TC), ln(CTAs/SMs), ln(threads/128), smem/64KiB
constexpr double kShared[kFeatures] = {0.40628, 1, -0.15779, 0.0248394, 0.216743, 0.0430276, 0.0522935};
constexpr double kFloorUs = 0.1, kMinWave = 0.03125;  // floors of x[2], x[3] and x[4]'s ratio
constexpr double kMinKernelUs = 1.3;  // the least time predicted for a launch
struct GroupOffset {
  const char* group;
  double w[kFeatures];
};
constexpr GroupOffset kGroups[] = {
    {"halo", {0.292902, 0, -0.16175, 0.147368, 0.401016, 0.615969, -0.0522486}},
    {"mma", {-0.212096, 0, 0.0295106, -0.0517774, -0.141253, -0.263532, -0.0351674}},
    {"op", {0.385933, 0, -0.000227063, 0.190242, -0.201098, 0.024666, 0}},
    {"simt", {0, 0, 0, 0, 0, 0, 0}},
    {"tma", {-0.454938, 0, 0.0523087, -0.19495, 0.037533, -0.368923, 0.123003}},
    {"wgmma", {-0.011801, 0, 0.0801575, -0.0908824, -0.096199, -0.0081798, -0.0355873}},
    {"grouped", {0.219519, 0, 0.217965, 0.206659, -0.477726, -0.396871, -0.222502}},
    {"mma_i8", {0.163615, 0, 0.00625646, 0.0421935, -0.0324962, 0.0429123, 0.0191396}},
    {"op:copy", {-0.0615657, 0, -0.211094, 0.14176, 0.138553, -0.0426741, 0}},
    {"op:depthwise_conv", {0.185788, 0, 0.0800386, -0.0906889, -0.037413, 0.0876164, 0}},
    {"op:elementwise", {-0.0178927, 0, 0.0735676, 0.0411995, -0.135174, -0.0124023, 0}},
    {"op:pool", {0.285733, 0, -0.0865055, 0.0838576, 0.064153, 0, 0}},
    {"op:reduce_columns", {-0.0123371, 0, 0.157259, 0.0284072, -0.282771, -0.0121769, 0}},
    {"op:transpose2d", {0.00620776, 0, -0.0134925, -0.0142939, 0.051554, 0.00430289, 0}},
    {"tma_i8", {0.322668, 0, 0.132334, -0.0690665, -0.0971396, 0.261661, -0.212186}},
};
// A CUDA graph replay's time beyond its kernels' (each timed alone), per launch: of a
// launch predicted at kSmallKernelUs or more, and of a smaller one.
constexpr double kSmallKernelUs = 3.0;
constexpr double kLaunchGapUs = 0.5006, kSmallLaunchGapUs = -0.0801;

}  // namespace tessel::compiler::fit
