"""Read what the tables and the leaderboard are built from, with clear errors on bad files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dualcog.errors import DataError
from dualcog.tables.build import UsageInputs
from dualcog.tables.coverage import mean_output_tokens
from dualcog.tables.usage import outcome_shares
from dualcog.usage import mode_flags, read_facts

INTERVAL_COLUMNS = (
    "model", "task", "parse", "stratum", "metric", "value",
    "ci_low", "ci_high", "n_clusters", "n_boot", "seed", "level",
)  # fmt: skip


@dataclass
class TableInputs:
    metrics: pd.DataFrame
    runs: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    tokens: dict[str, float] = field(default_factory=dict)
    intervals: pd.DataFrame | None = None
    stamp: Mapping[str, Any] | None = None
    usage: UsageInputs | None = None


def _read_parquet(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    try:
        return pq.read_table(path, columns=columns, use_threads=False).to_pandas()
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"cannot read Parquet file: {exc}", file=str(path)) from exc


def read_json(path: str | Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read JSON file: {exc}", file=str(path)) from exc


def read_intervals(path: str | Path) -> pd.DataFrame:
    """Bootstrap intervals, one row per main metric (columns `INTERVAL_COLUMNS`)."""
    frame = _read_parquet(path)
    missing = [c for c in INTERVAL_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(
            f"intervals table lacks column(s) {', '.join(missing)}",
            file=str(path),
            field=missing[0],
        )
    return frame


def read_stamp(path: str | Path) -> Mapping[str, Any]:
    stamp = read_json(path)
    if not isinstance(stamp, Mapping):
        raise DataError("a stamp must be a JSON object", file=str(path))
    return stamp


def _outcomes_model(path: str | Path) -> str:
    """`results/parsed/<model>.outcomes.parquet` -> the model."""
    return Path(path).name.removesuffix(".outcomes.parquet")


def read_request_outcomes(paths: Mapping[str, str | Path]) -> pd.DataFrame:
    """model, task, sample_id, outcome from each model's REQUEST_OUTCOMES file (model -> path);
    DataError names a file that does not read or lacks a column."""
    frames = []
    for model, path in paths.items():
        try:
            table = pq.ParquetFile(path).read()
        except (OSError, pa.ArrowException) as exc:
            raise DataError(f"cannot read outcome classes: {exc}", file=str(path)) from exc
        for required in ("sample_id", "task", "outcome"):
            if required not in table.column_names:
                raise DataError("outcome table lacks a column", file=str(path), field=required)
        frame = table.select(["task", "sample_id", "outcome"]).to_pandas()
        frames.append(frame.assign(model=str(model))[["model", "task", "sample_id", "outcome"]])
    if not frames:
        return pd.DataFrame(columns=["model", "task", "sample_id", "outcome"], dtype=object)
    return pd.concat(frames, ignore_index=True)


def load_inputs(
    metrics: str | Path,
    runs: Iterable[str | Path] = (),
    facts: Iterable[str | Path] = (),
    outcomes: Iterable[str | Path] = (),
    intervals: str | Path | None = None,
    stamp: str | Path | None = None,
    models: Iterable[Mapping[str, Any]] = (),
) -> TableInputs:
    """Everything the tables and the leaderboard read; `models` (the configured runs, with
    their backend and prices) decide the usage and the mode check; `outcomes` are the runs'
    request outcome classes as the `parse` jobs wrote them (`<model>.outcomes.parquet`)."""
    run_info: dict[str, Mapping[str, Any]] = {}
    counts: dict[str, dict[str, int]] = {}
    for path in runs:
        run = read_json(path)
        if not isinstance(run, Mapping) or "model" not in run:
            raise DataError("run file has no model name", file=str(path), field="model")
        run_info[str(run["model"])] = run
        # The audit's stage counts, as the `parse` job counted them (not every parsed file
        # read again).
        stages = run.get("image_compatible_stages")
        if not isinstance(stages, Mapping):
            raise DataError(
                "run file has no stage counts (written by an older parse job: rerun it)",
                file=str(path),
                field="image_compatible_stages",
            )
        counts[str(run["model"])] = {str(k): int(v) for k, v in stages.items()}
    facts = read_facts(facts)
    tokens = mean_output_tokens(
        [facts.select(["model", "status", "completion_tokens"]).to_pandas()]
    )
    classes = read_request_outcomes({_outcomes_model(p): p for p in outcomes})
    models = list(models)
    return TableInputs(
        metrics=_read_parquet(metrics),
        runs=run_info,
        counts=counts,
        tokens=tokens,
        intervals=read_intervals(intervals) if intervals else None,
        stamp=read_stamp(stamp) if stamp else None,
        usage=UsageInputs(facts, outcome_shares(classes), mode_flags(facts, models)),
    )
