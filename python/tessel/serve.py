"""`tessel serve`: a model served by Triton Inference Server, bound to tessel sessions.

    tessel serve MODEL(.onnx|.tir|.tsl) [--host 0.0.0.0] [--port 8000] [--grpc-port 8001]
                 [--metrics-port 8002] [--device cuda|cpu] [--gpus all|0,1] [--instances N]
                 [--max-batch 32] [--max-queue-delay-us 100] [--preferred-batch B,...]
                 [--profile-every 8] [--pipeline 2]
                 [--precision fp16|fp32] [--name NAME] [--backend tessel|python]
    tessel serve MODEL --export-repo DIR [same model options]

The server is the tritonserver of the nvidia-pytriton wheel (`pip install .[serve]`), started
on a model repository that this writes: config.pbtxt (the model's inputs and outputs, Triton's
dynamic batcher, one instance per GPU or one on the CPU) beside the model file. The model runs
in tessel's C++ backend (libtriton_tessel.so, src/serve/triton_backend.cc), which Triton loads
into its own process and which reads the requests' inputs where Triton holds them; or, with
--backend python, in Triton's Python backend (model.py, tessel/triton_model.py, a stub
process per instance that needs the tessel package and numpy < 2 in its Python). --export-repo
writes the same repository for a Triton of one's own (the backend library inside the model's
folder). Clients speak KServe v2 over HTTP or gRPC; health, model metadata and Prometheus
metrics are Triton's. SIGINT or SIGTERM stops the server after the requests in flight are
answered.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from typing import Dict, List, Optional, Sequence, Tuple

# onnxruntime's type strings (NodeArg.type) -> Triton's config.pbtxt data types.
_TRITON_TYPES = {
    "tensor(float)": "TYPE_FP32",
    "tensor(float16)": "TYPE_FP16",
    "tensor(double)": "TYPE_FP64",
    "tensor(int8)": "TYPE_INT8",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(bool)": "TYPE_BOOL",
}
_MODEL_SUFFIXES = (".onnx", ".tir", ".tsl")


class ServeError(Exception):
    """A user error: printed as one `error:` line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tessel serve",
        description="Serve a model through Triton Inference Server (KServe v2 HTTP and gRPC, "
                    "dynamic batching, health, metadata, Prometheus metrics), the model bound to "
                    "tessel sessions; or write a Triton model repository (--export-repo).")
    ap.add_argument("model", help="an ONNX model (.onnx), textual IR (.tir) or engine file (.tsl)")
    ap.add_argument("--host", default="0.0.0.0",
                    help="address the endpoints listen on (default 0.0.0.0, as Triton's)")
    ap.add_argument("--port", type=int, default=8000, help="KServe v2 HTTP port (default 8000)")
    ap.add_argument("--grpc-port", type=int, default=8001, help="KServe v2 gRPC port (default 8001)")
    ap.add_argument("--metrics-port", type=int, default=8002,
                    help="Prometheus metrics port, /metrics (default 8002)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda: one compiled engine per GPU; cpu: tessel's reference executor")
    ap.add_argument("--gpus", default="all",
                    help="the GPUs to serve on, 'all' or a list such as 0,1 (one instance each)")
    ap.add_argument("--instances", type=int, default=1,
                    help="model instances per GPU (or on the CPU), each with its own session")
    ap.add_argument("--max-batch", type=int, default=32,
                    help="the largest batch Triton's dynamic batcher forms (default 32); each "
                         "instance compiles one dynamic-batch engine for 1 to it. An engine "
                         "file serves the batch range it was compiled for")
    ap.add_argument("--max-queue-delay-us", type=int, default=100,
                    help="how long the batcher waits for more requests to fill a batch "
                         "(default 100)")
    ap.add_argument("--preferred-batch", metavar="B[,B...]",
                    help="batch sizes the batcher forms when it can, waiting up to the queue delay "
                         "for one (Triton's preferred_batch_size): with many clients, a longer "
                         "delay and the engine's most efficient batch make batches of that size "
                         "instead of whatever is queued (default: none, the largest batch queued)")
    ap.add_argument("--profile-every", type=int, default=8,
                    help="the dynamic-batch engine also compiles a profile at every multiple of "
                         "N (default 8), so that a batch the batcher forms between powers of "
                         "two is padded by fewer than N rows (22 runs as 24, not 32)")
    ap.add_argument("--pipeline", type=int, choices=(1, 2), default=2,
                    help="tessel's backend: 2 (default) overlaps batches, the next one staged "
                         "and uploaded while one computes and its answers go out; 1 answers "
                         "each batch before taking the next")
    ap.add_argument("--precision", choices=("fp16", "fp32"), default="fp16",
                    help="the GPU's storage precision (default fp16)")
    ap.add_argument("--name", help="the model's name at the endpoints (default: the file's stem)")
    ap.add_argument("--backend", choices=("tessel", "python"), default="tessel",
                    help="tessel: tessel's C++ backend in the server's process (default); "
                         "python: Triton's Python backend, a stub process per instance")
    ap.add_argument("--export-repo", metavar="DIR",
                    help="write the model repository into DIR instead of serving")
    ap.add_argument("--triton-dir", metavar="DIR",
                    help="a tritonserver tree laid out as nvidia-pytriton's pytriton/tritonserver, "
                         "its libraries in ../../nvidia_pytriton.libs (default: the installed "
                         "nvidia-pytriton's)")
    ap.add_argument("--start-timeout", type=float, default=900,
                    help="seconds to wait for the server to be ready (compiling included)")
    ap.add_argument("--verbose", action="store_true",
                    help="Triton's log on stderr (by default kept and shown on a failure)")
    return ap


