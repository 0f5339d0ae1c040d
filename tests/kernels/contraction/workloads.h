// The public workload tables (shared/workloads/*.csv) as index maps, for property tests.
#pragma once

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/contraction/ops_maps.h"

namespace tessel::contraction::testing {

struct Workload {
  std::string name;
  std::vector<int64_t> params;  // the row's numbers, for equality of shapes
  IndexMaps maps;
};

// shared/ sits beside the checkout, or inside it where a copy of the tree carries it.
inline std::optional<std::string> workloads_dir() {
  for (std::string dir : {std::string(TESSEL_SOURCE_DIR) + "/shared/workloads",
                          std::string(TESSEL_SOURCE_DIR) + "/../shared/workloads"})
    if (std::ifstream(dir + "/gemm.csv")) return dir;
  return std::nullopt;
}

// Rows of a CSV with '#' comments: name, then integer fields (and, for gemm.csv, the
// layout as the last field).
inline std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, ',')) fields.push_back(field);
    rows.push_back(fields);
  }
  return rows;
}

// conv2d.csv: name,n,h,w,ci,co,kh,kw,stride,pad,dilation,groups (NHWC, symmetric).
// gemm.csv: name,m,n,k,layout.
inline std::vector<Workload> load_workloads(const std::string& dir) {
  std::vector<Workload> out;
  for (const std::vector<std::string>& row : csv_rows(dir + "/conv2d.csv")) {
    Workload w{row.at(0), {}, {}};
    for (size_t i = 1; i < row.size(); ++i) w.params.push_back(std::stoll(row[i]));
    Conv2dParams p;
    p.n = w.params.at(0);
    p.h = w.params[1];
    p.w = w.params[2];
    p.ci = w.params[3];
    p.co = w.params[4];
    p.kh = w.params[5];
    p.kw = w.params[6];
    p.stride_h = p.stride_w = w.params[7];
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = w.params[8];
    p.dilation_h = p.dilation_w = w.params[9];
    p.groups = w.params.at(10);
    w.maps = conv2d_nhwc_maps(p);
    out.push_back(std::move(w));
  }
  for (const std::vector<std::string>& row : csv_rows(dir + "/gemm.csv")) {
    Workload w{row.at(0), {}, {}};
    for (size_t i = 1; i < 4; ++i) w.params.push_back(std::stoll(row.at(i)));
    GemmLayout layout = parse_gemm_layout(row.at(4)).value();
    w.params.push_back(-1 - 2 * layout.trans_a - layout.trans_b);  // distinct from conv rows
    w.maps = gemm_maps(w.params[0], w.params[1], w.params[2], layout);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace tessel::contraction::testing
