"""Scoring and metrics of docs/protocol.md §4–§7 and §9.

`score_samples` turns one model run's parsed responses into per-sample score rows
(schema `SCORES`); `model_metrics` aggregates them into `schemas.METRICS` rows.
"""

# Exports are loaded on first use (PEP 562): a job that needs one submodule (the explorer
# reads `intervals` and `video`, numpy and Arrow only) does not load pandas through `score`.
_EXPORTS = {
    "model_metrics": "aggregate",
    "task_metrics": "aggregate",
    "dual_metrics": "dual",
    "dual_pairs": "dual",
    "pairs_for_tasks": "dual",
    "box_iou": "geometry",
    "boxes_to_array": "geometry",
    "f1_score": "intervals",
    "greedy_match": "intervals",
    "match_classes": "intervals",
    "tiou": "intervals",
    "PAIRS": "schema",
    "SCORES": "schema",
    "scores_table": "schema",
    "score_samples": "score",
    "score_tables": "score",
    "scores_frame": "score",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = [
    "PAIRS",
    "SCORES",
    "box_iou",
    "boxes_to_array",
    "dual_metrics",
    "dual_pairs",
    "f1_score",
    "greedy_match",
    "match_classes",
    "model_metrics",
    "pairs_for_tasks",
    "score_samples",
    "score_tables",
    "scores_frame",
    "scores_table",
    "task_metrics",
    "tiou",
]
