"""Scoring and metrics of docs/protocol.md §4–§7 and §9.

`score_tables` turns one model run's parsed responses into per-sample score rows
(schema `SCORES`); `model_metrics_table` aggregates them into `schemas.METRICS` rows. Both
work on Arrow tables (the `score` job never loads pandas); `score_samples` and
`model_metrics` are the same for pandas frames.
"""

# Exports are loaded on first use (PEP 562): a job loads only the submodules it uses.
_EXPORTS = {
    "model_metrics": "aggregate",
    "model_metrics_table": "aggregate",
    "task_metrics": "aggregate",
    "task_metric_rows": "aggregate",
    "dual_metric_rows": "dual",
    "dual_metrics": "dual",
    "dual_pair_rows": "pairing",
    "dual_pair_table": "pairing",
    "dual_pairs": "pairing",
    "pair_table_for_tasks": "dual",
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
    "SCORED_SAMPLE_COLUMNS": "score",
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
    "SCORED_SAMPLE_COLUMNS",
    "SCORES",
    "box_iou",
    "boxes_to_array",
    "dual_metric_rows",
    "dual_metrics",
    "dual_pair_rows",
    "dual_pair_table",
    "dual_pairs",
    "f1_score",
    "greedy_match",
    "match_classes",
    "model_metrics",
    "model_metrics_table",
    "pair_table_for_tasks",
    "pairs_for_tasks",
    "score_samples",
    "score_tables",
    "scores_frame",
    "scores_table",
    "task_metric_rows",
    "task_metrics",
    "tiou",
]
