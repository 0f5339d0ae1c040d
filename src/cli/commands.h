// Subcommands of the `tessel` CLI. Each registers its options on the app and returns the
// function that runs it. Errors are thrown as tessel::UserError and printed by main().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "core/units.h"
#include "tessel/tessel.h"

namespace tessel::cli {

using Action = std::function<int()>;

Action add_inspect(CLI::App& app);
Action add_run(CLI::App& app);
Action add_opt(CLI::App& app);
Action add_bench_op(CLI::App& app);
Action add_codegen(CLI::App& app);
Action add_explain(CLI::App& app);
Action add_predict(CLI::App& app);
Action add_tune(CLI::App& app);
Action add_compile(CLI::App& app);
Action add_bench(CLI::App& app);
Action add_profile(CLI::App& app);
Action add_quantize(CLI::App& app);
Action add_compare(CLI::App& app);
Action add_serve(CLI::App& app);

// Options shared by commands that load a model.
struct ModelOptions {
  std::string path;
  int64_t batch = 0;
  std::vector<std::string> input_shapes;  // "name=1x3x224x224"
  std::string tuning_db;                  // --db, where the command compiles
};
// --db FILE: the tuning database (`tessel tune`) whose schedules compiling uses.
void add_tuning_db_option(CLI::App& cmd, ModelOptions& o);
// `what`: the model argument's help text.
void add_model_options(CLI::App& cmd, ModelOptions& o,
                       const std::string& what = "ONNX model (.onnx) or textual IR (.tir)");
// The public API's options for a model's --batch and --input-shape.
Options model_api_options(const ModelOptions& o);
// Loads an .onnx model or a .tir textual graph (types inferred and verified).
ir::Graph load_model(const ModelOptions& o);

// --precision fp16|fp32, the GPU storage precision.
CLI::Option* add_precision_option(CLI::App& cmd, std::string& precision);
Precision parse_precision(const std::string& precision);

// Seeded random data for a model input: uniform [-1, 1) for floats, small non-negative integers
// otherwise.
Tensor random_tensor(const ir::TensorType& t, std::mt19937_64& rng);


}  // namespace tessel::cli
