"""Snakemake's own CPU on a wide DAG under different job-start throttle settings.

A generated workflow of N independent jobs (each `sleep` a moment, with 26 input files, as
the replay jobs of a 45-model run have) runs on 2 cores once per group of Snakemake options
given (`--max-jobs-per-timespan`: Snakemake's default is 100/1s). While ready jobs wait for a
core, every scheduler pass arms a timer of the setting's timespan for another pass, so the
passes, each re-selecting among all ready jobs, grow with the job events. Same jobs, same
outputs (asserted); wall and CPU (Snakemake and its jobs) per setting.

Usage: python benchmarks/scheduler_throttle.py [--jobs 270] [--seconds 0.4] [--cores 2]
       [--settings "--max-jobs-per-timespan 100/1s" "--max-jobs-per-timespan 100/3s" ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import machine, measure

SNAKEFILE = """
rule all:
    input: expand("out/{{i}}.txt", i=range({jobs}))

rule one:
    input: [f"in/{{k}}.txt" for k in range(26)]
    output: "out/{{i}}.txt"
    shell: "sleep {seconds}; echo {{wildcards.i}} > {{output}}"
"""


def run(workdir: Path, setting: str, cores: str) -> list[str]:
    for old in (workdir / "out").glob("*"):
        old.unlink()
    command = [sys.executable, "-m", "snakemake", "--cores", cores, "-q", "all",
               *setting.split()]  # fmt: skip
    subprocess.run(command, cwd=workdir, check=True, capture_output=True, env=dict(os.environ))
    return sorted(p.read_text() for p in (workdir / "out").glob("*.txt"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=270)
    parser.add_argument("--seconds", type=float, default=0.4)
    parser.add_argument("--cores", default="2")
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["--max-jobs-per-timespan 100/1s", "--max-jobs-per-timespan 100/3s"],
        help="Snakemake options to compare, one string each",
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    workdir = Path(tempfile.mkdtemp(prefix="dualcog-throttle-"))
    (workdir / "in").mkdir()
    for k in range(26):
        (workdir / "in" / f"{k}.txt").touch()
    (workdir / "Snakefile").write_text(SNAKEFILE.format(jobs=args.jobs, seconds=args.seconds))
    floor = args.jobs * args.seconds / int(args.cores)
    print(f"{args.jobs} jobs of {args.seconds} s on {args.cores} cores (floor {floor:.0f} s wall)")
    outputs = None
    for setting in args.settings:
        timing, written = measure(lambda s=setting: run(workdir, s, args.cores), 1)
        assert outputs is None or written == outputs, "different outputs"
        assert len(written) == args.jobs
        outputs = written
        print(f"  {setting:<48} wall {timing.wall_s:7.1f} s  CPU {timing.cpu_s:7.2f} s")


if __name__ == "__main__":
    main()
