"""Snakemake adapter: a repeat set's runs' scores -> the mean over its repeats and the
bootstrap interval of that mean (results/metrics/intervals_by_model/<set>.parquet)."""

from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow, write_table
from dualcog.stats import (
    CONFIDENCE_INTERVALS,
    BootstrapSettings,
    build_clusters,
    set_intervals,
    weights_from_table,
)
from dualcog.stats.clusters import CLUSTER_COLUMNS


def main(sm):
    settings = BootstrapSettings.from_config(sm.params.bootstrap)
    clusters = build_clusters(read_arrow(sm.input.samples, columns=CLUSTER_COLUMNS))
    weights = weights_from_table(read_arrow(sm.input.weights), clusters, settings.replicates,
                                 settings.seed)  # fmt: skip
    scores = [read_arrow(path) for path in sm.input.scores]
    name = sm.wildcards.repeat_set
    intervals = set_intervals(name, scores, clusters, settings, read_arrow(sm.input.pairs), weights)
    log.info("%s: %d intervals over %d repeats", name, intervals.num_rows, len(scores))
    write_table(intervals, CONFIDENCE_INTERVALS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
