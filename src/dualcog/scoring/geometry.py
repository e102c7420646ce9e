"""Vectorized box handling: list columns to box arrays, and IoU of many box pairs at once.

`Boxes` reads a list<double> column in place (Arrow's value buffer and each row's offset),
never as an (N, 4) copy. `pair_iou` computes IoU only for the row pairs whose two boxes are
usable, block by block, with the same float operations as `box_iou`, so the values are
identical bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

_BLOCK = 1 << 16  # rows per block: temporaries stay in cache and memory is reused


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
    """The rows of a box column, read in place: row i's coordinates are
    `flat[start[i]:start[i] + 4]` (meaningful only where `four` holds).

    `usable` has one more entry than there are rows, False, so that position -1 (no box)
    needs no special case.
    """

    flat: np.ndarray  # Arrow's value buffer as float64 (null items NaN)
    start: np.ndarray  # first value of each row, kept in bounds
    four: np.ndarray  # the row is a list of exactly four items
    usable: np.ndarray  # four finite numbers with x2 > x1 and y2 > y1; then a False

    @classmethod
    def of(cls, values: Sequence) -> Boxes:
        array = _as_list_array(values, pa.float64())
        n = len(array)
        offsets = np.asarray(array.offsets.to_numpy(), dtype=np.int64)
        flat = array.values.to_numpy(zero_copy_only=False)  # null items -> NaN
        flat = flat if flat.dtype == np.float64 else flat.astype(np.float64)
        lengths = np.diff(offsets)
        four = lengths == 4
        if array.null_count:
            four &= np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
        if len(flat) < 4:
            flat = np.full(4, np.nan)
        # Rows that are not 4-lists read whatever lies there (never used); keep in bounds.
        start = np.minimum(offsets[:-1], len(flat) - 4)
        usable = np.zeros(n + 1, bool)
        for first in range(0, n, _BLOCK):  # by blocks: temporaries stay in cache
            b = slice(first, min(first + _BLOCK, n))
            x1, y1, x2, y2 = _coordinates(flat, start[b])
            ok = usable[b]
            with np.errstate(invalid="ignore"):
                np.greater(x2 - x1, 0, out=ok)
                ok &= (y2 - y1) > 0
            for column in (x1, y1, x2, y2):
                ok &= np.isfinite(column)
            ok &= four[b]
        return cls(flat, start, four, usable)

    def __len__(self) -> int:
        return len(self.four)

    def present(self) -> np.ndarray:
        """Rows that `boxes_to_array` keeps: four numbers, none NaN."""
        out = self.four.copy()
        for column in _coordinates(self.flat, self.start):
            out &= ~np.isnan(column)
        return out

    def array(self) -> np.ndarray:
        out = np.full((len(self), 4), np.nan)
        rows = self.four
        out[rows] = self.flat[self.start[rows, None] + np.arange(4)]
        return out


def _coordinates(flat: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, ...]:
    return flat[start], flat[start + 1], flat[start + 2], flat[start + 3]


def boxes_to_array(values: Sequence) -> np.ndarray:
    """Rows of [x1, y1, x2, y2] as a float (N, 4) array; absent or not-4-long rows give NaN."""
    return Boxes.of(values).array()


def pair_iou(pred: Boxes, pred_at: np.ndarray, gold: Boxes, gold_at: np.ndarray) -> np.ndarray:
    """IoU of the box pairs (pred row pred_at[i], gold row gold_at[i]); -1 is no box.

    As `box_iou`: 0 unless both boxes are usable and the union is positive.
    """
    iou = np.zeros(len(pred_at))
    for first in range(0, len(pred_at), _BLOCK):
        block = slice(first, first + _BLOCK)
        p, g = pred_at[block], gold_at[block]
        rows = np.flatnonzero(pred.usable[p] & gold.usable[g])
        iou[first + rows] = _usable_iou(pred, p[rows], gold, g[rows])
    return iou


def _usable_iou(pred: Boxes, p: np.ndarray, gold: Boxes, g: np.ndarray) -> np.ndarray:
    px1, py1, px2, py2 = _coordinates(pred.flat, pred.start[p])
    gx1, gy1, gx2, gy2 = _coordinates(gold.flat, gold.start[g])
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
    value = np.zeros(len(p))
    np.divide(inter, union, out=value, where=union > 0)
    return value


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
