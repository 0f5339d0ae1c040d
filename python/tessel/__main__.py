"""`python -m tessel compare ...`: the Python side of the tessel command line (the `tessel`
binary's `compare` runs this)."""

import sys

from .compare import main as _compare_main

COMMANDS = {"compare": _compare_main}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        got = "no command" if not argv else "unknown command '%s'" % argv[0]
        print("error: %s (commands: %s)" % (got, ", ".join(COMMANDS)), file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
