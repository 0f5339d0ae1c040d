// Runs one op through the registry (infer + reference kernel), as the CPU executor does.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace tessel::testing {

// Builds a one-node graph and runs it; inputs given as Tensors (an undefined Tensor marks an
// omitted optional input). Returns the outputs.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                           ir::Attributes attrs = {}, int num_outputs = 1, int64_t opset = 17);

// run_op for a single-output op: returns that output.
Tensor run1(const std::string& op, const std::vector<Tensor>& inputs, ir::Attributes attrs = {},
            int64_t opset = 17);

// The message of the UserError that f throws; fails the test if it throws none.
template <typename F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

// Runs fn, expecting a UserError whose message names the node (`label`) and contains
// `fragment`.
void expect_user_error(const std::function<void()>& fn, const std::string& label,
                       const std::string& fragment);

// Max |a - b| / (atol + rtol * |b|) over elements: <= 1 means close.
bool all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-6);

}  // namespace tessel::testing

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)
