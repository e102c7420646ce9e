"""End-to-end: real Snakemake runs of the demo benchmark in a temporary working directory."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from workflow_runner import REPO, run_snakemake, write_config

MODELS = [
    {"name": "oracle", "backend": "oracle", "group": "baseline"},
    {"name": "random", "backend": "random", "group": "baseline", "seed": 3},
    {
        "name": "sim-permille-Instant",
        "backend": "simulated",
        "group": "open-weights",
        "seed": 5,
        "skill": 0.9,
        "quirks": ["per_mille", "fence"],
    },
    {
        "name": "sim-chatty-Thinking",
        "backend": "simulated",
        "group": "proprietary",
        "seed": 6,
        "skill": 0.6,
        "quirks": ["think", "alias_keys", "reversed_corners"],
        "video_mode": "frames",
        "video_frames": 4,
    },
]


DEMO_RUNS = sorted(
    (REPO / "resources" / "demo").glob("**/experiments/demo_recorded_run/responses.jsonl")
)


def _replay_model(workdir: Path) -> dict:
    """A replay model reading copies of the demo's recorded run, so tests may edit them."""
    copies = []
    for i, source in enumerate(DEMO_RUNS):
        target = workdir / "recorded" / f"{i}_responses.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copyfile(source, target)
        copies.append(str(target.relative_to(workdir)))
    return {"name": "recorded-Instant", "backend": "replay", "replay": copies}


def _write_config(workdir: Path, models: list[dict]) -> None:
    config = {
        "data_root": str(REPO / "resources" / "demo"),
        "cache_dir": "results/cache",
        "tables": {"formats": ["csv", "md"]},
        "models": [*models, _replay_model(workdir)],
    }
    write_config(workdir, config)


