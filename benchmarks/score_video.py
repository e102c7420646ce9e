"""Video scoring: vectorized `score_samples` against a fair plain loop, on 200k predictions.

A prediction is one (sample, parse mode) row of a behavior or visibility sample. Random
samples carry 8 options at two levels, several gold items per level with 1-3 intervals and
visibility segments; answers jitter them, drop some, add distractors, repeat an option,
write reversed or out-of-range intervals, and some rows are missing or invalid. The naive
loop is the plain rule in pure Python over plain lists, one per column, extracted beforehand
(timed apart): a dict join, class-aware greedy matching with Python floats. Every score column
must be identical (tIoU sums bit for bit); wall and CPU time are printed side by side.

Usage: python benchmarks/score_video.py [--predictions 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import random

import pyarrow as pa
from _timing import machine, measure, report

from dualcog.schemas import PARSED, SAMPLES, padded
from dualcog.scoring import score_samples

PARSES = ("strict", "compatible")
OPTIONS = [("A", "atomic"), ("B", "atomic"), ("C", "atomic"), ("D", "atomic"),
           ("E", "composite"), ("F", "composite"), ("G", "atomic"), ("H", "composite")]  # fmt: skip
COLUMNS = ("interval_tp", "interval_fp", "interval_fn", "tiou_sum", "n_gold_intervals",
           "label_tp", "label_fp", "label_fn", "set_exact", "count_correct")  # fmt: skip


def _intervals(rng: random.Random, duration: float, k: int) -> list[list[float]]:
    cuts = sorted(round(rng.uniform(0, duration), 1) for _ in range(2 * k))
    return [[cuts[2 * i], cuts[2 * i + 1]] for i in range(k)]


def _jitter(rng: random.Random, intervals: list, duration: float) -> list:
    out = []
    for s, e in intervals:
        roll = rng.random()
        if roll < 0.05:
            out.append([e, s])  # reversed
        elif roll < 0.08:
            out.append([s, duration + 5.0])  # past the end
        else:
            out.append([round(s + rng.gauss(0, 0.5), 1), round(e + rng.gauss(0, 0.5), 1)])
    return out


def synthetic(n_samples: int, seed: int = 0) -> tuple[pa.Table, pa.Table]:
    rng = random.Random(seed)
    samples, parsed = [], []
    for i in range(n_samples):
        duration = rng.choice([30.0, 45.0, 60.0])
        if i % 2 == 0:
            gold = [
                {"option_id": o, "label": o, "level": lv,
                 "intervals": _intervals(rng, duration, rng.randint(1, 3))}
                for o, lv in rng.sample(OPTIONS, rng.randint(2, 4))
            ]  # fmt: skip
            samples.append({
                "sample_id": f"b{i}", "task": "behavior", "difficulty": "easy",
                "options": [{"option_id": o, "label": o, "level": lv} for o, lv in OPTIONS],
                "gold_items": gold, "duration_sec": duration,
                "composite_mission": rng.random() < 0.5,
            })  # fmt: skip
            for parse in PARSES:
                answers = [
                    {"option_id": g["option_id"],
                     "intervals": _jitter(rng, g["intervals"], duration)}
                    for g in gold if rng.random() < 0.8
                ]  # fmt: skip
                if rng.random() < 0.4:
                    answers.append({"option_id": rng.choice("ABCDEFGH"),
                                    "intervals": _intervals(rng, duration, 1)})  # fmt: skip
                valid = rng.random() > 0.05
                parsed.append({
                    "sample_id": f"b{i}", "task": "behavior", "parse": parse,
                    "stage": "missing" if rng.random() < 0.03 else "strict",
                    "all_valid": valid, "answers": answers if valid else None,
                    "answers_valid": valid,
                })  # fmt: skip
        else:
            gold = _intervals(rng, duration, rng.randint(0, 3))
            samples.append({
                "sample_id": f"v{i}", "task": "landmark_visibility", "difficulty": "hard",
                "duration_sec": duration, "gold_visible_count": len(gold),
                "gold_visible_intervals": gold,
            })  # fmt: skip
            for parse in PARSES:
                pred = _jitter(rng, gold, duration)
                if rng.random() < 0.3:
                    pred += _intervals(rng, duration, 1)
                parsed.append({
                    "sample_id": f"v{i}", "task": "landmark_visibility", "parse": parse,
                    "stage": "strict", "all_valid": True, "visible_count": len(pred),
                    "count_valid": True, "visible_intervals": pred, "intervals_valid": True,
                })  # fmt: skip
    return (
        pa.Table.from_pylist(samples, schema=_subset(SAMPLES, samples)),
        pa.Table.from_pylist(parsed, schema=_subset(PARSED, parsed)),
    )


def _subset(schema: pa.Schema, rows: list[dict]) -> pa.Schema:
    names = set().union(*(r.keys() for r in rows))
    return pa.schema([f for f in schema if f.name in names])


# -- the plain rule in pure Python ------------------------------------------------------------


def clip(intervals, duration) -> tuple[list, int]:
    limit = duration if duration is not None and math.isfinite(duration) else math.inf
    kept, invalid = [], 0
    for pair in intervals or ():
        if pair is None or len(pair) != 2 or pair[0] is None or pair[1] is None:
            invalid += 1
            continue
        s, e = pair
        if not (math.isfinite(s) and math.isfinite(e) and 0 <= s < e <= limit + 1.0):
            invalid += 1
            continue
        kept.append((min(s, limit), min(e, limit)))
    return kept, invalid


def gold_pairs(intervals) -> list:
    return [
        (p[0], p[1]) if p is not None and len(p) == 2 and None not in p else (math.nan, math.nan)
        for p in intervals or ()
    ]


def match(gold: dict, pred: dict, invalid: int) -> tuple[int, int, int, float, int]:
    """Class-aware greedy matching: pairs of tIoU > 0 by tIoU descending, ties by gold then
    predicted index, each interval once; the pairs taken at tIoU >= 0.5 are the hits (the
    walk at 0.5 is this walk's first part), the tIoU of all taken summed left to right."""
    tp, tiou_sum = 0, 0.0
    n_gold = sum(len(v) for v in gold.values())
    n_pred = sum(len(v) for v in pred.values()) + invalid
    for label, g in gold.items():
        p = pred.get(label)
        if not p or not g:
            continue
        pairs = []
        for i, (gs, ge) in enumerate(g):
            for j, (ps, pe) in enumerate(p):
                inter = max(min(ge, pe) - max(gs, ps), 0.0)
                union = (ge - gs) + (pe - ps) - inter
                if union > 0 and inter / union > 0:
                    pairs.append((-(inter / union), i, j))
        pairs.sort()
        used_g, used_p, class_sum = set(), set(), 0.0
        for v, i, j in pairs:
            if i not in used_g and j not in used_p:
                used_g.add(i)
                used_p.add(j)
                tp += -v >= 0.5
                class_sum += -v  # left to right, as the rule (Python 3.12's sum compensates)
        tiou_sum += class_sum
    return tp, n_pred - tp, n_gold - tp, tiou_sum, n_gold


def naive_scores(s: dict, p: dict) -> dict[str, list]:
    """The fair loop: one pass over plain Python lists per parse mode, in the order of
    `ours_in_loop_order`; every column appended directly."""
    row_of = {key: j for j, key in enumerate(zip(p["sample_id"], p["parse"], strict=True))}
    out: dict[str, list] = {name: [] for name in COLUMNS}
    (interval_tp, interval_fp, interval_fn, tiou_sums, n_golds, label_tp, label_fp, label_fn,
     set_exact, count_correct) = (out[name] for name in COLUMNS)  # fmt: skip
    stage, answers_valid, answers = p["stage"], p["answers_valid"], p["answers"]
    count_valid, intervals_valid = p["count_valid"], p["intervals_valid"]
    visible_count, visible_intervals = p["visible_count"], p["visible_intervals"]
    sample_columns = (s["sample_id"], s["task"], s["duration_sec"], s["options"], s["gold_items"],
                      s["gold_visible_count"], s["gold_visible_intervals"])  # fmt: skip
    for parse in PARSES:
        for sample_id, task, duration, options, gold_items, gold_count, gold_visible in zip(
            *sample_columns, strict=True
        ):
            j = row_of.get((sample_id, parse))
            responded = j is not None and stage[j] != "missing"
            if task == "behavior":
                valid = responded and bool(answers_valid[j])
                level_of = {o["option_id"]: o["level"] for o in options or ()}
                gold = {"composite": {}, "atomic": {}}
                for item in gold_items or ():
                    level = item["level"] if item["level"] in gold else "atomic"
                    level_of.setdefault(item["option_id"], level)
                    gold[level].setdefault(item["option_id"], []).extend(
                        gold_pairs(item["intervals"])
                    )
                pred = {"composite": {}, "atomic": {}}
                for item in (answers[j] or ()) if valid else ():
                    level = level_of.get(item["option_id"])
                    level = level if level in pred else "atomic"
                    pred[level].setdefault(item["option_id"], []).extend(item["intervals"] or ())
                for level in ("composite", "atomic"):
                    kept, invalid = {}, 0
                    for label, intervals in pred[level].items():
                        kept[label], bad = clip(intervals, duration)
                        invalid += bad
                    tp, fp, fn, tiou_sum, n_gold = match(gold[level], kept, invalid)
                    ids_p, ids_g = pred[level].keys(), gold[level].keys()
                    interval_tp.append(tp)
                    interval_fp.append(fp)
                    interval_fn.append(fn)
                    tiou_sums.append(tiou_sum)
                    n_golds.append(n_gold)
                    label_tp.append(len(ids_p & ids_g))
                    label_fp.append(len(ids_p - ids_g))
                    label_fn.append(len(ids_g - ids_p))
                    set_exact.append(valid and ids_p == ids_g)
                    count_correct.append(None)
            else:
                count_ok = responded and bool(count_valid[j])
                intervals_ok = responded and bool(intervals_valid[j])
                kept, invalid = clip(visible_intervals[j] if intervals_ok else None, duration)
                tp, fp, fn, tiou_sum, n_gold = match(
                    {"v": gold_pairs(gold_visible)}, {"v": kept}, invalid
                )
                interval_tp.append(tp)
                interval_fp.append(fp)
                interval_fn.append(fn)
                tiou_sums.append(tiou_sum)
                n_golds.append(n_gold)
                label_tp.append(None)
                label_fp.append(None)
                label_fn.append(None)
                set_exact.append(None)
                count_correct.append(
                    count_ok and gold_count is not None and visible_count[j] == gold_count
                )
    return out


def ours_in_loop_order(table: pa.Table, samples: pa.Table) -> dict[str, list]:
    """score_samples groups rows by kind; put them back in the loop's (parse, sample) order."""
    rows = {name: table[name].to_pylist() for name in ("sample_id", "task", "parse", *COLUMNS)}
    at = {}
    for k, key in enumerate(zip(rows["sample_id"], rows["parse"], rows["task"], strict=True)):
        at[key] = k
    out: dict[str, list] = {name: [] for name in COLUMNS}
    for parse in PARSES:
        for sample_id, task in zip(samples["sample_id"].to_pylist(),
                                   samples["task"].to_pylist(), strict=True):  # fmt: skip
            tasks = ("composite_behavior", "atomic_behavior") if task == "behavior" else (task,)
            for scored in tasks:
                k = at[(sample_id, parse, scored)]
                for name in COLUMNS:
                    out[name].append(rows[name][k])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    samples, parsed = synthetic(-(-args.predictions // len(PARSES)))
    samples, parsed = padded(samples, SAMPLES), padded(parsed, PARSED)
    convert, (s, p) = measure(
        lambda: ({n: samples[n].to_pylist() for n in samples.column_names},
                 {n: parsed[n].to_pylist() for n in parsed.column_names}), 1)  # fmt: skip
    print(f"(loop input: Arrow -> Python lists took {convert.wall_s:.2f} s wall, "
          f"{convert.cpu_s:.2f} CPU-s, not counted)")  # fmt: skip
    ours_t, table = measure(lambda: score_samples(samples, parsed, PARSES), args.repeats)
    naive_t, naive = measure(lambda: naive_scores(s, p), args.repeats)
    ours = ours_in_loop_order(table, samples)
    for name in COLUMNS:
        got = [None if v is None else v for v in ours[name]]
        want = naive[name]
        if name in ("set_exact", "count_correct"):
            got = [v for v, w in zip(got, want, strict=True) if w is not None]
            want = [w for w in want if w is not None]
        assert got == want, f"{name} differs"
    n = len(samples) * len(PARSES)
    print(f"identical: {', '.join(COLUMNS)}")
    report("video scoring (join included), score_samples vs plain loop", n, "predictions",
           ours_t, naive_t)  # fmt: skip


if __name__ == "__main__":
    main()
