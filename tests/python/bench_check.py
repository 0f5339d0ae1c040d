"""What the tests of bench/ scripts share: the --source argument (the checkout), bench/ on the
import path, and a list of failed checks reported at the end.

    from bench_check import ARGS, check, finish
    import predictor_fit  # from bench/
    check(cond, "what was expected")
    finish("predictor_fit")  # prints the failures and exits 1, or says all passed
"""
import argparse
import os
import sys

_ap = argparse.ArgumentParser()
_ap.add_argument("--source", required=True, help="the tessel checkout")
_ap.add_argument("--tessel", help="the tessel binary, for the checks that run it")
ARGS = _ap.parse_args()
sys.path.insert(0, os.path.join(ARGS.source, "bench"))

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def finish(name):
    if failures:
        print("\n".join("FAILED: " + f for f in failures))
        sys.exit(1)
    print(name + ": all checks passed")
