"""Box IoU and box-array conversion (docs/protocol.md §4)."""

import math

import numpy as np
import pytest

from dualcog.scoring import box_iou, boxes_to_array


def iou(a, b) -> float:
    return float(box_iou(np.array([a], float), np.array([b], float))[0])


def test_identical_boxes_give_one():
    assert iou([0.2, 0.2, 0.6, 0.6], [0.2, 0.2, 0.6, 0.6]) == 1.0


def test_disjoint_and_touching_boxes_give_zero():
    assert iou([0, 0, 0.2, 0.2], [0.5, 0.5, 0.9, 0.9]) == 0.0
    assert iou([0, 0, 0.5, 0.5], [0.5, 0, 1.0, 0.5]) == 0.0  # shared edge only


def test_contained_box_is_area_ratio():
    assert iou([0.25, 0.25, 0.75, 0.75], [0, 0, 1, 1]) == pytest.approx(0.25)


def test_partial_overlap_hand_computed():
    # inter 0.1*0.2 = 0.02; union 0.04 + 0.04 - 0.02 = 0.06
    assert iou([0, 0, 0.2, 0.2], [0.1, 0, 0.3, 0.2]) == pytest.approx(1 / 3)


def test_half_overlap_is_exactly_half():
    assert iou([0, 0, 1, 1], [0, 0, 0.5, 1]) == 0.5


@pytest.mark.parametrize(
    "pred",
    [
        [0.2, 0.2, 0.2, 0.6],  # zero width
        [0.2, 0.6, 0.6, 0.6],  # zero height
        [0.6, 0.2, 0.2, 0.6],  # reversed x
        [math.nan, 0.2, 0.6, 0.6],
        [0.2, 0.2, math.inf, 0.6],
    ],
)
def test_degenerate_or_non_finite_prediction_gives_zero(pred):
    assert iou(pred, [0.2, 0.2, 0.6, 0.6]) == 0.0


def test_degenerate_gold_and_identical_degenerate_pair_give_zero():
    assert iou([0.2, 0.2, 0.6, 0.6], [0.3, 0.3, 0.3, 0.5]) == 0.0
    assert iou([0.3, 0.3, 0.3, 0.5], [0.3, 0.3, 0.3, 0.5]) == 0.0


def test_vectorized_rows_are_independent():
    pred = np.array([[0, 0, 1, 1], [0, 0, 0.5, 1], [np.nan] * 4])
    gold = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1]])
    assert box_iou(pred, gold).tolist() == [1.0, 0.5, 0.0]


def test_boxes_to_array_accepts_lists_arrays_and_none():
    rows = [[0.1, 0.2, 0.3, 0.4], np.array([0, 0, 1, 1.0]), None, [0.1, 0.2], (1, 2, 3, 4)]
    out = boxes_to_array(rows)
    assert out.shape == (5, 4)
    assert out[0].tolist() == [0.1, 0.2, 0.3, 0.4]
    assert out[1].tolist() == [0, 0, 1, 1]
    assert np.isnan(out[2]).all() and np.isnan(out[3]).all()
    assert out[4].tolist() == [1, 2, 3, 4]


def test_boxes_to_array_treats_join_nan_as_absent():
    assert np.isnan(boxes_to_array([math.nan])).all()
    assert boxes_to_array([]).shape == (0, 4)
