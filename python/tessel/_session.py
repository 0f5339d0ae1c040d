"""InferenceSession (onnxruntime's shape of API) and compile(), on tessel._core.

Feeds are checked here, by name, with one-line messages in the CLI's words; the native module
moves the tensors (DLPack, no copy where none is needed) and runs them.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core

Error = _core.Error

# DLPack device types (dlpack.h DLDeviceType).
_DL_CPU = 1
_DL_CUDA = 2

# tessel's dtype name -> (onnxruntime's type string, numpy dtype or None where numpy has none).
_DTYPES: Dict[str, Tuple[str, Optional[np.dtype]]] = {
    "f32": ("tensor(float)", np.dtype(np.float32)),
    "f16": ("tensor(float16)", np.dtype(np.float16)),
    "bf16": ("tensor(bfloat16)", None),
    "f64": ("tensor(double)", np.dtype(np.float64)),
    "i8": ("tensor(int8)", np.dtype(np.int8)),
    "u8": ("tensor(uint8)", np.dtype(np.uint8)),
    "i32": ("tensor(int32)", np.dtype(np.int32)),
    "i64": ("tensor(int64)", np.dtype(np.int64)),
    "bool": ("tensor(bool)", np.dtype(np.bool_)),
}
_NUMPY_NAMES = {v[1]: k for k, v in _DTYPES.items() if v[1] is not None}


class InvalidArgument(Error, ValueError):
    """A wrong argument to a tessel call: an unknown feed or output name, a feed of the wrong
    element type, shape or device, a bad stream."""


def _type_str(dtype_name: str, shape: Sequence[int]) -> str:
    """tessel's spelling of a tensor type, as the CLI prints it: f32[1,3,224,224]."""
    return "%s[%s]" % (dtype_name, ",".join(str(int(d)) for d in shape))


# The name a dynamic batch dimension has in NodeArg.shape (onnxruntime names a symbolic dimension
# by a string too).
BATCH_DIM = "batch"


@dataclasses.dataclass(frozen=True)
class NodeArg:
    """An input or output of a session, as onnxruntime's NodeArg describes one.

    Attributes:
        name: the model's name of the tensor.
        shape: its extents; static, except in a session opened for a batch range, where the
            leading extent is the string "batch" (tessel.BATCH_DIM): any batch of
            InferenceSession.batch_range.
        type: onnxruntime's type string, e.g. "tensor(float)".
        dtype: the numpy dtype (None for bfloat16, which numpy lacks).
    """

    name: str
    shape: List[Union[int, str]]
    type: str
    dtype: Optional[np.dtype]


def _node_args(infos: Sequence[Tuple[str, str, Sequence[int]]]) -> List[NodeArg]:
    return [NodeArg(name, [BATCH_DIM if d == -1 else int(d) for d in shape], _DTYPES[dt][0],
                    _DTYPES[dt][1]) for name, dt, shape in infos]


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _profile_every(profile_every: Optional[int], batch_max: int) -> int:
    """profile_every for _core (0: none); only with a batch range (batch_max > 0)."""
    if profile_every is None:
        return 0
    if not (_is_int(profile_every) and profile_every >= 1):
        raise InvalidArgument("profile_every %r: expected a positive int" % (profile_every,))
    if batch_max == 0:
        raise InvalidArgument("profile_every %d: it applies to a batch range such as "
                              "batch=(1, 64)" % profile_every)
    return int(profile_every)


def _batch_args(batch: Any, opt_batch: Optional[int]) -> Tuple[int, int, int]:
    """(batch, batch_max, opt_batch) for _core from the Python spelling: None, a batch size, or
    a range as a tuple (min, max). Raises InvalidArgument for anything else."""
    if opt_batch is not None and not (_is_int(opt_batch) and opt_batch >= 1):
        raise InvalidArgument("opt_batch %r: expected a positive int" % (opt_batch,))
    if batch is None:
        if opt_batch is not None:
            raise InvalidArgument("opt_batch %d: it applies to a batch range such as "
                                  "batch=(1, 64)" % opt_batch)
        return 0, 0, 0
    if _is_int(batch):
        if batch < 1:
            raise InvalidArgument("batch %r: expected a positive int or a range (min, max)"
                                  % (batch,))
        if opt_batch is not None:
            raise InvalidArgument("opt_batch %d: it applies to a batch range such as "
                                  "batch=(1, 64)" % opt_batch)
        return int(batch), 0, 0
    if isinstance(batch, str):
        raise InvalidArgument("batch %r: pass a batch size (8) or a range as a tuple, "
                              "batch=(1, 64)" % (batch,))
    if (not isinstance(batch, (tuple, list)) or len(batch) != 2
            or not all(_is_int(b) for b in batch)):
        raise InvalidArgument("batch %r: expected a positive int or a range (min, max) of two "
                              "ints" % (batch,))
    lo, hi = int(batch[0]), int(batch[1])
    if lo < 1:
        raise InvalidArgument("batch (%d, %d): the smallest batch is %d, expected at least 1"
                              % (lo, hi, lo))
    if lo > hi:
        raise InvalidArgument("batch (%d, %d): the range is empty (%d > %d)" % (lo, hi, lo, hi))
    if opt_batch is not None and not lo <= opt_batch <= hi:
        raise InvalidArgument("opt_batch %d is outside the batch range (%d, %d)"
                              % (opt_batch, lo, hi))
    return lo, hi, int(opt_batch or 0)


