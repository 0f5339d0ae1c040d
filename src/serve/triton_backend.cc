// tessel as a backend of Triton Inference Server: libtriton_tessel.so, loaded into the server
// process itself for a model whose config.pbtxt says `backend: "tessel"`.
//
// One tessel::Session per model instance (on the instance's GPU, or the CPU reference), opened
// from the model file the config's parameters name: a dynamic-batch engine for batches 1 to
// max_batch_size, or an engine file (.tsl) as it was compiled. Triton's dynamic batcher hands
// an instance a list of requests; their inputs are read where Triton holds them (the request
// body, the client's system shared memory, or its CUDA shared memory on a GPU) and run as one
// batch with Session::submit, which stages each request's rows into the engine's input: no
// stub process, no copy of the batch on the host. Batches pipeline: execute() submits a batch
// and returns once the batch before it has finished, and the instance's responder thread
// collects each and answers each request with its rows of the outputs, so that the next batch
// is formed, staged and uploaded while this one computes. A request tessel cannot run (a type, shape or memory Triton let through that the
// model does not take) is answered with one error line and the others still run.
//
// Config parameters (string values): model_file (in the version directory; required), device
// (cuda | cpu; default cuda), precision (fp16 | fp32; default fp16), profile_every (a profile
// at each multiple of it too; default 0, none; these two for models, not engine files) and
// pipeline (2: batches overlap, the default; 1: each batch answered before execute() returns).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "serve/batch_clock.h"
#include "serve/triton_api.h"
#include "tessel/tessel.h"

namespace tessel::serve {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

void log_line(TRITONSERVER_LogLevel level, const std::string& message) {
  if (TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, message.c_str()))
    TRITONSERVER_ErrorDelete(e);
}

// A Triton call that failed: its error (owned) travels as an exception to the entry point.
struct TritonFailure {
  TRITONSERVER_Error* error;
};
void check(TRITONSERVER_Error* e) {
  if (e) throw TritonFailure{e};
}

// What a request did wrong, answered to that request only.
struct RequestError {
  std::string message;
};

// Runs `body`; what it throws becomes the Triton error the entry point returns (tessel's
// one-line messages as they are).
template <class F>
TRITONSERVER_Error* guarded(F&& body) {
  try {
    body();
    return nullptr;
  } catch (TritonFailure& f) {
    return f.error;
  } catch (const UserError& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, first_line(e.what()).c_str());
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, first_line(e.what()).c_str());
  }
}

std::optional<TRITONSERVER_DataType> triton_type(DType t) {
  switch (t) {
    case DType::kF32:
      return TRITONSERVER_TYPE_FP32;
    case DType::kF16:
      return TRITONSERVER_TYPE_FP16;
    case DType::kBF16:
      return TRITONSERVER_TYPE_BF16;
    case DType::kF64:
      return TRITONSERVER_TYPE_FP64;
    case DType::kI8:
      return TRITONSERVER_TYPE_INT8;
    case DType::kU8:
      return TRITONSERVER_TYPE_UINT8;
    case DType::kI32:
      return TRITONSERVER_TYPE_INT32;
    case DType::kI64:
      return TRITONSERVER_TYPE_INT64;
    case DType::kBool:
      return TRITONSERVER_TYPE_BOOL;
  }
  return std::nullopt;
}

// ---- The model: its config --------------------------------------------------------------

struct Model {
  std::string name;
  std::string path;  // the model file: <repository>/<version>/<model_file>
  Options options;   // device and precision; the batch range set per instance
  int64_t profile_every = 0;
  int64_t max_batch = 0;  // max_batch_size; 0: the model has no batch axis for Triton
  bool pipeline = true;   // batches answered by the responder thread
};

