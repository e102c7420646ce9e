"""The Arrow + numpy metric code of the `score` job: compensated sums, codes, task and dual
rows and clusters, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dualcog.schemas import table_from_rows
from dualcog.scoring import PAIRS, SCORES, dual_metric_rows, task_metric_rows
from dualcog.scoring.columns import encoded, first_seen, kahan_sums
from dualcog.stats import build_clusters
from dualcog.stats.clusters import CLUSTER_COLUMNS


def test_kahan_sums_compensate_per_group_and_skip_nan():
    values = np.array([1.0, 1e-16, 5.0, 1e-16, np.nan, 2.5])
    group = np.array([0, 0, 1, 0, 1, 1])
    # Group 0: 1 + 1e-16 rounds to 1 (error -1e-16 kept); then 1e-16 + 1e-16 = 2e-16 is added
    # and 1 + 2e-16 rounds up to the next double, 1 + 2**-52. A plain sum stays at 1.0.
    assert kahan_sums(values, group, 3).tolist() == [1.0 + 2**-52, 7.5, 0.0]
    assert 1.0 + 1e-16 + 1e-16 == 1.0


def test_kahan_sums_equal_a_pandas_group_by_sum_to_the_last_bit():
    rng = np.random.default_rng(3)
    values = rng.random(5000) * rng.choice([1e-3, 1.0, 1e3], 5000)
    values[rng.random(5000) < 0.1] = np.nan
    group = rng.integers(0, 17, 5000)
    expected = pd.DataFrame({"g": group, "v": values}).groupby("g")["v"].sum()
    ours = kahan_sums(values, group, 17)
    assert ours.tolist() == expected.reindex(range(17), fill_value=0.0).tolist()
    plain = np.bincount(group, weights=np.nan_to_num(values), minlength=17)
    assert not np.array_equal(plain, ours)  # the case the compensation is for


def test_encoded_and_first_seen():
    codes, names = encoded(pa.chunked_array([["b", None, "a"], ["b", "c"]]))
    assert codes.tolist() == [0, -1, 1, 0, 2] and names == ["b", "a", "c"]
    assert first_seen(np.array([3, 1, 3, 0, 1])).tolist() == [3, 1, 0]


def _score_row(sample_id, difficulty, iou, option_correct, parse="strict", **extra):
    return {
        "sample_id": sample_id, "task": "landmark_position", "request_task": "landmark_position",
        "parse": parse, "difficulty": difficulty, "responded": iou is not None,
        "valid": iou is not None, "option_correct": option_correct, "iou": iou,
        "bbox_hit": None if iou is None else iou >= 0.5,
        "joint_correct": bool(option_correct) and iou is not None and iou >= 0.5, **extra,
    }  # fmt: skip


def test_task_rows_by_hand():
    scores = table_from_rows(
        [
            _score_row("a", "4way", 0.75, True, semantic_ok=True),
            _score_row("b", "8way", 0.25, False),
            _score_row("c", "4way", None, None),  # no response: counts in n only
            _score_row("d", None, 0.5, True),
        ],
        SCORES,
    )
    rows = {(r[2], r[3]): (r[4], r[5]) for r in task_metric_rows(scores)}
    assert rows[("all", "response_rate")] == (0.75, 4)
    assert rows[("all", "option_acc")] == (0.5, 4)
    assert rows[("all", "bbox_acc50")] == (0.5, 4)  # a and d
    assert rows[("all", "bbox_miou")] == ((0.75 + 0.25 + 0.5) / 4, 4)
    assert rows[("all", "joint_acc")] == (0.5, 4)
    assert rows[("4way", "bbox_miou")] == (0.75 / 2, 2)
    assert rows[("8way", "option_acc")] == (0.0, 1)
    assert {stratum for stratum, _ in rows} == {"all", "4way", "8way"}
    strata = [r[2] for r in task_metric_rows(scores)]
    assert strata == sorted(strata)  # groups in (task, parse, stratum) order


def test_dual_rows_by_hand():
    def side(sample_id, task, ok, parse="compatible"):
        return {"sample_id": sample_id, "task": task, "request_task": task, "parse": parse,
                "semantic_ok": ok, "evidence_ok": False}  # fmt: skip

    scores = table_from_rows(
        [
            side("p1", "landmark_position", True), side("q1", "self_position", True),
            side("p2", "landmark_position", True), side("q2", "self_position", False),
            side("p3", "landmark_position", True),  # q3 was not scored: a failure
        ],
        SCORES,
    )  # fmt: skip
    pairs = table_from_rows(
        [
            {"family": "position", "agent_sample_id": f"p{k}", "world_sample_id": f"q{k}",
             "stratum": "8way" if k == 2 else "4way"}
            for k in (1, 2, 3)
        ],
        PAIRS,
    )  # fmt: skip
    rows = {(r[2], r[3]): (r[4], r[5]) for r in dual_metric_rows(scores, pairs)}
    assert rows[("all", "dual_semantic_acc")] == (1 / 3, 3)
    assert rows[("4way", "dual_semantic_acc")] == (0.5, 2)
    assert rows[("8way", "dual_semantic_acc")] == (0.0, 1)
    assert rows[("all", "dual_evidence_acc")] == (0.0, 3)
    assert {r[1] for r in dual_metric_rows(scores, pairs)} == {"compatible"}


def test_clusters_of_a_samples_table():
    rows = [
        {"sample_id": "a", "task": "landmark_position", "scene_id": "s", "landmark_id": "l1"},
        {"sample_id": "b", "task": "self_position", "scene_id": "s", "landmark_id": "l1"},
        {"sample_id": "c", "task": "landmark_position", "scene_id": None, "landmark_id": "l1"},
        {"sample_id": "d", "task": "behavior", "mission_id": "m"},
        {"sample_id": "e", "task": "landmark_visibility", "mission_id": "m"},
        {"sample_id": "f", "task": "landmark_visibility", "mission_id": None},
    ]
    schema = pa.schema([(name, pa.string()) for name in CLUSTER_COLUMNS])
    table = table_from_rows(rows, schema)
    clusters = build_clusters(table)
    # By modality, then by name ("a" sorts before "|").
    assert clusters.ids == ("image:sample:c", "image:s|l1", "video:m", "video:sample:f")
    assert clusters.group_sizes == (2, 2)
    assert clusters.indices(table["sample_id"]).tolist() == [1, 1, 0, 2, 2, 3]
    assert clusters.indices(pd.Series(["e", "a"])).tolist() == [2, 1]
    for unknown in (["a", "z"], pa.chunked_array([["a"], ["z"]])):  # a list, an Arrow column
        with pytest.raises(KeyError, match="'z' is not in the benchmark samples"):
            clusters.indices(unknown)
