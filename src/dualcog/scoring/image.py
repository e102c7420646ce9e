"""Image task scoring (docs/protocol.md §4), vectorized over all rows of all image tasks at once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.scoring.columns import flags, flatten, parents, single
from dualcog.scoring.geometry import _as_list_array, box_iou, boxes_to_array

IOU_HIT = 0.5
SELECTED_CANDIDATE_TASK = "future_observation"


def _option_outcome(
    option_ids: pa.Array, gold: pa.Array, valid: np.ndarray
) -> tuple[np.ndarray, pa.Array]:
    """Per row: option correct, and the single selected id (null unless exactly one).

    Correct iff the field is valid and the set of predicted ids is {gold}: for strict and
    compatible this is "the one id == gold", for legacy "set(letters) == {gold}" (§3.4).
    """
    array = _as_list_array(option_ids, pa.string())
    n = len(array)
    lengths = np.asarray(array.value_lengths().fill_null(0).to_numpy(), dtype=np.int64)
    owner = parents(array)
    flat = flatten(array)
    same = flags(pc.equal(flat, pc.take(single(gold).cast(pa.string()), pa.array(owner))))
    any_mismatch = np.bincount(owner[~same], minlength=n) > 0
    correct = valid & (lengths >= 1) & ~any_mismatch
    chosen = valid & (lengths == 1)
    first_item = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    at = pa.array(np.where(chosen, first_item, 0), mask=~chosen)
    return correct, flat.cast(pa.string()).take(at)


def _selected_candidate_boxes(candidates: pa.Array, selected: pa.Array) -> np.ndarray:
    """Per row: the box of the first candidate whose option_id is the selected id (else NaN)."""
    n = len(candidates)
    out = np.full((n, 4), np.nan)
    owner = parents(candidates)
    if len(owner) == 0:
        return out
    flat = flatten(candidates)
    wanted = pc.take(selected, pa.array(owner))
    match = np.flatnonzero(flags(pc.equal(flat.field("option_id"), wanted)))
    rows, first = np.unique(owner[match], return_index=True)
    out[rows] = boxes_to_array(flat.field("bbox").take(pa.array(match[first])))
    return out


def _legacy_gold_sets(rows: pa.Table, correct: np.ndarray, valid: np.ndarray) -> None:
    """Legacy: correct iff the letter set equals the sample's gold id set (§3.4), in place.

    Only rows whose gold set is not just {gold_option_id} need this (multi-id golds); rare.
    """
    if "gold_option_ids" not in rows.column_names:
        return
    legacy = np.flatnonzero(flags(pc.equal(rows["parse"], "legacy")))
    if len(legacy) == 0:
        return
    at = pa.array(legacy)
    gold_sets = single(rows["gold_option_ids"]).take(at).to_pylist()
    golds = single(rows["gold_option_id"]).take(at).to_pylist()
    letters = single(rows["option_ids"]).take(at).to_pylist()
    for row, ids, gold, got in zip(legacy, gold_sets, golds, letters, strict=True):
        if not ids or ids == [gold]:
            continue
        correct[row] = bool(valid[row]) and set(got or ()) == set(ids)


def score_image_rows(rows: pa.Table) -> dict[str, np.ndarray | pa.Array]:
    """Score image rows: one per (sample, parse), sample and parsed columns side by side.

    `rows` needs sample_id, task, parse, difficulty, gold_option_id, gold_bbox, candidates,
    responded, all_valid, option_ids, option_valid, bbox, bbox_valid.
    """
    responded = flags(rows["responded"])
    option_valid = responded & flags(rows["option_valid"])
    bbox_valid = responded & flags(rows["bbox_valid"])
    option_correct, selected = _option_outcome(
        single(rows["option_ids"]), single(rows["gold_option_id"]), option_valid
    )
    _legacy_gold_sets(rows, option_correct, option_valid)
    gold_box = boxes_to_array(single(rows["gold_bbox"]))
    # Strict/compatible Future Observation: the box is judged in the candidate image the model
    # selected; legacy keeps the authors' rule (`answer_bbox_xyxy_norm` as released, §3.4).
    is_future = flags(pc.equal(rows["task"], SELECTED_CANDIDATE_TASK))
    is_legacy = flags(pc.equal(rows["parse"], "legacy"))
    if "answer_bbox" in rows.column_names and (is_future & is_legacy).any():
        released = boxes_to_array(single(rows["answer_bbox"]))
        take = is_future & is_legacy & ~np.isnan(released).any(axis=1)
        gold_box[take] = released[take]
    use_selected = is_future & ~is_legacy
    if use_selected.any():
        at = pa.array(np.flatnonzero(use_selected))
        gold_box[use_selected] = _selected_candidate_boxes(
            single(rows["candidates"]).take(at), selected.take(at)
        )
    pred_box = boxes_to_array(single(rows["bbox"]))
    pred_box[~bbox_valid] = np.nan
    iou = box_iou(pred_box, gold_box)
    hit = iou >= IOU_HIT
    return {
        "sample_id": rows["sample_id"],
        "task": rows["task"],
        "request_task": rows["task"],
        "parse": rows["parse"],
        "difficulty": rows["difficulty"],
        "responded": responded,
        "valid": responded & flags(rows["all_valid"]),
        "option_correct": option_correct,
        "iou": iou,
        "bbox_hit": hit,
        "joint_correct": option_correct & hit,
        "semantic_ok": option_correct,
        "evidence_ok": hit,
    }
