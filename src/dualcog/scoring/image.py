"""Image task scoring (PROTOCOL §4), vectorized over all rows of all image tasks at once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from dualcog.scoring.geometry import _as_list_array, box_iou, boxes_to_array

IOU_HIT = 0.5
SELECTED_CANDIDATE_TASK = "future_observation"


def _option_outcome(option_ids, gold: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row: option correct, and the single selected id (None unless exactly one).

    Correct iff the field is valid and the set of predicted ids is {gold}: for strict and
    compatible this is "the one id == gold", for legacy "set(letters) == {gold}" (§3.4).
    """
    array = _as_list_array(option_ids, pa.string())
    n = len(array)
    lengths = array.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    flat = np.asarray(array.values.to_numpy(zero_copy_only=False), dtype=object)
    owner = np.repeat(np.arange(n), lengths)
    mismatch = flat != gold[owner] if len(flat) else np.zeros(0, bool)
    any_mismatch = np.bincount(owner, weights=mismatch, minlength=n) > 0
    correct = valid & (lengths >= 1) & ~any_mismatch
    first = np.full(n, None, dtype=object)
    offsets = array.offsets.to_numpy()[:-1]
    single = valid & (lengths == 1)
    first[single] = flat[offsets[single]]
    return correct, first


def _legacy_gold_sets(rows: pd.DataFrame, correct: np.ndarray, valid: np.ndarray) -> None:
    """Legacy: correct iff the letter set equals the sample's gold id set (§3.4), in place.

    Only rows whose stored gold set is not just {gold_option_id} need this (rare), so they
    are found column-wise and only they are checked one by one.
    """
    if "gold_option_ids" not in rows:
        return
    gold_sets = _as_list_array(rows["gold_option_ids"], pa.string())
    lengths = gold_sets.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    flat = np.asarray(gold_sets.values.to_numpy(zero_copy_only=False), dtype=object)
    single = lengths == 1
    first = np.full(len(rows), None, dtype=object)
    first[single] = flat[gold_sets.offsets.to_numpy()[:-1][single]]
    gold = rows["gold_option_id"].to_numpy(object)
    differs = (rows["parse"].to_numpy(object) == "legacy") & (lengths > 0)
    differs &= ~(single & (first == gold))
    if not differs.any():
        return
    letters = rows["option_ids"].to_numpy(object)
    ids = gold_sets.to_pylist()
    for i in np.flatnonzero(differs):
        correct[i] = bool(valid[i]) and set(letters[i]) == set(ids[i])


def _candidate_boxes(samples: pd.DataFrame) -> pd.DataFrame:
    """(sample_id, option_id, bbox) of every future-observation candidate."""
    rows = []
    for sample_id, candidates in zip(samples["sample_id"], samples["candidates"], strict=True):
        for candidate in candidates if candidates is not None else ():
            rows.append((sample_id, candidate["option_id"], candidate["bbox"]))
    return pd.DataFrame(rows, columns=["sample_id", "selected", "candidate_bbox"])


def score_image_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Score image rows: one per (sample, parse), sample and parsed columns side by side.

    `rows` needs sample_id, task, parse, difficulty, gold_option_id, gold_bbox, candidates,
    responded, all_valid, option_ids, option_valid, bbox, bbox_valid.
    """
    rows = rows.reset_index(drop=True)
    responded = rows["responded"].to_numpy(bool)
    option_valid = responded & rows["option_valid"].fillna(False).to_numpy(bool)
    bbox_valid = responded & rows["bbox_valid"].fillna(False).to_numpy(bool)
    gold_option = rows["gold_option_id"].to_numpy(object)
    option_correct, selected = _option_outcome(rows["option_ids"], gold_option, option_valid)
    _legacy_gold_sets(rows, option_correct, option_valid)

    gold_box = boxes_to_array(rows["gold_bbox"])
    # Strict/compatible Future Observation: the box is judged in the candidate image the model
    # selected; legacy keeps the authors' rule (`answer_bbox_xyxy_norm` as released, §3.4).
    is_future = rows["task"].to_numpy(object) == SELECTED_CANDIDATE_TASK
    is_legacy = rows["parse"].to_numpy(object) == "legacy"
    if "answer_bbox" in rows and (is_future & is_legacy).any():
        released = boxes_to_array(rows["answer_bbox"])
        take = is_future & is_legacy & ~np.isnan(released).any(axis=1)
        gold_box[take] = released[take]
    use_selected = is_future & ~is_legacy
    if use_selected.any():
        lookup = pd.DataFrame(
            {"sample_id": rows["sample_id"], "selected": selected, "position": np.arange(len(rows))}
        )[use_selected]
        candidates = _candidate_boxes(
            rows.loc[use_selected, ["sample_id", "candidates"]].drop_duplicates("sample_id")
        )
        found = lookup.merge(candidates, on=["sample_id", "selected"], how="left")
        found = found.drop_duplicates("position")  # a repeated candidate id: the first one
        gold_box[found["position"].to_numpy()] = boxes_to_array(found["candidate_bbox"])

    pred_box = boxes_to_array(rows["bbox"])
    pred_box[~bbox_valid] = np.nan
    iou = box_iou(pred_box, gold_box)
    hit = iou >= IOU_HIT
    return pd.DataFrame(
        {
            "sample_id": rows["sample_id"],
            "task": rows["task"],
            "request_task": rows["task"],
            "parse": rows["parse"],
            "difficulty": rows["difficulty"],
            "responded": responded,
            "valid": responded & rows["all_valid"].fillna(False).to_numpy(bool),
            "option_correct": option_correct,
            "iou": iou,
            "bbox_hit": hit,
            "joint_correct": option_correct & hit,
            "semantic_ok": option_correct,
            "evidence_ok": hit,
        }
    )
