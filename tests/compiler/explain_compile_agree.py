#!/usr/bin/env python3
"""`tessel explain` and `tessel compile` agree, node by node, on every generated model.

Both ask compiler::plan_node; this checks that neither decides on its own. For each model of
tools/models/gen_models.py (small variants, random weights), for an H100 (sm_90a, cross-compiled
with NVRTC: no GPU needed):
  * `tessel explain --json` gives each node's decision (tensor_cores, simt, op_kernel, none,
    unsupported) with its instruction and schedule;
  * `tessel compile --launches-json` gives the engine's launches.
They agree when the launches are exactly the nodes explain runs (tensor_cores, simt,
op_kernel), in node order, each with explain's instruction and schedule; and when compile
fails exactly where explain reports an unsupported node, naming that node.

    python3 tests/compiler/explain_compile_agree.py --tessel build/src/cli/tessel --source .
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

MODELS = ["resnet50", "mobilenet_v2", "inception_v3", "vgg16", "sr_net", "resnet18_int8_qdq"]
RUNS = ("tensor_cores", "simt", "op_kernel")


def check_model(tessel, model, d, env):
    explain_json = os.path.join(d, model + ".explain.json")
    launches_json = os.path.join(d, model + ".launches.json")
    engine = os.path.join(d, model + ".tsl")
    onnx_path = os.path.join(d, model + ".onnx")
    subprocess.run([tessel, "explain", onnx_path, "--target", "sm_90a", "--json", explain_json],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    with open(explain_json) as f:
        decisions = json.load(f)
    unsupported = [x for x in decisions if x["run"] == "unsupported"]
    r = subprocess.run([tessel, "compile", onnx_path, "--target", "sm_90a", "-o", engine,
                        "--launches-json", launches_json], capture_output=True, text=True, env=env)
    problems = []
    if unsupported:
        first = unsupported[0]["node"]
        if r.returncode == 0:
            problems.append("explain says %d nodes are unsupported (first %s), compile succeeded"
                            % (len(unsupported), first))
        elif "'%s'" % first not in r.stdout + r.stderr:
            problems.append("compile failed without naming %s, explain's first unsupported node: "
                            "%s" % (first, (r.stdout + r.stderr).strip()))
        return problems, len(decisions), 0
    if r.returncode != 0:
        return ["explain supports every node, compile failed: " + (r.stdout + r.stderr).strip()], \
            len(decisions), 0
    with open(launches_json) as f:
        launches = json.load(f)
    runs = [x for x in decisions if x["run"] in RUNS]
    if [x["node"] for x in runs] != [l["node"] for l in launches]:
        problems.append("explain runs nodes %s, the engine launches %s" % (
            [x["node"] for x in runs], [l["node"] for l in launches]))
    for x, l in zip(runs, launches):
        if x["node"] != l["node"]:
            break
        if (x["instruction"], x["schedule"]) != (l["instruction"], l["schedule"]):
            problems.append("%s: explain says %s %s, the engine runs %s %s" % (
                x["node"], x["instruction"], x["schedule"], l["instruction"], l["schedule"]))
    return problems, len(decisions), len(launches)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    passed, failed = 0, 0
    with tempfile.TemporaryDirectory() as d:
        # Kernels compiled here go to a cache of this run's own.
        env = dict(os.environ, TESSEL_CACHE_DIR=os.path.join(d, "cache"))
        subprocess.run([sys.executable, os.path.join(args.source, "tools/models/gen_models.py"),
                        "--out", d, "--small", "--models", ",".join(MODELS)], check=True,
                       stdout=subprocess.DEVNULL)
        for m in MODELS:
            problems, nodes, launches = check_model(args.tessel, m, d, env)
            for p in problems:
                print("FAIL %s: %s" % (m, p))
            if problems:
                failed += 1
            else:
                passed += 1
                print("ok   %s: %d nodes, %d launches agree" % (m, nodes, launches))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
