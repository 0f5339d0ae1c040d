// `tessel compile`: a model compiled into a .tsl engine file (runtime/engine_file.h)
// that `tessel run/bench/profile` load without compiling. Compiling needs NVRTC, not a GPU:
// --target compiles for a known GPU that is not here. --batch 1:64 compiles a dynamic-batch
// engine (compiler/profiles.h): one plan per profile batch, the profiles printed.
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"

namespace tessel::cli {

Action add_compile(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compile", "Compile a model into a .tsl engine file for `tessel run/bench/profile`");
  struct Opts {
    ModelOptions model;
    std::string output;
    std::string precision = "fp16";
    std::string target;
    std::string launches_json;
  };
  auto o = std::make_shared<Opts>();
  o->model.takes_range = true;
  add_model_options(*cmd, o->model);
  cmd->add_option("--opt-batch", o->model.opt_batch,
                  "with a batch range: the batch bench and profile run by default (default: "
                  "the range's largest); compiled as a profile of its own");
  add_profile_every_option(*cmd, o->model);
  add_tuning_db_option(*cmd, o->model);
  cmd->add_option("-o,--output", o->output, "the engine file to write (.tsl)")->required();
  add_precision_option(*cmd, o->precision);
  cmd->add_option("--target", o->target,
                  "compile for this GPU: sm_90a (H100) or sm_80 (A100); default: the GPU present");
  cmd->add_option("--launches-json", o->launches_json,
                  "also write each kernel launch (node, op, instruction, schedule) as JSON here");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    // Before compiling: an output that cannot be written fails in a moment, not after it.
    const std::filesystem::path out_dir = std::filesystem::path(o->output).parent_path();
    TESSEL_USER_CHECK(std::filesystem::is_directory(out_dir.empty() ? "." : out_dir) &&
                      ::access(out_dir.empty() ? "." : out_dir.c_str(), W_OK) == 0)
        << o->output << ": cannot open for writing";
    ProgressBar progress;
    Options options = model_api_options(o->model);
    options.precision = parse_precision(o->precision);
    options.progress = progress.callback();
    const CompileReport report = compile_file(o->model.path, o->output, options, o->target);
    std::printf("%s\n", report.summary.c_str());
    if (!o->launches_json.empty()) {
      nlohmann::json j = nlohmann::json::array();
      for (const LaunchInfo& l : report.launches)
        j.push_back({{"node", l.node}, {"op", l.op}, {"instruction", l.instruction},
                     {"schedule", l.schedule}});
      std::ofstream f(o->launches_json);
      TESSEL_USER_CHECK(f.good()) << o->launches_json << ": cannot open for writing";
      f << j.dump(1) << "\n";
    }
    return 0;
  };
}

}  // namespace tessel::cli
