#!/usr/bin/env python3
"""cluster-generic submit command: `submit.py JOBSCRIPT` prints the new job's id."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from localqueue import submit  # noqa: E402

if len(sys.argv) != 2:
    raise SystemExit("usage: submit.py JOBSCRIPT")
print(submit(sys.argv[1]))
