"""Box handling: list columns read as box buffers in place, and the row-wise IoU rule.

`Boxes` reads a list<double> column in place (Arrow's value buffer and each row's offset),
never as an (N, 4) copy; the compiled scorer (`box_kernel`) reads boxes from it. `box_iou`
is the rule on (N, 4) arrays, which the kernel follows operation for operation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Boxes:
    """The rows of a box column, read in place: row i's coordinates are
    `flat[start[i]:start[i] + 4]` (meaningful only where `four` holds)."""

    flat: np.ndarray  # Arrow's value buffer as float64 (null items NaN)
    start: np.ndarray  # first value of each row, kept in bounds
    four: np.ndarray  # the row is a list of exactly four items

    @classmethod
    def of(cls, values: Sequence) -> Boxes:
        array = _as_list_array(values, pa.float64())
        offsets = np.asarray(array.offsets.to_numpy(), dtype=np.int64)
        flat = array.values.to_numpy(zero_copy_only=False)  # null items -> NaN
        flat = flat if flat.dtype == np.float64 else flat.astype(np.float64)
        four = np.diff(offsets) == 4
        if array.null_count:
            four &= np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
        if len(flat) < 4:
            flat = np.full(4, np.nan)
        # Rows that are not 4-lists read whatever lies there (never used); keep in bounds.
        start = np.minimum(offsets[:-1], len(flat) - 4)
        return cls(flat, start, four)

    def __len__(self) -> int:
        return len(self.four)

    def present(self) -> np.ndarray:
        """Rows that `boxes_to_array` keeps: four numbers, none NaN."""
        out = self.four.copy()
        for k in range(4):
            out &= ~np.isnan(self.flat[self.start + k])
        return out

    def array(self) -> np.ndarray:
        out = np.full((len(self), 4), np.nan)
        rows = self.four
        out[rows] = self.flat[self.start[rows, None] + np.arange(4)]
        return out


def boxes_to_array(values: Sequence) -> np.ndarray:
    """Rows of [x1, y1, x2, y2] as a float (N, 4) array; absent or not-4-long rows give NaN."""
    return Boxes.of(values).array()


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
