"""Image task scoring (docs/protocol.md §4), vectorized over all rows of all image tasks at once.

The work happens on the two tables as they are (`row_source.RowSource`), sample columns once
per sample and parsed columns once per parsed row, joined only as integer positions. Option
ids become integer codes, boxes are read in place (`geometry.Boxes`); no list column is
copied row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.scoring.columns import (
    at_rows,
    flags,
    list_layout,
    single,
    string_codes,
    take_rows,
)
from dualcog.scoring.geometry import Boxes, _as_list_array, pair_iou
from dualcog.scoring.row_source import RowSource

IOU_HIT = 0.5
SELECTED_CANDIDATE_TASK = "future_observation"


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


def _candidate_refs(
    candidates: pa.Array, sample_at: np.ndarray, selected: np.ndarray, id_codes: np.ndarray
) -> np.ndarray:
    """Per row: the flat index of the first candidate of its sample whose option_id is the
    selected id (selected -1: none), else -1."""
    first, count = list_layout(candidates)
    ref = np.full(len(sample_at), -1, np.int64)
    active = np.flatnonzero(selected >= 0)
    start, count, wanted = first[sample_at[active]], count[sample_at[active]], selected[active]
    if len(active) == 0 or len(id_codes) == 0:
        return ref
    width = int(count.max())
    if width <= 16:  # a few candidates each (four in the benchmark): one row of a matrix each
        at = start[:, None] + np.arange(width)
        match = np.arange(width) < count[:, None]
        match &= id_codes[np.minimum(at, len(id_codes) - 1)] == wanted[:, None]
        column = match.argmax(axis=1)
        hit = match[np.arange(len(active)), column]
        ref[active[hit]] = start[hit] + column[hit]
        return ref
    k = 0
    while len(active):
        left = count > k
        active, start, count, wanted = active[left], start[left], count[left], wanted[left]
        at = start + k
        hit = id_codes[at] == wanted
        ref[active[hit]] = at[hit]
        miss = ~hit
        active, start, count, wanted = active[miss], start[miss], count[miss], wanted[miss]
        k += 1
    return ref


def _legacy_gold_sets(
    samples: pa.Table,
    parsed_ids: pa.Array,
    sample_at: np.ndarray,
    parsed_at: np.ndarray,
    gold_code: np.ndarray,
    legacy: np.ndarray,
    correct: np.ndarray,
    valid: np.ndarray,
) -> None:
    """Legacy: correct iff the letter set equals the sample's gold id set (§3.4), in place.

    Only samples whose gold set is not just [gold_option_id] need this (multi-id golds; rare),
    so only their legacy rows are read as Python values.
    """
    if "gold_option_ids" not in samples.column_names or not legacy.any():
        return
    gold_sets = single(samples["gold_option_ids"])
    if gold_sets.null_count == len(gold_sets):
        return
    gold_sets = _as_list_array(gold_sets, pa.string())
    set_codes = string_codes(pc.list_flatten(gold_sets))[0]
    sets = _options(gold_sets, set_codes)
    plain = (sets.length == 0) | ((sets.length == 1) & (sets.first == gold_code))
    rows = np.flatnonzero(legacy & ~plain[sample_at])
    if len(rows) == 0:
        return
    ids = gold_sets.take(pa.array(sample_at[rows])).to_pylist()
    found = parsed_at[rows]
    got = parsed_ids.take(pa.array(found, mask=found < 0)).to_pylist()
    for row, want, letters in zip(rows, ids, got, strict=True):
        correct[row] = bool(valid[row]) and set(letters or ()) == set(want)


def score_image(source: RowSource) -> dict[str, np.ndarray | pa.Array | pa.ChunkedArray]:
    """Score the image rows of `source` (one per sample and parse mode).

    Samples need sample_id, task, difficulty, gold_option_id, gold_bbox, candidates (and for
    legacy gold_option_ids, answer_bbox); parsed rows all_valid, option_ids, option_valid,
    bbox, bbox_valid. An unanswered row has every field invalid.
    """
    samples, parsed = source.samples, source.parsed
    sample_at, parsed_at, parse = source.sample_at, source.parsed_at, source.parse
    parsed_flag = source.parsed_flag
    option_valid = parsed_flag("option_valid")
    bbox_valid = parsed_flag("bbox_valid")
    is_legacy = flags(pc.equal(parse, "legacy"))

    # Options: correct iff valid and the set of predicted ids is {gold} (strict, compatible:
    # "the one id == gold"; legacy: "set(letters) == {gold}", §3.4), on integer codes.
    option_ids = _as_list_array(single(parsed["option_ids"]), pa.string())
    has_candidates = "candidates" in samples.column_names
    candidates = single(samples["candidates"]) if has_candidates else None
    candidate_items = pc.list_flatten(candidates) if has_candidates else None
    item_code, gold_code, *candidate_code = string_codes(
        pc.list_flatten(option_ids),
        samples["gold_option_id"],
        *([candidate_items.field("option_id")] if has_candidates else []),
    )
    options = _options(option_ids, item_code)
    uniform = at_rows(options.uniform, parsed_at, False)
    first = at_rows(options.first, parsed_at, -1)
    option_correct = option_valid & uniform & (first == gold_code[sample_at])
    chosen = option_valid & (at_rows(options.length, parsed_at, 0) == 1)
    selected = np.where(chosen, first, -1)  # a null id (-1) selects nothing
    _legacy_gold_sets(
        samples, option_ids, sample_at, parsed_at, gold_code, is_legacy, option_correct,
        option_valid,
    )  # fmt: skip

    # Gold box per row: the sample's gold_bbox; for Future Observation the box of the
    # candidate the model selected (strict, compatible) or the released answer box when
    # there is one (legacy keeps the authors' rule, §3.4). IoU is computed per box source.
    pred = Boxes.of(single(parsed["bbox"]))
    pred_at = np.where(bbox_valid, parsed_at, -1)
    is_future = flags(pc.equal(samples["task"], SELECTED_CANDIDATE_TASK))[sample_at]
    gold_at = sample_at.copy()
    released_rows = np.flatnonzero(is_future & is_legacy)
    answer_bbox = single(samples["answer_bbox"]) if "answer_bbox" in samples.column_names else None
    if answer_bbox is not None and answer_bbox.null_count < len(answer_bbox) and len(released_rows):
        released = Boxes.of(answer_bbox)
        released_rows = released_rows[released.present()[sample_at[released_rows]]]
    else:
        released_rows = released_rows[:0]
    use_selected = np.flatnonzero(is_future & ~is_legacy)
    gold_at[released_rows] = -1
    gold_at[use_selected] = -1
    iou = pair_iou(pred, pred_at, Boxes.of(single(samples["gold_bbox"])), gold_at)
    if len(released_rows):
        iou[released_rows] = pair_iou(
            pred, pred_at[released_rows], released, sample_at[released_rows]
        )
    if len(use_selected) and has_candidates:
        ref = _candidate_refs(
            candidates, sample_at[use_selected], selected[use_selected], candidate_code[0]
        )
        iou[use_selected] = pair_iou(
            pred, pred_at[use_selected], Boxes.of(candidate_items.field("bbox")), ref
        )
    hit = iou >= IOU_HIT
    task = take_rows(samples["task"], sample_at)
    return {
        "sample_id": take_rows(samples["sample_id"], sample_at),
        "task": task,
        "request_task": task,
        "parse": parse,
        "difficulty": take_rows(samples["difficulty"], sample_at),
        "responded": source.responded,
        "valid": parsed_flag("all_valid"),
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
