// The op facts table (ops/op_facts.cc): complete, and consistent with itself.
#include <gtest/gtest.h>

#include <string>

#include "ir/op_registry.h"
#include "ops/op_facts.h"

namespace tessel::ops {
namespace {

const ir::OpRegistry& registry() { return ir::OpRegistry::global(); }

TEST(OpFacts, EveryRegisteredOpHasARow) {
  EXPECT_EQ(ops_without_facts(registry()), std::vector<std::string>{});
}

TEST(OpFacts, RowsAreConsistent) {
  for (const std::string& op : registry().names()) {
    SCOPED_TRACE(op);
    const ir::OpFacts& f = registry().facts(op);
    // A tessel form is named exactly when the op takes one, and it is a registered op.
    EXPECT_EQ(f.nhwc == ir::NhwcForm::kTesselForm, std::string(f.tessel_form) != "");
    if (f.nhwc == ir::NhwcForm::kTesselForm) {
      EXPECT_NE(registry().find(f.tessel_form), nullptr);
    }
    // A view moves no data, so it may also run in place.
    if (f.view) {
      EXPECT_TRUE(f.in_place);
    }
    // Free fp16 operands only mean something for an op that takes fp16.
    if (!f.fp16) {
      EXPECT_TRUE(f.fp16_free_inputs.empty() && !f.fp16_free_output);
    }
    // The contraction generator takes the tessel forms only; the ONNX ones are rewritten first.
    if (f.gpu == ir::GpuKernel::kContraction) {
      EXPECT_EQ(op.rfind("tessel.", 0), 0u);
    }
    // An NHWC tessel op has no further layout to take.
    if (op.rfind("tessel.", 0) == 0) {
      EXPECT_EQ(f.nhwc, ir::NhwcForm::kNone);
    }
  }
}

TEST(OpFacts, SpotChecks) {
  EXPECT_EQ(registry().facts("Relu").kind, ir::OpKind::kElementwise);
  EXPECT_TRUE(registry().facts("Relu").in_place);
  EXPECT_EQ(registry().facts("Add").nhwc, ir::NhwcForm::kBroadcast);
  EXPECT_EQ(std::string(registry().facts("MaxPool").tessel_form), "tessel.MaxPool");
  EXPECT_EQ(registry().facts("tessel.Conv").gpu, ir::GpuKernel::kContraction);
  EXPECT_EQ(registry().facts("Reshape").view, true);
  EXPECT_EQ(registry().facts("Transpose").view, false);
  // bias, an int8 input's dequantization scale, prologue
  EXPECT_EQ(registry().facts("tessel.Conv").fp16_free_inputs, (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(registry().facts("Conv").flops, ir::FlopRule::kConv);
  // ConvTranspose becomes the tessel.Conv of its phases and counts the ONNX op's own work.
  EXPECT_EQ(std::string(registry().facts("ConvTranspose").tessel_form), "tessel.Conv");
  EXPECT_EQ(registry().facts("ConvTranspose").flops, ir::FlopRule::kConvTranspose);
  EXPECT_TRUE(registry().facts("ConvTranspose").fp16);
  // An unknown op has the defaults: no GPU kernel, no NHWC form.
  EXPECT_EQ(registry().facts("NoSuchOp").gpu, ir::GpuKernel::kNone);
  EXPECT_EQ(registry().facts("NoSuchOp").nhwc, ir::NhwcForm::kNone);
}

}  // namespace
}  // namespace tessel::ops
