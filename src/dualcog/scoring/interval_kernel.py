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


@numba.njit(cache=True)
def row_interval_scores(
    sample_at,
    parsed_at,
    answered,
    limit,
    option_first,
    option_count,
    option_code,
    option_composite,
    gold_first,
    gold_count,
    gold_code,
    gold_composite,
    gold_interval_first,
    gold_interval_count,
    gold_start,
    gold_end,
    answer_first,
    answer_count,
    answer_code,
    answer_interval_first,
    answer_interval_count,
    answer_start,
    answer_end,
    answer_pair,
    n_codes,
    slack,
    threshold,
):
    """Counts at both levels of every row r, at 2 r (composite) and 2 r + 1 (atomic).

    Row r is sample `sample_at[r]` (its options and gold items) answered by the items of
    parsed row `parsed_at[r]` when `answered[r]` holds (else nothing is predicted); `limit[r]`
    is its duration (inf when unknown). Items and intervals are ranges [first, first + count)
    into the flat arrays; option id codes are below `n_codes`; a gold interval that is not a
    pair of numbers is NaN. Returns (interval_tp, n_pred_intervals, n_gold_intervals,
    tiou_sum, label_tp, n_pred_ids, n_gold_ids).
    """
    n = len(sample_at)
    interval_tp = np.zeros(2 * n, np.int64)
    n_pred = np.zeros(2 * n, np.int64)
    n_gold = np.zeros(2 * n, np.int64)
    tiou_sum = np.zeros(2 * n, np.float64)
    label_tp = np.zeros(2 * n, np.int64)
    n_pred_ids = np.zeros(2 * n, np.int64)
    n_gold_ids = np.zeros(2 * n, np.int64)

    # Per option id code (and level): reset after each row by walking its items again.
    level_of = np.full(n_codes, -1, np.int64)  # 0 composite, 1 atomic, -1 not listed
    class_of = np.full(2 * n_codes, -1, np.int64)
    predicted = np.zeros(2 * n_codes, np.bool_)
    # Per row and per class; grown when a row needs more.
    class_level = np.empty(8, np.int64)
    class_gold = np.empty(8, np.int64)
    class_pred = np.empty(8, np.int64)
    class_gold_at = np.empty(8, np.int64)
    class_pred_at = np.empty(8, np.int64)
    fill = np.empty(8, np.int64)
    gs = np.empty(16, np.float64)
    ge = np.empty(16, np.float64)
    kept_start = np.empty(16, np.float64)
    kept_end = np.empty(16, np.float64)
    kept_class = np.empty(16, np.int64)
    ps = np.empty(16, np.float64)
    pe = np.empty(16, np.float64)
    pair_value = np.empty(64, np.float64)
    pair_gold = np.empty(64, np.int64)
    pair_pred = np.empty(64, np.int64)
    gold_used = np.zeros(16, np.bool_)
    pred_used = np.zeros(16, np.bool_)

    for r in range(n):
        s = sample_at[r]
        base = 2 * r
        for o in range(option_first[s], option_first[s] + option_count[s]):
            level_of[option_code[o]] = 0 if option_composite[o] else 1  # the last one wins

        g0 = gold_first[s]
        g1 = g0 + gold_count[s]
        if gold_count[s] > len(class_level):
            size = 2 * gold_count[s]
            class_level = np.empty(size, np.int64)
            class_gold = np.empty(size, np.int64)
            class_pred = np.empty(size, np.int64)
            class_gold_at = np.empty(size, np.int64)
            class_pred_at = np.empty(size, np.int64)
            fill = np.empty(size, np.int64)
        n_classes = 0
        total_gold = 0
        for g in range(g0, g1):
            code = gold_code[g]
            level = 0 if gold_composite[g] else 1
            if level_of[code] < 0:
                level_of[code] = level
            key = level * n_codes + code
            c = class_of[key]
            if c < 0:
                c = n_classes
                class_of[key] = c
                class_level[c] = level
                class_gold[c] = 0
                class_pred[c] = 0
                n_classes += 1
                n_gold_ids[base + level] += 1
            k = gold_interval_count[g]
            class_gold[c] += k
            n_gold[base + level] += k
            total_gold += k
        if total_gold > len(gs):
            gs = np.empty(2 * total_gold, np.float64)
            ge = np.empty(2 * total_gold, np.float64)
        at = 0
        for c in range(n_classes):
            class_gold_at[c] = at
            fill[c] = at
            at += class_gold[c]
        for g in range(g0, g1):
            c = class_of[(0 if gold_composite[g] else 1) * n_codes + gold_code[g]]
            i0 = gold_interval_first[g]
            for i in range(i0, i0 + gold_interval_count[g]):
                gs[fill[c]] = gold_start[i]
                ge[fill[c]] = gold_end[i]
                fill[c] += 1

        q = parsed_at[r]
        a0 = 0
        a1 = 0
        if answered[r] and q >= 0:
            a0 = answer_first[q]
            a1 = a0 + answer_count[q]
        total_pred = 0
        for a in range(a0, a1):
            total_pred += answer_interval_count[a]
        if total_pred > len(kept_start):
            kept_start = np.empty(2 * total_pred, np.float64)
            kept_end = np.empty(2 * total_pred, np.float64)
            kept_class = np.empty(2 * total_pred, np.int64)
            ps = np.empty(2 * total_pred, np.float64)
            pe = np.empty(2 * total_pred, np.float64)
        bound = limit[r]
        n_kept = 0
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
            i0 = answer_interval_first[a]
            k = answer_interval_count[a]
            n_pred[base + level] += k
            if c < 0:
                continue  # a class absent from gold: all false positives
            for i in range(i0, i0 + k):
                start = answer_start[i]
                end = answer_end[i]
                if not (
                    answer_pair[i]
                    and np.isfinite(start)
                    and np.isfinite(end)
                    and start >= 0
                    and start < end
                    and end <= bound + slack
                ):
                    continue  # invalid: a false positive
                kept_start[n_kept] = start if start < bound else bound
                kept_end[n_kept] = end if end < bound else bound
                kept_class[n_kept] = c
                class_pred[c] += 1
                n_kept += 1
        at = 0
        for c in range(n_classes):
            class_pred_at[c] = at
            fill[c] = at
            at += class_pred[c]
        for m in range(n_kept):
            c = kept_class[m]
            ps[fill[c]] = kept_start[m]
            pe[fill[c]] = kept_end[m]
            fill[c] += 1

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
                g_start = gs[gc + i]
                g_end = ge[gc + i]
                if np.isnan(g_start) or np.isnan(g_end):
                    continue
                for j in range(n_p):
                    p_start = ps[pc + j]
                    p_end = pe[pc + j]
                    inter = (g_end if g_end < p_end else p_end) - (
                        g_start if g_start > p_start else p_start
                    )
                    if inter < 0:
                        inter = 0.0
                    union = (g_end - g_start) + (p_end - p_start) - inter
                    if union > 0:
                        value = inter / union
                        if value > 0:
                            pair_value[n_pairs] = value
                            pair_gold[n_pairs] = i
                            pair_pred[n_pairs] = j
                            n_pairs += 1
            if n_pairs == 0:
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
            level = class_level[c]
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
            gold_used[:n_g] = False
            pred_used[:n_p] = False
            class_sum = 0.0
            for k in range(n_pairs):
                g = pair_gold[k]
                p = pair_pred[k]
                if not gold_used[g] and not pred_used[p]:
                    gold_used[g] = True
                    pred_used[p] = True
                    class_sum += pair_value[k]
            gold_used[:n_g] = False
            pred_used[:n_p] = False
            interval_tp[base + level] += hits
            tiou_sum[base + level] += class_sum

        for a in range(a0, a1):
            code = answer_code[a]
            predicted[code] = False
            predicted[n_codes + code] = False
        for g in range(g0, g1):
            code = gold_code[g]
            class_of[code] = -1
            class_of[n_codes + code] = -1
            level_of[code] = -1
        for o in range(option_first[s], option_first[s] + option_count[s]):
            level_of[option_code[o]] = -1
    return interval_tp, n_pred, n_gold, tiou_sum, label_tp, n_pred_ids, n_gold_ids
