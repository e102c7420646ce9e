"""The paper's tables (PROTOCOL §7) rendered from the long metrics table.

Every table is built once as a typed frame of fractions (`build_*`), then written in each
requested format: CSV keeps plain fractions for machines; Markdown, LaTeX and HTML show
percentages with one decimal, the best value of each column bold and the second underlined
within each model group, and a `T` mark on reasoning-only rows.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dualcog.stamp import model_digests_line, stamp_summary
from dualcog.tasks import IMAGE_TASKS, SCORED_BY_TASK

GROUP_ORDER = ("proprietary", "open-weights", "spatial", "baseline")
GROUP_TITLES = {
    "proprietary": "Proprietary models",
    "open-weights": "Open-weights foundation models",
    "spatial": "Spatially specialized models",
    "baseline": "Baselines",
}
STAGES = ("strict", "fence", "balanced", "keys", "invalid", "missing")


@dataclass(frozen=True)
class Column:
    """One value column: where it comes from in the metrics table and how it is headed."""

    header: str
    task: str
    metric: str
    parse: str = "compatible"


@dataclass
class Table:
    name: str
    title: str
    frame: pd.DataFrame  # index: model run name; columns: Column.header (+ text columns)
    columns: list[Column]
    text_columns: list[str] = field(default_factory=list)
    highlight: bool = True
    notes: list[str] = field(default_factory=list)


def _model_rows(models: Sequence[Mapping]) -> pd.DataFrame:
    rows = []
    for order, model in enumerate(models):
        label = model.get("display_name") or model["name"]
        if model.get("backend") == "simulated":
            label += " (simulated)"
        if model.get("reasoning_only"):
            label += " ᵀ"
        rows.append(
            {
                "model": model["name"],
                "label": label,
                "group": model.get("group") or "baseline",
                "order": order,
            }
        )
    frame = pd.DataFrame(rows, columns=["model", "label", "group", "order"])
    frame["group_rank"] = frame["group"].map({g: i for i, g in enumerate(GROUP_ORDER)})
    return frame.sort_values(["group_rank", "order"]).set_index("model")


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


TASK_ABBREVIATIONS = {
    "landmark_position": "LP",
    "future_observation": "FO",
    "self_position": "SP",
    "action_decision": "AD",
    "composite_behavior": "Comp",
    "atomic_behavior": "Atom",
    "landmark_visibility": "Vis",
    "position": "Pos",
    "action_observation": "A-O",
    "video": "Video",
}


def _legend(tasks: Iterable[str]) -> str:
    names = []
    for task in tasks:
        scored = SCORED_BY_TASK.get(task)
        title = scored.display_name if scored else f"dual family {task}"
        names.append(f"{TASK_ABBREVIATIONS[task]} = {title}")
    return "Columns: " + "; ".join(names) + "."


def image_columns() -> list[Column]:
    columns = []
    for task in IMAGE_TASKS:
        short = TASK_ABBREVIATIONS[task]
        columns += [
            Column(f"{short} Option Acc", task, "option_acc"),
            Column(f"{short} BBox Acc@50", task, "bbox_acc50"),
            Column(f"{short} BBox mIoU", task, "bbox_miou"),
        ]
    for family in ("position", "action_observation"):
        short = TASK_ABBREVIATIONS[family]
        columns += [
            Column(f"{short} Dual Semantic", family, "dual_semantic_acc"),
            Column(f"{short} Dual Evidence", family, "dual_evidence_acc"),
        ]
    return columns


def video_columns() -> list[Column]:
    return [
        Column("Comp Acc", "composite_behavior", "composite_acc"),
        Column("Comp Temporal F1@0.5", "composite_behavior", "temporal_f1_50"),
        Column("Comp mean tIoU", "composite_behavior", "mean_tiou"),
        Column("Atom F1", "atomic_behavior", "atomic_f1"),
        Column("Atom Temporal F1@0.5", "atomic_behavior", "temporal_f1_50"),
        Column("Atom mean tIoU", "atomic_behavior", "mean_tiou"),
        Column("Vis Count Acc", "landmark_visibility", "count_acc"),
        Column("Vis Segment F1@0.5", "landmark_visibility", "segment_f1_50"),
        Column("Vis mean tIoU", "landmark_visibility", "mean_tiou"),
        Column("Video Dual Semantic", "video", "dual_semantic_acc"),
        Column("Video Dual Evidence", "video", "dual_evidence_acc"),
    ]


def overall_columns() -> list[Column]:
    return [
        Column("Semantic", "overall", "semantic_score"),
        Column("Evidence", "overall", "evidence_score"),
        Column("Agent-state", "overall", "agent_state_score"),
        Column("World-state", "overall", "world_state_score"),
        Column("Overall", "overall", "overall_score"),
    ]


def build_main(
    name: str, title: str, metrics: pd.DataFrame, models: Sequence[Mapping], columns: list[Column]
) -> Table:
    rows = _model_rows(models)
    frame = _pivot(metrics, columns, rows.index)
    present = [c for c in columns if frame[c.header].notna().any()]
    frame = frame[[c.header for c in present]]
    keep = frame.notna().any(axis=1)
    frame = frame[keep]
    frame.insert(0, "Model", rows.loc[frame.index, "label"])
    frame.insert(0, "Group", rows.loc[frame.index, "group"])
    tasks = list(dict.fromkeys(c.task for c in present if c.task in TASK_ABBREVIATIONS))
    notes = [_legend(tasks)] if tasks else []
    return Table(name, title, frame, present, text_columns=["Group", "Model"], notes=notes)


def build_audit(
    metrics: pd.DataFrame,
    models: Sequence[Mapping],
    runs: Mapping[str, Mapping],
    stage_counts: Mapping[str, Mapping[str, int]],
) -> Table:
    """Compatibility audit (PROTOCOL §7): legacy vs compatible BBox Acc@0.5 over image tasks."""
    rows = _model_rows(models)
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
            "Change (pp)": (compatible - original) * 100,
            "Strict BBox Acc@0.5": means.get((model, "strict"), np.nan),
            "Scale": f"{run.get('scale', '?')} ({run.get('scale_source', '?')})",
            "Boxes > 1": run.get("n_over_one"),
        }
        for stage in STAGES:
            record[f"n {stage}"] = int(counts.get(stage, 0))
        records.append(pd.Series(record, name=model))
    frame = pd.DataFrame(records)
    columns = [
        Column("Original BBox Acc@0.5", "", "", "legacy"),
        Column("Compatible BBox Acc@0.5", "", ""),
        Column("Strict BBox Acc@0.5", "", "", "strict"),
    ]
    text = ["Group", "Model", "Change (pp)", "Scale", "Boxes > 1"] + [f"n {s}" for s in STAGES]
    if frame.empty:
        frame = pd.DataFrame(columns=[*text[:2], *(c.header for c in columns), *text[2:]])
    return Table(
        "audit",
        "Compatibility audit: Original (legacy) vs compatible BBox Acc@0.5, mean of the four "
        "image tasks",
        frame,
        columns,
        text_columns=text,
        highlight=False,
        notes=[
            "n <stage>: image samples per compatible-parse stage label (PROTOCOL §3.2).",
            "Scale: the run-level coordinate scale (PROTOCOL §3.3) and whether it was inferred "
            "or set in the config; Boxes > 1: boxes with a coordinate above 1 (|M|).",
        ],
    )


def audit_gains(audit: Table) -> Table:
    frame = audit.frame
    if not frame.empty:
        frame = frame[frame["Change (pp)"] > 0].sort_values("Change (pp)", ascending=False)
    return Table(
        "audit_gains",
        "Models whose BBox Acc@0.5 rose under the compatible parser (the seed page's view)",
        frame,
        audit.columns,
        text_columns=audit.text_columns,
        highlight=False,
        notes=audit.notes,
    )


# -- rendering ------------------------------------------------------------------------------


def _marks(table: Table) -> dict[tuple[str, str], str]:
    """(row, column) -> 'best' | 'second' within each model group."""
    marks: dict[tuple[str, str], str] = {}
    if not table.highlight or table.frame.empty:
        return marks
    for _, group in table.frame.groupby("Group", sort=False):
        for column in table.columns:
            values = group[column.header].dropna()
            distinct = sorted(set(np.round(values.to_numpy(dtype=float), 12)), reverse=True)
            if len(group) < 2 or not distinct:
                continue
            for model, value in values.items():
                rounded = round(float(value), 12)
                if rounded == distinct[0]:
                    marks[(model, column.header)] = "best"
                elif len(distinct) > 1 and rounded == distinct[1]:
                    marks[(model, column.header)] = "second"
    return marks


def _percent(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{float(value) * 100:.1f}"


def _text(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:+.1f}"
    return str(value)


def _cells(table: Table, style: Mapping[str, str]) -> tuple[list[str], list[list[str]]]:
    marks = _marks(table)
    value_headers = {c.header for c in table.columns}
    headers = [h for h in table.frame.columns if h != "Group"]
    body = []
    for model, row in table.frame.iterrows():
        cells = []
        for header in headers:
            if header in value_headers:
                cell = _percent(row[header])
                mark = marks.get((model, header))
                if mark:
                    cell = style[mark].format(cell)
            else:
                cell = _text(row[header])
            cells.append(cell)
        body.append(cells)
    return headers, body


def to_markdown(table: Table, stamp: Mapping | None = None) -> str:
    headers, body = _cells(table, {"best": "**{}**", "second": "<u>{}</u>"})
    lines = [f"## {table.title}", ""]
    groups = table.frame["Group"].tolist() if not table.frame.empty else []
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    previous = None
    for group, cells in zip(groups, body, strict=True):
        if table.highlight and group != previous:
            title = GROUP_TITLES.get(group, group)
            lines.append("| " + " | ".join([f"*{title}*"] + [""] * (len(headers) - 1)) + " |")
            previous = group
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "Values are percentages (compatible parse unless the header says otherwise). "
        + ("Bold: best in group; underlined: second. " if table.highlight else "")
        + "ᵀ: reasoning-only model run at its lowest effort."
    )
    lines.extend(table.notes)
    if stamp:
        lines += ["", f"Stamp: {stamp_summary(stamp)}. {model_digests_line(stamp)}."]
    return "\n".join(lines) + "\n"


def _latex_escape(text: str) -> str:
    for char, escaped in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("_", r"\_"),
        ("#", r"\#"),
        ("ᵀ", r"$^{T}$"),
    ):
        text = text.replace(char, escaped)
    return text


def to_latex(table: Table, stamp: Mapping | None = None) -> str:
    headers, body = _cells(table, {"best": r"\textbf{{{}}}", "second": r"\underline{{{}}}"})
    lines = [f"% Stamp: {stamp_summary(stamp)}"] if stamp else []
    lines += [r"\begin{tabular}{l" + "r" * (len(headers) - 1) + "}", r"\toprule"]
    lines.append(" & ".join(_latex_escape(h) for h in headers) + r" \\")
    lines.append(r"\midrule")
    for cells in body:
        lines.append(" & ".join(_latex_escape(c) if "\\" not in c else c for c in cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def to_html(table: Table, stamp: Mapping | None = None) -> str:
    headers, body = _cells(table, {"best": "<b>{}</b>", "second": "<u>{}</u>"})
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{c if c.startswith(('<b>', '<u>')) else html.escape(c)}</td>" for c in cells
        )
        + "</tr>"
        for cells in body
    )
    footer = ""
    if stamp:
        data = html.escape(json.dumps(stamp, sort_keys=True), quote=True)
        footer = f'<p class="stamp" data-stamp="{data}">{html.escape(stamp_summary(stamp))}</p>\n'
    return (
        f"<table>\n<caption>{html.escape(table.title)}</caption>\n"
        f"<thead><tr>{head}</tr></thead>\n<tbody>{rows}</tbody>\n</table>\n{footer}"
    )


def to_csv(table: Table, stamp: Mapping | None = None) -> str:
    """Plain CSV (a stamp cannot live inside it: `write_table` writes a sidecar)."""
    frame = table.frame.copy()
    frame.index.name = "run"
    return frame.to_csv(float_format="%.6g")


WRITERS = {"csv": to_csv, "md": to_markdown, "tex": to_latex, "html": to_html}


def write_table(
    table: Table, directory: str | Path, formats: Iterable[str], stamp: Mapping | None = None
) -> list[Path]:
    """Write `table` in each format; with a stamp, CSV gets `<name>.stamp.json` beside it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = directory / f"{table.name}.{fmt}"
        path.write_text(WRITERS[fmt](table, stamp), encoding="utf-8")
        written.append(path)
        if fmt == "csv" and stamp:
            sidecar = directory / f"{table.name}.stamp.json"
            sidecar.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", "utf-8")
            written.append(sidecar)
    return written


def stage_counts(parsed: pd.DataFrame) -> dict[str, int]:
    """Image samples per compatible-parse stage label, for the audit table."""
    rows = parsed[(parsed["parse"] == "compatible") & parsed["task"].isin(IMAGE_TASKS)]
    return {str(k): int(v) for k, v in rows["stage"].value_counts().items()}


def build_all(
    names: Iterable[str],
    metrics: pd.DataFrame,
    models: Sequence[Mapping],
    runs: Mapping[str, Mapping],
    counts: Mapping[str, Mapping[str, int]],
) -> list[Table]:
    """Build the named tables (`audit`, `audit_gains`, `image_main`, `video_main`, `overall`)."""
    audit = build_audit(metrics, models, runs, counts)
    builders = {
        "audit": lambda: audit,
        "audit_gains": lambda: audit_gains(audit),
        "image_main": lambda: build_main(
            "image_main", "Image tasks", metrics, models, image_columns()
        ),
        "video_main": lambda: build_main(
            "video_main", "Video tasks", metrics, models, video_columns()
        ),
        "overall": lambda: build_main(
            "overall",
            "Convenience aggregates (browsing only; the task metrics are primary)",
            metrics,
            models,
            overall_columns(),
        ),
    }
    return [builders[name]() for name in names]
