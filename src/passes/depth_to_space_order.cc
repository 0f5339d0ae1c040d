// depth-to-space-dcr: a convolution that stores depth_to_space in CRD order (PyTorch's
// PixelShuffle) computes its output channels in DCR order instead, by permuting its weights
// and bias (and an int8 conv's dequantization scale) once at compile time, and stores DCR.
//
// Both orders put pre-store channel n of pixel (oh, ow) at out[oh*b + i, ow*b + j, c]; they
// differ only in which n: CRD n = c*b^2 + i*b + j, DCR n = (i*b + j)*C + c. With DCR, the C
// channels of one output pixel are consecutive accumulator columns, so the GPU epilogue stores
// them as contiguous vectors; with CRD they are b^2 columns apart, and the epilogue gathers them
// from its staging slab with strided, bank-conflicting reads (~70 µs on each of the SR net's
// two upsampling convs at 720p on an H100). Permuting the constants makes this free.
//
// Applies to tessel.Conv with store = depth_to_space, mode = CRD, constant weights (and bias,
// if any), group 1 (a grouped conv's output channels belong to their group in CRD order; DCR
// would move them into other groups' ranges), and no residual (a residual is read in the
// pre-store layout, which the permutation would change).
#include <algorithm>

#include "ops/tessel_epilogue.h"
#include "passes/passes.h"
#include "passes/rewrite_util.h"

namespace tessel::passes {
namespace {

// Permutes the outermost dim of `t` (output channels, of weights [Co, ...] or bias [Co]):
// row `to(n)` of the result is row n of `t`.
template <typename To>
Tensor permute_rows(const Tensor& t, To to) {
  Tensor r(t.dtype(), t.shape());
  const int64_t rows = t.shape().at(0);
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(rows);
  for (int64_t n = 0; n < rows; ++n)
    std::copy_n(t.raw() + n * row_bytes, row_bytes, r.raw() + to(n) * row_bytes);
  return r;
}

}  // namespace

ir::Graph depth_to_space_dcr(ir::Graph g) {
  UniqueNames names = UniqueNames::of_values(g);
  for (ir::Node& n : g.nodes) {
    if (n.op != "tessel.Conv") continue;
    ops::StoreMap store = ops::read_store(n);
    if (store.kind != ops::StoreMap::Kind::kDepthToSpace || store.dcr) continue;
    if (n.get_int("group", 1) != 1) continue;
    bool residual = false;
    for (const ops::EpilogueStep& s : ops::read_epilogue(n))
      residual |= s.kind == ops::EpilogueKind::kAddResidual || s.kind == ops::EpilogueKind::kAddScaledResidual;
    // The per-channel constants: W, B and (int8) the dequantization scale S.
    auto has = [&](size_t i) { return n.inputs.size() > i && n.inputs[i] != ir::kNoValue; };
    const bool constants = g.value(n.inputs[1]).is_constant() &&
                           (!has(2) || g.value(n.inputs[2]).is_constant()) &&
                           (!has(4) || g.value(n.inputs[4]).is_constant());
    if (residual || !constants) continue;
    const int64_t b2 = store.block * store.block;
    const int64_t co = g.value(n.inputs[1]).data->shape().at(0);
    const int64_t c = co / b2;  // read_store's stored_shape already checked co % b2 == 0
    // CRD channel n = ch*b2 + k (k = i*b + j) becomes DCR channel k*C + ch.
    auto to_dcr = [&](int64_t crd) { return (crd % b2) * c + crd / b2; };
    for (size_t input : {1, 2, 4}) {
      if (!has(input)) continue;
      const ir::Value& v = g.value(n.inputs[input]);
      const std::string name = names.fresh(v.name + ".dcr");
      n.inputs[input] = g.add_constant(name, permute_rows(*v.data, to_dcr));
    }
    store.dcr = true;
    ops::write_store(n, store);
  }
  g.compact();  // drops the CRD constants left unused
  return g;
}

}  // namespace tessel::passes
