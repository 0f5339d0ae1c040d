// cuDNN's int8 convolution baseline, built with the graph API's backend descriptors: tensors,
// the convolution and pointwise operations, the operation graph, the engine heuristics' configs,
// execution plans, and a variant pack per run.
#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "bench/baselines.h"
#include "bench/library_calls.h"

namespace tessel::bench {
namespace {

namespace rt = device;

// Unique ids of the graph's tensors: the ones a variant pack names, then the virtual ones.
enum Uid : int64_t { kX = 1, kW, kY, kScale, kBias, kAcc = 10, kScaled, kBiased };

// Byte alignment promised for every tensor in memory: operand sets start 256-byte aligned
// (bench.cc), and the epilogue vectors are allocations of their own.
constexpr int64_t kAlignment = 16;
// Plans the heuristics rank first that are built and timed before the fastest is kept; each
// runtime-compiled one costs a compilation, so the search stays short.
constexpr int kMaxTimedPlans = 6;
constexpr int kMaxConfigsTried = 12;  // configs that fail to build count too
constexpr int64_t kMaxWorkspace = int64_t{1} << 30;

// cuDNN's own account of the last failure in this thread, where it kept one.
std::string last_error() {
  std::array<char, 1024> buf{};
  cudnnGetLastErrorString(buf.data(), buf.size());
  return std::string(buf.data());
}

std::string status_text(cudnnStatus_t s) {
  std::string text = cudnnGetErrorString(s);
  const std::string detail = last_error();
  if (!detail.empty()) text += " (" + detail.substr(0, 300) + ")";
  return text;
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    TESSEL_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  // Where cudnnBackendGetAttribute writes a descriptor into one created beforehand.
  cudnnBackendDescriptor_t* slot() { return &d_; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* value, const char* what) const {
    const cudnnStatus_t s = cudnnBackendSetAttribute(d_, name, type, count, value);
    if (s != CUDNN_STATUS_SUCCESS)
      throw LibraryError(std::string("cuDNN: setting ") + what + " failed: " + status_text(s));
  }
  void set(cudnnBackendAttributeName_t name, const Desc& value, const char* what) const {
    cudnnBackendDescriptor_t raw = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, what);
  }
  void finalize(const char* what) const {
    const cudnnStatus_t s = cudnnBackendFinalize(d_);
    if (s != CUDNN_STATUS_SUCCESS)
      throw LibraryError(std::string("cuDNN: ") + what + " did not finalize: " + status_text(s));
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

#define TESSEL_SET(desc, attr, type, count, value) (desc).set(attr, type, count, value, #attr)
#define TESSEL_SET_DESC(desc, attr, value) (desc).set(attr, value, #attr)

// A tensor of logical dimensions [N, C, H, W] laid out NHWC (for a filter [K, C, R, S]: KRSC;
// for a per-channel vector [1, K, 1, 1]: K contiguous values).
Desc nhwc_tensor(int64_t uid, cudnnDataType_t type, const std::array<int64_t, 4>& dims,
                 bool is_virtual) {
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  const std::array<int64_t, 4> strides = {c * h * w, 1, w * c, c};
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  TESSEL_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  TESSEL_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  TESSEL_SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  TESSEL_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  TESSEL_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment);
  const bool v = is_virtual;
  TESSEL_SET(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  t.finalize("a tensor descriptor");
  return t;
}

// y = op(x [, b]) in fp32 arithmetic.
Desc pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y,
               std::deque<Desc>& keep) {
  Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  TESSEL_SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  TESSEL_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  pw.finalize("a pointwise descriptor");
  Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  TESSEL_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  TESSEL_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b) TESSEL_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  TESSEL_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  op.finalize("a pointwise operation");
  keep.push_back(std::move(pw));
  return op;
}

// The graphs tried, best first. A later one is tried only where no engine builds an earlier.
struct Variant {
  Int8Output output;
  cudnnDataType_t accumulator;  // the convolution's output tensor (virtual where fused)
  bool epilogue;
  const char* text;
};
constexpr Variant kVariants[] = {
    {Int8Output::kInt8, CUDNN_DATA_FLOAT, true,
     "conv(int8 x, int8 w; int32 acc) -> fp32 -> mul scale -> add bias -> relu -> int8"},
    {Int8Output::kInt8, CUDNN_DATA_INT32, true,
     "conv(int8 x, int8 w; int32 acc) -> int32 -> mul scale -> add bias -> relu -> int8"},
    {Int8Output::kFloat, CUDNN_DATA_FLOAT, true,
     "conv(int8 x, int8 w; int32 acc) -> mul scale -> add bias -> relu -> fp32 "
     "(no engine built the int8 output)"},
    {Int8Output::kInt32, CUDNN_DATA_INT32, false,
     "conv(int8 x, int8 w; int32 acc) -> int32 (no engine built a fused epilogue)"},
};

cudnnDataType_t output_type(Int8Output o) {
  switch (o) {
    case Int8Output::kInt8:
      return CUDNN_DATA_INT8;
    case Int8Output::kFloat:
      return CUDNN_DATA_FLOAT;
    case Int8Output::kInt32:
      return CUDNN_DATA_INT32;
  }
  return CUDNN_DATA_INT8;
}

// The operation graph of one variant, with every descriptor it refers to and the engine
// configs offered for it. Plans share it: each keeps it alive as long as the plan lives.
struct Graph {
  std::deque<Desc> parts;  // a deque: references to its elements stay valid as it grows
  Desc graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
  std::vector<Desc> configs;
};

std::shared_ptr<Graph> build_graph(const ConvWorkload& c, const Variant& v, cudnnHandle_t h) {
  auto g = std::make_shared<Graph>();
  std::deque<Desc>& parts = g->parts;
  const std::array<int64_t, 4> x_dims = {c.n, c.ci, c.h, c.w};
  const std::array<int64_t, 4> w_dims = {c.co, c.ci, c.kh, c.kw};
  const std::array<int64_t, 4> y_dims = {c.n, c.co, c.oh(), c.ow()};
  const std::array<int64_t, 4> channel_dims = {1, c.co, 1, 1};
  const Desc& x = parts.emplace_back(nhwc_tensor(kX, CUDNN_DATA_INT8, x_dims, false));
  const Desc& w = parts.emplace_back(nhwc_tensor(kW, CUDNN_DATA_INT8, w_dims, false));
  const Desc& y = parts.emplace_back(nhwc_tensor(kY, output_type(v.output), y_dims, false));
  // The convolution writes y itself, or a virtual accumulator that the epilogue reads.
  const Desc& conv_out =
      v.epilogue ? parts.emplace_back(nhwc_tensor(kAcc, v.accumulator, y_dims, true)) : y;

  Desc& conv = parts.emplace_back(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_INT32;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  const std::array<int64_t, 2> dilation = {c.dilation, c.dilation};
  const std::array<int64_t, 2> stride = {c.stride, c.stride};
  const std::array<int64_t, 2> pad = {c.pad, c.pad};
  TESSEL_SET(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  TESSEL_SET(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  TESSEL_SET(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
  TESSEL_SET(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation.data());
  TESSEL_SET(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride.data());
  TESSEL_SET(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data());
  TESSEL_SET(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data());
  conv.finalize("the convolution descriptor");

  Desc& fprop = parts.emplace_back(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.0f, beta = 0.0f;  // float scaling factors for any non-double compute type
  TESSEL_SET_DESC(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  TESSEL_SET_DESC(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  TESSEL_SET_DESC(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, conv_out);
  TESSEL_SET_DESC(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  TESSEL_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  TESSEL_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  fprop.finalize("the convolution operation");

  std::vector<cudnnBackendDescriptor_t> ops = {fprop.get()};
  if (v.epilogue) {
    const Desc& scale =
        parts.emplace_back(nhwc_tensor(kScale, CUDNN_DATA_FLOAT, channel_dims, false));
    const Desc& bias =
        parts.emplace_back(nhwc_tensor(kBias, CUDNN_DATA_FLOAT, channel_dims, false));
    const Desc& scaled = parts.emplace_back(nhwc_tensor(kScaled, CUDNN_DATA_FLOAT, y_dims, true));
    const Desc& biased = parts.emplace_back(nhwc_tensor(kBiased, CUDNN_DATA_FLOAT, y_dims, true));
    ops.push_back(
        parts.emplace_back(pointwise(CUDNN_POINTWISE_MUL, conv_out, &scale, scaled, parts)).get());
    ops.push_back(
        parts.emplace_back(pointwise(CUDNN_POINTWISE_ADD, scaled, &bias, biased, parts)).get());
    ops.push_back(
        parts.emplace_back(pointwise(CUDNN_POINTWISE_RELU_FWD, biased, nullptr, y, parts)).get());
  }
  TESSEL_SET(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
             static_cast<int64_t>(ops.size()), ops.data());
  TESSEL_SET(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  g->graph.finalize("the operation graph");
  return g;
}

// The engine configs that a heuristic mode offers for a graph, best first.
std::vector<Desc> engine_configs(const Desc& graph, cudnnBackendHeurMode_t mode) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  TESSEL_SET_DESC(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  TESSEL_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heur.finalize("the engine heuristics");
  int64_t count = 0;
  TESSEL_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Desc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (count > 0) {
    TESSEL_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                                raw.data()));
  }
  configs.erase(configs.begin() + std::clamp<int64_t>(returned, 0, count), configs.end());
  return configs;
}

// "engine 3 (runtime-compiled, tensor-core)"; "engine ?" where cuDNN does not say.
std::string engine_name(const Desc& config) {
  try {
    Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 engine.slot()) != CUDNN_STATUS_SUCCESS)
      return "engine ?";
    int64_t index = -1;
    cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                             &index);
    std::vector<std::string> notes;
    std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behavior{};
    if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                 CUDNN_TYPE_BEHAVIOR_NOTE, behavior.size(), &n,
                                 behavior.data()) == CUDNN_STATUS_SUCCESS) {
      for (int64_t i = 0; i < std::min<int64_t>(n, behavior.size()); ++i)
        if (behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
          notes.push_back("runtime-compiled");
    }
    std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> numerical{};
    if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                 CUDNN_TYPE_NUMERICAL_NOTE, numerical.size(), &n,
                                 numerical.data()) == CUDNN_STATUS_SUCCESS) {
      for (int64_t i = 0; i < std::min<int64_t>(n, numerical.size()); ++i)
        if (numerical[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) notes.push_back("tensor-core");
    }
    std::string name = "engine " + std::to_string(index);
    for (size_t i = 0; i < notes.size(); ++i) name += (i ? ", " : " (") + notes[i];
    return notes.empty() ? name : name + ")";
  } catch (const LibraryError&) {
    return "engine ?";
  }
}

// One run of a plan on `o`, on the stream set on the handle.
void execute(cudnnHandle_t h, const Desc& plan, bool epilogue, const Operands& o,
             uint64_t workspace) {
  std::vector<int64_t> uids = {kX, kW, kY};
  std::vector<void*> ptrs = {reinterpret_cast<void*>(o.a), reinterpret_cast<void*>(o.b),
                             reinterpret_cast<void*>(o.c)};
  if (epilogue) {
    uids.insert(uids.end(), {kScale, kBias});
    ptrs.insert(ptrs.end(), {reinterpret_cast<void*>(o.scale), reinterpret_cast<void*>(o.bias)});
  }
  void* ws = reinterpret_cast<void*>(workspace);
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  TESSEL_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
             static_cast<int64_t>(uids.size()), uids.data());
  TESSEL_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(ptrs.size()), ptrs.data());
  TESSEL_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  pack.finalize("the variant pack");
  const cudnnStatus_t s = cudnnBackendExecute(h, plan.get(), pack.get());
  if (s != CUDNN_STATUS_SUCCESS)
    throw LibraryError("cuDNN: cudnnBackendExecute failed: " + status_text(s));
}

}  // namespace

