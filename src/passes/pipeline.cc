#include "passes/pipeline.h"

#include "core/error.h"
#include "ir/infer.h"
#include "ir/printer.h"
#include "passes/passes.h"

namespace tessel::passes {

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> kPasses = {
      {"canonicalize", "bypass Identity/Dropout/no-op Cast; Clip bounds as inputs", canonicalize},
      {"fold-constants", "evaluate nodes whose inputs are all constant", fold_constants},
      {"fold-batch-norm", "fold inference BatchNormalization into the preceding Conv",
       fold_batch_norm},
      {"dce", "remove nodes whose outputs reach no graph output", eliminate_dead_code},
  };
  return kPasses;
}

const PassInfo* find_pass(const std::string& name) {
  for (const PassInfo& p : all_passes())
    if (p.name == name) return &p;
  return nullptr;
}

ir::Graph run_passes(ir::Graph g, const std::vector<std::string>& names,
                     const PipelineOptions& options) {
  for (const std::string& name : names) {
    const PassInfo* p = find_pass(name);
    if (!p) {
      std::string known;
      for (const PassInfo& q : all_passes()) known += (known.empty() ? "" : ", ") + q.name;
      TESSEL_USER_ERROR() << "unknown pass '" << name << "' (known: " << known << ")";
    }
    g = p->run(std::move(g));
    ir::verify(g, ir::OpRegistry::global());
    if (options.print_after_all && options.log) {
      *options.log << "// ----- IR after " << name << " -----\n" << ir::print_graph(g) << "\n";
    }
  }
  return g;
}

}  // namespace tessel::passes
