"""Snakemake's own CPU on a wide DAG: its default job-start throttle vs the workflow's hook.

A generated workflow of N independent jobs (each `sleep` a moment, with 26 input files, as
the replay jobs of a 45-model run had) runs on 2 cores twice, once as Snakemake leaves it
(`--max-jobs-per-timespan 100/1s`) and once with `dualcog.scheduling.lift_local_start_limit`
in `onstart:`, as the workflow's Snakefile does. Same jobs, same outputs (asserted); the
difference is the scheduler loop's re-evaluation timers.

Usage: python benchmarks/scheduler_throttle.py [--jobs 270] [--seconds 0.4] [--cores 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import machine, measure
from _workflow import REPO

SNAKEFILE = """
import sys
sys.path.insert(0, {src!r})
from dualcog.scheduling import lift_local_start_limit

if config.get("lift"):

    onstart:
        lift_local_start_limit(workflow)

rule all:
    input: expand("out/{{i}}.txt", i=range({jobs}))

rule one:
    input: [f"in/{{k}}.txt" for k in range(26)]
    output: "out/{{i}}.txt"
    shell: "sleep {seconds}; echo {{wildcards.i}} > {{output}}"
"""


def run(workdir: Path, lift: bool, cores: str) -> list[str]:
    for old in (workdir / "out").glob("*"):
        old.unlink()
    command = [sys.executable, "-m", "snakemake", "--cores", cores, "-q", "all",
               "--config", f"lift={int(lift)}"]  # fmt: skip
    subprocess.run(command, cwd=workdir, check=True, capture_output=True, env=dict(os.environ))
    return sorted(p.read_text() for p in (workdir / "out").glob("*.txt"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=270)
    parser.add_argument("--seconds", type=float, default=0.4)
    parser.add_argument("--cores", default="2")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    workdir = Path(tempfile.mkdtemp(prefix="dualcog-throttle-"))
    (workdir / "in").mkdir()
    for k in range(26):
        (workdir / "in" / f"{k}.txt").touch()
    (workdir / "Snakefile").write_text(
        SNAKEFILE.format(src=str(REPO / "src"), jobs=args.jobs, seconds=args.seconds)
    )
    lifted_t, lifted = measure(lambda: run(workdir, True, args.cores), 1)
    default_t, default = measure(lambda: run(workdir, False, args.cores), 1)
    assert lifted == default and len(lifted) == args.jobs, "different outputs"
    floor = args.jobs * args.seconds / int(args.cores)
    print(f"{args.jobs} jobs of {args.seconds} s on {args.cores} cores (floor {floor:.0f} s wall)")
    for name, timing in (("throttle lifted (ours)", lifted_t), ("Snakemake default", default_t)):
        print(f"  {name:<24} wall {timing.wall_s:7.1f} s  CPU {timing.cpu_s:7.2f} s")
    print(f"  CPU ratio: {default_t.cpu_s / lifted_t.cpu_s:.1f}x")


if __name__ == "__main__":
    main()
