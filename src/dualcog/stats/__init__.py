"""Uncertainty of the metrics: cluster-bootstrap intervals and paired model comparisons.

See docs/protocol.md ("Uncertainty") for the resampling units and the estimators.

The names below are imported on first use (PEP 562), so that a job needing only the
intervals schema (`collect_intervals`) does not import the scoring package. The work is on
Arrow tables and numpy; `compare_models` returns a pandas frame (its Markdown summary reads it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_SOURCES = {
    "CONFIDENCE_INTERVALS": "dualcog.stats.schema",
    "BootstrapSettings": "dualcog.stats.bootstrap",
    "model_intervals": "dualcog.stats.bootstrap",
    "percentile_interval": "dualcog.stats.bootstrap",
    "Clusters": "dualcog.stats.clusters",
    "build_clusters": "dualcog.stats.clusters",
    "replicate_weights": "dualcog.stats.clusters",
    "replicate_weights_table": "dualcog.stats.clusters",
    "weights_from_table": "dualcog.stats.clusters",
    "weights_metadata": "dualcog.stats.clusters",
    "REPLICATE_WEIGHTS": "dualcog.stats.schema",
    "COMPARISON": "dualcog.stats.compare",
    "compare_models": "dualcog.stats.compare",
    "comparison_markdown": "dualcog.stats.compare",
    "comparison_pairs": "dualcog.stats.pairs",
    "MetricMatrices": "dualcog.stats.estimands",
    "metric_matrices": "dualcog.stats.estimands",
    "SetEstimates": "dualcog.stats.repeat_sets",
    "set_estimates": "dualcog.stats.repeat_sets",
    "set_intervals": "dualcog.stats.repeat_sets",
}

__all__ = [
    "COMPARISON",
    "CONFIDENCE_INTERVALS",
    "REPLICATE_WEIGHTS",
    "BootstrapSettings",
    "Clusters",
    "MetricMatrices",
    "SetEstimates",
    "build_clusters",
    "compare_models",
    "comparison_markdown",
    "comparison_pairs",
    "metric_matrices",
    "model_intervals",
    "percentile_interval",
    "replicate_weights",
    "replicate_weights_table",
    "set_estimates",
    "set_intervals",
    "weights_from_table",
    "weights_metadata",
]
assert sorted(__all__) == sorted(_SOURCES)

if TYPE_CHECKING:
    from dualcog.stats.bootstrap import (
        BootstrapSettings,
        model_intervals,
        percentile_interval,
    )
    from dualcog.stats.clusters import (
        Clusters,
        build_clusters,
        replicate_weights,
        replicate_weights_table,
        weights_from_table,
        weights_metadata,
    )
    from dualcog.stats.compare import (
        COMPARISON,
        compare_models,
        comparison_markdown,
    )
    from dualcog.stats.estimands import MetricMatrices, metric_matrices
    from dualcog.stats.pairs import comparison_pairs
    from dualcog.stats.repeat_sets import SetEstimates, set_estimates, set_intervals
    from dualcog.stats.schema import CONFIDENCE_INTERVALS, REPLICATE_WEIGHTS


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_SOURCES[name]), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_SOURCES])
