#!/usr/bin/env python3
"""exit_code.py CODE CMD...: runs CMD, passes its output through, and
succeeds only if CMD exited with exactly CODE (lit's `not` accepts any
non-zero status; dlc's are documented: 1 for input errors, 2 for usage)."""
import subprocess
import sys

want = int(sys.argv[1])
r = subprocess.run(sys.argv[2:])
if r.returncode != want:
    print(f"exit_code.py: expected exit status {want}, got {r.returncode}", file=sys.stderr)
    sys.exit(1)
