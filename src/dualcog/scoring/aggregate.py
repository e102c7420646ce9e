"""Per-task metrics, convenience aggregates and the METRICS rows of one model (§4–§7, §9)."""

from __future__ import annotations

from collections.abc import Container, Iterable

import numpy as np
import pandas as pd

from dualcog.schemas import METRICS
from dualcog.scoring.dual import FAMILY_SIDES, dual_metrics, pairs_for_tasks
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

_SUMS = {
    "n": ("sample_id", "size"),
    "responded": ("responded", "sum"),
    "valid": ("valid", "sum"),
    "option_correct": ("option_correct", "sum"),
    "bbox_hit": ("bbox_hit", "sum"),
    "iou": ("iou", "sum"),
    "joint_correct": ("joint_correct", "sum"),
    "composite_correct": ("composite_set_correct", "sum"),
    "composite_n": ("composite_set_correct", "count"),
    "label_tp": ("label_tp", "sum"),
    "label_fp": ("label_fp", "sum"),
    "label_fn": ("label_fn", "sum"),
    "interval_tp": ("interval_tp", "sum"),
    "interval_fp": ("interval_fp", "sum"),
    "interval_fn": ("interval_fn", "sum"),
    "tiou_sum": ("tiou_sum", "sum"),
    "n_gold": ("n_gold_intervals", "sum"),
    "count_correct": ("count_correct", "sum"),
}


def _stratified(scores: pd.DataFrame) -> pd.DataFrame:
    """Every row under stratum `all`, and again under its difficulty when it has one."""
    by_difficulty = scores[scores["difficulty"].notna()]
    return pd.concat(
        [scores.assign(stratum="all"), by_difficulty.assign(stratum=by_difficulty["difficulty"])],
        ignore_index=True,
    )


def _task_rows(task: str, s: pd.Series) -> list[tuple[str, float, int]]:
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


def task_metrics(scores: pd.DataFrame) -> pd.DataFrame:
    """Per scored task × parse × stratum metric rows (§4, §5, §9), rows with n = 0 left out."""
    if scores.empty:
        return pd.DataFrame(columns=METRIC_COLUMNS)
    numeric = scores.copy()
    for column in ("responded", "valid", "option_correct", "bbox_hit", "joint_correct",
                   "count_correct"):  # fmt: skip
        numeric[column] = numeric[column].astype("Float64")
    numeric["composite_set_correct"] = numeric["composite_set_correct"].astype("Float64")
    sums = _stratified(numeric).groupby(["task", "parse", "stratum"], sort=True).agg(**_SUMS)
    rows = []
    for (task, parse, stratum), s in sums.iterrows():
        for metric, value, n in _task_rows(task, s.fillna(0)):
            if n > 0:
                rows.append((task, parse, stratum, metric, value, n))
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


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


def overall_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    """Convenience aggregates (§7): means of the headline metrics present, compatible, `all`.

    A score is computed over the inputs present in `metrics` (a run over image tasks only
    averages its 4 + 4 image metrics), `n` being how many values were averaged; a score
    with no input is omitted.
    """
    base = metrics[(metrics["parse"] == AGGREGATE_PARSE) & (metrics["stratum"] == "all")]
    value_of = {(t, m): v for t, m, v in base[["task", "metric", "value"]].itertuples(index=False)}
    groups = {
        name: [value_of[key] for key in keys] for name, keys in aggregate_inputs(value_of).items()
    }
    groups["overall_score"] = [
        float(np.mean(groups[g])) for g in ("semantic_score", "evidence_score") if groups[g]
    ]
    rows = [
        ("overall", AGGREGATE_PARSE, "all", metric, float(np.mean(values)), len(values))
        for metric, values in groups.items()
        if values
    ]
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


def model_metrics(
    model: str,
    samples: pd.DataFrame,
    scores: pd.DataFrame,
    pairs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """All METRICS rows of one model run: tasks, dual families, overall aggregates.

    `pairs`: the benchmark's matched-context pairs (`dual_pairs`), computed from `samples`
    when not given; only the families of the tasks in `samples` are used.
    """
    per_task = task_metrics(scores)
    if pairs is not None:
        pairs = pairs_for_tasks(pairs, samples["task"].unique())
    parts = [per_task, dual_metrics(samples, scores, pairs), overall_metrics(per_task)]
    frame = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    if frame.empty:
        frame = pd.DataFrame(columns=METRIC_COLUMNS)
    frame.insert(0, "model", model)
    frame = frame.astype({"value": "float64", "n": "int64"})
    return _ordered(frame)[METRICS.names].reset_index(drop=True)


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Stable reading order: tasks as in §1, then dual families, then overall; `all` first."""
    task_order = [t.task for t in SCORED_TASKS] + list(FAMILY_SIDES) + ["overall"]
    strata = ["all", *IMAGE_DIFFICULTIES, *VIDEO_DIFFICULTIES]
    keys = pd.DataFrame(
        {
            "task": frame["task"].map({t: i for i, t in enumerate(task_order)}),
            "parse": frame["parse"].map({p: i for i, p in enumerate(PARSE_MODES)}),
            "stratum_rank": frame["stratum"].map({s: i for i, s in enumerate(strata)}),
            "stratum": frame["stratum"],
        },
        index=frame.index,
    )
    order = keys.sort_values(list(keys.columns), kind="stable", na_position="last").index
    return frame.loc[order]
