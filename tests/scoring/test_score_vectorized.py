"""The vectorized video scorers (`score_samples`) against the plain per-answer rule.

Interval values sit on a coarse grid so that tIoU ties (the greedy tie-breaking) are common;
intervals may be malformed, reversed, out of range or of unknown duration; option ids may
repeat, lack an option or a level, be one letter (their own codes) or longer (a dictionary).
Every score column must be identical, floats bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from score_fixtures import (
    behavior_parsed,
    behavior_sample,
    parsed_table,
    samples_table,
    visibility_parsed,
    visibility_sample,
)

from dualcog.schemas import PARSED, SAMPLES, to_table
from dualcog.scoring import SCORES, interval_batch, score_samples
from dualcog.scoring.interval_batch import (
    GroupedIntervals,
    greedy_pairs,
    match_groups,
    sequential_sums,
)
from dualcog.scoring.intervals import (
    F1_THRESHOLD,
    greedy_match,
    left_to_right_sum,
    match_classes,
    tiou,
)
from dualcog.scoring.score import _scored, row_index, scorer_rows
from dualcog.scoring.video import (
    EVIDENCE_F1,
    TASK_OF_LEVEL,
    score_behavior_answer,
    score_behavior_rows,
    score_visibility_answer,
    score_visibility_rows,
)
from dualcog.tasks import REQUEST_BY_TASK

IDS = ("A", "B", "C", "DD")  # "DD": rows holding it take the dictionary codes
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


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as score_samples reads them: typed Arrow, a NaN in a list a null (as through
    pandas into Parquet)."""
    full = [{name: row.get(name) for name in schema.names} for row in rows]
    return to_table(pd.DataFrame(full, columns=schema.names, dtype=object), schema)


def _round_trip(rows: list[dict], schema: pa.Schema) -> tuple[pa.Table, pd.DataFrame]:
    """_table, and the rows as the plain rule reads them back (pandas: numpy arrays, NaN)."""
    table = _table(rows, schema)
    return table, table.to_pandas()


# Random tables of 1 to 24 rows (uniformly many: a list strategy keeps most lists short):
# fewer, larger tables than one per few rows (a table's conversions cost more than its rows),
# some hundreds of cases in all, rows of many kinds side by side in each batch scored.
@settings(max_examples=30, deadline=None)
@given(st.integers(1, 24).flatmap(
    lambda n: st.tuples(*(behavior_case(i) for i in range(n)))))  # fmt: skip
def test_behavior_rows_match_the_plain_rule(cases) -> None:
    samples_t, samples = _round_trip([s for s, _ in cases], SAMPLES)
    parsed_t, parsed = _round_trip([p for _, p in cases if p is not None], PARSED)
    scores = score_samples(samples_t, parsed_t, ("strict",)).to_pylist()
    assert len(scores) == 2 * len(cases)
    parsed_at = {sample_id: i for i, sample_id in enumerate(parsed["sample_id"])}
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
            parsed_match = parsed.iloc[parsed_at[sample["sample_id"]]]
            plain_parsed = {
                "stage": parsed_match["stage"],
                "answers_valid": parsed_match["answers_valid"],
                "answers": parsed_match["answers"],
            }
        for level_row, expected in zip(
            (2 * i, 2 * i + 1), _plain_behavior(plain_sample, plain_parsed), strict=True
        ):
            _check(scores[level_row], expected)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 24).flatmap(
    lambda n: st.tuples(*(visibility_case(i) for i in range(n)))))  # fmt: skip
def test_visibility_rows_match_the_plain_rule(cases) -> None:
    samples_t, samples = _round_trip([s for s, _ in cases], SAMPLES)
    parsed_t, parsed = _round_trip([p for _, p in cases], PARSED)
    scores = score_samples(samples_t, parsed_t, ("strict",)).to_pylist()
    assert len(scores) == len(cases)
    for i, (sample, parsed_row) in enumerate(cases):
        plain_sample = {
            **sample,
            "gold_visible_intervals": samples["gold_visible_intervals"].iat[i],
        }
        plain_parsed = {**parsed_row, "visible_intervals": parsed["visible_intervals"].iat[i]}
        _check(scores[i], _plain_visibility(plain_sample, plain_parsed))


def _visibility_scores(cases: list[tuple[list, list | None]], duration=10.0) -> pd.DataFrame:
    """score_samples of one visibility sample per (gold, predicted intervals) case."""
    samples = samples_table(
        [visibility_sample(f"v{i}", 0, gold, duration) for i, (gold, _) in enumerate(cases)]
    )
    parsed = parsed_table(
        [visibility_parsed(f"v{i}", 0, pred) for i, (_, pred) in enumerate(cases)]
    )
    return score_samples(samples, parsed, parses=("strict",)).to_pandas()


