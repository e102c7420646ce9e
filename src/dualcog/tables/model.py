"""What a table is: its value columns, its rows of models, and the column sets of the paper."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dualcog.backends import declared
from dualcog.tasks import IMAGE_TASKS, SCORED_BY_TASK, TASK_ABBREVIATIONS

GROUP_ORDER = ("proprietary", "open-weights", "spatial", "baseline")
GROUP_TITLES = {
    "proprietary": "Proprietary models",
    "open-weights": "Open-weights foundation models",
    "spatial": "Spatially specialized models",
    "baseline": "Baselines",
}
CHANGE_HEADER = "Change (pp)"


def marked_label(model: Mapping[str, Any], simulated_mark: str, thinking_mark: str) -> str:
    """A run's display name (else its run name) with the marks of a simulated backend and of
    a Thinking-only run; tables and plot legends differ only in the marks' wording."""
    label = model.get("display_name") or model["name"]
    if declared(model.get("backend")).simulated:
        label += simulated_mark
    if model.get("reasoning_only"):
        label += thinking_mark
    return label


TOKENS_HEADER = "Mean output tokens"
COST_HEADER = "Cost (USD)"
STAGES = ("strict", "fence", "balanced", "keys", "invalid", "missing")


# Optional provenance (code version, config digests, ...) that every writer can render.
Stamp = Mapping[str, Any]


@dataclass(frozen=True)
class Column:
    """One value column: where it comes from in the metrics table and how it is headed.

    `span` is the task group a two-level header puts above `label` (empty: no task row);
    the flat `header` used by CSV and Markdown is the two joined.
    """

    span: str
    label: str
    task: str
    metric: str
    parse: str = "compatible"

    @property
    def header(self) -> str:
        return f"{self.span} {self.label}" if self.span else self.label


@dataclass
class Table:
    """One table: fractions in `frame`, coverage beside them, and how to render it.

    `frame` is indexed by model run name and holds `Group`, `Model`, the value columns
    (by `Column.header`; NaN where there is no value) and the text columns. `coverage`
    holds, per row, the responses and expected samples of each task the table draws on;
    `flags` marks value cells computed from fewer than all samples (`partial`) or from no
    response at all (`none`, rendered as a dash whatever the stored value).
    """

    name: str
    title: str
    frame: pd.DataFrame
    columns: list[Column]
    text_columns: list[str] = field(default_factory=list)
    highlight: bool = True
    grouped: bool = True  # rows come in model-group blocks (False: one ranked list)
    unit_note: str = "Values are percentages (compatible parse unless the header says otherwise)."
    notes: list[str] = field(default_factory=list)
    coverage: pd.DataFrame = field(default_factory=pd.DataFrame)
    flags: dict[tuple[str, str], str] = field(default_factory=dict)
    # Format spec per text column holding numbers (e.g. "+.1f" for a signed change).
    number_formats: dict[str, str] = field(default_factory=dict)
    # (row, header) -> between-repeat SD of a repeat set's cell (dualcog.tables.repeats),
    # in the cell's unit (a fraction for value columns); shown as "±x.x" after the value.
    spreads: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def value_headers(self) -> list[str]:
        return [c.header for c in self.columns]


# What a dual family's values pair up, in the words of the legends (its id is a code name).
FAMILY_TITLES = {
    "position": "dual pairs of LP and SP samples",
    "action_observation": "dual pairs of FO and AD samples",
    "video": "dual pairs of behavior and visibility videos",
}


def task_title(task: str) -> str:
    scored = SCORED_BY_TASK.get(task)
    return scored.display_name if scored else FAMILY_TITLES[task]


def legend(tasks: list[str]) -> str:
    names = [f"{TASK_ABBREVIATIONS[task]} = {task_title(task)}" for task in tasks]
    return "Columns: " + "; ".join(names) + "."


def image_columns(parse: str = "compatible") -> list[Column]:
    columns = []
    for task in IMAGE_TASKS:
        short = TASK_ABBREVIATIONS[task]
        columns += [
            Column(short, "Option Acc", task, "option_acc", parse),
            Column(short, "BBox Acc@50", task, "bbox_acc50", parse),
            Column(short, "BBox mIoU", task, "bbox_miou", parse),
        ]
    for family in ("position", "action_observation"):
        short = TASK_ABBREVIATIONS[family]
        columns += [
            Column(short, "Dual Semantic", family, "dual_semantic_acc", parse),
            Column(short, "Dual Evidence", family, "dual_evidence_acc", parse),
        ]
    return columns


def video_columns(parse: str = "compatible") -> list[Column]:
    spec = [
        ("composite_behavior", "Acc", "composite_acc"),
        ("composite_behavior", "Temporal F1@0.5", "temporal_f1_50"),
        ("composite_behavior", "mean tIoU", "mean_tiou"),
        ("atomic_behavior", "F1", "atomic_f1"),
        ("atomic_behavior", "Temporal F1@0.5", "temporal_f1_50"),
        ("atomic_behavior", "mean tIoU", "mean_tiou"),
        ("landmark_visibility", "Count Acc", "count_acc"),
        ("landmark_visibility", "Segment F1@0.5", "segment_f1_50"),
        ("landmark_visibility", "mean tIoU", "mean_tiou"),
        ("video", "Dual Semantic", "dual_semantic_acc"),
        ("video", "Dual Evidence", "dual_evidence_acc"),
    ]
    return [
        Column(TASK_ABBREVIATIONS[task], label, task, metric, parse) for task, label, metric in spec
    ]


def overall_columns() -> list[Column]:
    return [
        Column("", "Semantic", "overall", "semantic_score"),
        Column("", "Evidence", "overall", "evidence_score"),
        Column("", "Agent-state", "overall", "agent_state_score"),
        Column("", "World-state", "overall", "world_state_score"),
        Column("", "Overall", "overall", "overall_score"),
    ]
