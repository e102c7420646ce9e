"""Snakemake adapter: benchmark samples -> the bootstrap's replicate weights, drawn once for
every model's `score` job (the seeded draw is the same for all of them)."""

from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow, write_table
from dualcog.stats import (
    REPLICATE_WEIGHTS,
    BootstrapSettings,
    build_clusters,
    replicate_weights_table,
    weights_metadata,
)
from dualcog.stats.clusters import CLUSTER_COLUMNS


def main(sm):
    settings = BootstrapSettings.from_config(sm.params.bootstrap)
    clusters = build_clusters(read_arrow(sm.input[0], columns=CLUSTER_COLUMNS))
    weights = settings.weights(clusters)
    log.info("%d replicates over clusters of sizes %s, seed %d", settings.replicates,
             clusters.group_sizes, settings.seed)  # fmt: skip
    metadata = weights_metadata(clusters.group_sizes, settings.seed)
    write_table(replicate_weights_table(weights), REPLICATE_WEIGHTS, sm.output[0], metadata)


run_step(snakemake, main)  # noqa: F821
