"""Compiled class-aware interval matching of many rows (docs/protocol.md §5), one row at a time.

The rule is `video.score_behavior_answer` / `intervals.match_classes`, applied row by row over
flat arrays read from Arrow list columns. A row is one sample answered by one parsed row; it
has option items (option id code, composite or not), gold items (code, composite or not,
intervals) and answer items (code, intervals). Per row:

- the level of an option id is its option's (the last listed), else its first gold item's,
  else atomic; a gold item's level is its own;
- a class is a (level, option id) of the gold items, in order of first appearance; repeated
  items of one class merge their intervals in item order, on either side;
- a predicted interval is valid when finite and 0 <= s < e <= limit + slack, then clipped to
  [0, limit]; an invalid one, or one of a class absent from gold, is a false positive;
- within a class, pairs with tIoU > 0 are taken greedily by tIoU descending, ties by lower
  gold index then lower predicted index, each interval at most once: the pairs taken among
  those with tIoU >= threshold count as true positives, and the tIoU of the pairs taken among
  all of them are summed in the order taken, per class from 0, then class by class.

The float operations are those of the plain rule in the same order (no fastmath), so every
number is bit-identical. numba is imported here only: the scorers import this module inside
the function that uses it.
"""

from __future__ import annotations

import numba
import numpy as np

_SORT_BY_INSERTION = 24  # pairs of one class; more go through a stable merge sort


