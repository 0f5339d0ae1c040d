#!/usr/bin/env python3
"""Which nodes of each torchvision CNN tessel runs how, before timing anything: for each model,
export it as bench/torch_models.py does (usable random weights, opset 18, batch 1) and run
`tessel explain --json` on it; print one line per model (nodes, on Tensor Cores, SIMT
contractions, other kernels, no kernel, unsupported) and the distinct reasons of the unsupported
nodes. On the GPU machine (torch, torchvision, onnx):

    python3 bench/zoo_explain.py --tessel .device/bin/tessel --out /tmp/zoo [--models a,b]
"""
import argparse
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(tm.ZOO + tm.SEGMENTATION))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failures = 0
    for name in args.models.split(","):
        path = os.path.join(args.out, name + ".onnx")
        try:
            model = tm.build_model(name)
            tm.export_onnx(model, tm.make_input(name, 1).cuda(), path)
            del model
            tm.free_cuda()
        except Exception as e:  # noqa: BLE001 (report and go on to the next model)
            print("%-26s export failed: %s" % (name, str(e).splitlines()[0][:150]), flush=True)
            failures += 1
            continue
        js = path + ".explain.json"
        r = subprocess.run([args.tessel, "explain", path, "--json", js], capture_output=True,
                           text=True)
        if r.returncode != 0:
            print("%-26s explain failed: %s" % (name, (r.stdout + r.stderr).strip()[-300:]),
                  flush=True)
            failures += 1
            continue
        runs = collections.Counter()
        reasons = collections.Counter()
        for d in json.load(open(js)):
            runs[d["run"]] += 1
            if d["run"] == "unsupported":
                reasons["%s: %s" % (d["op"], d["why"].split(": ", 1)[-1][:110])] += 1
        print("%-26s %4d nodes: %3d tensor cores, %3d simt, %3d kernels, %3d none, %3d unsupported"
              % (name, sum(runs.values()), runs["tensor_cores"], runs["simt"], runs["op_kernel"],
                 runs["none"], runs["unsupported"]), flush=True)
        for why, count in reasons.most_common(6):
            print("    %3dx %s" % (count, why), flush=True)
        failures += runs["unsupported"] > 0
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
