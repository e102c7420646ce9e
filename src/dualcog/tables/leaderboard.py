"""The leaderboard page: every table in one self-contained, interactive HTML file.

Views: image, video (each under the strict and the compatible parse), the compatibility
audit and the convenience aggregates with mean output tokens. Rows come in model-group
blocks that a filter hides and a click on a header sorts within; each value links to the
per-sample explorer (`explorer/<model>.html#task=<task>`); bootstrap intervals, when given,
show on hover and, on request, in the cells. CSS and JS are inlined: the page opens offline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from dualcog.backends import declared
from dualcog.scoring.dual import FAMILY_SIDES
from dualcog.tables.build import build_audit, build_main, model_rows
from dualcog.tables.cells import (
    COVERAGE_HEADER,
    DAGGER,
    DASH,
    Cell,
    Grid,
    grid,
    legend_lines,
    stamp_items,
)
from dualcog.tables.coverage import coverage_from_metrics, member_tasks
from dualcog.tables.html import cell_classes, header_rows
from dualcog.tables.inputs import TableInputs
from dualcog.tables.model import (
    GROUP_ORDER,
    GROUP_TITLES,
    TASK_ABBREVIATIONS,
    Stamp,
    Table,
    image_columns,
    overall_columns,
    video_columns,
)
from dualcog.tables.render_env import html_environment
from dualcog.tables.repeats import collapsed_views
from dualcog.tables.usage import build_usage, usage_by_task, usage_totals
from dualcog.tasks import SCORED_BY_TASK

PARSES = ("compatible", "strict")
STRICT_NOTE = "Values are percentages (strict parse: only exact canonical JSON counts)."


def explorer_link(model: str, task: str | None = None) -> str:
    """The per-sample explorer page of a model, opened on one task when given."""
    page = f"explorer/{quote(model, safe='')}.html"
    return f"{page}#task={quote(task, safe='')}" if task else page


@dataclass(frozen=True)
class Variant:
    """One rendered table of a view; `parse` is '' where the view has a single variant."""

    parse: str
    table: Table


@dataclass(frozen=True)
class View:
    key: str
    title: str
    variants: list[Variant]
    note: str = ""


def build_views(inputs: TableInputs, models: Sequence[Mapping]) -> list[View]:
    metrics = inputs.metrics
    views = []
    for key, title, columns in (
        ("image", "Image tasks", image_columns),
        ("video", "Video tasks", video_columns),
    ):
        variants = []
        for parse in PARSES:
            table = build_main(f"{key}_{parse}", title, metrics, models, columns(parse))
            if parse == "strict":
                table.unit_note = STRICT_NOTE
            if not table.frame.empty:
                variants.append(Variant(parse, table))
        if variants:
            views.append(View(key, title, variants))
    shares = inputs.usage.shares if inputs.usage is not None else None
    audit = build_audit(metrics, models, inputs.runs, inputs.counts, shares)
    if not audit.frame.empty:
        views.append(
            View(
                "audit",
                "Compatibility audit",
                [Variant("", audit)],
                "The audit compares the parses itself; the parse switch does not apply.",
            )
        )
    aggregate = build_main(
        "aggregate",
        "Convenience aggregates (browsing only; the task metrics are primary)",
        metrics,
        models,
        overall_columns(),
        inputs.tokens,
        _costs(inputs, models),
    )
    if not aggregate.frame.empty:
        views.append(
            View(
                "aggregate",
                "Aggregates",
                [Variant("", aggregate)],
                "Aggregates are defined on the compatible parse only; the parse switch does "
                "not apply. Mean output tokens: over ok responses whose server reported a "
                "completion token count. Cost: US dollars at the model's prices (– without "
                "prices, or for a built-in backend).",
            )
        )
    if inputs.usage is not None:
        usage = build_usage(
            inputs.usage.facts,
            models,
            per_task=False,
            shares=inputs.usage.shares,
            mode_flags=inputs.usage.mode_flags,
            name="usage",
        )
        if not usage.frame.empty:
            views.append(
                View(
                    "usage",
                    "Usage and outcomes",
                    [Variant("", usage)],
                    "Requests, tokens and dollars per model, and what became of each sample's "
                    "request; the parse switch does not apply. Per-task figures: "
                    "tables/usage.* .",
                )
            )
    return views


def _costs(inputs: TableInputs, models: Sequence[Mapping]) -> dict[str, float] | None:
    """USD per run from the responses (None when the inputs carry no usage)."""
    if inputs.usage is None:
        return None
    totals = usage_totals(usage_by_task(inputs.usage.facts, models))
    return totals["cost_usd"].dropna().to_dict()


def _interval_lookup(intervals: pd.DataFrame | None) -> dict[tuple[str, str, str, str], dict]:
    if intervals is None or intervals.empty:
        return {}
    rows = intervals[intervals["stratum"] == "all"]
    return {
        (r.model, r.task, r.parse, r.metric): {
            "low": float(r.ci_low),
            "high": float(r.ci_high),
            "level": float(r.level),
            "clusters": int(r.n_clusters),
            "boot": int(r.n_boot),
        }
        for r in rows.itertuples(index=False)
    }


def _task_coverage(coverage: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    return {
        (r.model, r.task): (int(r.responses), int(r.expected))
        for r in coverage.itertuples(index=False)
    }


@dataclass(frozen=True)
class PageContext:
    labels: Mapping[str, str]
    coverage: Mapping[tuple[str, str], tuple[int, int]]
    intervals: Mapping[tuple[str, str, str, str], dict]
    # Row -> the run whose explorer page it links to (a repeat set: its first repeat's).
    pages: Mapping[str, str] = field(default_factory=dict)


def _value_cell(cell: Cell, model: str, header: str, context: PageContext) -> dict[str, Any]:
    column = cell.column
    assert column is not None
    linked = column.task in SCORED_BY_TASK or column.task in FAMILY_SIDES
    tooltip = [
        f"{context.labels[model]} · {header}: {cell.text}" + ("%" if cell.value is not None else "")
    ]
    tasks = member_tasks(column.task) if column.task else ()
    for task in tasks:
        if (model, task) in context.coverage:
            responses, expected = context.coverage[(model, task)]
            tooltip.append(f"{TASK_ABBREVIATIONS[task]}: {responses}/{expected} responses")
    interval = context.intervals.get((model, column.task, column.parse, column.metric))
    ci = ""
    if interval and cell.value is not None:
        ci = f"[{interval['low'] * 100:.1f}, {interval['high'] * 100:.1f}]"
        tooltip.append(
            f"{interval['level'] * 100:.0f}% CI {ci} ({interval['clusters']} clusters, "
            f"{interval['boot']} resamples)"
        )
    return {
        "text": cell.text,
        "sort": "" if cell.value is None else repr(cell.value),
        "classes": cell_classes(cell),
        "mark": cell.mark,
        "dagger": cell.flag == "partial",
        "href": explorer_link(context.pages.get(model, model), column.task)
        if linked and cell.text != DASH
        else "",
        "title": " — ".join(tooltip),
        "ci": ci,
    }


def _text_cell(cell: Cell, model: str, header: str, context: PageContext) -> dict[str, Any]:
    is_model = header == "Model"
    return {
        "text": cell.text,
        "sort": "" if cell.value is None else repr(cell.value),
        "classes": cell_classes(cell) + (" coverage" if header == COVERAGE_HEADER else ""),
        "mark": "",
        "dagger": False,
        "href": explorer_link(context.pages.get(model, model)) if is_model else "",
        "title": "samples with a response / expected" if header == COVERAGE_HEADER else "",
        "ci": "",
    }


def _table_model(variant: Variant, context: PageContext, badges: Mapping[str, list[str]]):
    layout: Grid = grid(variant.table)
    blocks = []
    for block in layout.blocks:
        rows = []
        for row in block.rows:
            cells = [
                (_value_cell if cell.column is not None else _text_cell)(
                    cell, row.model, header, context
                )
                for cell, header in zip(row.cells, layout.headers, strict=True)
            ]
            rows.append({"model": row.model, "cells": cells, "badges": badges[row.model]})
        blocks.append({"group": block.group, "title": block.title, "rows": rows})
    return {
        "parse": variant.parse,
        "header_rows": header_rows(layout),
        "width": len(layout.headers),
        "model_index": layout.headers.index("Model"),
        "blocks": blocks,
        "legend": [
            line.replace(f"{DAGGER}: computed", f"{CORNER_MARK}: computed")
            for line in legend_lines(variant.table, layout)
        ],  # fmt: skip
        "grouped": variant.table.grouped,
    }


# How the page marks a value short of samples (leaderboard.css): a corner, not a dagger.
CORNER_MARK = "A value with an orange corner (a dagger in the other formats)"


# A display name with this word already says that the run is replayed.
REPLAY_WORD = "replay"


def _badges(
    models: Sequence[Mapping], mode_flags: Mapping[str, str] | None = None
) -> dict[str, list[str]]:
    rows = model_rows(models)
    found = {}
    for model, row in rows.iterrows():
        marks = []
        # The label already says "(simulated)" and carries the T mark; replayed runs are
        # labelled here unless their display name says so.
        if declared(row["backend"]).recorded and REPLAY_WORD not in row["label"].lower():
            marks.append("replayed")
        if mode_flags and model in mode_flags:  # the thinking switch seems not to have worked
            marks.append("mode?")
        found[str(model)] = marks
    return found


def render_leaderboard(
    inputs: TableInputs, models: Sequence[Mapping], stamp: Stamp | None = None
) -> str:
    # A repeat set (dualcog.tables.repeats) becomes one row: its mean and spread.
    inputs, models, views = collapsed_views(inputs, models, build_views)
    rows = model_rows(models)
    context = PageContext(
        labels=rows["label"].to_dict(),
        coverage=_task_coverage(coverage_from_metrics(inputs.metrics)),
        intervals=_interval_lookup(inputs.intervals),
        pages={m["name"]: m.get("explorer_page") or m["name"] for m in models},
    )
    badges = _badges(models, inputs.usage.mode_flags if inputs.usage is not None else None)
    groups = [g for g in GROUP_ORDER if g in set(rows["group"])]
    groups += sorted(set(rows["group"]) - set(groups))
    view_models = [
        {
            "key": view.key,
            "title": view.title,
            "note": view.note,
            "tables": [_table_model(v, context, badges) for v in view.variants],
        }
        for view in views
    ]
    return (
        html_environment()
        .get_template("leaderboard.html.j2")
        .render(
            views=view_models,
            groups=[(g, GROUP_TITLES.get(g, g)) for g in groups],
            parses=PARSES,
            has_intervals=bool(context.intervals),
            stamp=stamp_items(stamp if stamp is not None else inputs.stamp),
        )
    )


def write_leaderboard(
    path: str | Path,
    inputs: TableInputs,
    models: Sequence[Mapping],
    stamp: Stamp | None = None,
) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_leaderboard(inputs, models, stamp), encoding="utf-8")
    return path
