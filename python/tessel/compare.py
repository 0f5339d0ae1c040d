"""`tessel compare`: a model run by tessel against onnxruntime or against tessel's own CPU
reference, output by output, and with --bisect layer by layer.

    tessel compare MODEL --against onnxruntime|cpu [--input name=x.npy]... [--seed S]
                   [--device cpu|cuda] [--precision fp16|fp32] [--batch N]
                   [--input-shape name=1x3x224x224]... [--atol A] [--rtol R]
                   [--reference-model OTHER.onnx] [--bisect]

Both sides run on the same inputs (.npy files, the others seeded uniform random). Per output:
the largest absolute and relative error and PASS where every element is within
atol + rtol * |reference| (numpy.allclose's rule); the relative error leaves out the elements
where the reference is 0. --bisect marks every intermediate value of
the model as an output as well (as Polygraphy's `--mark all` does), runs both once and names
the first layer, in the model's order, whose output diverges while its inputs agree.
--reference-model runs another file on the reference side (the float original of a quantized
model, say); its values are matched by name.

Exit code: 0 when every output passes, 1 when one fails, 2 for a user error (one line,
"error: ...", as the tessel CLI prints it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _session
from ._core import Error

# Tolerances by what tessel runs: the CPU reference and fp32 GPU engines accumulate in fp32
# (a different summation order than onnxruntime's); fp16 storage rounds every activation.
_DEFAULT_TOLERANCE = {"fp32": (1e-4, 1e-3), "fp16": (2e-2, 2e-2)}

# ONNX element types a value may have to be marked by --bisect: the float types, and int8 /
# uint8 (the quantized values between QuantizeLinear and DequantizeLinear).
_MARKABLE = {1, 10, 11, 16, 2, 3}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16, UINT8, INT8


class UsageError(Error):
    """A wrong command line or input file, reported as one line."""


@dataclass
class Diff:
    """How one tensor of tessel's differs from the reference's."""

    name: str
    type_str: str
    max_abs: float
    max_rel: float
    worst_index: Tuple[int, ...]
    passed: bool
    note: str = ""


def diff(name: str, got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> Diff:
    """Compares `got` (tessel) with `want` (the reference) by numpy.allclose's rule."""
    type_str = _session._type_str(_session._NUMPY_NAMES.get(want.dtype, str(want.dtype)),
                                  want.shape)
    if got.shape != want.shape:
        return Diff(name, type_str, float("inf"), float("inf"), (), False,
                    "shape %s, reference %s" % (list(got.shape), list(want.shape)))
    a = got.astype(np.float64)
    b = want.astype(np.float64)
    if a.size == 0:
        return Diff(name, type_str, 0.0, 0.0, (), True)
    err = np.abs(a - b)
    nan_mismatch = np.isnan(a) != np.isnan(b)
    err = np.where(np.isnan(a) & np.isnan(b), 0.0, err)
    err = np.where(nan_mismatch, np.inf, err)
    # Relative to the reference where it is not 0 (a ReLU's zeros would make it infinite).
    rel = np.divide(err, np.abs(b), out=np.zeros_like(err), where=np.abs(b) > 0)
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
    passed = bool(np.all(err <= atol + rtol * np.abs(np.nan_to_num(b))))
    return Diff(name, type_str, float(err.max()), float(rel.max()), worst, passed)


def _parse_shape(text: str, what: str) -> List[int]:
    try:
        dims = [int(d) for d in text.split("x")]
    except ValueError:
        dims = [-1]
    if not dims or any(d < 0 for d in dims):
        raise UsageError("%s: '%s' is not a shape like 1x3x224x224" % (what, text))
    return dims


def _random_feed(arg: _session.NodeArg, rng: np.random.Generator) -> np.ndarray:
    if arg.dtype is None:
        raise UsageError("input '%s' is %s: give it with --input name=file.npy"
                         % (arg.name, arg.type))
    if arg.dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=arg.shape).astype(arg.dtype)
    if arg.dtype.kind == "b":
        return rng.integers(0, 2, size=arg.shape).astype(arg.dtype)
    return rng.integers(0, 10, size=arg.shape).astype(arg.dtype)


def _marked_model(path: str, out_dir: str) -> Tuple[str, List[Tuple[str, str, str]]]:
    """A copy of the ONNX model at `path` with every intermediate value of a markable type added
    to the graph outputs. Returns its path and the marked values in the model's order, each as
    (value, node name, op type)."""
    import onnx

    model = onnx.load(path)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    g = inferred.graph
    types = {}
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    have = {o.name for o in model.graph.output}
    constants = {i.name for i in model.graph.initializer}
    marked = []
    for node in model.graph.node:
        if node.op_type == "Constant":
            constants.update(node.output)
            continue
        for v in node.output:
            if not v or v in constants or types.get(v) not in _MARKABLE:
                continue
            marked.append((v, node.name or "(unnamed %s)" % node.op_type, node.op_type))
            if v not in have:
                model.graph.output.append(onnx.helper.make_tensor_value_info(v, types[v], None))
                have.add(v)
    out = os.path.join(out_dir, "marked_" + os.path.basename(path))
    large = model.ByteSize() > (1 << 30)
    onnx.save(model, out, save_as_external_data=large,
              location=os.path.basename(out) + ".data" if large else None)
    return out, marked


