"""Media is prepared only for models that send it: the DAG of a dry run shows which jobs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_cluster_executor import _demo_config
from workflow_runner import run_snakemake, write_config

pytestmark = pytest.mark.workflow  # Snakemake dry runs

TASKS = ["landmark_position", "behavior"]
SENDER = {
    "name": "api-model",
    "backend": "openai",
    "group": "proprietary",
    "api_base": "http://127.0.0.1:9/v1",
    "api_key": "${DUALCOG_MEDIA_DAG_KEY}",
    "request_model": "any",
}
ENV = {"DUALCOG_MEDIA_DAG_KEY": "not-a-key"}


def _planned(workdir: Path, config: dict) -> dict[str, int]:
    """Job counts by rule of a dry run."""
    write_config(workdir, config)
    out = run_snakemake(workdir, "--dry-run", env=ENV).stdout
    table = out.split("Job stats:", 1)[1]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_replayed_and_built_in_models_prepare_no_media(tmp_path: Path) -> None:
    config = _demo_config(("oracle", "random", "recorded-run-Instant"), TASKS)
    jobs = _planned(tmp_path, config)
    assert "prepare_images" not in jobs and "prepare_videos" not in jobs
    assert jobs["render_image_prompts"] == 1 and jobs["render_video_prompts"] == 1
    assert jobs["explorer_media"] == 1  # thumbnails from the source files


def test_a_model_that_sends_media_prepares_what_it_sends(tmp_path: Path) -> None:
    config = _demo_config(("oracle",), TASKS)
    config["models"].append(SENDER)
    jobs = _planned(tmp_path, config)
    assert jobs["prepare_images"] == 1 and jobs["prepare_videos"] == 1  # video_url mode


def test_frames_mode_samples_frames_for_its_prompts(tmp_path: Path) -> None:
    """The sampled frames' timestamps are part of a `frames` prompt's text, whoever answers."""
    config = _demo_config(("oracle",), TASKS)
    config["models"][0].update(video_mode="frames", video_frames=4)
    jobs = _planned(tmp_path, config)
    assert jobs["prepare_videos"] == 1 and "prepare_images" not in jobs
