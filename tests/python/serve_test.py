#!/usr/bin/env python3
"""`tessel serve`: Triton Inference Server on loopback with a small model on the CPU device,
spoken to over KServe v2 HTTP with nothing but the standard library, checked against
onnxruntime.

One server per backend (tessel's C++ backend, then Triton's Python backend; each started once
through the tessel binary) answers every case:
  - health (live, ready), server and model metadata, the model's config (max batch, batcher)
  - inference in JSON at batch 1 and 3, and with binary tensor data at batch 2, against
    onnxruntime
  - 24 concurrent clients: every answer right, and Triton's dynamic batcher fed tessel fewer
    runs than requests (its metrics)
  - clients that disconnect mid-request change nothing
  - a wrong input name, shape, element type, a batch over the limit, malformed JSON, an unknown
    model: each gets a one-line error naming the mistake, and the server answers the next
    request right; the metrics count the failures
  - SIGTERM: the server stops cleanly (exit 0, its workspace and processes gone)
A second server, on a model slow enough on the CPU reference, is stopped while requests are in
flight: each still gets its right answer (shutdown drains them). Then the user errors of
`tessel serve` itself, the stub's batch adapter (one dynamic-batch session, batches fed as they
are), a model of two inputs and two outputs whose requests each get the outputs they ask for
(tessel's backend), --export-repo's repositories, and an exported repository loaded by a plain tritonserver
(the backend library found in the model's folder) whose config lets through a shape the model
does not take: tessel's backend answers that request with its own error and serves the next.

    serve_test.py --tessel build/src/cli/tessel --source .   (PYTHONPATH=build/python)
Fails at once where nvidia-pytriton is not installed (scripts/setup.sh installs it).
"""

import argparse
import atexit
import concurrent.futures
from http.client import HTTPResponse
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("--tessel", required=True, help="the tessel binary")
ap.add_argument("--source", required=True, help="repository root")
ARGS = ap.parse_args()
sys.path.insert(0, os.path.join(ARGS.source, "tests", "models"))
import tiny_cnns  # noqa: E402

if importlib.util.find_spec("pytriton") is None:
    print("FAIL: nvidia-pytriton is not installed for %s (scripts/setup.sh installs it)"
          % sys.executable)
    sys.exit(1)

