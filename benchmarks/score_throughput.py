"""Throughput of `dualcog.scoring` on synthetic benchmark-sized runs.

1. Image rows: `score_samples` (vectorized IoU) against a naive per-row loop (pure-Python
   IoU with dict lookups), on the same inputs; prints samples/s of each and the ratio.
2. Full pipeline: `score_samples` + `model_metrics` for every model of a synthetic run of
   the benchmark's size (4,096 image and 2,048 video samples per model).

Usage: python benchmarks/score_throughput.py [--models 45] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from dualcog.schemas import PARSED, SAMPLES, to_table
from dualcog.scoring import model_metrics, score_samples
from dualcog.tasks import IMAGE_TASKS, PARSE_MODES

N_IMAGE = 4096
N_VIDEO_MISSIONS = 1024
LETTERS = "ABCDEFGH"


def random_box(rng: np.random.Generator) -> list[float]:
    x1, y1 = rng.uniform(0, 0.6, 2)
    w, h = rng.uniform(0.05, 0.4, 2)
    return [float(x1), float(y1), float(x1 + w), float(y1 + h)]


def synthetic_samples(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for i in range(N_IMAGE):
        task = IMAGE_TASKS[i % 4]
        index = i // 4 + 1
        rows.append(
            {
                "sample_id": f"img{i:05d}",
                "task": task,
                "scene_id": f"scene{i % 12}",
                "landmark_id": f"lm{(i // 48) % 512}",
                "difficulty": "4way" if i % 2 else "8way",
                "context_index": index,
                "context_slot": (index - 1) // 2,
                "options": [{"option_id": o, "label": o, "level": None} for o in "ABCD"],
                "gold_option_id": "ABCD"[i % 4],
                "gold_bbox": random_box(rng),
                "candidates": (
                    [{"option_id": o, "bbox": random_box(rng), "view": "v"} for o in "ABCD"]
                    if task == "future_observation"
                    else None
                ),
            }
        )
    for m in range(N_VIDEO_MISSIONS):
        composite = m % 2 == 0
        gold = [("A", "atomic", [[0.0, 10.0]]), ("B", "atomic", [[10.0, 20.0], [30.0, 40.0]])]
        if composite:
            gold.append(("E", "composite", [[0.0, 40.0]]))
        common = {
            "mission_id": f"mission{m}",
            "difficulty": ("easy", "medium", "hard")[m % 3],
            "duration_sec": 60.0,
            "manifest_order": m,
        }
        rows.append(
            {
                **common,
                "sample_id": f"beh{m:05d}",
                "task": "behavior",
                "manifest_path": "behavior.json",
                "composite_mission": composite,
                "options": [
                    {"option_id": o, "label": o, "level": "composite" if o in "EF" else "atomic"}
                    for o in LETTERS
                ],
                "gold_items": [
                    {"option_id": k, "label": k, "level": lv, "intervals": iv} for k, lv, iv in gold
                ],
            }
        )
        rows.append(
            {
                **common,
                "sample_id": f"vis{m:05d}",
                "task": "landmark_visibility",
                "manifest_path": "visibility.json",
                "gold_visible_count": 2,
                "gold_visible_intervals": [[0.0, 10.0], [20.0, 30.0]],
            }
        )
    full = [{name: row.get(name) for name in SAMPLES.names} for row in rows]
    return to_table(pd.DataFrame(full, dtype=object), SAMPLES).to_pandas()


def jitter(intervals: list, rng: np.random.Generator) -> list:
    return [[s + float(rng.normal(0, 1)), e + float(rng.normal(0, 1))] for s, e in intervals]


def synthetic_parsed(samples: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for sample in samples.itertuples(index=False):
        modes = PARSE_MODES if sample.task in IMAGE_TASKS else ("strict", "compatible")
        for parse in modes:
            if rng.random() < 0.03:
                rows.append({"sample_id": sample.sample_id, "parse": parse, "stage": "missing"})
                continue
            row = {"sample_id": sample.sample_id, "task": sample.task, "parse": parse}
            if sample.task in IMAGE_TASKS:
                gold = np.asarray(sample.gold_bbox)
                box = np.clip(gold + rng.normal(0, 0.05, 4), 0, 1)
                valid = bool(box[0] < box[2] and box[1] < box[3] and rng.random() > 0.1)
                option = sample.gold_option_id if rng.random() < 0.6 else "B"
                row.update(
                    stage="strict", option_ids=[option], option_valid=True,
                    bbox=box.tolist(), bbox_valid=valid, all_valid=valid,
                )  # fmt: skip
            elif sample.task == "behavior":
                answers = [
                    {"option_id": g["option_id"], "intervals": jitter(g["intervals"], rng)}
                    for g in sample.gold_items
                    if rng.random() < 0.8
                ]
                answers.append({"option_id": "C", "intervals": [[45.0, 50.0]]})
                row.update(stage="strict", answers=answers, answers_valid=True, all_valid=True)
            else:
                intervals = jitter([[0.0, 10.0], [20.0, 30.0]], rng)
                row.update(
                    stage="strict", visible_count=int(rng.integers(1, 4)), count_valid=True,
                    visible_intervals=intervals, intervals_valid=True, all_valid=True,
                )  # fmt: skip
            rows.append(row)
    full = [{name: row.get(name) for name in PARSED.names} for row in rows]
    return to_table(pd.DataFrame(full, columns=PARSED.names, dtype=object), PARSED).to_pandas()


def naive_image_scores(samples: pd.DataFrame, parsed: pd.DataFrame) -> list[tuple]:
    """Reference loop: one dict lookup and one Python IoU per (sample, parse) row."""
    by_key = {(r["sample_id"], r["parse"]): r for r in parsed.to_dict("records")}
    out = []
    for sample in samples.to_dict("records"):
        if sample["task"] not in IMAGE_TASKS:
            continue
        candidates = {
            c["option_id"]: c["bbox"]
            for c in (() if sample["candidates"] is None else sample["candidates"])
        }
        for parse in PARSE_MODES:
            row = by_key.get((sample["sample_id"], parse))
            if row is None or row["stage"] == "missing":
                out.append((sample["sample_id"], parse, False, 0.0))
                continue
            ids = list(row["option_ids"]) if row["option_ids"] is not None else []
            correct = bool(row["option_valid"]) and set(ids) == {sample["gold_option_id"]}
            gold = sample["gold_bbox"]
            if sample["task"] == "future_observation" and parse != "legacy":
                gold = candidates.get(ids[0]) if row["option_valid"] and len(ids) == 1 else None
            iou = python_iou(row["bbox"], gold) if row["bbox_valid"] and gold is not None else 0.0
            out.append((sample["sample_id"], parse, correct, iou))
    return out


def python_iou(a, b) -> float:
    ax1, ay1, ax2, ay2 = (float(v) for v in a)
    bx1, by1, bx2, by2 = (float(v) for v in b)
    if ax2 <= ax1 or ay2 <= ay1 or bx2 <= bx1 or by2 <= by1:
        return 0.0
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return inter / union if union > 0 else 0.0


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=45)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    samples = synthetic_samples(rng)
    parsed = synthetic_parsed(samples, rng)

    image_samples = samples[samples["task"].isin(IMAGE_TASKS)]
    image_parsed = parsed[parsed["sample_id"].isin(image_samples["sample_id"])]
    rows = len(image_samples) * len(PARSE_MODES)
    ours_s, ours = best_time(lambda: score_samples(image_samples, image_parsed), args.repeats)
    naive_s, naive = best_time(
        lambda: naive_image_scores(image_samples, image_parsed), args.repeats
    )
    # both must agree before their speeds are compared
    ref = pd.DataFrame(naive, columns=["sample_id", "parse", "option_correct", "iou"])
    joined = ours.merge(ref, on=["sample_id", "parse"], suffixes=("", "_naive"))
    assert len(joined) == rows
    assert (joined["option_correct"].astype(bool) == joined["option_correct_naive"]).all()
    assert np.allclose(joined["iou"], joined["iou_naive"])
    print(f"image rows (sample x parse): {rows}")
    print(f"  score_samples: {rows / ours_s:12,.0f} rows/s ({ours_s * 1e3:.1f} ms)")
    print(f"  naive loop:    {rows / naive_s:12,.0f} rows/s ({naive_s * 1e3:.1f} ms)")
    print(f"  speed-up: {naive_s / ours_s:.1f}x")

    start = time.perf_counter()
    n_rows = 0
    for m in range(args.models):
        scores = score_samples(samples, parsed)
        n_rows += len(model_metrics(f"model{m}", samples, scores))
    total = time.perf_counter() - start
    print(
        f"full run: {args.models} models x {len(samples)} samples -> {n_rows} metric rows "
        f"in {total:.1f} s ({total / max(args.models, 1):.2f} s per model, "
        f"{args.models * len(samples) / total:,.0f} samples/s)"
    )


if __name__ == "__main__":
    main()
