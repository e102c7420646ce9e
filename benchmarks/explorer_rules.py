"""The explorer's jobs of a whole run (`explorer_media`, `explorer_samples`, every model's
`explorer`, and `data_stamp` on trees that have it), before vs after, in one run.

Copies a finished run's config and results (its data linked) once per side, removes the old
job logs, forces exactly those rules with Snakemake (mtime triggers only) for a baseline
revision and for this working tree one after the other, and prints each rule's jobs and
process CPU from the jobs' logs (`cpu_by_rule`) beside the wall time. Asserts that every
model's record chunks and the sample cards are byte-identical between the two trees (the
pages carry their commit and stamp, and the media their own comparison:
benchmarks/explorer_media.py).

With --rules only those rules are forced (e.g. `--rules explorer`: the per-model jobs alone);
with --rounds N the two sides run N times each, alternating, and each rule's figure is its
lowest of the N (on a shared machine a single run of either side can be 10 % off).

Usage: python benchmarks/explorer_rules.py FINISHED_RUN_DIR [--baseline main] [--cores 2]
       [--rules RULE ...] [--rounds N] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import yaml
from _timing import machine
from _workflow import REPO, cpu_by_rule, revision_tree, timed_snakemake

RULES = ["explorer_media", "explorer_samples", "explorer", "data_stamp"]


def workdir_from(run: Path) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="dualcog-explorer-rules-"))
    shutil.copytree(run / "config", workdir / "config")
    (workdir / "data").symlink_to((run / "data").resolve())
    shutil.copytree(run / "results", workdir / "results", symlinks=True)  # mtimes kept
    shutil.rmtree(workdir / "results" / "logs")
    return workdir


def has_rule(tree: Path, name: str) -> bool:
    return any(f"rule {name}:" in p.read_text() for p in (tree / "rules").glob("*.smk"))


def pages(workdir: Path) -> list[str]:
    config = yaml.safe_load((workdir / "config" / "config.yaml").read_text())
    return [f"results/explorer/{model['name']}.html" for model in config["models"]]


def chunk_files(workdir: Path) -> dict[str, bytes]:
    explorer = workdir / "results" / "explorer"
    return {
        str(p.relative_to(explorer)): p.read_bytes()
        for folder in ("data", "samples")
        for p in sorted((explorer / folder).rglob("*.js"))
    }


def _lowest(runs: list) -> dict[str, tuple[int, float]]:
    """Per rule, the round with the least CPU (jobs, CPU-s)."""
    out: dict[str, tuple[int, float]] = {}
    for _, cpu in runs:
        for rule, (jobs, seconds) in cpu.items():
            if rule not in out or seconds < out[rule][1]:
                out[rule] = (jobs, seconds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--cores", default="2")
    parser.add_argument("--rules", nargs="+", choices=RULES, default=RULES)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    baseline = revision_tree(args.baseline)
    sides = {f"before ({args.baseline})": baseline, "after": REPO}
    results: dict[str, list] = {side: [] for side in sides}
    chunks, workdirs = {}, []
    try:
        for _ in range(args.rounds):
            for side, tree in sides.items():
                workdir = workdir_from(args.run)
                workdirs.append(workdir)
                rules = [r for r in args.rules if has_rule(tree, r)]
                timing = timed_snakemake(
                    tree,
                    workdir,
                    *pages(workdir),
                    "--cores",
                    args.cores,
                    "-q",
                    "--rerun-triggers",
                    "mtime",
                    "--forcerun",
                    *rules,
                )
                results[side].append((timing, cpu_by_rule(workdir)))
                chunks[side] = chunk_files(workdir)
                if not args.keep:
                    shutil.rmtree(workdir, ignore_errors=True)
        before, after = chunks.values()
        assert before.keys() == after.keys() and before == after, "chunks differ"
        print(f"record chunks and sample cards: {len(after)} files, byte-identical")
        print(f"{args.rounds} round(s), sides alternating; per rule the lowest of the rounds")
        lowest = {side: _lowest(runs) for side, runs in results.items()}
        names = [r for r in RULES if any(r in cpu for cpu in lowest.values())]
        print(f"{'rule':18}" + "".join(f"{side:>30}" for side in results))
        for rule in names:
            cells = []
            for cpu in lowest.values():
                jobs, seconds = cpu.get(rule, (0, 0.0))
                cells.append(f"{seconds:8.1f} CPU-s ({jobs} jobs)" if jobs else "-")
            print(f"{rule:18}" + "".join(f"{c:>30}" for c in cells))
        totals = [sum(s for r, (_, s) in cpu.items() if r in RULES) for cpu in lowest.values()]
        print(f"{'total':18}" + "".join(f"{t:>24.1f} CPU-s" for t in totals))
        for side, runs in results.items():
            rounds = ", ".join(
                f"{sum(s for r, (_, s) in cpu.items() if r in RULES):.1f}" for _, cpu in runs
            )
            walls = ", ".join(f"{timing.wall_s:.1f}" for timing, _ in runs)
            print(f"{side}: CPU-s per round {rounds}; snakemake wall s {walls}")
    finally:
        shutil.rmtree(baseline, ignore_errors=True)
        for workdir in workdirs:
            if args.keep:
                print(f"kept {workdir}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
