"""Image scoring through `score_samples` (docs/protocol.md §4, §3.4 and their worked examples)."""

import numpy as np
import pytest
from score_fixtures import image_parsed, image_sample, missing_parsed, parsed_frame, samples_frame

from dualcog.schemas import PARSED, SAMPLES
from dualcog.scoring import SCORES, score_samples, score_tables, scores_table
from dualcog.scoring.image import score_image_rows
from dualcog.scoring.score import _scored, as_table, row_index, scorer_rows
from dualcog.tasks import PARSE_MODES

FO = "future_observation"
CANDIDATES = {"A": (0.2, 0.2, 0.6, 0.6), "B": (0.0, 0.0, 0.5, 0.5), "C": (0.5, 0.5, 0.9, 0.9)}


def one_row(sample, parsed_row):
    scores = score_samples(samples_frame([sample]), parsed_frame([parsed_row]))
    return scores[scores["parse"] == parsed_row["parse"]].iloc[0]


def test_section8_exact_answer_scores_option_and_iou_one():
    row = one_row(image_sample("s"), image_parsed("s", option_ids=["A"], bbox=[0.2, 0.2, 0.6, 0.6]))
    assert row["responded"] and row["valid"]
    assert row["option_correct"] and row["iou"] == 1.0 and row["bbox_hit"] and row["joint_correct"]


def test_section8_strict_box_out_of_range_is_invalid_option_still_correct():
    parsed = image_parsed("s", option_ids=["A"], bbox=[120, 80, 400, 300], bbox_valid=False)
    row = one_row(image_sample("s"), parsed)
    assert row["option_correct"]
    assert row["iou"] == 0.0 and not row["bbox_hit"] and not row["joint_correct"]
    assert not row["valid"]


def test_invalid_box_values_are_ignored_even_if_they_would_overlap():
    parsed = image_parsed("s", option_ids=["A"], bbox=[0.2, 0.2, 0.6, 0.6], bbox_valid=False)
    assert one_row(image_sample("s"), parsed)["iou"] == 0.0


def test_invalid_option_is_wrong_box_still_scored():
    parsed = image_parsed("s", option_ids=["A"], bbox=[0.2, 0.2, 0.6, 0.6], option_valid=False)
    row = one_row(image_sample("s"), parsed)
    assert not row["option_correct"] and row["iou"] == 1.0 and row["bbox_hit"]


def test_acc50_is_inclusive_at_exactly_half():
    sample = image_sample("s", gold_bbox=(0, 0, 0.5, 1))
    row = one_row(sample, image_parsed("s", option_ids=["B"], bbox=[0, 0, 1, 1]))
    assert row["iou"] == 0.5 and row["bbox_hit"] and not row["joint_correct"]


def test_section8_legacy_clamped_box_is_degenerate():
    # "I choose B. {...[200,100,600,500]}" -> option B, box clamped to [1,1,1,1]
    sample = image_sample("s", gold_option="B")
    row = one_row(sample, image_parsed("s", "legacy", option_ids=["B"], bbox=[1, 1, 1, 1]))
    assert row["option_correct"] and row["iou"] == 0.0


def test_legacy_option_needs_the_letter_set_to_be_exactly_gold():
    sample = image_sample("s", gold_option="B")
    two = one_row(sample, image_parsed("s", "legacy", option_ids=["B", "C"], bbox=None))
    one = one_row(sample, image_parsed("s", "legacy", option_ids=["B"], bbox=None))
    assert not two["option_correct"] and one["option_correct"]


def test_future_observation_box_judged_in_selected_candidate():
    sample = image_sample("s", task=FO, gold_option="A", candidates=CANDIDATES)
    # wrong option B, box equal to candidate B's box -> bbox hit, option wrong
    parsed = image_parsed("s", option_ids=["B"], bbox=[0, 0, 0.5, 0.5], task=FO)
    row = one_row(sample, parsed)
    assert not row["option_correct"] and row["iou"] == 1.0 and row["bbox_hit"]
    assert not row["joint_correct"]
    # the correct candidate's box does not count when B was selected
    parsed = image_parsed("s", option_ids=["B"], bbox=[0.2, 0.2, 0.6, 0.6], task=FO)
    assert one_row(sample, parsed)["iou"] == pytest.approx(0.09 / (0.16 + 0.25 - 0.09))


def test_future_observation_invalid_option_gives_iou_zero():
    sample = image_sample("s", task=FO, gold_option="A", candidates=CANDIDATES)
    parsed = image_parsed(
        "s", option_ids=None, bbox=[0.2, 0.2, 0.6, 0.6], task=FO, option_valid=False
    )
    assert one_row(sample, parsed)["iou"] == 0.0


