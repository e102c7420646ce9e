"""Temporal intervals (docs/protocol.md §5): tIoU, interval validity, class-aware matching."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# numpy is imported by the functions that compute with it: the explorer's jobs use only the
# plain-Python parts (`_pair`, `greedy_walk`) and do not load numpy (dualcog.runtime).

F1_THRESHOLD = 0.5
DURATION_SLACK_SEC = 1.0  # a prediction may end up to 1 s past the video end, then is clipped


def tiou_matrix(gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """tIoU of every (gold, pred) pair of two (G, 2) / (P, 2) arrays; union <= 0 gives 0."""
    import numpy as np

    gs, ge = gold[:, 0][:, None], gold[:, 1][:, None]
    ps, pe = pred[:, 0][None, :], pred[:, 1][None, :]
    inter = np.clip(np.minimum(ge, pe) - np.maximum(gs, ps), 0, None)
    union = (ge - gs) + (pe - ps) - inter
    out = np.zeros(inter.shape)
    np.divide(inter, union, out=out, where=union > 0)
    return out


def tiou(gold: Sequence[float], pred: Sequence[float]) -> float:
    import numpy as np

    return float(tiou_matrix(np.asarray([gold], float), np.asarray([pred], float))[0, 0])


def _pair(value: object) -> tuple[float, float] | None:
    """A 2-number pair as floats, or None when the value is not one."""
    if type(value) is list and len(value) == 2:  # two floats, as Arrow gives them
        s, e = value
        if type(s) is float and type(e) is float:
            return s, e
    np = sys.modules.get("numpy")  # a numpy array exists only once numpy is loaded
    is_array = np is not None and isinstance(value, np.ndarray)
    if is_array and value.dtype.kind == "f" and value.shape == (2,):
        return float(value[0]), float(value[1])  # the common case, read from Parquet
    if value is None or isinstance(value, str | bytes):
        return None
    try:
        items = list(value)  # type: ignore[call-overload]
    except TypeError:
        return None
    if len(items) != 2 or any(isinstance(v, bool | str | bytes) or v is None for v in items):
        return None
    try:
        return float(items[0]), float(items[1])
    except (TypeError, ValueError):
        return None


def clipped_pairs(
    intervals: Iterable | None, duration: float | None
) -> tuple[list[tuple[float, float]], int]:
    """Valid predicted intervals clipped to [0, D], as pairs, and how many were invalid.

    Valid: finite and 0 <= s < e <= D + 1 s. Invalid ones (non-finite, negative, reversed,
    zero-length, past D + 1) match nothing: the caller counts them as false positives.
    Without a known duration there is no upper bound and no clipping. Plain Python: the
    explorer uses it without loading numpy.
    """
    limit = math.inf if duration is None or not math.isfinite(duration) else duration
    kept: list[tuple[float, float]] = []
    invalid = 0
    for value in intervals if intervals is not None else ():
        pair = _pair(value)
        if pair is None:
            invalid += 1
            continue
        s, e = pair
        if not (math.isfinite(s) and math.isfinite(e) and 0 <= s < e <= limit + DURATION_SLACK_SEC):
            invalid += 1
            continue
        kept.append((min(s, limit), min(e, limit)))  # s may exceed D: then zero length
    return kept, invalid


def clip_predicted(intervals: Iterable | None, duration: float | None) -> tuple[np.ndarray, int]:
    """`clipped_pairs` as a (P, 2) array."""
    import numpy as np

    kept, invalid = clipped_pairs(intervals, duration)
    return np.asarray(kept, dtype=float).reshape(-1, 2), invalid


def gold_array(intervals: Iterable | None) -> np.ndarray:
    """Gold intervals as released (never clipped or reordered); a malformed one stays in the
    denominator as an interval that can never be matched."""
    import numpy as np

    rows = []
    for value in intervals if intervals is not None else ():
        pair = _pair(value)
        rows.append(pair if pair is not None else (math.nan, math.nan))
    return np.asarray(rows, dtype=float).reshape(-1, 2)


def _scored_pairs(gold: np.ndarray, pred: np.ndarray) -> list[tuple[float, int, int]]:
    """(tIoU, gold index, pred index) of every pair with tIoU > 0, in greedy order:
    tIoU descending, ties by lower gold index then lower predicted index."""
    import numpy as np

    scores = tiou_matrix(gold, pred)
    gi, pi = np.nonzero(scores > 0)
    pairs = list(zip(scores[gi, pi].tolist(), gi.tolist(), pi.tolist(), strict=True))
    pairs.sort(key=lambda t: (-t[0], t[1], t[2]))
    return pairs


def greedy_walk(
    pairs: list[tuple[float, int, int]], threshold: float
) -> list[tuple[int, int, float]]:
    """(gold index, pred index, tIoU) of the pairs taken in order while tIoU >= threshold,
    each side at most once (the explorer draws these)."""
    gold_used: set[int] = set()
    pred_used: set[int] = set()
    taken = []
    for value, g, p in pairs:
        if value < threshold:
            break  # pairs are sorted by tIoU descending
        if g not in gold_used and p not in pred_used:
            gold_used.add(g)
            pred_used.add(p)
            taken.append((g, p, value))
    return taken


def _greedy(pairs: list[tuple[float, int, int]], threshold: float) -> list[float]:
    """The tIoU of each pair `greedy_walk` takes, in the order taken."""
    return [value for _, _, value in greedy_walk(pairs, threshold)]


def greedy_match(gold: np.ndarray, pred: np.ndarray, threshold: float, strict: bool) -> np.ndarray:
    """One-to-one greedy matching of one class; returns the tIoU of each matched pair.

    Candidate pairs have tIoU >= threshold (or > threshold when `strict`), taken by tIoU
    descending, ties by lower gold index then lower predicted index, when both sides are free.
    """
    import numpy as np

    if len(gold) == 0 or len(pred) == 0:
        return np.empty(0)
    pairs = _scored_pairs(gold, pred)  # tIoU > 0 always: a 0 pair never matches either way
    if strict:
        pairs = [t for t in pairs if t[0] > threshold]
    return np.asarray(_greedy(pairs, threshold), dtype=float)


@dataclass(frozen=True)
class IntervalCounts:
    """Matching outcome of one sample at one level (or visibility)."""

    tp: int
    fp: int
    fn: int
    tiou_sum: float  # sum over gold intervals of the matched tIoU under threshold "> 0"
    n_gold: int

    @property
    def sample_f1(self) -> float:
        return f1_score(self.tp, self.fp, self.fn)


def f1_score(tp: float, fp: float, fn: float) -> float:
    """2TP / (2TP + FP + FN); 1.0 when there is nothing to find and nothing predicted."""
    denominator = 2 * tp + fp + fn
    return 1.0 if denominator == 0 else 2 * tp / denominator


def left_to_right_sum(values: Iterable[float]) -> float:
    """The plain float sum from 0.0, in order: the vectorized scorer adds in the same order
    (`interval_batch.sequential_sums`), and Python 3.12's `sum` of floats compensates
    rounding (its last bits differ)."""
    total = 0.0
    for value in values:
        total += value
    return total


def match_classes(
    gold: Mapping[str, np.ndarray],
    pred: Mapping[str, np.ndarray],
    invalid_pred: int = 0,
) -> IntervalCounts:
    """Class-aware matching: gold and valid predicted intervals keyed by class.

    Predicted intervals of a class absent from `gold` are all false positives, as are the
    `invalid_pred` intervals that failed validation.
    """
    tp = 0
    tiou_sum = 0.0
    n_gold = sum(len(v) for v in gold.values())
    n_pred = sum(len(v) for v in pred.values()) + invalid_pred
    for label, gold_intervals in gold.items():
        pred_intervals = pred.get(label)
        if pred_intervals is None or len(pred_intervals) == 0 or len(gold_intervals) == 0:
            continue
        pairs = _scored_pairs(gold_intervals, pred_intervals)
        tp += len(_greedy(pairs, F1_THRESHOLD))
        tiou_sum += left_to_right_sum(_greedy(pairs, 0.0))  # every listed pair has tIoU > 0
    return IntervalCounts(tp=tp, fp=n_pred - tp, fn=n_gold - tp, tiou_sum=tiou_sum, n_gold=n_gold)
