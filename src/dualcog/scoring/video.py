"""Video task scoring (PROTOCOL §5): behavior at two levels, and landmark visibility."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualcog.scoring.intervals import (
    IntervalCounts,
    clip_predicted,
    gold_array,
    match_classes,
)

LEVELS = ("composite", "atomic")
TASK_OF_LEVEL = {"composite": "composite_behavior", "atomic": "atomic_behavior"}
EVIDENCE_F1 = 0.5


@dataclass(frozen=True)
class LevelScore:
    """Outcome of one behavior answer at one level."""

    predicted_ids: frozenset[str]
    gold_ids: frozenset[str]
    intervals: IntervalCounts

    @property
    def label_tp(self) -> int:
        return len(self.predicted_ids & self.gold_ids)

    @property
    def label_fp(self) -> int:
        return len(self.predicted_ids - self.gold_ids)

    @property
    def label_fn(self) -> int:
        return len(self.gold_ids - self.predicted_ids)

    @property
    def set_exact(self) -> bool:
        return self.predicted_ids == self.gold_ids


def _items(value: Iterable | None) -> Iterable:
    return value if value is not None else ()


def _duration(value: object) -> float | None:
    if value is None:
        return None
    duration = float(value)  # type: ignore[arg-type]
    return None if math.isnan(duration) else duration


def score_behavior_answer(
    options: Sequence | None,
    gold_items: Sequence | None,
    answers: Sequence | None,
    duration: float | None,
) -> dict[str, LevelScore]:
    """Score one behavior answer (None = no valid answer: nothing predicted) at both levels.

    Predicted items take the level of their option (`options[].level`); gold items carry
    their own. Repeated items of one option act as one class: their intervals are merged in
    answer order and the label counts once.
    """
    option_level = {o["option_id"]: o["level"] for o in _items(options)}
    gold_by_level: dict[str, dict[str, list]] = {level: {} for level in LEVELS}
    for item in _items(gold_items):
        level = item["level"] if item["level"] in LEVELS else "atomic"
        option_level.setdefault(item["option_id"], level)
        gold_by_level[level].setdefault(item["option_id"], []).extend(_items(item["intervals"]))

    pred_by_level: dict[str, dict[str, list]] = {level: {} for level in LEVELS}
    for item in _items(answers):
        level = option_level.get(item["option_id"])
        level = level if level in LEVELS else "atomic"  # PROTOCOL §5: non-composite = atomic
        pred_by_level[level].setdefault(item["option_id"], []).extend(_items(item["intervals"]))

    scores = {}
    for level in LEVELS:
        gold = {k: gold_array(v) for k, v in gold_by_level[level].items()}
        pred = {}
        invalid = 0
        for label, intervals in pred_by_level[level].items():
            pred[label], bad = clip_predicted(intervals, duration)
            invalid += bad
        scores[level] = LevelScore(
            predicted_ids=frozenset(pred_by_level[level]),
            gold_ids=frozenset(gold_by_level[level]),
            intervals=match_classes(gold, pred, invalid),
        )
    return scores


def score_visibility_answer(
    gold_intervals: Sequence | None, intervals: Sequence | None, duration: float | None
) -> IntervalCounts:
    """Visibility segments: one class, same matching as behavior."""
    pred, invalid = clip_predicted(intervals, duration)
    return match_classes({"visible": gold_array(gold_intervals)}, {"visible": pred}, invalid)


def _interval_columns(counts: IntervalCounts) -> dict:
    return {
        "interval_tp": counts.tp,
        "interval_fp": counts.fp,
        "interval_fn": counts.fn,
        "tiou_sum": counts.tiou_sum,
        "n_gold_intervals": counts.n_gold,
        "sample_f1_50": counts.sample_f1,
    }


def score_behavior_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Two score rows (composite, atomic) per behavior (sample, parse) row.

    A missing response or an invalid answer predicts nothing (every gold item is missed) and
    its set at either level is not exact; its side of a dual pair fails.
    """
    out = []
    columns = [
        "sample_id", "parse", "difficulty", "responded", "all_valid", "answers_valid",
        "answers", "options", "gold_items", "duration_sec", "composite_mission",
    ]  # fmt: skip
    for (
        sid, parse, difficulty, responded, all_valid, answers_valid, answers, options, gold, d, cm,
    ) in rows[columns].itertuples(index=False, name=None):  # fmt: skip
        valid = bool(responded) and bool(answers_valid)
        levels = score_behavior_answer(options, gold, answers if valid else None, _duration(d))
        composite_mission = None if not _is_number(cm) else bool(cm)
        for level, score in levels.items():
            set_exact = valid and score.set_exact
            f1 = score.intervals.sample_f1
            out.append(
                {
                    "sample_id": sid,
                    "task": TASK_OF_LEVEL[level],
                    "request_task": "behavior",
                    "parse": parse,
                    "difficulty": difficulty,
                    "responded": bool(responded),
                    "valid": bool(responded) and bool(all_valid),
                    "composite_mission": composite_mission,
                    "set_exact": set_exact,
                    "composite_set_correct": (
                        set_exact if level == "composite" and composite_mission else None
                    ),
                    "label_tp": score.label_tp,
                    "label_fp": score.label_fp,
                    "label_fn": score.label_fn,
                    **_interval_columns(score.intervals),
                    "semantic_ok": set_exact,
                    "evidence_ok": valid and f1 >= EVIDENCE_F1,
                }
            )
    return pd.DataFrame(out)


def score_visibility_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """One score row per visibility (sample, parse) row; count and intervals judged apart."""
    out = []
    columns = [
        "sample_id", "parse", "difficulty", "responded", "all_valid", "count_valid",
        "visible_count", "intervals_valid", "visible_intervals", "gold_visible_count",
        "gold_visible_intervals", "duration_sec",
    ]  # fmt: skip
    for (
        sid, parse, difficulty, responded, all_valid, count_valid, count, intervals_valid,
        intervals, gold_count, gold_intervals, d,
    ) in rows[columns].itertuples(index=False, name=None):  # fmt: skip
        responded = bool(responded)
        count_ok = responded and bool(count_valid)
        intervals_ok = responded and bool(intervals_valid)
        counts = score_visibility_answer(
            gold_intervals, intervals if intervals_ok else None, _duration(d)
        )
        count_correct = bool(count_ok and _is_number(gold_count) and int(count) == int(gold_count))
        out.append(
            {
                "sample_id": sid,
                "task": "landmark_visibility",
                "request_task": "landmark_visibility",
                "parse": parse,
                "difficulty": difficulty,
                "responded": responded,
                "valid": responded and bool(all_valid),
                "count_correct": count_correct,
                **_interval_columns(counts),
                "semantic_ok": count_correct,
                "evidence_ok": intervals_ok and counts.sample_f1 >= EVIDENCE_F1,
            }
        )
    return pd.DataFrame(out)


def _is_number(value: object) -> bool:
    return (
        value is not None
        and value is not pd.NA
        and not (isinstance(value, float) and np.isnan(value))
    )
