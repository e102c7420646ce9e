"""End-to-end: intervals, a paired comparison, the plots and the report of the shared demo run
(`demo_workflow`: bootstrap with 400 replicates, seed 11; PERMILLE compared with random)."""

from __future__ import annotations

import struct
from pathlib import Path

import pandas as pd
import pytest
from demo_fixtures import BOOTSTRAP, DEMO_COMPARE, PERMILLE
from workflow_runner import run_snakemake

from dualcog.stats import COMPARISON, CONFIDENCE_INTERVALS

pytestmark = pytest.mark.workflow

PLOTS = ("answer_vs_grounding", "cognition_balance", "by_difficulty", "audit_gains")


def test_intervals_cover_every_metric_row_with_its_exact_value(demo_workflow: Path) -> None:
    metrics = pd.read_parquet(demo_workflow / "results" / "metrics" / "metrics.parquet")
    intervals = pd.read_parquet(demo_workflow / "results" / "metrics" / "intervals.parquet")
    assert list(intervals.columns) == CONFIDENCE_INTERVALS.names
    key = ["model", "task", "parse", "stratum", "metric"]
    joined = metrics.merge(intervals, on=key, how="outer", indicator=True)
    assert (joined["_merge"] == "both").all()
    assert (joined["value_x"].to_numpy() == joined["value_y"].to_numpy()).all()
    assert (intervals["seed"] == BOOTSTRAP["seed"]).all() and (intervals["level"] == 0.95).all()
    assert (intervals["n_boot"] <= BOOTSTRAP["replicates"]).all()
    assert (intervals["n_clusters"] >= 1).all()
    oracle = intervals[intervals["model"] == "oracle"]
    assert (oracle["ci_low"] == oracle["value"]).all()
    assert (oracle["ci_high"] == oracle["value"]).all()
    simulated = intervals[(intervals["model"] == PERMILLE)
                          & (intervals["metric"] == "option_acc")
                          & (intervals["parse"] == "compatible")
                          & (intervals["stratum"] == "all")]  # fmt: skip
    assert ((simulated["ci_high"] - simulated["ci_low"]) > 0).all()


def test_paired_comparison_is_written(demo_workflow: Path) -> None:
    assert DEMO_COMPARE == [PERMILLE, "random"]
    stem = demo_workflow / "results" / "compare" / "sim-permille-Instant__vs__random"
    frame = pd.read_parquet(stem.with_suffix(".parquet"))
    assert list(frame.columns) == COMPARISON.names
    metrics = pd.read_parquet(demo_workflow / "results" / "metrics" / "metrics.parquet")
    # Both ran every task, so the common samples are all samples: values as in metrics.
    key = ["task", "parse", "stratum", "metric"]
    for side, model in (("value_a", PERMILLE), ("value_b", "random")):
        ours = metrics[metrics["model"] == model].merge(frame, on=key)
        assert len(ours) == len(frame)
        assert (ours["value"] - ours[side]).abs().max() < 1e-12
    text = stem.with_suffix(".md").read_text()
    assert "# Paired comparison: sim-permille-Instant vs random" in text
    assert "| overall | overall_score |" in text


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", header[16:24])


def test_every_plot_is_drawn_with_labels(demo_workflow: Path) -> None:
    plots = demo_workflow / "results" / "plots"
    for name in PLOTS:
        width, height = _png_size(plots / f"{name}.png")
        assert width > 600 and height > 300
        svg = (plots / f"{name}.svg").read_text()
        assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    grounding = (plots / "answer_vs_grounding.svg").read_text()
    assert "Option accuracy (%)" in grounding and "BBox Acc@0.5 (%)" in grounding
    assert "sim-permille-Instant (sim.)" in grounding and "right answer," in grounding
    balance = (plots / "cognition_balance.svg").read_text()
    assert "Agent-state score (%)" in balance and "Open-weights" in balance
    assert "8way" in (plots / "by_difficulty.svg").read_text()
    assert "Original (legacy parse)" in (plots / "audit_gains.svg").read_text()


def test_report_holds_every_plot_with_its_caption(demo_copy: Path) -> None:
    run_snakemake(demo_copy, "--report", "report.html")
    report = (demo_copy / "report.html").read_text()
    for name in PLOTS:
        assert f"{name}.png" in report, name
    for phrase in ("Answer vs grounding", "Agent-state vs world-state balance",
                   "Accuracy by difficulty", "Compatibility audit gains"):  # fmt: skip
        assert phrase in report, phrase
