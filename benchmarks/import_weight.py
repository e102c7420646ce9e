"""Which heavy packages each module of src/dualcog loads when imported on its own.

For every module of the package (walked with pkgutil), a fresh interpreter imports it and
prints the heavy packages then in sys.modules. A function-local import that is hoisted to
module level must leave every module's line unchanged: diff this script's output before and
after such an edit (an import error is printed as the module's line too, so it shows).

Usage: python benchmarks/import_weight.py [--jobs 2] > weights.txt
"""

from __future__ import annotations

import argparse
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import dualcog

# What a job should not load unless it uses it (each costs tens to hundreds of CPU-ms); the
# two pyarrow submodules cost 25-55 CPU-ms beyond pyarrow itself, which does not load them.
HEAVY = (
    "pandas",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "av",
    "numpy",
    "openai",
    "aiohttp",
    "jsonschema",
    "yaml",
    "matplotlib",
    "PIL",
    "imageio_ffmpeg",
    "inspect_ai",
    "datasets",
    "mlflow",
)

CHECK = (
    "import importlib, sys\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(' '.join(m for m in sys.argv[2:] if m in sys.modules))\n"
)


def modules() -> list[str]:
    """Every module and subpackage of dualcog, dualcog itself first."""
    found = [dualcog.__name__]
    found += [m.name for m in pkgutil.walk_packages(dualcog.__path__, dualcog.__name__ + ".")]
    return sorted(found)


def weight(module: str) -> str:
    """`module: heavy packages it loads`, or the import error's last line."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK, module, *HEAVY], capture_output=True, text=True
    )
    if done.returncode:
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        return f"{module}: IMPORT FAILED {lines[-1]}"
    return f"{module}: {done.stdout.strip()}".rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="interpreters at once")
    args = parser.parse_args()
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(weight, modules()):
            print(line)


if __name__ == "__main__":
    main()
