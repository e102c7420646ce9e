"""Snakemake adapter: per-model intervals -> results/metrics/intervals.parquet."""

from dualcog.collect import concat_artifacts, distinct_models
from dualcog.runtime import log, run_step
from dualcog.schemas import write_table
from dualcog.stats.schema import CONFIDENCE_INTERVALS


def main(sm):
    intervals = concat_artifacts(sm.input)
    log.info("%d intervals for %d models", intervals.num_rows, distinct_models(intervals))
    write_table(intervals, CONFIDENCE_INTERVALS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
