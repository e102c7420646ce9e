"""Snakemake adapter: a finished run's metrics, stamp and tables -> MLflow."""

import json

from dualcog import atomic
from dualcog.integrations.mlflow_tracking import log_run
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow
from dualcog.stamp import read_stamp


def main(sm):
    metrics = {
        name: read_arrow(path)
        for name, path in zip(sm.params.models, sm.input.metrics, strict=True)
    }
    runs = log_run(
        sm.params.settings, metrics, read_stamp(sm.input.stamp), sm.input.stamp, sm.input.tables
    )
    record = {"tracking_uri": sm.params.settings["tracking_uri"], "runs": runs}
    atomic.write_text(sm.output[0], json.dumps(record, indent=2, sort_keys=True) + "\n")
    log.info("logged %d model runs to %s", len(runs), sm.params.settings["tracking_uri"])


run_step(snakemake, main)  # noqa: F821
