// tessel._core: the Python module's native part, a thin nanobind binding of the public C++ API
// (include/tessel/tessel.h). The Python package (python/tessel/) builds the onnxruntime-style
// InferenceSession on it: feeds by name, dtype and device checks, streams. This file only moves
// tensors across the boundary (DLPack, no copies where the API allows none) and turns
// tessel's errors into Python exceptions with the same one-line messages as the CLI's.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "tessel/tessel.h"

namespace nb = nanobind;

namespace tessel::python {
namespace {

// DLPack's name of each dtype tessel has: (type code, bits).
struct DlpackType {
  DType dtype;
  nb::dlpack::dtype_code code;
  uint8_t bits;
};
constexpr DlpackType kDlpackTypes[] = {
    {DType::kF32, nb::dlpack::dtype_code::Float, 32},
    {DType::kF16, nb::dlpack::dtype_code::Float, 16},
    {DType::kBF16, nb::dlpack::dtype_code::Bfloat, 16},
    {DType::kF64, nb::dlpack::dtype_code::Float, 64},
    {DType::kI8, nb::dlpack::dtype_code::Int, 8},
    {DType::kU8, nb::dlpack::dtype_code::UInt, 8},
    {DType::kI32, nb::dlpack::dtype_code::Int, 32},
    {DType::kI64, nb::dlpack::dtype_code::Int, 64},
    {DType::kBool, nb::dlpack::dtype_code::Bool, 8},
};

nb::dlpack::dtype to_dlpack(DType t) {
  for (const DlpackType& d : kDlpackTypes)
    if (d.dtype == t) return {static_cast<uint8_t>(d.code), d.bits, 1};
  TESSEL_ICHECK(false) << "no DLPack type for " << dtype_name(t);
  return {};
}

std::optional<DType> from_dlpack(nb::dlpack::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  for (const DlpackType& d : kDlpackTypes)
    if (static_cast<uint8_t>(d.code) == t.code && d.bits == t.bits) return d.dtype;
  return std::nullopt;
}

using AnyArray = nb::ndarray<nb::ro>;

// What the Python layer has checked already is checked again here, since _core is callable on
// its own: the name, dtype, device and layout of each array, each a one-line UserError.
struct ArrayView {
  DType dtype;
  Shape shape;
};

ArrayView view_of(const AnyArray& a, const TensorInfo& want, const char* what) {
  const std::optional<DType> dtype = from_dlpack(a.dtype());
  TESSEL_USER_CHECK(dtype) << what << " '" << want.name << "' has an element type tessel does "
                           << "not have (DLPack code " << int{a.dtype().code} << ", "
                           << int{a.dtype().bits} << " bits)";
  Shape shape;
  for (size_t i = 0; i < a.ndim(); ++i) shape.push_back(static_cast<int64_t>(a.shape(i)));
  // A dynamic batch takes any leading extent here; the session checks it against its range.
  bool same = *dtype == want.dtype && shape.size() == want.shape.size();
  for (size_t i = 0; same && i < shape.size(); ++i)
    same = shape[i] == want.shape[i] || (i == 0 && want.shape[0] == kDynamicBatch);
  if (!same) {
    std::string want_shape = shape_str(want.shape);
    if (!want.shape.empty() && want.shape[0] == kDynamicBatch)
      want_shape = "[N" + want_shape.substr(want_shape.find_first_of(",]"));
    TESSEL_USER_ERROR() << what << " '" << want.name << "' is " << dtype_name(*dtype)
                        << shape_str(shape) << ", expected " << dtype_name(want.dtype)
                        << want_shape;
  }
  // Row-major strides; an extent of 1 may have any stride.
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    TESSEL_USER_CHECK(a.shape(i) == 1 || a.stride(i) == expected)
        << what << " '" << want.name << "' is not contiguous (row-major): pass a contiguous copy";
    expected *= static_cast<int64_t>(a.shape(i));
  }
  return {*dtype, std::move(shape)};
}

void check_device(const AnyArray& a, const TensorInfo& want, int device_type) {
  if (device_type == nb::device::cpu::value) {
    TESSEL_USER_CHECK(a.device_type() == nb::device::cpu::value)
        << "input '" << want.name << "' is not in host memory (DLPack device " << a.device_type()
        << "); this run takes host arrays";
  } else {
    TESSEL_USER_CHECK(a.device_type() == nb::device::cuda::value && a.device_id() == 0)
        << "input '" << want.name << "' is not on the GPU tessel runs on (DLPack device "
        << a.device_type() << ":" << a.device_id() << ", expected CUDA device 0; "
        << "CUDA_VISIBLE_DEVICES chooses the GPU)";
  }
}

// A host tensor handed to Python without a copy: the array keeps a copy of the Tensor (which
// shares its buffer) alive.
nb::object host_array(const Tensor& t) {
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return nb::ndarray<nb::numpy>(keep->raw(), shape.size(), shape.data(), owner, nullptr,
                                to_dlpack(t.dtype()), nb::device::cpu::value)
      .cast();
}

// A device tensor handed to Python as a DLPack-capable array on CUDA device 0; the array keeps
// the DeviceTensor (and tessel's allocation, where it made one) alive.
nb::object device_array(const DeviceTensor& t) {
  auto* keep = new DeviceTensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<DeviceTensor*>(p); });
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return nb::ndarray<>(reinterpret_cast<void*>(keep->address()), shape.size(), shape.data(), owner,
                       nullptr, to_dlpack(t.dtype()), nb::device::cuda::value, 0)
      .cast();
}

