"""Video scoring through `score_samples` (docs/protocol.md §5 and its worked examples)."""

import pytest
from score_fixtures import (
    behavior_parsed,
    behavior_sample,
    missing_parsed,
    parsed_table,
    samples_table,
    visibility_parsed,
    visibility_sample,
)

from dualcog.scoring import score_samples

LEVELS = {"A": "atomic", "B": "atomic", "C": "atomic", "D": "atomic", "E": "composite",
          "F": "composite"}  # fmt: skip
SECTION8_GOLD = [("A", "atomic", [[0, 10]]), ("C", "atomic", [[10, 20]]),
                 ("E", "composite", [[0, 20]])]  # fmt: skip


def behavior_rows(sample, answers):
    scores = score_samples(
        samples_table([sample]), parsed_table([behavior_parsed("b", answers)])
    ).to_pandas()
    strict = scores[scores["parse"] == "strict"].set_index("task")
    return strict.loc["composite_behavior"], strict.loc["atomic_behavior"]


def visibility_row(sample, count, intervals):
    parsed = parsed_table([visibility_parsed("v", count, intervals)])
    scores = score_samples(samples_table([sample]), parsed).to_pandas()
    return scores[scores["parse"] == "strict"].iloc[0]


def composite_sample(**kwargs):
    return behavior_sample("b", LEVELS, SECTION8_GOLD, composite_mission=True, **kwargs)


def atomic_sample(**kwargs):
    gold = [("A", "atomic", [[0, 10]]), ("C", "atomic", [[10, 20]])]
    return behavior_sample("b", LEVELS, gold, composite_mission=False, **kwargs)


def test_section8_visibility_example():
    sample = visibility_sample("v", 2, [[0, 10], [20, 30]], duration=60.0)
    row = visibility_row(sample, 2, [[0, 9], [21, 30], [40, 41]])
    assert (row["interval_tp"], row["interval_fp"], row["interval_fn"]) == (2, 1, 0)
    assert row["sample_f1_50"] == pytest.approx(0.8)
    assert row["count_correct"]
    assert row["tiou_sum"] == pytest.approx(1.8) and row["n_gold_intervals"] == 2


def test_section8_behavior_example():
    composite, atomic = behavior_rows(
        composite_sample(), [("A", [[0, 10]]), ("B", [[10, 20]]), ("E", [[0, 19]])]
    )
    assert composite["composite_set_correct"] and composite["set_exact"]
    assert (composite["interval_tp"], composite["interval_fp"], composite["interval_fn"]) == (
        1, 0, 0,
    )  # fmt: skip
    assert composite["tiou_sum"] == pytest.approx(0.95)
    assert (atomic["label_tp"], atomic["label_fp"], atomic["label_fn"]) == (1, 1, 1)
    assert (atomic["interval_tp"], atomic["interval_fp"], atomic["interval_fn"]) == (1, 1, 1)
    assert atomic["sample_f1_50"] == pytest.approx(0.5) and not atomic["set_exact"]
    assert is_null(atomic["composite_set_correct"])


def is_null(value) -> bool:
    """An Arrow null as `to_pandas` gives it in a bool column with nulls."""
    return value is None


def test_empty_prediction_set():
    composite, atomic = behavior_rows(composite_sample(), [])
    assert not composite["composite_set_correct"]
    assert (atomic["label_tp"], atomic["label_fp"], atomic["label_fn"]) == (0, 0, 2)
    assert (atomic["interval_tp"], atomic["interval_fp"], atomic["interval_fn"]) == (0, 0, 2)
    assert atomic["sample_f1_50"] == 0.0


def test_atomic_mission_with_composite_claim():
    composite, atomic = behavior_rows(
        atomic_sample(), [("A", [[0, 10]]), ("C", [[10, 20]]), ("E", [[0, 20]])]
    )
    assert is_null(composite["composite_set_correct"])  # not a composite mission
    assert not composite["set_exact"] and not composite["semantic_ok"]
    assert (composite["interval_tp"], composite["interval_fp"], composite["interval_fn"]) == (
        0, 1, 0,
    )  # fmt: skip
    assert composite["sample_f1_50"] == 0.0 and not composite["evidence_ok"]
    assert atomic["set_exact"] and atomic["sample_f1_50"] == 1.0


def test_atomic_mission_without_composite_claim_has_composite_f1_one():
    composite, atomic = behavior_rows(atomic_sample(), [("A", [[0, 10]]), ("C", [[10, 20]])])
    assert composite["sample_f1_50"] == 1.0 and composite["set_exact"]
    assert composite["semantic_ok"] and composite["evidence_ok"]
    assert composite["n_gold_intervals"] == 0


def test_extra_classes_are_false_positives():
    _, atomic = behavior_rows(
        atomic_sample(), [("A", [[0, 10]]), ("C", [[10, 20]]), ("D", [[30, 40], [40, 50]])]
    )
    assert (atomic["label_tp"], atomic["label_fp"], atomic["label_fn"]) == (2, 1, 0)
    assert (atomic["interval_tp"], atomic["interval_fp"], atomic["interval_fn"]) == (2, 2, 0)


