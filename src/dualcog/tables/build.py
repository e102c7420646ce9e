"""Build the paper's tables (docs/protocol.md, tables) as typed frames of fractions."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from dualcog.tables.coverage import (
    coverage_from_metrics,
    member_tasks,
    per_task_coverage,
    row_coverage,
    table_flags,
)
from dualcog.tables.model import (
    CHANGE_HEADER,
    COST_HEADER,
    GROUP_ORDER,
    STAGES,
    TASK_ABBREVIATIONS,
    TOKENS_HEADER,
    Column,
    Table,
    image_columns,
    legend,
    marked_label,
    overall_columns,
    video_columns,
)
from dualcog.tables.shares import OUTCOME_NOTE, add_outcome_shares
from dualcog.tasks import IMAGE_TASKS


def model_rows(models: Sequence[Mapping]) -> pd.DataFrame:
    """Per configured model, in table order: label (with its marks), group and flags."""
    rows = []
    for order, model in enumerate(models):
        label = marked_label(model, " (simulated)", " ᵀ")
        rows.append(
            {
                "model": model["name"],
                "label": label,
                "group": model.get("group") or "baseline",
                "order": order,
                "backend": model.get("backend") or "",
                "reasoning_only": bool(model.get("reasoning_only")),
            }
        )
    frame = pd.DataFrame(
        rows, columns=["model", "label", "group", "order", "backend", "reasoning_only"]
    )
    frame["group_rank"] = frame["group"].map({g: i for i, g in enumerate(GROUP_ORDER)})
    return frame.sort_values(["group_rank", "order"]).set_index("model")


def main_table_models(models: Sequence[Mapping]) -> list[Mapping]:
    """The runs that are rows of the main tables and aggregates (`main_table`, default true).

    Extra runs of a model (`main_table: false`) stay in the audit, the metrics and the plots.
    """
    return [model for model in models if model.get("main_table", True) is not False]


def _pivot(metrics: pd.DataFrame, columns: Iterable[Column], models: pd.Index) -> pd.DataFrame:
    overall = metrics[metrics["stratum"] == "all"]
    lookup = overall.set_index(["model", "task", "parse", "metric"])["value"]
    data = {}
    for column in columns:
        data[column.header] = [
            lookup.get((model, column.task, column.parse, column.metric), np.nan)
            for model in models
        ]
    return pd.DataFrame(data, index=models)


def _coverage_block(coverage: pd.DataFrame, models: pd.Index, tasks: Sequence[str]) -> pd.DataFrame:
    """Per row: responses and expected over the table's requests, and each task's rate."""
    scored = list(dict.fromkeys(m for t in tasks for m in member_tasks(t)))
    scored = [t for t in scored if t in set(coverage["task"])]
    if not scored:
        return pd.DataFrame(index=models)
    sums = row_coverage(coverage, models, scored)
    rates = per_task_coverage(coverage, models, scored)
    return pd.concat([sums, rates], axis=1)


def _blank_silent_cells(frame: pd.DataFrame, flags: Mapping[tuple[str, str], str]) -> None:
    # A cell with no response behind it would otherwise read as a measured 0.0.
    for (model, header), flag in flags.items():
        if flag == "none":
            frame.loc[model, header] = np.nan


def build_main(
    name: str,
    title: str,
    metrics: pd.DataFrame,
    models: Sequence[Mapping],
    columns: list[Column],
    tokens: Mapping[str, float] | None = None,
    cost: Mapping[str, float] | None = None,
) -> Table:
    """A main table or the aggregates: one row per `main_table` run, marks over those rows.

    `tokens` (mean output tokens) and `cost` (USD per run) add a column each when given.
    """
    rows = model_rows(main_table_models(models))
    frame = _pivot(metrics, columns, rows.index)
    present = [c for c in columns if frame[c.header].notna().any()]
    frame = frame[[c.header for c in present]]
    frame = frame[frame.notna().any(axis=1)].copy()
    coverage = coverage_from_metrics(metrics)
    flags = table_flags(frame, present, coverage)
    _blank_silent_cells(frame, flags)
    frame.insert(0, "Model", rows.loc[frame.index, "label"])
    frame.insert(0, "Group", rows.loc[frame.index, "group"])
    text_columns = ["Group", "Model"]
    formats = {}
    if tokens is not None:
        frame[TOKENS_HEADER] = [tokens.get(model, np.nan) for model in frame.index]
        text_columns.append(TOKENS_HEADER)
        formats[TOKENS_HEADER] = ".0f"
    if cost is not None:
        frame[COST_HEADER] = [cost.get(model, np.nan) for model in frame.index]
        text_columns.append(COST_HEADER)
        formats[COST_HEADER] = ",.2f"
    tasks = list(dict.fromkeys(c.task for c in present))
    named = [t for t in tasks if t in TASK_ABBREVIATIONS]
    notes = [legend(named)] if named else []
    return Table(
        name,
        title,
        frame,
        present,
        text_columns=text_columns,
        notes=notes,
        coverage=_coverage_block(coverage, frame.index, tasks),
        flags=flags,
        number_formats=formats,
    )


def build_audit(
    metrics: pd.DataFrame,
    models: Sequence[Mapping],
    runs: Mapping[str, Mapping],
    stage_counts: Mapping[str, Mapping[str, int]],
    shares: pd.DataFrame | None = None,
) -> Table:
    """Compatibility audit: legacy vs compatible BBox Acc@0.5 over the image tasks.

    `shares` (`dualcog.tables.usage.outcome_shares`) adds each outcome class's percentage of the
    model's samples (all its tasks).
    """
    rows = model_rows(models)
    image = metrics[
        (metrics["stratum"] == "all")
        & (metrics["metric"] == "bbox_acc50")
        & metrics["task"].isin(IMAGE_TASKS)
    ]
    means = {}
    for (model, parse), group in image.groupby(["model", "parse"]):
        # Averaged only over models with all four image tasks stored ("complete outputs").
        means[(model, parse)] = group["value"].mean() if len(group) == len(IMAGE_TASKS) else np.nan
    records = []
    for model in rows.index:
        original = means.get((model, "legacy"), np.nan)
        compatible = means.get((model, "compatible"), np.nan)
        if math.isnan(original) and math.isnan(compatible):
            continue
        run = runs.get(model, {})
        counts = stage_counts.get(model, {})
        record = {
            "Group": rows.loc[model, "group"],
            "Model": rows.loc[model, "label"],
            "Original BBox Acc@0.5": original,
            "Compatible BBox Acc@0.5": compatible,
            CHANGE_HEADER: (compatible - original) * 100,
            "Strict BBox Acc@0.5": means.get((model, "strict"), np.nan),
            "Scale": f"{run.get('scale', '?')} ({run.get('scale_source', '?')})",
            "Boxes > 1": run.get("n_over_one"),
        }
        for stage in STAGES:
            record[f"n {stage}"] = int(counts.get(stage, 0))
        records.append(pd.Series(record, name=model))
    frame = pd.DataFrame(records)
    columns = [
        Column("", "Original BBox Acc@0.5", "", "bbox_acc50", "legacy"),
        Column("", "Compatible BBox Acc@0.5", "", "bbox_acc50"),
        Column("", "Strict BBox Acc@0.5", "", "bbox_acc50", "strict"),
    ]
    text = ["Group", "Model", CHANGE_HEADER, "Scale", "Boxes > 1"] + [f"n {s}" for s in STAGES]
    if frame.empty:
        frame = pd.DataFrame(columns=[*text[:2], *(c.header for c in columns), *text[2:]])
    formats = {CHANGE_HEADER: "+.1f"}
    notes = [
        "n <stage>: image samples per stage of the compatible parser at which the answer was read.",
        "Scale: the run-level coordinate scale and whether it was inferred or set in the "
        "config; Boxes > 1: boxes with a coordinate above 1.",
    ]
    if shares is not None:
        share_formats = add_outcome_shares(frame, shares)
        text += list(share_formats)
        formats.update(share_formats)
        notes.append(OUTCOME_NOTE)
    coverage = coverage_from_metrics(metrics)
    flags = table_flags(frame, columns, coverage, audit_tasks=IMAGE_TASKS)
    _blank_silent_cells(frame, flags)
    for model, header in list(flags):
        if flags[(model, header)] == "none":
            frame.loc[model, CHANGE_HEADER] = np.nan
    return Table(
        "audit",
        "Compatibility audit: Original (legacy) vs compatible BBox Acc@0.5, mean of the four "
        "image tasks",
        frame,
        columns,
        text_columns=text,
        highlight=False,
        notes=notes,
        coverage=_coverage_block(coverage, frame.index, IMAGE_TASKS),
        flags=flags,
        number_formats=formats,
    )


def audit_gains(audit: Table) -> Table:
    frame = audit.frame
    if not frame.empty:
        frame = frame[frame[CHANGE_HEADER] > 0].sort_values(CHANGE_HEADER, ascending=False)
    return Table(
        "audit_gains",
        "Models whose BBox Acc@0.5 rose under the compatible parser (the seed page's view)",
        frame,
        audit.columns,
        text_columns=audit.text_columns,
        highlight=False,
        grouped=False,
        notes=audit.notes,
        coverage=audit.coverage.reindex(frame.index),
        flags={k: v for k, v in audit.flags.items() if k[0] in frame.index},
        number_formats=audit.number_formats,
    )


@dataclass(frozen=True)
class UsageInputs:
    """What the usage table and the outcome shares are built from (`dualcog.usage`)."""

    facts: pa.Table  # RESPONSE_FACTS rows of every run (usage.read_facts)
    shares: pd.DataFrame  # tables.usage.outcome_shares
    mode_flags: Mapping[str, str]  # usage.mode_flags


@dataclass
class TableInputs:
    """Everything a table builder (dualcog.tables.catalog) may read, built once per job."""

    metrics: pd.DataFrame
    models: Sequence[Mapping]
    runs: Mapping[str, Mapping]
    counts: Mapping[str, Mapping[str, int]]
    tokens: Mapping[str, float] | None = None  # mean output tokens per model
    usage: UsageInputs | None = None

    @cached_property
    def audit(self) -> Table:  # `audit` and `audit_gains` share it
        shares = self.usage.shares if self.usage is not None else None
        return build_audit(self.metrics, self.models, self.runs, self.counts, shares)


def audit_table(inputs: TableInputs) -> Table:
    return inputs.audit


def audit_gains_table(inputs: TableInputs) -> Table:
    return audit_gains(inputs.audit)


def image_main_table(inputs: TableInputs) -> Table:
    return build_main("image_main", "Image tasks", inputs.metrics, inputs.models, image_columns())


def video_main_table(inputs: TableInputs) -> Table:
    return build_main("video_main", "Video tasks", inputs.metrics, inputs.models, video_columns())


def overall_table(inputs: TableInputs) -> Table:
    return build_main(
        "overall",
        "Convenience aggregates (browsing only; the task metrics are primary)",
        inputs.metrics,
        inputs.models,
        overall_columns(),
        inputs.tokens,
    )
