"""Per-task metrics, convenience aggregates and the METRICS rows of one model (§4–§7, §9).

The work is on Arrow tables and numpy (`model_metrics`). Sums are those pandas' group-by
computed before (compensated, in row order: `kahan_sums`), so every value is the same to the
last bit.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable

import numpy as np
import pyarrow as pa

from dualcog.schemas import METRICS, table_from_columns
from dualcog.scoring.columns import counts, dense_groups, encoded, flags, floats, kahan_sums
from dualcog.scoring.dual import FAMILY_SIDES, dual_metric_rows, pairs_for_tasks
from dualcog.scoring.intervals import f1_score
from dualcog.tasks import (
    IMAGE_DIFFICULTIES,
    IMAGE_TASKS,
    PARSE_MODES,
    SCORED_BY_TASK,
    SCORED_TASKS,
    VIDEO_DIFFICULTIES,
)

METRIC_COLUMNS = ["task", "parse", "stratum", "metric", "value", "n"]

# The 14 headline metrics behind the convenience aggregates (§7), compatible parse.
SEMANTIC_METRICS: tuple[tuple[str, str], ...] = (
    *((task, "option_acc") for task in IMAGE_TASKS),
    ("composite_behavior", "composite_acc"),
    ("atomic_behavior", "atomic_f1"),
    ("landmark_visibility", "count_acc"),
)
EVIDENCE_METRICS: tuple[tuple[str, str], ...] = (
    *((task, "bbox_acc50") for task in IMAGE_TASKS),
    ("composite_behavior", "temporal_f1_50"),
    ("atomic_behavior", "temporal_f1_50"),
    ("landmark_visibility", "segment_f1_50"),
)
AGGREGATE_PARSE = "compatible"

# Summed score columns: (name, score column); flags count their true values (null: 0).
_FLAG_SUMS = (("responded", "responded"), ("valid", "valid"),
              ("option_correct", "option_correct"), ("bbox_hit", "bbox_hit"),
              ("joint_correct", "joint_correct"), ("composite_correct", "composite_set_correct"),
              ("count_correct", "count_correct"))  # fmt: skip
_COUNT_SUMS = (("label_tp", "label_tp"), ("label_fp", "label_fp"), ("label_fn", "label_fn"),
               ("interval_tp", "interval_tp"), ("interval_fp", "interval_fp"),
               ("interval_fn", "interval_fn"), ("n_gold", "n_gold_intervals"))  # fmt: skip
_FLOAT_SUMS = (("iou", "iou"), ("tiou_sum", "tiou_sum"))

Row = tuple  # (task, parse, stratum, metric, value, n)


def _task_rows(task: str, s: dict) -> list[tuple[str, float, int]]:
    """(metric, value, n) of one task × parse × stratum from its summed score columns."""
    n = int(s["n"])
    rows = [
        ("response_rate", s["responded"] / n, n),
        ("valid_rate", s["valid"] / n, n),
    ]
    interval_f1 = f1_score(s["interval_tp"], s["interval_fp"], s["interval_fn"])
    mean_tiou = (s["tiou_sum"] / s["n_gold"], int(s["n_gold"])) if s["n_gold"] else None
    if task in IMAGE_TASKS:
        rows += [
            ("option_acc", s["option_correct"] / n, n),
            ("bbox_acc50", s["bbox_hit"] / n, n),
            ("bbox_miou", s["iou"] / n, n),
            ("joint_acc", s["joint_correct"] / n, n),
        ]
    elif task == "composite_behavior":
        if s["composite_n"]:
            composite_n = int(s["composite_n"])
            rows.append(("composite_acc", s["composite_correct"] / composite_n, composite_n))
        rows.append(("temporal_f1_50", interval_f1, n))
    elif task == "atomic_behavior":
        rows.append(("atomic_f1", f1_score(s["label_tp"], s["label_fp"], s["label_fn"]), n))
        rows.append(("temporal_f1_50", interval_f1, n))
    elif task == "landmark_visibility":
        rows.append(("count_acc", s["count_correct"] / n, n))
        rows.append(("segment_f1_50", interval_f1, n))
    if mean_tiou is not None and task not in IMAGE_TASKS:
        rows.append(("mean_tiou", *mean_tiou))
    return [(metric, float(value), count) for metric, value, count in rows]


def _stratum_groups(scores: pa.Table) -> tuple[np.ndarray, np.ndarray, list[tuple]]:
    """Every row under stratum `all`, and again under its difficulty when it has one.

    Returns the rows (positions into `scores`), each one's group, and the groups' (task,
    parse, stratum) names, groups sorted by name (rows without a task or parse left out).
    """
    task, tasks = encoded(scores["task"])
    parse, parses = encoded(scores["parse"])
    difficulty, difficulties = encoded(scores["difficulty"])
    strata = list(dict.fromkeys(["all", *difficulties]))
    stratum_of = np.array([strata.index(d) for d in difficulties], dtype=np.int64)
    graded = np.flatnonzero(difficulty >= 0)
    rows = np.concatenate([np.arange(scores.num_rows), graded])
    stratum = np.concatenate([np.zeros(scores.num_rows, np.int64), stratum_of[difficulty[graded]]])
    keep = (task[rows] >= 0) & (parse[rows] >= 0)
    rows, stratum = rows[keep], stratum[keep]
    combined = (task[rows] * len(parses) + parse[rows]) * len(strata) + stratum
    found, group = dense_groups(combined, len(tasks) * len(parses) * len(strata))
    names = []
    for value in found.tolist():
        rest, s = divmod(value, len(strata))
        t, p = divmod(rest, len(parses))
        names.append((tasks[t], parses[p], strata[s]))
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), np.int64)
    rank[order] = np.arange(len(names))
    return rows, rank[group], [names[i] for i in order]


def task_metric_rows(scores: pa.Table) -> list[Row]:
    """Per scored task × parse × stratum metric rows (§4, §5, §9) of a SCORES table, rows with
    n = 0 left out, groups in (task, parse, stratum) order."""
    if scores.num_rows == 0:
        return []
    rows, group, names = _stratum_groups(scores)
    size = len(names)
    sums: dict[str, np.ndarray] = {"n": np.bincount(group, minlength=size).astype(np.float64)}
    for name, column in _FLAG_SUMS:
        sums[name] = np.bincount(group, weights=flags(scores[column])[rows], minlength=size)
    _, known = counts(scores["composite_set_correct"].cast(pa.int64()))
    sums["composite_n"] = np.bincount(group, weights=known[rows], minlength=size)
    for name, column in _COUNT_SUMS:
        values, _ = counts(scores[column])
        sums[name] = np.bincount(group, weights=values[rows], minlength=size)
    for name, column in _FLOAT_SUMS:
        sums[name] = kahan_sums(floats(scores[column])[rows], group, size)
    out = []
    for at, (task, parse, stratum) in enumerate(names):
        for metric, value, n in _task_rows(task, {k: v[at] for k, v in sums.items()}):
            if n > 0:
                out.append((task, parse, stratum, metric, value, n))
    return out


def aggregate_inputs(available: Container[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """Per convenience score but `overall_score` (§7): the headline (task, metric) keys it
    averages, among those `available` (a run over some tasks averages what it has)."""
    headline = SEMANTIC_METRICS + EVIDENCE_METRICS

    def present(keys: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return [key for key in keys if key in available]

    return {
        "semantic_score": present(SEMANTIC_METRICS),
        "evidence_score": present(EVIDENCE_METRICS),
        "agent_state_score": present(
            k for k in headline if SCORED_BY_TASK[k[0]].cognition == "agent-state"
        ),
        "world_state_score": present(
            k for k in headline if SCORED_BY_TASK[k[0]].cognition == "world-state"
        ),
    }


def overall_rows(per_task: Iterable[Row]) -> list[Row]:
    """Convenience aggregates (§7): means of the headline metrics present, compatible, `all`.

    A score is computed over the inputs present in `per_task` (a run over image tasks only
    averages its 4 + 4 image metrics), `n` being how many values were averaged; a score
    with no input is omitted.
    """
    value_of = {(t, m): v for t, p, s, m, v, _ in per_task if p == AGGREGATE_PARSE and s == "all"}
    groups = {
        name: [value_of[key] for key in keys] for name, keys in aggregate_inputs(value_of).items()
    }
    groups["overall_score"] = [
        float(np.mean(groups[g])) for g in ("semantic_score", "evidence_score") if groups[g]
    ]
    return [
        ("overall", AGGREGATE_PARSE, "all", metric, float(np.mean(values)), len(values))
        for metric, values in groups.items()
        if values
    ]


def _ordered(rows: list[Row]) -> list[Row]:
    """Stable reading order: tasks as in §1, then dual families, then overall; `all` first."""
    task_order = [t.task for t in SCORED_TASKS] + list(FAMILY_SIDES) + ["overall"]
    strata = ["all", *IMAGE_DIFFICULTIES, *VIDEO_DIFFICULTIES]
    ranks = [{name: i for i, name in enumerate(names)} for names in (task_order, PARSE_MODES,
                                                                    strata)]  # fmt: skip

    def key(row: Row) -> tuple:
        # Unknown names sort last (as pandas' NaN ranks did), then by stratum name.
        return (*(rank.get(value, math.inf) for rank, value in zip(ranks, row[:3], strict=True)),
                row[2])  # fmt: skip

    return sorted(rows, key=key)


def model_metrics(model: str, tasks: Iterable[str], scores: pa.Table, pairs: pa.Table) -> pa.Table:
    """All METRICS rows of one model run: tasks, dual families, overall aggregates.

    `tasks`: the tasks the run was scored on; `pairs`: the benchmark's matched-context pairs
    (PAIRS), of which only the families of `tasks` are used.
    """
    per_task = task_metric_rows(scores)
    dual = dual_metric_rows(scores, pairs_for_tasks(pairs, tasks))
    rows = _ordered(per_task + dual + overall_rows(per_task))
    columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in range(6)]
    columns[4] = [float(value) for value in columns[4]]
    columns[5] = [int(n) for n in columns[5]]
    return table_from_columns([[model] * len(rows), *columns], METRICS)
