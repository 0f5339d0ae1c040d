// Loading models and the helpers the commands share.
#include <random>

#include "cli/commands.h"
#include "core/error.h"

namespace tessel::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o, const std::string& what) {
  cmd.add_option("model", o.path, what)->required();
  cmd.add_option("--batch", o.batch,
                 o.takes_range
                     ? "batch size for inputs whose first dimension is symbolic, or a range "
                       "such as 1:64 (a dynamic-batch engine)"
                     : "batch size for inputs whose first dimension is symbolic");
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


}  // namespace

void add_profile_every_option(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("--profile-every", o.profile_every,
                 "with a batch range: also a profile at every multiple of N, so that a batch "
                 "between profiles is padded by fewer than N rows (more compile time)");
}

void add_tuning_db_option(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("--db", o.tuning_db,
                 "tuning database (tessel tune): its measured schedules replace the cost "
                 "model's picks where they match");
}

Options model_api_options(const ModelOptions& o) {
  Options opts;
  if (!o.batch.empty()) {
    const BatchRange r = parse_batch_range(o.batch, "--batch");
    if (o.batch.find(':') == std::string::npos)
      opts.batch = r.min;
    else
      opts.batch_range = r;
  }
  if (o.opt_batch != 0) {
    TESSEL_USER_CHECK(!opts.batch_range.empty())
        << "--opt-batch " << o.opt_batch << ": it applies to a batch range such as --batch 1:64";
    opts.batch_range.opt = o.opt_batch;
    check_batch_range(opts.batch_range, "--batch " + o.batch + " --opt-batch " +
                                            std::to_string(o.opt_batch));
  }
  if (o.profile_every != 0) {
    TESSEL_USER_CHECK(!opts.batch_range.empty())
        << "--profile-every " << o.profile_every
        << ": it applies to a batch range such as --batch 1:64";
    opts.batch_range.every = o.profile_every;
    check_batch_range(opts.batch_range,
                      "--batch " + o.batch + " --profile-every " + std::to_string(o.profile_every));
  }
  if (!opts.batch_range.empty() && opts.batch_range.opt == 0)
    opts.batch_range.opt = opts.batch_range.max;
  opts.tuning_db = o.tuning_db;
  for (const std::string& spec : o.input_shapes) {
    size_t eq = spec.find('=');
    TESSEL_USER_CHECK(eq != std::string::npos && eq > 0)
        << "--input-shape '" << spec << "': expected name=1x3x224x224";
    opts.input_shapes[spec.substr(0, eq)] = parse_dims(spec.substr(eq + 1), "--input-shape");
  }
  return opts;
}

void refuse_batch_range(const Options& options) {
  const BatchRange& r = options.batch_range;
  TESSEL_USER_CHECK(r.empty()) << "--batch " << r.min << ":" << r.max
                               << ": this command takes one batch such as --batch " << r.opt
                               << "; a batch range (dynamic batch) is for tessel compile";
}

ir::Graph load_model(const ModelOptions& o) {
  Options options = model_api_options(o);
  if (!o.takes_range) refuse_batch_range(options);
  if (!options.batch_range.empty()) {
    options.batch = options.batch_range.opt;
    options.batch_range = {};
  }
  return load_graph(o.path, options);
}

CLI::Option* add_precision_option(CLI::App& cmd, std::string& precision) {
  return cmd.add_option("--precision", precision, "GPU storage precision: fp16 or fp32")
      ->check(CLI::IsMember({"fp16", "fp32"}));
}

Precision parse_precision(const std::string& precision) {
  return precision == "fp32" ? Precision::kFp32 : Precision::kFp16;
}

Tensor random_tensor(const ir::TensorType& t, std::mt19937_64& rng) {
  return random_uniform(t.dtype, t.shape, rng());
}

}  // namespace tessel::cli
