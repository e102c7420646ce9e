#!/usr/bin/env python3
"""cluster-generic cancel command: `cancel.py JOBID...` ends those jobs' process groups."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from localqueue import cancel  # noqa: E402

cancel(sys.argv[1:])
