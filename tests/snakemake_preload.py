"""What every Snakemake run of the suite would import or collect anew, done once in the
forkserver of tests/snakemake_fork.py; its children start from here.

Measured on a dry run of the finished demo, forked (CPU-s of the child, eight runs each):
Snakemake's command line module alone 0.73-1.02, with all of the below 0.27-0.37.
"""

import gc
import sys
from pathlib import Path

import jsonschema  # noqa: F401  (the config check of every run)
import pandas  # noqa: F401  (Snakemake imports it to check every job's params)
import smart_open  # noqa: F401  (Snakemake's source cache reads the Snakefile through it)
import snakemake.cli
import snakemake.report  # noqa: F401  (the report plugins' registry imports it)

import dualcog.config  # noqa: F401  (the Snakefile's first import)

# The path of a fresh interpreter, as `python -m snakemake` has it; a child gets its parent's
# (the pytest worker's, tests/ on it) from multiprocessing, and puts this one back.
FRESH_SYS_PATH = [entry for entry in sys.path if entry != str(Path(__file__).resolve().parent)]

# Building the parser fills every plugin registry (executors, storage, reports, loggers, ...):
# each looks through the installed packages, 0.4-0.6 CPU-s, then keeps what it found.
snakemake.cli.get_argument_parser()
# What is here now the children's garbage collector leaves alone: it would otherwise walk (and
# so copy) every inherited page of objects.
gc.freeze()
