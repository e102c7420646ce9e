"""Image scoring: `score_samples` against a fair plain loop, on 1M predictions.

A prediction is one (sample, parse mode) row. Inputs are random Arrow tables shaped like
results/benchmark/samples.parquet and results/parsed/<model>.parquet (misses, invalid
fields, multi-letter legacy answers, two-id legacy gold sets, degenerate boxes, Future
Observation candidates and released answer boxes). The loop is the rule of docs/protocol.md
§4 and §3.4 (legacy gold id sets, legacy released box) in plain Python over plain lists,
one per column, extracted beforehand (timed apart): a dict join on (sample_id, parse), the
option rule and a pure-Python IoU. Both must give identical option_correct and IoU values
(bit for bit) before speeds count; wall and CPU time are printed side by side.

Usage: python benchmarks/score_image.py [--predictions 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pyarrow as pa
from _timing import machine, measure, report

from dualcog.scoring import score_samples
from dualcog.tasks import IMAGE_TASKS

PARSES = ("strict", "compatible", "legacy")
LETTERS = np.array(list("ABCD"))


def _boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    x1, y1 = rng.uniform(0, 0.6, n), rng.uniform(0, 0.6, n)
    w, h = rng.uniform(0.05, 0.4, n), rng.uniform(0.05, 0.4, n)
    return np.stack([x1, y1, x1 + w, y1 + h], axis=1)


def _list(values: np.ndarray, lengths: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    array = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    if mask is not None:
        array = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), mask=pa.array(mask))
    return array


def synthetic(n_samples: int, seed: int = 0) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    ids = np.char.add("s", np.arange(n_samples).astype(str))
    tasks = np.array(IMAGE_TASKS)[np.arange(n_samples) % 4]
    gold_box = _boxes(rng, n_samples)
    future = tasks == "future_observation"
    n_future = int(future.sum())
    cand_box = _boxes(rng, 4 * n_future)
    candidates_items = pa.StructArray.from_arrays(
        [
            pa.array(np.tile(LETTERS, n_future)),
            _list(cand_box.ravel(), np.full(4 * n_future, 4)),
            pa.array(np.full(4 * n_future, "front")),
        ],
        names=["option_id", "bbox", "view"],
    )
    cand_lengths = np.where(future, 4, 0)
    gold_id = LETTERS[rng.integers(0, 4, n_samples)]
    # Gold id sets (legacy, §3.4): mostly [gold]; 5 % two ids, gold and another.
    two_ids = rng.random(n_samples) < 0.05
    gold_sets = np.stack([gold_id, LETTERS[(np.searchsorted(LETTERS, gold_id) + 1) % 4]], 1)
    set_lengths = np.where(two_ids, 2, 1)
    released = future & (rng.random(n_samples) < 0.9)  # legacy FO: the released answer box
    samples = pa.table(
        {
            "sample_id": ids,
            "task": tasks,
            "difficulty": np.where(np.arange(n_samples) % 2, "4way", "8way"),
            "gold_option_id": gold_id,
            "gold_option_ids": _list(gold_sets[np.arange(2) < set_lengths[:, None]], set_lengths),
            "gold_bbox": _list(gold_box.ravel(), np.full(n_samples, 4)),
            "answer_bbox": _list(
                _boxes(rng, n_samples).ravel(), np.full(n_samples, 4), mask=~released
            ),
            "candidates": pa.ListArray.from_arrays(
                pa.array(np.concatenate(([0], np.cumsum(cand_lengths))).astype(np.int32)),
                candidates_items,
                mask=pa.array(~future),
            ),
        }
    )
    parts = []
    gold = samples["gold_option_id"].to_numpy()
    for parse in PARSES:
        keep = rng.random(n_samples) > 0.02  # 2 % of rows absent
        n = int(keep.sum())
        right = rng.random(n) < 0.6
        option = np.where(right, gold[keep], LETTERS[rng.integers(0, 4, n)])
        two = (rng.random(n) < 0.1) if parse == "legacy" else np.zeros(n, bool)
        letters = np.stack([option, LETTERS[rng.integers(0, 4, n)]], axis=1)
        option_lengths = np.where(two, 2, 1)
        option_values = letters[np.arange(2)[None, :] < option_lengths[:, None]]
        near = gold_box[keep] + rng.normal(0, 0.04, (n, 4))
        reversed_corners = rng.random(n) < 0.05
        near[reversed_corners] = near[reversed_corners][:, [2, 3, 0, 1]]
        box_lengths = np.where(rng.random(n) < 0.01, 3, 4)  # malformed boxes
        box_values = near[np.arange(4)[None, :] < box_lengths[:, None]]
        stage = np.where(rng.random(n) < 0.03, "missing", "strict")
        option_valid = rng.random(n) > 0.05
        bbox_valid = rng.random(n) > 0.08
        parts.append(
            pa.table(
                {
                    "sample_id": ids[keep],
                    "task": tasks[keep],
                    "parse": np.full(n, parse),
                    "stage": stage,
                    "all_valid": option_valid & bbox_valid,
                    "option_ids": _list(option_values, option_lengths),
                    "option_valid": option_valid,
                    "bbox": _list(box_values, box_lengths),
                    "bbox_valid": bbox_valid,
                }
            )
        )
    return samples, pa.concat_tables(parts)


def python_iou(a, b) -> float:
    """IoU of two boxes by the rule: 0 unless both are four finite numbers with positive
    width and height and the union is positive."""
    if a is None or b is None or len(a) != 4 or len(b) != 4:
        return 0.0
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    pw, ph, gw, gh = ax2 - ax1, ay2 - ay1, bx2 - bx1, by2 - by1
    if not (pw > 0 and ph > 0 and gw > 0 and gh > 0):
        return 0.0
    if not all(map(math.isfinite, (ax1, ay1, ax2, ay2, bx1, by1, bx2, by2))):
        return 0.0
    iw = max(min(ax2, bx2) - max(ax1, bx1), 0.0)
    ih = max(min(ay2, by2) - max(ay1, by1), 0.0)
    inter = iw * ih
    union = pw * ph + gw * gh - inter
    return inter / union if union > 0 else 0.0


def as_lists(samples: pa.Table, parsed: pa.Table) -> tuple[dict, dict]:
    return (
        {name: samples[name].to_pylist() for name in samples.column_names},
        {name: parsed[name].to_pylist() for name in parsed.column_names},
    )


def naive_scores(s: dict, p: dict) -> tuple[list[bool], list[float]]:
    """The fair loop: one pass over plain Python lists per parse mode, in score_samples' row
    order (parse modes, then samples)."""
    row_of = {key: j for j, key in enumerate(zip(p["sample_id"], p["parse"], strict=True))}
    stage, option_ids, option_valid = p["stage"], p["option_ids"], p["option_valid"]
    bbox, bbox_valid = p["bbox"], p["bbox_valid"]
    sample_columns = (s["sample_id"], s["task"], s["gold_option_id"], s["gold_option_ids"],
                      s["gold_bbox"], s["answer_bbox"], s["candidates"])  # fmt: skip
    correct_out: list[bool] = []
    iou_out: list[float] = []
    for parse in PARSES:
        legacy = parse == "legacy"
        for sample_id, task, gold, gold_set, gold_box, released, candidates in zip(
            *sample_columns, strict=True
        ):
            j = row_of.get((sample_id, parse))
            if j is None or stage[j] == "missing":
                correct_out.append(False)
                iou_out.append(0.0)
                continue
            ids = option_ids[j] or []
            valid = bool(option_valid[j])
            if legacy and gold_set and gold_set != [gold]:  # §3.4: the gold id set
                correct = valid and set(ids) == set(gold_set)
            else:
                correct = valid and len(ids) >= 1 and all(x == gold for x in ids)
            target = gold_box
            if task == "future_observation":
                if legacy:  # the released answer box where there is one
                    if (
                        released is not None
                        and len(released) == 4
                        and not any(v is None or math.isnan(v) for v in released)
                    ):
                        target = released
                else:  # the box of the selected candidate
                    chosen = ids[0] if valid and len(ids) == 1 else None
                    target = None
                    if chosen is not None:
                        for candidate in candidates or ():
                            if candidate["option_id"] == chosen:
                                target = candidate["bbox"]
                                break
            correct_out.append(correct)
            iou_out.append(python_iou(bbox[j] if bbox_valid[j] else None, target))
    return correct_out, iou_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    samples, parsed = synthetic(-(-args.predictions // len(PARSES)))
    convert, (s, p) = measure(lambda: as_lists(samples, parsed), 1)
    print(f"(loop input: Arrow -> Python lists took {convert.wall_s:.2f} s wall, "
          f"{convert.cpu_s:.2f} CPU-s, not counted)")  # fmt: skip
    ours_t, ours = measure(lambda: score_samples(samples, parsed), args.repeats)
    naive_t, (correct, iou) = measure(lambda: naive_scores(s, p), args.repeats)
    assert ours.num_rows == len(correct)
    assert ours["option_correct"].to_pylist() == correct, "option_correct differs"
    assert ours["iou"].to_pylist() == iou, "IoU differs"
    two_id_rows = sum(1 for g, i in zip(s["gold_option_ids"], s["gold_option_id"], strict=True)
                      if g and g != [i])  # fmt: skip
    print(f"identical option_correct and IoU ({two_id_rows:,} samples with two-id gold sets)")
    report("image scoring (join included), score_samples vs plain loop", len(correct),
           "predictions", ours_t, naive_t)  # fmt: skip


if __name__ == "__main__":
    main()
