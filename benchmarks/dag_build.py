"""DAG build time (`snakemake -n`) of a paper-scale configuration, ours vs a baseline revision.

Measured twice: on a fresh working directory (nothing computed yet) and on one whose results
are complete (every job's inputs, outputs and params are checked). CPU time is the child's.

Usage: python benchmarks/dag_build.py BENCHMARK_DIR [--baseline REV] [--complete WORKDIR]
       BENCHMARK_DIR is made by scripts/make_paper_scale.py; --complete names a working
       directory that holds a finished run of it (e.g. from benchmarks/full_run.py --keep).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from _timing import machine
from _workflow import REPO, fresh_workdir, revision_tree, timed_snakemake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", type=Path)
    parser.add_argument("--baseline", help="git revision to compare with, e.g. main")
    parser.add_argument("--complete", type=Path, help="working directory with a finished run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    trees = {"ours": REPO}
    if args.baseline:
        trees[f"baseline {args.baseline}"] = revision_tree(args.baseline)
    fresh = fresh_workdir(args.benchmark)
    try:
        for name, tree in trees.items():
            t = timed_snakemake(tree, fresh, "--cores", "2", "-n", "-q", repeats=args.repeats)
            print(f"  {name:<22} fresh     wall {t.wall_s:6.2f} s  CPU {t.cpu_s:6.2f} s")
            if args.complete:
                t = timed_snakemake(
                    tree, args.complete, "--cores", "2", "-n", "-q", repeats=args.repeats
                )
                print(f"  {name:<22} complete  wall {t.wall_s:6.2f} s  CPU {t.cpu_s:6.2f} s")
    finally:
        shutil.rmtree(fresh)


if __name__ == "__main__":
    main()
