"""Video task scoring (docs/protocol.md §5): behavior at two levels, and landmark visibility.

`score_behavior_answer` / `score_visibility_answer` score one answer with the plain rule;
`score_behavior_rows` / `score_visibility_rows` score whole Arrow tables of rows with the
same rule on flat arrays (`interval_batch`), giving identical numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.scoring.columns import codes, dictionary_size, flags, single
from dualcog.scoring.interval_batch import GroupedIntervals, match_groups, sequential_sums
from dualcog.scoring.intervals import (
    DURATION_SLACK_SEC,
    IntervalCounts,
    clip_predicted,
    gold_array,
    match_classes,
)
from dualcog.scoring.row_source import RowSource, interval_items
from dualcog.tasks import BEHAVIOR_LEVELS

LEVELS = BEHAVIOR_LEVELS
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
        level = (
            level if level in LEVELS else "atomic"
        )  # docs/protocol.md §5: non-composite = atomic
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


# -- scoring of many rows --------------------------------------------------------------------

COMPOSITE, ATOMIC = 0, 1  # level codes; a row's level group is 2 * row + level


def _limits(duration: np.ndarray) -> np.ndarray:
    """Upper bound of valid predicted times per row: the duration, or none when unknown."""
    return np.where(np.isfinite(duration), duration, np.inf)


def _predicted(
    intervals: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    item_group: np.ndarray,
    item_row: np.ndarray,
    limit: np.ndarray,
) -> tuple[GroupedIntervals, np.ndarray]:
    """Valid predicted intervals (item, start, end, well formed) clipped to [0, D] (as
    `clip_predicted`), grouped by their item's group, and the item of every invalid one."""
    item, start, end, pair = intervals
    bound = limit[item_row[item]]
    with np.errstate(invalid="ignore"):
        valid = (
            pair
            & np.isfinite(start)
            & np.isfinite(end)
            & (start >= 0)
            & (start < end)
            & (end <= bound + DURATION_SLACK_SEC)
        )
    clipped_end = np.minimum(end[valid], bound[valid])
    clipped_start = np.minimum(start[valid], bound[valid])
    kept = GroupedIntervals(item_group[item[valid]], clipped_start, clipped_end)
    return kept, item[~valid]


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    denominator = 2 * tp + fp + fn
    out = np.ones(len(tp))
    nonzero = denominator != 0
    out[nonzero] = 2 * tp[nonzero] / denominator[nonzero]
    return out


def _lookup(keys: np.ndarray, table_keys: np.ndarray) -> np.ndarray:
    """Position of each key in the sorted unique `table_keys`, or -1."""
    if len(table_keys) == 0:
        return np.full(len(keys), -1)
    at = np.searchsorted(table_keys, keys)
    at = np.minimum(at, len(table_keys) - 1)
    return np.where(table_keys[at] == keys, at, -1)


def _interval_counts(
    gold: GroupedIntervals,
    pred: GroupedIntervals,
    class_level_group: np.ndarray,
    n_pred_valid: np.ndarray,
    n_invalid: np.ndarray,
    n_level_groups: int,
) -> dict[str, np.ndarray]:
    """Interval columns per level group from class-grouped gold and predicted intervals."""
    n_classes = len(class_level_group)
    matched = match_groups(gold, pred, n_classes)
    tp = np.bincount(class_level_group, weights=matched.tp, minlength=n_level_groups)
    tp = tp.astype(np.int64)
    tiou_sum = sequential_sums(matched.tiou_sum, class_level_group, n_level_groups)
    n_gold = np.bincount(class_level_group[gold.group], minlength=n_level_groups)
    n_pred = n_pred_valid + n_invalid
    fp, fn = n_pred - tp, n_gold - tp
    return {
        "interval_tp": tp,
        "interval_fp": fp,
        "interval_fn": fn,
        "tiou_sum": tiou_sum,
        "n_gold_intervals": n_gold,
        "sample_f1_50": _f1(tp, fp, fn),
    }


def _row_columns(source: RowSource, repeat: int) -> dict[str, np.ndarray | pa.Array]:
    responded = source.responded
    columns = {
        "sample_id": source.sample_column("sample_id", repeat),
        "difficulty": source.sample_column("difficulty", repeat),
        "responded": responded,
        "valid": source.parsed_flag("all_valid"),
    }
    if repeat == 1:
        return {**columns, "parse": source.parse}
    index = pa.array(np.repeat(np.arange(len(source)), repeat))
    return {
        **{k: np.repeat(v, repeat) if isinstance(v, np.ndarray) else v for k, v in columns.items()},
        "parse": source.parse.take(index),
    }


