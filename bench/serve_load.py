#!/usr/bin/env python3
"""Load generator for a KServe v2 server (`tessel serve`, or any Triton): throughput and latency
percentiles against the number of concurrent clients, with the standard library alone.

Each client is a thread with its own keep-alive HTTP connection (a lean one: the request's bytes
are built once) that sends one request, waits for the answer and sends the next (closed loop, as Triton's perf_analyzer does); clients are
spread over processes so that the GIL does not cap the load. Tensors travel through Triton's
system shared memory extension by default (--transport shm: the client writes the inputs into
/dev/shm once and each request names them, so the HTTP bodies are small JSON headers and
loopback bandwidth is not what is measured), through its CUDA shared memory extension
(--transport cuda: inputs and outputs stay in GPU memory, allocated here through the CUDA driver
and opened by the server through CUDA IPC, as perf_analyzer --shared-memory=cuda does; a GPU
client's tensors never cross the host, so what is measured is the server's own overhead, with no
host-device copies of its inputs and outputs), or in the request body as binary tensor data
(--transport binary). Random inputs; every answer's HTTP status is checked.

    serve_load.py --url http://127.0.0.1:8000 --model resnet50 --concurrency 1,4,16,64,256
                  [--batch 1] [--seconds 10] [--warmup 2] [--transport shm|cuda|binary]
                  [--cuda-device 0] [--server-pid PID] [--json F]

Prints one row per concurrency: requests/s, images/s, latency p50/p90/p99 in ms, errors; with
--server-pid, the resident memory of the server's process tree (Triton and any backend stubs)
before and after each level, so that a leak over many requests shows. And, from /proc, the CPU
each level used, in cores busy over the level: the whole machine's, the server tree's (with
--server-pid) and the load generator's own client processes'.
"""

import argparse
import base64
import ctypes
import http.client
import json
import math
import multiprocessing as mp
import os
import socket
import sys
import time
import urllib.parse
from multiprocessing import shared_memory

import numpy as np

# How far a client's outputs may be from the reference answer (relative L2): the batches ran at
# other sizes than the reference's, on other profiles' kernels, in fp16.
OUTPUT_TOLERANCE = 1e-2