// `batch`: 0 (none), a batch size, or with `batch_max` > 0 the range [batch, batch_max] whose
// opt batch is `opt_batch` (0: its max) and whose profiles include every multiple of
// `profile_every` (0: none).
Options make_options(const std::string& device, const std::string& precision, int64_t batch,
                     int64_t batch_max, int64_t opt_batch, int64_t profile_every,
                     const std::map<std::string, std::vector<int64_t>>& shapes, bool tensor_cores) {
  Options o;
  TESSEL_USER_CHECK(device == "cpu" || device == "cuda")
      << "device '" << device << "': expected 'cpu' or 'cuda'";
  TESSEL_USER_CHECK(precision == "fp16" || precision == "fp32")
      << "precision '" << precision << "': expected 'fp16' or 'fp32'";
  TESSEL_USER_CHECK(batch >= 0) << "batch " << batch << ": expected a positive batch size";
  o.device = device == "cpu" ? Device::kCpu : Device::kCuda;
  o.precision = precision == "fp32" ? Precision::kFp32 : Precision::kFp16;
  if (batch_max > 0) {
    o.batch_range = {batch, batch_max, opt_batch, profile_every};
    check_batch_range(o.batch_range, "batch (" + std::to_string(batch) + ", " +
                                         std::to_string(batch_max) + ")");
  } else {
    TESSEL_USER_CHECK(opt_batch == 0) << "opt_batch " << opt_batch
                                      << ": it applies to a batch range such as batch=(1, 64)";
    TESSEL_USER_CHECK(profile_every == 0) << "profile_every " << profile_every
                                          << ": it applies to a batch range such as batch=(1, 64)";
    o.batch = batch;
  }
  o.tensor_cores = tensor_cores;
  for (const auto& [name, shape] : shapes) o.input_shapes[name] = shape;
  return o;
}

nb::list tensor_infos(const std::vector<TensorInfo>& ts) {
  nb::list r;
  for (const TensorInfo& t : ts)
    r.append(nb::make_tuple(t.name, std::string(dtype_name(t.dtype)), t.shape));
  return r;
}

// Session.run on host arrays, outputs back without a copy. Where every input leads with a
// batch, the arrays are read where they lie (one piece each, Session::run_gathered: on the GPU
// straight into the engine's staging); otherwise copied into tensors of their own.
nb::list run_host(Session& s, const std::vector<AnyArray>& arrays) {
  const std::vector<TensorInfo>& want = s.inputs();
  TESSEL_USER_CHECK(arrays.size() == want.size())
      << arrays.size() << " inputs given, the model has " << want.size();
  std::vector<std::vector<Piece>> pieces;
  bool in_place = true;
  for (size_t i = 0; i < arrays.size(); ++i) {
    check_device(arrays[i], want[i], nb::device::cpu::value);
    ArrayView v = view_of(arrays[i], want[i], "input");
    in_place = in_place && !v.shape.empty() && v.shape[0] > 0;
    pieces.push_back({{arrays[i].data(), v.dtype, std::move(v.shape)}});
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; !in_place && i < arrays.size(); ++i) {
    Tensor t(pieces[i][0].dtype, pieces[i][0].shape);
    if (t.nbytes()) std::memcpy(t.raw(), arrays[i].data(), t.nbytes());
    inputs.push_back(std::move(t));
  }
  std::vector<Tensor> outputs;
  {
    nb::gil_scoped_release unlocked;
    outputs = in_place ? s.run_gathered(pieces) : s.run(inputs);
  }
  nb::list r;
  for (const Tensor& t : outputs) r.append(host_array(t));
  return r;
}

