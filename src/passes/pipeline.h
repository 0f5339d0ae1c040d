// The pass pipeline: passes registered by name, run as a flat list, with an IR dump after
// any pass on request.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/options.h"

namespace tessel::passes {

using Pass = std::function<ir::Graph(ir::Graph)>;

struct PassInfo {
  std::string name;
  std::string summary;
  Pass run;
};

// Every pass, in the order of the default pipeline.
const std::vector<PassInfo>& all_passes();
const PassInfo* find_pass(const std::string& name);


// The pass names of the GPU pipeline for `options`, in order (pipeline.cc says which and why;
// choose-precision-fp16 and widen-narrow-groups only for fp16). `tessel opt --pipeline
// gpu-fp16|gpu-fp32` runs it. plan_memory (plan_memory.h) is an analysis of the result, not a
// pass.
std::vector<std::string> gpu_pipeline(const Options& options);

// Runs the named passes in order, verifying the graph after each one.
ir::Graph run_passes(ir::Graph g, const std::vector<std::string>& names,
                     const Options& options = {});

}  // namespace tessel::passes