WORK = tempfile.mkdtemp(prefix="tessel_serve_test_")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)  # 58 MB a run were left behind
MODEL = os.path.join(WORK, "tiny_classifier.onnx")
onnx.save(tiny_cnns.tiny_classifier(batch="N"), MODEL)
NAME = "tiny_classifier"
MAX_BATCH = 8
ENV = dict(os.environ, TESSEL_PYTHON=sys.executable)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Served:
    """`tessel serve MODEL --device cpu` on loopback, started through the tessel binary."""

    def __init__(self, model, *extra, backend="tessel"):
        self.backend = backend
        self.http, grpc, metrics = free_ports(3)
        self.metrics = metrics
        self.proc = subprocess.Popen(
            [ARGS.tessel, "serve", model, "--device", "cpu", "--host", "127.0.0.1",
             "--port", str(self.http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
             "--backend", backend] + list(extra), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        self.banner = self.proc.stdout.readline()  # the line once the model is ready
        self.start_s = time.monotonic() - t0
        assert self.banner.startswith("tessel serve: "), (
            "no ready line: %r, stderr: %s" % (self.banner, self.proc.stderr.read()))
        self.url = "http://127.0.0.1:%d" % self.http

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err


def http(method, url, body=None, headers=None):
    """(status, headers, body bytes) of one request; HTTP errors are answers too."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def infer_json(url, x, name="input", datatype="FP32", model=NAME):
    body = {"inputs": [{"name": name, "shape": list(x.shape), "datatype": datatype,
                        "data": x.ravel().tolist()}]}
    return http("POST", "%s/v2/models/%s/infer" % (url, model), json.dumps(body).encode())


def logits(status, body):
    assert status == 200, "HTTP %d: %s" % (status, body[:300])
    (out,) = json.loads(body)["outputs"]
    assert out["name"] == "logits" and out["datatype"] == "FP32", out
    return np.array(out["data"], np.float32).reshape(out["shape"])


def error_line(status, body, code=400):
    assert status == code, "HTTP %d, expected %d: %s" % (status, code, body[:300])
    msg = json.loads(body)["error"]
    assert msg and "\n" not in msg, repr(msg)
    return msg


def ort_session(path):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


REF = ort_session(MODEL)


def reference(x):
    return REF.run(None, {"input": x})[0]


def rel_l2(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def assert_close(got, want, what):
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, got.shape, want.shape)
    err = rel_l2(got, want)
    assert err < 1e-5, "%s: relative L2 error %g against onnxruntime" % (what, err)


def metric(s, name, model=NAME):
    """A counter of Triton's Prometheus metrics for the model (on the metrics port), summed over
    its other labels (nv_inference_request_failure has a reason)."""
    status, _, body = http("GET", "http://127.0.0.1:%d/metrics" % s.metrics)
    assert status == 200
    values = re.findall(r'^%s\{([^}]*)\} (\d+)' % name, body.decode(), re.M)
    values = [int(v) for labels, v in values if 'model="%s"' % model in labels]
    assert values, "no %s for %s in the metrics" % (name, model)
    return sum(values)


RNG = np.random.default_rng(11)


def images(batch):
    return RNG.uniform(-1, 1, size=(batch, 3, 32, 32)).astype(np.float32)


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


# -- cases on the one server -------------------------------------------------------------------


@test
def health_metadata_and_config(s):
    assert "'%s'" % NAME in s.banner and "batch 1..%d" % MAX_BATCH in s.banner, s.banner
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/%s/ready" % NAME):
        assert http("GET", s.url + path)[0] == 200, path
    status, _, body = http("GET", s.url + "/v2")
    server = json.loads(body)
    assert status == 200 and server["name"] == "triton" and server["version"], server
    status, _, body = http("GET", s.url + "/v2/models/" + NAME)
    meta = json.loads(body)
    assert status == 200, body
    assert meta["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 3, 32, 32]}], meta
    assert meta["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}], meta
    status, _, body = http("GET", s.url + "/v2/models/%s/config" % NAME)
    config = json.loads(body)
    assert config["max_batch_size"] == MAX_BATCH and "dynamic_batching" in config, config
    assert config["backend"] == s.backend, config


@test
def json_inference_matches_onnxruntime(s):
    for batch in (1, 3):
        x = images(batch)
        assert_close(logits(*infer_json(s.url, x)[::2]), reference(x), "batch %d" % batch)


@test
def binary_tensor_data_matches_onnxruntime(s):
    # Triton's binary tensor data extension: a JSON header, then the raw bytes.
    x = images(2)
    header = json.dumps({
        "inputs": [{"name": "input", "shape": [2, 3, 32, 32], "datatype": "FP32",
                    "parameters": {"binary_data_size": x.nbytes}}],
        "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    status, headers, body = http(
        "POST", "%s/v2/models/%s/infer" % (s.url, NAME), header + x.tobytes(),
        {"Inference-Header-Content-Length": str(len(header)),
         "Content-Type": "application/octet-stream"})
    assert status == 200, body[:300]
    n = int(headers["Inference-Header-Content-Length"])
    (out,) = json.loads(body[:n])["outputs"]
    assert out["shape"] == [2, 10] and out["parameters"]["binary_data_size"] == 80, out
    y = np.frombuffer(body[n:], np.float32).reshape(2, 10)
    assert_close(y, reference(x), "binary batch 2")


@test
def concurrent_clients_are_batched(s):
    runs0, inferences0 = metric(s, "nv_inference_exec_count"), metric(s, "nv_inference_count")
    requests = [images(1 + i % 2) for i in range(24)]
    barrier = threading.Barrier(len(requests))

    def one(x):
        barrier.wait()
        return logits(*infer_json(s.url, x)[::2])

    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(one, requests))
    for i, (x, y) in enumerate(zip(requests, answers)):
        assert_close(y, reference(x), "concurrent request %d" % i)
    runs = metric(s, "nv_inference_exec_count") - runs0
    inferences = metric(s, "nv_inference_count") - inferences0
    assert inferences == sum(len(x) for x in requests), inferences
    assert runs < len(requests), ("%d requests ran as %d tessel runs: the dynamic batcher "
                                  "gathered none" % (len(requests), runs))


@test
def load_tool_measures_and_splits_the_server_time(s):
    # bench/serve_load.py, the GPU run's load generator, on this server: closed-loop clients over
    # system shared memory, no errors, Triton's metrics split into batches and phases, and the
    # outputs the server wrote into the shared memory checked.
    out = os.path.join(WORK, "load.json")
    r = subprocess.run([sys.executable, os.path.join(ARGS.source, "bench", "serve_load.py"),
                        "--url", s.url, "--model", NAME, "--concurrency", "1,4",
                        "--seconds", "1", "--warmup", "0.3", "--procs", "2",
                        "--metrics", "http://127.0.0.1:%d/metrics" % s.metrics, "--json", out],
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.load(open(out))
    rows = result["rows"]
    assert [row["concurrency"] for row in rows] == [1, 4], rows
    # Each of the 4 clients' output slots holds what the server answers for the same input in
    # a request's body.
    check = result["output_check"]
    assert check["clients"] == 4 and check["max_rel_l2"] <= 1e-2, check
    for row in rows:
        assert row["requests"] > 0 and row["errors"] == 0, row
        assert row["server_batch"] >= 1 and row["infer_us"] > 0, row
    assert "requests per batch" in r.stdout, r.stdout


@test
def disconnecting_clients_change_nothing(s):
    # Clients that go away mid-body, and right after sending a whole request (its answer has
    # no one to go to), while the batcher waits for more: the server answers the next right.
    x = images(4)
    body = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    head = ("POST /v2/models/%s/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            "application/json\r\nContent-Length: %d\r\n\r\n" % (NAME, len(body))).encode()
    for cut in (len(body) // 2, len(body)):
        for _ in range(8):
            c = socket.create_connection(("127.0.0.1", s.http))
            c.sendall(head + body[:cut])
            c.close()
    # Until the orphaned requests are done (the success count settles), so that they do not
    # count in the cases after this one.
    last, deadline = None, time.monotonic() + 30
    while time.monotonic() < deadline:
        now = metric(s, "nv_inference_request_success")
        if now == last:
            break
        last = now
        time.sleep(0.5)
    y = images(3)
    assert_close(logits(*infer_json(s.url, y)[::2]), reference(y), "after disconnected clients")
    assert http("GET", s.url + "/v2/health/ready")[0] == 200


@test
def malformed_requests_get_an_error_and_the_server_goes_on(s):
    successes0 = metric(s, "nv_inference_request_success")
    x = images(1)
    checks = [
        (infer_json(s.url, x, name="image"), ["image"], 400),
        (infer_json(s.url, images(1)[:, :, :16, :16]), ["input", "[1,3,16,16]", "[-1,3,32,32]"], 400),
        (infer_json(s.url, x.astype(np.float64), datatype="FP64"), ["input", "FP64", "FP32"], 400),
        (infer_json(s.url, images(MAX_BATCH + 1)), ["batch", str(MAX_BATCH)], 400),
        # Triton answers a body that is no JSON with 500, its choice
        (http("POST", "%s/v2/models/%s/infer" % (s.url, NAME), b'{"inputs": [ {'), ["JSON"], 500),
    ]
    for i, ((status, _, body), words, *code) in enumerate(checks):
        msg = error_line(status, body, *code)
        print("  bad request %d: HTTP %d %s" % (i, status, msg))
        for w in words:
            assert w.lower() in msg.lower(), "case %d: %r does not say %r" % (i, msg, w)
        # and the next request is answered right
        y = images(2)
        assert_close(logits(*infer_json(s.url, y)[::2]), reference(y), "after bad request %d" % i)
    status, _, body = infer_json(s.url, x, model="no_such_model")
    assert "no_such_model" in error_line(status, body, code=400 if status == 400 else 404)
    # The good requests in between, and only they, succeeded.
    assert metric(s, "nv_inference_request_success") - successes0 == len(checks)
    assert http("GET", s.url + "/v2/health/ready")[0] == 200


# -- draining, on a model slow on the CPU reference ---------------------------------------------


def slow_model(path):
    """x[N,8,48,48] -> conv 8->64 3x3 -> relu -> four convs 64->64 3x3 -> mean over H, W: some
    hundred milliseconds a batch on tessel's CPU reference, against a request of 0.2 MB of JSON.
    A request must take longer to compute than the next to be read, so that a batch is still in
    flight when the last request has been delivered: with 32 channels at 96x96 (the same
    arithmetic, four times the JSON) a loaded CI machine twice saw all four answered first, and
    with two 64->64 convs once more (2026-11-30, the machine busy with a build)."""
    rng = np.random.default_rng(5)
    w1 = numpy_helper.from_array((rng.standard_normal((64, 8, 3, 3)) * 0.2).astype(np.float32), "w1")
    ws = [numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) * 0.07).astype(np.float32), "w%d" % i)
          for i in range(2, 6)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4, name="conv1"),
             helper.make_node("Relu", ["c1"], ["c1r"], name="relu1")]
    last = "c1r"
    for i in range(2, 6):
        nodes.append(helper.make_node("Conv", [last, "w%d" % i], ["c%d" % i], pads=[1] * 4, name="conv%d" % i))
        last = "c%d" % i
    nodes.append(helper.make_node("GlobalAveragePool", [last], ["y"], name="gap"))
    g = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 48, 48])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64, 1, 1])], [w1] + ws)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def two_inputs_two_outputs():
    """tessel's backend on a model of two inputs and two outputs, without the pipeline (each
    batch answered before the next is taken): a request gets the outputs it asks for and only
    those, each request of a batch its own rows, in both outputs."""
    path = os.path.join(WORK, "pair.onnx")
    nodes = [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Mul", ["a", "b"], ["prod"])]
    io = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 5])  # noqa: E731
    g = helper.make_graph(nodes, "pair", [io("a"), io("b")], [io("sum"), io("prod")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    s = Served(path, "--max-batch", "8", "--max-queue-delay-us", "20000", "--pipeline", "1")
    try:
        rng = np.random.default_rng(3)
        pairs = [(rng.uniform(-1, 1, (r, 5)).astype(np.float32),
                  rng.uniform(-1, 1, (r, 5)).astype(np.float32)) for r in (1, 3, 2)]

        def ask(pair, outputs):
            a, b = pair
            body = {"inputs": [{"name": n, "shape": list(v.shape), "datatype": "FP32",
                                "data": v.ravel().tolist()} for n, v in (("a", a), ("b", b))]}
            if outputs is not None:
                body["outputs"] = [{"name": o} for o in outputs]
            status, _, text = http("POST", "%s/v2/models/pair/infer" % s.url,
                                   json.dumps(body).encode())
            assert status == 200, text[:300]
            return {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"])
                    for o in json.loads(text)["outputs"]}

        # Concurrently, so that the batcher gathers them; each asks for other outputs.
        wanted = [None, ["prod"], ["sum"]]
        with concurrent.futures.ThreadPoolExecutor(len(pairs)) as pool:
            got = list(pool.map(ask, pairs, wanted))
        for (a, b), want, out in zip(pairs, wanted, got):
            assert sorted(out) == sorted(want or ["sum", "prod"]), (want, sorted(out))
            if "sum" in out:
                assert_close(out["sum"], a + b, "sum of %d rows" % len(a))
            if "prod" in out:
                assert_close(out["prod"], a * b, "prod of %d rows" % len(a))
        # Inputs of different batch sizes in one request: refused in one line (by Triton,
        # before the backend's own check of the same).
        a, b = pairs[1][0], pairs[0][1]
        body = {"inputs": [{"name": n, "shape": list(v.shape), "datatype": "FP32",
                            "data": v.ravel().tolist()} for n, v in (("a", a), ("b", b))]}
        status, _, text = http("POST", "%s/v2/models/pair/infer" % s.url, json.dumps(body).encode())
        msg = error_line(status, text)
        assert "batch size" in msg and "'a'" in msg, msg
    finally:
        code, out, err = s.stop()
    assert code == 0, err


def delivered(server_port, client_ports):
    """True when every connection from `client_ports` to `server_port` (loopback) has sent all
    it was given and the server has read all of it (/proc/net/tcp: the client end's send queue
    and the server end's receive queue empty)."""
    ends = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, remote = int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16)
            tx, rx = (int(q, 16) for q in f[4].split(":"))
            ends[(local, remote)] = (tx, rx)
    for c in client_ports:
        if ends.get((c, server_port), (1, 1))[0] or ends.get((server_port, c), (1, 1))[1]:
            return False
    return True


def post_raw(port, path, body):
    """A request sent whole over a socket of its own, its answer not read yet."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (path, len(body))).encode()
    sock.sendall(head + body)
    return sock


def answer_of(sock):
    r = HTTPResponse(sock)
    r.begin()
    body = r.read()
    sock.close()
    return r.status, body


def shutdown_drains_in_flight_requests():
    path = slow_model(os.path.join(WORK, "slow.onnx"))
    ref = ort_session(path)
    s = Served(path, "--max-batch", "2", "--max-queue-delay-us", "0")  # tessel's backend
    xs = [np.random.default_rng(i).uniform(-1, 1, (2, 8, 48, 48)).astype(np.float32)
          for i in range(4)]
    bodies = [json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                      "data": x.ravel().tolist()}]}).encode() for x in xs]
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(xs)) as pool:
        # Each request sent whole, on a thread of its own (the server reads them as it can).
        socks = list(pool.map(lambda b: post_raw(s.http, "/v2/models/slow/infer", b), bodies))
        # SIGTERM once Triton has read all four (one still being sent when the server stops
        # listening is refused, not drained: on a loaded machine a fixed 0.3 s was not always
        # enough), while some are not answered yet.
        ports = [k.getsockname()[1] for k in socks]
        deadline = time.monotonic() + 60
        while not delivered(s.http, ports) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # from read to queued
        answered = metric(s, "nv_inference_request_success", model="slow")
        assert answered < len(xs), "all answered before the signal: nothing left in flight"
        s.proc.send_signal(signal.SIGTERM)
        answers = list(pool.map(answer_of, socks))
    code, out, err = s.proc.wait(timeout=120), s.proc.stdout.read(), s.proc.stderr.read()
    elapsed = time.monotonic() - t0
    for i, ((status, body), x) in enumerate(zip(answers, xs)):
        assert status == 200, "in-flight request %d: HTTP %d %s" % (i, status, body[:200])
        (o,) = json.loads(body)["outputs"]
        y = np.array(o["data"], np.float32).reshape(o["shape"])
        assert_close(y, ref.run(None, {"x": x})[0], "in-flight request %d" % i)
    assert code == 0 and "stopped" in out, (code, out, err)
    print("  (4 in-flight requests of the slow model answered in %.1f s across SIGTERM)" % elapsed)


# -- the command's own errors and --export-repo --------------------------------------------------


def cli_error(*args, env=None):
    r = subprocess.run([ARGS.tessel, "serve"] + list(args), capture_output=True, text=True,
                       env=env or ENV, timeout=120)
    assert r.returncode == 2, "tessel serve %s: exit %d\n%s%s" % (args, r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0][len("error: "):]


def user_errors():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    p1, p2, p3 = free_ports(3)
    ports = ["--host", "127.0.0.1", "--port", str(p1), "--grpc-port", str(p2), "--metrics-port", str(p3)]
    cases = [
        (["/nonexistent/m.onnx", "--device", "cpu"], "/nonexistent/m.onnx: cannot open file"),
        ([MODEL, "--device", "cpu", "--gpus", "0"], "--gpus 0: the model runs on the CPU (--device cpu)"),
        ([MODEL, "--gpus", "0,x"], "--gpus '0,x': expected 'all' or GPU numbers such as 0,1"),
        ([MODEL, "--gpus", "1,1"], "--gpus '1,1': a GPU is listed twice"),
        ([MODEL, "--device", "cpu", "--max-batch", "0"], "--max-batch 0: expected at least 1"),
        ([MODEL, "--device", "cpu", "--name", "a/b"], "--name 'a/b': use letters, digits, '_', '.' and '-'"),
        ([MODEL, "--device", "cpu", "--host", "127.0.0.1", "--port", str(port), "--grpc-port",
          str(p2), "--metrics-port", str(p3)],
         "--port %d: 127.0.0.1:%d is in use (or not an address here)" % (port, port)),
        ([MODEL, "--device", "cpu", "--port", "9000", "--grpc-port", "9000"],
         "--port, --grpc-port and --metrics-port must differ"),
        ([MODEL, "--device", "cpu", "--triton-dir", WORK] + ports,
         "%s: no tritonserver there (expected bin/tritonserver, as in nvidia-pytriton's "
         "pytriton/tritonserver)" % WORK),
        ([MODEL, "--device", "cpu", "--triton-dir", os.path.join(WORK, "lone", "tritonserver")] + ports,
         "%s: no nvidia_pytriton.libs two folders up, where nvidia-pytriton keeps the server's "
         "libraries" % os.path.join(WORK, "lone", "tritonserver")),
        ([MODEL, "--device", "cpu", "--preferred-batch", "8,x", "--export-repo",
          os.path.join(WORK, "pref")], "--preferred-batch '8,x': expected batch sizes such as 16,32"),
        ([MODEL, "--device", "cpu", "--max-batch", "16", "--preferred-batch", "8,32",
          "--export-repo", os.path.join(WORK, "pref")],
         "--preferred-batch 8,32: 32 is not a batch from 1 to the largest, 16"),
        ([os.path.join(WORK, "notes.txt"), "--device", "cpu"],
         "%s: expected an .onnx, .tir or .tsl file" % os.path.join(WORK, "notes.txt")),
    ]
    open(os.path.join(WORK, "notes.txt"), "w").write("not a model\n")
    lone = os.path.join(WORK, "lone", "tritonserver", "bin")  # a tritonserver without its libraries
    os.makedirs(lone)
    open(os.path.join(lone, "tritonserver"), "w").write("#!/bin/sh\n")
    os.chmod(os.path.join(lone, "tritonserver"), 0o755)
    import tessel

    if not tessel.cuda_available():
        cases.append(([MODEL] + ports, "--device cuda: no CUDA device here"))
    broken = os.path.join(WORK, "broken.onnx")
    open(broken, "wb").write(b"\x08\x96\x01 this is not protobuf")
    cases.append(([broken, "--device", "cpu"] + ports, broken))
    for args, want in cases:
        got = cli_error(*args)
        assert got.startswith(want), "tessel serve %s:\n  got  %s\n  want %s" % (args, got, want)
    busy.close()
    # A tessel package without its backend library (as a build without the target would be).
    import tessel as installed

    package = os.path.dirname(os.path.abspath(installed.__file__))
    bare = os.path.join(WORK, "bare_package", "tessel")
    os.makedirs(bare)
    for f in os.listdir(package):
        if f != "backends":
            os.symlink(os.path.join(package, f), os.path.join(bare, f))
    # `python -m tessel serve` (what the tessel binary execs, but the binary puts its own build
    # tree's package first on the path).
    r = subprocess.run([sys.executable, "-m", "tessel", "serve", MODEL, "--device", "cpu"] + ports,
                       capture_output=True, text=True, timeout=120,
                       env=dict(ENV, PYTHONPATH=os.path.dirname(bare)))
    assert r.returncode == 2 and r.stderr.startswith("error: "), (r.returncode, r.stderr)
    got = r.stderr[len("error: "):].strip()
    want = ("%s is missing: this tessel package was built without its Triton backend (rebuild "
            "it, or serve with --backend python)"
            % os.path.join(bare, "backends", "tessel", "libtriton_tessel.so"))
    assert got == want, "\n  got  %s\n  want %s" % (got, want)
    # A Python whose numpy is 2.x in its own site-packages, where the stub's isolated interpreter
    # looks (Triton 2.51's Python backend reads numpy 1's structures), while PYTHONPATH gives the
    # launcher a numpy 1: the GPU machine's case. The numpy 2 is a stand-in with a version.
    import numpy

    fake = os.path.join(WORK, "numpy2_venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", fake], check=True)
    python = os.path.join(fake, "bin", "python")
    site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    os.makedirs(os.path.join(site, "numpy"))
    open(os.path.join(site, "numpy", "__init__.py"), "w").write('__version__ = "2.1.0"\n')
    real = os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))
    env = dict(ENV, TESSEL_PYTHON=python,
               PYTHONPATH=os.pathsep.join([os.environ.get("PYTHONPATH", ""), real]))
    got = cli_error(MODEL, "--device", "cpu", "--backend", "python", *ports, env=env)
    assert got == ("Triton's Python backend (nvidia-pytriton 0.7, Triton 2.51) needs numpy < 2, and "
                   "%s has numpy 2.1.0: pip install 'numpy<2' (a venv will do)" % python), got


def batch_sessions_open_one_dynamic_session():
    """The stub's adapter, outside Triton: one dynamic-batch session over (1, max_batch), fed
    each batch as it is (no padding), right against onnxruntime at every batch; a model
    without a batch axis gets a session of one batch."""
    import types

    import tessel

    # triton_model imports the Python backend's utilities, present only in the stub; the
    # adapter does not use them.
    sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("stub utils"))
    spec = importlib.util.spec_from_file_location(
        "triton_model", os.path.join(os.path.dirname(tessel.__file__), "triton_model.py"))
    triton_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(triton_model)

    sessions = triton_model.BatchSessions(MODEL, "cpu", "fp16", MAX_BATCH)
    session = sessions.session
    assert session.batch_range == (1, MAX_BATCH), session.batch_range
    assert sessions.inputs[0].shape == [tessel.BATCH_DIM, 3, 32, 32], sessions.inputs[0].shape
    fed = []
    run = session.run_gathered
    session.run_gathered = lambda names, parts: (
        fed.append([p.shape[0] for p in parts["input"]]) or run(names, parts))
    # Requests of these rows, gathered into one batch each.
    for rows in ([1], [3], [2, 1, 2], [1] * MAX_BATCH):
        xs = [images(n) for n in rows]
        (y,) = sessions.run([{"input": x} for x in xs], sum(rows))
        assert_close(y, reference(np.concatenate(xs)), "BatchSessions of requests %s" % rows)
    assert fed == [[1], [3], [2, 1, 2], [1] * MAX_BATCH], fed

    single = triton_model.BatchSessions(MODEL, "cpu", "fp16", 1, batched=False)
    assert single.session.batch_range == (1, 1), single.session.batch_range
    x = images(1)
    assert_close(single.run([{"input": x}], 1)[0], reference(x), "BatchSessions of one batch")


def export_repo():
    # tessel's backend: its library in the model's folder, where Triton looks first.
    import tessel

    repo = os.path.join(WORK, "repo_tessel")
    r = subprocess.run([ARGS.tessel, "serve", MODEL, "--export-repo", repo, "--gpus", "0,1",
                        "--max-batch", "16", "--name", "cls"], capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    files = sorted(os.path.relpath(os.path.join(d, f), repo) for d, _, fs in os.walk(repo) for f in fs)
    assert files == ["cls/1/model.onnx", "cls/config.pbtxt", "cls/libtriton_tessel.so"], files
    with open(os.path.join(repo, "cls", "libtriton_tessel.so"), "rb") as a, open(os.path.join(
            os.path.dirname(tessel.__file__), "backends", "tessel", "libtriton_tessel.so"), "rb") as b:
        assert a.read() == b.read()
    config = open(os.path.join(repo, "cls", "config.pbtxt")).read()
    assert 'backend: "tessel"' in config and "instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0, 1 ] } ]" in config, config

    # Triton's Python backend: model.py beside the model.
    repo = os.path.join(WORK, "repo")
    r = subprocess.run([ARGS.tessel, "serve", MODEL, "--export-repo", repo, "--gpus", "0,1",
                        "--max-batch", "16", "--max-queue-delay-us", "500", "--name", "cls",
                        "--preferred-batch", "16,8", "--backend", "python"],
                       capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tessel serve: wrote %s" % os.path.join(repo, "cls")), r.stdout
    files = sorted(os.path.relpath(os.path.join(d, f), repo) for d, _, fs in os.walk(repo) for f in fs)
    assert files == ["cls/1/model.onnx", "cls/1/model.py", "cls/config.pbtxt"], files
    with open(os.path.join(repo, "cls", "1", "model.onnx"), "rb") as a, open(MODEL, "rb") as b:
        assert a.read() == b.read()
    with open(os.path.join(repo, "cls", "1", "model.py")) as a, \
            open(os.path.join(os.path.dirname(tessel.__file__), "triton_model.py")) as b:
        assert a.read() == b.read()
    config = open(os.path.join(repo, "cls", "config.pbtxt")).read()
    for line in ['name: "cls"', 'backend: "python"', "max_batch_size: 16",
                 '{ name: "input" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] }',
                 '{ name: "logits" data_type: TYPE_FP32 dims: [ 10 ] }',
                 "instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0, 1 ] } ]",
                 "dynamic_batching { preferred_batch_size: [ 8, 16 ] "
                 "max_queue_delay_microseconds: 500 }",
                 'parameters: { key: "device" value: { string_value: "cuda" } }',
                 'parameters: { key: "model_file" value: { string_value: "model.onnx" } }',
                 'parameters: { key: "profile_every" value: { string_value: "8" } }']:
        assert line in config, "config.pbtxt lacks %r:\n%s" % (line, config)
    assert "python_path" not in config  # an exported repository uses the installed tessel
    again = cli_error(MODEL, "--export-repo", repo, "--name", "cls")
    assert again == "%s already exists: choose another --export-repo or --name" % os.path.join(repo, "cls"), again


def exported_repo_in_a_plain_triton():
    """An exported CPU repository, its dims loosened to -1 as a hand-written config might, run
    by tritonserver itself (not through `tessel serve`): the backend is found in the model's
    folder; a request Triton lets through but the model cannot take gets tessel's error line,
    and the next request is answered right. A second model whose config names a pipeline depth
    the backend does not have fails to load with tessel's line, and the first serves on."""
    repo = os.path.join(WORK, "repo_plain")
    r = subprocess.run([ARGS.tessel, "serve", MODEL, "--export-repo", repo, "--device", "cpu",
                        "--max-batch", "4"], capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    config_path = os.path.join(repo, NAME, "config.pbtxt")
    config = open(config_path).read().replace("dims: [ 3, 32, 32 ]", "dims: [ 3, -1, -1 ]")
    open(config_path, "w").write(config)
    shutil.copytree(os.path.join(repo, NAME), os.path.join(repo, "deep"))
    deep = config.replace('name: "%s"' % NAME, 'name: "deep"').replace(
        'key: "pipeline" value: { string_value: "2" }', 'key: "pipeline" value: { string_value: "3" }')
    assert deep.count('string_value: "3"') == 1, deep
    open(os.path.join(repo, "deep", "config.pbtxt"), "w").write(deep)
    import tessel.serve as ts

    triton_dir, libs = ts.find_triton(None)
    empty = os.path.join(WORK, "no_backends")
    os.makedirs(empty, exist_ok=True)
    port, grpc, metrics = free_ports(3)
    env = dict(os.environ, LD_LIBRARY_PATH=libs + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    proc = subprocess.Popen(
        [os.path.join(triton_dir, "bin", "tritonserver"), "--model-repository=" + repo,
         "--backend-directory=" + empty, "--http-address=127.0.0.1", "--http-port=%d" % port,
         "--grpc-address=127.0.0.1", "--grpc-port=%d" % grpc, "--metrics-address=127.0.0.1",
         "--metrics-port=%d" % metrics, "--allow-gpu-metrics=false",
         "--pinned-memory-pool-byte-size=0", "--exit-on-error=false"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = "http://127.0.0.1:%d" % port
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if http("GET", url + "/v2/models/%s/ready" % NAME)[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, "tritonserver stopped: %s" % proc.stdout.read()[-2000:]
            assert time.monotonic() < deadline, "not ready after 120 s"
            time.sleep(0.2)
        msg = error_line(*infer_json(url, images(1)[:, :, :16, :16])[::2])
        assert msg == "input 'input' has shape [1,3,16,16], the model takes [-1,3,32,32]", msg
        x = images(2)
        assert_close(logits(*infer_json(url, x)[::2]), reference(x), "after the refused request")
        assert http("GET", url + "/v2/models/deep/ready")[0] != 200
    finally:
        proc.send_signal(signal.SIGTERM)
        log = proc.communicate(timeout=120)[0]
    want = "model 'deep': parameter pipeline '3', expected 2 (batches overlap) or 1 (one at a time)"
    assert want in log, log[-3000:]


def processes(needle):
    """Command lines (NUL-separated) of the processes whose command line holds needle."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read().decode(errors="replace")
        except OSError:
            continue
        if needle in cmd:
            found.append(cmd)
    return found


def serve_suite(backend):
    """Every case of TESTS on one server of `backend`, then its clean stop; the failures."""
    failed = 0
    # --verbose: Triton's log on stderr, where tessel's backend logs its timings.
    s = Served(MODEL, "--max-batch", str(MAX_BATCH), "--max-queue-delay-us", "20000",
               *(["--verbose"] if backend == "tessel" else []), backend=backend)
    print("[%s] server ready in %.1f s: %s" % (backend, s.start_s, s.banner.strip()))
    try:
        for fn in TESTS:
            try:
                fn(s)
                print("PASS %s [%s]" % (fn.__name__, backend))
            except Exception:
                failed += 1
                print("FAIL %s [%s]" % (fn.__name__, backend))
                traceback.print_exc()
    finally:
        # The server's workspace (its repository), read off tritonserver's command line.
        (triton,) = processes("--http-port=%d\0" % s.http)
        workspace = re.search(r"--model-repository=(\S+)/repo\0", triton).group(1)
        # tritonserver, and for the Python backend its stub
        expected = 1 if backend == "tessel" else 2
        assert len(processes(workspace)) == expected, processes(workspace)
        code, out, err = s.stop()
    try:
        assert code == 0, "exit %d: %s" % (code, err)
        assert "tessel serve: stopped" in out, out
        if backend == "tessel":  # the pipeline's timings, logged every 5 s of serving
            timings = re.search(r"tessel backend, [^:]+: [0-9.]+ s, [0-9]+ batches of [0-9.]+ "
                                r"requests; per batch, us: gather [0-9]+, stage [0-9]+", out + err)
            assert timings, (out + err)[-3000:]
        # No tritonserver or stub of this server is left, nor its workspace.
        assert not processes(workspace), processes(workspace)
        assert not os.path.exists(workspace), workspace
        print("PASS stops_cleanly_on_sigterm [%s]" % backend)
    except Exception:
        failed += 1
        print("FAIL stops_cleanly_on_sigterm [%s]" % backend)
        traceback.print_exc()
    return failed


def main():
    failed = serve_suite("tessel") + serve_suite("python")
    others = (two_inputs_two_outputs, shutdown_drains_in_flight_requests, user_errors,
              batch_sessions_open_one_dynamic_session, export_repo,
              exported_repo_in_a_plain_triton)
    for fn in others:
        try:
            fn()
            print("PASS %s" % fn.__name__)
        except Exception:
            failed += 1
            print("FAIL %s" % fn.__name__)
            traceback.print_exc()
    total = 2 * (len(TESTS) + 1) + len(others)
    print("%d passed, %d failed" % (total - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