# error_model="numpy": a division by zero gives inf or NaN (as in numpy) instead of raising,
# so tIoU is computed without a branch; such values are never kept. Not fastmath.
@numba.njit(cache=True, error_model="numpy")
def row_interval_scores(
    sample_at,
    parsed_at,
    answered,
    limit,
    option_offsets,
    option_code,
    option_composite,
    gold_offsets,
    gold_code,
    gold_composite,
    gold_interval_offsets,
    gold_number_offsets,
    gold_numbers,
    answer_offsets,
    answer_code,
    answer_interval_offsets,
    answer_number_offsets,
    answer_numbers,
    n_codes,
    levels,
    slack,
    threshold,
):
    """Interval and label counts of every row at each level.

    Row r is sample `sample_at[r]` (its options and gold items) answered by the items of
    parsed row `parsed_at[r]` when `answered[r]` holds (else nothing is predicted); `limit[r]`
    is its duration (inf when unknown). Items, intervals and numbers are given by offsets, as
    in Arrow list arrays: row i's items are [offsets[i], offsets[i + 1]), null rows empty; an
    interval is well formed when it has two numbers; option id codes are below `n_codes`.
    With `levels` 2, row r's composite counts are at 2 r and its atomic ones at 2 r + 1; with
    `levels` 1 every item must be atomic and row r's counts are at r. Returns (interval_tp,
    interval_fp, interval_fn, tiou_sum, n_gold_intervals, sample_f1, label_tp, label_fp,
    label_fn).
    """
    n = len(sample_at)
    interval_tp = np.zeros(levels * n, np.int64)
    n_pred = np.zeros(levels * n, np.int64)
    n_gold = np.zeros(levels * n, np.int64)
    interval_fn = np.empty(levels * n, np.int64)
    tiou_sum = np.zeros(levels * n, np.float64)
    label_tp = np.zeros(levels * n, np.int64)
    n_pred_ids = np.zeros(levels * n, np.int64)
    n_gold_ids = np.zeros(levels * n, np.int64)

    # Per option id code (and level): reset after each row by walking its items again.
    level_of = np.full(n_codes, -1, np.int64)  # 0 composite, 1 atomic, -1 not listed
    class_of = np.full(2 * n_codes, -1, np.int64)
    predicted = np.zeros(2 * n_codes, np.bool_)
    # Per class of a row, and per interval of a row; grown when a row needs more.
    class_level = np.empty(8, np.int64)
    class_gold = np.empty(8, np.int64)  # how many gold intervals
    class_gold_at = np.empty(8, np.int64)  # the first one in gold_order (or the gold intervals)
    class_pred = np.empty(8, np.int64)
    class_pred_at = np.empty(8, np.int64)  # the first one in pred_start, pred_end
    fill = np.empty(8, np.int64)
    item_class = np.empty(8, np.int64)
    gold_order = np.empty(16, np.int64)
    kept_start = np.empty(16, np.float64)
    kept_end = np.empty(16, np.float64)
    kept_class = np.empty(16, np.int64)
    sorted_start = np.empty(16, np.float64)
    sorted_end = np.empty(16, np.float64)
    pair_value = np.empty(64, np.float64)
    pair_gold = np.empty(64, np.int64)
    pair_pred = np.empty(64, np.int64)
    gold_used = np.zeros(16, np.bool_)
    pred_used = np.zeros(16, np.bool_)

    for r in range(n):
        s = sample_at[r]
        base = levels * r + levels - 2  # + level (0 composite, 1 atomic)
        o0 = option_offsets[s]
        o1 = option_offsets[s + 1]
        for o in range(o0, o1):
            level_of[option_code[o]] = 0 if option_composite[o] else 1  # the last one wins

        # Classes of the gold items. Most classes have one item: their gold intervals are that
        # item's, in place; when one has several, every class's are listed in gold_order.
        g0 = gold_offsets[s]
        g1 = gold_offsets[s + 1]
        if g1 - g0 > len(class_level):
            size = 2 * (g1 - g0)
            class_level = np.empty(size, np.int64)
            class_gold = np.empty(size, np.int64)
            class_gold_at = np.empty(size, np.int64)
            class_pred = np.empty(size, np.int64)
            class_pred_at = np.empty(size, np.int64)
            fill = np.empty(size, np.int64)
            item_class = np.empty(size, np.int64)
        n_classes = 0
        merged = False
        for g in range(g0, g1):
            code = gold_code[g]
            level = 0 if gold_composite[g] else 1
            if level_of[code] < 0:
                level_of[code] = level
            key = level * n_codes + code
            c = class_of[key]
            k = gold_interval_offsets[g + 1] - gold_interval_offsets[g]
            if c < 0:
                c = n_classes
                class_of[key] = c
                class_level[c] = level
                class_gold[c] = k
                class_gold_at[c] = gold_interval_offsets[g]
                class_pred[c] = 0
                n_classes += 1
                n_gold_ids[base + level] += 1
            else:
                class_gold[c] += k
                merged = True
            item_class[g - g0] = c
            n_gold[base + level] += k
        if merged:
            at = 0
            for c in range(n_classes):
                class_gold_at[c] = at
                fill[c] = at
                at += class_gold[c]
            if at > len(gold_order):
                gold_order = np.empty(2 * at, np.int64)
            for g in range(g0, g1):
                c = item_class[g - g0]
                at = fill[c]
                for i in range(gold_interval_offsets[g], gold_interval_offsets[g + 1]):
                    gold_order[at] = i
                    at += 1
                fill[c] = at

        # Valid predicted intervals of gold classes, clipped, in answer order. Most classes
        # have one answer item: their intervals are contiguous there; else sorted by class.
        q = parsed_at[r]
        a0 = 0
        a1 = 0
        if answered[r] and q >= 0:
            a0 = answer_offsets[q]
            a1 = answer_offsets[q + 1]
        total_pred = 0
        if a1 > a0:
            total_pred = answer_interval_offsets[a1] - answer_interval_offsets[a0]
        if total_pred > len(kept_start):
            kept_start = np.empty(2 * total_pred, np.float64)
            kept_end = np.empty(2 * total_pred, np.float64)
            kept_class = np.empty(2 * total_pred, np.int64)
            sorted_start = np.empty(2 * total_pred, np.float64)
            sorted_end = np.empty(2 * total_pred, np.float64)
        bound = limit[r]
        n_kept = 0
        contiguous = True
        for a in range(a0, a1):
            code = answer_code[a]
            level = level_of[code]
            if level < 0:
                level = 1  # not among the options nor the gold items: atomic
            key = level * n_codes + code
            c = class_of[key]
            if not predicted[key]:
                predicted[key] = True
                n_pred_ids[base + level] += 1
                if c >= 0:
                    label_tp[base + level] += 1
            i0 = answer_interval_offsets[a]
            k = answer_interval_offsets[a + 1] - i0
            n_pred[base + level] += k
            if c < 0:
                continue  # a class absent from gold: all false positives
            for i in range(i0, i0 + k):
                number = answer_number_offsets[i]
                if answer_number_offsets[i + 1] - number != 2:
                    continue  # invalid: a false positive
                start = answer_numbers[number]
                end = answer_numbers[number + 1]
                if not (
                    np.isfinite(start)
                    and np.isfinite(end)
                    and start >= 0
                    and start < end
                    and end <= bound + slack
                ):
                    continue  # invalid: a false positive
                kept_start[n_kept] = start if start < bound else bound
                kept_end[n_kept] = end if end < bound else bound
                kept_class[n_kept] = c
                if class_pred[c] == 0:
                    class_pred_at[c] = n_kept
                elif class_pred_at[c] + class_pred[c] != n_kept:
                    contiguous = False
                class_pred[c] += 1
                n_kept += 1
        pred_start = kept_start
        pred_end = kept_end
        if not contiguous:
            at = 0
            for c in range(n_classes):
                class_pred_at[c] = at
                fill[c] = at
                at += class_pred[c]
            for m in range(n_kept):
                c = kept_class[m]
                sorted_start[fill[c]] = kept_start[m]
                sorted_end[fill[c]] = kept_end[m]
                fill[c] += 1
            pred_start = sorted_start
            pred_end = sorted_end

        for c in range(n_classes):
            n_g = class_gold[c]
            n_p = class_pred[c]
            if n_g == 0 or n_p == 0:
                continue
            if n_g * n_p > len(pair_value):
                size = 2 * n_g * n_p
                pair_value = np.empty(size, np.float64)
                pair_gold = np.empty(size, np.int64)
                pair_pred = np.empty(size, np.int64)
            if n_g > len(gold_used):
                gold_used = np.zeros(2 * n_g, np.bool_)
            if n_p > len(pred_used):
                pred_used = np.zeros(2 * n_p, np.bool_)
            # Pairs with tIoU > 0 by gold index, then pred index, with intervals.tiou_matrix's
            # float operations; a NaN gold bound gives tIoU 0 there (NaN propagates).
            n_pairs = 0
            gc = class_gold_at[c]
            pc = class_pred_at[c]
            for i in range(n_g):
                at = gold_order[gc + i] if merged else gc + i
                number = gold_number_offsets[at]
                if gold_number_offsets[at + 1] - number != 2:
                    continue  # not a pair of numbers: never matched
                g_start = gold_numbers[number]
                g_end = gold_numbers[number + 1]
                if np.isnan(g_start) or np.isnan(g_end):
                    continue
                for j in range(n_p):
                    p_start = pred_start[pc + j]
                    p_end = pred_end[pc + j]
                    inter = (g_end if g_end < p_end else p_end) - (
                        g_start if g_start > p_start else p_start
                    )
                    inter = inter if inter > 0 else 0.0
                    union = (g_end - g_start) + (p_end - p_start) - inter
                    value = inter / union  # union 0: inf or NaN (error_model), dropped
                    value = value if union > 0 else 0.0
                    pair_value[n_pairs] = value  # kept only if > 0, without a branch
                    pair_gold[n_pairs] = i
                    pair_pred[n_pairs] = j
                    n_pairs += value > 0
            if n_pairs == 0:
                continue
            if n_pairs == 1:  # nothing competes
                if pair_value[0] >= threshold:
                    interval_tp[base + class_level[c]] += 1
                tiou_sum[base + class_level[c]] += pair_value[0]
                continue
            # Greedy order: tIoU descending; a stable sort keeps (gold, pred) order in ties.
            if n_pairs <= _SORT_BY_INSERTION:
                for k in range(1, n_pairs):
                    value = pair_value[k]
                    g = pair_gold[k]
                    p = pair_pred[k]
                    j = k - 1
                    while j >= 0 and pair_value[j] < value:
                        pair_value[j + 1] = pair_value[j]
                        pair_gold[j + 1] = pair_gold[j]
                        pair_pred[j + 1] = pair_pred[j]
                        j -= 1
                    pair_value[j + 1] = value
                    pair_gold[j + 1] = g
                    pair_pred[j + 1] = p
            else:
                order = np.argsort(-pair_value[:n_pairs], kind="mergesort")
                sorted_value = pair_value[:n_pairs][order]
                sorted_gold = pair_gold[:n_pairs][order]
                sorted_pred = pair_pred[:n_pairs][order]
                pair_value[:n_pairs] = sorted_value
                pair_gold[:n_pairs] = sorted_gold
                pair_pred[:n_pairs] = sorted_pred
            hits = 0
            for k in range(n_pairs):
                if pair_value[k] < threshold:
                    break
                g = pair_gold[k]
                p = pair_pred[k]
                if not gold_used[g] and not pred_used[p]:
                    gold_used[g] = True
                    pred_used[p] = True
                    hits += 1
            for i in range(n_g):
                gold_used[i] = False
            for j in range(n_p):
                pred_used[j] = False
            class_sum = 0.0
            for k in range(n_pairs):
                g = pair_gold[k]
                p = pair_pred[k]
                if not gold_used[g] and not pred_used[p]:
                    gold_used[g] = True
                    pred_used[p] = True
                    class_sum += pair_value[k]
            for i in range(n_g):
                gold_used[i] = False
            for j in range(n_p):
                pred_used[j] = False
            interval_tp[base + class_level[c]] += hits
            tiou_sum[base + class_level[c]] += class_sum

        for a in range(a0, a1):
            code = answer_code[a]
            predicted[code] = False
            predicted[n_codes + code] = False
        for g in range(g0, g1):
            code = gold_code[g]
            class_of[code] = -1
            class_of[n_codes + code] = -1
            level_of[code] = -1
        for o in range(o0, o1):
            level_of[option_code[o]] = -1

    # The final columns in place of the counts they come from.
    interval_fp = n_pred
    label_fp = n_pred_ids
    label_fn = n_gold_ids
    sample_f1 = np.empty(levels * n, np.float64)
    for k in range(levels * n):
        tp = interval_tp[k]
        interval_fp[k] -= tp
        interval_fn[k] = n_gold[k] - tp
        denominator = 2 * tp + interval_fp[k] + interval_fn[k]
        # As intervals.f1_score: 1 when there is nothing to find and nothing predicted.
        sample_f1[k] = 1.0 if denominator == 0 else 2 * tp / denominator
        label_fp[k] -= label_tp[k]
        label_fn[k] -= label_tp[k]
    return (
        interval_tp,
        interval_fp,
        interval_fn,
        tiou_sum,
        n_gold,
        sample_f1,
        label_tp,
        label_fp,
        label_fn,
    )
