"""Class-aware greedy interval matching of many samples at once, on flat arrays.

The rule is `intervals.match_classes` (docs/protocol.md §5): within one class of
one sample, pairs are taken by tIoU descending, ties by lower gold index then lower predicted
index, each interval at most once. Here every (sample, level, class) is a *group*; the
intervals of all groups sit in flat arrays, and the greedy rule is applied to all groups
together by rounds of locally dominant pairs: a pair that ranks first among the live pairs
of both its gold and its predicted interval is exactly a pair the sequential greedy takes
(nothing ranked above it can claim either side), so taking all such pairs, then dropping
the pairs that touch a taken interval, reproduces the sequential result in a few rounds.
Sums are accumulated in the plain implementation's order, so the numbers are identical.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dualcog.scoring.intervals import F1_THRESHOLD

_BLOCK = 1 << 16  # pairs per block


@dataclass(frozen=True)
class GroupedIntervals:
    """Intervals of many groups: group id per interval, in within-group order."""

    group: np.ndarray  # int64, non-decreasing after `sorted_by_group`
    start: np.ndarray  # float64
    end: np.ndarray  # float64

    def sorted_by_group(self) -> GroupedIntervals:
        order = np.argsort(self.group, kind="stable")  # keeps the within-group order
        return GroupedIntervals(self.group[order], self.start[order], self.end[order])


@dataclass(frozen=True)
class MatchResult:
    """Per group: matches at tIoU >= 0.5, and the greedy-ordered sum of matched tIoU > 0."""

    tp: np.ndarray  # int64 per group
    tiou_sum: np.ndarray  # float64 per group, summed in the sequential greedy order


def _offsets(group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(group, minlength=n_groups)
    return counts, np.concatenate(([0], np.cumsum(counts)[:-1]))


def candidate_pairs(
    gold: GroupedIntervals, pred: GroupedIntervals, n_groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gold index, pred index, tIoU) of every same-group pair with tIoU > 0, by group, then
    gold index, then pred index."""
    p_count, p_start = _offsets(pred.group, n_groups)
    width = p_count[gold.group]  # pairs of each gold interval
    total = int(width.sum())
    if total == 0:
        empty = np.empty(0, np.int64)
        return empty, empty, np.empty(0)
    gi = np.repeat(np.arange(len(width)), width)
    first = np.cumsum(width) - width
    pi = np.arange(total) - np.repeat(first - p_start[gold.group], width)
    value = np.empty(total)
    for at in range(0, total, _BLOCK):  # by blocks: temporaries stay in cache
        b = slice(at, at + _BLOCK)
        g, p = gi[b], pi[b]
        gs, ge, ps, pe = gold.start[g], gold.end[g], pred.start[p], pred.end[p]
        # The same float operations as intervals.tiou_matrix, so values are bit-identical.
        with np.errstate(invalid="ignore"):
            inter = np.minimum(ge, pe)
            inter -= np.maximum(gs, ps)
            np.clip(inter, 0, None, out=inter)
            union = ge - gs
            union += pe - ps
            union -= inter
            out = value[b]
            out[:] = 0.0
            np.divide(inter, union, out=out, where=union > 0)
    keep = np.flatnonzero(value > 0)
    return gi[keep], pi[keep], value[keep]


def _rounds(
    gi: np.ndarray, pi: np.ndarray, value: np.ndarray, n_gold: int, n_pred: int
) -> tuple[np.ndarray, np.ndarray]:
    """The greedy by rounds of locally dominant pairs: (taken pair indices, rank of each pair
    in the global order tIoU descending, gold index, pred index)."""
    order = np.lexsort((pi, gi, -value))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    sentinel = np.iinfo(np.int64).max
    best_gold = np.full(n_gold, sentinel)
    best_pred = np.full(n_pred, sentinel)
    gold_used = np.zeros(n_gold, bool)
    pred_used = np.zeros(n_pred, bool)
    live = np.arange(len(value))
    taken = []
    while len(live):
        g, p, r = gi[live], pi[live], rank[live]
        best_gold[g] = sentinel
        best_pred[p] = sentinel
        np.minimum.at(best_gold, g, r)
        np.minimum.at(best_pred, p, r)
        chosen = live[(best_gold[g] == r) & (best_pred[p] == r)]  # never empty: the best one
        taken.append(chosen)
        gold_used[gi[chosen]] = True
        pred_used[pi[chosen]] = True
        live = live[~(gold_used[g] | pred_used[p])]
    return np.concatenate(taken) if taken else np.empty(0, np.int64), rank


