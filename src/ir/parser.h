// Parser for the textual IR of printer.h. Errors are UserErrors "file:line:col: message".
#pragma once

#include <string>

#include "ir/graph.h"

namespace tessel::ir {

Graph parse_graph(const std::string& text, const std::string& filename = "<string>");
Graph parse_graph_file(const std::string& path);

}  // namespace tessel::ir
