"""Per-interval matches for display, built on the scoring code's own matching.

The scorer (`dualcog.scoring`) reports counts per sample; the explorer also needs which gold
interval matched which prediction. This module runs the scorer's own greedy walk
(`greedy_walk` over `_scored_pairs`: its tIoU values and tie order), keeping indices, and checks
every result against the scorer's `match_classes` counts, so what is drawn is what was scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dualcog.errors import DualCogError
from dualcog.scoring.intervals import (
    F1_THRESHOLD,
    IntervalCounts,
    _scored_pairs,
    clip_predicted,
    gold_array,
    greedy_walk,
    match_classes,
)
from dualcog.scoring.video import LEVELS, score_behavior_answer


class ExplorerError(DualCogError):
    """The explorer could not reproduce what the scorer reported."""


@dataclass
class ClassMatch:
    """One class (behavior option, or `visible`) of one sample: intervals and their pairing."""

    label: str
    gold: list[tuple[float, float]]
    pred: list[tuple[float, float]]  # valid predictions, clipped as scored
    invalid_pred: int = 0  # predictions that failed validation (false positives)
    matched: list[tuple[int, int, float]] = field(default_factory=list)  # (gold, pred, tIoU)
    overlap: dict[int, float] = field(default_factory=dict)  # gold -> tIoU under "> 0"

    @property
    def missed(self) -> list[int]:
        hit = {g for g, _, _ in self.matched}
        return [g for g in range(len(self.gold)) if g not in hit]

    @property
    def false_positive(self) -> list[int]:
        hit = {p for _, p, _ in self.matched}
        return [p for p in range(len(self.pred)) if p not in hit]


def _pairs(array: np.ndarray) -> list[tuple[float, float]]:
    return [(float(s), float(e)) for s, e in array]


def match_one_class(label: str, gold: np.ndarray, pred: np.ndarray, invalid: int) -> ClassMatch:
    match = ClassMatch(label, _pairs(gold), _pairs(pred), invalid)
    if len(gold) and len(pred):
        pairs = _scored_pairs(gold, pred)
        match.matched = greedy_walk(pairs, F1_THRESHOLD)
        match.overlap = {g: value for g, _, value in greedy_walk(pairs, 0.0)}
    return match


def _check(classes: Sequence[ClassMatch], expected: IntervalCounts, where: str) -> None:
    tp = sum(len(c.matched) for c in classes)
    tiou_sum = sum(sum(c.overlap.values()) for c in classes)
    if tp != expected.tp or not math.isclose(tiou_sum, expected.tiou_sum, abs_tol=1e-9):
        raise ExplorerError(
            f"{where}: explorer matching ({tp} matches, tIoU sum {tiou_sum:.6f}) differs from "
            f"the scorer's ({expected.tp}, {expected.tiou_sum:.6f})"
        )


def visibility_matches(
    gold_intervals: Sequence | None, intervals: Sequence | None, duration: float | None
) -> tuple[ClassMatch, IntervalCounts]:
    """Visibility segments as one class, checked against the scorer."""
    gold = gold_array(gold_intervals)
    pred, invalid = clip_predicted(intervals, duration)
    counts = match_classes({"visible": gold}, {"visible": pred}, invalid)
    match = match_one_class("visible", gold, pred, invalid)
    _check([match], counts, "visibility")
    return match, counts


def behavior_matches(
    options: Sequence | None,
    gold_items: Sequence | None,
    answers: Sequence | None,
    duration: float | None,
) -> dict[str, list[ClassMatch]]:
    """Per level (composite, atomic), one ClassMatch per option gold or predicted there.

    Levels and merged repeats follow `score_behavior_answer`, whose counts each level is
    checked against.
    """
    level_scores = score_behavior_answer(options, gold_items, answers, duration)
    option_level = dict(level_of_options(options))
    gold_by: dict[str, dict[str, list]] = {level: {} for level in LEVELS}
    for item in gold_items if gold_items is not None else ():
        level = item["level"] if item["level"] in LEVELS else "atomic"
        option_level.setdefault(item["option_id"], level)
        gold_by[level].setdefault(item["option_id"], []).extend(
            item["intervals"] if item["intervals"] is not None else ()
        )
    pred_by: dict[str, dict[str, list]] = {level: {} for level in LEVELS}
    for item in answers if answers is not None else ():
        level = option_level.get(item["option_id"])
        level = level if level in LEVELS else "atomic"
        pred_by[level].setdefault(item["option_id"], []).extend(
            item["intervals"] if item["intervals"] is not None else ()
        )
    out: dict[str, list[ClassMatch]] = {}
    for level in LEVELS:
        classes = []
        for label in list(gold_by[level]) + [k for k in pred_by[level] if k not in gold_by[level]]:
            gold = gold_array(gold_by[level].get(label))
            pred, invalid = clip_predicted(pred_by[level].get(label), duration)
            if label not in gold_by[level]:  # a class absent from gold: all false positives
                classes.append(ClassMatch(label, [], _pairs(pred), invalid))
            else:
                classes.append(match_one_class(label, gold, pred, invalid))
        _check(classes, level_scores[level].intervals, f"behavior {level} level")
        out[level] = classes
    return out


def level_of_options(options: Sequence | None) -> Mapping[str, str]:
    return {o["option_id"]: o["level"] for o in (options if options is not None else ())}