# -- the model's description -----------------------------------------------------------------


class ModelInfo:
    """What config.pbtxt says about the model: I/O names, Triton types, dims without the batch
    axis where the model has one (batched), else the full dims."""

    def __init__(self, inputs, outputs, batched: bool,
                 engine_batches: Optional[Tuple[int, int]]) -> None:
        self.inputs = inputs      # [(name, TYPE_X, dims)]
        self.outputs = outputs
        self.batched = batched
        self.engine_batches = engine_batches  # a .tsl's batch range (min, max), fixed


def _io(args, batched: bool, what: str):
    out = []
    for a in args:
        if a.type not in _TRITON_TYPES:
            raise ServeError("%s '%s' is %s, which Triton has no tensor type for"
                             % (what, a.name, a.type))
        out.append((a.name, _TRITON_TYPES[a.type], list(a.shape[1:] if batched else a.shape)))
    return out


def describe_model(path: str, device: str) -> ModelInfo:
    """Opens the model (on the CPU reference for .onnx/.tir: no GPU needed) to read its inputs
    and outputs. It has a batch axis when every input and output's first extent follows the
    session's batch (a symbolic batch dimension)."""
    import tessel

    if path.endswith(".tsl"):
        if device != "cuda":
            raise ServeError("%s: an engine file runs on the GPU only (--device cuda)" % path)
        s = tessel.InferenceSession(path, device="cuda")
        # A dynamic engine's batch extent reads tessel.BATCH_DIM, a static one's its batch.
        b = s.get_inputs()[0].shape[0] if s.get_inputs()[0].shape else 1
        batched = all(a.shape and a.shape[0] == b for a in s.get_inputs() + s.get_outputs())
        return ModelInfo(_io(s.get_inputs(), batched, "input"),
                         _io(s.get_outputs(), batched, "output"), batched, s.batch_range)
    one = tessel.InferenceSession(path, device="cpu", batch=1)
    three = tessel.InferenceSession(path, device="cpu", batch=3)
    pairs = list(zip(one.get_inputs() + one.get_outputs(), three.get_inputs() + three.get_outputs()))
    batched = all(a.shape and b.shape and a.shape[0] == 1 and b.shape[0] == 3 for a, b in pairs)
    return ModelInfo(_io(one.get_inputs(), batched, "input"),
                     _io(one.get_outputs(), batched, "output"), batched, None)


# -- the model repository --------------------------------------------------------------------


