#!/usr/bin/env python3
"""cluster-generic status command: `status.py JOBID` prints running, success or failed."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from localqueue import status  # noqa: E402

if len(sys.argv) != 2:
    raise SystemExit("usage: status.py JOBID")
print(status(sys.argv[1]))
