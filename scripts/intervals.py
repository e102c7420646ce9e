"""Snakemake adapter: one model's scores -> cluster-bootstrap intervals of its metrics."""

from dualcog.runtime import log, run_step
from dualcog.schemas import read_frame, write_table
from dualcog.stats import CONFIDENCE_INTERVALS, BootstrapSettings, build_clusters, model_intervals


def main(sm):
    samples = read_frame(sm.input.samples)
    settings = BootstrapSettings.from_config(sm.params.bootstrap)
    intervals = model_intervals(
        sm.wildcards.model,
        samples,
        read_frame(sm.input.scores),
        read_frame(sm.input.metrics),
        build_clusters(samples),
        settings,
    )
    log.info("%d intervals, %d replicates, seed %d", len(intervals), settings.replicates,
             settings.seed)  # fmt: skip
    write_table(intervals, CONFIDENCE_INTERVALS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
