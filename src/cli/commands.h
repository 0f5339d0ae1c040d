// Subcommands of the `tessel` CLI. Each registers its options on the app and returns the
// function that runs it. Errors are thrown as tessel::UserError and printed by main().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessel::cli {

using Action = std::function<int()>;

Action add_inspect(CLI::App& app);
Action add_run(CLI::App& app);
Action add_opt(CLI::App& app);
Action add_bench_op(CLI::App& app);
Action add_codegen(CLI::App& app);
Action add_explain(CLI::App& app);

// Options shared by commands that load a model.
struct ModelOptions {
  std::string path;
  int64_t batch = 0;
  std::vector<std::string> input_shapes;  // "name=1x3x224x224"
};
void add_model_options(CLI::App& cmd, ModelOptions& o);
// Loads an .onnx model or a .tir textual graph (types inferred and verified).
ir::Graph load_model(const ModelOptions& o);

std::string human_count(double v);  // 25.6M, 4.1G

}  // namespace tessel::cli
