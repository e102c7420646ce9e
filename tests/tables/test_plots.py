"""Plot data from hand-made metrics tables, and the figures they draw."""

from __future__ import annotations

import pandas as pd
import pytest

from dualcog.plots import draw_plots, model_frame
from dualcog.plots.data import answer_vs_grounding, audit_gains, by_difficulty, cognition_balance
from dualcog.tasks import IMAGE_TASKS

MODELS = [
    {"name": "a", "display_name": "Model A", "group": "proprietary", "backend": "openai"},
    {"name": "b", "group": "open-weights", "backend": "simulated", "reasoning_only": True},
]


def _row(model, task, metric, value, parse="compatible", stratum="all"):
    return {"model": model, "task": task, "parse": parse, "stratum": stratum,
            "metric": metric, "value": value, "n": 10}  # fmt: skip


def _metrics() -> pd.DataFrame:
    rows = []
    for i, task in enumerate(IMAGE_TASKS):
        rows += [_row("a", task, "option_acc", 0.8), _row("a", task, "bbox_acc50", 0.2 + 0.1 * i)]
        rows += [_row("a", task, "bbox_acc50", 0.1, parse="legacy")]
        rows += [_row("a", task, "option_acc", 0.9, stratum="4way"),
                 _row("a", task, "option_acc", 0.5 + 0.1 * i, stratum="8way")]  # fmt: skip
    # b has only three image tasks: no audit average, no image difficulty mean.
    for task in IMAGE_TASKS[:3]:
        rows += [_row("b", task, "bbox_acc50", 0.5), _row("b", task, "bbox_acc50", 0.4, "legacy")]
        rows += [_row("b", task, "option_acc", 0.7, stratum="4way")]
    rows += [
        _row("a", "overall", "agent_state_score", 0.6),
        _row("a", "overall", "world_state_score", 0.4),
        _row("b", "overall", "agent_state_score", 0.3),  # no world-state score: not drawn
        _row("a", "landmark_visibility", "count_acc", 0.25, stratum="hard"),
    ]
    return pd.DataFrame(rows)


def test_model_labels_mark_simulated_and_reasoning_only_runs():
    frame = model_frame(MODELS)
    assert frame.loc["a", "label"] == "Model A"
    assert frame.loc["b", "label"] == "b (sim.) [T]"
    assert list(frame.index) == ["a", "b"]


def test_answer_vs_grounding_pairs_option_and_box_per_task():
    intervals = _metrics().assign(ci_low=lambda f: f["value"] - 0.05, ci_high=1.0)
    data = answer_vs_grounding(_metrics(), intervals).set_index(["model", "task"])
    row = data.loc[("a", "self_position")]
    assert (row["option_acc"], row["bbox_acc50"]) == (0.8, pytest.approx(0.4))
    assert row["bbox_acc50_ci_low"] == pytest.approx(0.35)
    assert row["option_acc_ci_high"] == 1.0


def test_cognition_balance_needs_both_scores():
    data = cognition_balance(_metrics())
    assert data["model"].tolist() == ["a"]
    assert (data["agent"].iloc[0], data["world"].iloc[0]) == (0.6, 0.4)


def test_difficulty_means_need_every_task_of_the_panel():
    data = by_difficulty(_metrics())
    image = data[data["panel"].str.startswith("Image: Option")].set_index(["model", "stratum"])
    assert image.loc[("a", "4way"), "value"] == pytest.approx(0.9)
    assert image.loc[("a", "8way"), "value"] == pytest.approx((0.5 + 0.6 + 0.7 + 0.8) / 4)
    assert "b" not in image.index.get_level_values("model")
    count = data[data["panel"] == "Video: Count Acc"]
    assert count[["model", "stratum", "value"]].values.tolist() == [["a", "hard", 0.25]]


def test_audit_gains_average_the_four_image_tasks():
    data = audit_gains(_metrics())
    assert data["model"].tolist() == ["a"]
    assert data["original"].iloc[0] == pytest.approx(0.1)
    assert data["compatible"].iloc[0] == pytest.approx((0.2 + 0.3 + 0.4 + 0.5) / 4)
    assert data["gain"].iloc[0] == pytest.approx(0.25)


def test_figures_are_written_as_png_and_svg(tmp_path):
    written = draw_plots(
        ["answer_vs_grounding", "cognition_balance", "by_difficulty", "audit_gains"],
        _metrics(), model_frame(MODELS), None, tmp_path,
    )  # fmt: skip
    assert sorted(p.name for p in written) == sorted(
        f"{n}.{f}" for n in ("answer_vs_grounding", "cognition_balance", "by_difficulty",
                             "audit_gains") for f in ("png", "svg")
    )  # fmt: skip
    assert (tmp_path / "audit_gains.png").read_bytes()[:4] == b"\x89PNG"
    svg = (tmp_path / "cognition_balance.svg").read_text()
    assert "Model A" in svg and "World-state score (%)" in svg and "Proprietary" in svg
    again = draw_plots(["audit_gains"], _metrics(), model_frame(MODELS), None, tmp_path / "x")
    assert again[1].read_bytes() == (tmp_path / "audit_gains.svg").read_bytes()  # reproducible


def test_sparse_runs_still_draw_every_plot(tmp_path):
    # One agent-state image task only: no world-state score, no audit, no video panels.
    metrics = pd.DataFrame(
        [
            _row("a", "landmark_position", "option_acc", 0.5),
            _row("a", "landmark_position", "bbox_acc50", 0.25),
            _row("a", "overall", "agent_state_score", 0.4),
        ]
    )
    assert cognition_balance(metrics).empty and audit_gains(metrics).empty
    assert by_difficulty(metrics).empty
    assert answer_vs_grounding(metrics)["model"].tolist() == ["a"]
    names = ["answer_vs_grounding", "cognition_balance", "by_difficulty", "audit_gains"]
    written = draw_plots(names, metrics, model_frame(MODELS), None, tmp_path)
    assert len(written) == 8
    assert "no model ran all four image tasks" in (tmp_path / "audit_gains.svg").read_text()


def test_many_models_are_numbered_with_a_key(tmp_path):
    models = [{"name": f"m{i}", "group": "open-weights"} for i in range(14)]
    metrics = pd.DataFrame(
        [_row(f"m{i}", "overall", metric, 0.05 * i)
         for i in range(14) for metric in ("agent_state_score", "world_state_score")]
    )  # fmt: skip
    draw_plots(["cognition_balance"], metrics, model_frame(models), None, tmp_path)
    svg = (tmp_path / "cognition_balance.svg").read_text()
    assert "14  m13" in svg and "1  m0" in svg  # the key: number and name
