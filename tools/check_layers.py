#!/usr/bin/env python3
"""Checks that every #include in src/ and include/ runs down the layers, and that no include
cycle exists between files.

The layers, bottom to top, and what each may include (docs/design.md explains them):
  core                 nothing
  ir                   core
  ops                  core, ir
  frontend, passes     core, ir, ops
  runtime/cpu          core, ir, ops
  quantize             core, ir, ops, frontend, runtime/cpu   (calibration, QDQ models)
  device               core                       (driver, NVRTC, modules, memory, timing)
  kernels              core, ir, ops, device      (contraction, schedules, arch table, CUDA)
  runtime              core, device               (engine plans, engine files, load, replay)
  compiler             everything above but api, bench and cli
  bench                core, device               (vendor baselines)
  api                  everything but bench and cli   (include/tessel/ and src/api/)
  python               api, core                  (the Python module's native part, tessel._core)
  serve                api, core                  (the Triton backend, libtriton_tessel.so)
  cli                  everything but python

    python3 tools/check_layers.py [--root .]

Prints one line per violation and exits 1 if there is any.
"""

import argparse
import os
import re
import sys

# (layer, path prefix under the repository), most specific first.
LAYERS = [
    ("runtime/cpu", "src/runtime/cpu/"),
    ("core", "src/core/"),
    ("ir", "src/ir/"),
    ("ops", "src/ops/"),
    ("frontend", "src/frontend/"),
    ("passes", "src/passes/"),
    ("quantize", "src/quantize/"),
    ("device", "src/device/"),
    ("kernels", "src/kernels/"),
    ("runtime", "src/runtime/"),
    ("compiler", "src/compiler/"),
    ("bench", "src/bench/"),
    ("api", "src/api/"),
    ("api", "include/tessel/"),
    ("python", "src/python/"),
    ("serve", "src/serve/"),
    ("cli", "src/cli/"),
]

BELOW_COMPILER = {"core", "ir", "ops", "frontend", "passes", "runtime/cpu", "device", "kernels",
                  "runtime"}
ALLOWED = {
    "core": set(),
    "ir": {"core"},
    "ops": {"core", "ir"},
    "frontend": {"core", "ir", "ops"},
    "passes": {"core", "ir", "ops"},
    "runtime/cpu": {"core", "ir", "ops"},
    "quantize": {"core", "ir", "ops", "frontend", "runtime/cpu"},
    "device": {"core"},
    "kernels": {"core", "ir", "ops", "device"},
    "runtime": {"core", "device"},
    "compiler": BELOW_COMPILER - {"frontend", "runtime/cpu"},
    "bench": {"core", "device"},
    "api": BELOW_COMPILER | {"compiler"},
    # The Python module sees the public API only (and the core types it is written in).
    "python": {"api", "core"},
    # The Triton backend, like the Python module, is a client of the public API.
    "serve": {"api", "core"},
    "cli": BELOW_COMPILER | {"compiler", "bench", "api", "quantize"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    for layer, prefix in LAYERS:
        if path.startswith(prefix):
            return layer
    return None


def resolve(root, including, name):
    """The repository path an #include "name" refers to, or None (a system or generated file)."""
    for base in (os.path.dirname(including), "src", "include"):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    files = []
    for top in ("src", "include"):
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith((".h", ".cc", ".cuh")):
                    files.append(os.path.relpath(os.path.join(d, n), root))
    problems = []
    edges = {}
    for f in sorted(files):
        layer = layer_of(f)
        if layer is None:
            problems.append("%s: in no layer (add its folder to tools/check_layers.py)" % f)
            continue
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            text = fh.read()
        edges[f] = []
        for name in INCLUDE.findall(text):
            target = resolve(root, f, name)
            if target is None:
                continue
            edges[f].append(target)
            to = layer_of(target)
            if to is not None and to != layer and to not in ALLOWED[layer]:
                problems.append("%s (%s) includes %s (%s): an include may only run down the layers"
                                % (f, layer, target, to))
    # Include cycles, by depth-first search over files.
    state = {}
    def visit(f, stack):
        state[f] = 1
        stack.append(f)
        for t in edges.get(f, []):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif state.get(t) is None:
                visit(t, stack)
        stack.pop()
        state[f] = 2
    for f in sorted(edges):
        if state.get(f) is None:
            visit(f, [])
    for p in problems:
        print(p)
    print("%d files, %d includes checked, %d problems" % (
        len(edges), sum(len(v) for v in edges.values()), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
