#!/usr/bin/env python3
"""Load generator for a KServe v2 server (`tessel serve`, or any Triton): throughput and latency
percentiles against the number of concurrent clients, with the standard library alone.

Each client is a thread with its own keep-alive HTTP connection that sends one request, waits
for the answer and sends the next (closed loop, as Triton's perf_analyzer does); clients are
spread over processes so that the GIL does not cap the load. Tensors travel through Triton's
system shared memory extension by default (--transport shm: the client writes the inputs into
/dev/shm once and each request names them, so the HTTP bodies are small JSON headers and
loopback bandwidth is not what is measured), or in the request body as binary tensor data
(--transport binary). Random inputs; every answer's HTTP status is checked.

    serve_load.py --url http://127.0.0.1:8000 --model resnet50 --concurrency 1,4,16,64,256
                  [--batch 1] [--seconds 10] [--warmup 2] [--transport shm|binary] [--json F]

Prints one row per concurrency: requests/s, images/s, latency p50/p90/p99 in ms, errors; with
--server-pid, the resident memory of the server's process tree (Triton and any backend stubs)
before and after each level, so that a leak over many requests shows.
"""

import argparse
import http.client
import json
import math
import multiprocessing as mp
import os
import sys
import time
import urllib.parse
from multiprocessing import shared_memory

import numpy as np

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
    """The requests one client sends: the JSON header (and the body's binary tail)."""

    def __init__(self, inputs, outputs, transport, region, out_offset, seed):
        rng = np.random.default_rng(seed)
        self.tail = b""
        body = {"inputs": [], "outputs": []}
        offset = 0
        for name, dt, shape in inputs:
            n = nbytes(dt, shape)
            entry = {"name": name, "shape": shape, "datatype": dt}
            if transport == "shm":
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
            if transport == "shm":
                params = {"shared_memory_region": region + "_out", "shared_memory_byte_size": n,
                          "shared_memory_offset": out_offset}
                out_offset += n
            else:
                params = {"binary_data": True}
            body["outputs"].append({"name": name, "parameters": params})
        self.header = json.dumps(body).encode()

    def send(self, conn, model):
        headers = {"Content-Type": "application/octet-stream"}
        if self.tail:
            headers["Inference-Header-Content-Length"] = str(len(self.header))
        return request(conn, "POST", "/v2/models/%s/infer" % model, self.header + self.tail,
                       headers)


def client_process(args, inputs, outputs, first_client, clients, start_at, stop_at, queue):
    """`clients` closed-loop clients as threads; puts (latencies in s, errors, first error)."""
    import threading

    u = urllib.parse.urlparse(args.url)
    out_bytes = sum(nbytes(dt, s) for _, dt, s in outputs)
    results = []

    def client(k):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
        plan = Plan(inputs, outputs, args.transport, args.region, (first_client + k) * out_bytes,
                    first_client + k)
        lat, errors, first = [], 0, None
        while time.time() < stop_at:
            t0 = time.time()
            try:
                status, _, body = plan.send(conn, args.model)
            except (OSError, http.client.HTTPException) as e:
                status, body = -1, str(e).encode()
                conn.close()
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
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
    queue.put((lat, sum(r[1] for r in results), next((r[2] for r in results if r[2]), None)))


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
    lat, errors, first_error = [], 0, None
    for _ in workers:
        l, e, f = queue.get()
        lat += l
        errors += e
        first_error = first_error or f
    for p in workers:
        p.join()
    lat = np.sort(np.array(lat)) * 1e3
    pct = lambda q: float(lat[min(len(lat) - 1, int(math.ceil(q * len(lat))) - 1)]) if len(lat) else float("nan")  # noqa: E731
    batch = inputs[0][2][0] if inputs[0][2] else 1
    return {"concurrency": concurrency, "requests": int(len(lat)), "errors": errors,
            "first_error": first_error, "requests_per_s": len(lat) / args.seconds,
            "images_per_s": len(lat) * batch / args.seconds,
            "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99)}


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


def tree_rss_mib(pid):
    """Resident MiB of process `pid` and its descendants (Triton's Python backend stubs are its
    children), from /proc; None when it is gone."""
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
    total = 0
    for p in tree:
        try:
            with open("/proc/%d/status" % p) as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            if p == pid:
                return None
    return total / 1024.0


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
    rng = np.random.default_rng(0)
    offset = 0
    for _, dt, shape in inputs:
        data = rng.uniform(-1, 1, size=shape).astype(DTYPES[dt]).tobytes()
        regions[0].buf[offset:offset + len(data)] = data
        offset += len(data)
    return regions


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64,128,256")
    ap.add_argument("--batch", type=int, default=1, help="batch of each request (default 1)")
    ap.add_argument("--seconds", type=float, default=10, help="measured seconds per level")
    ap.add_argument("--warmup", type=float, default=2, help="unmeasured seconds per level")
    ap.add_argument("--transport", choices=("shm", "binary"), default="shm")
    ap.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                    help="client processes (default half the cores)")
    ap.add_argument("--region", default="tessel_load_%d" % os.getpid())
    ap.add_argument("--metrics", help="the server's Prometheus endpoint (default: the url's "
                    "host, port 8002, /metrics; Triton's): batch sizes and where a request's "
                    "time went, per level")
    ap.add_argument("--server-pid", type=int,
                    help="the server's process id: its tree's resident memory around each level")
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args(argv)
    if not args.metrics:
        args.metrics = "http://%s:8002/metrics" % urllib.parse.urlparse(args.url).hostname
    levels = [int(c) for c in args.concurrency.split(",")]
    inputs, outputs = model_io(args.url, args.model, args.batch)
    regions = register_shm(args, inputs, outputs, max(levels)) if args.transport == "shm" else []
    print("%s at %s: inputs %s, %s transport, %g s per level"
          % (args.model, args.url, ", ".join("%s %s%s" % (n, d, s) for n, d, s in inputs),
             args.transport, args.seconds), flush=True)
    print("%11s %10s %10s %9s %9s %9s %7s" % ("concurrency", "req/s", "images/s", "p50 ms",
                                               "p90 ms", "p99 ms", "errors"), flush=True)
    rows = []
    try:
        for c in levels:
            before = scrape(args.metrics, args.model)
            rss_before = tree_rss_mib(args.server_pid) if args.server_pid else None
            r = run_level(args, inputs, outputs, c)
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
            if r["errors"]:
                print("  first error: %s" % r["first_error"], flush=True)
    finally:
        u = urllib.parse.urlparse(args.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        for shm in regions:
            name = shm.name.lstrip("/")
            request(conn, "POST", "/v2/systemsharedmemory/region/%s/unregister" % name)
            shm.close()
            shm.unlink()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "url": args.url, "batch": args.batch,
                       "transport": args.transport, "rows": rows}, f, indent=1)
    return 1 if any(r["errors"] or not r["requests"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
