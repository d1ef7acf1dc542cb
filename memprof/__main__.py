"""``python -m memprof``."""

import sys

try:
    from memprof.frontends.cli import console
except KeyboardInterrupt:  # Ctrl-C while starting up: the documented exit code, no traceback
    print("memprof: interrupted; no output was written", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    console()
