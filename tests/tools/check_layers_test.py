#!/usr/bin/env python3
"""tools/check_layers.py: passes on the source tree, and catches an upward include and an
include cycle in a made-up tree."""

import os
import subprocess
import sys
import tempfile

SOURCE = sys.argv[1]
SCRIPT = os.path.join(SOURCE, "tools", "check_layers.py")


def check(root):
    r = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
    return r.returncode, r.stdout


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


failures = []
code, out = check(SOURCE)
if code != 0:
    failures.append("the source tree has layer problems:\n" + out)

with tempfile.TemporaryDirectory() as d:
    write(d, "src/core/a.h", "#pragma once\n")
    write(d, "src/device/d.h", '#include "core/a.h"\n#include "compiler/c.h"\n')
    write(d, "src/compiler/c.h", '#include "device/d.h"\n')
    code, out = check(d)
    if code != 1:
        failures.append("an upward include passed: exit %d\n%s" % (code, out))
    if "src/device/d.h (device) includes src/compiler/c.h (compiler)" not in out:
        failures.append("the upward include is not named:\n" + out)
    if "include cycle: " not in out:
        failures.append("the cycle is not found:\n" + out)
    if "src/compiler/c.h (compiler) includes src/device/d.h" in out:
        failures.append("a downward include was flagged:\n" + out)

# The Python module's native part sees the public API and core only.
with tempfile.TemporaryDirectory() as d:
    write(d, "src/core/a.h", "#pragma once\n")
    write(d, "include/tessel/tessel.h", '#include "core/a.h"\n')
    write(d, "src/compiler/c.h", '#include "core/a.h"\n')
    write(d, "src/python/module.cc",
          '#include "tessel/tessel.h"\n#include "core/a.h"\n#include "compiler/c.h"\n')
    code, out = check(d)
    if "src/python/module.cc (python) includes src/compiler/c.h (compiler)" not in out:
        failures.append("the python layer's include of the compiler is not named:\n" + out)
    if "includes include/tessel/tessel.h" in out or "includes src/core/a.h" in out:
        failures.append("the python layer's includes of api and core were flagged:\n" + out)

CHECKS = 7  # the tree passes; the upward include fails the run, is named; the cycle; no false
            # flag; python: the compiler include named, api and core allowed
for f in failures:
    print("FAIL:", f)
print("%d passed, %d failed" % (CHECKS - len(failures), len(failures)))
sys.exit(1 if failures else 0)
