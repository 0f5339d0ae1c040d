#include "quantize/quantize_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "frontend/onnx/qdq_writer.h"
#include "frontend/onnx/tensor_proto.h"
#include "runtime/cpu/executor.h"

namespace tessel::quantize {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TESSEL_USER_CHECK(f.good()) << path << ": cannot read the model (no such file or no access)";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void report(const Options& o, std::string_view step, int done, int total) {
  if (o.progress) o.progress(step, done, total);
}

// Runs a serialized model on every sample; returns, per sample, the graph outputs (as named
// by the graph's outputs, in order).
class Runner {
 public:
  Runner(const std::string& bytes, const std::string& what, const std::string& base_dir,
         const onnx::ImportOptions& import)
      : graph_(onnx::import_model_bytes(bytes, what, base_dir, import)) {}

  std::vector<std::string> output_names() const {
    std::vector<std::string> names;
    for (ir::ValueId v : graph_.outputs) names.push_back(graph_.value(v).name);
    return names;
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const {
    return runtime::cpu::run_graph(graph_, inputs);
  }

 private:
  ir::Graph graph_;
};

int thread_count(const Options& o, int samples) {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(o.threads > 0 ? o.threads : hw, 1, std::max(samples, 1));
}

// f(0), ..., f(n - 1) on up to `threads` threads (the reference executor runs one graph on
// one thread, and separate runs share nothing but the const graph). The first exception
// thrown is rethrown here once all threads are done.
template <typename F>
void parallel_for(int n, int threads, F f) {
  threads = std::clamp(threads, 1, std::max(n, 1));
  if (threads == 1) {
    for (int i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<int> next{0};
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (int i = next++; i < n; i = next++) f(i);
      } catch (...) {
        errors[t] = std::current_exception();
        next = n;  // the others stop at their next sample
      }
    });
  }
  for (std::thread& th : pool) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Top-1 agreement and relative L2 error of `got` against `want`, one output per sample.
Agreement compare(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                  bool classifier) {
  Agreement a;
  double diff = 0, norm = 0;
  int64_t rows = 0, same = 0;
  for (size_t s = 0; s < want.size(); ++s) {
    const Tensor& w = want[s];
    const Tensor& g = got[s];
    TESSEL_ICHECK(w.shape() == g.shape()) << w.type_str() << " vs " << g.type_str();
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double d = g.get_f64(i) - w.get_f64(i);
      diff += d * d;
      norm += w.get_f64(i) * w.get_f64(i);
    }
    if (!classifier) continue;
    const int64_t classes = w.dim(1);
    for (int64_t r = 0; r < w.dim(0); ++r) {
      auto argmax = [&](const Tensor& t) {
        int64_t best = 0;
        for (int64_t c = 1; c < classes; ++c)
          if (t.get_f64(r * classes + c) > t.get_f64(r * classes + best)) best = c;
        return best;
      };
      same += argmax(w) == argmax(g);
      ++rows;
    }
  }
  a.rel_l2 = std::sqrt(diff) / (norm > 0 ? std::sqrt(norm) : 1.0);
  if (!std::isfinite(a.rel_l2)) a.rel_l2 = std::numeric_limits<double>::infinity();
  a.top1_drop = rows ? 1.0 - static_cast<double>(same) / static_cast<double>(rows) : 0.0;
  return a;
}

}  // namespace

bool within_budget(const Agreement& a, bool classifier, const Options& options) {
  return classifier ? a.top1_drop <= options.max_top1_drop + 1e-12 : a.rel_l2 <= options.max_rel_l2;
}

