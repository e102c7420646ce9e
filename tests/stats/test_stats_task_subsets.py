"""Every task subset a user may choose runs end to end (metrics, intervals, tables).

Each subset is one oracle model's own `tasks` list, all in one workflow run, while `random`
runs the workflow's six: the benchmark (and its dual pairs) holds every task, the subset runs
only some of them.
"""

from __future__ import annotations

import pandas as pd
import pytest
from workflow_runner import REPO, run_snakemake, write_config

pytestmark = pytest.mark.workflow

# Representative subsets: one side of a dual family alone, a whole image family, video only,
# and each video side alone.
SUBSETS = {
    "single-image-task": ["landmark_position"],
    "one-dual-family": ["landmark_position", "self_position"],
    "video-only": ["behavior", "landmark_visibility"],
    "behavior-only": ["behavior"],
    "visibility-only": ["landmark_visibility"],
}
DUAL_TASKS = {"position", "action_observation", "video"}


def test_task_subsets_run_end_to_end(tmp_path) -> None:
    subset_models = [
        {"name": f"oracle-{name}", "backend": "oracle", "group": "baseline", "tasks": tasks}
        for name, tasks in SUBSETS.items()
    ]
    write_config(
        tmp_path,
        {
            "data_root": str(REPO / "resources" / "demo"),
            "tables": {"formats": ["csv"]},
            "bootstrap": {"replicates": 50, "seed": 1},
            "models": [
                *subset_models,
                {"name": "random", "backend": "random", "group": "baseline", "seed": 3},
            ],
        },
    )
    run_snakemake(tmp_path, "results/metrics/intervals.parquet", "results/tables/image_main.csv")
    metrics = pd.read_parquet(tmp_path / "results" / "metrics" / "metrics.parquet")
    for name, tasks in SUBSETS.items():
        expected = {"position"} if set(tasks) >= {"landmark_position", "self_position"} else set()
        expected |= {"video"} if set(tasks) >= {"behavior", "landmark_visibility"} else set()
        model_tasks = set(metrics.loc[metrics["model"] == f"oracle-{name}", "task"])
        assert model_tasks & DUAL_TASKS == expected, name
    assert set(metrics.loc[metrics["model"] == "random", "task"]) & DUAL_TASKS == DUAL_TASKS
    intervals = pd.read_parquet(tmp_path / "results" / "metrics" / "intervals.parquet")
    assert set(intervals["model"]) == {m["name"] for m in subset_models} | {"random"}
