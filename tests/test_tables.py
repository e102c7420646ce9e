from __future__ import annotations

import io

import pandas as pd
import pytest

from dualcog.tables import (
    audit_gains,
    build_all,
    build_audit,
    build_main,
    image_columns,
    stage_counts,
    to_csv,
    to_html,
    to_latex,
    to_markdown,
)
from dualcog.tasks import IMAGE_TASKS

MODELS = [
    {"name": "a", "group": "proprietary", "backend": "openai"},
    {"name": "b", "group": "proprietary", "backend": "openai", "reasoning_only": True},
    {"name": "c", "group": "proprietary", "backend": "openai"},
    {"name": "sim", "group": "open-weights", "backend": "simulated", "display_name": "Sim"},
]


def _metrics(rows):
    return pd.DataFrame(
        [
            {"model": m, "task": t, "parse": p, "stratum": s, "metric": k, "value": v, "n": 10}
            for m, t, p, s, k, v in rows
        ]
    )


def _image_metrics(values: dict[str, float], parse="compatible", metric="option_acc"):
    return _metrics(
        [
            (model, task, parse, "all", metric, value)
            for model, value in values.items()
            for task in IMAGE_TASKS
        ]
    )


def test_main_table_marks_best_and_second_within_group() -> None:
    metrics = pd.concat(
        [
            _image_metrics({"a": 0.5, "b": 0.75, "c": 0.25, "sim": 0.1}),
            _metrics([("a", "landmark_position", "compatible", "4way", "option_acc", 0.9)]),
        ]
    )
    table = build_main("image_main", "Image", metrics, MODELS, image_columns())
    assert [c.header for c in table.columns] == [
        "LP Option Acc",
        "FO Option Acc",
        "SP Option Acc",
        "AD Option Acc",
    ]
    markdown = to_markdown(table)
    line_b = next(line for line in markdown.splitlines() if line.startswith("| b ᵀ"))
    line_a = next(line for line in markdown.splitlines() if line.startswith("| a |"))
    line_c = next(line for line in markdown.splitlines() if line.startswith("| c |"))
    assert "**75.0**" in line_b
    assert "<u>50.0</u>" in line_a
    assert "25.0" in line_c and "**" not in line_c and "<u>" not in line_c
    # A group of one gets no marks; the simulated label is explicit.
    line_sim = next(line for line in markdown.splitlines() if "Sim (simulated)" in line)
    assert "**" not in line_sim
    assert "LP = Landmark-relative Position Reasoning" in markdown
    # Strata other than `all` never leak into the main table.
    assert "90.0" not in markdown


def test_csv_keeps_fractions_and_latex_html_escape() -> None:
    metrics = _image_metrics({"a": 0.5, "b": 0.75, "c": 0.25, "sim": 0.1})
    table = build_main("image_main", "Image", metrics, MODELS, image_columns())
    frame = pd.read_csv(io.StringIO(to_csv(table)), index_col="run")
    assert frame.loc["b", "LP Option Acc"] == 0.75
    latex = to_latex(table)
    assert r"\textbf{75.0}" in latex and r"\underline{50.0}" in latex
    assert r"\textsuperscript{T}" in latex
    html = to_html(table)
    assert "<b>75.0</b>" in html and "<u>50.0</u>" in html


def test_ties_share_the_mark_and_missing_values_show_a_dash() -> None:
    metrics = _image_metrics({"a": 0.5, "b": 0.5, "c": 0.25})
    table = build_main("image_main", "Image", metrics, MODELS, image_columns())
    markdown = to_markdown(table)
    assert markdown.count("**50.0**") == 8  # a and b tie for best in all 4 columns
    assert "<u>25.0</u>" in markdown
    assert "sim" not in table.frame.index  # a model without values is left out


def test_audit_change_and_gains_view() -> None:
    metrics = pd.concat(
        [
            _image_metrics({"a": 0.10, "b": 0.40, "c": 0.3}, "legacy", "bbox_acc50"),
            _image_metrics({"a": 0.35, "b": 0.40, "c": 0.2}, "compatible", "bbox_acc50"),
            _image_metrics({"a": 0.05, "b": 0.40, "c": 0.2}, "strict", "bbox_acc50"),
        ]
    )
    runs = {"a": {"scale": "per_mille", "scale_source": "inferred", "n_over_one": 12}}
    counts = {"a": {"fence": 7, "strict": 3}}
    audit = build_audit(metrics, MODELS, runs, counts)
    row = audit.frame.loc["a"]
    assert row["Change (pp)"] == pytest.approx(25.0)
    assert row["Scale"] == "per_mille (inferred)"
    assert row["n fence"] == 7 and row["n keys"] == 0
    gains = audit_gains(audit)
    assert list(gains.frame.index) == ["a"]
    assert "+25.0" in to_markdown(gains)


def test_audit_needs_all_four_image_tasks() -> None:
    metrics = _image_metrics({"a": 0.5}, "compatible", "bbox_acc50")
    metrics = metrics[metrics["task"] != "action_decision"]
    audit = build_audit(metrics, MODELS, {}, {})
    assert audit.frame.empty or pd.isna(audit.frame.loc["a", "Compatible BBox Acc@0.5"])


def test_build_all_names_and_stage_counts() -> None:
    parsed = pd.DataFrame(
        {
            "task": ["landmark_position", "landmark_position", "behavior", "self_position"],
            "parse": ["compatible", "strict", "compatible", "compatible"],
            "stage": ["fence", "invalid", "keys", "fence"],
        }
    )
    assert stage_counts(parsed) == {"fence": 2}
    metrics = _image_metrics({"a": 0.5})
    names = [t.name for t in build_all(["audit", "overall"], metrics, MODELS, {}, {})]
    assert names == ["audit", "overall"]
