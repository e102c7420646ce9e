"""A finished run logged to MLflow (docs/mlflow.md): one MLflow run per model run, with its
metrics (every METRICS row, named `<parse>/<task>[/<stratum>]/<metric>`), the stamp as
parameters and tags, and the stamp file and the tables as artifacts.

`mlflow` (mlflow-skinny suffices) is imported here only: the workflow needs it only when its
config has an `mlflow:` block.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from dualcog.errors import ConfigError
from dualcog.integrations.evaluation import metric_values
from dualcog.integrations.exports import stamp_details

DEFAULT_EXPERIMENT = "UAV-DualCog"


def _allow_file_store(uri: str) -> None:
    # MLflow 3 refuses its file store unless asked (it is in maintenance mode); a local
    # folder is what a user without a tracking server has, so a path or file: URI is allowed.
    if "://" not in uri or uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


def log_run(
    settings: Mapping[str, Any],
    metrics: Mapping[str, pa.Table],
    stamp: Mapping[str, Any],
    stamp_path: str | Path,
    tables: Sequence[str | Path],
) -> dict[str, str]:
    """Log each model's metrics to `settings["tracking_uri"]`; returns model -> MLflow run id."""
    uri = str(settings["tracking_uri"])
    _allow_file_store(uri)
    try:  # here: MLflow is optional (the `integrations` extra) and slow to import
        import mlflow
    except ImportError as error:
        raise ConfigError(
            f"the config's `mlflow:` block needs MLflow, which is not installed ({error}): "
            '.venv/bin/pip install -e ".[integrations]" (or mlflow-skinny), then run again'
        ) from None

    client = mlflow.MlflowClient(tracking_uri=uri)
    name = str(settings.get("experiment") or DEFAULT_EXPERIMENT)
    experiment = client.get_experiment_by_name(name)
    experiment_id = (
        experiment.experiment_id if experiment is not None else client.create_experiment(name)
    )
    now = int(time.time() * 1000)
    runs = {}
    for model, table in metrics.items():
        details = stamp_details(stamp, model)
        run = client.create_run(
            experiment_id,
            run_name=model,
            tags={"dualcog.model": model, **{f"dualcog.{k}": v for k, v in details.items()}},
        )
        run_id = run.info.run_id
        values = {k: v for k, v in metric_values(table).items() if not math.isnan(v)}
        from mlflow.entities import Metric, Param

        client.log_batch(
            run_id,
            metrics=[Metric(k, v, now, 0) for k, v in sorted(values.items())],
            params=[Param(k, v[:500]) for k, v in sorted(details.items())],
        )
        client.log_artifact(run_id, str(stamp_path))
        for path in tables:
            client.log_artifact(run_id, str(path), artifact_path="tables")
        client.set_terminated(run_id)
        runs[model] = run_id
    return runs
