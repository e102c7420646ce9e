"""Box handling: box columns as (N, 4) arrays, and the row-wise IoU rule on them
(`box_iou`), which the image scorer applies to all rows at once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from dualcog.scoring.columns import single


def _as_list_array(values: Sequence, value_type: pa.DataType) -> pa.ListArray:
    """A list column (lists, tuples, numpy arrays or None per row) as one Arrow list array."""
    if isinstance(values, pa.ChunkedArray):
        values = single(values)
    if isinstance(values, pa.Array):
        return values if values.type == pa.list_(value_type) else values.cast(pa.list_(value_type))
    try:  # fast path: pandas' NaN (left by a join) becomes null
        return pa.array(values, type=pa.list_(value_type), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        pass
    # A row that is not a sequence is null.
    rows = [list(v) if isinstance(v, Sequence | np.ndarray) else None for v in values]
    return pa.array(rows, type=pa.list_(value_type))


def boxes_to_array(values: Sequence) -> np.ndarray:
    """Rows of [x1, y1, x2, y2] as a float (N, 4) array; absent or not-4-long rows give NaN."""
    array = _as_list_array(values, pa.float64())
    offsets = np.asarray(array.offsets.to_numpy(), dtype=np.int64)
    four = np.diff(offsets) == 4
    if array.null_count:
        four &= np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
    flat = array.values.to_numpy(zero_copy_only=False).astype(np.float64)  # null items NaN
    out = np.full((len(four), 4), np.nan)
    out[four] = flat[offsets[:-1][four, None] + np.arange(4)]
    return out


def box_iou(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Row-wise IoU of two (N, 4) xyxy arrays.

    A box that is non-finite or degenerate (x2 <= x1 or y2 <= y1, zero area) on either side
    gives 0, as does a pair whose union is not positive (docs/protocol.md §4).
    """
    pred = np.asarray(pred, dtype=float).reshape(-1, 4)
    gold = np.asarray(gold, dtype=float).reshape(-1, 4)
    with np.errstate(invalid="ignore"):
        pw, ph = pred[:, 2] - pred[:, 0], pred[:, 3] - pred[:, 1]
        gw, gh = gold[:, 2] - gold[:, 0], gold[:, 3] - gold[:, 1]
        usable = (pw > 0) & (ph > 0) & (gw > 0) & (gh > 0)  # False for NaN too
        usable &= np.isfinite(pred).all(axis=1) & np.isfinite(gold).all(axis=1)
        iw = np.minimum(pred[:, 2], gold[:, 2]) - np.maximum(pred[:, 0], gold[:, 0])
        ih = np.minimum(pred[:, 3], gold[:, 3]) - np.maximum(pred[:, 1], gold[:, 1])
        inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
        union = pw * ph + gw * gh - inter
        ok = usable & (union > 0)
    iou = np.zeros(len(pred))
    iou[ok] = inter[ok] / union[ok]
    return iou