DTYPES = {"FP32": np.float32, "FP16": np.float16, "FP64": np.float64, "INT8": np.int8,
          "UINT8": np.uint8, "INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_}


def request(conn, method, path, body=None, headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.getheader("Inference-Header-Content-Length"), r.read()


def model_io(url, model, batch):
    """(inputs, outputs): [(name, datatype, shape with the batch)] from the model's metadata and
    config (a model without batching keeps its own shapes)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    status, _, body = request(conn, "GET", "/v2/models/%s" % model)
    if status != 200:
        sys.exit("serve_load.py: %s has no model '%s': %s" % (url, model, body[:200]))
    meta = json.loads(body)
    status, _, body = request(conn, "GET", "/v2/models/%s/config" % model)
    batched = status == 200 and json.loads(body).get("max_batch_size", 0) > 0

    def shapes(items):
        return [(t["name"], t["datatype"],
                 [batch if (i == 0 and batched) else d for i, d in enumerate(t["shape"])])
                for t in items]

    return shapes(meta["inputs"]), shapes(meta["outputs"])


def nbytes(datatype, shape):
    return int(np.prod(shape)) * np.dtype(DTYPES[datatype]).itemsize


class Plan:
    """The requests one client sends: the JSON header (and the body's binary tail). With the shm
    and cuda transports the tensors are in the regions `region`_in and `region`_out (this
    client's outputs at `out_offset`), named alike whether in /dev/shm or in GPU memory."""

    def __init__(self, inputs, outputs, transport, region, out_offset, seed):
        rng = np.random.default_rng(seed)
        self.tail = b""
        body = {"inputs": [], "outputs": []}
        offset = 0
        for name, dt, shape in inputs:
            n = nbytes(dt, shape)
            entry = {"name": name, "shape": shape, "datatype": dt}
            if transport in ("shm", "cuda"):
                entry["parameters"] = {"shared_memory_region": region + "_in",
                                       "shared_memory_byte_size": n,
                                       "shared_memory_offset": offset}
                offset += n
            else:
                data = rng.uniform(-1, 1, size=shape).astype(DTYPES[dt]).tobytes()
                entry["parameters"] = {"binary_data_size": len(data)}
                self.tail += data
            body["inputs"].append(entry)
        for name, dt, shape in outputs:
            n = nbytes(dt, shape)
            if transport in ("shm", "cuda"):
                params = {"shared_memory_region": region + "_out", "shared_memory_byte_size": n,
                          "shared_memory_offset": out_offset}
                out_offset += n
            else:
                params = {"binary_data": True}
            body["outputs"].append({"name": name, "parameters": params})
        self.header = json.dumps(body).encode()

    def request_bytes(self, host, model):
        """The whole HTTP request, built once: every request of this client is the same."""
        body = self.header + self.tail
        head = ["POST /v2/models/%s/infer HTTP/1.1" % model, "Host: %s" % host,
                "Content-Type: application/octet-stream", "Content-Length: %d" % len(body)]
        if self.tail:
            head.append("Inference-Header-Content-Length: %d" % len(self.header))
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class KeepAlive:
    """One client's keep-alive HTTP/1.1 connection for its inference requests: the request's
    bytes sent as they are, the answer's status line and headers parsed only as far as its
    length. With http.client the clients used 4.3 cores at 18,000 requests/s (240 us of Python
    per request, on an H200 machine's host), which each client added to its round trips and
    which its process's other clients waited for (the GIL)."""

    def __init__(self, host, port, timeout):
        self.address, self.timeout = (host, port), timeout
        self.sock, self.buf = None, b""

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock, self.buf = None, b""

    def _fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buf += data

    def roundtrip(self, data):
        """(status, body) of one request."""
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(data)
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split(None, 2)[1])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._fill()
                size, self.buf = self.buf.split(b"\r\n", 1)
                n = int(size.split(b";")[0], 16)
                while len(self.buf) < n + 2:
                    self._fill()
                body, self.buf = body + self.buf[:n], self.buf[n + 2:]
                if n == 0:
                    break
        else:
            n = int(fields.get(b"content-length", b"0"))
            while len(self.buf) < n:
                self._fill()
            body, self.buf = self.buf[:n], self.buf[n:]
        if fields.get(b"connection", b"").lower() == b"close":
            self.close()
        return status, body


def client_process(args, inputs, outputs, first_client, clients, start_at, stop_at, queue):
    """`clients` closed-loop clients as threads; puts (latencies in s, errors, first error, CPU
    seconds this process used, user and system)."""
    import threading

    cpu0 = os.times()
    u = urllib.parse.urlparse(args.url)
    out_bytes = sum(nbytes(dt, s) for _, dt, s in outputs)
    results = []

    def client(k):
        conn = KeepAlive(u.hostname, u.port, timeout=300)
        data = Plan(inputs, outputs, args.transport, args.region, (first_client + k) * out_bytes,
                    first_client + k).request_bytes(u.netloc, args.model)
        lat, errors, first = [], 0, None
        while time.time() < stop_at:
            t0 = time.time()
            try:
                status, body = conn.roundtrip(data)
            except (OSError, ValueError, IndexError) as e:
                status, body = -1, str(e).encode()
                conn.close()
            t1 = time.time()
            if t0 >= start_at and t1 <= stop_at:
                if status == 200:
                    lat.append(t1 - t0)
                else:
                    errors += 1
                    first = first or body[:200].decode(errors="replace")
        results.append((lat, errors, first))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat = [x for r in results for x in r[0]]
    cpu1 = os.times()
    queue.put((lat, sum(r[1] for r in results), next((r[2] for r in results if r[2]), None),
               (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)))


def run_level(args, inputs, outputs, concurrency):
    procs = max(1, min(concurrency, args.procs))
    per = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
    start_at = time.time() + 1.0 + args.warmup  # processes started, then warm-up
    stop_at = start_at + args.seconds
    queue = mp.Queue()
    workers, first = [], 0
    for n in per:
        p = mp.Process(target=client_process,
                       args=(args, inputs, outputs, first, n, start_at, stop_at, queue))
        p.start()
        workers.append(p)
        first += n
    lat, errors, first_error, cpu_s = [], 0, None, 0.0
    for _ in workers:
        l, e, f, c = queue.get()
        lat += l
        errors += e
        first_error = first_error or f
        cpu_s += c
    for p in workers:
        p.join()
    lat = np.sort(np.array(lat)) * 1e3
    pct = lambda q: float(lat[min(len(lat) - 1, int(math.ceil(q * len(lat))) - 1)]) if len(lat) else float("nan")  # noqa: E731
    batch = inputs[0][2][0] if inputs[0][2] else 1
    return {"concurrency": concurrency, "requests": int(len(lat)), "errors": errors,
            "first_error": first_error, "requests_per_s": len(lat) / args.seconds,
            "images_per_s": len(lat) * batch / args.seconds,
            "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
            "client_cpu_s": cpu_s}


# Triton's Prometheus counters (cumulative): requests, executions (batches), and the durations
# summed over requests, per model and instance.
COUNTERS = {"nv_inference_request_success": "requests", "nv_inference_exec_count": "batches",
            "nv_inference_queue_duration_us": "queue_us",
            "nv_inference_compute_input_duration_us": "input_us",
            "nv_inference_compute_infer_duration_us": "infer_us",
            "nv_inference_compute_output_duration_us": "output_us"}


def scrape(metrics_url, model):
    """{counter: value summed over the model's label sets}, or None where the server has no
    metrics endpoint there."""
    u = urllib.parse.urlparse(metrics_url)
    try:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        status, _, body = request(conn, "GET", u.path or "/metrics")
    except OSError:
        return None
    if status != 200:
        return None
    totals = dict.fromkeys(COUNTERS.values(), 0.0)
    for line in body.decode(errors="replace").splitlines():
        name, _, rest = line.partition("{")
        if name in COUNTERS and ('model="%s"' % model) in rest:
            totals[COUNTERS[name]] += float(rest.rsplit("}", 1)[1])
    return totals


def server_split(before, after):
    """What the server did between two scrapes: requests per batch and per-request microseconds
    in the queue and in the backend's input, execute and output phases. Triton charges each
    request of a batch the batch's whole execution (the backend reports one compute interval
    for all of them), so the per-request execute time is the time of the batch it ran in."""
    if before is None or after is None:
        return {}
    d = {k: after[k] - before[k] for k in after}
    if d["requests"] <= 0 or d["batches"] <= 0:
        return {}
    per = lambda k: d[k] / d["requests"]  # noqa: E731
    return {"server_batch": d["requests"] / d["batches"], "queue_us": per("queue_us"),
            "input_us": per("input_us"), "infer_us": per("infer_us"),
            "output_us": per("output_us")}


def proc_tree(pid):
    """Process `pid` and its descendants, from /proc: a set of pids."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, grew = {pid}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree} - tree
        grew = bool(more)
        tree |= more
    return tree


def tree_rss_mib(pid):
    """Resident MiB of process `pid` and its descendants (Triton's Python backend stubs are its
    children), from /proc; None when it is gone."""
    tree = proc_tree(pid)
    total = 0
    for p in tree:
        try:
            with open("/proc/%d/status" % p) as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            if p == pid:
                return None
    return total / 1024.0


def tree_cpu_s(pid):
    """CPU seconds (user and system: /proc/<pid>/stat's fields 14 and 15) that process `pid` and
    its descendants have used so far; None when it is gone. A descendant that exits between two
    readings takes its seconds with it (they reach its parent's only once it is waited for)."""
    total = 0
    for p in proc_tree(pid):
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            if p == pid:
                return None
    return total / os.sysconf("SC_CLK_TCK")


def machine_cpu_s():
    """(busy, total) CPU seconds of the whole machine so far, all cores, from /proc/stat's first
    line (idle and iowait are not busy; guest time is already in user and nice); None where
    /proc/stat cannot be read. These are sampled at the scheduler's tick, so at a light load
    they may read below the processes' own (exactly accounted) seconds."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, fields[1:9])
    except (OSError, ValueError):
        return None
    tck = os.sysconf("SC_CLK_TCK")
    total = user + nice + system + idle + iowait + irq + softirq + steal
    return (total - idle - iowait) / tck, total / tck


def thread_cpu_s(pid):
    """{thread id: (its name, CPU seconds so far)} of process `pid`'s threads, from
    /proc/<pid>/task; {} when it is gone."""
    threads = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return threads
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                text = f.read()
            name = text[text.index("(") + 1:text.rindex(")")]
            fields = text.rsplit(")", 1)[1].split()
            threads[tid] = (name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
        except (OSError, IndexError, ValueError):
            pass
    return threads


def cpu_snapshot(server_pid):
    """What cpu_cores needs at either end of a level: (time, machine's, server tree's, the
    server's threads')."""
    return (time.time(), machine_cpu_s(), tree_cpu_s(server_pid) if server_pid else None,
            thread_cpu_s(server_pid) if server_pid else {})


def busiest_threads(before, after, wall, top=8):
    """The server's busiest threads over a level, by name (threads of one name summed, with
    their count and the busiest one's share): [[name, threads, cores, busiest thread's cores]],
    so that a single thread at one whole core, the sign of a serial stage, shows."""
    by_name = {}
    for tid, (name, s) in after.items():
        used = (s - before.get(tid, (name, 0.0))[1]) / wall
        n, total, most = by_name.get(name, (0, 0.0, 0.0))
        by_name[name] = (n + 1, total + used, max(most, used))
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
    return [[name, n, round(total, 2), round(most, 2)] for name, (n, total, most) in rows]


def cpu_cores(before, after, client_cpu_s):
    """The row's CPU columns between two cpu_snapshot()s, in cores (CPU seconds per second);
    none where /proc/stat was unreadable."""
    wall = after[0] - before[0]
    if before[1] is None or after[1] is None or wall <= 0:
        return {}
    r = {"cpu_cores_machine": (after[1][0] - before[1][0]) / wall,
         "cpu_cores_clients": client_cpu_s / wall, "cores": os.cpu_count() or 0}
    if before[2] is not None and after[2] is not None:
        r["cpu_cores_server"] = (after[2] - before[2]) / wall
    if after[3]:
        r["server_threads"] = busiest_threads(before[3], after[3], wall)
    return r


def reference_outputs(args, inputs, outputs):
    """The server's outputs for the regions' inputs (input_data), asked for once with the
    tensors in the request's body and the answer's: [array per output]."""
    u = urllib.parse.urlparse(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    data = input_data(inputs)
    body, offset = {"inputs": [], "outputs": [{"name": n} for n, _, _ in outputs]}, 0
    for name, dt, shape in inputs:
        n = nbytes(dt, shape)
        body["inputs"].append({"name": name, "shape": shape, "datatype": dt,
                               "parameters": {"binary_data_size": n}})
        offset += n
    header = json.dumps(body).encode()
    status, _, answer = request(conn, "POST", "/v2/models/%s/infer" % args.model, header + data,
                                {"Content-Type": "application/octet-stream",
                                 "Inference-Header-Content-Length": str(len(header))})
    if status != 200:
        sys.exit("serve_load.py: the reference request failed: %s" % answer[:200])
    got = {o["name"]: o for o in json.loads(answer)["outputs"]}
    return [np.asarray(got[n]["data"], dtype=np.float64).reshape(shape)
            for n, _, shape in outputs]


def check_outputs(args, outputs, region_bytes, clients, reference):
    """Every client's outputs, as the server left them in its slot of the output region after
    the last level (`region_bytes`: that region's contents), against `reference`: every client
    sent the same inputs. {"clients", "max_rel_l2", "bitwise_equal" (clients)}."""
    out_bytes = sum(nbytes(dt, s) for _, dt, s in outputs)
    worst, equal = 0.0, 0
    for k in range(clients):
        at, same = k * out_bytes, True
        for (_, dt, shape), want in zip(outputs, reference):
            n = nbytes(dt, shape)
            got = np.frombuffer(region_bytes[at:at + n], dtype=DTYPES[dt]).astype(np.float64)
            at += n
            want = want.ravel()
            err = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
            worst = max(worst, err if np.isfinite(err) else float("inf"))
            same = same and np.array_equal(got, want.astype(DTYPES[dt]).astype(np.float64))
        equal += same
    return {"clients": clients, "max_rel_l2": worst, "bitwise_equal": equal}


def input_data(inputs):
    """The inputs of the shm and cuda regions, one after the other: uniform(-1, 1), seed 0."""
    rng = np.random.default_rng(0)
    return b"".join(rng.uniform(-1, 1, size=shape).astype(DTYPES[dt]).tobytes()
                    for _, dt, shape in inputs)


def register_shm(args, inputs, outputs, max_clients):
    """Input and output regions in /dev/shm, registered with the server; returns them."""
    u = urllib.parse.urlparse(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    in_bytes = sum(nbytes(dt, s) for _, dt, s in inputs)
    out_bytes = sum(nbytes(dt, s) for _, dt, s in outputs) * max_clients
    regions = []
    for suffix, size in (("_in", in_bytes), ("_out", out_bytes)):
        name = args.region + suffix
        request(conn, "POST", "/v2/systemsharedmemory/region/%s/unregister" % name)
        try:
            shared_memory.SharedMemory(name=name).unlink()
        except FileNotFoundError:
            pass
        shm = shared_memory.SharedMemory(name=name, create=True, size=size)
        regions.append(shm)
        status, _, body = request(conn, "POST", "/v2/systemsharedmemory/region/%s/register" % name,
                                  json.dumps({"key": "/" + name, "offset": 0, "byte_size": size}).encode())
        if status != 200:
            sys.exit("serve_load.py: registering shared memory %s: %s" % (name, body[:200]))
    data = input_data(inputs)
    regions[0].buf[:len(data)] = data
    return regions


class CudaRegions:
    """GPU memory for Triton's CUDA shared memory extension, through the CUDA driver
    (libcuda.so.1) with ctypes alone. The constructor makes device `device`'s primary context
    current; alloc() takes a region of GPU memory, copy() fills it from the host, handle() is the
    64-byte CUDA IPC handle the server opens it with, and close() frees every region and releases
    the context. Every CUDA call is checked: a failure exits with one line naming the call. Only
    this (the main) process calls CUDA; the client processes only name the regions."""

    class IpcMemHandle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]

    def __init__(self, device):
        try:
            self.cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            sys.exit("serve_load.py: --transport cuda needs a CUDA driver (libcuda.so.1): %s" % e)
        c = self.cuda
        c.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        c.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        c.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        c.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
        c.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        c.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        c.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        c.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(self.IpcMemHandle), ctypes.c_uint64]
        c.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        c.cuDevicePrimaryCtxRelease.argtypes = [ctypes.c_int]
        self.device, self.pointers, self.context = device, [], None
        self.check("cuInit", c.cuInit(0))
        dev = ctypes.c_int()
        self.check("cuDeviceGet(%d)" % device, c.cuDeviceGet(ctypes.byref(dev), device))
        self.dev = dev.value
        ctx = ctypes.c_void_p()
        self.check("cuDevicePrimaryCtxRetain", c.cuDevicePrimaryCtxRetain(ctypes.byref(ctx),
                                                                          self.dev))
        self.context = ctx
        self.check("cuCtxSetCurrent", c.cuCtxSetCurrent(ctx))

    def check(self, call, result):
        if result != 0:
            name = ctypes.c_char_p()
            known = self.cuda.cuGetErrorName(result, ctypes.byref(name)) == 0 and name.value
            sys.exit("serve_load.py: --transport cuda: %s failed: %s (CUresult %d)"
                     % (call, known.decode() if known else "unknown error", result))

    def alloc(self, size):
        ptr = ctypes.c_uint64()
        self.check("cuMemAlloc_v2(%d bytes)" % size,
                   self.cuda.cuMemAlloc_v2(ctypes.byref(ptr), size))
        self.pointers.append(ptr.value)
        return ptr.value

    def copy(self, ptr, data):
        self.check("cuMemcpyHtoD_v2", self.cuda.cuMemcpyHtoD_v2(ptr, data, len(data)))

    def read(self, ptr, size):
        out = ctypes.create_string_buffer(size)
        self.check("cuMemcpyDtoH_v2", self.cuda.cuMemcpyDtoH_v2(out, ptr, size))
        return out.raw

    def handle(self, ptr):
        h = self.IpcMemHandle()
        self.check("cuIpcGetMemHandle", self.cuda.cuIpcGetMemHandle(ctypes.byref(h), ptr))
        return ctypes.string_at(ctypes.addressof(h), ctypes.sizeof(h))

    def close(self):
        while self.pointers:
            self.check("cuMemFree_v2", self.cuda.cuMemFree_v2(self.pointers.pop()))
        if self.context is not None:
            self.context = None
            self.check("cuDevicePrimaryCtxRelease",
                       self.cuda.cuDevicePrimaryCtxRelease(self.dev))


def register_cuda(args, cuda, inputs, outputs, max_clients, names):
    """Input and output regions in GPU memory (`cuda`, a CudaRegions), registered with the
    server; appends their names to `names` as it goes (to unregister, even after a failure)."""
    u = urllib.parse.urlparse(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    data = input_data(inputs)
    out_bytes = sum(nbytes(dt, s) for _, dt, s in outputs) * max_clients
    for suffix, size in (("_in", len(data)), ("_out", out_bytes)):
        name = args.region + suffix
        request(conn, "POST", "/v2/cudasharedmemory/region/%s/unregister" % name)
        names.append(name)
        ptr = cuda.alloc(size)
        if suffix == "_in":
            cuda.copy(ptr, data)
        else:
            cuda.out_ptr = ptr
        body = {"raw_handle": {"b64": base64.b64encode(cuda.handle(ptr)).decode()},
                "device_id": args.cuda_device, "byte_size": size}
        status, _, answer = request(conn, "POST", "/v2/cudasharedmemory/region/%s/register" % name,
                                    json.dumps(body).encode())
        if status != 200:
            sys.exit("serve_load.py: registering CUDA shared memory %s: %s" % (name, answer[:200]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64,128,256")
    ap.add_argument("--batch", type=int, default=1, help="batch of each request (default 1)")
    ap.add_argument("--seconds", type=float, default=10, help="measured seconds per level")
    ap.add_argument("--warmup", type=float, default=2, help="unmeasured seconds per level")
    ap.add_argument("--transport", choices=("shm", "cuda", "binary"), default="shm",
                    help="tensors in system shared memory (default), in GPU memory (Triton's "
                    "CUDA shared memory; needs libcuda.so.1 here) or in the request bodies")
    ap.add_argument("--cuda-device", type=int, default=0,
                    help="--transport cuda: the GPU that holds the tensors (default 0; the same "
                    "number for the server, so run both with the same CUDA_VISIBLE_DEVICES)")
    ap.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                    help="client processes (default half the cores)")
    ap.add_argument("--region", default="tessel_load_%d" % os.getpid())
    ap.add_argument("--metrics", help="the server's Prometheus endpoint (default: the url's "
                    "host, port 8002, /metrics; Triton's): batch sizes and where a request's "
                    "time went, per level")
    ap.add_argument("--server-pid", type=int,
                    help="the server's process id: its tree's resident memory and CPU time "
                    "around each level")
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args(argv)
    if not args.metrics:
        args.metrics = "http://%s:8002/metrics" % urllib.parse.urlparse(args.url).hostname
    levels = [int(c) for c in args.concurrency.split(",")]
    # CUDA first, so that a machine without it says so before anything else happens.
    cuda = CudaRegions(args.cuda_device) if args.transport == "cuda" else None
    inputs, outputs = model_io(args.url, args.model, args.batch)
    regions = register_shm(args, inputs, outputs, max(levels)) if args.transport == "shm" else []
    cuda_regions = []
    print("%s at %s: inputs %s, %s transport, %g s per level"
          % (args.model, args.url, ", ".join("%s %s%s" % (n, d, s) for n, d, s in inputs),
             args.transport, args.seconds), flush=True)
    print("%11s %10s %10s %9s %9s %9s %7s" % ("concurrency", "req/s", "images/s", "p50 ms",
                                               "p90 ms", "p99 ms", "errors"), flush=True)
    rows, check = [], None
    try:
        if cuda:
            register_cuda(args, cuda, inputs, outputs, max(levels), cuda_regions)
        for c in levels:
            before = scrape(args.metrics, args.model)
            rss_before = tree_rss_mib(args.server_pid) if args.server_pid else None
            # The CPU window is the RSS one: the level's whole run, warm-up second(s) included.
            cpu_before = cpu_snapshot(args.server_pid)
            r = run_level(args, inputs, outputs, c)
            r.update(cpu_cores(cpu_before, cpu_snapshot(args.server_pid), r.pop("client_cpu_s")))
            r.update(server_split(before, scrape(args.metrics, args.model)))
            if rss_before is not None:
                r["rss_mib_before"] = rss_before
                r["rss_mib_after"] = tree_rss_mib(args.server_pid)
            rows.append(r)
            print("%11d %10.1f %10.1f %9.2f %9.2f %9.2f %7d" % (
                c, r["requests_per_s"], r["images_per_s"], r["p50_ms"], r["p90_ms"], r["p99_ms"],
                r["errors"]), flush=True)
            if "server_batch" in r:
                print("%11s server: %.1f requests per batch; per request, us: queue %.0f, "
                      "input %.0f, execute %.0f (its batch's), output %.0f" % (
                          "", r["server_batch"], r["queue_us"], r["input_us"], r["infer_us"],
                          r["output_us"]), flush=True)
            if r.get("rss_mib_after") is not None:
                print("%11s server memory: %.1f -> %.1f MiB resident over %d requests" % (
                    "", r["rss_mib_before"], r["rss_mib_after"], r["requests"]), flush=True)
            if "cpu_cores_machine" in r:
                server = (" server %.1f," % r["cpu_cores_server"]
                          if "cpu_cores_server" in r else "")
                print("%11s cpu: machine %.1f of %d cores busy;%s clients %.1f" % (
                    "", r["cpu_cores_machine"], r["cores"], server, r["cpu_cores_clients"]),
                    flush=True)
            if r.get("server_threads"):
                print("%11s server threads (name x count: cores, busiest one's): %s" % (
                    "", "; ".join("%s x%d: %.2f, %.2f" % tuple(t) for t in r["server_threads"])),
                    flush=True)
            if r["errors"]:
                print("  first error: %s" % r["first_error"], flush=True)
        if regions or cuda:
            # What the server wrote into the clients' output slots: each equals its answer to
            # the same inputs in a request's body (within a profile's rounding: the batches
            # ran at other sizes).
            size = sum(nbytes(dt, s) for _, dt, s in outputs) * max(levels)
            written = bytes(regions[1].buf[:size]) if regions else cuda.read(cuda.out_ptr, size)
            check = check_outputs(args, outputs, written, max(levels),
                                  reference_outputs(args, inputs, outputs))
            print("outputs in %s memory: %d clients' slots against the answer in a body: relative "
                  "L2 at most %.1e, %d bit for bit" % (args.transport, check["clients"],
                                                        check["max_rel_l2"],
                                                        check["bitwise_equal"]), flush=True)
    finally:
        u = urllib.parse.urlparse(args.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        for shm in regions:
            name = shm.name.lstrip("/")
            request(conn, "POST", "/v2/systemsharedmemory/region/%s/unregister" % name)
            shm.close()
            shm.unlink()
        for name in cuda_regions:  # the server lets go of them before they are freed
            request(conn, "POST", "/v2/cudasharedmemory/region/%s/unregister" % name)
        if cuda:
            cuda.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "url": args.url, "batch": args.batch,
                       "transport": args.transport, "rows": rows, "output_check": check}, f,
                      indent=1)
    bad = check is not None and not check["max_rel_l2"] <= OUTPUT_TOLERANCE
    if bad:
        print("serve_load.py: outputs in %s memory differ from the answer in a body (relative "
              "L2 %.1e, tolerance %.0e)" % (args.transport, check["max_rel_l2"], OUTPUT_TOLERANCE),
              file=sys.stderr)
    return 1 if bad or any(r["errors"] or not r["requests"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
