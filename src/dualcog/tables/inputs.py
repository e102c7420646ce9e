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
from dualcog.tables.build import stage_counts
from dualcog.tables.coverage import mean_output_tokens

INTERVAL_COLUMNS = (
    "model", "task", "parse", "stratum", "metric", "value",
    "ci_low", "ci_high", "n_clusters", "n_boot", "seed", "level",
)  # fmt: skip
_RESPONSE_COLUMNS = ["model", "status", "completion_tokens"]


@dataclass
class TableInputs:
    metrics: pd.DataFrame
    runs: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    tokens: dict[str, float] = field(default_factory=dict)
    intervals: pd.DataFrame | None = None
    stamp: Mapping[str, Any] | None = None


def _read_parquet(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    try:
        return pq.read_table(path, columns=columns).to_pandas()
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


def load_inputs(
    metrics: str | Path,
    runs: Iterable[str | Path] = (),
    parsed: Iterable[str | Path] = (),
    responses: Iterable[str | Path] = (),
    intervals: str | Path | None = None,
    stamp: str | Path | None = None,
) -> TableInputs:
    run_info: dict[str, Mapping[str, Any]] = {}
    for path in runs:
        run = read_json(path)
        if not isinstance(run, Mapping) or "model" not in run:
            raise DataError("run file has no model name", file=str(path), field="model")
        run_info[str(run["model"])] = run
    counts = {
        Path(p).stem: stage_counts(_read_parquet(p, ["task", "parse", "stage"])) for p in parsed
    }
    tokens = mean_output_tokens(_read_parquet(p, _RESPONSE_COLUMNS) for p in responses)
    return TableInputs(
        metrics=_read_parquet(metrics),
        runs=run_info,
        counts=counts,
        tokens=tokens,
        intervals=read_intervals(intervals) if intervals else None,
        stamp=read_stamp(stamp) if stamp else None,
    )