// Session.run on host arrays given in pieces per input (rows to concatenate along the batch):
// each piece read where it lies, straight into the engine's input buffers on the GPU.
nb::list run_gathered_host(Session& s, const std::vector<std::vector<AnyArray>>& parts) {
  const std::vector<TensorInfo>& want = s.inputs();
  TESSEL_USER_CHECK(parts.size() == want.size())
      << parts.size() << " inputs given, the model has " << want.size();
  std::vector<std::vector<Piece>> pieces(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    TensorInfo any_rows = want[i];  // a piece has any leading extent: the session checks the sum
    if (!any_rows.shape.empty()) any_rows.shape[0] = kDynamicBatch;
    for (const AnyArray& a : parts[i]) {
      check_device(a, want[i], nb::device::cpu::value);
      ArrayView v = view_of(a, any_rows, "input");
      pieces[i].push_back({a.data(), v.dtype, std::move(v.shape)});
    }
  }
  std::vector<Tensor> outputs;
  {
    nb::gil_scoped_release unlocked;
    outputs = s.run_gathered(pieces);
  }
  nb::list r;
  for (const Tensor& t : outputs) r.append(host_array(t));
  return r;
}

// Session.run on CUDA arrays: borrowed, written in place or into new device tensors, enqueued
// on `stream`.
nb::list run_device(Session& s, const std::vector<AnyArray>& arrays, uintptr_t stream,
                    const std::optional<std::vector<nb::ndarray<>>>& out_arrays) {
  const std::vector<TensorInfo>& want = s.inputs();
  TESSEL_USER_CHECK(arrays.size() == want.size())
      << arrays.size() << " inputs given, the model has " << want.size();
  std::vector<DeviceTensor> inputs, outputs;
  for (size_t i = 0; i < arrays.size(); ++i) {
    check_device(arrays[i], want[i], nb::device::cuda::value);
    ArrayView v = view_of(arrays[i], want[i], "input");
    inputs.push_back(DeviceTensor::borrow(reinterpret_cast<uint64_t>(arrays[i].data()), v.dtype,
                                          std::move(v.shape)));
  }
  if (out_arrays) {
    const std::vector<TensorInfo>& outs = s.outputs();
    TESSEL_USER_CHECK(out_arrays->size() == outs.size())
        << out_arrays->size() << " output arrays given, the model has " << outs.size();
    for (size_t j = 0; j < outs.size(); ++j) {
      const nb::ndarray<>& a = (*out_arrays)[j];
      TESSEL_USER_CHECK(a.device_type() == nb::device::cuda::value && a.device_id() == 0)
          << "output '" << outs[j].name << "' is not on CUDA device 0";
      ArrayView v = view_of(AnyArray(a), outs[j], "output");
      outputs.push_back(
          DeviceTensor::borrow(reinterpret_cast<uint64_t>(a.data()), v.dtype, std::move(v.shape)));
    }
  }
  {
    nb::gil_scoped_release unlocked;
    outputs = s.run_on_device(inputs, reinterpret_cast<void*>(stream), std::move(outputs));
  }
  nb::list r;
  if (out_arrays) {
    for (const nb::ndarray<>& a : *out_arrays) r.append(nb::cast(a));
  } else {
    for (const DeviceTensor& t : outputs) r.append(device_array(t));
  }
  return r;
}

}  // namespace
}  // namespace tessel::python

