"""tIoU, predicted-interval validity and class-aware greedy matching (docs/protocol.md §5)."""

import math

import numpy as np
import pytest

from dualcog.scoring import f1_score, greedy_match, match_classes, tiou
from dualcog.scoring.intervals import clip_predicted, gold_array


def arr(rows) -> np.ndarray:
    return np.asarray(rows, float).reshape(-1, 2)


def test_tiou_hand_computed():
    assert tiou([0, 10], [0, 9]) == pytest.approx(0.9)
    assert tiou([20, 30], [21, 30]) == pytest.approx(0.9)
    assert tiou([0, 10], [10, 20]) == 0.0  # touching
    assert tiou([0, 10], [5, 15]) == pytest.approx(5 / 15)


def test_tiou_zero_length_gold_is_never_positive():
    assert tiou([5, 5], [0, 10]) == 0.0
    assert tiou([5, 5], [5, 5]) == 0.0  # union 0


def test_clip_keeps_valid_and_clips_to_duration():
    clipped, invalid = clip_predicted([[0, 9], [55, 60.5]], duration=60.0)
    assert clipped.tolist() == [[0, 9], [55, 60]]
    assert invalid == 0


def test_clip_boundary_d_plus_one_is_valid_past_it_invalid():
    clipped, invalid = clip_predicted([[50, 61.0], [50, 61.01]], duration=60.0)
    assert clipped.tolist() == [[50, 60]]
    assert invalid == 1


@pytest.mark.parametrize(
    "interval",
    [[-1, 5], [5, 3], [4, 4], [math.nan, 3], [0, math.inf], [1], "ab", None, [True, 3]],
)
def test_clip_rejects_invalid_intervals(interval):
    clipped, invalid = clip_predicted([interval], duration=60.0)
    assert len(clipped) == 0 and invalid == 1


def test_clip_start_between_d_and_d_plus_one_becomes_zero_length():
    clipped, invalid = clip_predicted([[60.2, 60.8]], duration=60.0)
    assert clipped.tolist() == [[60, 60]] and invalid == 0


def test_clip_without_duration_has_no_upper_bound():
    clipped, invalid = clip_predicted([[0, 1000]], duration=None)
    assert clipped.tolist() == [[0, 1000]] and invalid == 0


def test_gold_used_as_released():
    assert gold_array([[10, 5], [0, 70]]).tolist() == [[10, 5], [0, 70]]


def test_greedy_prefers_highest_tiou_then_lower_indices():
    gold = arr([[0, 10], [0, 10]])
    pred = arr([[0, 10], [0, 10]])
    # all four pairs tie at 1.0: (g0,p0) first, then (g1,p1)
    assert greedy_match(gold, pred, 0.5, strict=False).tolist() == [1.0, 1.0]
    # one prediction, two gold candidates: the better one wins
    gold = arr([[0, 8], [0, 10]])
    assert greedy_match(gold, arr([[0, 10]]), 0.5, strict=False).tolist() == [1.0]


def test_greedy_is_one_to_one():
    gold = arr([[0, 10]])
    pred = arr([[0, 10], [0, 9]])
    assert greedy_match(gold, pred, 0.5, strict=False).tolist() == [1.0]


def test_threshold_inclusive_for_f1_strict_for_mean():
    gold, pred = arr([[0, 10]]), arr([[0, 5]])  # tIoU exactly 0.5
    assert len(greedy_match(gold, pred, 0.5, strict=False)) == 1
    far = arr([[10, 20]])  # tIoU 0
    assert len(greedy_match(gold, far, 0.0, strict=True)) == 0


def test_match_classes_counts_extra_classes_and_invalid_as_fp():
    gold = {"A": arr([[0, 10]]), "C": arr([[10, 20]])}
    pred = {"A": arr([[0, 10]]), "B": arr([[10, 20]])}
    counts = match_classes(gold, pred, invalid_pred=2)
    assert (counts.tp, counts.fp, counts.fn) == (1, 3, 1)
    assert counts.n_gold == 2 and counts.tiou_sum == pytest.approx(1.0)


def test_match_classes_is_class_aware():
    counts = match_classes({"A": arr([[0, 10]])}, {"B": arr([[0, 10]])})
    assert (counts.tp, counts.fp, counts.fn, counts.tiou_sum) == (0, 1, 1, 0.0)


def test_mean_tiou_uses_low_overlap_matches():
    counts = match_classes({"A": arr([[0, 10]])}, {"A": arr([[8, 20]])})
    assert counts.tp == 0  # tIoU 2/20 < 0.5
    assert counts.tiou_sum == pytest.approx(0.1)


def test_f1_with_nothing_is_one():
    assert f1_score(0, 0, 0) == 1.0
    assert f1_score(2, 1, 0) == pytest.approx(0.8)
    assert match_classes({}, {}).sample_f1 == 1.0