def _quote(s: str) -> str:
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def config_pbtxt(name: str, info: ModelInfo, model_file: str, device: str,
                 gpus: Optional[List[int]], instances: int, max_batch: int, queue_delay_us: int,
                 precision: str, python_path: str = "", backend: str = "tessel",
                 profile_every: int = 8, pipeline: int = 2,
                 preferred: Sequence[int] = ()) -> str:
    def tensors(items):
        return ",\n".join("  { name: %s data_type: %s dims: [ %s ] }"
                          % (_quote(n), t, ", ".join(str(d) for d in dims)) for n, t, dims in items)

    runs = ("tessel's backend (libtriton_tessel.so)" if backend == "tessel"
            else "Triton's Python backend (model.py)")
    lines = ["# Written by `tessel serve`: a tessel model for %s." % runs,
             "name: %s" % _quote(name),
             "backend: %s" % _quote(backend),
             "max_batch_size: %d" % (max_batch if info.batched else 0),
             "input [\n%s\n]" % tensors(info.inputs),
             "output [\n%s\n]" % tensors(info.outputs)]
    if device == "cpu":
        lines.append("instance_group [ { count: %d kind: KIND_CPU } ]" % instances)
    elif gpus is None:  # every GPU Triton sees
        lines.append("instance_group [ { count: %d kind: KIND_GPU } ]" % instances)
    else:
        lines.append("instance_group [ { count: %d kind: KIND_GPU gpus: [ %s ] } ]"
                     % (instances, ", ".join(str(g) for g in gpus)))
    if info.batched:
        prefer = ("preferred_batch_size: [ %s ] " % ", ".join(str(b) for b in preferred)
                  if preferred else "")
        lines.append("dynamic_batching { %smax_queue_delay_microseconds: %d }"
                     % (prefer, queue_delay_us))
    params = [("model_file", model_file), ("device", device), ("precision", precision),
              ("profile_every", str(profile_every))]
    if backend == "tessel":
        params.append(("pipeline", str(pipeline)))
    if python_path and backend == "python":  # `tessel serve`'s own: where this tessel is
        params.append(("python_path", python_path))
    for key, value in params:
        lines.append("parameters: { key: %s value: { string_value: %s } }"
                     % (_quote(key), _quote(value)))
    return "\n".join(lines) + "\n"


def backend_library() -> str:
    """tessel's Triton backend, built into the package beside _core."""
    import tessel

    path = os.path.join(os.path.dirname(os.path.abspath(tessel.__file__)), "backends", "tessel",
                        "libtriton_tessel.so")
    if not os.path.isfile(path):
        raise ServeError("%s is missing: this tessel package was built without its Triton backend "
                         "(rebuild it, or serve with --backend python)" % path)
    return path


def write_repository(repo: str, name: str, model: str, config: str, link_model: bool,
                     backend: str = "tessel", copy_backend: bool = False) -> str:
    """repo/name/{config.pbtxt, 1/model<suffix>} and, for the Python backend, 1/model.py; with
    copy_backend the tessel backend's library in repo/name (where Triton looks for a model's
    backend before its backend directory). Returns the model directory."""
    model_dir = os.path.join(repo, name)
    if os.path.exists(model_dir):
        raise ServeError("%s already exists: choose another --export-repo or --name" % model_dir)
    version = os.path.join(model_dir, "1")
    os.makedirs(version)
    with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
        f.write(config)
    if backend == "python":
        shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "triton_model.py"), os.path.join(version, "model.py"))
    elif copy_backend:
        shutil.copyfile(backend_library(), os.path.join(model_dir, "libtriton_tessel.so"))
    target = os.path.join(version, "model" + os.path.splitext(model)[1])
    if link_model:
        os.symlink(os.path.abspath(model), target)
    else:
        shutil.copyfile(model, target)
    return model_dir


# -- Triton ----------------------------------------------------------------------------------


def find_triton(triton_dir: Optional[str]) -> Tuple[str, str]:
    """(the tritonserver tree, its libraries' folder): nvidia-pytriton's, or --triton-dir."""
    if triton_dir is None:
        spec = importlib.util.find_spec("pytriton")
        if spec is None or not spec.submodule_search_locations:
            raise ServeError("tessel serve needs Triton Inference Server from the nvidia-pytriton "
                             "package: pip install 'nvidia-pytriton==0.7.0' (or pip install "
                             ".[serve] in the tessel source tree)")
        triton_dir = os.path.join(list(spec.submodule_search_locations)[0], "tritonserver")
    server = os.path.join(triton_dir, "bin", "tritonserver")
    if not os.access(server, os.X_OK):
        raise ServeError("%s: no tritonserver there (expected bin/tritonserver, as in "
                         "nvidia-pytriton's pytriton/tritonserver)" % triton_dir)
    # site-packages/pytriton/tritonserver beside site-packages/nvidia_pytriton.libs
    libs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(triton_dir))),
                        "nvidia_pytriton.libs")
    if not os.path.isdir(libs):
        raise ServeError("%s: no nvidia_pytriton.libs two folders up, where nvidia-pytriton keeps "
                         "the server's libraries" % triton_dir)
    return os.path.abspath(triton_dir), libs


