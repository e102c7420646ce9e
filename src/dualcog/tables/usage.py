"""The `usage` table (requests, tokens, dollars per model and task) and the outcome shares.

Numbers come from `dualcog.usage.usage_records`; a built-in backend's cells, counts nobody
reported and costs without prices are missing and render as a dash, never as 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from dualcog.schemas import OUTCOMES
from dualcog.tables.build import TableInputs, model_rows
from dualcog.tables.model import COST_HEADER, Table
from dualcog.tables.shares import OUTCOME_NOTE, add_outcome_shares
from dualcog.usage import USAGE_COLUMNS, usage_records

ALL_TASKS = "all"
USAGE_HEADERS = {
    "requests": "Requests",
    "reported": "With usage",
    "prompt_tokens": "Prompt tokens",
    "completion_tokens": "Completion tokens",
    "reasoning_tokens": "Reasoning tokens",
    "cached_tokens": "Cached prompt tokens",
    "cost_usd": COST_HEADER,
}
COUNT_FORMAT = ",.0f"
COST_FORMAT = ",.4f"
USAGE_NOTES = [
    "Tokens as the servers reported them (replayed runs: as their records carry them); "
    "reasoning tokens are part of the completion tokens and priced with them.",
    "Cached prompt tokens are part of the prompt tokens (served from the provider's prompt "
    "cache; – where the provider does not report them).",
    "Cost: prompt and completion tokens at the model's prices (USD per million tokens; cached "
    "prompt tokens at its cached-input price where one is given). "
    "– : not reported, no prices, or a built-in backend (which sends no request).",
]


def usage_by_task(facts: pa.Table, models: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """`usage.usage_records` of `facts` (RESPONSE_FACTS rows) as a frame of `USAGE_COLUMNS`,
    the numbers as float64 (NaN where missing)."""
    frame = pd.DataFrame(usage_records(facts, models), columns=list(USAGE_COLUMNS))
    return frame.astype({c: "float64" for c in USAGE_COLUMNS[2:]})


def usage_totals(by_task: pd.DataFrame) -> pd.DataFrame:
    """Per model: the sums of `usage_by_task` over its tasks (NaN stays NaN when all are)."""
    numbers = list(USAGE_COLUMNS[2:])
    return by_task.groupby("model", sort=False)[numbers].sum(min_count=1)


def outcome_shares(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per model: the share of its samples in each class (columns `OUTCOMES`) and `samples`,
    from rows of model and outcome (`tables.inputs.read_request_outcomes`)."""
    counts = pd.crosstab(outcomes["model"], outcomes["outcome"])
    counts = counts.reindex(columns=list(OUTCOMES), fill_value=0)
    total = counts.sum(axis=1)
    shares = counts.div(total.where(total > 0), axis=0)
    shares["samples"] = total
    return shares


def _counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Token and request counts as nullable integers (CSV writes them whole), cost as float."""
    out = frame.rename(columns=USAGE_HEADERS)
    for column in USAGE_HEADERS.values():
        if column != COST_HEADER:
            out[column] = out[column].round().astype("Int64")
    return out


def build_usage(
    facts: pa.Table,
    models: Sequence[Mapping],
    *,
    per_task: bool = True,
    shares: pd.DataFrame | None = None,
    mode_flags: Mapping[str, str] | None = None,
    name: str = "usage",
) -> Table:
    """Rows per model (all its tasks) and, with `per_task`, per model and task, from `facts`
    (RESPONSE_FACTS rows).

    Row keys: the run name for a model's total, `<run>/<task>` for one task. `shares`
    (`outcome_shares`) adds the outcome classes' percentages to the total rows;
    `mode_flags` become notes.
    """
    rows = model_rows(models)
    by_task = usage_by_task(facts, models)
    totals = usage_totals(by_task).reindex(rows.index)
    totals.insert(0, "Task", ALL_TASKS)
    parts = [totals]
    if per_task:
        sent = by_task[by_task["requests"].notna()]  # a built-in's task rows say nothing
        tasks = sent.assign(key=sent["model"] + "/" + sent["task"])
        tasks = tasks.rename(columns={"task": "Task"}).set_index("key")
        parts.append(tasks.drop(columns="model"))
    frame = pd.concat(parts)
    run = [key.split("/", 1)[0] for key in frame.index]
    frame["order"] = [rows.index.get_loc(r) for r in run]
    frame["is_task"] = frame["Task"] != ALL_TASKS
    frame = frame.sort_values(["order", "is_task"], kind="stable")
    run = [key.split("/", 1)[0] for key in frame.index]
    frame.insert(0, "Model", rows.loc[run, "label"].to_numpy())
    frame.insert(0, "Group", rows.loc[run, "group"].to_numpy())
    frame = _counts(frame.drop(columns=["order", "is_task"]))
    if not per_task:
        frame = frame.drop(columns="Task")
    formats = {header: COUNT_FORMAT for header in USAGE_HEADERS.values()}
    formats[COST_HEADER] = COST_FORMAT
    notes = list(USAGE_NOTES)
    if shares is not None:
        share_formats = add_outcome_shares(frame, shares)
        for key in frame.index:
            if "/" in key:  # shares are per model: left empty on the task rows
                for header in share_formats:
                    frame.loc[key, header] = float("nan")
        formats.update(share_formats)
        notes.append(OUTCOME_NOTE)
    # One note per kind of flag (at the paper's scale many runs share one), naming the runs.
    by_kind: dict[str, list[str]] = {}
    for model, why in (mode_flags or {}).items():
        kind = why.split(":", 1)[0]  # "-Thinking run without reasoning", "-Instant run with ..."
        by_kind.setdefault(kind, []).append(str(rows.loc[model, "label"]))
    for kind, labels in by_kind.items():
        question = "did the thinking switch take effect?"
        notes.append(f"Mode check, {kind} ({question}): {', '.join(labels)}.")
    text = [c for c in frame.columns if c not in ("Group", "Model")]
    return Table(
        name,
        "Usage and cost per model and task" if per_task else "Usage, cost and outcomes per model",
        frame,
        [],
        text_columns=["Group", "Model", *text],
        highlight=False,
        unit_note="Counts are requests and tokens; cost in US dollars.",
        notes=notes,
        number_formats=formats,
    )


def usage_table(inputs: TableInputs) -> Table:
    """The catalog's `usage` table (dualcog.tables.catalog)."""
    if inputs.usage is None:
        raise ValueError("the usage table needs the responses (UsageInputs)")
    return build_usage(inputs.usage.facts, inputs.models, mode_flags=inputs.usage.mode_flags)