def score_behavior_rows(rows: pa.Table) -> dict[str, np.ndarray | pa.Array]:
    """Two score rows (composite, then atomic) per behavior (sample, parse) row.

    `rows` holds sample_id, parse, difficulty, responded, all_valid, answers_valid, answers,
    options, gold_items, duration_sec, composite_mission (see `score_behavior`).
    """
    return score_behavior(RowSource.joined(rows))


def score_behavior(source: RowSource) -> dict[str, np.ndarray | pa.Array]:
    """Two score rows (composite, then atomic) per behavior row of `source`.

    Samples need sample_id, difficulty, options, gold_items, duration_sec,
    composite_mission; parsed rows all_valid, answers_valid, answers. A missing response or
    an invalid answer predicts nothing (every gold item is missed) and its set at either
    level is not exact; its side of a dual pair fails.
    """
    n = len(source)
    valid = source.parsed_flag("answers_valid")
    limit = _limits(source.sample_floats("duration_sec"))
    option_flat, option_row, option_item = source.sample_items("options")
    gold_flat, gold_row, gold_item = source.sample_items("gold_items")
    answer_flat, answer_row, answer_item = source.parsed_items("answers", valid)  # valid only
    option_code, gold_code, answer_code = codes(
        option_flat.field("option_id"), gold_flat.field("option_id"), answer_flat.field("option_id")
    )
    size = dictionary_size(option_code, gold_code, answer_code)
    option_code, gold_code = option_code[option_item], gold_code[gold_item]
    answer_code = answer_code[answer_item]

    # Level of each option id per row: the option's own (the last one listed), else the first
    # gold item's, else atomic (docs/protocol.md §5: whatever is not composite is atomic).
    option_key = option_row * size + option_code
    last = len(option_key) - 1 - np.unique(option_key[::-1], return_index=True)[1]
    option_keys = option_key[last]
    option_composite = _is_composite(option_flat.field("level"))[option_item[last]]
    gold_composite = _is_composite(gold_flat.field("level"))[gold_item]
    gold_level = np.where(gold_composite, COMPOSITE, ATOMIC)
    gold_key = gold_row * size + gold_code
    gold_keys, gold_first = np.unique(gold_key, return_index=True)
    answer_key = answer_row * size + answer_code
    in_options = _lookup(answer_key, option_keys)
    in_gold = _lookup(answer_key, gold_keys)
    answer_composite = np.zeros(len(answer_key), bool)
    from_options = in_options >= 0
    answer_composite[from_options] = option_composite[in_options[from_options]]
    from_gold = ~from_options & (in_gold >= 0)
    answer_composite[from_gold] = gold_composite[gold_first[in_gold[from_gold]]]
    answer_level = np.where(answer_composite, COMPOSITE, ATOMIC)

    # Classes: (row, level, option id) of gold items, numbered by level group, then first
    # appearance (the plain rule's dict order).
    n_groups = 2 * n
    gold_level_group = 2 * gold_row + gold_level
    class_key = gold_level_group * size + gold_code
    unique_keys, first = np.unique(class_key, return_index=True)
    order = np.lexsort((first, unique_keys // size))
    class_of_unique = np.empty(len(order), np.int64)
    class_of_unique[order] = np.arange(len(order))
    class_level_group = (unique_keys // size)[order]  # per class id
    gold_item_class = class_of_unique[np.searchsorted(unique_keys, class_key)]

    g_item, g_start, g_end, _ = interval_items(gold_flat.field("intervals"), gold_item)
    gold = GroupedIntervals(gold_item_class[g_item], g_start, g_end)
    answer_level_group = 2 * answer_row + answer_level
    found = _lookup(answer_level_group * size + answer_code, unique_keys)
    answer_class = np.full(len(found), -1, np.int64)
    answer_class[found >= 0] = class_of_unique[found[found >= 0]]
    answer_intervals = interval_items(answer_flat.field("intervals"), answer_item)
    p_item = answer_intervals[0]
    pred_all, invalid_items = _predicted(answer_intervals, answer_class, answer_row, limit)
    in_gold_class = pred_all.group >= 0
    pred = GroupedIntervals(
        pred_all.group[in_gold_class], pred_all.start[in_gold_class], pred_all.end[in_gold_class]
    )
    n_pred_items = np.bincount(answer_level_group[p_item], minlength=n_groups)
    n_invalid = np.bincount(answer_level_group[invalid_items], minlength=n_groups)
    counts = _interval_counts(
        gold, pred, class_level_group, n_pred_items - n_invalid, n_invalid, n_groups
    )

    # Labels: sets of option ids per level group.
    predicted = _sorted_unique(answer_level_group * size + answer_code)
    gold_set = unique_keys
    both = np.intersect1d(predicted, gold_set, assume_unique=True)
    n_pred_ids = np.bincount(predicted // size, minlength=n_groups)
    n_gold_ids = np.bincount(gold_set // size, minlength=n_groups)
    label_tp = np.bincount(both // size, minlength=n_groups)
    label_fp, label_fn = n_pred_ids - label_tp, n_gold_ids - label_tp

    valid2 = np.repeat(valid, 2)
    set_exact = valid2 & (label_fp == 0) & (label_fn == 0)
    mission = single(source.samples["composite_mission"])
    mission_known = np.asarray(mission.is_valid().to_numpy(zero_copy_only=False))
    mission_known = np.repeat(mission_known[source.sample_at], 2)
    mission_value = np.repeat(flags(mission)[source.sample_at], 2)
    is_composite_row = np.tile([True, False], n)
    composite_set = np.where(is_composite_row & mission_value, set_exact, False)
    return {
        **_row_columns(source, 2),
        "task": pa.array([TASK_OF_LEVEL[level] for level in LEVELS]).take(
            pa.array(np.tile(np.arange(2), n))
        ),
        "request_task": pa.repeat("behavior", 2 * n),
        "composite_mission": pa.array(mission_value, mask=~mission_known),
        "set_exact": set_exact,
        "composite_set_correct": pa.array(composite_set, mask=~(is_composite_row & mission_value)),
        "label_tp": label_tp,
        "label_fp": label_fp,
        "label_fn": label_fn,
        **counts,
        "semantic_ok": set_exact,
        "evidence_ok": valid2 & (counts["sample_f1_50"] >= EVIDENCE_F1),
    }


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique by sorting (numpy's hash-based unique is slower on these int keys)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


def _is_composite(levels: pa.Array) -> np.ndarray:
    return flags(pc.equal(levels.cast(pa.string()), "composite"))


def score_visibility_rows(rows: pa.Table) -> dict[str, np.ndarray | pa.Array]:
    """One score row per visibility (sample, parse) row; count and intervals judged apart.

    `rows` holds sample_id, parse, difficulty, responded, all_valid, count_valid,
    visible_count, intervals_valid, visible_intervals, gold_visible_count,
    gold_visible_intervals, duration_sec.
    """
    return score_visibility(RowSource.joined(rows))


def score_visibility(source: RowSource) -> dict[str, np.ndarray | pa.Array]:
    """One score row per visibility row of `source`: samples need sample_id, difficulty,
    gold_visible_count, gold_visible_intervals, duration_sec; parsed rows all_valid,
    count_valid, visible_count, intervals_valid, visible_intervals."""
    n = len(source)
    count_ok = source.parsed_flag("count_valid")
    intervals_ok = source.parsed_flag("intervals_valid")
    limit = _limits(source.sample_floats("duration_sec"))
    rows_index = np.arange(n)
    gold_intervals = single(source.samples["gold_visible_intervals"])
    g_row, g_start, g_end, _ = interval_items(gold_intervals, source.sample_at)
    gold = GroupedIntervals(g_row, g_start, g_end)
    answered = np.flatnonzero(intervals_ok)
    p_row, *p_rest = interval_items(
        single(source.parsed["visible_intervals"]), source.parsed_at[answered]
    )
    pred, invalid_rows = _predicted((answered[p_row], *p_rest), rows_index, rows_index, limit)
    counts = _interval_counts(
        gold,
        pred,
        rows_index,
        np.bincount(pred.group, minlength=n),
        np.bincount(invalid_rows, minlength=n),
        n,
    )
    count, count_present = source.parsed_counts("visible_count")
    gold_count, gold_present = source.sample_counts("gold_visible_count")
    count_correct = count_ok & count_present & gold_present & (count == gold_count)
    return {
        **_row_columns(source, 1),
        "task": pa.repeat("landmark_visibility", n),
        "request_task": pa.repeat("landmark_visibility", n),
        "count_correct": count_correct,
        **counts,
        "semantic_ok": count_correct,
        "evidence_ok": intervals_ok & (counts["sample_f1_50"] >= EVIDENCE_F1),
    }