struct CudnnInt8Conv::Plan {
  std::shared_ptr<const Graph> graph;  // what the plan refers to
  Desc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  bool epilogue = true;
};

std::optional<std::string> cudnn_int8_refusal(const ConvWorkload& w) {
  if (w.groups != 1) {
    return "groups=" + std::to_string(w.groups) +
           ": the cuDNN int8 baseline builds ungrouped convolutions only";
  }
  for (const auto& [name, channels] : {std::pair{"ci", w.ci}, std::pair{"co", w.co}}) {
    if (channels % 4 != 0) {
      return std::string(name) + "=" + std::to_string(channels) +
             " is not a multiple of 4: cuDNN's int8 convolutions read and write NHWC int8 in "
             "4-channel vectors";
    }
  }
  return std::nullopt;
}

CudnnInt8Conv::CudnnInt8Conv(const ConvWorkload& c, const Operands& operands) {
  if (const std::optional<std::string> why = cudnn_int8_refusal(c)) throw LibraryError(*why);
  cudnnHandle_t h = cudnn_handle();
  // The handle keeps the stream of the last enqueue, which may be a graph's stream destroyed
  // since; the search runs on the default stream.
  TESSEL_CUDNN_CHECK(cudnnSetStream(h, nullptr));
  std::ostringstream search;
  float best_ms = 0;
  for (const Variant& v : kVariants) {
    search << (&v == kVariants ? "" : " | ") << v.text << ":";
    std::shared_ptr<Graph> graph;
    try {
      graph = build_graph(c, v, h);
      graph->configs = engine_configs(graph->graph, CUDNN_HEUR_MODE_A);
      if (graph->configs.empty())
        graph->configs = engine_configs(graph->graph, CUDNN_HEUR_MODE_FALLBACK);
    } catch (const LibraryError& e) {
      search << " " << e.what() << ";";
      continue;
    }
    if (graph->configs.empty()) search << " the heuristics offer no engine;";

    // Build plans in the heuristics' order; time the first few that build, keep the fastest.
    int timed = 0, tried = 0;
    for (const Desc& config : graph->configs) {
      if (timed == kMaxTimedPlans || tried == kMaxConfigsTried) break;
      ++tried;
      const std::string engine = engine_name(config);
      search << " " << engine << ":";
      try {
        auto plan = std::make_unique<Plan>();
        plan->graph = graph;
        plan->epilogue = v.epilogue;
        TESSEL_SET(plan->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
        TESSEL_SET_DESC(plan->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
        plan->plan.finalize("the execution plan");
        int64_t bytes = 0, n = 0;
        TESSEL_CUDNN_CHECK(cudnnBackendGetAttribute(plan->plan.get(),
                                                    CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                    CUDNN_TYPE_INT64, 1, &n, &bytes));
        if (bytes > kMaxWorkspace) {
          search << " workspace " << bytes << " B, over the cap;";
          continue;
        }
        rt::DeviceBuffer workspace(static_cast<size_t>(bytes));
        const std::vector<float> ms = rt::time_with_events(
            [&](void* stream) {
              TESSEL_CUDNN_CHECK(cudnnSetStream(h, static_cast<cudaStream_t>(stream)));
              execute(h, plan->plan, plan->epilogue, operands, workspace.ptr());
            },
            /*warmup=*/1, /*reps=*/3);
        ++timed;
        search << " " << ms.front() << " ms, workspace " << bytes << " B;";
        if (!plan_ || ms.front() < best_ms) {
          best_ms = ms.front();
          plan_ = std::move(plan);
          workspace_ = std::move(workspace);
          algorithm_ = engine + ", workspace " + std::to_string(bytes) + " B";
          output_ = v.output;
          variant_ = v.text;
        }
      } catch (const LibraryError& e) {
        search << " " << e.what() << ";";
      }
    }
    if (plan_) break;  // a later variant computes less: never preferred, whatever its speed
  }
  TESSEL_CUDNN_CHECK(cudnnSetStream(h, nullptr));
  search_ = search.str();
  if (!plan_) {
    throw LibraryError("cuDNN has no int8 engine for " + c.name + " (" + c.shape() +
                       "): " + search_);
  }
}

CudnnInt8Conv::~CudnnInt8Conv() = default;

void CudnnInt8Conv::enqueue(const Operands& o, void* stream) const {
  cudnnHandle_t h = cudnn_handle();
  TESSEL_CUDNN_CHECK(cudnnSetStream(h, static_cast<cudaStream_t>(stream)));
  execute(h, plan_->plan, plan_->epilogue, o, workspace_.ptr());
}

}  // namespace tessel::bench