std::unique_ptr<Model> read_model(TRITONBACKEND_Model* handle) {
  auto m = std::make_unique<Model>();
  const char* name = nullptr;
  check(TRITONBACKEND_ModelName(handle, &name));
  m->name = name;
  TRITONSERVER_Message* message = nullptr;
  check(TRITONBACKEND_ModelConfig(handle, 1, &message));
  const char* text = nullptr;
  size_t bytes = 0;
  TRITONSERVER_Error* e = TRITONSERVER_MessageSerializeToJson(message, &text, &bytes);
  nlohmann::json config;
  if (!e) config = nlohmann::json::parse(std::string(text, bytes), nullptr, false);
  if (TRITONSERVER_Error* d = TRITONSERVER_MessageDelete(message)) TRITONSERVER_ErrorDelete(d);
  check(e);

  auto parameter = [&](const char* key) -> std::optional<std::string> {
    const nlohmann::json* p = nullptr;
    if (config.is_object() && config.contains("parameters") && config["parameters"].contains(key))
      p = &config["parameters"][key];
    if (!p || !p->contains("string_value") || !(*p)["string_value"].is_string())
      return std::nullopt;
    return (*p)["string_value"].get<std::string>();
  };
  const std::optional<std::string> file = parameter("model_file");
  TESSEL_USER_CHECK(file && !file->empty())
      << "model '" << m->name << "': config.pbtxt needs parameters { key: \"model_file\" value: "
      << "{ string_value: \"model.onnx\" } } naming the model in the version directory";
  const char* repository = nullptr;
  TRITONBACKEND_ArtifactType artifact;
  check(TRITONBACKEND_ModelRepository(handle, &artifact, &repository));
  uint64_t version = 0;
  check(TRITONBACKEND_ModelVersion(handle, &version));
  m->path = std::string(repository) + "/" + std::to_string(version) + "/" + *file;

  const std::string device = parameter("device").value_or("cuda");
  TESSEL_USER_CHECK(device == "cuda" || device == "cpu")
      << "model '" << m->name << "': parameter device '" << device << "', expected cuda or cpu";
  m->options.device = device == "cuda" ? Device::kCuda : Device::kCpu;
  const std::string precision = parameter("precision").value_or("fp16");
  TESSEL_USER_CHECK(precision == "fp16" || precision == "fp32")
      << "model '" << m->name << "': parameter precision '" << precision
      << "', expected fp16 or fp32";
  m->options.precision = precision == "fp16" ? Precision::kFp16 : Precision::kFp32;
  const std::string every = parameter("profile_every").value_or("0");
  char* end = nullptr;
  m->profile_every = std::strtoll(every.c_str(), &end, 10);
  TESSEL_USER_CHECK(!every.empty() && *end == '\0' && m->profile_every >= 0)
      << "model '" << m->name << "': parameter profile_every '" << every
      << "', expected a batch step such as 8 (0: none)";
  const std::string pipeline = parameter("pipeline").value_or("2");
  TESSEL_USER_CHECK(pipeline == "1" || pipeline == "2")
      << "model '" << m->name << "': parameter pipeline '" << pipeline
      << "', expected 2 (batches overlap) or 1 (one at a time)";
  m->pipeline = pipeline == "2";
  if (config.is_object() && config.contains("max_batch_size") &&
      config["max_batch_size"].is_number_integer())
    m->max_batch = config["max_batch_size"].get<int64_t>();
  return m;
}

// ---- An instance: its session, and one batch of requests -------------------------------

// One request's inputs as pieces of the batch, where Triton holds them (copies only where a
// request's input arrived in chunks that split its rows).
struct Gathered {
  TRITONBACKEND_Request* request = nullptr;
  int64_t rows = 0;
  std::vector<std::vector<Piece>> pieces;      // per input
  std::vector<std::vector<std::byte>> joined;  // storage of chunked inputs
};

// A batch submitted and not yet answered: its requests (with their rows, in batch order), the
// run, the times Triton's statistics want, and when its submit returned.
struct InFlight {
  std::vector<TRITONBACKEND_Request*> requests;
  std::vector<int64_t> rows;
  int64_t batch_rows = 0;
  Session::Pending run;
  uint64_t exec_start = 0, compute_start = 0, submitted = 0;
};

// Where an instance's time goes, logged (Triton's INFO log) about every 5 s while it serves:
// per batch, on the executing thread the gathering of the requests, the staging of the batch,
// the wait for the run before and the batch clock's wait; on the responder the wait for the
// run and the answering of its requests. Sums over the interval, in microseconds.
struct Timings {
  uint64_t since = 0;  // the interval's start
  int64_t batches = 0, requests = 0;
  double gather = 0, stage = 0, wait_before = 0, clock = 0;  // executing thread
  double collect = 0, answer = 0;                            // responder
};

