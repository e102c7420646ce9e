"""Metric aggregation, dual pairing and convenience aggregates (docs/protocol.md §4–§7, §9)."""

import pandas as pd
import pytest
from score_fixtures import (
    behavior_parsed,
    behavior_sample,
    image_parsed,
    image_sample,
    missing_parsed,
    parsed_table,
    samples_table,
    visibility_parsed,
    visibility_sample,
)

from dualcog.schemas import METRICS, to_table
from dualcog.scoring import dual_pairs, model_metrics, score_samples

LEVELS = {"A": "atomic", "B": "atomic", "C": "atomic", "E": "composite"}
GOOD_BOX = [0.2, 0.2, 0.6, 0.6]


def metrics_of(samples, parsed) -> pd.DataFrame:
    """METRICS rows of a run over every task of `samples`, as the `score` job computes them."""
    samples = samples_table(samples)
    tasks = samples["task"].unique().to_pylist()
    pairs, _ = dual_pairs(samples)
    scores = score_samples(samples, parsed_table(parsed))
    return model_metrics("m", tasks, scores, pairs).to_pandas()


def pairs_of(samples) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs of `samples`, and the unpaired counts, as frames."""
    pairs, unpaired = dual_pairs(samples_table(samples))
    return pairs.to_pandas(), pd.DataFrame(unpaired, columns=["family", "task", "unpaired"])


def value(metrics, task, metric, parse="strict", stratum="all"):
    row = metrics[
        (metrics["task"] == task)
        & (metrics["metric"] == metric)
        & (metrics["parse"] == parse)
        & (metrics["stratum"] == stratum)
    ]
    assert len(row) == 1, (task, metric, parse, stratum)
    return float(row["value"].iloc[0]), int(row["n"].iloc[0])


def has(metrics, task, metric, parse="strict", stratum="all") -> bool:
    return bool(
        (
            (metrics["task"] == task)
            & (metrics["metric"] == metric)
            & (metrics["parse"] == parse)
            & (metrics["stratum"] == stratum)
        ).any()
    )


def test_image_metrics_rates_and_strata():
    samples = [
        image_sample("a", difficulty="4way"),
        image_sample("b", difficulty="8way"),
        image_sample("c", difficulty="8way", gold_bbox=(0, 0, 0.5, 1)),
        image_sample("d", difficulty=None),
    ]
    parsed = [
        image_parsed("a", option_ids=["A"], bbox=GOOD_BOX),
        image_parsed("b", option_ids=["B"], bbox=None, bbox_valid=False),
        image_parsed("c", option_ids=["A"], bbox=[0, 0, 1, 1]),
        missing_parsed("d", "landmark_position"),
    ]
    m = metrics_of(samples, parsed)
    assert value(m, "landmark_position", "option_acc") == (0.5, 4)
    assert value(m, "landmark_position", "bbox_acc50") == (0.5, 4)
    assert value(m, "landmark_position", "bbox_miou") == (pytest.approx(1.5 / 4), 4)
    assert value(m, "landmark_position", "joint_acc") == (0.5, 4)
    assert value(m, "landmark_position", "response_rate") == (0.75, 4)
    assert value(m, "landmark_position", "valid_rate") == (0.5, 4)
    assert value(m, "landmark_position", "option_acc", stratum="8way") == (0.5, 2)
    assert value(m, "landmark_position", "option_acc", stratum="4way") == (1.0, 1)
    # a sample without difficulty counts in `all` only; legacy exists for images, not parsed
    assert set(m["stratum"]) == {"all", "4way", "8way"}
    assert value(m, "landmark_position", "response_rate", parse="legacy") == (0.0, 4)
    to_table(m, METRICS)  # conforms


def behavior_world(answers_b1, answers_b2):
    samples = [
        behavior_sample("b1", LEVELS, [("A", "atomic", [[0, 10]]), ("E", "composite", [[0, 20]])],
                        composite_mission=True, difficulty="easy"),
        behavior_sample("b2", LEVELS, [("A", "atomic", [[0, 10]]), ("C", "atomic", [[10, 20]])],
                        composite_mission=False, difficulty="hard"),
    ]  # fmt: skip
    parsed = [behavior_parsed("b1", answers_b1), behavior_parsed("b2", answers_b2)]
    return metrics_of(samples, parsed)


def test_behavior_pooled_metrics_and_n():
    m = behavior_world(
        [("A", [[0, 10]]), ("E", [[0, 10]])],  # composite set right, interval tIoU 0.5
        [("A", [[0, 10]]), ("E", [[0, 20]])],  # composite claim on an atomic mission
    )
    # composite acc over composite missions only
    assert value(m, "composite_behavior", "composite_acc") == (1.0, 1)
    assert not has(m, "composite_behavior", "composite_acc", stratum="hard")  # n would be 0
    # composite temporal pooled over both samples: TP 1 (b1), FP 1 (b2) -> 2/3
    assert value(m, "composite_behavior", "temporal_f1_50") == (pytest.approx(2 / 3), 2)
    assert value(m, "composite_behavior", "mean_tiou") == (0.5, 1)  # n = gold intervals
    # atomic: labels TP 2, FN 1 (C) -> 4/5; intervals TP 2, FN 1 -> 4/5
    assert value(m, "atomic_behavior", "atomic_f1") == (pytest.approx(0.8), 2)
    assert value(m, "atomic_behavior", "temporal_f1_50") == (pytest.approx(0.8), 2)
    assert value(m, "atomic_behavior", "mean_tiou") == (pytest.approx(2 / 3), 3)
    # rates over all behavior samples for both levels
    for task in ("composite_behavior", "atomic_behavior"):
        assert value(m, task, "response_rate") == (1.0, 2)
        assert value(m, task, "response_rate", parse="compatible") == (0.0, 2)
    assert not has(m, "atomic_behavior", "response_rate", parse="legacy")


def test_pooled_f1_with_nothing_to_find_is_one_and_empty_tiou_omitted():
    samples = [visibility_sample("v", 0, [])]
    m = metrics_of(samples, [visibility_parsed("v", 0, [])])
    assert value(m, "landmark_visibility", "segment_f1_50") == (1.0, 1)
    assert value(m, "landmark_visibility", "count_acc") == (1.0, 1)
    assert not has(m, "landmark_visibility", "mean_tiou")


def test_valid_rate_is_structural():
    samples = [visibility_sample("v", 1, [[0, 10]])]
    m = metrics_of(samples, [visibility_parsed("v", 1, [[0, 100]])])  # past D+1: FP only
    assert value(m, "landmark_visibility", "valid_rate") == (1.0, 1)
    assert value(m, "landmark_visibility", "segment_f1_50") == (0.0, 1)


def image_pair_world():
    return [
        # slot 0: landmark_position index 1 with self_position index 2
        image_sample("lp1", "landmark_position", context_index=1),
        image_sample("sp2", "self_position", context_index=2),
        # slot 1: two agent samples, one world sample -> k-th with k-th, one unpaired
        image_sample("lp3", "landmark_position", context_index=3),
        image_sample("lp3b", "landmark_position", context_index=4),
        image_sample("sp4", "self_position", context_index=4),
        # another landmark, slot 0, 8way: partner missing
        image_sample("lp9", "landmark_position", landmark_id="lm2", difficulty="8way"),
    ]


def test_image_pairs_by_slot_and_kth_with_kth():
    pairs, unpaired = pairs_of(image_pair_world())
    got = set(zip(pairs["agent_sample_id"], pairs["world_sample_id"], strict=True))
    assert got == {("lp1", "sp2"), ("lp3", "sp4")}
    counts = unpaired.set_index("task")["unpaired"]
    assert counts["landmark_position"] == 2 and counts["self_position"] == 0


def test_two_4way_contexts_of_one_landmark_are_separate_pairs():
    samples = [
        image_sample("lp1", "landmark_position", context_index=1),
        image_sample("sp2", "self_position", context_index=2),
        image_sample("lp5", "landmark_position", context_index=5),
        image_sample("sp6", "self_position", context_index=6),
    ]
    pairs, _ = pairs_of(samples)
    got = set(zip(pairs["agent_sample_id"], pairs["world_sample_id"], strict=True))
    assert got == {("lp1", "sp2"), ("lp5", "sp6")}


def test_image_dual_metrics_missing_response_fails_pair():
    parsed = [
        image_parsed("lp1", option_ids=["A"], bbox=GOOD_BOX),
        image_parsed("sp2", "strict", option_ids=["A"], bbox=[0, 0, 0.1, 0.1],
                     task="self_position"),
        image_parsed("lp3", option_ids=["A"], bbox=GOOD_BOX),
        missing_parsed("sp4", "self_position"),
    ]  # fmt: skip
    m = metrics_of(image_pair_world(), parsed)
    assert value(m, "position", "dual_semantic_acc") == (0.5, 2)
    assert value(m, "position", "dual_evidence_acc") == (0.0, 2)
    assert value(m, "position", "dual_semantic_acc", stratum="4way") == (0.5, 2)
    assert not has(m, "position", "dual_semantic_acc", stratum="8way")  # lp9 unpaired
    assert value(m, "position", "dual_semantic_acc", parse="legacy") == (0.0, 2)
    assert not has(m, "action_observation", "dual_semantic_acc")
    assert not has(m, "position", "response_rate")


def video_world():
    return [
        behavior_sample("b1", LEVELS, [("A", "atomic", [[0, 10]])], composite_mission=False,
                        mission_id="m1", difficulty="hard", manifest_path="a.json",
                        manifest_order=0),
        behavior_sample("b1dup", LEVELS, [("A", "atomic", [[0, 10]])], composite_mission=False,
                        mission_id="m1", difficulty="easy", manifest_path="a.json",
                        manifest_order=1),
        visibility_sample("v1", 1, [[0, 10]], mission_id="m1", difficulty="easy"),
        visibility_sample("v2", 1, [[0, 10]], mission_id="m2"),
    ]  # fmt: skip


def test_video_pairs_first_occurrence_and_behavior_stratum():
    pairs, unpaired = pairs_of(video_world())
    assert pairs[["agent_sample_id", "world_sample_id", "stratum"]].values.tolist() == [
        ["b1", "v1", "hard"]
    ]
    counts = unpaired.set_index("task")["unpaired"]
    assert counts["behavior"] == 1 and counts["landmark_visibility"] == 1


def test_video_dual_needs_every_level_and_visibility():
    parsed = [behavior_parsed("b1", [("A", [[0, 10]])]), visibility_parsed("v1", 1, [[0, 9]])]
    m = metrics_of(video_world(), parsed)
    assert value(m, "video", "dual_semantic_acc") == (1.0, 1)
    assert value(m, "video", "dual_evidence_acc") == (1.0, 1)
    assert value(m, "video", "dual_evidence_acc", stratum="hard") == (1.0, 1)
    assert value(m, "video", "dual_semantic_acc", parse="compatible") == (0.0, 1)
    # a composite claim on the atomic mission breaks both
    parsed[0] = behavior_parsed("b1", [("A", [[0, 10]]), ("E", [[0, 10]])])
    m = metrics_of(video_world(), parsed)
    assert value(m, "video", "dual_semantic_acc") == (0.0, 1)
    assert value(m, "video", "dual_evidence_acc") == (0.0, 1)


def test_overall_scores_over_present_metrics():
    samples = [
        image_sample("lp", "landmark_position"),
        image_sample("sp", "self_position", context_index=2),
        visibility_sample("v", 1, [[0, 10]]),
    ]
    parsed = [
        image_parsed("lp", "compatible", option_ids=["A"], bbox=GOOD_BOX),  # 1, 1
        image_parsed("sp", "compatible", option_ids=["B"], bbox=GOOD_BOX,
                     task="self_position"),  # 0, 1
        visibility_parsed("v", 1, [[0, 1]], parse="compatible"),  # count 1, segment 0
    ]  # fmt: skip
    m = metrics_of(samples, parsed)
    assert value(m, "overall", "semantic_score", parse="compatible") == (pytest.approx(2 / 3), 3)
    assert value(m, "overall", "evidence_score", parse="compatible") == (pytest.approx(2 / 3), 3)
    assert value(m, "overall", "agent_state_score", parse="compatible") == (1.0, 2)
    assert value(m, "overall", "world_state_score", parse="compatible") == (0.5, 4)
    assert value(m, "overall", "overall_score", parse="compatible") == (pytest.approx(2 / 3), 2)
    assert set(m.loc[m["task"] == "overall", "parse"]) == {"compatible"}
    assert set(m.loc[m["task"] == "overall", "stratum"]) == {"all"}


def test_no_zero_n_rows_and_no_rows_for_empty_scores():
    m = metrics_of([image_sample("a")], [])
    assert (m["n"] > 0).all()
    assert list(m.columns) == METRICS.names
