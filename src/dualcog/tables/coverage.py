"""Coverage: how many of a model's expected samples got a response, per task.

Read from the `response_rate` rows of the metrics table (value = responses / expected,
n = expected), so a table can say which numbers rest on fewer than all samples and which
on none at all. Also the mean output tokens per model, read from the raw responses.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from dualcog.scoring.dual import FAMILY_SIDES
from dualcog.tables.model import Column
from dualcog.tasks import REQUEST_BY_TASK, SCORED_BY_TASK, SCORED_TASKS

COVERAGE_COLUMNS = ["model", "task", "responses", "expected"]
# Response rates do not depend on the parse; compatible rows exist for every task.
COVERAGE_PARSE = "compatible"


def coverage_from_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, scored task): responses and expected samples (stratum `all`)."""
    rows = metrics[
        (metrics["metric"] == "response_rate")
        & (metrics["stratum"] == "all")
        & (metrics["parse"] == COVERAGE_PARSE)
    ]
    expected = rows["n"].astype(int)
    frame = pd.DataFrame(
        {
            "model": rows["model"].astype(str),
            "task": rows["task"].astype(str),
            # value * n is an integer count stored as a fraction; round away float error.
            "responses": np.rint(rows["value"].astype(float) * expected).astype(int),
            "expected": expected,
        }
    )
    return frame.reset_index(drop=True)[COVERAGE_COLUMNS]


def member_tasks(task: str) -> tuple[str, ...]:
    """The scored tasks a column's value is computed from (a dual family: both sides)."""
    if task in SCORED_BY_TASK:
        return (task,)
    if task in FAMILY_SIDES:
        members: list[str] = []
        for side in FAMILY_SIDES[task]:
            kind = REQUEST_BY_TASK.get(side)
            members.extend(kind.scored_as if kind else (side,))
        return tuple(members)
    if task == "overall":
        return tuple(t.task for t in SCORED_TASKS)
    raise KeyError(f"no scored tasks known for table column task {task!r}")


def cell_flag(covered: pd.DataFrame, tasks: Iterable[str], *, any_empty_is_none: bool) -> str:
    """'' (all samples answered or no coverage known), 'partial' or 'none' for one cell.

    `covered` is one model's coverage rows indexed by task. A cell whose every member
    task has no response is 'none'; so is a dual cell with one side silent, since its
    pairs cannot be scored (`any_empty_is_none`).
    """
    counts = dict(zip(covered.index, zip(covered["responses"], covered["expected"], strict=True),
                      strict=True))  # fmt: skip
    return _flag(counts, tasks, any_empty_is_none)


def _flag(counts: dict, tasks: Iterable[str], any_empty_is_none: bool) -> str:
    """`cell_flag` over one model's task -> (responses, expected)."""
    present = [counts[t] for t in tasks if t in counts]
    if not present:
        return ""
    empty = [responses == 0 for responses, _ in present]
    if all(empty) or (any_empty_is_none and any(empty)):
        return "none"
    if any(responses < expected for responses, expected in present):
        return "partial"
    return ""


def table_flags(
    frame: pd.DataFrame,
    columns: Iterable[Column],
    coverage: pd.DataFrame,
    audit_tasks: tuple[str, ...] = (),
) -> dict[tuple[str, str], str]:
    """(model, header) -> 'partial' | 'none' for every marked value cell of a table."""
    flags: dict[tuple[str, str], str] = {}
    # Plain dicts: a pandas look-up per cell cost seconds over the paper's 45 models.
    by_model: dict[str, dict] = {}
    for model, task, responses, expected in zip(
        coverage["model"], coverage["task"], coverage["responses"], coverage["expected"],
        strict=True,
    ):  # fmt: skip
        by_model.setdefault(model, {})[task] = (responses, expected)
    for column in columns:
        tasks = member_tasks(column.task) if column.task else audit_tasks
        dual = column.task in FAMILY_SIDES
        for model in frame.index:
            counts = by_model.get(model)
            if counts is None:
                continue
            flag = _flag(counts, tasks, dual)
            if flag:
                flags[(model, column.header)] = flag
    return flags


def row_coverage(coverage: pd.DataFrame, models: pd.Index, tasks: Iterable[str]) -> pd.DataFrame:
    """Per model: responses and expected over the distinct requests behind `tasks`.

    Composite and atomic behavior are scored from one request, so they count once.
    """
    wanted: dict[str, str] = {}
    for task in tasks:
        for member in member_tasks(task):
            wanted.setdefault(SCORED_BY_TASK[member].request, member)
    rows = coverage[coverage["task"].isin(list(wanted.values()))]
    sums = rows.groupby("model")[["responses", "expected"]].sum()
    return sums.reindex(models)


def per_task_coverage(
    coverage: pd.DataFrame, models: pd.Index, tasks: Iterable[str]
) -> pd.DataFrame:
    """Per model and scored task: responses / expected as a fraction (NaN where unknown)."""
    frame = coverage.assign(rate=coverage["responses"] / coverage["expected"])
    wide = frame.pivot_table(index="model", columns="task", values="rate", aggfunc="first")
    return wide.reindex(index=models, columns=list(tasks))


def mean_output_tokens(responses: Iterable[pd.DataFrame]) -> dict[str, float]:
    """Per model: mean `completion_tokens` over ok responses that report it."""
    totals: dict[str, list[float]] = {}
    for frame in responses:
        ok = frame[(frame["status"] == "ok") & frame["completion_tokens"].notna()]
        for model, tokens in ok.groupby("model")["completion_tokens"]:
            entry = totals.setdefault(str(model), [0.0, 0.0])
            entry[0] += float(tokens.sum())
            entry[1] += len(tokens)
    return {model: total / count for model, (total, count) in totals.items() if count}


def coverage_text(responses: object, expected: object) -> str:
    if expected is None or pd.isna(expected):
        return "–"
    return f"{int(responses)}/{int(expected)}"