class Instance {
 public:
  Instance(const Model& model, TRITONBACKEND_ModelInstance* handle)
      : model_(model), handle_(handle) {
    Options o = model.options;
    if (o.device == Device::kCuda) {
      TRITONSERVER_InstanceGroupKind kind;
      check(TRITONBACKEND_ModelInstanceKind(handle, &kind));
      int32_t id = 0;
      check(TRITONBACKEND_ModelInstanceDeviceId(handle, &id));
      o.gpu = kind == TRITONSERVER_INSTANCEGROUPKIND_GPU ? id : 0;
    }
    const bool engine_file = is_engine_file(model.path);
    if (!engine_file && model.max_batch > 1) {
      o.batch_range = {1, model.max_batch, model.max_batch, model.profile_every};
    } else if (!engine_file && model.max_batch == 1) {
      o.batch = 1;
    }
    session_ = std::make_unique<Session>(Session::open(model.path, o));
    TESSEL_USER_CHECK(!engine_file || model.max_batch <= session_->batch_range().max)
        << "model '" << model.name << "': max_batch_size " << model.max_batch << " is more than "
        << model.path << " runs (it was compiled for batches " << session_->batch_range().min
        << " to " << session_->batch_range().max << ")";
    for (const TensorInfo& t : session_->inputs()) {
      TESSEL_USER_CHECK(triton_type(t.dtype))
          << "model '" << model.name << "': input '" << t.name << "' is " << dtype_name(t.dtype)
          << ", which Triton has no type for";
      TESSEL_USER_CHECK(model.max_batch == 0 || !t.shape.empty())
          << "model '" << model.name << "': input '" << t.name
          << "' has no batch axis: set max_batch_size: 0";
    }
    min_batch_ = model.max_batch > 0 ? std::max<int64_t>(session_->batch_range().min, 1) : 1;
    clock_ = BatchClock(std::max<int64_t>({model.max_batch, min_batch_, 1}));
    const char* name = nullptr;
    check(TRITONBACKEND_ModelInstanceName(handle, &name));
    name_ = name ? name : model.name;
    if (model.pipeline) responder_ = std::thread([this] { respond_loop(); });
  }

