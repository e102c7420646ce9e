"""Snakemake's own CPU at paper scale under each job scheduler, in one run.

Runs the whole workflow of a benchmark made by scripts/make_paper_scale.py once per scheduler
(`--scheduler ilp`, Snakemake's default, which solves an integer program with PuLP's CBC
solver on every scheduling pass, and `--scheduler greedy`), each in a fresh working
directory, through a wrapper that reports the Snakemake process's own CPU (RUSAGE_SELF:
DAG building, scheduling, job bookkeeping, the logger) apart from its children's (the jobs,
and with `ilp` the solver processes). The jobs' own CPU comes from their logs (`run_step`'s
last line), so children minus jobs is what the job processes spend outside their own code
(Snakemake's script preamble written, interpreter exit) plus the solver. Asserts that every
scheduler gives byte-identical metrics and intervals files.

`--profile DIR` also writes a cProfile of the Snakemake process (every thread, merged) per
scheduler, to read with `python -m pstats`.

Usage: python benchmarks/scheduler_cost.py BENCHMARK_DIR [--schedulers ilp greedy]
       [--cores 2] [--tree PATH] [--profile DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import machine
from _workflow import REPO, cpu_by_rule, fresh_workdir

# Snakemake run in-process; at exit the process's own CPU and that of its waited-for
# children are written to argv[1] (argv[2]: a cProfile output path or ""). With a profile,
# every thread is profiled (the local executor runs jobs from a thread pool) and merged.
WRAPPER = r"""
import atexit, json, resource, sys, threading
report, profile_path = sys.argv[1], sys.argv[2]
profiles = []
if profile_path:
    import cProfile
    main_profile = cProfile.Profile()
    profiles.append(main_profile)
    original_run = threading.Thread.run
    def profiled_run(self):
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()
        try:
            original_run(self)
        finally:
            profile.disable()
    threading.Thread.run = profiled_run
def write_report():
    if profile_path:
        import pstats
        main_profile.disable()
        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            try:
                stats.add(profile)
            except TypeError:  # a thread that never ran
                pass
        stats.dump_stats(profile_path)
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(report, "w") as handle:
        json.dump({"self": own.ru_utime + own.ru_stime,
                   "children": children.ru_utime + children.ru_stime}, handle)
atexit.register(write_report)
sys.argv = ["snakemake", *sys.argv[3:]]
if profile_path:
    main_profile.enable()
from snakemake.cli import main
main()
"""

COMPARED = ["results/metrics/metrics.parquet", "results/metrics/intervals.parquet"]


def run(tree: Path, workdir: Path, args: list[str], profile: Path | None) -> dict[str, float]:
    """Snakemake of `tree` in `workdir`: wall, its own CPU and its children's."""
    report = Path(tempfile.mkstemp(suffix=".json")[1])
    # A pinned stamp time (dualcog.stamp.creation_time): the files can be compared byte for byte.
    env = {"SOURCE_DATE_EPOCH": "1767225600", **os.environ, "PYTHONPATH": str(tree / "src")}
    command = [sys.executable, "-c", WRAPPER, str(report), str(profile or ""), "--snakefile",
               str(tree / "Snakefile"), "--directory", str(workdir), *args]  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    usage = json.loads(report.read_text())
    report.unlink()
    return {"wall": wall, **usage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", type=Path)
    parser.add_argument("--schedulers", nargs="+", default=["ilp", "greedy"])
    parser.add_argument("--cores", default="2")
    parser.add_argument("--tree", type=Path, default=REPO, help="the workflow to run")
    parser.add_argument("--profile", type=Path, help="write a cProfile per scheduler here")
    parser.add_argument("--keep", action="store_true", help="keep the working directories")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    outputs: dict[str, list[bytes]] = {}
    for scheduler in args.schedulers:
        workdir = fresh_workdir(args.benchmark)
        profile = None
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            profile = args.profile / f"snakemake-{scheduler}.prof"
        usage = run(args.tree, workdir, ["--cores", args.cores, "-q", "--scheduler", scheduler],
                    profile)  # fmt: skip
        by_rule = cpu_by_rule(workdir)
        jobs = sum(n for n, _ in by_rule.values())
        in_jobs = sum(cpu for _, cpu in by_rule.values())
        total = usage["self"] + usage["children"]
        print(f"--scheduler {scheduler}: {jobs} jobs, wall {usage['wall']:.1f} s, CPU "
              f"{total:.1f} s = Snakemake's process {usage['self']:.1f} s + children "
              f"{usage['children']:.1f} s (jobs' own code {in_jobs:.1f} s, the rest "
              f"{usage['children'] - in_jobs:.1f} s: job start-up/exit outside run_step, "
              f"solver){'' if profile is None else f'; profile {profile}'}")  # fmt: skip
        outputs[scheduler] = [(workdir / path).read_bytes() for path in COMPARED]
        print(f"    load average at the end {os.getloadavg()[0]:.2f}; workdir {workdir}")
        if not args.keep:
            shutil.rmtree(workdir)
    first, *others = outputs.values()
    assert all(other == first for other in others), "metrics or intervals differ"
    print(f"identical {' and '.join(Path(p).name for p in COMPARED)} under every scheduler")


if __name__ == "__main__":
    main()
