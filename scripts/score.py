"""Snakemake adapter: parses of one model run -> per-sample scores, their metrics and the
metrics' cluster-bootstrap intervals (one job per model: docs/decisions.md), in Arrow."""

import pyarrow.compute as pc

from dualcog.runtime import log, run_step
from dualcog.schemas import METRICS, read_arrow, write_table
from dualcog.scoring import (
    SCORED_SAMPLE_COLUMNS,
    SCORES,
    model_metrics,
    score_samples,
)
from dualcog.stats import (
    CONFIDENCE_INTERVALS,
    BootstrapSettings,
    build_clusters,
    model_intervals,
    weights_from_table,
)
from dualcog.stats.clusters import CLUSTER_COLUMNS

# What scoring and the clusters read of the samples: not their prompts and media lists (most
# of the file's bytes).
SAMPLE_COLUMNS = list(dict.fromkeys([*SCORED_SAMPLE_COLUMNS, *CLUSTER_COLUMNS]))


def main(sm):
    model = sm.wildcards.model
    settings = BootstrapSettings.from_config(sm.params.bootstrap)
    parsed = read_arrow(sm.input.parsed)
    every = read_arrow(sm.input.samples, columns=SAMPLE_COLUMNS)
    samples = every.filter(pc.is_in(every["task"], pc.unique(parsed["task"])))
    scores = score_samples(samples, parsed)
    write_table(scores, SCORES, sm.output.scores)
    pairs = read_arrow(sm.input.pairs)  # dual metrics read the pairs
    tasks = pc.unique(samples["task"]).to_pylist()
    metrics = model_metrics(model, tasks, scores, pairs)
    log.info("%d metric rows", metrics.num_rows)
    write_table(metrics, METRICS, sm.output.metrics)
    # Clusters of the whole benchmark (every model draws the same replicates), not only of
    # the tasks this run was scored on.
    clusters = build_clusters(every.select(CLUSTER_COLUMNS))
    # The replicates drawn once for every model (rule bootstrap_weights), not again here.
    weights = weights_from_table(read_arrow(sm.input.weights), clusters, settings.replicates,
                                 settings.seed)  # fmt: skip
    intervals = model_intervals(model, scores, metrics, clusters, settings, pairs, weights)
    log.info("%d intervals, %d replicates, seed %d", intervals.num_rows, settings.replicates,
             settings.seed)  # fmt: skip
    write_table(intervals, CONFIDENCE_INTERVALS, sm.output.intervals)


run_step(snakemake, main)  # noqa: F821
