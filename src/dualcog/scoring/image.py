"""Image task scoring (docs/protocol.md §4), all rows of all image tasks in one compiled pass.

The work happens on the two tables as they are (`row_source.RowSource`), joined only as
integer positions: option ids become integer codes, and the compiled rule (`box_kernel`)
reads list columns and flags from Arrow's buffers in place; nothing is copied row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.schemas import SAMPLES
from dualcog.scoring.columns import (
    Bits,
    ListBuffers,
    flags,
    list_layout,
    single,
    string_codes,
    take_rows,
)
from dualcog.scoring.geometry import _as_list_array
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


def _legacy_gold_sets(
    source: RowSource, parsed_ids: pa.Array, gold_code: np.ndarray, correct: np.ndarray
) -> None:
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
    set_codes = string_codes(pc.list_flatten(gold_sets))[0]
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


def score_image(source: RowSource) -> dict[str, np.ndarray | pa.Array | pa.ChunkedArray]:
    """Score the image rows of `source` (one per sample and parse mode).

    Samples need sample_id, task, difficulty, gold_option_id, gold_bbox, candidates (and for
    legacy gold_option_ids, answer_bbox); parsed rows all_valid, option_ids, option_valid,
    bbox, bbox_valid. An unanswered row has every field invalid.
    """
    # Deferred: numba's import costs ~0.2 s, and only score jobs score (tables and explorer
    # jobs import this package too).
    from dualcog.scoring.box_kernel import score_image_kernel

    samples, parsed = source.samples, source.parsed
    sample_at, parsed_at, parse = source.sample_at, source.parsed_at, source.parse

    # Options: correct iff valid and the set of predicted ids is {gold} (strict, compatible:
    # "the one id == gold"; legacy: "set(letters) == {gold}", §3.4), on integer codes.
    option_ids = _as_list_array(single(parsed["option_ids"]), pa.string())
    has_candidates = "candidates" in samples.column_names
    candidates = ListBuffers.of(
        single(samples["candidates"]) if has_candidates
        else pa.nulls(samples.num_rows, SAMPLES.field("candidates").type)
    )  # fmt: skip
    options = ListBuffers.of(option_ids)
    item_code, gold_code, candidate_code = string_codes(
        options.items, samples["gold_option_id"], candidates.items.field("option_id")
    )

    # Gold box per row: the sample's gold_bbox; for Future Observation the box of the
    # candidate the model selected (strict, compatible) or the released answer box when
    # there is one (legacy keeps the authors' rule, §3.4).
    pred = ListBuffers.of(_as_list_array(single(parsed["bbox"]), pa.float64()))
    gold = ListBuffers.of(_as_list_array(single(samples["gold_bbox"]), pa.float64()))
    boxes = ListBuffers.of(_as_list_array(candidates.items.field("bbox"), pa.float64()))
    released = ListBuffers.of(
        _as_list_array(single(samples["answer_bbox"]), pa.float64())
        if "answer_bbox" in samples.column_names
        else pa.nulls(samples.num_rows, pa.list_(pa.float64()))
    )
    option_correct, iou = score_image_kernel(
        (sample_at, parsed_at, source.legacy, source.responded),
        Bits.flag(parsed["option_valid"]).kernel_args()
        + Bits.flag(parsed["bbox_valid"]).kernel_args(),
        options.kernel_args(item_code),
        pred.kernel_args(pred.float_items()),
        (gold_code, *gold.kernel_args(gold.float_items())),
        flags(pc.equal(samples["task"], SELECTED_CANDIDATE_TASK)),
        released.kernel_args(released.float_items()),
        candidates.kernel_args(candidate_code) + boxes.kernel_args(boxes.float_items()),
    )
    _legacy_gold_sets(source, option_ids, gold_code, option_correct)
    hit = iou >= IOU_HIT
    task = take_rows(samples["task"], sample_at)
    return {
        "sample_id": take_rows(samples["sample_id"], sample_at),
        "task": task,
        "request_task": task,
        "parse": parse,
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
