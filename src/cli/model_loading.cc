// Loading models and the helpers the commands share.
#include <fstream>
#include <random>

#include "cli/commands.h"
#include "core/error.h"
#include "frontend/onnx/importer.h"
#include "ir/infer.h"
#include "ir/parser.h"

namespace tessel::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o, const std::string& what) {
  cmd.add_option("model", o.path, what)->required();
  cmd.add_option("--batch", o.batch, "batch size for inputs whose first dimension is symbolic");
  cmd.add_option("--input-shape", o.input_shapes, "static shape of an input, e.g. input=1x3x224x224");
}

namespace {

Shape parse_dims(const std::string& text, const std::string& what) {
  Shape s;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t x = text.find('x', pos);
    std::string item = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TESSEL_USER_CHECK(used == item.size() && !item.empty() && v >= 0)
        << what << ": '" << text << "' is not a shape like 1x3x224x224";
    s.push_back(v);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ir::Graph load_model(const ModelOptions& o) {
  {
    std::ifstream f(o.path, std::ios::binary);
    TESSEL_USER_CHECK(f.good()) << o.path << ": cannot open file";
  }
  if (ends_with(o.path, ".tir")) {
    ir::Graph g = ir::parse_graph_file(o.path);
    ir::verify(g, ir::OpRegistry::global());
    ir::infer_types(g, ir::OpRegistry::global());
    return g;
  }
  onnx::ImportOptions opts;
  opts.batch = o.batch;
  for (const std::string& spec : o.input_shapes) {
    size_t eq = spec.find('=');
    TESSEL_USER_CHECK(eq != std::string::npos && eq > 0)
        << "--input-shape '" << spec << "': expected name=1x3x224x224";
    opts.input_shapes[spec.substr(0, eq)] = parse_dims(spec.substr(eq + 1), "--input-shape");
  }
  return onnx::import_model(o.path, opts);
}

CLI::Option* add_precision_option(CLI::App& cmd, std::string& precision) {
  return cmd.add_option("--precision", precision, "GPU storage precision: fp16 or fp32")
      ->check(CLI::IsMember({"fp16", "fp32"}));
}

passes::Precision parse_precision(const std::string& precision) {
  return precision == "fp32" ? passes::Precision::kFp32 : passes::Precision::kFp16;
}

Tensor random_tensor(const ir::TensorType& t, std::mt19937_64& rng) {
  Tensor r(t.dtype, t.shape);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (is_float(t.dtype))
      r.set_f64(i, uni(rng));
    else
      r.set_i64(i, small(rng));
  }
  return r;
}

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

std::string human_count(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

}  // namespace tessel::cli
