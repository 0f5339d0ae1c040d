// `tessel quantize`: post-training int8 quantization of an ONNX model into a QDQ ONNX model
// (src/quantize/quantize_model.h), with calibration inputs from a folder of .npy files or,
// for smoke tests only, seeded random inputs. Prints a per-layer report; progress on stderr.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/npy.h"
#include "quantize/quantize_model.h"

namespace tessel::cli {
namespace {

namespace fs = std::filesystem;
using Input = std::pair<std::string, ir::TensorType>;

// The samples one .npy file holds for an input of type `want`: the type itself, or a stack of
// samples along the first axis (a file of [K*B, ...] for an input of [B, ...]). Float files
// of another float dtype are converted (NumPy writes f64 by default).
std::vector<Tensor> samples_of(const std::string& file, const Input& input) {
  const ir::TensorType& want = input.second;
  Tensor t = read_npy(file);
  if (t.dtype() != want.dtype && is_float(t.dtype()) && is_float(want.dtype))
    t = t.cast(want.dtype);
  const Shape& s = t.shape();
  const bool stacked = t.dtype() == want.dtype && !want.shape.empty() &&
                       s.size() == want.shape.size() && want.shape[0] > 0 &&
                       s[0] % want.shape[0] == 0 && s[0] > 0 &&
                       std::equal(s.begin() + 1, s.end(), want.shape.begin() + 1);
  TESSEL_USER_CHECK(stacked) << file << ": holds " << t.type_str() << ", expected " << want.str()
                             << " (input '" << input.first
                             << "') or a stack of them along the first axis";
  std::vector<Tensor> samples;
  const size_t bytes = Tensor(want.dtype, want.shape).nbytes();
  for (int64_t k = 0; k < s[0] / want.shape[0]; ++k) {
    Tensor one(want.dtype, want.shape);
    std::memcpy(one.raw(), t.raw() + k * bytes, bytes);
    samples.push_back(std::move(one));
  }
  return samples;
}

std::vector<std::string> sorted_entries(const std::string& dir, bool folders) {
  std::vector<std::string> r;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (folders ? e.is_directory() : (e.is_regular_file() && e.path().extension() == ".npy"))
      r.push_back(e.path().string());
  }
  std::sort(r.begin(), r.end());
  return r;
}

// Calibration samples from `dir`: for a model of one input, every .npy file in it (sorted by
// name); for several inputs, one subfolder per sample holding <input name>.npy for each.
std::vector<std::vector<Tensor>> read_calibration(const std::string& dir,
                                                  const std::vector<Input>& inputs) {
  std::error_code ec;
  TESSEL_USER_CHECK(fs::is_directory(dir, ec)) << "--calib " << dir << ": no such folder";
  std::vector<std::vector<Tensor>> samples;
  if (inputs.size() == 1) {
    for (const std::string& f : sorted_entries(dir, false))
      for (Tensor& t : samples_of(f, inputs[0])) samples.push_back({std::move(t)});
    TESSEL_USER_CHECK(!samples.empty()) << "--calib " << dir << ": no .npy files in the folder";
    return samples;
  }
  for (const std::string& sub : sorted_entries(dir, true)) {
    std::vector<Tensor> sample;
    for (const Input& in : inputs) {
      const std::string f = sub + "/" + in.first + ".npy";
      TESSEL_USER_CHECK(fs::is_regular_file(f, ec))
          << "--calib " << dir << ": " << f << " is missing (the model has " << inputs.size()
          << " inputs: one subfolder per sample, one <input>.npy each)";
      std::vector<Tensor> one = samples_of(f, in);
      TESSEL_USER_CHECK(one.size() == 1)
          << f << ": holds " << one.size() << " samples; a subfolder is one sample";
      sample.push_back(std::move(one[0]));
    }
    samples.push_back(std::move(sample));
  }
  TESSEL_USER_CHECK(!samples.empty())
      << "--calib " << dir << ": no sample subfolders (the model has " << inputs.size()
      << " inputs: one subfolder per sample, one <input>.npy each)";
  return samples;
}

std::string drop_str(const quantize::Agreement& a, bool classifier) {
  char buf[64];
  if (classifier)
    std::snprintf(buf, sizeof buf, "%6.2f%%  %8.2e", 100 * a.top1_drop, a.rel_l2);
  else
    std::snprintf(buf, sizeof buf, "%8.2e", a.rel_l2);
  return buf;
}

}  // namespace

