"""Image task scoring (docs/protocol.md §4), vectorized over all rows of all image tasks at once.

The work happens on the two tables as they are (`row_source.RowSource`), sample columns once
per sample and parsed columns once per parsed row, joined only as integer positions. Option
ids become integer codes; each row's predicted and gold box are gathered into (N, 4) arrays
and scored by `geometry.box_iou`, the rule itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.scoring.columns import (
    at_rows,
    flags,
    flatten,
    list_layout,
    single,
    string_codes,
    take_rows,
)
from dualcog.scoring.geometry import _as_list_array, box_iou, boxes_to_array
from dualcog.scoring.row_source import RowSource
from dualcog.tasks import SELECTED_CANDIDATE_TASK

IOU_HIT = 0.5


@dataclass(frozen=True)
class _Options:
    """Per list row of option ids: length, first item's code, and whether every item is that
    same non-null id."""

    length: np.ndarray
    first: np.ndarray
    uniform: np.ndarray


def _options(array: pa.ListArray, item_codes: np.ndarray) -> _Options:
    """`item_codes`: codes of `pc.list_flatten(array)`, the items of the non-null lists."""
    start, length = list_layout(array)
    has_items = length > 0
    first = np.full(len(array), -1, np.int64)
    first[has_items] = item_codes[start[has_items]]
    uniform = has_items & (first >= 0)
    rows = np.flatnonzero(length > 1)  # lists of several items: compare the others
    k = 1
    while len(rows):
        differs = item_codes[start[rows] + k] != first[rows]
        uniform[rows[differs]] = False
        k += 1
        rows = rows[length[rows] > k]
    return _Options(length, first, uniform)


def _legacy_gold_sets(source: RowSource, parsed_ids: pa.Array, correct: np.ndarray) -> None:
    """Legacy: correct iff the letter set equals the sample's gold id set (§3.4), in place.

    Only samples whose gold set is not just [gold_option_id] need this (multi-id golds; rare),
    so only their legacy rows are read as Python values.
    """
    samples, sample_at, parsed_at, legacy = (
        source.samples, source.sample_at, source.parsed_at, source.legacy
    )  # fmt: skip
    if "gold_option_ids" not in samples.column_names or not legacy.any():
        return
    gold_sets = single(samples["gold_option_ids"])
    if gold_sets.null_count == len(gold_sets):
        return
    gold_sets = _as_list_array(gold_sets, pa.string())
    set_codes, gold_code = string_codes(flatten(gold_sets), samples["gold_option_id"])
    sets = _options(gold_sets, set_codes)
    plain = (sets.length == 0) | ((sets.length == 1) & (sets.first == gold_code))
    rows = np.flatnonzero(legacy & ~plain[sample_at])
    if len(rows) == 0:
        return
    ids = gold_sets.take(pa.array(sample_at[rows])).to_pylist()
    found = parsed_at[rows]
    got = parsed_ids.take(pa.array(found, mask=found < 0)).to_pylist()
    valid = source.parsed_flag("option_valid")
    for row, want, letters in zip(rows, ids, got, strict=True):
        correct[row] = bool(valid[row]) and set(letters or ()) == set(want)


def _selected_candidates(
    candidates: pa.Array, id_codes: np.ndarray, sample_at: np.ndarray, selected: np.ndarray
) -> np.ndarray:
    """Per row: the flat index (into `flatten(candidates)`) of the first candidate of sample
    `sample_at` whose id code is `selected` (-1: nothing selected), else -1."""
    _, count = list_layout(candidates)
    owner = np.repeat(np.arange(len(candidates)), count)
    size = 1 + max(int(id_codes.max(initial=-1)), int(selected.max(initial=-1))) + 1
    # (sample, id) keys of every candidate; np.unique's index is a key's first candidate.
    keys, first = np.unique(owner * size + id_codes + 1, return_index=True)
    ref = np.full(len(sample_at), -1, np.int64)
    rows = np.flatnonzero(selected >= 0)
    if len(rows) == 0 or len(keys) == 0:
        return ref
    wanted = sample_at[rows] * size + selected[rows] + 1
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    hit = keys[at] == wanted
    ref[rows[hit]] = first[at[hit]]
    return ref


def _with_nan_row(boxes: np.ndarray) -> np.ndarray:
    """(N, 4) boxes and a last row of NaN, the box of position -1 (none): IoU 0."""
    return np.vstack([boxes, np.full((1, 4), np.nan)])


def score_image(source: RowSource) -> dict[str, np.ndarray | pa.Array | pa.ChunkedArray]:
    """Score the image rows of `source` (one per sample and parse mode).

    Samples need sample_id, task, difficulty, gold_option_id, gold_bbox, candidates (and for
    legacy gold_option_ids, answer_bbox); parsed rows all_valid, option_ids, option_valid,
    bbox, bbox_valid. An unanswered row has every field invalid.
    """
    samples, parsed = source.samples, source.parsed
    sample_at, parsed_at, legacy = source.sample_at, source.parsed_at, source.legacy
    option_valid = source.parsed_flag("option_valid")
    bbox_valid = source.parsed_flag("bbox_valid")

    # Options: correct iff valid and the set of predicted ids is {gold} (strict, compatible:
    # "the one id == gold"; legacy: "set(letters) == {gold}", §3.4), on integer codes.
    option_ids = _as_list_array(single(parsed["option_ids"]), pa.string())
    has_candidates = "candidates" in samples.column_names
    candidates = single(samples["candidates"]) if has_candidates else None
    candidate_items = flatten(candidates) if has_candidates else None
    item_code, gold_code, *candidate_code = string_codes(
        flatten(option_ids),
        samples["gold_option_id"],
        *([candidate_items.field("option_id")] if has_candidates else []),
    )
    options = _options(option_ids, item_code)
    first = at_rows(options.first, parsed_at, -1)
    option_correct = (
        option_valid & at_rows(options.uniform, parsed_at, False) & (first == gold_code[sample_at])
    )
    one_id = option_valid & (at_rows(options.length, parsed_at, 0) == 1)
    selected = np.where(one_id, first, -1)  # a null id (-1) selects nothing
    _legacy_gold_sets(source, option_ids, option_correct)

    # Gold box per row: the sample's gold_bbox; for Future Observation the box of the
    # candidate the model selected (strict, compatible) or the released answer box when
    # there is one (legacy keeps the authors' rule, §3.4). A row without one gets NaN.
    gold = boxes_to_array(single(samples["gold_bbox"]))[sample_at]
    future = flags(pc.equal(samples["task"], SELECTED_CANDIDATE_TASK))[sample_at]
    released_rows = np.flatnonzero(future & legacy)
    if "answer_bbox" in samples.column_names and len(released_rows):
        released = boxes_to_array(single(samples["answer_bbox"]))[sample_at[released_rows]]
        present = ~np.isnan(released).any(axis=1)
        gold[released_rows[present]] = released[present]
    use_selected = np.flatnonzero(future & ~legacy)
    gold[use_selected] = np.nan
    if len(use_selected) and has_candidates:
        ref = _selected_candidates(
            candidates, candidate_code[0], sample_at[use_selected], selected[use_selected]
        )
        gold[use_selected] = _with_nan_row(boxes_to_array(candidate_items.field("bbox")))[ref]
    pred = _with_nan_row(boxes_to_array(single(parsed["bbox"])))
    iou = box_iou(pred[np.where(bbox_valid, parsed_at, -1)], gold)
    hit = iou >= IOU_HIT
    task = take_rows(samples["task"], sample_at)
    return {
        "sample_id": take_rows(samples["sample_id"], sample_at),
        "task": task,
        "request_task": task,
        "parse": source.parse,
        "difficulty": take_rows(samples["difficulty"], sample_at),
        "responded": source.responded,
        "valid": source.parsed_flag("all_valid"),
        "option_correct": option_correct,
        "iou": iou,
        "bbox_hit": hit,
        "joint_correct": option_correct & hit,
        "semantic_ok": option_correct,
        "evidence_ok": hit,
    }


def score_image_rows(rows: pa.Table) -> dict[str, np.ndarray | pa.Array | pa.ChunkedArray]:
    """Score image rows: one per (sample, parse), sample and parsed columns side by side.

    `rows` needs sample_id, task, parse, difficulty, gold_option_id, gold_bbox, candidates,
    responded, all_valid, option_ids, option_valid, bbox, bbox_valid.
    """
    return score_image(RowSource.joined(rows))