one_class = st.lists(st.tuples(GRID, GRID).map(list), max_size=8)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12).flatmap(
    lambda n: st.lists(st.tuples(one_class, one_class), min_size=n, max_size=n)))  # fmt: skip
def test_one_class_of_many_intervals_matches_the_plain_rule(cases) -> None:
    """Classes of up to 64 pairs: the kernel's small (insertion) and large (merge) sorts."""
    samples_t = _table(
        [visibility_sample(f"v{i}", 0, gold, 10.0) for i, (gold, _) in enumerate(cases)], SAMPLES
    )
    parsed_t = _table(
        [visibility_parsed(f"v{i}", 0, pred) for i, (_, pred) in enumerate(cases)], PARSED
    )
    scores = score_samples(samples_t, parsed_t, ("strict",)).to_pylist()
    for i, (gold, pred) in enumerate(cases):
        plain = score_visibility_answer(gold, pred, 10.0)
        row = scores[i]
        assert row["interval_tp"] == plain.tp and row["interval_fp"] == plain.fp
        assert row["n_gold_intervals"] == plain.n_gold
        assert row["tiou_sum"] == plain.tiou_sum  # bit for bit


def test_many_overlapping_pairs_in_one_class() -> None:
    """36 pairs with tIoU > 0 and many ties: the merge sort keeps the (gold, pred) order."""
    gold = [[float(k), float(k + 3)] for k in range(6)]
    pred = [[float(k) + 0.5, float(k + 3) + 0.5] for k in range(6)]
    plain = score_visibility_answer(gold, pred, None)
    row = _visibility_scores([(gold, pred)], duration=None).iloc[0]
    assert row["interval_tp"] == plain.tp == 6
    assert row["tiou_sum"] == plain.tiou_sum
    # 9 copies of the first case of `test_ties_go_to_the_lower_gold...` side by side in one
    # class: 27 pairs, all of tIoU 1/3, where only the (gold, pred) order takes 2 per copy.
    gold = [[10.0 * k + a, 10.0 * k + a + 2] for k in range(9) for a in (0, 2)]
    pred = [[10.0 * k + a, 10.0 * k + a + 2] for k in range(9) for a in (3, 1)]
    expected = 0.0
    for _ in range(18):
        expected += 1 / 3
    assert score_visibility_answer(gold, pred, None).tiou_sum == expected
    assert _visibility_scores([(gold, pred)], duration=None).iloc[0]["tiou_sum"] == expected


def test_ties_go_to_the_lower_gold_then_the_lower_predicted_index() -> None:
    third = 1 / 3  # every pair below: inter 1, union 3
    # Gold [0,2] and [2,4] tie for pred [1,3]; [2,4] also ties with [3,5]. Lower gold first:
    # [0,2]-[1,3], then [2,4]-[3,5]; taking [2,4]-[1,3] first would leave one match.
    lower_gold = ([[0.0, 2.0], [2.0, 4.0]], [[3.0, 5.0], [1.0, 3.0]])
    # Preds [2,4] and [0,2] tie for gold [1,3]; [2,4] also ties with gold [3,5]. Lower pred
    # first: [1,3]-[2,4], which leaves [3,5] and [0,2] unmatched.
    lower_pred = ([[1.0, 3.0], [3.0, 5.0]], [[2.0, 4.0], [0.0, 2.0]])
    scores = _visibility_scores([lower_gold, lower_pred])
    assert scores.iloc[0]["tiou_sum"] == third + third
    assert scores.iloc[0]["interval_fn"] == 2
    assert scores.iloc[1]["tiou_sum"] == third
    for i in range(2):
        assert scores.iloc[i]["interval_tp"] == 0


