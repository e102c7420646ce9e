"""The integrations' library functions on hand-made cases (no Snakemake run)."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from demo_fixtures import DEMO

from dualcog.ingest import ingest
from dualcog.integrations.evaluation import (
    Answer,
    metric_key,
    metric_values,
    responses_table,
    score_answers,
)
from dualcog.integrations.exports import headline_rows, hub_eval_results, model_identity
from dualcog.stamp import stamp_digest


@pytest.fixture(scope="module")
def two_samples() -> pa.Table:
    samples, _ = ingest(DEMO, ["landmark_position"])
    return samples.slice(0, 2)


def gold_answer(row: dict) -> str:
    return json.dumps(
        {"answer_option_id": row["gold_option_id"], "bbox_xyxy_norm": row["gold_bbox"]}
    )


def test_responses_table_statuses(two_samples: pa.Table) -> None:
    first, second = two_samples["sample_id"].to_pylist()
    table = responses_table(two_samples, {first: Answer("x")}, "m", "inspect")
    assert table.select(["sample_id", "status", "raw_text"]).to_pylist() == [
        {"sample_id": first, "status": "ok", "raw_text": "x"},
        {"sample_id": second, "status": "missing", "raw_text": None},
    ]
    failed = responses_table(two_samples, {second: Answer(None, "error", "boom")}, "m", "b")
    assert failed["status"].to_pylist() == ["missing", "error"]
    assert failed["error_message"].to_pylist() == [None, "boom"]


def test_score_answers_one_gold_answer_one_missing(two_samples: pa.Table) -> None:
    rows = two_samples.to_pylist()
    result = score_answers("m", two_samples, {rows[0]["sample_id"]: Answer(gold_answer(rows[0]))})
    values = metric_values(result.metrics)
    for mode in ("strict", "compatible", "legacy"):
        assert values[f"{mode}/landmark_position/response_rate"] == 0.5
        assert values[f"{mode}/landmark_position/option_acc"] == 0.5
        assert values[f"{mode}/landmark_position/bbox_acc50"] == 0.5
    assert values["strict/landmark_position/bbox_miou"] == 0.5  # IoU 1 and 0, over 2
    assert result.run["stage_counts"]["strict"] == {"missing": 1, "strict": 1}


def test_metric_key_leaves_out_the_all_stratum() -> None:
    assert metric_key("behavior", "strict", "all", "f1") == "strict/behavior/f1"
    assert metric_key("behavior", "strict", "easy", "f1") == "strict/behavior/easy/f1"


STAMP = {
    "version": "0.1.0",
    "git": None,
    "protocol_revision": "2.3",
    "stage_versions": {},
    "models": {"m": {"digest": "abc"}},
    "data": {"digest": "dd"},
    "release": {"repo": "Lozumi/UAV-DualCog", "commit": "c" * 40},
    "created": "2026-01-02T03:04:05Z",
}


def test_hub_entries_are_the_compatible_headline_cells() -> None:
    rows = [
        {"task": "self_position", "parse": "compatible", "stratum": "all", "metric": "option_acc",
         "value": 0.25, "n": 4},
        {"task": "self_position", "parse": "strict", "stratum": "all", "metric": "option_acc",
         "value": 0.0, "n": 4},
        {"task": "self_position", "parse": "compatible", "stratum": "4way",
         "metric": "option_acc", "value": 0.5, "n": 2},
        {"task": "composite_behavior", "parse": "compatible", "stratum": "all",
         "metric": "temporal_miou", "value": math.nan, "n": 0},
    ]  # fmt: skip
    assert headline_rows(rows) == [rows[0]]
    (entry,) = hub_eval_results("m", rows, STAMP, "org/bench")
    assert entry["dataset"] == {
        "id": "org/bench",
        "task_id": "self_position.option_acc",
        "revision": "c" * 40,
    }
    assert entry["value"] == 0.25 and entry["date"] == STAMP["created"]
    assert f"dualcog_stamp_digest {stamp_digest(STAMP)}" in entry["notes"]
    assert (
        "settings_digest abc" in entry["notes"] and "git_commit no git checkout" in entry["notes"]
    )


def test_model_identity() -> None:
    assert model_identity(
        {"name": "q-Instant", "backend": "openai", "request_model": "Qwen/Qwen3-VL-8B"}
    ) == (
        "Qwen/Qwen3-VL-8B",
        "Qwen",
    )
    assert model_identity({"name": "sim", "backend": "simulated"}) == ("dualcog/sim", "dualcog")
    assert model_identity({"name": "rec", "backend": "replay"}) == ("unknown/rec", "unknown")


def test_metric_values_keep_every_row(two_samples: pa.Table) -> None:
    result = score_answers("m", two_samples, {})
    values = metric_values(result.metrics)
    assert len(values) == result.metrics.num_rows  # one key per row: strata included
    assert set(pc.unique(result.metrics["stratum"]).to_pylist()) == {"all", "4way", "8way"}
    rates = [v for k, v in values.items() if k.endswith("/response_rate")]
    assert rates and set(rates) == {0.0}


def test_mlflow_missing_says_what_to_install(monkeypatch, tmp_path) -> None:
    import sys

    from dualcog.errors import ConfigError
    from dualcog.integrations.mlflow_tracking import log_run

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"needs MLflow, which is not installed.*integrations"):
        log_run({"tracking_uri": tmp_path.as_uri()}, {}, STAMP, tmp_path / "s.json", [])
