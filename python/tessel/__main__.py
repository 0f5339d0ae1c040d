"""`python -m tessel compare|serve ...`: the Python side of the tessel command line (the
`tessel` binary's `compare` and `serve` run these)."""

import sys

from .compare import main as _compare_main
from .serve import main as _serve_main

COMMANDS = {"compare": _compare_main, "serve": _serve_main}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        got = "no command" if not argv else "unknown command '%s'" % argv[0]
        print("error: %s (commands: %s)" % (got, ", ".join(COMMANDS)), file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
