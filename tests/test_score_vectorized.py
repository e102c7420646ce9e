"""The vectorized video scorers against the plain per-answer rule, on random cases.

Interval values sit on a coarse grid so that tIoU ties (the greedy tie-breaking) are common;
intervals may be malformed, reversed, out of range or of unknown duration; option ids may
repeat, lack an option or a level. Every score column must be identical, floats bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from score_fixtures import parsed_frame, samples_frame

from dualcog.schemas import PARSED, SAMPLES
from dualcog.scoring import SCORES, score_samples, score_tables
from dualcog.scoring.interval_batch import (
    GroupedIntervals,
    greedy_pairs,
    match_groups,
    sequential_sums,
)
from dualcog.scoring.intervals import F1_THRESHOLD, greedy_match, match_classes
from dualcog.scoring.score import _scored, as_table, row_index, scorer_rows
from dualcog.scoring.video import (
    EVIDENCE_F1,
    TASK_OF_LEVEL,
    score_behavior_answer,
    score_behavior_rows,
    score_visibility_answer,
    score_visibility_rows,
)
from dualcog.tasks import REQUEST_BY_TASK

IDS = ("A", "B", "C", "D")
LEVELS = ("composite", "atomic", None, "other")
GRID = st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 10.5, 11.5, math.nan])
interval = st.one_of(
    st.lists(GRID, min_size=2, max_size=2).map(sorted),
    st.lists(GRID, min_size=2, max_size=2),  # may be reversed
    st.lists(GRID, min_size=1, max_size=3),  # may be malformed
)
intervals = st.lists(interval, max_size=4)
durations = st.sampled_from([10.0, 5.0, None])


@st.composite
def behavior_case(draw, index: int):
    option = st.fixed_dictionaries(
        {"option_id": st.sampled_from(IDS), "label": st.just("x"), "level": st.sampled_from(LEVELS)}
    )
    options = draw(st.lists(option, max_size=4))
    gold = [
        {
            "option_id": draw(st.sampled_from(IDS)),
            "label": "x",
            "level": draw(st.sampled_from(LEVELS)),
            "intervals": draw(intervals),
        }
        for _ in range(draw(st.integers(0, 3)))
    ]
    sample = {
        "sample_id": f"b{index}",
        "task": "behavior",
        "difficulty": "easy",
        "options": options,
        "gold_items": gold,
        "duration_sec": draw(durations),
        "composite_mission": draw(st.sampled_from([True, False, None])),
    }
    kind = draw(st.sampled_from(["answer", "answer", "invalid", "missing", "absent"]))
    answers = [
        {"option_id": draw(st.sampled_from(IDS)), "intervals": draw(intervals)}
        for _ in range(draw(st.integers(0, 4)))
    ]
    parsed = None
    if kind != "absent":
        parsed = {
            "sample_id": f"b{index}",
            "task": "behavior",
            "parse": "strict",
            "stage": "missing" if kind == "missing" else "strict",
            "all_valid": kind == "answer",
            "answers": answers if kind == "answer" else None,
            "answers_valid": kind == "answer",
        }
    return sample, parsed


@st.composite
def visibility_case(draw, index: int):
    sample = {
        "sample_id": f"v{index}",
        "task": "landmark_visibility",
        "difficulty": "hard",
        "duration_sec": draw(durations),
        "gold_visible_count": draw(st.sampled_from([0, 1, 2, None])),
        "gold_visible_intervals": draw(intervals),
    }
    count_valid = draw(st.booleans())
    intervals_valid = draw(st.booleans())
    parsed = {
        "sample_id": f"v{index}",
        "task": "landmark_visibility",
        "parse": "strict",
        "stage": draw(st.sampled_from(["strict", "missing"])),
        "all_valid": count_valid and intervals_valid,
        "visible_count": draw(st.integers(0, 2)) if count_valid else None,
        "count_valid": count_valid,
        "visible_intervals": draw(intervals) if intervals_valid else None,
        "intervals_valid": intervals_valid,
    }
    return sample, parsed


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _interval_fields(counts) -> dict:
    return {
        "interval_tp": counts.tp,
        "interval_fp": counts.fp,
        "interval_fn": counts.fn,
        "tiou_sum": counts.tiou_sum,
        "n_gold_intervals": counts.n_gold,
        "sample_f1_50": counts.sample_f1,
    }


def _plain_behavior(sample: dict, parsed: dict | None) -> list[dict]:
    responded = parsed is not None and parsed["stage"] != "missing"
    valid = responded and bool(parsed["answers_valid"])
    levels = score_behavior_answer(
        sample["options"],
        sample["gold_items"],
        parsed["answers"] if valid else None,
        sample["duration_sec"],
    )
    rows = []
    for level, score in levels.items():
        set_exact = valid and score.set_exact
        mission = sample["composite_mission"]
        rows.append(
            {
                "task": TASK_OF_LEVEL[level],
                "set_exact": set_exact,
                "composite_set_correct": (set_exact if level == "composite" and mission else None),
                "label_tp": score.label_tp,
                "label_fp": score.label_fp,
                "label_fn": score.label_fn,
                **_interval_fields(score.intervals),
                "evidence_ok": valid and score.intervals.sample_f1 >= EVIDENCE_F1,
            }
        )
    return rows


def _plain_visibility(sample: dict, parsed: dict) -> dict:
    responded = parsed["stage"] != "missing"
    intervals_ok = responded and parsed["intervals_valid"]
    count_ok = responded and parsed["count_valid"]
    counts = score_visibility_answer(
        sample["gold_visible_intervals"],
        parsed["visible_intervals"] if intervals_ok else None,
        sample["duration_sec"],
    )
    gold_count = sample["gold_visible_count"]
    count_correct = bool(
        count_ok and gold_count is not None and parsed["visible_count"] == gold_count
    )
    return {
        "count_correct": count_correct,
        **_interval_fields(counts),
        "evidence_ok": intervals_ok and counts.sample_f1 >= EVIDENCE_F1,
    }


def _check(row, expected: dict) -> None:
    for name, value in expected.items():
        got = row[name]
        got = None if pd.isna(got) else (got.item() if hasattr(got, "item") else got)
        assert _same(got, value), (name, got, value)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(), min_size=1, max_size=12).flatmap(
    lambda seeds: st.tuples(*(behavior_case(i) for i in range(len(seeds))))))  # fmt: skip
def test_behavior_rows_match_the_plain_rule(cases) -> None:
    samples = samples_frame([s for s, _ in cases])
    parsed = parsed_frame([p for _, p in cases if p is not None])
    scores = score_samples(samples, parsed, parses=("strict",))
    assert len(scores) == 2 * len(cases)
    # Through Parquet-like round trips, as the plain rule sees rows in the workflow.
    for i, (sample, parsed_row) in enumerate(cases):
        sample_row = samples.iloc[i]
        plain_sample = {
            "options": sample_row["options"],
            "gold_items": sample_row["gold_items"],
            "duration_sec": None if sample["duration_sec"] is None else sample["duration_sec"],
            "composite_mission": sample["composite_mission"],
        }
        plain_parsed = None
        if parsed_row is not None:
            parsed_match = parsed[parsed["sample_id"] == sample["sample_id"]].iloc[0]
            plain_parsed = {
                "stage": parsed_match["stage"],
                "answers_valid": parsed_match["answers_valid"],
                "answers": parsed_match["answers"],
            }
        for level_row, expected in zip(
            (2 * i, 2 * i + 1), _plain_behavior(plain_sample, plain_parsed), strict=True
        ):
            _check(scores.iloc[level_row], expected)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(), min_size=1, max_size=12).flatmap(
    lambda seeds: st.tuples(*(visibility_case(i) for i in range(len(seeds))))))  # fmt: skip
def test_visibility_rows_match_the_plain_rule(cases) -> None:
    samples = samples_frame([s for s, _ in cases])
    parsed = parsed_frame([p for _, p in cases])
    scores = score_samples(samples, parsed, parses=("strict",))
    for i, (sample, parsed_row) in enumerate(cases):
        plain_sample = {
            **sample,
            "gold_visible_intervals": samples.iloc[i]["gold_visible_intervals"],
        }
        plain_parsed = {**parsed_row, "visible_intervals": parsed.iloc[i]["visible_intervals"]}
        _check(scores.iloc[i], _plain_visibility(plain_sample, plain_parsed))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(GRID, GRID), max_size=6),
    st.lists(st.tuples(GRID, GRID), max_size=6),
)
def test_batch_greedy_equals_sequential_greedy(gold, pred) -> None:
    gold_arr = np.asarray(gold, float).reshape(-1, 2)
    pred_arr = np.asarray(pred, float).reshape(-1, 2)
    zeros_g, zeros_p = np.zeros(len(gold_arr), np.int64), np.zeros(len(pred_arr), np.int64)
    result = match_groups(
        GroupedIntervals(zeros_g, gold_arr[:, 0], gold_arr[:, 1]),
        GroupedIntervals(zeros_p, pred_arr[:, 0], pred_arr[:, 1]),
        1,
    )
    assert result.tp[0] == len(greedy_match(gold_arr, pred_arr, F1_THRESHOLD, strict=False))
    plain = match_classes({"c": gold_arr}, {"c": pred_arr})
    assert result.tiou_sum[0] == plain.tiou_sum  # bit for bit
    assert len(greedy_pairs(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), 0, 0)) == 0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([0.25, 0.5, 0.75, 1.0])),
        max_size=16,
        unique_by=lambda t: (t[0], t[1]),
    )
)
def test_batch_greedy_takes_the_sequential_pairs_and_tie_breaks(pairs) -> None:
    """Which pairs are taken (not only how many): ties go to the lower gold, then pred index."""
    ordered = sorted(pairs, key=lambda t: (-t[2], t[0], t[1]))
    used_gold, used_pred, expected = set(), set(), []
    for g, p, _ in ordered:
        if g not in used_gold and p not in used_pred:
            used_gold.add(g)
            used_pred.add(p)
            expected.append((g, p))
    gi = np.asarray([t[0] for t in pairs], np.int64)
    pi = np.asarray([t[1] for t in pairs], np.int64)
    value = np.asarray([t[2] for t in pairs], float)
    taken = greedy_pairs(gi, pi, value, 4, 4)
    assert [(int(gi[k]), int(pi[k])) for k in taken] == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([0.0, 0.1, 0.2, 0.3, 1 / 3, 0.7, 1e-17])),
        max_size=40,
    ),
    st.booleans(),
)
def test_sequential_sums_are_pythons_sums(items, descending) -> None:
    """Per group, Python's sum in the given order (or largest first), bit for bit."""
    group = np.asarray([g for g, _ in items], np.int64)
    values = np.asarray([v for _, v in items], float)
    expected = []
    for g in range(6):
        mine = [v for h, v in items if h == g]
        expected.append(sum(sorted(mine, reverse=True) if descending else mine))
    assert sequential_sums(values, group, 6, descending=descending).tolist() == expected


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(), min_size=1, max_size=8).flatmap(
        lambda seeds: st.tuples(*(behavior_case(i) for i in range(len(seeds))))
    ),
    st.lists(st.integers(), min_size=1, max_size=8).flatmap(
        lambda seeds: st.tuples(*(visibility_case(i) for i in range(len(seeds))))
    ),
)
def test_joined_row_scorers_equal_score_tables(behavior, visibility) -> None:
    """`score_*_rows` on rows joined beforehand give score_tables' numbers."""
    cases = [*behavior, *visibility]
    samples = as_table(samples_frame([s for s, _ in cases]), SAMPLES)
    parsed = as_table(parsed_frame([p for _, p in cases if p is not None]), PARSED)
    index = row_index(samples, parsed, ("strict",))
    table = score_tables(samples, parsed, ("strict",))
    got = []
    for kind, scorer in (("behavior", score_behavior_rows),
                         ("landmark_visibility", score_visibility_rows)):  # fmt: skip
        at = np.flatnonzero(index.task == list(REQUEST_BY_TASK).index(kind))
        columns = scorer(scorer_rows(samples, parsed, index, at, kind))
        got.append(_scored(columns, (2 if kind == "behavior" else 1) * len(at)))
    joined = pa.concat_tables(got)
    for name in SCORES.names:
        assert joined[name].to_pylist() == table[name].to_pylist(), name
