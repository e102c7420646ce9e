"""Compiled image scoring rule (numba): option correctness and box IoU, one pass over rows.

Inputs are Arrow's own buffers, read in place (`image.score_image` prepares them): a list
column is (offsets, validity bitmap, its bit offset, items), a flag is (bitmap, bit offset)
with nulls already False (`columns.ListBuffers`, `columns.Bits`). The float operations are
those of `geometry.box_iou`, in the same order, so every IoU is identical bit for bit.

Bits are read as `(bits[j >> 3] >> (j & 7)) & 1`, written out where used: helpers that take
arrays measured several times slower than the same code inline.
"""

from __future__ import annotations

import numba
import numpy as np

GOLD, RELEASED, CANDIDATE = 0, 1, 2  # where a row's gold box lies


@numba.njit(cache=True)
def score_image_kernel(rows, parsed_flags, options, pred, gold, future, released, candidates):
    """Per row: (option correct, IoU).

    rows: (sample_at, parsed_at, legacy, responded) per row; parsed_at -1 is no parsed row.
    parsed_flags: (option_valid bits, offset, bbox_valid bits, offset) per parsed row.
    options: the parsed option ids as a list column of integer codes (-1: null id).
    pred, gold: box list columns of parsed rows and of samples; `gold` carries each
    sample's gold id code too. future: per sample, the task judges the box of the selected
    candidate. released: the samples' released answer boxes (legacy Future Observation).
    candidates: per sample, a list column of candidate id codes, with their box column.

    Options are correct iff valid, not empty, and every id is the gold id. The IoU's gold
    box is the sample's; for Future Observation the box of the first candidate whose id is
    the one selected id (strict, compatible), or in legacy the released answer box where the
    sample has one (four numbers, none NaN). A box that is not four finite numbers with
    x2 > x1 and y2 > y1, on either side, gives 0, as does a union that is not positive.
    """
    sample_at, parsed_at, legacy, responded = rows
    option_ok, option_ok0, bbox_ok, bbox_ok0 = parsed_flags
    option_off, option_bits, option_bit0, option_code = options
    pred_off, pred_bits, pred_bit0, pred_flat = pred
    gold_code, gold_off, gold_bits, gold_bit0, gold_flat = gold
    released_off, released_bits, released_bit0, released_flat = released
    cand_off, cand_bits, cand_bit0, cand_code, box_off, box_bits, box_bit0, box_flat = candidates
    all_options, all_preds, all_golds = (
        len(option_bits) == 0, len(pred_bits) == 0, len(gold_bits) == 0
    )  # fmt: skip
    all_released, all_candidates, all_boxes = (
        len(released_bits) == 0, len(cand_bits) == 0, len(box_bits) == 0
    )  # fmt: skip

    n = len(sample_at)
    correct = np.zeros(n, np.bool_)
    iou = np.zeros(n)
    for i in range(n):
        s = sample_at[i]
        p = parsed_at[i]
        if p < 0 or not responded[i]:
            continue
        # Options: the first id, and whether every id is that same non-null id.
        a, b = option_off[p], option_off[p + 1]
        j = option_bit0 + p
        if not (all_options or (option_bits[j >> 3] >> (j & 7)) & 1):
            b = a
        first = option_code[a] if b > a else -1
        uniform = first >= 0
        for k in range(a + 1, b):
            uniform &= option_code[k] == first
        j = option_ok0 + p
        valid_option = (option_ok[j >> 3] >> (j & 7)) & 1 == 1
        correct[i] = valid_option & uniform & (first == gold_code[s])

        # The gold box: where it lies (a code, not an array variable: reassigning an array
        # in the loop measured twice as slow), its first value, and whether it is a list of
        # four.
        source = GOLD
        at = gold_off[s]
        j = gold_bit0 + s
        four = (gold_off[s + 1] - at == 4) & (all_golds or (gold_bits[j >> 3] >> (j & 7)) & 1)
        if future[s]:
            if legacy[i]:
                c = released_off[s]
                j = released_bit0 + s
                if (released_off[s + 1] - c == 4) & (
                    all_released or (released_bits[j >> 3] >> (j & 7)) & 1
                ):
                    present = True
                    for k in range(c, c + 4):
                        present &= not np.isnan(released_flat[k])
                    if present:
                        source = RELEASED
                        at = c
                        four = True
            else:
                four = False
                if valid_option & (b - a == 1) & (first >= 0):
                    c = cand_off[s]
                    j = cand_bit0 + s
                    stop = c
                    if all_candidates or (cand_bits[j >> 3] >> (j & 7)) & 1:
                        stop = cand_off[s + 1]
                    for k in range(c, stop):
                        if cand_code[k] == first:
                            source = CANDIDATE
                            at = box_off[k]
                            j = box_bit0 + k
                            four = (box_off[k + 1] - at == 4) & (
                                all_boxes or (box_bits[j >> 3] >> (j & 7)) & 1
                            )
                            break
        q = pred_off[p]
        j = pred_bit0 + p
        four &= (pred_off[p + 1] - q == 4) & (all_preds or (pred_bits[j >> 3] >> (j & 7)) & 1)
        j = bbox_ok0 + p
        if not (four and (bbox_ok[j >> 3] >> (j & 7)) & 1):
            continue
        px1, py1, px2, py2 = pred_flat[q], pred_flat[q + 1], pred_flat[q + 2], pred_flat[q + 3]
        if source == GOLD:
            gx1, gy1 = gold_flat[at], gold_flat[at + 1]
            gx2, gy2 = gold_flat[at + 2], gold_flat[at + 3]
        elif source == RELEASED:
            gx1, gy1 = released_flat[at], released_flat[at + 1]
            gx2, gy2 = released_flat[at + 2], released_flat[at + 3]
        else:
            gx1, gy1 = box_flat[at], box_flat[at + 1]
            gx2, gy2 = box_flat[at + 2], box_flat[at + 3]
        pw, ph, gw, gh = px2 - px1, py2 - py1, gx2 - gx1, gy2 - gy1
        usable = (pw > 0) & (ph > 0) & (gw > 0) & (gh > 0)  # False for NaN too
        for v in (px1, py1, px2, py2, gx1, gy1, gx2, gy2):
            usable &= np.isfinite(v)
        iw = min(px2, gx2) - max(px1, gx1)
        ih = min(py2, gy2) - max(py1, gy1)
        inter = (iw if iw >= 0.0 else 0.0) * (ih if ih >= 0.0 else 0.0)  # as np.clip
        union = pw * ph + gw * gh - inter
        if usable & (union > 0):
            iou[i] = inter / union
    return correct, iou
