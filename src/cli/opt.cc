// `tessel opt`: runs a list of passes on a model or textual IR file and prints the result.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "ir/printer.h"
#include "passes/pipeline.h"

namespace tessel::cli {

Action add_opt(CLI::App& app) {
  auto* cmd = app.add_subcommand("opt", "Run graph passes on a .tir or .onnx file and print the IR");
  struct Opts {
    ModelOptions model;
    std::string passes;
    std::string pipeline;
    bool print_after_all = false;
    bool list = false;
    std::string output;
    int64_t elide = -1;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("model", o->model.path, "textual IR (.tir) or ONNX model (.onnx)");
  cmd->add_option("--batch", o->model.batch, "batch size for symbolic batch dims (ONNX input)");
  CLI::Option* passes_opt =
      cmd->add_option("--passes", o->passes, "comma-separated pass names, run in order");
  cmd->add_option("--pipeline", o->pipeline,
                  "the passes compile runs for the GPU: gpu-fp16 or gpu-fp32 (passes::gpu_pipeline)")
      ->check(CLI::IsMember({"gpu-fp16", "gpu-fp32"}))
      ->excludes(passes_opt);
  cmd->add_flag("--print-after-all", o->print_after_all, "print the IR after every pass (stderr)");
  cmd->add_flag("--list-passes", o->list, "list the registered passes and exit");
  cmd->add_option("-o,--output", o->output, "write the resulting IR here instead of stdout");
  cmd->add_option("--elide-constants", o->elide, "print constants with more elements as [...]");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    if (o->list) {
      for (const passes::PassInfo& p : passes::all_passes())
        std::printf("%-28s %s\n", p.name.c_str(), p.summary.c_str());
      return 0;
    }
    TESSEL_USER_CHECK(!o->model.path.empty()) << "opt: no input file given";
    ir::Graph g = load_model(o->model);
    passes::Options popts;
    std::vector<std::string> names;
    if (!o->pipeline.empty()) {
      popts.precision = o->pipeline == "gpu-fp16" ? Precision::kFp16 : Precision::kFp32;
      names = passes::gpu_pipeline(popts);
    }
    std::stringstream ss(o->passes);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) names.push_back(item);
    popts.print_after_all = o->print_after_all;
    popts.log = &std::cerr;
    g = passes::run_passes(std::move(g), names, popts);
    ir::PrintOptions print;
    print.elide_constants_over = o->elide;
    std::string text = ir::print_graph(g, print);
    if (o->output.empty()) {
      std::cout << text;
    } else {
      std::ofstream f(o->output);
      TESSEL_USER_CHECK(f.good()) << o->output << ": cannot open for writing";
      f << text;
    }
    return 0;
  };
}

}  // namespace tessel::cli