def python_backend(triton_dir: str, work: str) -> str:
    """A backends folder whose Python backend runs this Python: nvidia-pytriton keeps one stub
    per Python version (each links that version's libpython), and Triton looks for the stub
    beside libtriton_python.so."""
    version = "%d.%d" % sys.version_info[:2]
    stub = os.path.join(triton_dir, "python_backend_stubs", version, "triton_python_backend_stub")
    if not os.path.exists(stub):
        stub = os.path.join(triton_dir, "backends", "python", "triton_python_backend_stub")
    if not os.path.exists(stub):
        raise ServeError("%s has no Python backend stub for Python %s (nvidia-pytriton 0.7 has "
                         "3.8 to 3.13)" % (triton_dir, version))
    backends = os.path.join(work, "backends")
    python = os.path.join(backends, "python")
    os.makedirs(python, exist_ok=True)
    for f in ("libtriton_python.so", "triton_python_backend_utils.py"):
        os.symlink(os.path.join(triton_dir, "backends", "python", f), os.path.join(python, f))
    os.symlink(stub, os.path.join(python, "triton_python_backend_stub"))
    return backends


def tessel_backend(work: str) -> str:
    """A backends folder with tessel's backend (backends/tessel/libtriton_tessel.so)."""
    folder = os.path.join(work, "backends", "tessel")
    os.makedirs(folder, exist_ok=True)
    os.symlink(backend_library(), os.path.join(folder, "libtriton_tessel.so"))
    return os.path.dirname(folder)


def check_python_for_stub() -> None:
    """The stub embeds this Python in isolated mode (as `python -I`: no PYTHONPATH, no user
    site): it needs its shared libpython, and numpy < 2 in its own site-packages."""
    probe = subprocess.run([sys.executable, "-I", "-c", "import numpy; print(numpy.__version__)"],
                           capture_output=True, text=True)
    version = probe.stdout.strip()
    if probe.returncode != 0 or not version:
        raise ServeError("%s -I cannot import numpy, which Triton's Python backend needs in that "
                         "Python's own site-packages (PYTHONPATH does not reach it)" % sys.executable)
    if int(version.split(".")[0]) >= 2:
        raise ServeError("Triton's Python backend (nvidia-pytriton 0.7, Triton 2.51) needs numpy < 2, "
                         "and %s has numpy %s: pip install 'numpy<2' (a venv will do)"
                         % (sys.executable, version))
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    soname = sysconfig.get_config_var("INSTSONAME") or ""
    if not (soname.endswith(".so.1.0") and os.path.exists(os.path.join(libdir, soname))):
        raise ServeError("%s has no shared libpython (%s in %s), which Triton's Python backend "
                         "stub loads: use a Python built with --enable-shared"
                         % (sys.executable, soname or "libpython", libdir or "?"))


def python_path() -> str:
    """What the stub's sys.path lacks: this tessel package's folder and $PYTHONPATH (the
    embedded interpreter ignores the variable; model.py puts them first)."""
    import tessel

    entries = [os.path.dirname(os.path.dirname(os.path.abspath(tessel.__file__)))]
    entries += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(os.path.abspath(p) for p in entries))