def taken_mask(
    gi: np.ndarray, pi: np.ndarray, value: np.ndarray, n_gold: int, n_pred: int
) -> np.ndarray:
    """Which pairs the sequential greedy takes (as `greedy_pairs`, without their order).

    A pair that is the only pair of its gold and of its predicted interval is always taken
    (nothing competes for either side): most pairs are such, and only the others go through
    the rounds.
    """
    taken = np.zeros(len(value), bool)
    if len(value) == 0:
        return taken
    alone = np.bincount(gi, minlength=n_gold)[gi] == 1
    alone &= np.bincount(pi, minlength=n_pred)[pi] == 1
    taken[alone] = True
    rest = np.flatnonzero(~alone)
    if len(rest):
        chosen, _ = _rounds(gi[rest], pi[rest], value[rest], n_gold, n_pred)
        taken[rest[chosen]] = True
    return taken


def greedy_pairs(
    gi: np.ndarray, pi: np.ndarray, value: np.ndarray, n_gold: int, n_pred: int
) -> np.ndarray:
    """Indices (into the pair arrays) of the pairs the sequential greedy takes, in its order.

    Pairs must come from disjoint groups (a gold and a predicted interval belong to one
    group), so one global order (tIoU descending, gold index, pred index) ranks every group.
    """
    chosen = np.flatnonzero(taken_mask(gi, pi, value, n_gold, n_pred))
    return chosen[np.lexsort((pi[chosen], gi[chosen], -value[chosen]))]


def _weighted_counts(group: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    if len(group) == 0:  # np.bincount of nothing is an integer array
        return np.zeros(n_groups)
    return np.bincount(group, weights=values, minlength=n_groups)


def sequential_sums(
    values: np.ndarray, group: np.ndarray, n_groups: int, descending: bool = False
) -> np.ndarray:
    """Per group, the left-to-right float sum of its values in the order given (as Python's
    `sum` over a list, from 0), so that results match the plain implementation bit for bit;
    with `descending`, in the order largest to smallest instead.

    Zeros change no such sum and are dropped; a group of one or two values is summed in any
    order (a + b == b + a exactly), so only groups of three or more are summed in order.
    """
    keep = values != 0
    values, group = values[keep], group[keep]
    counts = np.bincount(group, minlength=n_groups)
    many = counts[group] > 2
    if not many.any():
        return _weighted_counts(group, values, n_groups)
    out = _weighted_counts(group[~many], values[~many], n_groups)
    group, values = group[many], values[many]
    if not (np.diff(group) >= 0).all():
        order = np.argsort(group, kind="stable")
        group, values = group[order], values[order]
    first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    counts = np.diff(np.append(first, len(group)))
    for size in np.unique(counts).tolist():  # groups of one size as the rows of a matrix
        rows = first[counts == size]
        block = values[rows[:, None] + np.arange(size)]
        if descending:
            block = np.sort(block, axis=1)[:, ::-1]  # equal values are interchangeable
        total = block[:, 0].copy()
        for k in range(1, size):
            total += block[:, k]
        out[group[rows]] = total
    return out


def match_groups(gold: GroupedIntervals, pred: GroupedIntervals, n_groups: int) -> MatchResult:
    """tp (tIoU >= 0.5) and greedy-ordered tIoU sum (tIoU > 0) of every group."""
    gold, pred = gold.sorted_by_group(), pred.sorted_by_group()
    gi, pi, value = candidate_pairs(gold, pred, n_groups)
    n_gold, n_pred = len(gold.group), len(pred.group)
    strong = value >= F1_THRESHOLD
    gs, ps, vs = gi[strong], pi[strong], value[strong]
    hits = taken_mask(gs, ps, vs, n_gold, n_pred)
    tp = np.bincount(gold.group[gs[hits]], minlength=n_groups).astype(np.int64)
    taken = taken_mask(gi, pi, value, n_gold, n_pred)
    tiou_sum = sequential_sums(value[taken], gold.group[gi[taken]], n_groups, descending=True)
    return MatchResult(tp=tp, tiou_sum=tiou_sum)
