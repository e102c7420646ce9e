"""Vectorized box handling: list columns to box arrays, and IoU of many box pairs at once.

`Boxes` reads a list<double> column without building an (N, 4) copy where it can: when every
row is a valid 4-list the coordinates are strided views of Arrow's value buffer. `pair_iou`
then computes IoU only for the row pairs whose two boxes are usable, with the same float
operations as `box_iou`, so the values are identical bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


def _as_list_array(values: Sequence, value_type: pa.DataType) -> pa.ListArray:
    """A list column (lists, tuples, numpy arrays or None per row) as one Arrow list array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values if values.type == pa.list_(value_type) else values.cast(pa.list_(value_type))
    try:  # fast path: pandas' NaN (left by a join) becomes null
        return pa.array(values, type=pa.list_(value_type), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        pass
    # A row that is not a sequence is null.
    rows = [list(v) if isinstance(v, Sequence | np.ndarray) else None for v in values]
    return pa.array(rows, type=pa.list_(value_type))


@dataclass(frozen=True)
class Boxes:
    """The rows of a box column as coordinate columns (read only where `four` holds).

    `usable` has one more entry than there are rows, False, so that position -1 (no box)
    needs no special case.
    """

    x1: np.ndarray
    y1: np.ndarray
    x2: np.ndarray
    y2: np.ndarray
    four: np.ndarray  # the row is a list of exactly four items
    usable: np.ndarray  # four finite numbers with x2 > x1 and y2 > y1; then a False

    @classmethod
    def of(cls, values: Sequence) -> Boxes:
        array = _as_list_array(values, pa.float64())
        n = len(array)
        offsets = np.asarray(array.offsets.to_numpy(), dtype=np.int64)
        flat = array.values.to_numpy(zero_copy_only=False)  # null items -> NaN
        flat = flat if flat.dtype == np.float64 else flat.astype(np.float64)
        start = offsets[:-1]
        lengths = np.diff(offsets)
        if array.null_count == 0 and bool((lengths == 4).all()):
            four = np.ones(n, bool)
            coords = flat[offsets[0] : offsets[0] + 4 * n].reshape(n, 4)  # a view
            x1, y1, x2, y2 = coords[:, 0], coords[:, 1], coords[:, 2], coords[:, 3]
        else:
            four = lengths == 4
            if array.null_count:
                four &= np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
            # Rows that are not 4-lists read whatever lies there (never used); keep in bounds.
            at = np.minimum(start, max(len(flat) - 4, 0))
            if len(flat) < 4:
                flat = np.full(4, np.nan)
            x1, y1, x2, y2 = flat[at], flat[at + 1], flat[at + 2], flat[at + 3]
        usable = np.zeros(n + 1, bool)
        with np.errstate(invalid="ignore"):
            ok = usable[:n]
            np.greater(x2 - x1, 0, out=ok)
            ok &= (y2 - y1) > 0
        for column in (x1, y1, x2, y2):
            ok &= np.isfinite(column)
        ok &= four
        return cls(x1, y1, x2, y2, four, usable)

    def __len__(self) -> int:
        return len(self.four)

    def present(self) -> np.ndarray:
        """Rows that `boxes_to_array` keeps: four numbers, none NaN."""
        out = self.four.copy()
        for column in (self.x1, self.y1, self.x2, self.y2):
            out &= ~np.isnan(column)
        return out

    def array(self) -> np.ndarray:
        out = np.full((len(self), 4), np.nan)
        rows = self.four
        for k, column in enumerate((self.x1, self.y1, self.x2, self.y2)):
            out[rows, k] = column[rows]
        return out


def boxes_to_array(values: Sequence) -> np.ndarray:
    """Rows of [x1, y1, x2, y2] as a float (N, 4) array; absent or not-4-long rows give NaN."""
    return Boxes.of(values).array()


def pair_iou(pred: Boxes, pred_at: np.ndarray, gold: Boxes, gold_at: np.ndarray) -> np.ndarray:
    """IoU of the box pairs (pred row pred_at[i], gold row gold_at[i]); -1 is no box.

    As `box_iou`: 0 unless both boxes are usable and the union is positive.
    """
    rows = np.flatnonzero(pred.usable[pred_at] & gold.usable[gold_at])
    p, g = pred_at[rows], gold_at[rows]
    px1, py1, px2, py2 = pred.x1[p], pred.y1[p], pred.x2[p], pred.y2[p]
    gx1, gy1, gx2, gy2 = gold.x1[g], gold.y1[g], gold.x2[g], gold.y2[g]
    union = (px2 - px1) * (py2 - py1)
    union += (gx2 - gx1) * (gy2 - gy1)
    iw = np.minimum(px2, gx2)
    iw -= np.maximum(px1, gx1)
    ih = np.minimum(py2, gy2)
    ih -= np.maximum(py1, gy1)
    np.maximum(iw, 0.0, out=iw)
    np.maximum(ih, 0.0, out=ih)
    inter = np.multiply(iw, ih, out=iw)
    union -= inter
    value = np.zeros(len(rows))
    np.divide(inter, union, out=value, where=union > 0)
    iou = np.zeros(len(pred_at))
    iou[rows] = value
    return iou


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