def _behavior_scores(gold: list, answers: list, duration=10.0) -> pd.DataFrame:
    options = {"A": "atomic", "B": "atomic", "C": "composite", "E": "composite"}
    sample = behavior_sample("b", options, gold, composite_mission=True, duration=duration)
    parsed = behavior_parsed("b", answers)
    scores = score_samples(
        samples_table([sample]), parsed_table([parsed]), parses=("strict",)
    ).to_pandas()
    plain = score_behavior_answer(
        [{"option_id": k, "level": v} for k, v in options.items()],
        [{"option_id": k, "level": lv, "intervals": iv} for k, lv, iv in gold],
        [{"option_id": k, "intervals": iv} for k, iv in answers],
        duration,
    )
    for row, level in zip((0, 1), ("composite", "atomic"), strict=True):
        counts = plain[level].intervals
        assert scores.iloc[row]["interval_tp"] == counts.tp
        assert scores.iloc[row]["interval_fp"] == counts.fp
        assert scores.iloc[row]["n_gold_intervals"] == counts.n_gold
        assert scores.iloc[row]["tiou_sum"] == counts.tiou_sum  # bit for bit
        assert scores.iloc[row]["label_tp"] == plain[level].label_tp
        assert scores.iloc[row]["label_fp"] == plain[level].label_fp
        assert scores.iloc[row]["label_fn"] == plain[level].label_fn
    return scores


def test_repeated_items_merge_in_item_order_on_both_sides() -> None:
    """Gold A = [0,2] then (a later item) [2,4]; answers A = [3,5], then B, then A = [1,3]:
    the merged orders decide the ties as in `test_ties_go_to_the_lower_gold...`."""
    gold = [("A", "atomic", [[0, 2]]), ("B", "atomic", [[5, 6]]), ("A", "atomic", [[2, 4]])]
    answers = [("A", [[3, 5]]), ("B", [[5, 6]]), ("A", [[1, 3]])]
    scores = _behavior_scores(gold, answers)
    assert scores.iloc[1]["tiou_sum"] == (0.0 + (1 / 3 + 1 / 3)) + 1.0  # class A, then B


def test_tiou_sums_keep_the_plain_order_within_and_across_classes() -> None:
    """Float addition is not associative: per class in greedy order (tIoU descending) from 0,
    then class by class in gold order; other orders give other bits here."""
    # Gold [10 k, 10 k + 10] against pred [10 k, 10 k + 10 v]: tIoU about v, one pair each.
    values = (0.7, 0.2, 0.1)
    gold_a = [[10.0 * k, 10.0 * k + 10] for k in range(3)]
    pred_a = [[10.0 * k, 10.0 * k + 10 * v] for k, v in enumerate(values)]
    tious = [tiou(g, p) for g, p in zip(gold_a, pred_a, strict=True)]
    assert sum(sorted(tious)) != sum(sorted(tious, reverse=True))  # the order matters here
    gold = [("B", "atomic", [[40.0, 50.0]]), ("A", "atomic", gold_a)]
    answers = [("A", pred_a), ("B", [[40.0, 43.0]])]
    scores = _behavior_scores(gold, answers, duration=None)
    class_b = tiou([40.0, 50.0], [40.0, 43.0])
    assert scores.iloc[1]["tiou_sum"] == (0.0 + class_b) + sum(sorted(tious, reverse=True))


def test_rows_of_many_items_classes_and_intervals() -> None:
    """Rows of many items, classes and intervals, several items per class on both sides."""
    ids = [f"opt{k}" for k in range(12)]
    gold = [(ids[k % 12], "atomic" if k % 3 else "composite",
             [[float(k + j), float(k + j + 2)] for j in range(4)]) for k in range(30)]  # fmt: skip
    answers = [(ids[k % 12], [[float(k + j) + 0.5, float(k + j) + 2.0] for j in range(5)])
               for k in range(40)]  # fmt: skip
    scores = _behavior_scores(gold, answers, duration=None)
    assert scores["interval_tp"].sum() > 0


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
def test_sequential_sums_are_left_to_right_sums(items, descending) -> None:
    """Per group, the plain rule's sum in the given order (or largest first), bit for bit."""
    group = np.asarray([g for g, _ in items], np.int64)
    values = np.asarray([v for _, v in items], float)
    expected = []
    for g in range(6):
        mine = [v for h, v in items if h == g]
        expected.append(left_to_right_sum(sorted(mine, reverse=True) if descending else mine))
    assert sequential_sums(values, group, 6, descending=descending).tolist() == expected