def _planned_jobs(output: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job a dry run would execute."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        match = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not match:
            continue
        wildcards = {}
        found = re.search(r"wildcards: (.*)", block)
        if found:
            for pair in found.group(1).split(", "):
                key, _, value = pair.partition("=")
                wildcards[key.strip()] = value.strip()
        jobs.append((match.group(1), wildcards))
    return jobs


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("workflow")
    _write_config(workdir, MODELS)
    run_snakemake(workdir)
    return workdir


def test_tables_and_metrics_are_produced(demo_run: Path) -> None:
    tables = demo_run / "results" / "tables"
    for name in ("image_main", "video_main", "audit", "audit_gains", "overall"):
        assert (tables / f"{name}.csv").is_file(), name
        assert (tables / f"{name}.md").is_file(), name
    metrics = pd.read_parquet(demo_run / "results" / "metrics" / "metrics.parquet")
    assert set(metrics["model"]) == {m["name"] for m in MODELS} | {"recorded-Instant"}
    key = ["model", "task", "parse", "stratum", "metric"]
    assert not metrics.duplicated(key).any()
    assert metrics["value"].between(0, 1).all()


def test_oracle_scores_100_everywhere(demo_run: Path) -> None:
    metrics = pd.read_parquet(demo_run / "results" / "metrics" / "metrics.parquet")
    oracle = metrics[metrics["model"] == "oracle"]
    assert len(oracle) > 100
    imperfect = oracle[oracle["value"] != 1.0]
    assert imperfect.empty, imperfect.to_string()
    image = pd.read_csv(demo_run / "results" / "tables" / "image_main.csv", index_col="run")
    coverage = [c for c in image.columns if c.endswith("Coverage")]
    values = image.drop(columns=["Group", "Model", "Responses", "Expected", *coverage])
    assert (values.loc["oracle"] == 1.0).all()
    assert (image.loc["oracle", coverage] == 1.0).all() and len(coverage) == 4
    assert image.loc["oracle", "Responses"] == image.loc["oracle", "Expected"] == 64
    assert values.shape[1] == 4 * 3 + 4


def test_random_is_near_chance(demo_run: Path) -> None:
    metrics = pd.read_parquet(demo_run / "results" / "metrics" / "metrics.parquet")
    chosen = metrics[
        (metrics["model"] == "random")
        & (metrics["metric"] == "option_acc")
        & (metrics["parse"] == "compatible")
        & (metrics["stratum"] == "all")
    ]
    assert len(chosen) == 4
    # 64 four-way questions: chance is 0.25 (binomial sd ~0.054).
    assert 0.1 <= chosen["value"].mean() <= 0.4


def test_per_mille_run_recovers_under_compatible_parse(demo_run: Path) -> None:
    audit = pd.read_csv(demo_run / "results" / "tables" / "audit.csv", index_col="run")
    row = audit.loc["sim-permille-Instant"]
    assert row["Scale"].startswith("per_mille")
    assert row["Compatible BBox Acc@0.5"] > row["Original BBox Acc@0.5"] + 0.3
    assert row["Strict BBox Acc@0.5"] == 0.0  # fenced: never strict-valid


def test_second_run_has_nothing_to_do(demo_run: Path) -> None:
    result = run_snakemake(demo_run, "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


def _planned_after_change(workdir: Path, index: int, **change) -> list:
    """Jobs a dry run plans after changing one model's settings (the config is restored)."""
    changed = [dict(m) for m in MODELS]
    changed[index].update(change)
    _write_config(workdir, changed)
    try:
        return _planned_jobs(run_snakemake(workdir, "--dry-run").stdout)
    finally:
        _write_config(workdir, MODELS)


def test_changing_one_model_reruns_only_that_model(demo_run: Path) -> None:
    jobs = _planned_after_change(demo_run, 2, skill=0.5)
    models = {w.get("model") for rule, w in jobs if "model" in w}
    assert models == {"sim-permille-Instant"}
    infer_tasks = {w["task"] for rule, w in jobs if rule == "infer"}
    assert len(infer_tasks) == 6
    rules = {rule for rule, _ in jobs}
    # stamp: the model's settings digest changed; explorer: that model's page only.
    assert rules == {
        "infer", "parse", "score", "collect_metrics", "tables", "leaderboard",
        "intervals", "collect_intervals", "plots", "stamp", "explorer", "all",
    }  # fmt: skip


def test_changing_video_mode_reruns_only_video_jobs_of_that_model(demo_run: Path) -> None:
    jobs = _planned_after_change(demo_run, 3, video_frames=6)
    infer = {(w["model"], w["task"]) for rule, w in jobs if rule == "infer"}
    assert infer == {
        ("sim-chatty-Thinking", "behavior"),
        ("sim-chatty-Thinking", "landmark_visibility"),
    }
    assert ("prepare_videos", {"vmode": "frames6"}) in jobs


def test_editing_a_replayed_file_reruns_only_the_replay_model(demo_run: Path) -> None:
    recorded = demo_run / "recorded" / "0_responses.jsonl"
    original = recorded.read_text()
    recorded.write_text(original + "\n")
    try:
        jobs = _planned_jobs(run_snakemake(demo_run, "--dry-run").stdout)
    finally:
        recorded.write_text(original)
    assert {w["model"] for _, w in jobs if "model" in w} == {"recorded-Instant"}
    # One job replays all six tasks of the run; no per-task infer job.
    assert [(rule, w) for rule, w in jobs if rule in ("replay", "infer")] == [
        ("replay", {"model": "recorded-Instant"})
    ]


def test_bad_replay_line_fails_clearly_and_keeps_other_results(demo_run: Path) -> None:
    recorded = demo_run / "recorded" / "0_responses.jsonl"
    original = recorded.read_text()
    kept = demo_run / "results" / "responses" / "oracle" / "landmark_position.parquet"
    kept_stamp = kept.stat().st_mtime_ns
    recorded.write_text(original + '{"sample_id": "x", "raw_te\n')
    try:
        result = run_snakemake(demo_run, "--keep-going", check=False)
    finally:
        recorded.write_text(original)
    assert result.returncode != 0
    logs = list((demo_run / "results" / "logs" / "infer" / "recorded-Instant").glob("*.log"))
    messages = "\n".join(log.read_text() for log in logs)
    line = original.count("\n") + 1
    assert f"file recorded/0_responses.jsonl: line {line}: malformed JSON" in messages
    assert "Traceback" not in messages  # a data error, not a crash
    assert kept.stat().st_mtime_ns == kept_stamp
    # Put the workflow back in its complete state for the tests that follow.
    run_snakemake(demo_run)


def test_replayed_runs_with_other_task_lists_get_a_rule_of_their_own(tmp_path: Path) -> None:
    full = _replay_model(tmp_path)
    video_only = {**full, "name": "recorded-video", "tasks": ["landmark_visibility", "behavior"]}
    sharded = {**full, "name": "recorded-sharded", "shards": 2}
    config = {
        "data_root": str(REPO / "resources" / "demo"),
        "cache_dir": "results/cache",
        "models": [full, video_only, sharded],
    }
    write_config(tmp_path, config)
    jobs = _planned_jobs(run_snakemake(tmp_path, "--dry-run").stdout)
    replays = sorted((rule, w["model"]) for rule, w in jobs if rule.startswith("replay"))
    assert replays == [
        ("replay", "recorded-Instant"),
        ("replay_behavior_landmark_visibility", "recorded-video"),
    ]
    # A sharded replayed run is split like any other run.
    assert {w["model"] for rule, w in jobs if rule == "infer_shard"} == {"recorded-sharded"}