  // Answers what is still in flight, then stops the responder.
  ~Instance() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (responder_.joinable()) responder_.join();
  }

  // Submits the requests as one batch (each, without a batch axis); every request is answered
  // and released, here where it cannot run or without the pipeline, else by the responder.
  void execute(TRITONBACKEND_Request** requests, uint32_t count) {
    const uint64_t exec_start = now_ns();
    std::vector<Gathered> batch;
    for (uint32_t i = 0; i < count; ++i) {
      try {
        batch.push_back(gather(requests[i]));
      } catch (const RequestError& e) {
        finish(requests[i], e.message, exec_start, exec_start, exec_start);
      } catch (TritonFailure& f) {
        finish(requests[i], take(f.error), exec_start, exec_start, exec_start);
      } catch (const std::exception& e) {
        finish(requests[i], first_line(e.what()), exec_start, exec_start, exec_start);
      }
    }
    if (batch.empty()) return;
    if (model_.max_batch == 0) {  // no batch axis: each request is a run of its own
      for (Gathered& g : batch) submit({&g}, exec_start);
      return;
    }
    std::vector<Gathered*> all;
    for (Gathered& g : batch) all.push_back(&g);
    submit(all, exec_start);
  }

 private:
  Gathered gather(TRITONBACKEND_Request* request) {
    Gathered g;
    g.request = request;
    const std::vector<TensorInfo>& inputs = session_->inputs();
    g.pieces.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorInfo& want = inputs[i];
      TRITONBACKEND_Input* input = nullptr;
      check(TRITONBACKEND_RequestInput(request, want.name.c_str(), &input));
      const char* name = nullptr;
      TRITONSERVER_DataType type;
      const int64_t* dims = nullptr;
      uint32_t rank = 0, buffers = 0;
      uint64_t bytes = 0;
      check(TRITONBACKEND_InputProperties(input, &name, &type, &dims, &rank, &bytes, &buffers));
      const Shape shape(dims, dims + rank);
      if (type != *triton_type(want.dtype))
        throw RequestError{"input '" + want.name + "' is " + TRITONSERVER_DataTypeString(type) +
                           ", the model takes " +
                           TRITONSERVER_DataTypeString(*triton_type(want.dtype))};
      // With a batch axis the request's rows lead; the rest is the model's.
      const bool batched = model_.max_batch > 0;
      const bool fits = batched
                            ? shape.size() == want.shape.size() && !shape.empty() && shape[0] > 0 &&
                                  std::equal(shape.begin() + 1, shape.end(), want.shape.begin() + 1)
                            : shape == want.shape;
      if (!fits) {
        Shape expected = want.shape;
        if (batched) expected[0] = -1;
        throw RequestError{"input '" + want.name + "' has shape " + shape_str(shape) +
                           ", the model takes " + shape_str(expected)};
      }
      const int64_t rows = batched ? shape[0] : 1;
      if (i == 0) {
        g.rows = rows;
      } else if (rows != g.rows) {
        throw RequestError{"input '" + want.name + "' has " + std::to_string(rows) +
                           " rows, input '" + inputs[0].name + "' " + std::to_string(g.rows)};
      }
      const uint64_t row_bytes = bytes / static_cast<uint64_t>(shape.empty() ? 1 : shape[0]);
      struct Chunk {
        const void* data;
        uint64_t bytes;
        bool gpu;
      };
      std::vector<Chunk> chunks;
      bool whole_rows = true;
      for (uint32_t k = 0; k < buffers; ++k) {
        const void* data = nullptr;
        uint64_t size = 0;
        TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
        int64_t memory_id = 0;
        check(TRITONBACKEND_InputBuffer(input, k, &data, &size, &memory, &memory_id));
        const bool gpu = memory == TRITONSERVER_MEMORY_GPU;
        if (gpu && session_->device() != Device::kCuda)
          throw RequestError{"input '" + want.name +
                             "' is in GPU memory (CUDA shared memory): this model runs on the "
                             "CPU and reads inputs from host memory (the request body or "
                             "system shared memory)"};
        chunks.push_back({data, size, gpu});
        whole_rows = whole_rows && row_bytes > 0 && size % row_bytes == 0;
      }
      if (chunks.size() == 1 && chunks[0].bytes == bytes) {
        g.pieces[i].push_back({chunks[0].data, want.dtype, shape, chunks[0].gpu});
      } else if (batched && whole_rows) {
        for (const Chunk& c : chunks) {
          Shape s = shape;
          s[0] = static_cast<int64_t>(c.bytes / row_bytes);
          if (s[0] > 0) g.pieces[i].push_back({c.data, want.dtype, s, c.gpu});
        }
      } else {  // one piece in host memory: the chunks joined
        std::vector<std::byte>& joined = g.joined.emplace_back(bytes);
        uint64_t at = 0;
        for (const Chunk& c : chunks) {
          const uint64_t n = std::min(c.bytes, bytes - at);
          if (c.gpu) {
            copy_memory(joined.data() + at, c.data, n);
          } else {
            std::memcpy(joined.data() + at, c.data, n);
          }
          at += n;
        }
        g.pieces[i].push_back({joined.data(), want.dtype, shape});
      }
    }
    return g;
  }

  // Submits one run of the gathered requests (padded up to the session's smallest batch); its
  // answer is the responder's, or given here without the pipeline.
  void submit(const std::vector<Gathered*>& requests, uint64_t exec_start) {
    const std::vector<TensorInfo>& inputs = session_->inputs();
    std::vector<std::vector<Piece>> pieces(inputs.size());
    InFlight f;
    f.exec_start = exec_start;
    int64_t rows = 0;
    for (const Gathered* g : requests) {
      rows += g->rows;
      f.requests.push_back(g->request);
      f.rows.push_back(g->rows);
      for (size_t i = 0; i < inputs.size(); ++i)
        pieces[i].insert(pieces[i].end(), g->pieces[i].begin(), g->pieces[i].end());
    }
    std::vector<std::vector<std::byte>> padding;
    if (rows < min_batch_) {  // an engine file whose range starts above this batch
      for (size_t i = 0; i < inputs.size(); ++i) {
        Shape s = inputs[i].shape;
        s[0] = min_batch_ - rows;
        size_t bytes = dtype_size(inputs[i].dtype);
        for (int64_t d : s) bytes *= static_cast<size_t>(d);
        padding.emplace_back(bytes);
        pieces[i].push_back({padding.back().data(), inputs[i].dtype, s});
      }
    }
    f.compute_start = now_ns();
    try {
      f.run = session_->submit(pieces);
    } catch (const std::exception& e) {
      const std::string failure = first_line(e.what());
      for (TRITONBACKEND_Request* r : f.requests)
        finish(r, failure, exec_start, f.compute_start, now_ns());
      return;
    }
    f.submitted = now_ns();
    f.batch_rows = std::max(rows, min_batch_);
    bool host_pieces = false;
    for (const std::vector<Piece>& input : pieces)
      for (const Piece& p : input) host_pieces = host_pieces || !p.on_device;
    if (!model_.pipeline) return answer(std::move(f));
    // Back to Triton once the run before this one is done; for a batch in GPU memory (CUDA
    // shared memory), not before this one is about a staging time from done (BatchClock). A
    // batch of host memory is handed back at once: its staging (several threads' memcpy, which
    // share the cores with the server's HTTP threads) varies too much to cut it fine, and
    // overlapping all of it with the GPU pays more than a larger batch (on two H200s of one
    // host, ResNet-50 at 64 clients: 16,640 images/s handed back at once, 14,868 by the clock;
    // in CUDA shared memory 16,764 at once, 18,272 by the clock).
    const int64_t batch_rows = f.batch_rows;
    const uint64_t submitted = f.submitted, compute_start = f.compute_start;
    const size_t requested = f.requests.size();
    std::unique_lock lock(mutex_);
    clock_.staged(batch_rows, static_cast<double>(submitted - compute_start) * 1e-3);
    if (returned_) clock_.formed(static_cast<double>(compute_start - returned_) * 1e-3);
    in_flight_.push_back(std::move(f));
    ++running_;
    wake_.notify_all();
    ran_.wait(lock, [&] { return running_ <= 1; });
    const uint64_t before_done = now_ns();
    const uint64_t form = clock_.form_next_ns(batch_rows, std::max(submitted, last_done_));
    if (!host_pieces && running_ == 1 && form > now_ns())
      ran_.wait_until(lock,
                      std::chrono::steady_clock::time_point(std::chrono::nanoseconds(form)),
                      [&] { return running_ == 0; });
    returned_ = now_ns();
    Timings& t = timings_;
    t.batches += 1;
    t.requests += static_cast<int64_t>(requested);
    t.gather += static_cast<double>(compute_start - exec_start) * 1e-3;
    t.stage += static_cast<double>(submitted - compute_start) * 1e-3;
    t.wait_before += static_cast<double>(before_done - submitted) * 1e-3;
    t.clock += static_cast<double>(returned_ - before_done) * 1e-3;
    if (!t.since) t.since = exec_start;
    if (returned_ - t.since >= kTimingsEveryNs) log_timings();
  }

  // Logs timings_ (under mutex_) and starts the next interval.
  void log_timings() {
    Timings& t = timings_;
    const double per = 1.0 / static_cast<double>(std::max<int64_t>(t.batches, 1));
    char line[400];
    std::snprintf(line, sizeof line,
                  "tessel backend, %s: %.1f s, %lld batches of %.1f requests; per batch, us: "
                  "gather %.0f, stage %.0f, wait for the run before %.0f, batch clock %.0f; "
                  "responder: wait for the run %.0f, answer %.0f",
                  name_.c_str(), static_cast<double>(returned_ - t.since) * 1e-9,
                  static_cast<long long>(t.batches),
                  static_cast<double>(t.requests) * per, t.gather * per, t.stage * per,
                  t.wait_before * per, t.clock * per, t.collect * per, t.answer * per);
    log_line(TRITONSERVER_LOG_INFO, line);
    t = Timings{};
    t.since = returned_;
  }

  // The responder: answers the batches in flight, in order, until stopped with none left.
  void respond_loop() {
    pthread_setname_np(pthread_self(), "tessel-answer");  // as the load generator shows it
    for (;;) {
      InFlight f;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || !in_flight_.empty(); });
        if (in_flight_.empty()) return;
        f = std::move(in_flight_.front());
        in_flight_.pop_front();
        answering_ = now_ns();
      }
      try {
        answer(std::move(f));
      } catch (const std::exception& e) {  // nothing should escape; were it to, keep serving
        log_line(TRITONSERVER_LOG_ERROR, std::string("answering a batch: ") + e.what());
      }
    }
  }

  // Waits for a submitted run and answers each of its requests with its rows of the outputs.
  void answer(InFlight f) {
    std::vector<Tensor> outputs;
    std::string failure;
    try {
      outputs = session_->collect(std::move(f.run));
    } catch (const std::exception& e) {
      failure = first_line(e.what());
    }
    const uint64_t compute_end = now_ns();
    if (model_.pipeline) {
      std::lock_guard lock(mutex_);
      if (failure.empty())  // its GPU time: from when it could start to its end
        clock_.ran(f.batch_rows,
                   static_cast<double>(compute_end - std::max(f.submitted, last_done_)) * 1e-3);
      timings_.collect += static_cast<double>(compute_end - answering_) * 1e-3;
      last_done_ = compute_end;
      --running_;
      ran_.notify_all();
    }
    // Every response filled, the copies into GPU memory made together, then all sent.
    const size_t n = f.requests.size();
    std::vector<TRITONBACKEND_Response*> responses(n, nullptr);
    std::vector<std::string> errors(n, failure);
    std::vector<MemoryCopy> copies;
    std::vector<size_t> copy_of;  // the request each copy answers
    int64_t row = 0;
    for (size_t k = 0; k < n; ++k) {
      if (failure.empty()) {
        const size_t before = copies.size();
        errors[k] = fill(f.requests[k], outputs, row, f.rows[k], &responses[k], &copies);
        copy_of.resize(copies.size(), k);
        if (!errors[k].empty()) copy_of.resize(before), copies.resize(before);
      }
      row += f.rows[k];
    }
    if (!copies.empty()) {
      try {  // into the clients' CUDA shared memory
        copy_memory(copies);
      } catch (const std::exception& e) {
        for (size_t k : copy_of) errors[k] = "an output into GPU memory: " + first_line(e.what());
      }
    }
    for (size_t k = 0; k < n; ++k) {
      if (responses[k] && !errors[k].empty()) report(TRITONBACKEND_ResponseDelete(responses[k]));
      if (responses[k] && errors[k].empty()) {
        if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseSend(
                responses[k], TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr))
          log_line(TRITONSERVER_LOG_ERROR, "sending a response: " + take(e));
      }
      finish(f.requests[k], errors[k], f.exec_start, f.compute_start, compute_end,
             /*responded=*/errors[k].empty());
    }
    if (failure.empty())
      report(TRITONBACKEND_ModelInstanceReportBatchStatistics(
          handle_, static_cast<uint64_t>(row), f.exec_start, f.compute_start, compute_end,
          now_ns()));
    if (model_.pipeline) {
      std::lock_guard lock(mutex_);
      timings_.answer += static_cast<double>(now_ns() - compute_end) * 1e-3;
    }
  }

  // The request's response with its rows [row, row + rows) of each output it asked for, into
  // *filled: "" on success, else why not (and no response). Outputs into host memory are copied
  // here; those into GPU memory are added to `copies`, for the caller to make.
  std::string fill(TRITONBACKEND_Request* request, const std::vector<Tensor>& outputs,
                   int64_t row, int64_t rows, TRITONBACKEND_Response** filled,
                   std::vector<MemoryCopy>* copies) {
    TRITONBACKEND_Response* response = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&response, request)) return take(e);
    const std::vector<TensorInfo>& infos = session_->outputs();
    std::string error;
    uint32_t requested = 0;
    if (TRITONSERVER_Error* e = TRITONBACKEND_RequestOutputCount(request, &requested))
      error = take(e);
    for (uint32_t k = 0; k < requested && error.empty(); ++k) {
      const char* name = nullptr;
      if (TRITONSERVER_Error* e = TRITONBACKEND_RequestOutputName(request, k, &name)) {
        error = take(e);
        break;
      }
      size_t j = 0;
      while (j < infos.size() && infos[j].name != name) ++j;
      if (j == infos.size()) {
        error = std::string("output '") + name + "' is not an output of the model";
        break;
      }
      const Tensor& y = outputs[j];
      Shape shape = y.shape();
      size_t offset = 0, bytes = y.nbytes();
      if (model_.max_batch > 0) {
        const size_t row_bytes = y.nbytes() / static_cast<size_t>(shape[0]);
        offset = row_bytes * static_cast<size_t>(row);
        bytes = row_bytes * static_cast<size_t>(rows);
        shape[0] = rows;
      }
      TRITONBACKEND_Output* output = nullptr;
      if (TRITONSERVER_Error* e =
              TRITONBACKEND_ResponseOutput(response, &output, name, *triton_type(y.dtype()),
                                           shape.data(), static_cast<uint32_t>(shape.size()))) {
        error = take(e);
        break;
      }
      void* buffer = nullptr;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      int64_t memory_id = 0;
      if (TRITONSERVER_Error* e =
              TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &memory, &memory_id)) {
        error = take(e);
        break;
      }
      if (bytes == 0) continue;
      if (memory == TRITONSERVER_MEMORY_GPU) {
        copies->push_back({buffer, y.raw() + offset, bytes, /*dst_on_device=*/true});
      } else {
        std::memcpy(buffer, y.raw() + offset, bytes);
      }
    }
    if (!error.empty()) {
      report(TRITONBACKEND_ResponseDelete(response));
      return error;
    }
    *filled = response;
    return "";
  }

  // Answers `request` with `error` unless it was answered, reports its statistics and
  // releases it.
  void finish(TRITONBACKEND_Request* request, const std::string& error, uint64_t exec_start,
              uint64_t compute_start, uint64_t compute_end, bool responded = false) {
    if (!responded) {
      TRITONBACKEND_Response* response = nullptr;
      if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&response, request)) {
        log_line(TRITONSERVER_LOG_ERROR, "answering a request: " + take(e));
      } else {
        TRITONSERVER_Error* answer =
            TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, error.c_str());
        report(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, answer));
        TRITONSERVER_ErrorDelete(answer);
      }
    }
    report(TRITONBACKEND_ModelInstanceReportStatistics(handle_, request, error.empty(), exec_start,
                                                       compute_start, compute_end, now_ns()));
    report(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
  }

  // The message of a Triton error, which is deleted.
  static std::string take(TRITONSERVER_Error* e) {
    std::string message = TRITONSERVER_ErrorMessage(e);
    TRITONSERVER_ErrorDelete(e);
    return message;
  }
  // A failure with nothing left to answer: logged.
  static void report(TRITONSERVER_Error* e) {
    if (e) log_line(TRITONSERVER_LOG_ERROR, take(e));
  }

  const Model& model_;
  TRITONBACKEND_ModelInstance* handle_;
  std::unique_ptr<Session> session_;
  int64_t min_batch_ = 1;
  // The pipeline: batches submitted and not yet answered, and the thread that answers them.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  int running_ = 0;  // runs submitted and not yet collected
  std::condition_variable ran_;
  uint64_t last_done_ = 0;  // when the last run was collected
  uint64_t returned_ = 0;   // when execute() last returned to Triton
  uint64_t answering_ = 0;  // when the responder took its batch
  BatchClock clock_;
  std::string name_;  // the instance's, in the timings' log lines
  static constexpr uint64_t kTimingsEveryNs = 5'000'000'000;
  Timings timings_;   // under mutex_
  bool stop_ = false;
  std::thread responder_;
};

}  // namespace
}  // namespace tessel::serve

