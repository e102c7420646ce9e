"""Uncertainty of the metrics: cluster-bootstrap intervals and paired model comparisons.

See docs/protocol.md ("Uncertainty") for the resampling units and the estimators.
"""

from dualcog.stats.bootstrap import (
    CONFIDENCE_INTERVALS,
    BootstrapSettings,
    model_intervals,
    percentile_interval,
)
from dualcog.stats.clusters import Clusters, build_clusters, replicate_weights
from dualcog.stats.compare import (
    COMPARISON,
    compare_models,
    comparison_markdown,
    comparison_pairs,
)
from dualcog.stats.estimands import MetricMatrices, metric_matrices

__all__ = [
    "COMPARISON",
    "CONFIDENCE_INTERVALS",
    "BootstrapSettings",
    "Clusters",
    "MetricMatrices",
    "build_clusters",
    "compare_models",
    "comparison_markdown",
    "comparison_pairs",
    "metric_matrices",
    "model_intervals",
    "percentile_interval",
    "replicate_weights",
]