Action add_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize", "Post-training int8 quantization: write a QDQ ONNX model calibrated on inputs");
  struct Opts {
    ModelOptions model;
    std::string calib_dir;
    int calib_random = 0;
    uint64_t seed = 0;
    std::string method = "entropy";
    std::string metric = "auto";
    double percentile = 99.99;
    double max_top1_drop = 1.0;
    double max_rel_l2 = 0.05;
    std::string output;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  add_model_options(*cmd, o->model, "ONNX model (.onnx)");
  auto* dir = cmd->add_option("--calib", o->calib_dir,
                              "folder of .npy calibration inputs (one file per sample, or a stack "
                              "along the batch axis; several inputs: one subfolder per sample)");
  auto* random = cmd->add_option("--calib-random", o->calib_random,
                                 "N seeded random inputs, uniform in [-1, 1): smoke tests only, "
                                 "the ranges mean nothing for real data")
                     ->check(CLI::PositiveNumber);
  dir->excludes(random);
  cmd->add_option("--seed", o->seed, "seed of --calib-random");
  cmd->add_option("--method", o->method, "activation ranges: minmax, percentile or entropy (KL)")
      ->check(CLI::IsMember({"minmax", "percentile", "entropy"}));
  cmd->add_option("--percentile", o->percentile, "percentile of |x| for --method percentile")
      ->check(CLI::Range(50.0, 100.0));
  cmd->add_option("--metric", o->metric,
                  "agreement with fp32: top1, rel-l2, or auto (top1 for an (N, classes) output)")
      ->check(CLI::IsMember({"auto", "top1", "rel-l2"}));
  cmd->add_option("--max-top1-drop", o->max_top1_drop,
                  "classifiers: largest top-1 agreement loss against fp32, in percent")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--max-rel-l2", o->max_rel_l2,
                  "other models: largest relative L2 error of the output against fp32")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-o,--output", o->output, "the QDQ model to write (.onnx)")->required();
  cmd->add_option("--threads", o->threads,
                  "calibration samples run at once on the CPU (default: one per hardware thread)")
      ->check(CLI::NonNegativeNumber);
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    TESSEL_USER_CHECK(!o->calib_dir.empty() || o->calib_random > 0)
        << "quantize needs calibration inputs: --calib DIR or --calib-random N";
    const std::string& path = o->model.path;
    std::error_code ec;
    TESSEL_USER_CHECK(fs::is_regular_file(path, ec)) << path << ": no such model file";
    const ir::Graph g = load_model(o->model);
    std::vector<Input> inputs;
    for (ir::ValueId v : g.inputs) inputs.push_back({g.value(v).name, g.value(v).type});

    std::vector<std::vector<Tensor>> calibration;
    if (!o->calib_dir.empty()) {
      calibration = read_calibration(o->calib_dir, inputs);
    } else {
      std::mt19937_64 rng(o->seed);
      for (int k = 0; k < o->calib_random; ++k) {
        std::vector<Tensor> sample;
        for (const Input& in : inputs) sample.push_back(random_tensor(in.second, rng));
        calibration.push_back(std::move(sample));
      }
    }

    quantize::Options q;
    q.method = *quantize::method_from_name(o->method);
    q.percentile = o->percentile;
    q.metric = o->metric == "top1"     ? quantize::Metric::kTop1
               : o->metric == "rel-l2" ? quantize::Metric::kRelL2
                                       : quantize::Metric::kAuto;
    q.max_top1_drop = o->max_top1_drop / 100.0;
    q.max_rel_l2 = o->max_rel_l2;
    q.threads = o->threads;
    const Options api = model_api_options(o->model);
    q.import.batch = api.batch;
    q.import.input_shapes = api.input_shapes;
    ProgressBar progress;
    q.progress = progress.callback();
    const quantize::Result r = quantize::quantize_model(path, calibration, q);

    std::ofstream out(o->output, std::ios::binary);
    out.write(r.model_bytes.data(), static_cast<std::streamsize>(r.model_bytes.size()));
    out.close();
    TESSEL_USER_CHECK(out.good()) << o->output << ": cannot write the quantized model";

    std::printf("calibration: %lld sample(s), method %s%s\n", static_cast<long long>(r.samples),
                o->method.c_str(),
                o->method == "percentile" ? (" " + std::to_string(o->percentile)).c_str() : "");
    const char* metric = r.classifier ? "top-1 drop    rel L2" : "  rel L2";
    std::printf("%-24s %-7s %11s %11s  %s (alone)  precision\n", "layer", "op", "input amax",
                "output max", metric);
    int int8 = 0;
    for (const auto& l : r.layers) {
      std::printf("%-24s %-7s %11.4g %11.4g  %s          %s\n", l.name.c_str(), l.op.c_str(),
                  l.input_amax, l.output_max, drop_str(l.alone, r.classifier).c_str(),
                  l.int8 ? "int8" : "float (fallback)");
      int8 += l.int8;
    }
    if (!r.also_quantized.empty())
      std::printf("also quantized: %zu values besides the int8 layers' inputs (pre-activation "
                  "norms' inputs, the concats around them and their inputs), such as '%s'\n",
                  r.also_quantized.size(), r.also_quantized.front().c_str());
    if (r.classifier) {
      std::printf(
          "all layers int8: top-1 agreement %.2f%%; written: %d of %zu layers int8, top-1 "
          "agreement %.2f%% (budget: drop <= %.2f%%), rel L2 %.2e\n",
          100 * (1 - r.all_int8.top1_drop), int8, r.layers.size(), 100 * (1 - r.final.top1_drop),
          o->max_top1_drop, r.final.rel_l2);
    } else {
      std::printf(
          "all layers int8: rel L2 %.2e; written: %d of %zu layers int8, rel L2 %.2e "
          "(budget: %.2e)\n",
          r.all_int8.rel_l2, int8, r.layers.size(), r.final.rel_l2, o->max_rel_l2);
    }
    if (!quantize::within_budget(r.final, r.classifier, q))
      std::fprintf(stderr, "warning: no layer can stay int8 within the budget\n");
    std::printf("wrote %s\n", o->output.c_str());
    return 0;
  };
}

}  // namespace tessel::cli
