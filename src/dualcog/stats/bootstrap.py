"""Cluster-bootstrap percentile intervals of every metric row of one model run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualcog.errors import DataError
from dualcog.stats.clusters import Clusters, replicate_weights
from dualcog.stats.estimands import KEY, MetricMatrices, metric_matrices
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
    usable = defined > 0
    if usable.any():
        low[usable], high[usable] = np.nanquantile(replicates[:, usable], [tail, 1 - tail], axis=0)
    return low, high, defined


def interval_frame(
    matrices: MetricMatrices, weights: np.ndarray, settings: BootstrapSettings
) -> pd.DataFrame:
    """Point estimate, interval and sizes of every metric of `matrices`."""
    frame = matrices.all_keys()[KEY].copy()
    replicated = matrices.evaluate(weights)
    low, high, defined = percentile_interval(replicated, settings.level)
    frame["value"] = matrices.point()
    frame["ci_low"] = low
    frame["ci_high"] = high
    frame["n_clusters"] = matrices.n_clusters()
    frame["n_boot"] = defined.astype(np.int64)
    frame["seed"] = settings.seed
    frame["level"] = settings.level
    return frame


def model_intervals(
    model: str,
    samples: pd.DataFrame,
    scores: pd.DataFrame,
    metrics: pd.DataFrame,
    clusters: Clusters,
    settings: BootstrapSettings,
    weights: np.ndarray | None = None,
    pairs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """CONFIDENCE_INTERVALS rows of one model: one per row of its metrics table.

    The metric set and every point estimate are checked against `metrics` (the scorer's
    output), and `value` is copied from it, so the two files never disagree. `pairs` are the
    benchmark's matched-context pairs (default: paired from `samples` here).
    """
    weights = settings.weights(clusters) if weights is None else weights
    matrices = metric_matrices(scores, samples, clusters, pairs)
    frame = interval_frame(matrices, weights, settings)
    reference = metrics[KEY + ["value"]].rename(columns={"value": "reported"})
    joined = frame.merge(reference, on=KEY, how="outer", indicator=True)
    stray = joined[joined["_merge"] != "both"]
    if len(stray):
        row = stray.iloc[0]
        side = "metrics table" if row["_merge"] == "right_only" else "scores"
        raise DataError(
            f"{len(stray)} metric rows exist only in the {side}, e.g. "
            f"{tuple(row[k] for k in KEY)}: scores and metrics of {model!r} are out of step",
            field="metric",
        )
    differs = ~np.isclose(joined["value"], joined["reported"], rtol=0, atol=AGREEMENT_TOLERANCE)
    differs &= ~(joined["value"].isna() & joined["reported"].isna())
    if differs.any():
        row = joined[differs].iloc[0]
        raise DataError(
            f"recomputed {row['value']!r} but the metrics table holds {row['reported']!r} for "
            f"{tuple(row[k] for k in KEY)}: scores and metrics of {model!r} are out of step",
            field="value",
        )
    joined["value"] = joined["reported"]
    joined.insert(0, "model", model)
    order = metrics[KEY].reset_index(drop=True).reset_index().rename(columns={"index": "order"})
    joined = joined.merge(order, on=KEY).sort_values("order")
    return joined[CONFIDENCE_INTERVALS.names].reset_index(drop=True)
