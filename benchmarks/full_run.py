"""The full workflow at paper scale, raw responses -> tables, ours vs a baseline revision.

Each revision runs the whole DAG in a fresh working directory on the benchmark made by
scripts/make_paper_scale.py (45 replayed runs: ingest, media preparation, prompts, replay,
parsing, scoring, metrics, tables). Prints wall time, CPU time of Snakemake and every job
(children included), CPU per rule from the jobs' logs, and asserts that both revisions give
identical metrics (every value and count).

Usage: python benchmarks/full_run.py BENCHMARK_DIR [--baseline REV] [--cores 2] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pyarrow.parquet as pq
from _timing import machine
from _workflow import REPO, cpu_by_rule, fresh_workdir, revision_tree, timed_snakemake

KEY = ["model", "task", "parse", "stratum", "metric"]


def metrics_of(workdir: Path):
    frame = pq.read_table(workdir / "results" / "metrics" / "metrics.parquet").to_pandas()
    return frame.sort_values(KEY).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", type=Path)
    parser.add_argument("--baseline", help="git revision to compare with, e.g. main")
    parser.add_argument("--cores", default="2")
    parser.add_argument("--keep", action="store_true", help="keep the working directories")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    trees = {"ours": REPO}
    if args.baseline:
        trees[f"baseline {args.baseline}"] = revision_tree(args.baseline)
    results = {}
    for name, tree in trees.items():
        workdir = fresh_workdir(args.benchmark)
        timing = timed_snakemake(tree, workdir, "--cores", args.cores, "-q")
        by_rule = cpu_by_rule(workdir)
        jobs = sum(n for n, _ in by_rule.values())
        print(f"{name}: {jobs} jobs, wall {timing.wall_s:.1f} s, CPU {timing.cpu_s:.1f} s "
              f"(workdir {workdir})")  # fmt: skip
        in_jobs = sum(cpu for _, cpu in by_rule.values())
        print(f"    jobs' own CPU (their logs) {in_jobs:.1f} s; Snakemake and the jobs' "
              f"start-up before our code {timing.cpu_s - in_jobs:.1f} s")  # fmt: skip
        for rule, (n, cpu) in sorted(by_rule.items(), key=lambda t: -t[1][1]):
            print(f"    {rule:<18} {n:4d} jobs  CPU {cpu:8.1f} s  ({cpu / n:.2f} s per job)")
        results[name] = metrics_of(workdir)
        if not args.keep:
            shutil.rmtree(workdir)
    if len(results) == 2:
        ours, baseline = results.values()
        assert ours[KEY].equals(baseline[KEY]), "different metric rows"
        assert (ours["value"].to_numpy() == baseline["value"].to_numpy()).all(), "values differ"
        assert (ours["n"].to_numpy() == baseline["n"].to_numpy()).all(), "counts differ"
        print(f"identical metrics: {len(ours):,} rows")


if __name__ == "__main__":
    main()