class _OrtRunner:
    """The onnxruntime side: its CPU execution provider, graph optimisations off, so that it
    evaluates the model as written."""

    def __init__(self, path: str):
        try:
            import onnxruntime as ort
        except ImportError:
            raise UsageError("--against onnxruntime needs onnxruntime: pip install onnxruntime") \
                from None
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.log_severity_level = 3
        try:
            self.sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise UsageError("onnxruntime cannot load %s: %s"
                             % (path, str(e).strip().splitlines()[-1])) from None
        self.title = "onnxruntime %s (CPUExecutionProvider)" % ort.__version__

    def run(self, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        names = [o.name for o in self.sess.get_outputs()]
        wanted = {i.name for i in self.sess.get_inputs()}
        try:
            values = self.sess.run(names, {k: v for k, v in feeds.items() if k in wanted})
        except Exception as e:
            raise UsageError("onnxruntime failed: %s" % str(e).strip().splitlines()[-1]) from None
        return dict(zip(names, values))


class _TesselRunner:
    def __init__(self, path: str, device: str, precision: str, batch: Optional[int],
                 shapes: Dict[str, List[int]]):
        self.sess = _session.InferenceSession(path, device=device, precision=precision,
                                              batch=batch, input_shapes=shapes)
        self.device = device
        self.title = ("tessel cpu (reference executor)" if device == "cpu"
                      else "tessel cuda (%s engine)" % precision)

    def run(self, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        names = [o.name for o in self.sess.get_outputs()]
        return dict(zip(names, self.sess.run(None, feeds)))


class _ArgumentParser(argparse.ArgumentParser):
    """Reports a wrong command line in one line, as the tessel CLI does."""

    def error(self, message: str):
        print("error: %s (see --help)" % message, file=sys.stderr)
        sys.exit(2)


def _build_parser() -> argparse.ArgumentParser:
    ap = _ArgumentParser(
        prog="tessel compare",
        description="Run a model with tessel and with a reference (onnxruntime, or tessel's CPU "
                    "reference executor), and compare every output; --bisect finds the first "
                    "layer where they diverge.")
    ap.add_argument("model", help="ONNX model (.onnx); .tir too without --bisect or onnxruntime")
    ap.add_argument("--against", required=True, choices=["onnxruntime", "cpu"],
                    help="the reference: onnxruntime's CPU provider, or tessel's CPU reference "
                         "executor (then tessel runs on the GPU)")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                    help="an input from a .npy file (the others are seeded uniform random)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    ap.add_argument("--device", choices=["cpu", "cuda"],
                    help="where tessel runs: cuda for --against cpu; for --against onnxruntime "
                         "cuda where a GPU is present, else cpu")
    ap.add_argument("--precision", choices=["fp16", "fp32"], default="fp16",
                    help="GPU storage precision")
    ap.add_argument("--batch", type=int, help="batch size for a symbolic first dimension")
    ap.add_argument("--input-shape", action="append", default=[], metavar="NAME=1x3x224x224",
                    help="static shape of an input")
    ap.add_argument("--atol", type=float, help="absolute tolerance (default by precision)")
    ap.add_argument("--rtol", type=float, help="relative tolerance (default by precision)")
    ap.add_argument("--reference-model", metavar="FILE",
                    help="run this model on the reference side instead of MODEL")
    ap.add_argument("--bisect", action="store_true",
                    help="mark every intermediate value as an output and name the first layer "
                         "whose output diverges")
    return ap


def _fmt(x: float) -> str:
    return "%.3g" % x


def run_compare(args: argparse.Namespace, out=sys.stdout) -> int:
    """`tessel compare` on parsed arguments: prints the report, returns the exit code."""
    for path in [args.model] + ([args.reference_model] if args.reference_model else []):
        if not os.path.isfile(path):
            raise UsageError("%s: cannot open file" % path)
    if args.batch is not None and args.batch < 1:
        raise UsageError("--batch %d: expected a positive batch size" % args.batch)
    device = args.device
    if device is None:
        device = "cuda" if args.against == "cpu" or _session.cuda_available() else "cpu"
    if args.against == "cpu" and device == "cpu":
        raise UsageError("--against cpu compares tessel's GPU engine with its CPU reference: "
                         "it needs --device cuda")
    shapes = {}
    for spec in args.input_shape:
        name, eq, dims = spec.partition("=")
        if not eq or not name:
            raise UsageError("--input-shape '%s': expected name=1x3x224x224" % spec)
        shapes[name] = _parse_shape(dims, "--input-shape")
    precision = "fp32" if device == "cpu" else args.precision
    atol, rtol = _DEFAULT_TOLERANCE[precision]
    atol = atol if args.atol is None else args.atol
    rtol = rtol if args.rtol is None else args.rtol

    with tempfile.TemporaryDirectory(prefix="tessel_compare_") as tmp:
        model, reference = args.model, args.reference_model or args.model
        marked: List[Tuple[str, str, str]] = []
        if args.bisect:
            if not model.endswith(".onnx") or not reference.endswith(".onnx"):
                raise UsageError("--bisect marks values of an ONNX model: %s is not one"
                                 % (model if not model.endswith(".onnx") else reference))
            model, marked = _marked_model(model, tmp)
            if reference == args.model:
                reference = model
            else:
                reference, _ = _marked_model(reference, tempfile.mkdtemp(dir=tmp))
        if args.against == "onnxruntime" and not reference.endswith(".onnx"):
            raise UsageError("onnxruntime runs ONNX models: %s is not one" % reference)

        tessel = _TesselRunner(model, device, args.precision, args.batch, shapes)
        if args.against == "onnxruntime":
            ref = _OrtRunner(reference)
        else:
            ref = _TesselRunner(reference, "cpu", "fp32", args.batch, shapes)

        rng = np.random.default_rng(args.seed)
        given = {}
        by_name = {a.name: a for a in tessel.sess.get_inputs()}
        for spec in args.input:
            name, eq, path = spec.partition("=")
            if not eq or not name:
                raise UsageError("--input '%s': expected name=path.npy" % spec)
            if name not in by_name:
                raise UsageError("--input '%s': the model has no input named '%s'" % (spec, name))
            try:
                given[name] = np.load(path)
            except (OSError, ValueError) as e:
                raise UsageError("%s: cannot read a .npy file (%s)" % (path, e)) from None
        feeds = {}
        for a in tessel.sess.get_inputs():
            feeds[a.name] = given[a.name] if a.name in given else _random_feed(a, rng)
        print("%s vs %s; atol %s, rtol %s; inputs: %s" % (
            tessel.title, ref.title, _fmt(atol), _fmt(rtol),
            ", ".join("%s %s%s" % (n, _session._type_str(_session._NUMPY_NAMES.get(v.dtype, "?"),
                                                         v.shape),
                                   "" if n in given else " (random, seed %d)" % args.seed)
                      for n, v in feeds.items())), file=out)

        got = tessel.run(feeds)
        want = ref.run(feeds)

    outputs = [o.name for o in tessel.sess.get_outputs()]
    original = outputs if not marked else _original_outputs(args.model)
    failed = 0
    for name in original:
        if name not in want:
            print("output %s: the reference has no output of that name" % name, file=out)
            failed += 1
            continue
        d = diff(name, got[name], want[name], atol, rtol)
        failed += not d.passed
        print("output %-24s %-18s max abs %-9s max rel %-9s %s%s" % (
            d.name, d.type_str, _fmt(d.max_abs), _fmt(d.max_rel),
            "PASS" if d.passed else "FAIL at %s" % list(d.worst_index),
            " (%s)" % d.note if d.note else ""), file=out)
    print("%d passed, %d failed" % (len(original) - failed, failed), file=out)

    if marked:
        _report_bisect(marked, got, want, atol, rtol, out)
    return 1 if failed else 0


def _original_outputs(path: str) -> List[str]:
    import onnx

    return [o.name for o in onnx.load(path, load_external_data=False).graph.output]


def _report_bisect(marked: Sequence[Tuple[str, str, str]], got: Dict[str, np.ndarray],
                   want: Dict[str, np.ndarray], atol: float, rtol: float, out) -> None:
    """Names the first marked value, in the model's order, that diverges."""
    compared = 0
    for value, node, op in marked:
        if value not in got or value not in want:
            continue
        compared += 1
        d = diff(value, got[value], want[value], atol, rtol)
        if not d.passed:
            print("bisect: %d of %d intermediate values compared; first divergence at layer '%s' "
                  "(%s), output '%s' %s: max abs %s, max rel %s at %s; every value before it agrees" % (
                      compared, len(marked), node, op, value, d.type_str, _fmt(d.max_abs),
                      _fmt(d.max_rel), list(d.worst_index)), file=out)
            return
    print("bisect: all %d intermediate values compared agree within tolerance" % compared,
          file=out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: `python -m tessel compare ...` and `tessel compare ...`."""
    args = _build_parser().parse_args(argv)
    try:
        return run_compare(args)
    except Error as e:
        print("error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
