"""Snakemake adapter: per-model metrics -> results/metrics/metrics.parquet."""

from dualcog.collect import collect_metrics, concat_artifacts, distinct_models
from dualcog.runtime import log, run_step
from dualcog.schemas import METRICS, write_table
from dualcog.stamp import stamp_metadata


def main(sm):
    metrics = collect_metrics(concat_artifacts(sm.input.metrics))
    log.info("%d metric rows for %d models", metrics.num_rows, distinct_models(metrics))
    write_table(metrics, METRICS, sm.output[0], stamp_metadata(sm.input.stamp))


run_step(snakemake, main)  # noqa: F821