def test_pair_block_size_changes_no_score(monkeypatch) -> None:
    """Candidate pairs are scored in cache-sized blocks: the block size changes no value."""
    gold = [("A", "atomic", [[0, 2], [2, 4], [5, 9]]), ("C", "composite", [[1, 6]])]
    answers = [("A", [[0, 3], [1, 4], [5, 8]]), ("C", [[2, 5], [0, 6]])]
    whole = _behavior_scores(gold, answers)
    monkeypatch.setattr(interval_batch, "_BLOCK", 3)
    blocked = _behavior_scores(gold, answers)
    assert whole["tiou_sum"].gt(0).all()  # not vacuous
    assert blocked.equals(whole)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(), min_size=1, max_size=8).flatmap(
        lambda seeds: st.tuples(*(behavior_case(i) for i in range(len(seeds))))
    ),
    st.lists(st.integers(), min_size=1, max_size=8).flatmap(
        lambda seeds: st.tuples(*(visibility_case(i) for i in range(len(seeds))))
    ),
)
def test_joined_row_scorers_equal_score_samples(behavior, visibility) -> None:
    """`score_*_rows` on rows joined beforehand give score_samples' numbers."""
    cases = [*behavior, *visibility]
    samples = _table([s for s, _ in cases], SAMPLES)
    parsed = _table([p for _, p in cases if p is not None], PARSED)
    index = row_index(samples, parsed, ("strict",))
    table = score_samples(samples, parsed, ("strict",))
    got = []
    for kind, scorer in (("behavior", score_behavior_rows),
                         ("landmark_visibility", score_visibility_rows)):  # fmt: skip
        at = np.flatnonzero(index.task == list(REQUEST_BY_TASK).index(kind))
        columns = scorer(scorer_rows(samples, parsed, index, at, kind))
        got.append(_scored(columns, (2 if kind == "behavior" else 1) * len(at)))
    joined = pa.concat_tables(got)
    for name in SCORES.names:
        assert joined[name].to_pylist() == table[name].to_pylist(), name


def _spanning_nulls(column: pa.ChunkedArray, junk: object) -> pa.Array:
    """The same list column with every null row spanning a `junk` item (Arrow allows it)."""
    rows = column.to_pylist()
    items, offsets = [], [0]
    for row in rows:
        items.extend([junk] if row is None else row)
        offsets.append(len(items))
    mask = pa.array([row is None for row in rows])
    values = pa.array(items, type=column.type.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=mask)


def test_null_rows_spanning_items_predict_and_hold_nothing() -> None:
    options = {"A": "atomic", "C": "composite"}
    samples = [
        behavior_sample("b0", options, [("A", "atomic", [[0, 4]])], True),
        behavior_sample("b1", options, [("A", "atomic", None), ("C", "composite", [[1, 2]])], True),
        {**behavior_sample("b2", options, [], False), "gold_items": None},
        visibility_sample("v0", 1, None),
        visibility_sample("v1", 1, [[0, 2]]),
    ]
    parsed = [
        {**behavior_parsed("b0", []), "answers": None},  # valid, yet no items
        behavior_parsed("b1", [("A", None), ("C", [[1, 2]])]),
        behavior_parsed("b2", [("A", [[0, 1]])]),
        visibility_parsed("v0", 1, [[0, 2]]),
        {**visibility_parsed("v1", 1, []), "visible_intervals": None},
    ]
    samples = samples_table(samples)
    parsed = parsed_table(parsed)
    expected = score_samples(samples, parsed, ("strict",))
    interval = [0.0, 60.0]
    spanning = {
        "gold_items": {"option_id": "A", "label": "x", "level": "atomic", "intervals": [interval]},
        "gold_visible_intervals": interval,
    }
    for name, junk in spanning.items():
        samples = samples.set_column(
            samples.schema.get_field_index(name), name, _spanning_nulls(samples[name], junk)
        )
    parsed_junk = {"answers": {"option_id": "A", "intervals": [interval]},
                   "visible_intervals": interval}  # fmt: skip
    for name, junk in parsed_junk.items():
        parsed = parsed.set_column(
            parsed.schema.get_field_index(name), name, _spanning_nulls(parsed[name], junk)
        )
    answers = parsed["answers"].combine_chunks()
    inner = answers.values.field("intervals")  # b1's ("A", None) spans nothing yet: make it so
    answers = pa.ListArray.from_arrays(
        answers.offsets,
        pa.StructArray.from_arrays(
            [answers.values.field("option_id"), _spanning_nulls(pa.chunked_array([inner]),
                                                                interval)],
            names=["option_id", "intervals"],
        ),
        mask=answers.is_null(),
    )  # fmt: skip
    parsed = parsed.set_column(parsed.schema.get_field_index("answers"), "answers", answers)
    assert (np.diff(parsed["visible_intervals"].combine_chunks().offsets.to_numpy()) > 0).all()
    got = score_samples(samples, parsed, ("strict",))
    assert got.equals(expected)
    assert sum(expected["interval_fp"].to_pylist()) > 0  # answers are scored at all