def test_duplicate_option_items_merge_into_one_class():
    gold = [("A", "atomic", [[0, 10], [20, 30]])]
    sample = behavior_sample("b", LEVELS, gold, composite_mission=False)
    # A appears twice: label once; intervals [0,10] then [20,30] both match
    _, atomic = behavior_rows(sample, [("A", [[0, 10]]), ("A", [[20, 30]])])
    assert (atomic["label_tp"], atomic["label_fp"], atomic["label_fn"]) == (1, 0, 0)
    assert (atomic["interval_tp"], atomic["interval_fp"], atomic["interval_fn"]) == (2, 0, 0)
    # a repeated identical interval: one matches, the other is an unmatched prediction
    _, atomic = behavior_rows(sample, [("A", [[0, 10]]), ("A", [[0, 10]])])
    assert (atomic["interval_tp"], atomic["interval_fp"], atomic["interval_fn"]) == (1, 1, 1)
    assert atomic["label_fp"] == 0


def test_interval_past_d_plus_one_is_a_false_positive():
    gold = [("A", "atomic", [[50, 60]])]
    sample = behavior_sample("b", LEVELS, gold, composite_mission=False, duration=60.0)
    _, atomic = behavior_rows(sample, [("A", [[50, 61.5]])])
    assert (atomic["interval_tp"], atomic["interval_fp"], atomic["interval_fn"]) == (0, 1, 1)
    assert atomic["tiou_sum"] == 0.0


def test_interval_between_d_and_d_plus_one_is_clipped():
    gold = [("A", "atomic", [[50, 60]])]
    sample = behavior_sample("b", LEVELS, gold, composite_mission=False, duration=60.0)
    _, atomic = behavior_rows(sample, [("A", [[50, 60.8]])])
    assert (atomic["interval_tp"], atomic["interval_fp"]) == (1, 0)
    assert atomic["tiou_sum"] == 1.0  # clipped to [50, 60]


def test_reversed_and_zero_length_predictions_are_false_positives():
    gold = [("A", "atomic", [[0, 10]])]
    sample = behavior_sample("b", LEVELS, gold, composite_mission=False)
    _, atomic = behavior_rows(sample, [("A", [[10, 0], [5, 5]])])
    assert (atomic["interval_tp"], atomic["interval_fp"], atomic["interval_fn"]) == (0, 2, 1)
    assert atomic["label_tp"] == 1  # the label itself is right


def test_zero_length_gold_is_never_matched():
    sample = visibility_sample("v", 1, [[5, 5]])
    row = visibility_row(sample, 1, [[4, 6]])
    assert (row["interval_tp"], row["interval_fp"], row["interval_fn"]) == (0, 1, 1)
    assert row["tiou_sum"] == 0.0 and row["n_gold_intervals"] == 1


def test_visibility_fields_are_judged_apart():
    sample = visibility_sample("v", 2, [[0, 10], [20, 30]])
    row = visibility_row(sample, None, [[0, 10], [20, 30]])  # count invalid
    assert not row["count_correct"] and row["sample_f1_50"] == 1.0 and row["evidence_ok"]
    row = visibility_row(sample, 2, None)  # intervals invalid: nothing predicted
    assert row["count_correct"] and row["interval_fn"] == 2 and not row["evidence_ok"]


def test_visibility_empty_gold_and_empty_prediction():
    row = visibility_row(visibility_sample("v", 0, []), 0, [])
    assert row["count_correct"] and row["sample_f1_50"] == 1.0 and row["n_gold_intervals"] == 0


def test_invalid_behavior_answer_fails_even_where_gold_level_is_empty():
    composite, atomic = behavior_rows(atomic_sample(), None)
    assert not composite["valid"] and not composite["set_exact"]
    assert not composite["semantic_ok"] and not composite["evidence_ok"]
    assert atomic["interval_fn"] == 2 and atomic["label_fn"] == 2


def test_missing_video_responses_and_parse_modes():
    samples = samples_table([composite_sample(), visibility_sample("v", 1, [[0, 5]])])
    parsed = parsed_table([missing_parsed("b", "behavior")])
    scores = score_samples(samples, parsed).to_pandas()
    assert set(scores["parse"]) == {"strict", "compatible"}  # no legacy for video
    assert len(scores) == 6  # (2 behavior levels + 1 visibility) x 2 modes
    assert not scores["responded"].any()
    vis = scores[scores["task"] == "landmark_visibility"]
    assert (vis["interval_fn"] == 1).all() and not vis["count_correct"].any()


@pytest.mark.parametrize(
    ("gold", "count", "correct"),
    [
        (2, 2**53 + 1, False),  # PROTOCOL §3 v2.3: valid, judged exactly, not via float64
        (2**53, 2**53 + 1, False),  # equal once rounded to float64, yet different counts
        (2**53 + 1, 2**53 + 1, True),
        (2, 10**16, False),
        (2, 2**63 - 1, False),  # the stored reading of 1e19 or 2**63
    ],
)
def test_counts_above_2_pow_53_compare_exactly(gold, count, correct):
    row = visibility_row(visibility_sample("v", gold, [[0, 10]]), count, [[0, 10]])
    assert bool(row["count_correct"]) is correct
