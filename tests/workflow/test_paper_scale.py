"""Benchmark-wide pairs read by every run, and the paper-scale generator at a reduced size."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
from workflow_runner import REPO

from dualcog.inference.replay import replay_rows
from dualcog.ingest import find_manifests, ingest
from dualcog.media.store import file_digest
from dualcog.schemas import PARSED, rows_of_tasks, to_table
from dualcog.scoring import dual_pairs, model_metrics, pairs_for_tasks, score_samples
from dualcog.tasks import REQUEST_KINDS

TASKS = [kind.task for kind in REQUEST_KINDS]


@pytest.fixture(scope="module")
def small_benchmark(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper_scale")
    command = [sys.executable, str(REPO / "scripts" / "make_paper_scale.py"), "--out", str(out),
               "--scenes", "3", "--landmarks", "7", "--runs", "2"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return out


def test_generator_writes_the_released_layout_at_the_requested_size(small_benchmark):
    data = small_benchmark / "data"
    assert len(find_manifests(data)) == 3 * 2  # an image and a video manifest per scene
    samples = ingest(data, TASKS)[0].to_pandas()
    assert samples["scene_id"].nunique() == 3
    assert samples[["scene_id", "landmark_id"]].drop_duplicates().shape[0] == 7
    assert (samples["modality"] == "image").sum() == 7 * 8
    assert (samples["modality"] == "video").sum() == 7 * 4
    assert samples["sample_id"].is_unique
    # Every media file resolves and is distinct (the media store must see distinct sources).
    paths = {m["resolved_path"] for media in samples["media"] for m in media}
    assert None not in paths
    assert len({file_digest(p) for p in paths}) == len(paths)


def test_recorded_runs_replay_in_the_authors_format(small_benchmark):
    import yaml

    config = yaml.safe_load((small_benchmark / "config" / "config.yaml").read_text())
    assert [m["backend"] for m in config["models"]] == ["replay", "replay"]
    samples = ingest(small_benchmark / "data", TASKS)[0].to_pandas()
    model = dict(config["models"][0])
    model["replay"] = [str(small_benchmark / p) for p in model["replay"]]
    prompts = [{"sample_id": s, "task": t, "request_key": "k"}
               for s, t in zip(samples["sample_id"], samples["task"], strict=True)]  # fmt: skip
    rows = pd.DataFrame(replay_rows(model, prompts))
    assert len(rows) == len(samples)
    ok = rows["status"] == "ok"
    assert ok.mean() > 0.9 and (~ok).any()  # resumed errors answered; some failed twice


def test_benchmark_pairs_give_the_metrics_of_pairs_built_per_run(small_benchmark):
    samples, _ = ingest(small_benchmark / "data", TASKS)
    pairs, _ = dual_pairs(samples)
    gold = [
        {"sample_id": s, "task": t, "parse": "strict", "stage": "strict", "all_valid": False}
        for s, t in zip(samples["sample_id"].to_pylist(), samples["task"].to_pylist(), strict=True)
    ]
    for tasks in (TASKS, ["landmark_position", "self_position"], ["landmark_position"],
                  ["behavior", "landmark_visibility", "future_observation"]):  # fmt: skip
        subset = rows_of_tasks(samples, tasks)
        parsed = to_table(pd.DataFrame([g for g in gold if g["task"] in tasks]), PARSED)
        scores = score_samples(subset, parsed)
        own, _ = dual_pairs(subset)
        assert pairs_for_tasks(pairs, tasks).equals(own)
        assert model_metrics("m", tasks, scores, own).equals(
            model_metrics("m", tasks, scores, pairs)
        )