def stub_environment(libs: str) -> Dict[str, str]:
    """The environment of tritonserver and so of its stubs: this Python's libpython first (the
    stub links libpython3.X), and its bin folder first on PATH (the embedded interpreter finds
    its prefix, a venv's too, through `python3` there)."""
    env = dict(os.environ)
    lib_path = [sysconfig.get_config_var("LIBDIR"), libs]
    if env.get("LD_LIBRARY_PATH"):
        lib_path.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = ":".join(lib_path)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def _die_with_parent() -> None:
    """In the child: SIGTERM when the launcher dies, so no server outlives `tessel serve`."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def log_error(log: str) -> str:
    """The line of Triton's log that says why it stopped: a model that failed to load, else
    its last error."""
    lines = log.splitlines()
    for line in lines:
        m = re.search(r"UNAVAILABLE: (.*?)\s*\|?\s*$", line)
        if m:
            return m.group(1)
    for line in reversed(lines):
        if re.match(r"^(error:|E\d{4} )", line) or "error while loading" in line:
            return re.sub(r"^E\d{4} [\d:.]+ \d+ \S+\] ", "", line).strip().strip('"')
    return next((l for l in reversed(lines) if l.strip()), "no output")


class Server:
    """tritonserver running on a repository, stopped gracefully (in-flight requests answered)."""

    def __init__(self, args, triton_dir: str, libs: str, repo: str, backends: str,
                 work: str) -> None:
        cmd = [os.path.join(triton_dir, "bin", "tritonserver"),
               "--model-repository=" + repo, "--backend-directory=" + backends,
               "--http-address=" + args.host, "--http-port=%d" % args.port,
               "--grpc-address=" + args.host, "--grpc-port=%d" % args.grpc_port,
               "--metrics-address=" + args.host, "--metrics-port=%d" % args.metrics_port,
               "--exit-timeout-secs=60", "--strict-readiness=true"]
        if args.backend == "python":
            # Batches of large images take more than the default 1 MB steps.
            cmd.append("--backend-config=python,shm-growth-byte-size=%d" % (16 << 20))
        if args.device == "cpu":
            cmd += ["--allow-gpu-metrics=false", "--pinned-memory-pool-byte-size=0"]
        self.log_path = os.path.join(work, "triton.log")
        log = None if args.verbose else open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, env=stub_environment(libs), stdout=log,
                                     stderr=subprocess.STDOUT if log else None,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        if log:
            log.close()

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait()


def _parse_gpus(text: str) -> Optional[List[int]]:
    if text == "all":
        return None
    if not re.fullmatch(r"\d+(,\d+)*", text):
        raise ServeError("--gpus '%s': expected 'all' or GPU numbers such as 0,1" % text)
    gpus = [int(g) for g in text.split(",")]
    if len(set(gpus)) != len(gpus):
        raise ServeError("--gpus '%s': a GPU is listed twice" % text)
    return gpus


def _parse_preferred(text: Optional[str], max_batch: int) -> List[int]:
    """--preferred-batch's sizes, each a batch the batcher can form (1 to max_batch; 0: the
    model has no batch axis)."""
    if text is None:
        return []
    if not re.fullmatch(r"[0-9]+(,[0-9]+)*", text):
        raise ServeError("--preferred-batch '%s': expected batch sizes such as 16,32" % text)
    sizes = [int(b) for b in text.split(",")]
    if max_batch == 0:
        raise ServeError("--preferred-batch %s: the model has no batch axis" % text)
    for b in sizes:
        if not 1 <= b <= max_batch:
            raise ServeError("--preferred-batch %s: %d is not a batch from 1 to the largest, %d"
                             % (text, b, max_batch))
    return sorted(set(sizes))


def _check_args(args) -> Optional[List[int]]:
    if not os.path.isfile(args.model):
        raise ServeError("%s: cannot open file" % args.model)
    if not args.model.endswith(_MODEL_SUFFIXES):
        raise ServeError("%s: expected an .onnx, .tir or .tsl file" % args.model)
    for flag, value, low in (("--max-batch", args.max_batch, 1), ("--instances", args.instances, 1),
                             ("--max-queue-delay-us", args.max_queue_delay_us, 0),
                             ("--profile-every", args.profile_every, 1)):
        if value < low:
            raise ServeError("%s %d: expected at least %d" % (flag, value, low))
    gpus = _parse_gpus(args.gpus)
    if args.device == "cpu" and args.gpus != "all":
        raise ServeError("--gpus %s: the model runs on the CPU (--device cpu)" % args.gpus)
    if args.name is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", args.name):
        raise ServeError("--name '%s': use letters, digits, '_', '.' and '-'" % args.name)
    if args.export_repo is None:
        ports = [("--port", args.port), ("--grpc-port", args.grpc_port),
                 ("--metrics-port", args.metrics_port)]
        for flag, port in ports:
            if not 0 < port < 65536:
                raise ServeError("%s %d: expected a port number from 1 to 65535" % (flag, port))
        if len({p for _, p in ports}) != 3:
            raise ServeError("--port, --grpc-port and --metrics-port must differ")
        for flag, port in ports:
            if not _port_free(args.host, port):
                raise ServeError("%s %d: %s:%d is in use (or not an address here)"
                                 % (flag, port, args.host, port))
    return gpus


def _model_name(args) -> str:
    if args.name:
        return args.name
    stem = os.path.splitext(os.path.basename(args.model))[0]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem).lstrip(".-") or "model"


def serve(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    gpus = _check_args(args)
    import tessel

    if args.device == "cuda" and args.export_repo is None:
        ok, why = tessel._core.cuda_available()
        if not ok:
            raise ServeError("--device cuda: no CUDA device here (%s); --device cpu serves on "
                             "tessel's CPU reference executor" % why)
    triton = None if args.export_repo else find_triton(args.triton_dir)
    if args.backend == "tessel":
        backend_library()  # missing: say so before anything starts
    elif triton:
        check_python_for_stub()
    info = describe_model(args.model, args.device)
    if info.engine_batches is not None and info.batched:
        # An engine file's batches are fixed: the batcher forms batches up to its largest (the
        # stub pads one below its smallest).
        max_batch = info.engine_batches[1]
    else:
        max_batch = args.max_batch
    name = _model_name(args)
    preferred = _parse_preferred(args.preferred_batch, max_batch if info.batched else 0)
    config = config_pbtxt(name, info, "model" + os.path.splitext(args.model)[1], args.device, gpus,
                          args.instances, max_batch, args.max_queue_delay_us, args.precision,
                          "" if args.export_repo else python_path(), args.backend,
                          args.profile_every, args.pipeline, preferred)
    batching = ("batch 1..%d through Triton's dynamic batcher (queue delay %d us%s)"
                % (max_batch, args.max_queue_delay_us,
                   ", preferring %s" % ",".join(map(str, preferred)) if preferred else "")
                if info.batched else "no batch axis")

    if args.export_repo:
        model_dir = write_repository(args.export_repo, name, args.model, config, link_model=False,
                                     backend=args.backend, copy_backend=args.backend == "tessel")
        model_file = "1/model" + os.path.splitext(args.model)[1]
        if args.backend == "tessel":
            print("tessel serve: wrote %s (config.pbtxt, libtriton_tessel.so, %s): '%s' on %s, "
                  "%s; load it with a Triton of backend API 1.x (the library needs the "
                  "libraries it was built with: ldd shows them)"
                  % (model_dir, model_file, name, args.device, batching))
        else:
            print("tessel serve: wrote %s (config.pbtxt, 1/model.py, %s): '%s' on %s, %s; load "
                  "it with a Triton whose Python backend has the tessel package and numpy < 2"
                  % (model_dir, model_file, name, args.device, batching))
        return 0

    work = tempfile.mkdtemp(prefix="tessel_serve_")
    server = None
    stopping = []

    def on_signal(signum, _frame):
        stopping.append(signum)
        if server is not None and server.proc.poll() is None:
            server.proc.send_signal(signal.SIGTERM)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        repo = os.path.join(work, "repo")
        write_repository(repo, name, args.model, config, link_model=True, backend=args.backend)
        backends = (tessel_backend(work) if args.backend == "tessel"
                    else python_backend(triton[0], work))
        server = Server(args, triton[0], triton[1], repo, backends, work)
        probe = "127.0.0.1" if args.host in ("0.0.0.0", "") else args.host
        ready = "http://%s:%d/v2/models/%s/ready" % (probe, args.port, name)
        deadline = time.monotonic() + args.start_timeout
        while not stopping:
            if server.proc.poll() is not None:
                raise ServeError("Triton stopped while loading '%s': %s"
                                 % (name, log_error(server.log())))
            if _ready(ready):
                break
            if time.monotonic() > deadline:
                server.stop()
                raise ServeError("Triton was not ready after %g s (--start-timeout): %s"
                                 % (args.start_timeout, log_error(server.log())))
            time.sleep(0.2)
        if not stopping:
            where = "all GPUs" if gpus is None else "GPU " + ",".join(map(str, gpus))
            print("tessel serve: '%s' (%s, %s%s, %s) at KServe v2 HTTP %s:%d, gRPC %s:%d, "
                  "metrics http://%s:%d/metrics; SIGINT or SIGTERM stops it"
                  % (name, os.path.basename(args.model), args.device,
                     "" if args.device == "cpu" else " on " + where, batching, args.host,
                     args.port, args.host, args.grpc_port, args.host, args.metrics_port),
                  flush=True)
        code = server.proc.wait()
        if not stopping:
            raise ServeError("Triton exited with status %d: %s" % (code, log_error(server.log())))
        print("tessel serve: stopped (in-flight requests answered; Triton exit status %d)" % code,
              flush=True)
        return 0 if code == 0 else 1
    finally:
        if server is not None and server.proc.poll() is None:
            server.stop()
        for s, handler in old.items():
            signal.signal(s, handler)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return serve(argv)
    except ServeError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    except Exception as e:  # tessel.Error and kin: the CLI's one line
        import tessel

        if isinstance(e, tessel.Error):
            print("error: %s" % str(e).splitlines()[0], file=sys.stderr)
            return 2
        raise
