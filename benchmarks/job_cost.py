"""Per-job CPU of the cheap per-model rules, before vs after, in one run.

The per-model rules `infer` (built-in backends, one job per model and task, on trees before
`infer_run`), `replay` (now `infer_run`, one job per replayed or built-in run),
`parse`, `score` (and `intervals`, on trees from before it became part of `score`: the two
are then compared with the merged job), `explorer`, the prompt renders and the `collect_metrics` /
`collect_intervals` jobs pay Python start-up, Snakemake's script preamble and imports once
per job. This re-runs exactly those jobs (`--forcerun`, mtime triggers only) for a baseline
revision and for this working tree, each in a fresh working directory filled with the inputs
of a finished run (the demo, or scripts/make_paper_scale.py then the workflow), reads every
job's CPU from its log (`run_step`'s last line: process CPU, start-up and imports included),
prints both side by side and asserts that every output the jobs wrote (but the explorer
pages, which name their code version) is byte-identical between the two revisions.

Usage: python benchmarks/job_cost.py FINISHED_RUN_DIR [--baseline main] [--models N]
       [--cores 2] [--repeats 1] [--keep]
FINISHED_RUN_DIR holds config/, results/ and the data of a complete run (every other entry
is linked: `data` for the paper scale, `resources` for the demo).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _timing import machine
from _workflow import REPO, cpu_by_rule, revision_tree, timed_snakemake

# Inputs of the re-run jobs and everything upstream of them (so that nothing else runs).
COPIED = ["benchmark", "media", "responses", "parsed", "scores", "metrics", "prompts",
          "explorer", "stamp.json"]  # fmt: skip
MODEL_RULES = ["infer", "infer_run", "score", "explorer"]
# Rules since merged into another: the baseline's jobs of both are compared with the merged
# jobs (only the rules a tree has are forced).
MERGED = {"intervals": "score"}
# Rules whose jobs were regrouped into fewer jobs of another (built-in `infer` jobs, one per
# model and task, and `replay` into one `infer_run` job per model): compared by their totals.
REGROUPED = {"infer": "infer_run", "replay": "infer_run"}
# Once-per-run jobs split out of a per-model rule (on trees that have them): their CPU is
# printed on its own line and counted in the totals of that rule.
SPLIT_OUT = {"bootstrap_weights": "score"}
COLLECT_RULES = ["collect_metrics", "collect_intervals"]
RENDER_RULES = ["render_image_prompts", "render_video_prompts"]


def workdir_from(run: Path) -> Path:
    """A fresh working directory: the run's config, its data link, its results (mtimes kept)."""
    workdir = Path(tempfile.mkdtemp(prefix="dualcog-jobcost-"))
    shutil.copytree(run / "config", workdir / "config")
    for entry in run.iterdir():
        if entry.name not in ("config", "results", ".snakemake"):
            (workdir / entry.name).symlink_to(entry.resolve())
    for name in COPIED:
        source, target = run / "results" / name, workdir / "results" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)  # copy2: modification times kept
        elif source.exists():
            shutil.copy2(source, target)
    return workdir


def model_names(run: Path) -> list[str]:
    config = yaml.safe_load((run / "config" / "config.yaml").read_text())
    return [m["name"] for m in config["models"]]


def outputs(workdir: Path, models: list[str], collect: bool) -> list[str]:
    paths = [f"results/prompts/{p.name}" for p in sorted((workdir / "results/prompts").iterdir())]
    for m in models:
        responses = workdir / "results/responses" / m
        paths += [f"results/responses/{m}/{p.name}" for p in sorted(responses.glob("*.parquet"))]
        paths += [f"results/parsed/{m}.parquet", f"results/parsed/{m}.run.json",
                  f"results/scores/{m}.parquet", f"results/metrics/by_model/{m}.parquet",
                  f"results/metrics/intervals_by_model/{m}.parquet"]  # fmt: skip
    if collect:
        paths += ["results/metrics/metrics.parquet", "results/metrics/intervals.parquet"]
    return paths


