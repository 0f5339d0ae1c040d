// Before/Expected testing of passes: parse Before, run the pass, compare with Expected
// structurally (names of values and nodes do not matter), and check that the CPU reference
// executor computes the same outputs before and after on random inputs.
#pragma once

#include <string>

#include "ir/graph.h"
#include "passes/pipeline.h"

namespace tessel::testing {

// rtol / atol bound the numeric difference before vs after (looser for fp16 passes).
void expect_pass_result(const std::string& pass, const std::string& before,
                        const std::string& expected, double rtol = 1e-5, double atol = 1e-6);

// "n0, n1, ...": n integers -8..7, repeating ((i * 5) % 16 - 8), as the IR parser reads an
// integer constant (int8 weights in tests).
std::string small_ints(int n);

// The head of an int8 conv test graph: an f32 input %x [1,3,3,8] quantized by 0.0625 (%xq),
// int8 weights %wq [8,3,3,8] (small_ints), f32 constants %b = [bias] and %s = [scale], 8 each;
// the caller adds the tessel.Conv, the outputs and the closing brace.
std::string int8_conv_head(const std::string& bias, const std::string& scale);

// Runs both graphs on the same seeded random inputs and checks the outputs agree within
// rtol/atol.
void expect_same_numerics(const ir::Graph& a, const ir::Graph& b, double rtol = 1e-5,
                          double atol = 1e-6);

}  // namespace tessel::testing
