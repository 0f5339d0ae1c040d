// Small helpers shared by the rewriting passes.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace tessel::passes {

// Replaces every read of `from` (node inputs and graph outputs) with `to`. When `from` is a
// graph output, `to` takes over its name, so the model's output names do not change.
// Returns false (and changes nothing) when that is impossible: `to` is a graph input, a
// constant, or itself a graph output.
bool replace_all_uses(ir::Graph& g, ir::ValueId from, ir::ValueId to);

// Removes the nodes whose flag is set, then values nobody refers to.
void erase_nodes(ir::Graph& g, const std::vector<char>& erase);

// Number of readers of each value, counting graph outputs as readers.
std::vector<int> use_counts(const ir::Graph& g);

// Fresh names for the values (or nodes) a pass adds: unique in the graph and among each other.
// Graph::unique_value_name rescans the graph on every call; a pass that adds a value per node
// keeps one of these instead.
class UniqueNames {
 public:
  static UniqueNames of_values(const ir::Graph& g);
  static UniqueNames of_nodes(const ir::Graph& g);
  // `base` if unused, else base_1, base_2, ...; the result counts as used from now on.
  std::string fresh(const std::string& base);

 private:
  std::unordered_set<std::string> used_;
};

}  // namespace tessel::passes
