"""Every task subset a user may choose runs end to end (metrics, intervals, tables).

The subset is `oracle`'s own `tasks` list, while `random` runs the workflow's six: the
benchmark (and its dual pairs) holds every task, the subset run only some of them.
"""

from __future__ import annotations

import pandas as pd
import pytest
from workflow_runner import REPO, run_snakemake, write_config

# Representative subsets: one side of a dual family alone, a whole image family, video only,
# and each video side alone.
SUBSETS = {
    "single_image_task": ["landmark_position"],
    "one_dual_family": ["landmark_position", "self_position"],
    "video_only": ["behavior", "landmark_visibility"],
    "behavior_only": ["behavior"],
    "visibility_only": ["landmark_visibility"],
}
DUAL_TASKS = {"position", "action_observation", "video"}


@pytest.mark.parametrize("tasks", SUBSETS.values(), ids=SUBSETS.keys())
def test_task_subset_runs_end_to_end(tmp_path, tasks) -> None:
    write_config(
        tmp_path,
        {
            "data_root": str(REPO / "resources" / "demo"),
            "tables": {"formats": ["csv"]},
            "bootstrap": {"replicates": 50, "seed": 1},
            "models": [
                {"name": "oracle", "backend": "oracle", "group": "baseline", "tasks": tasks},
                {"name": "random", "backend": "random", "group": "baseline", "seed": 3},
            ],
        },
    )
    run_snakemake(tmp_path)
    metrics = pd.read_parquet(tmp_path / "results" / "metrics" / "metrics.parquet")
    expected = {"position"} if set(tasks) >= {"landmark_position", "self_position"} else set()
    expected |= {"video"} if set(tasks) >= {"behavior", "landmark_visibility"} else set()
    assert set(metrics.loc[metrics["model"] == "oracle", "task"]) & DUAL_TASKS == expected
    assert set(metrics.loc[metrics["model"] == "random", "task"]) & DUAL_TASKS == DUAL_TASKS
    intervals = pd.read_parquet(tmp_path / "results" / "metrics" / "intervals.parquet")
    assert set(intervals["model"]) == {"oracle", "random"}
