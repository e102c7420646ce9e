"""A repeat set's metrics under the bootstrap: each repeat evaluated under the same replicate
weights, then averaged, so the interval is that of the mean over repeats with the samples
resampled (the repeats' answers held as they came) and the between-repeat spread comes beside
it, not mixed into it (dualcog.repeats; docs/decisions.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dualcog.schemas import table_from_columns
from dualcog.stats.bootstrap import BootstrapSettings, percentile_interval
from dualcog.stats.clusters import Clusters
from dualcog.stats.estimands import metric_matrices
from dualcog.stats.schema import CONFIDENCE_INTERVALS


@dataclass(frozen=True)
class SetEstimates:
    """Metrics every repeat has, in the first repeat's order."""

    keys: list[tuple[str, str, str, str, int]]  # task, parse, stratum, metric, n
    points: np.ndarray  # repeats x metrics
    replicates: np.ndarray  # replicates x metrics: the mean over repeats per replicate
    n_clusters: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.points.mean(axis=0)

    @property
    def spread(self) -> np.ndarray:
        """Sample SD (ddof 1) between repeats; NaN for one repeat."""
        if len(self.points) < 2:
            return np.full(self.points.shape[1], np.nan)
        return self.points.std(axis=0, ddof=1)


def set_estimates(
    scores: Sequence[pa.Table], clusters: Clusters, pairs: pa.Table, weights: np.ndarray
) -> SetEstimates:
    """Each run's (SCORES rows) metric matrices, evaluated under `weights` and averaged."""
    if not scores:
        raise ValueError("a repeat set needs at least one run's scores")
    evaluated = []
    for table in scores:
        matrices = metric_matrices(table, clusters, pairs)
        keys = [tuple(row) for row in matrices.key_rows()]
        evaluated.append((keys, matrices.point(), matrices.evaluate(weights), matrices))
    common = set.intersection(*({k[:4] for k in keys} for keys, *_ in evaluated))
    first_keys = [k for k in evaluated[0][0] if k[:4] in common]
    points, replicates = [], []
    for keys, point, boot, _ in evaluated:
        at = {k[:4]: i for i, k in enumerate(keys)}
        columns = [at[k[:4]] for k in first_keys]
        points.append(point[columns])
        replicates.append(boot[:, columns])
    first_at = {k[:4]: i for i, k in enumerate(evaluated[0][0])}
    n_clusters = evaluated[0][3].n_clusters()[[first_at[k[:4]] for k in first_keys]]
    with np.errstate(invalid="ignore"):
        mean_boot = np.mean(replicates, axis=0)  # NaN where any repeat is undefined
    return SetEstimates(first_keys, np.array(points), mean_boot, n_clusters)


def set_intervals(
    name: str,
    scores: Sequence[pa.Table],
    clusters: Clusters,
    settings: BootstrapSettings,
    pairs: pa.Table,
    weights: np.ndarray,
) -> pa.Table:
    """CONFIDENCE_INTERVALS rows of a repeat set `name`: the mean over its repeats and the
    percentile interval of that mean."""
    found = set_estimates(scores, clusters, pairs, weights)
    low, high, defined = percentile_interval(found.replicates, settings.level)
    n = len(found.keys)
    columns = [
        [name] * n,
        *([key[i] for key in found.keys] for i in range(4)),
        found.mean.tolist(),
        low.tolist(),
        high.tolist(),
        found.n_clusters.astype(np.int64).tolist(),
        defined.astype(np.int64).tolist(),
        [int(settings.seed)] * n,
        [float(settings.level)] * n,
    ]
    return table_from_columns(columns, CONFIDENCE_INTERVALS)
