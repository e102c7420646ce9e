"""Video task scoring (docs/protocol.md §5): behavior at two levels, and landmark visibility.

`score_behavior_answer` / `score_visibility_answer` score one answer with the plain rule;
`score_behavior_rows` / `score_visibility_rows` score whole Arrow tables of rows with the
same rule, compiled, on flat arrays (`interval_kernel`), giving identical numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.scoring.columns import (
    codes,
    dictionary_size,
    flags,
    interval_lists,
    list_offsets,
    single,
)
from dualcog.scoring.intervals import (
    DURATION_SLACK_SEC,
    F1_THRESHOLD,
    IntervalCounts,
    clip_predicted,
    gold_array,
    match_classes,
)
from dualcog.scoring.row_source import RowSource

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


def _limits(duration: np.ndarray) -> np.ndarray:
    """Upper bound of valid predicted times per row: the duration, or none when unknown."""
    return np.where(np.isfinite(duration), duration, np.inf)


@dataclass(frozen=True)
class _Items:
    """The items of a list column in place (`columns.list_offsets`): offsets of each row's
    items; per item, an option id code and whether it is composite; offsets of each item's
    intervals, of each interval's numbers, and the numbers (`columns.interval_lists`)."""

    offsets: np.ndarray
    code: np.ndarray
    composite: np.ndarray
    interval_offsets: np.ndarray
    number_offsets: np.ndarray
    numbers: np.ndarray


_NO_INTERVALS = (np.zeros(1, np.int32), np.zeros(1, np.int32), np.empty(0))


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only contiguous view: Arrow's buffers come read-only, and numba compiles the
    kernel for read-only and writable arrays apart (seconds each)."""
    view = np.ascontiguousarray(array).view()
    view.flags.writeable = False
    return view


def _interval_scores(
    source: RowSource,
    answered: np.ndarray,
    options: _Items,
    gold: _Items,
    answers: _Items,
    n_codes: int,
    levels: int,
) -> dict[str, np.ndarray]:
    """Interval and label columns of every row of `source` at each level (`levels` 2: row r
    at 2 r composite, 2 r + 1 atomic; 1: every item atomic, row r at r): options and gold
    items per sample, answer items per parsed row, used where `answered` holds; option id
    codes below `n_codes`."""
    # numba's import costs ~0.2 s: only the jobs that score video pay it, not every importer
    # of dualcog.scoring.
    from dualcog.scoring.interval_kernel import row_interval_scores

    arrays = (
        source.sample_at.astype(np.int64, copy=False),
        source.parsed_at.astype(np.int64, copy=False),
        answered,
        _limits(source.sample_floats("duration_sec")),
        options.offsets,
        options.code,
        options.composite,
        gold.offsets,
        gold.code,
        gold.composite,
        gold.interval_offsets,
        gold.number_offsets,
        gold.numbers,
        answers.offsets,
        answers.code,
        answers.interval_offsets,
        answers.number_offsets,
        answers.numbers,
    )
    columns = row_interval_scores(
        *(_read_only(a) for a in arrays),
        n_codes,
        levels,
        DURATION_SLACK_SEC,
        F1_THRESHOLD,
    )
    names = ("interval_tp", "interval_fp", "interval_fn", "tiou_sum", "n_gold_intervals",
             "sample_f1_50", "label_tp", "label_fp", "label_fn")  # fmt: skip
    return dict(zip(names, columns, strict=True))


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
    option_offsets, option_items = list_offsets(single(source.samples["options"]))
    gold_offsets, gold_items = list_offsets(single(source.samples["gold_items"]))
    answer_offsets, answer_items = list_offsets(single(source.parsed["answers"]))
    option_code, gold_code, answer_code = codes(
        option_items.field("option_id"),
        gold_items.field("option_id"),
        answer_items.field("option_id"),
    )
    counts = _interval_scores(
        source,
        valid,
        _Items(
            option_offsets,
            option_code,
            _is_composite(option_items.field("level")),
            *_NO_INTERVALS,
        ),
        _Items(
            gold_offsets,
            gold_code,
            _is_composite(gold_items.field("level")),
            *interval_lists(gold_items.field("intervals")),
        ),
        _Items(
            answer_offsets,
            answer_code,
            np.zeros(len(answer_code), bool),  # an answer's level is its option's
            *interval_lists(answer_items.field("intervals")),
        ),
        dictionary_size(option_code, gold_code, answer_code),
        levels=2,
    )
    label_tp, label_fp, label_fn = (counts.pop(k) for k in ("label_tp", "label_fp", "label_fn"))

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
    # One class per row, at the atomic level: one gold item per sample, one answer item per
    # parsed row, of one option id.
    n_samples, n_parsed = source.samples.num_rows, source.parsed.num_rows
    no_options = _Items(
        np.zeros(n_samples + 1, np.int32), np.empty(0, np.int64), np.empty(0, bool), *_NO_INTERVALS
    )
    gold = _Items(
        np.arange(n_samples + 1, dtype=np.int32),
        np.zeros(n_samples, np.int64),
        np.zeros(n_samples, bool),
        *interval_lists(single(source.samples["gold_visible_intervals"])),
    )
    answers = _Items(
        np.arange(n_parsed + 1, dtype=np.int32),
        np.zeros(n_parsed, np.int64),
        np.zeros(n_parsed, bool),
        *interval_lists(single(source.parsed["visible_intervals"])),
    )
    counts = _interval_scores(source, intervals_ok, no_options, gold, answers, 1, levels=1)
    for name in ("label_tp", "label_fp", "label_fn"):
        del counts[name]
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
