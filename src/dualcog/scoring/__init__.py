"""Scoring and metrics of docs/protocol.md §4–§7 and §9.

`score_samples` turns one model run's parsed responses into per-sample score rows
(schema `SCORES`); `model_metrics` aggregates them into `schemas.METRICS` rows. Both work on
Arrow tables; a caller wanting pandas calls `.to_pandas()` on the result.
"""

import importlib

# Exports are loaded on first use (PEP 562): a job loads only the submodules it uses.
_EXPORTS = {
    "model_metrics": "aggregate",
    "task_metric_rows": "aggregate",
    "dual_metric_rows": "dual",
    "dual_pair_rows": "pairing",
    "dual_pairs": "pairing",
    "pairs_for_tasks": "dual",
    "box_iou": "geometry",
    "boxes_to_array": "geometry",
    "f1_score": "intervals",
    "greedy_match": "intervals",
    "match_classes": "intervals",
    "tiou": "intervals",
    "PAIRS": "schema",
    "SCORES": "schema",
    "SCORED_SAMPLE_COLUMNS": "score",
    "score_samples": "score",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = [
    "PAIRS",
    "SCORED_SAMPLE_COLUMNS",
    "SCORES",
    "box_iou",
    "boxes_to_array",
    "dual_metric_rows",
    "dual_pair_rows",
    "dual_pairs",
    "f1_score",
    "greedy_match",
    "match_classes",
    "model_metrics",
    "pairs_for_tasks",
    "score_samples",
    "task_metric_rows",
    "tiou",
]
