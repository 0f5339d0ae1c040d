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
  std::string batch;    // --batch: "8", or a range "1:64" where the command takes one
  int64_t opt_batch = 0;  // --opt-batch, with a range (tessel compile)
  int64_t profile_every = 0;  // --profile-every, with a range (tessel compile)
  std::vector<std::string> input_shapes;  // "name=1x3x224x224"
  std::string tuning_db;                  // --db, where the command compiles
  // The command takes a batch range (compile; explain, which plans its opt batch). Elsewhere a
  // range is a UserError saying so.
  bool takes_range = false;
};
// --db FILE: the tuning database (`tessel tune`) whose schedules compiling uses.
void add_tuning_db_option(CLI::App& cmd, ModelOptions& o);
// --profile-every N: with a batch range, a profile at every multiple of N too.
void add_profile_every_option(CLI::App& cmd, ModelOptions& o);
// `what`: the model argument's help text.
void add_model_options(CLI::App& cmd, ModelOptions& o,
                       const std::string& what = "ONNX model (.onnx) or textual IR (.tir)");
// The public API's options for a model's --batch (one batch, or a range with --opt-batch, opt
// filled in) and --input-shape. A malformed --batch is a UserError.
Options model_api_options(const ModelOptions& o);
// A UserError when `options` asks for a batch range: the command takes one batch.
void refuse_batch_range(const Options& options);
// Loads an .onnx model or a .tir textual graph (types inferred and verified): at the opt batch
// of a range where the command takes one, else refusing a range.
ir::Graph load_model(const ModelOptions& o);

// --precision fp16|fp32, the GPU storage precision.
CLI::Option* add_precision_option(CLI::App& cmd, std::string& precision);
Precision parse_precision(const std::string& precision);

// Seeded random data for a model input: core's random_uniform (uniform [-1, 1) for floats,
// integers in [0, 9]) seeded by one draw of `rng`, so that each input of a run differs.
Tensor random_tensor(const ir::TensorType& t, std::mt19937_64& rng);


}  // namespace tessel::cli
