"""Cluster-bootstrap intervals at paper scale: matrix products against a plain loop.

1. One model, the same replicate weights: `MetricMatrices.evaluate` (one matrix product
   over the distinct sum columns) against a naive evaluation that, per replicate, walks
   each drawn cluster's per-sample contributions in Python lists and sums numerators and
   denominators; asserts identical replicate values and prints both times.
2. Paper scale: `model_intervals` (scores -> per-cluster sums -> all replicates -> interval
   rows, checked against the metrics table) for every model of a paper-scale run (the
   benchmark's size: 4,096 image and 2,048 video samples per model).

Both read a finished paper-scale run (scripts/make_paper_scale.py, then the workflow up to
the parses): its samples and its models' parsed answers.

Usage: python benchmarks/bootstrap_intervals.py RUN_DIR [--models 45] [--replicates 1000]
       [--naive-replicates 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from dualcog.schemas import read_arrow
from dualcog.scoring import dual_pairs, model_metrics, score_samples
from dualcog.stats import BootstrapSettings, build_clusters, model_intervals
from dualcog.stats.estimands import _dual_units, _task_units, _Units, metric_matrices


def naive_replicates(scores, pairs, clusters, weights) -> np.ndarray:
    """Per replicate and drawn cluster, add up each contribution in plain Python lists."""
    units = _Units()
    _task_units(units, scores, clusters.indices(scores["sample_id"]))
    _dual_units(units, scores, pairs, clusters)
    names = [list(table) for table in units.names]
    flat = []  # (key, cluster, num, den, n) of every unit
    for codes, cluster, num, den, n in units.parts:
        columns = [np.broadcast_to(code, len(cluster)).tolist() for code in codes]
        for *key, c, u, d, k in zip(*columns, cluster.tolist(), num.tolist(), den.tolist(),
                                    n.tolist(), strict=True):  # fmt: skip
            flat.append((tuple(names[i][code] for i, code in enumerate(key)), c, u, d, k))
    keys = {}
    for key, _, _, _, n in flat:
        keys[key] = keys.get(key, 0.0) + n
    order = sorted(k for k, n in keys.items() if n > 0)
    column = {k: i for i, k in enumerate(order)}
    by_cluster: list[list[tuple[int, float, float]]] = [[] for _ in range(len(clusters))]
    for key, c, num, den, _ in flat:
        if key in column:
            by_cluster[c].append((column[key], num, den))
    empty = [1.0 if k[3] in ("atomic_f1", "temporal_f1_50", "segment_f1_50") else np.nan
             for k in order]  # fmt: skip
    out = np.empty((len(weights), len(order)))
    for r, row in enumerate(weights.tolist()):
        numerator = [0.0] * len(order)
        denominator = [0.0] * len(order)
        for c, w in enumerate(row):
            if w:
                for k, num, den in by_cluster[c]:
                    numerator[k] += w * num
                    denominator[k] += w * den
        out[r] = [n / d if d > 0 else e for n, d, e in zip(numerator, denominator, empty,
                                                             strict=True)]  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished paper-scale run's folder")
    parser.add_argument("--models", type=int, default=45)
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--naive-replicates", type=int, default=100)
    args = parser.parse_args()
    results = args.run / "results"
    samples = read_arrow(results / "benchmark" / "samples.parquet")
    pairs, _ = dual_pairs(samples)
    tasks = samples["task"].unique().to_pylist()
    # Each run's parsed answers sit beside its run file (not its outcomes or facts files).
    parsed_files = sorted(
        run.with_name(run.name.removesuffix(".run.json") + ".parquet")
        for run in (results / "parsed").glob("*.run.json")
    )[: args.models]
    if not parsed_files:
        sys.exit(f"{results / 'parsed'}: no parsed answers (run the workflow first)")
    clusters = build_clusters(samples)
    print(f"{samples.num_rows} samples, {clusters.group_sizes[0]} image and "
          f"{clusters.group_sizes[1]} video clusters")  # fmt: skip

    scores = score_samples(samples, read_arrow(parsed_files[0]))
    weights = BootstrapSettings(args.naive_replicates, seed=1).weights(clusters)
    wall, cpu = time.perf_counter(), time.process_time()
    matrices = metric_matrices(scores, clusters, pairs)
    ours = matrices.evaluate(weights)[:, : len(matrices.keys)]
    ours_wall, ours_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    naive = naive_replicates(scores, pairs, clusters, weights)
    naive_wall, naive_cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert naive.shape == ours.shape
    assert np.allclose(naive, ours, rtol=0, atol=1e-12, equal_nan=True), "outputs differ"
    print(f"1 model x {args.naive_replicates} replicates x {ours.shape[1]} metrics "
          "(identical values):")  # fmt: skip
    print(f"  ours  {ours_wall:7.2f} s wall {ours_cpu:7.2f} s CPU (sums included)")
    print(f"  naive {naive_wall:7.2f} s wall {naive_cpu:7.2f} s CPU")

    settings = BootstrapSettings(args.replicates, seed=0)
    full_weights = settings.weights(clusters)
    runs = []
    for path in parsed_files:
        name = path.stem
        model_scores = score_samples(samples, read_arrow(path))
        runs.append((name, model_scores, model_metrics(name, tasks, model_scores, pairs)))
    wall, cpu = time.perf_counter(), time.process_time()
    rows = 0
    for name, model_scores, metrics in runs:
        rows += model_intervals(name, model_scores, metrics, clusters, settings, pairs,
                                full_weights).num_rows  # fmt: skip
    full_wall, full_cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{len(runs)} models x {args.replicates} replicates: {rows} interval rows in "
          f"{full_wall:.1f} s wall, {full_cpu:.1f} s CPU "
          f"({full_wall / len(runs):.2f} s per model)")  # fmt: skip


if __name__ == "__main__":
    main()
