"""Scoring and metrics of docs/protocol.md §4–§7 and §9.

`score_samples` turns one model run's parsed responses into per-sample score rows
(schema `SCORES`); `model_metrics` aggregates them into `schemas.METRICS` rows.
"""

from dualcog.scoring.aggregate import model_metrics, task_metrics
from dualcog.scoring.dual import dual_metrics, dual_pairs, pairs_for_tasks
from dualcog.scoring.geometry import box_iou, boxes_to_array
from dualcog.scoring.intervals import f1_score, greedy_match, match_classes, tiou
from dualcog.scoring.schema import PAIRS, SCORES, scores_table
from dualcog.scoring.score import score_samples, score_tables, scores_frame

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
