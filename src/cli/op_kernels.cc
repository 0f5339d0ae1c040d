#include "cli/op_kernels.h"

#include "contraction/ops_maps.h"
#include "core/error.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda_engine/target.h"
#include "tune/default_schedule.h"

namespace tessel::cli {

contraction::IndexMaps conv_maps(const bench::ConvWorkload& w) {
  contraction::Conv2dParams p;
  p.n = w.n;
  p.h = w.h;
  p.w = w.w;
  p.ci = w.ci;
  p.co = w.co;
  p.kh = w.kh;
  p.kw = w.kw;
  p.stride_h = p.stride_w = w.stride;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = w.pad;
  p.dilation_h = p.dilation_w = w.dilation;
  p.groups = w.groups;
  TESSEL_USER_CHECK(w.ci % w.groups == 0 && w.co % w.groups == 0)
      << "workload '" << w.name << "': groups=" << w.groups << " does not divide ci=" << w.ci
      << " and co=" << w.co;
  TESSEL_USER_CHECK(w.oh() > 0 && w.ow() > 0)
      << "workload '" << w.name << "': the kernel window does not fit the padded input";
  return contraction::conv2d_nhwc_maps(p);
}

contraction::IndexMaps gemm_maps(const bench::GemmWorkload& w) {
  contraction::GemmLayout layout;
  layout.trans_a = w.layout == bench::GemmLayout::kTN;
  layout.trans_b = w.layout == bench::GemmLayout::kNT;
  return contraction::gemm_maps(w.m, w.n, w.k, layout);
}

OpPlan plan_op(const contraction::IndexMaps& maps, const tune::DeviceInfoLite& device,
               bool allow_tensor_cores) {
  OpPlan plan;
  plan.maps = maps;
  plan.match = contraction::match(maps);
  TESSEL_USER_CHECK(plan.match.contraction)
      << "not a contraction: "
      << (plan.match.remarks.empty() ? std::string("no reason given") : plan.match.remarks[0].text);
  const contraction::Contraction& c = *plan.match.contraction;
  plan.epilogue.out_dtype = maps.c.dtype;
  for (const contraction::Remark& r : plan.match.remarks) plan.notes.push_back(r.text);
  if (!allow_tensor_cores) plan.notes.push_back("Tensor Cores turned off (--no-tensor-cores)");
  plan.tensor_cores = allow_tensor_cores && plan.match.tensor_cores;
  plan.schedule = plan.tensor_cores ? tune::default_schedule(c, device) : tune::simt_schedule(c);
  return plan;
}

tune::DeviceInfoLite target_device(std::string* arch) {
  namespace eng = runtime::cuda_engine;
  const eng::TargetInfo t = runtime::cuda::cuda_available()
                                ? eng::target_of_device(runtime::cuda::device_info(0))
                                : eng::target_for_arch("sm_90a");
  if (arch) *arch = t.arch;
  return t.lite();
}

}  // namespace tessel::cli
