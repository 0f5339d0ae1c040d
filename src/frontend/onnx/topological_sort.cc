#include "frontend/onnx/topological_sort.h"

#include <functional>
#include <queue>

#include "core/error.h"

namespace tessel::onnx {
namespace {

// A node that is on a cycle, found by walking backwards from a node that could not be
// ordered: such a node always has an unordered producer, so the walk must revisit a node.
// Returns the cycle as labels in data-flow order, "A -> B -> A".
std::string describe_cycle(const std::vector<ir::Node>& nodes, const std::vector<int>& producer,
                           const std::vector<char>& ordered) {
  size_t start = 0;
  while (ordered[start]) ++start;
  std::vector<size_t> path;
  std::vector<int> position(nodes.size(), -1);
  size_t cur = start;
  while (position[cur] < 0) {
    position[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    for (ir::ValueId v : nodes[cur].inputs) {
      int p = v == ir::kNoValue ? -1 : producer[static_cast<size_t>(v)];
      if (p >= 0 && !ordered[static_cast<size_t>(p)]) {
        cur = static_cast<size_t>(p);
        break;
      }
    }
  }
  // path[position[cur]..] is the cycle, each node's producer following it.
  std::string r = nodes[cur].label();
  for (size_t i = path.size(); i-- > static_cast<size_t>(position[cur]);)
    r += " -> " + nodes[path[i]].label();
  return r;
}

}  // namespace

std::vector<ir::Node> topological_sort(std::vector<ir::Node> nodes,
                                       const std::vector<int>& producer) {
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> consumers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ir::ValueId v : nodes[i].inputs) {
      int p = v == ir::kNoValue ? -1 : producer[static_cast<size_t>(v)];
      if (p < 0) continue;
      ++pending[i];
      consumers[static_cast<size_t>(p)].push_back(i);
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  std::vector<char> ordered(nodes.size(), 0);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    ordered[i] = 1;
    for (size_t c : consumers[i])
      if (--pending[c] == 0) ready.push(c);
  }
  TESSEL_USER_CHECK(order.size() == nodes.size())
      << "the graph has a cycle: " << describe_cycle(nodes, producer, ordered);
  std::vector<ir::Node> sorted;
  sorted.reserve(nodes.size());
  for (size_t i : order) sorted.push_back(std::move(nodes[i]));
  return sorted;
}

}  // namespace tessel::onnx