def has_rule(tree: Path, name: str) -> bool:
    """A rule the tree declares by name, or (`replay`, `infer_run`) the per-run rule of runs
    of every task, named in a loop (rules/inference.smk)."""
    texts = [f"\n{p.read_text()}" for p in (tree / "rules").glob("*.smk")]
    looped = {"replay": "replay_rule_name(replay_tasks)", "infer_run": "per_run_rule_name("}
    if name in looped and any(looped[name] in text for text in texts):
        return True
    return any(f"\nrule {name}:" in text for text in texts)


def run_jobs(
    tree: Path, workdir: Path, models: list[str], collect: bool, cores: str, only: list[str]
):
    """Force the measured jobs (those of `only`, when given); the renders last, as their
    outputs are upstream of `parse`."""
    common = ["--cores", cores, "--rerun-triggers", "mtime", "-q"]
    targets = [f"results/metrics/intervals_by_model/{m}.parquet" for m in models]
    targets += [f"results/parsed/{m}.run.json" for m in models]
    if not only or "explorer" in only:
        targets += [f"results/explorer/{m}.html" for m in models]
    if collect:
        targets += ["results/metrics/metrics.parquet", "results/metrics/intervals.parquet"]
    rules = [r for r in MODEL_RULES + (COLLECT_RULES if collect else []) if has_rule(tree, r)]
    rules = [r for r in rules if not only or r in only or MERGED.get(r) in only]
    per_model = timed_snakemake(tree, workdir, *targets, *common, "--forcerun", *rules)
    if only and "render" not in only:
        return per_model, None
    prompts = outputs(workdir, [], False)
    render = timed_snakemake(tree, workdir, *prompts, *common, "--forcerun", *RENDER_RULES)
    return per_model, render