Result quantize_model(const std::string& path, const std::vector<std::vector<Tensor>>& calibration,
                      const Options& options) {
  const std::string bytes = read_file(path);
  const std::string base_dir = onnx::folder_of(path);
  const std::vector<onnx::QuantizableLayer> layers = onnx::quantizable_layers(bytes, path);
  TESSEL_USER_CHECK(!layers.empty())
      << path << ": no quantizable layer (a Conv, Gemm or MatMul whose weight is a float "
      << "initializer)";
  TESSEL_USER_CHECK(!calibration.empty()) << path << ": the calibration set is empty";

  // Observers: each layer's activation input, upstream values and output, as extra graph
  // outputs.
  std::vector<std::string> observed;
  for (const auto& l : layers) {
    observed.push_back(l.activation);
    observed.insert(observed.end(), l.upstream.begin(), l.upstream.end());
    observed.push_back(l.output);
  }
  const Runner observing(onnx::with_graph_outputs(bytes, observed, path), path, base_dir,
                         options.import);
  const std::vector<std::string> names = observing.output_names();
  std::map<std::string, RangeObserver> observers;
  for (const std::string& n : observed) observers[n];
  const bool histograms = options.method != Method::kMinMax;
  const int runs = static_cast<int>(calibration.size()) * (histograms ? 2 : 1);
  Result result;
  result.samples = static_cast<int64_t>(calibration.size());
  std::vector<Tensor> reference;  // fp32 first output per sample
  int done = 0;
  report(options, "calibrating", 0, runs);
  // Samples run `threads` at a time; the observers see them in order, one at a time.
  const int samples = static_cast<int>(calibration.size());
  const int threads = thread_count(options, samples);
  for (int pass = 0; pass < (histograms ? 2 : 1); ++pass) {
    for (int chunk = 0; chunk < samples; chunk += threads) {
      const int count = std::min(threads, samples - chunk);
      std::vector<std::vector<Tensor>> outs(static_cast<size_t>(count));
      parallel_for(count, threads, [&](int k) { outs[k] = observing.run(calibration[chunk + k]); });
      for (const std::vector<Tensor>& out : outs) {
        if (pass == 0) reference.push_back(out[0]);
        for (size_t k = 0; k < names.size(); ++k) {
          auto it = observers.find(names[k]);
          if (it == observers.end()) continue;
          if (pass == 0)
            it->second.observe_range(out[k]);
          else
            it->second.observe_histogram(out[k]);
        }
        report(options, "calibrating", ++done, runs);
      }
    }
  }
  const Shape& out_shape = reference[0].shape();
  const bool two_d = out_shape.size() == 2 && out_shape[1] > 1;
  TESSEL_USER_CHECK(options.metric != Metric::kTop1 || two_d)
      << path << ": top-1 agreement needs a first output of shape (N, classes); it has "
      << reference[0].type_str();
  result.classifier = options.metric == Metric::kTop1 || (options.metric == Metric::kAuto && two_d);

  std::vector<double> amax(layers.size());
  std::vector<std::vector<double>> upstream_amax(layers.size());
  std::vector<double> output_amax(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const RangeObserver& o = observers.at(layers[i].activation);
    TESSEL_USER_CHECK(o.finite()) << path << ": activation '" << layers[i].activation
                                  << "' (input of " << layers[i].name
                                  << ") is not finite on the calibration set";
    amax[i] = o.threshold(options.method, options.percentile);
    for (const std::string& v : layers[i].upstream) {
      const RangeObserver& u = observers.at(v);
      TESSEL_USER_CHECK(u.finite()) << path << ": value '" << v << "' (before the input of "
                                    << layers[i].name << ") is not finite on the calibration set";
      upstream_amax[i].push_back(u.threshold(options.method, options.percentile));
    }
    const RangeObserver& out = observers.at(layers[i].output);
    if (out.finite()) output_amax[i] = out.threshold(options.method, options.percentile);
    result.layers.push_back({.name = layers[i].name,
                             .op = layers[i].op,
                             .input_amax = amax[i],
                             .output_max = observers.at(layers[i].output).max_abs(),
                             .alone = {},
                             .int8 = false});
  }

  // Agreement of the model with the layers in `int8` quantized.
  auto evaluate = [&](const std::vector<size_t>& int8, std::string* written) {
    std::vector<onnx::QdqLayer> chosen;
    for (size_t i : int8)
      chosen.push_back({layers[i].node_index, amax[i], upstream_amax[i], output_amax[i]});
    std::string qdq = onnx::write_qdq_model(bytes, chosen, path, base_dir);
    const Runner runner(qdq, path + " (quantized)", base_dir, options.import);
    std::vector<Tensor> got(calibration.size());
    parallel_for(samples, threads, [&](int k) { got[k] = runner.run(calibration[k])[0]; });
    if (written) *written = std::move(qdq);
    return compare(reference, got, result.classifier);
  };

  const int n = static_cast<int>(layers.size());
  report(options, "layer sensitivity", 0, n + 1);
  std::vector<size_t> all(layers.size());
  std::iota(all.begin(), all.end(), size_t{0});
  result.all_int8 = evaluate(all, &result.model_bytes);
  report(options, "layer sensitivity", 1, n + 1);
  for (int i = 0; i < n; ++i) {
    result.layers[i].alone = evaluate({static_cast<size_t>(i)}, nullptr);
    report(options, "layer sensitivity", i + 2, n + 1);
  }

  // Float fallback: drop the most sensitive layer (by the budget's metric, then by rel L2)
  // until the budget is met.
  std::vector<size_t> order = all;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Agreement& x = result.layers[a].alone;
    const Agreement& y = result.layers[b].alone;
    if (result.classifier && x.top1_drop != y.top1_drop) return x.top1_drop > y.top1_drop;
    return x.rel_l2 > y.rel_l2;
  });
  std::vector<size_t> int8 = all;
  result.final = result.all_int8;
  size_t dropped = 0;
  while (dropped < order.size() && !within_budget(result.final, result.classifier, options)) {
    report(options, "float fallback", static_cast<int>(dropped), n);
    int8.erase(std::find(int8.begin(), int8.end(), order[dropped++]));
    result.final = evaluate(int8, &result.model_bytes);
  }
  report(options, "float fallback", n, n);
  // Not every layer dropped on the way needs to stay float: the metric moves in steps (one
  // row of the calibration set), and the last one dropped may be the one that mattered. Each
  // goes back to int8, least sensitive first, where the budget still holds with it.
  if (dropped > 1 && within_budget(result.final, result.classifier, options)) {
    const int tries = static_cast<int>(dropped - 1);
    for (int k = 0; k < tries; ++k) {
      report(options, "back to int8", k, tries);
      std::vector<size_t> trial = int8;
      trial.push_back(order[dropped - 2 - static_cast<size_t>(k)]);
      std::string bytes;
      const Agreement a = evaluate(trial, &bytes);
      if (!within_budget(a, result.classifier, options)) continue;
      int8 = std::move(trial);
      result.final = a;
      result.model_bytes = std::move(bytes);
    }
    report(options, "back to int8", tries, tries);
  }
  std::set<std::string> inputs;
  for (size_t i : int8) {
    result.layers[i].int8 = true;
    inputs.insert(layers[i].activation);
  }
  for (const std::string& v : onnx::quantized_values(result.model_bytes, path))
    if (!inputs.count(v)) result.also_quantized.push_back(v);
  return result;
}

}  // namespace tessel::quantize
