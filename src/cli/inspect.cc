// `tessel inspect`: ops, shapes, parameters and FLOPs per layer, and totals.
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "ops/flops.h"

namespace tessel::cli {

Action add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a model's layers: op, shapes, parameters, FLOPs");
  auto o = std::make_shared<ModelOptions>();
  add_model_options(*cmd, *o);
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    ir::Graph g = load_model(*o);
    std::printf("model %s: graph '%s', opset %lld, %zu nodes\n", o->path.c_str(), g.name.c_str(),
                static_cast<long long>(g.opset), g.nodes.size());
    for (ir::ValueId v : g.inputs)
      std::printf("  input  %-24s %s\n", g.value(v).name.c_str(), g.type(v).str().c_str());
    for (ir::ValueId v : g.outputs)
      std::printf("  output %-24s %s\n", g.value(v).name.c_str(), g.type(v).str().c_str());
    std::printf("\n%-4s %-20s %-32s %-22s %10s %10s\n", "#", "op", "name", "output", "params",
                "FLOPs");
    int64_t total_flops = 0, total_params = 0;
    std::map<std::string, std::pair<int, int64_t>> per_op;  // count, flops
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      int64_t flops = ops::node_flops(g, n), params = ops::node_parameters(g, n);
      total_flops += flops;
      total_params += params;
      per_op[n.op].first++;
      per_op[n.op].second += flops;
      std::string out = n.outputs.empty() ? "" : g.type(n.outputs[0]).str();
      std::printf("%-4zu %-20s %-32s %-22s %10s %10s\n", i, n.op.c_str(), n.name.c_str(),
                  out.c_str(), human_count(static_cast<double>(params)).c_str(),
                  human_count(static_cast<double>(flops)).c_str());
    }
    std::printf("\nper op:\n");
    for (const auto& [op, cf] : per_op)
      std::printf("  %-20s %4d nodes %10s FLOPs\n", op.c_str(), cf.first,
                  human_count(static_cast<double>(cf.second)).c_str());
    std::printf("total: %zu nodes, %s parameters, %s FLOPs\n", g.nodes.size(),
                human_count(static_cast<double>(total_params)).c_str(),
                human_count(static_cast<double>(total_flops)).c_str());
    return 0;
  };
}

}  // namespace tessel::cli
