"""Per-interval matches for display, built on the scoring code's own matching.

The scorer (`dualcog.scoring`) reports counts per sample; the explorer also needs which gold
interval matched which prediction. This module runs the scorer's own greedy walk
(`greedy_walk`) over the scorer's pairs in its order (`scored_pairs`: `_scored_pairs`'s tIoU
values, computed with the same float operations on plain floats, and `gold_pairs`:
`gold_array` as a list, and the scorer's own `clipped_pairs`, since numpy's per-call cost on a
handful of intervals was most of a page's build; tests hold each equal to the scorer's), keeping
indices, and `check_scored` holds the result against the sample's row of the scores table
(matched, false positive and missed intervals, and the tIoU sum), so what is drawn is what was
scored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dualcog.errors import DualCogError
from dualcog.scoring.intervals import (
    F1_THRESHOLD,
    IntervalCounts,
    _pair,
    clipped_pairs,
    greedy_walk,
    left_to_right_sum,
)
from dualcog.tasks import BEHAVIOR_LEVELS as LEVELS


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


def gold_pairs(intervals: Iterable | None) -> list[tuple[float, float]]:
    """`dualcog.scoring.intervals.gold_array` as a list of pairs: gold intervals as released;
    a malformed one stays, as (NaN, NaN), never matched."""
    out = []
    for value in intervals if intervals is not None else ():
        pair = _pair(value)
        out.append(pair if pair is not None else (math.nan, math.nan))
    return out


def scored_pairs(
    gold: Sequence[tuple[float, float]], pred: Sequence[tuple[float, float]]
) -> list[tuple[float, int, int]]:
    """`dualcog.scoring.intervals._scored_pairs` on plain floats: (tIoU, gold index, pred
    index) of every pair with tIoU > 0, tIoU descending, ties by lower gold then lower pred
    index. Each value is `tiou_matrix`'s, operation for operation: the overlap
    min(ge, pe) - max(gs, ps), the union (ge - gs) + (pe - ps) - overlap, their quotient; a
    gold interval holding NaN (malformed) has NaN there, which is never > 0."""
    pairs = []
    for g, (gs, ge) in enumerate(gold):
        if gs != gs or ge != ge:  # NaN
            continue
        for p, (ps, pe) in enumerate(pred):
            inter = (ge if ge < pe else pe) - (gs if gs > ps else ps)
            if inter > 0:
                union = (ge - gs) + (pe - ps) - inter
                if union > 0 and inter / union > 0:
                    pairs.append((inter / union, g, p))
    pairs.sort(key=lambda t: (-t[0], t[1], t[2]))
    return pairs


def match_one_class(
    label: str, gold: list[tuple[float, float]], pred: list[tuple[float, float]], invalid: int
) -> ClassMatch:
    match = ClassMatch(label, gold, pred, invalid)
    if gold and pred:
        pairs = scored_pairs(gold, pred)
        match.matched = greedy_walk(pairs, F1_THRESHOLD)
        match.overlap = {g: value for g, _, value in greedy_walk(pairs, 0.0)}
    return match


def class_counts(classes: Sequence[ClassMatch]) -> IntervalCounts:
    """The scorer's counts (`match_classes`) of one sample's classes, from their matches."""
    tp = n_gold = n_pred = 0
    tiou_sum = 0.0
    for c in classes:  # one pass over the classes, not four
        tp += len(c.matched)
        n_gold += len(c.gold)
        n_pred += len(c.pred) + c.invalid_pred
        tiou_sum += left_to_right_sum(c.overlap.values())
    return IntervalCounts(tp=tp, fp=n_pred - tp, fn=n_gold - tp, tiou_sum=tiou_sum, n_gold=n_gold)


SCORED_COUNTS = ("interval_tp", "interval_fp", "interval_fn", "tiou_sum")


def check_scored(classes: Sequence[ClassMatch], score: Mapping, where: str) -> None:
    """Raise unless the classes' counts are the scores table's (where it holds them): a
    stale scores table, or matching that drifted from the scorer's, never reaches a page."""
    counts = class_counts(classes)
    mine = (counts.tp, counts.fp, counts.fn, counts.tiou_sum)
    for name, value in zip(SCORED_COUNTS, mine, strict=True):
        scored = score.get(name)
        if scored is None or (isinstance(scored, float) and math.isnan(scored)):
            continue
        if not math.isclose(value, scored, rel_tol=0.0, abs_tol=1e-9):
            raise ExplorerError(
                f"{where}: the explorer's matching gives {name} {value:g}, the scores table "
                f"holds {scored:g} (stale scores? rerun the score step)"
            )


def visibility_matches(
    gold_intervals: Sequence | None, intervals: Sequence | None, duration: float | None
) -> tuple[ClassMatch, IntervalCounts]:
    """Visibility segments as one class, and its counts (check them with `check_scored`)."""
    gold = gold_pairs(gold_intervals)
    pred, invalid = clipped_pairs(intervals, duration)
    match = match_one_class("visible", gold, pred, invalid)
    return match, class_counts([match])


def behavior_matches(
    options: Sequence | None,
    gold_items: Sequence | None,
    answers: Sequence | None,
    duration: float | None,
) -> dict[str, list[ClassMatch]]:
    """Per level (composite, atomic), one ClassMatch per option gold or predicted there.

    Levels and merged repeats follow `score_behavior_answer`; `check_scored` holds each
    level against its row of the scores table.
    """
    return option_matches(dict(level_of_options(options)), gold_items, answers, duration)


def option_matches(
    option_level: dict[str, str],
    gold_items: Sequence | None,
    answers: Sequence | None,
    duration: float | None,
) -> dict[str, list[ClassMatch]]:
    """`behavior_matches` with the options given as each option's level (`level_of_options`;
    a dict of its own: options only gold items name are added to it)."""
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
            gold = gold_pairs(gold_by[level].get(label))
            pred, invalid = clipped_pairs(pred_by[level].get(label), duration)
            if label not in gold_by[level]:  # a class absent from gold: all false positives
                classes.append(ClassMatch(label, [], pred, invalid))
            else:
                classes.append(match_one_class(label, gold, pred, invalid))
        out[level] = classes
    return out


def level_of_options(options: Sequence | None) -> Mapping[str, str]:
    return {o["option_id"]: o["level"] for o in (options if options is not None else ())}