def _dlpack_device(value: Any) -> Optional[int]:
    """The DLPack device type of `value`, or None when it speaks no DLPack."""
    probe = getattr(value, "__dlpack_device__", None)
    if probe is None:
        return None
    try:
        return int(probe()[0])
    except Exception:  # a producer that cannot say: treat as not DLPack
        return None


def _stream_handle(stream: Any, feeds: Sequence[Any]) -> int:
    """The CUstream to run on, as an int.

    None: the current stream of the framework the first CUDA feed comes from (PyTorch,
    CuPy), else 0, the legacy default stream. Otherwise an int, or an object that names its
    handle: the CUDA stream protocol (__cuda_stream__), torch.cuda.Stream.cuda_stream,
    cupy's Stream.ptr.
    """
    if stream is None:
        for v in feeds:
            package = type(v).__module__.split(".")[0]
            if package == "torch":
                import torch  # the feed's own package: present

                return int(torch.cuda.current_stream(v.device).cuda_stream)
            if package == "cupy":
                import cupy

                return int(cupy.cuda.get_current_stream().ptr)
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    raise InvalidArgument("stream: expected an int (a CUstream), a torch.cuda.Stream or a "
                          "cupy.cuda.Stream, got %s" % type(stream).__name__)


class InferenceSession:
    """A model opened for the GPU or tessel's CPU reference executor, run like an
    onnxruntime.InferenceSession.

    Args:
        path: an ONNX model (.onnx), a textual IR graph (.tir), or an engine file (.tsl, written
            by tessel.compile or `tessel compile`; GPU only, loaded without compiling).
        device: "cuda" compiles the model for the GPU present and runs it as one CUDA graph;
            "cpu" runs tessel's reference executor (every op, in the model's precision).
        precision: the GPU's storage precision, "fp16" or "fp32" (the CPU runs the model's).
        batch: a batch size fixes a symbolic batch dimension (default 1). A range, as a tuple
            (min, max), opens a dynamic-batch session that runs any batch in it: on "cuda" one
            engine with a plan per profile batch (the range's ends, opt_batch and the powers of
            two between; other batches padded or split), on "cpu" the reference executor at the
            batch of each run. The model's inputs and outputs must all lead with the batch.
        opt_batch: with a range, the batch the engine is tuned around (default: the range's
            max); compiled as a profile of its own.
        profile_every: with a range on "cuda", also a profile at every multiple of it, so that
            a batch between profiles is padded by fewer rows (a server's batches: 22 runs as 24
            with 8, not as 32), for more compile time.
        input_shapes: full static shapes for inputs with other symbolic dimensions,
            {"input": [1, 3, 224, 224]}.
        tensor_cores: False runs every contraction on the SIMT kernel (GPU).

    Raises:
        tessel.Error: a missing, malformed or unsupported model, an engine file for another
            GPU, no CUDA device for device="cuda"; the message is the CLI's one line.
    """

    def __init__(self, path: Union[str, os.PathLike], device: str = "cuda",
                 precision: str = "fp16", batch: Union[int, Tuple[int, int], None] = None,
                 input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                 tensor_cores: bool = True, opt_batch: Optional[int] = None,
                 profile_every: Optional[int] = None) -> None:
        if device not in ("cpu", "cuda"):
            raise InvalidArgument("device '%s': expected 'cpu' or 'cuda'" % device)
        lo, hi, opt = _batch_args(batch, opt_batch)
        every = _profile_every(profile_every, hi)
        shapes = {str(k): [int(d) for d in v] for k, v in (input_shapes or {}).items()}
        self._path = os.fspath(path)
        self._session = _core.Session(self._path, device, precision, lo, hi, opt, every, shapes,
                                      tensor_cores)
        self._inputs = _node_args(self._session.inputs)
        self._outputs = _node_args(self._session.outputs)
        self._range = tuple(self._session.batch_range)

    @property
    def device(self) -> str:
        """"cpu" or "cuda"."""
        return self._session.device

    @property
    def compile_ms(self) -> float:
        """Time spent compiling when the session was opened (0 for an engine file or the CPU)."""
        return self._session.compile_ms

    @property
    def batch_range(self) -> Tuple[int, int]:
        """(min, max): the batches the session runs; (b, b) for a session of one batch."""
        return (self._range[0], self._range[1])

    @property
    def opt_batch(self) -> int:
        """The batch the engine is tuned around (the session's batch where it has one)."""
        return self._range[2]

    @property
    def profiles(self) -> List[int]:
        """The batches a dynamic GPU engine holds a plan for ([b] for a static one, [] on the
        CPU). Other batches of the range run padded up to a profile or split into several."""
        return list(self._session.profiles)

    def get_inputs(self) -> List[NodeArg]:
        """The model's inputs, in order."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs, in order."""
        return list(self._outputs)

    def run(self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any], *,
            stream: Any = None, outputs: Optional[Sequence[Any]] = None) -> List[Any]:
        """Runs the model once.

        Args:
            output_names: the outputs to return, in this order; None or [] for all.
            input_feed: {input name: tensor} for every input. A tensor is a numpy array
                (or anything numpy.asarray takes) or any DLPack tensor (PyTorch, CuPy, ...).
                Host tensors are copied in; on a "cuda" session, CUDA tensors (all feeds on
                CUDA device 0, contiguous) are read where they are, without a copy.
            stream: CUDA feeds only: the stream to run on (an int CUstream, a
                torch.cuda.Stream, a cupy Stream, or anything with __cuda_stream__); by
                default the current stream of the feeds' framework. The run is enqueued on it
                and not waited for: order later work on that stream, as with any kernel.
            outputs: CUDA feeds only: one preallocated CUDA tensor per model output (all of
                them, in model order), written in place and returned (io binding).

        In a session opened for a batch range the feeds may have any batch of the range (all
        the same one); the outputs have it too. On the GPU, a batch that is a profile (or a
        chunk of one) reads and writes CUDA feeds in place; a batch between profiles is copied
        on the device into the engine's padded buffers.

        Returns:
            Host feeds: numpy arrays. CUDA feeds: arrays on CUDA device 0 that any DLPack
            consumer takes without a copy (torch.from_dlpack, cupy.from_dlpack), ready in
            stream order.

        Raises:
            tessel.InvalidArgument: an unknown output or feed name, a missing feed, a feed of
                the wrong element type, shape or device, feeds of a batch outside the range or
                of different batches.
        """
        names, wanted = self._wanted_outputs(output_names)
        if not isinstance(input_feed, Mapping):
            raise InvalidArgument("input_feed: expected a dict of input name to tensor, got %s"
                                  % type(input_feed).__name__)
        self._check_input_names(input_feed)
        feeds = [input_feed[i.name] for i in self._inputs]
        if self._range[0] != self._range[1]:
            self._check_batch(feeds)
        on_cuda = [_dlpack_device(v) == _DL_CUDA for v in feeds]
        if any(on_cuda):
            results = self._run_cuda(feeds, on_cuda, stream, outputs)
        else:
            if stream is not None or outputs is not None:
                raise InvalidArgument("stream and outputs apply to CUDA feeds only; these feeds "
                                      "are in host memory")
            results = self._session.run([self._host_feed(arg, v)
                                         for arg, v in zip(self._inputs, feeds)])
        by_name = dict(zip(names, results))
        return [by_name[n] for n in wanted]

    def run_gathered(self, output_names: Optional[Sequence[str]],
                     parts: Mapping[str, Sequence[Any]]) -> List[np.ndarray]:
        """Runs one batch given in pieces, as a server's batcher gathers it from requests.

        Args:
            output_names: the outputs to return, in this order; None or [] for all.
            parts: {input name: [host array, ...]} for every input: the arrays, concatenated
                along axis 0, make the input (numpy arrays or anything numpy.asarray takes, of
                the input's element type and trailing shape). Every input's pieces add up to
                the same batch.

        The pieces are not concatenated on the host: on a "cuda" session each is copied
        straight into the engine's input buffer (the copy that run() makes of a host feed, and
        np.concatenate's, are saved); on the CPU they are concatenated once.

        Returns:
            numpy arrays, one per output asked for, of the whole batch.

        Raises:
            tessel.InvalidArgument: an unknown output or input name, a missing input, a piece of
                the wrong element type or trailing shape, inputs whose pieces add up to
                different batches or to one outside the range.
        """
        names, wanted = self._wanted_outputs(output_names)
        if not isinstance(parts, Mapping):
            raise InvalidArgument("parts: expected a dict of input name to a list of arrays, "
                                  "got %s" % type(parts).__name__)
        self._check_input_names(parts)
        pieces = []
        for arg in self._inputs:
            given = parts[arg.name]
            if isinstance(given, np.ndarray) or not isinstance(given, Sequence) or not given:
                raise InvalidArgument("input '%s': expected a non-empty list of arrays"
                                      % arg.name)
            arrays = []
            for v in given:
                a = np.ascontiguousarray(v)
                if arg.dtype is not None and a.dtype != np.dtype(arg.dtype):
                    raise InvalidArgument("input '%s': a piece is numpy %s%s, expected %s"
                                          % (arg.name, a.dtype, list(a.shape), arg.type))
                arrays.append(a)
            pieces.append(arrays)
        results = self._session.run_gathered(pieces)
        by_name = dict(zip(names, results))
        return [by_name[n] for n in wanted]

    # -- helpers -------------------------------------------------------------------------------

    def _wanted_outputs(self, output_names: Optional[Sequence[str]]) -> Tuple[List[str], List[str]]:
        """(every output's name, the names asked for: all where none are)."""
        names = [o.name for o in self._outputs]
        wanted = list(output_names) if output_names else names
        for n in wanted:
            if n not in names:
                raise InvalidArgument("output '%s': the model has no output named '%s' "
                                      "(outputs: %s)" % (n, n, ", ".join(names)))
        return names, wanted

    def _check_input_names(self, given: Mapping[str, Any]) -> None:
        """Every input fed, and nothing else."""
        inputs = [i.name for i in self._inputs]
        for n in given:
            if n not in inputs:
                raise InvalidArgument("input '%s': the model has no input named '%s' "
                                      "(inputs: %s)" % (n, n, ", ".join(inputs)))
        for n in inputs:
            if n not in given:
                raise InvalidArgument("input '%s' is not fed (inputs: %s)"
                                      % (n, ", ".join(inputs)))

    def _check_batch(self, feeds: Sequence[Any]) -> None:
        """A dynamic session's feeds share one batch of its range."""
        batches = []
        for arg, v in zip(self._inputs, feeds):
            shape = getattr(v, "shape", None)
            if shape is None:
                shape = np.shape(v)
            if len(shape) == 0:
                raise InvalidArgument("input '%s': a scalar, expected a batch of %s"
                                      % (arg.name, self._expected_str(arg)))
            batches.append((arg.name, int(shape[0])))
        name, b = batches[0]
        lo, hi = self._range[0], self._range[1]
        if not lo <= b <= hi:
            raise InvalidArgument("input '%s': batch %d is outside the session's batch range "
                                  "(%d, %d)" % (name, b, lo, hi))
        for other, ob in batches[1:]:
            if ob != b:
                raise InvalidArgument("input '%s' has batch %d, input '%s' batch %d: feed one "
                                      "batch" % (other, ob, name, b))

    def _expected_str(self, arg: NodeArg) -> str:
        want = next(k for k, v in _DTYPES.items() if v[0] == arg.type)
        return "%s[%s]" % (want, ",".join("N" if d == BATCH_DIM else str(d) for d in arg.shape))

    def _mismatch(self, arg: NodeArg, got_dtype: str, got_shape: Sequence[int]) -> InvalidArgument:
        want = next(k for k, v in _DTYPES.items() if v[0] == arg.type)
        msg = "input '%s': expected %s, got %s" % (arg.name, self._expected_str(arg),
                                                    _type_str(got_dtype, got_shape))
        if (got_dtype == want and len(got_shape) == len(arg.shape) and len(arg.shape) > 0
                and arg.shape[0] != BATCH_DIM and list(got_shape[1:]) == list(arg.shape[1:])):
            msg += (" (the session was opened for batch %d: open one with batch=%d, or with a "
                    "range such as batch=(1, %d))" % (arg.shape[0], got_shape[0],
                                                      max(got_shape[0], arg.shape[0])))
        return InvalidArgument(msg)

    def _shape_matches(self, arg: NodeArg, shape: Sequence[int]) -> bool:
        return len(shape) == len(arg.shape) and all(
            d == BATCH_DIM or int(g) == d for g, d in zip(shape, arg.shape))

    def _host_feed(self, arg: NodeArg, value: Any) -> Any:
        """A host feed as an array _core takes: a contiguous numpy array of the input's type
        (or, for a dtype numpy lacks, the DLPack tensor itself, which _core checks)."""
        if isinstance(value, np.ndarray):
            array = value
        elif _dlpack_device(value) is not None:
            try:
                array = np.from_dlpack(value)
            except Exception:
                return value  # bfloat16 and such: _core reads the DLPack tensor and checks it
        else:
            try:
                array = np.asarray(value)
            except Exception as e:
                raise InvalidArgument("input '%s': %s is not an array (%s)"
                                      % (arg.name, type(value).__name__, e)) from None
            # A nested list of numbers takes the input's element type where the kind (float,
            # int) agrees; numpy arrays must match exactly, as in onnxruntime.
            if arg.dtype is not None and array.dtype.kind == np.dtype(arg.dtype).kind:
                array = array.astype(arg.dtype)
        got = _NUMPY_NAMES.get(array.dtype)
        if got is None:
            raise InvalidArgument("input '%s': expected %s, got numpy %s%s"
                                  % (arg.name, arg.type, array.dtype, list(array.shape)))
        if np.dtype(arg.dtype) != array.dtype or not self._shape_matches(arg, array.shape):
            raise self._mismatch(arg, got, array.shape)
        return np.ascontiguousarray(array)

    def _run_cuda(self, feeds: List[Any], on_cuda: List[bool], stream: Any,
                  outputs: Optional[Sequence[Any]]) -> List[Any]:
        if self.device != "cuda":
            name = self._inputs[on_cuda.index(True)].name
            raise InvalidArgument("input '%s' is a CUDA tensor, and this session runs on the CPU "
                                  "(device='cpu'): pass host tensors" % name)
        if not all(on_cuda):
            name = self._inputs[on_cuda.index(False)].name
            raise InvalidArgument("input '%s' is in host memory while other inputs are on the GPU: "
                                  "pass all inputs on one device" % name)
        if outputs is not None:
            outputs = list(outputs)
            if len(outputs) != len(self._outputs):
                raise InvalidArgument("outputs: %d tensors given, the model has %d outputs"
                                      % (len(outputs), len(self._outputs)))
        return self._session.run_on_device(feeds, _stream_handle(stream, feeds), outputs)


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel launch of a compiled engine."""

    node: str         # the compiled graph's node
    op: str           # "tessel.Conv"
    instruction: str  # "mma.sync", "wgmma" or "SIMT"
    schedule: str     # a contraction's schedule name; "" for other kernels


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """What tessel.compile did: the CLI's summary line, every kernel launch (of the opt
    batch's plan in a dynamic engine) and the batches compiled (a dynamic engine's profiles)."""

    summary: str
    launches: List[Launch]
    profiles: List[int]


def compile(model: Union[str, os.PathLike], engine: Union[str, os.PathLike], *,
            precision: str = "fp16", batch: Union[int, Tuple[int, int], None] = None,
            input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
            target: Optional[str] = None, tensor_cores: bool = True,
            opt_batch: Optional[int] = None,
            profile_every: Optional[int] = None) -> CompileResult:
    """Compiles a model into an engine file, as `tessel compile` does.

    Args:
        model: an ONNX model (.onnx) or a textual IR graph (.tir).
        engine: the engine file to write (.tsl); InferenceSession(engine) loads it.
        precision, batch, input_shapes, tensor_cores, opt_batch, profile_every: as for
            InferenceSession; a batch range (min, max) writes a dynamic-batch engine.
        target: "sm_90a" (H100) or "sm_80" (A100) compiles for that GPU without one (NVRTC
            needs no device); None compiles for the GPU present.

    Raises:
        tessel.Error: as `tessel compile` reports it, in the same line.
    """
    lo, hi, opt = _batch_args(batch, opt_batch)
    every = _profile_every(profile_every, hi)
    shapes = {str(k): [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    summary, launches, profiles = _core.compile(os.fspath(model), os.fspath(engine), precision,
                                                lo, hi, opt, every, shapes, target or "",
                                                tensor_cores)
    return CompileResult(summary, [Launch(*l) for l in launches], list(profiles))


def cuda_available() -> bool:
    """True when a CUDA device can run tessel engines here."""
    return bool(_core.cuda_available()[0])