NB_MODULE(_core, m) {
  using namespace tessel;
  using namespace tessel::python;
  m.doc() =
      "tessel's native module: the public C++ API (include/tessel/tessel.h) for the "
      "Python package. Use tessel.InferenceSession and tessel.compile instead.";

  // Registered base first: nanobind tries translators newest first.
  static nb::exception<tessel::Error> error(m, "Error", PyExc_RuntimeError);
  error.doc() =
      "A mistake in the input: a bad or unsupported model, a wrong feed, a missing "
      "or foreign engine file, no GPU. The message is the CLI's one line.";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tessel::InternalError& e) {
      PyErr_SetString(PyExc_AssertionError,
                      (std::string("tessel internal error: ") + e.what()).c_str());
    } catch (const tessel::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  m.def(
      "cuda_available",
      []() {
        std::string why;
        const bool ok = cuda_available(&why);
        return std::make_pair(ok, why);
      },
      "(True, '') where a CUDA device can run engines, else (False, why not).");

  m.def("is_engine_file", &is_engine_file, nb::arg("path"),
        "True when the file starts with a tessel engine file's magic.");

  m.def(
      "compile",
      [](const std::string& model, const std::string& engine, const std::string& precision,
         int64_t batch, int64_t batch_max, int64_t opt_batch, int64_t profile_every,
         const std::map<std::string, std::vector<int64_t>>& input_shapes, const std::string& target,
         bool tensor_cores) {
        Options o = make_options("cuda", precision, batch, batch_max, opt_batch, profile_every,
                                 input_shapes, tensor_cores);
        CompileReport report;
        {
          nb::gil_scoped_release unlocked;
          report = compile_file(model, engine, o, target);
        }
        nb::list launches;
        for (const LaunchInfo& l : report.launches)
          launches.append(nb::make_tuple(l.node, l.op, l.instruction, l.schedule));
        return nb::make_tuple(report.summary, launches, report.profiles);
      },
      nb::arg("model"), nb::arg("engine"), nb::arg("precision"), nb::arg("batch"),
      nb::arg("batch_max"), nb::arg("opt_batch"), nb::arg("profile_every"), nb::arg("input_shapes"),
      nb::arg("target"), nb::arg("tensor_cores"),
      "Compiles a model into an engine file; returns (summary line, launches, profile "
      "batches). batch_max > 0 makes [batch, batch_max] a dynamic batch range.");

  nb::class_<Session>(m, "Session", "A model opened for the CPU reference or the GPU.")
      .def(
          "__init__",
          [](Session* self, const std::string& path, const std::string& device,
             const std::string& precision, int64_t batch, int64_t batch_max, int64_t opt_batch,
             int64_t profile_every, const std::map<std::string, std::vector<int64_t>>& input_shapes,
             bool tensor_cores) {
            Options o = make_options(device, precision, batch, batch_max, opt_batch, profile_every,
                                     input_shapes, tensor_cores);
            nb::gil_scoped_release unlocked;
            new (self) Session(Session::open(path, o));
          },
          nb::arg("path"), nb::arg("device"), nb::arg("precision"), nb::arg("batch"),
          nb::arg("batch_max"), nb::arg("opt_batch"), nb::arg("profile_every"),
          nb::arg("input_shapes"), nb::arg("tensor_cores"))
      .def_prop_ro(
          "inputs", [](const Session& s) { return tensor_infos(s.inputs()); },
          "[(name, tessel dtype name, shape)] of the inputs, in order; a dynamic batch is -1.")
      .def_prop_ro(
          "outputs", [](const Session& s) { return tensor_infos(s.outputs()); },
          "[(name, tessel dtype name, shape)] of the outputs, in order; a dynamic batch is -1.")
      .def_prop_ro(
          "batch_range",
          [](const Session& s) {
            const BatchRange r = s.batch_range();
            return nb::make_tuple(r.min, r.max, r.opt);
          },
          "(min, max, opt): the batches the session runs (min == max: one).")
      .def_prop_ro("profiles", &Session::profiles,
                   "The profile batches of a dynamic GPU engine; [] on the CPU.")
      .def_prop_ro("device",
                   [](const Session& s) { return s.device() == Device::kCpu ? "cpu" : "cuda"; })
      .def_prop_ro("compile_ms", &Session::compile_ms)
      .def("run", &run_host, nb::arg("inputs"),
           "One run on host arrays (one per input, in order); numpy arrays out.")
      .def("run_gathered", &run_gathered_host, nb::arg("parts"),
           "One run on host arrays given in pieces (per input, in order, a list of arrays whose "
           "concatenation along axis 0 is the input), each read where it lies; numpy arrays "
           "out.")
      .def("run_on_device", &run_device, nb::arg("inputs"), nb::arg("stream"),
           nb::arg("outputs") = nb::none(),
           "One run on CUDA arrays (one per input, in order), enqueued on `stream` (a "
           "CUstream as an int; 0: the legacy default stream) and not waited for. Outputs are "
           "written into `outputs` where given, else into new device arrays (DLPack).");
}