def import_floor(modules: str, runs: int = 5) -> float:
    """Median CPU seconds of a fresh interpreter that imports `modules` (start-up included)."""
    code = (
        "import resource\n"
        f"import {modules}\n"
        "u = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(u.ru_utime + u.ru_stime)"
    )
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout)
        for _ in range(runs)
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished paper-scale working directory")
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--models", type=int, help="only the first N models (no collect jobs)")
    parser.add_argument("--cores", default="2")
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs per revision, interleaved; least CPU kept"
    )
    parser.add_argument("--keep", action="store_true", help="keep the working directories")
    parser.add_argument(
        "--rules", nargs="+", default=[], help="only these rules' jobs (e.g. infer_run score)"
    )
    args = parser.parse_args()
    names = model_names(args.run)
    models = names[: args.models] if args.models else names
    collect = len(models) == len(names) and (not args.rules or "collect_metrics" in args.rules)
    measured = [r for r in MODEL_RULES + COLLECT_RULES * collect + ["render"]
                if not args.rules or r in args.rules or MERGED.get(r) in args.rules]  # fmt: skip
    print(f"machine: {machine()}")
    print(f"{len(models)} models; rules {measured}")
    trees = {f"before ({args.baseline})": revision_tree(args.baseline), "after (ours)": REPO}
    by_side: dict[str, dict[str, tuple[int, float]]] = {side: {} for side in trees}
    workdirs: dict[str, Path] = {}
    for repeat in range(args.repeats):
        for side, tree in trees.items():  # interleaved: a busy spell hits both sides alike
            if side in workdirs:
                shutil.rmtree(workdirs[side])
            workdir = workdirs[side] = workdir_from(args.run)
            per_model, render = run_jobs(tree, workdir, models, collect, args.cores, args.rules)
            for rule, (n, cpu) in cpu_by_rule(workdir).items():
                kept = by_side[side].get(rule)
                by_side[side][rule] = (n, cpu) if kept is None else (n, min(kept[1], cpu))
            runs = [t for t in (per_model, render) if t is not None]
            print(f"{side}, run {repeat + 1}: snakemake (DAG builds included) wall "
                  f"{sum(t.wall_s for t in runs):.1f} s, CPU "
                  f"{sum(t.cpu_s for t in runs):.1f} s (children included)")  # fmt: skip
    before, after = by_side.values()
    for rule, into in SPLIT_OUT.items():
        for name, side in (("before", before), ("after", after)):
            if rule in side:
                (n, cpu), (m, more) = side[into], side.pop(rule)
                side[into] = (n, cpu + more)
                print(f"{name}: {rule} ({m} job) {more:.2f} s, counted in {into}'s total; "
                      f"{into} alone {cpu / n:.2f} s per job")  # fmt: skip
    for rule, into in REGROUPED.items():  # e.g. infer + replay before, infer_run after
        if rule in before and rule not in after and into in after:
            (n, cpu), (m, more) = before.pop(rule), before.get(into, (0, 0.0))
            print(f"before: {rule} {n} jobs, {cpu:.1f} s, counted in {into}")
            before[into] = (n + m, cpu + more)
    expected = set(MODEL_RULES + ["render"] + (COLLECT_RULES if collect else []))
    merged = {r: into for r, into in MERGED.items() if r in before and r not in after}
    assert set(before) - set(merged) == set(after) <= expected, (
        f"jobs of {sorted(before)}, {sorted(after)}"
    )
    for rule, into in merged.items():  # e.g. score + intervals before, against score after
        (n, cpu), (m, more) = before[into], before.pop(rule)
        assert n == m, f"{rule}: {m} jobs, {into}: {n}"
        print(f"before: {into} {cpu / n:.2f} s + {rule} {more / m:.2f} s per model")
        before[into] = (n, cpu + more)
    expected = set(before)
    print(f"{'rule':<18} {'jobs':>9} {'before CPU/job':>15} {'after CPU/job':>14} "
          f"{'before total':>13} {'after total':>12}")  # fmt: skip
    totals = [0.0, 0.0]
    for rule in sorted(expected, key=lambda r: -before[r][1]):
        (n, cpu_before), (m, cpu_after) = before[rule], after[rule]
        assert n == m or rule in REGROUPED.values(), f"{rule}: {n} jobs before, {m} after"
        totals[0] += cpu_before
        totals[1] += cpu_after
        ratio = cpu_before / cpu_after
        jobs = f"{n}" if n == m else f"{n}->{m}"
        print(f"{rule:<18} {jobs:>9} {cpu_before / n:13.2f} s {cpu_after / m:12.2f} s "
              f"{cpu_before:11.1f} s {cpu_after:10.1f} s  ({ratio:.2f}x)")  # fmt: skip
    print(f"{'all':<18} {'':5} {'':15} {'':14} {totals[0]:11.1f} s {totals[1]:10.1f} s  "
          f"({totals[0] / totals[1]:.2f}x)")  # fmt: skip
    preamble = "snakemake.iocontainers"  # what Snakemake's script preamble imports
    floor = {
        m: import_floor(m)
        for m in ("sys", preamble, f"{preamble}, pyarrow.parquet", f"{preamble}, pandas")
    }
    print("start-up floor of a job (fresh interpreter, CPU): "
          + "; ".join(f"import {m}: {cpu:.2f} s" for m, cpu in floor.items()))  # fmt: skip
    checked = outputs(workdirs[next(iter(workdirs))], models, collect)
    first, second = workdirs.values()
    differ = [p for p in checked if (first / p).read_bytes() != (second / p).read_bytes()]
    assert not differ, f"outputs differ between the revisions: {differ[:5]}"
    print(f"identical outputs: {len(checked)} files, byte for byte")
    for workdir in workdirs.values():
        if not args.keep:
            shutil.rmtree(workdir)
        else:
            print(f"kept {workdir}")
    shutil.rmtree(trees[f"before ({args.baseline})"])  # the baseline's git archive


if __name__ == "__main__":
    main()