def test_future_observation_legacy_uses_correct_candidate_box():
    sample = image_sample("s", task=FO, gold_option="A", candidates=CANDIDATES)
    parsed = image_parsed("s", "legacy", option_ids=["B"], bbox=[0.2, 0.2, 0.6, 0.6], task=FO)
    row = one_row(sample, parsed)
    assert row["iou"] == 1.0 and not row["option_correct"]


def test_missing_and_absent_responses_are_wrong_in_every_mode():
    samples = samples_frame([image_sample("s1"), image_sample("s2")])
    parsed = parsed_frame([missing_parsed("s1", "landmark_position")])
    scores = score_samples(samples, parsed)
    assert len(scores) == 6  # 2 samples x strict/compatible/legacy
    assert set(scores["parse"]) == {"strict", "compatible", "legacy"}
    assert not scores["responded"].any() and not scores["valid"].any()
    assert not scores["option_correct"].any() and (scores["iou"] == 0).all()


def test_scores_conform_to_arrow_schema():
    samples = samples_frame([image_sample("s")])
    parsed = parsed_frame([image_parsed("s", option_ids=["A"], bbox=[0.2, 0.2, 0.6, 0.6])])
    table = scores_table(score_samples(samples, parsed))
    assert table.schema.equals(SCORES)
    assert table.column("iou").null_count == 0
    assert table.column("interval_tp").null_count == 3


def test_parsed_rows_of_other_samples_are_ignored_and_duplicates_rejected():
    samples = samples_frame([image_sample("s")])
    extra = image_parsed("other", option_ids=["A"], bbox=None)
    assert len(score_samples(samples, parsed_frame([extra]))) == 3
    dup = image_parsed("s", option_ids=["A"], bbox=None)
    with pytest.raises(ValueError, match="several rows"):
        score_samples(samples, parsed_frame([dup, dup]))


@pytest.mark.parametrize("n_candidates", [3, 20])  # a few per sample, and many
def test_future_observation_box_of_the_first_candidate_with_the_selected_id(n_candidates):
    ids = [f"id{k}" for k in range(n_candidates - 1)] + ["id1"]  # id1 listed twice
    sample = image_sample("s", task=FO, gold_option="id1")
    sample["candidates"] = [
        {"option_id": o, "bbox": [0.0, 0.0, 0.1 + 0.01 * k, 0.5], "view": "front"}
        for k, o in enumerate(ids)
    ]
    other = image_sample("t", task=FO, gold_option="A", candidates=CANDIDATES)
    parsed = [
        image_parsed("s", task=FO, option_ids=["id1"], bbox=[0.0, 0.0, 0.11, 0.5]),
        image_parsed("t", task=FO, option_ids=["C"], bbox=[0.5, 0.5, 0.9, 0.9]),
    ]
    scores = score_samples(samples_frame([sample, other]), parsed_frame(parsed))
    strict = scores[scores["parse"] == "strict"].set_index("sample_id")
    assert strict.loc["s", "iou"] == 1.0  # the first id1 (k = 1), not the last one
    assert strict.loc["t", "iou"] == 1.0 and not strict.loc["t", "option_correct"]


def test_joined_row_scorer_equals_score_tables():
    """`score_image_rows` on rows joined beforehand gives score_tables' numbers."""
    samples = [
        image_sample("a"),
        image_sample("b", task=FO, gold_option="A", candidates=CANDIDATES),
        image_sample("c", gold_option="B"),
    ]
    samples[2]["gold_option_ids"] = ["B", "C"]  # legacy: the letter set must be {B, C}
    parsed = [
        image_parsed("a", option_ids=["A"], bbox=[0.2, 0.2, 0.5, 0.6]),
        image_parsed("b", option_ids=["C"], bbox=[0.5, 0.5, 0.8, 0.9], task=FO),
        image_parsed("b", "legacy", option_ids=["A"], bbox=[0.2, 0.2, 0.6, 0.6], task=FO),
        image_parsed("c", "legacy", option_ids=["C", "B"], bbox=None),
        missing_parsed("c", "landmark_position"),
    ]
    samples_t = as_table(samples_frame(samples), SAMPLES)
    parsed_t = as_table(parsed_frame(parsed), PARSED)
    table = score_tables(samples_t, parsed_t)
    index = row_index(samples_t, parsed_t, PARSE_MODES)
    rows = scorer_rows(samples_t, parsed_t, index, np.arange(len(index.sample)), "image")
    joined = _scored(score_image_rows(rows), rows.num_rows)
    for name in SCORES.names:
        assert joined[name].to_pylist() == table[name].to_pylist(), name
    legacy_c = [r for r in table.to_pylist() if (r["sample_id"], r["parse"]) == ("c", "legacy")]
    assert [r["option_correct"] for r in legacy_c] == [True]
