"""Cluster-bootstrap percentile intervals of every metric row of one model run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dualcog.errors import DataError
from dualcog.schemas import table_from_columns
from dualcog.scoring.columns import floats
from dualcog.stats.clusters import Clusters, replicate_weights
from dualcog.stats.estimands import KEY, metric_matrices
from dualcog.stats.schema import CONFIDENCE_INTERVALS

# metrics.parquet values are recomputed here from per-cluster sums; summation order may
# differ in the last bits, anything larger means scores and metrics disagree.
AGREEMENT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class BootstrapSettings:
    replicates: int = 1000
    seed: int = 0
    level: float = 0.95

    @classmethod
    def from_config(cls, section: dict | None) -> BootstrapSettings:
        section = section or {}
        settings = cls(**{k: section[k] for k in ("replicates", "seed", "level") if k in section})
        if settings.replicates < 1 or not 0 < settings.level < 1:
            raise ValueError(f"bootstrap settings out of range: {settings}")
        return settings

    def weights(self, clusters: Clusters) -> np.ndarray:
        return replicate_weights(clusters.group_sizes, self.replicates, self.seed)


def percentile_interval(replicates: np.ndarray, level: float) -> tuple[np.ndarray, ...]:
    """(low, high, defined count) per column of (replicates x metrics); NaN = undefined."""
    defined = np.isfinite(replicates).sum(axis=0)
    tail = (1.0 - level) / 2.0
    low = np.full(replicates.shape[1], np.nan)
    high = np.full(replicates.shape[1], np.nan)
    quantiles = [tail, 1 - tail]
    # Columns without NaN in one call along the axis (np.nanquantile walks its columns one by
    # one in Python); each column's values are those np.nanquantile gives it on its own.
    has_nan = np.isnan(replicates).any(axis=0)
    whole = ~has_nan & (defined > 0)
    if whole.any():
        low[whole], high[whole] = np.quantile(replicates[:, whole], quantiles, axis=0)
    partial = has_nan & (defined > 0)
    if partial.any():
        low[partial], high[partial] = np.nanquantile(replicates[:, partial], quantiles, axis=0)
    return low, high, defined


def _out_of_step(model: str, detail: str, field: str) -> DataError:
    return DataError(f"{detail}: scores and metrics of {model!r} are out of step", field=field)


def model_intervals(
    model: str,
    scores: pa.Table,
    metrics: pa.Table,
    clusters: Clusters,
    settings: BootstrapSettings,
    pairs: pa.Table,
    weights: np.ndarray | None = None,
) -> pa.Table:
    """CONFIDENCE_INTERVALS rows of one model: one per row of its METRICS table, in
    its order.

    The metric set and every point estimate are checked against `metrics` (the scorer's
    output), and `value` is copied from it, so the two files never disagree. `pairs` are the
    benchmark's matched-context pairs (PAIRS).
    """
    weights = settings.weights(clusters) if weights is None else weights
    matrices = metric_matrices(scores, clusters, pairs)
    keys = [tuple(row[:4]) for row in matrices.key_rows()]
    low, high, defined = percentile_interval(matrices.evaluate(weights), settings.level)
    point, n_clusters = matrices.point(), matrices.n_clusters()
    reported = floats(metrics["value"])
    listed = [tuple(metrics[name].to_pylist()) for name in KEY]
    listed = list(zip(*listed, strict=True))
    column_of = {key: i for i, key in enumerate(keys)}
    stray = sorted(set(keys).symmetric_difference(listed))
    if stray:
        side = "scores" if stray[0] in column_of else "metrics table"
        detail = f"{len(stray)} metric rows exist only in the {side}, e.g. {stray[0]}"
        raise _out_of_step(model, detail, "metric")
    at = np.array([column_of[key] for key in listed], dtype=np.int64)
    recomputed = point[at] if len(at) else np.zeros(0)
    differs = ~np.isclose(recomputed, reported, rtol=0, atol=AGREEMENT_TOLERANCE)
    differs &= ~(np.isnan(recomputed) & np.isnan(reported))
    if differs.any():
        row = int(np.flatnonzero(differs)[0])
        detail = (f"recomputed {float(recomputed[row])!r} but the metrics table holds "
                  f"{float(reported[row])!r} for {listed[row]}")  # fmt: skip
        raise _out_of_step(model, detail, "value")
    n = len(listed)
    columns = [
        [model] * n,
        *([key[i] for key in listed] for i in range(4)),
        reported.tolist(),
        low[at].tolist(),
        high[at].tolist(),
        n_clusters[at].tolist(),
        defined[at].astype(np.int64).tolist(),
        [int(settings.seed)] * n,
        [float(settings.level)] * n,
    ]
    return table_from_columns(columns, CONFIDENCE_INTERVALS)
