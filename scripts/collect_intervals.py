"""Snakemake adapter: per-model intervals -> results/metrics/intervals.parquet."""

import pandas as pd

from dualcog.runtime import log, run_step
from dualcog.schemas import read_frame, write_table
from dualcog.stats import CONFIDENCE_INTERVALS


def main(sm):
    intervals = pd.concat([read_frame(p) for p in sm.input], ignore_index=True)
    log.info("%d intervals for %d models", len(intervals), intervals["model"].nunique())
    write_table(intervals, CONFIDENCE_INTERVALS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
