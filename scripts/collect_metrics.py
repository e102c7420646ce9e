"""Snakemake adapter: per-model metrics -> results/metrics/metrics.parquet."""

import pandas as pd

from dualcog.runtime import log, run_step
from dualcog.schemas import METRICS, read_frame, write_table
from dualcog.stamp import stamp_metadata


def main(sm):
    metrics = pd.concat([read_frame(p) for p in sm.input.metrics], ignore_index=True)
    key = ["model", "task", "parse", "stratum", "metric"]
    duplicated = metrics.duplicated(key)
    if duplicated.any():
        raise ValueError(
            f"duplicate metric rows: {metrics[duplicated][key].head().to_dict('records')}"
        )
    log.info("%d metric rows for %d models", len(metrics), metrics["model"].nunique())
    metadata = stamp_metadata(sm.input.stamp)
    write_table(metrics.sort_values(key, kind="stable"), METRICS, sm.output[0], metadata)


run_step(snakemake, main)  # noqa: F821