// ---- The entry points --------------------------------------------------------------------

using tessel::serve::guarded;
using tessel::serve::Instance;
using tessel::serve::Model;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  uint32_t major = 0, minor = 0;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ApiVersion(&major, &minor)) return e;
  if (major != tessel::serve::kBackendApiMajor) {
    const std::string message = "tessel's backend speaks Triton's backend API " +
                                std::to_string(tessel::serve::kBackendApiMajor) +
                                ".x; this server's is " + std::to_string(major) + "." +
                                std::to_string(minor);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, message.c_str());
  }
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return guarded([&] {
    std::unique_ptr<Model> m = tessel::serve::read_model(model);
    tessel::serve::check(TRITONBACKEND_ModelSetState(model, m.get()));
    m.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelState(model, &state)) return e;
  delete static_cast<Model*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return guarded([&] {
    TRITONBACKEND_Model* model = nullptr;
    tessel::serve::check(TRITONBACKEND_ModelInstanceModel(instance, &model));
    void* state = nullptr;
    tessel::serve::check(TRITONBACKEND_ModelState(model, &state));
    auto i = std::make_unique<Instance>(*static_cast<Model*>(state), instance);
    tessel::serve::check(TRITONBACKEND_ModelInstanceSetState(instance, i.get()));
    i.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  delete static_cast<Instance*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  // Every request is answered and released here, whatever happens to it: the server must not
  // answer them again, so nothing is returned but success (were something to escape, which of
  // the requests were released is unknown: it is logged, not handed back).
  try {
    static_cast<Instance*>(state)->execute(requests, request_count);
  } catch (const std::exception& e) {
    tessel::serve::log_line(TRITONSERVER_LOG_ERROR, std::string("executing a batch: ") + e.what());
  }
  return nullptr;
}

}  // extern "C"
