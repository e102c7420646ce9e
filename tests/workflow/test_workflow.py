"""End-to-end: real Snakemake runs of the demo benchmark in a temporary working directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from demo_fixtures import CHATTY, DEMO_MODELS, PERMILLE, demo_model_names, replay_model
from demo_fixtures import write_demo_config as _write_config
from workflow_runner import REPO, run_snakemake, write_config

pytestmark = pytest.mark.workflow


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


def test_tables_and_metrics_are_produced(demo_workflow: Path) -> None:
    tables = demo_workflow / "results" / "tables"
    for name in ("image_main", "video_main", "audit", "audit_gains", "overall"):
        assert (tables / f"{name}.csv").is_file(), name
        assert (tables / f"{name}.md").is_file(), name
    metrics = pd.read_parquet(demo_workflow / "results" / "metrics" / "metrics.parquet")
    assert set(metrics["model"]) == demo_model_names()
    key = ["model", "task", "parse", "stratum", "metric"]
    assert not metrics.duplicated(key).any()
    assert metrics["value"].between(0, 1).all()


def test_oracle_scores_100_everywhere(demo_workflow: Path) -> None:
    metrics = pd.read_parquet(demo_workflow / "results" / "metrics" / "metrics.parquet")
    oracle = metrics[metrics["model"] == "oracle"]
    assert len(oracle) > 100
    imperfect = oracle[oracle["value"] != 1.0]
    assert imperfect.empty, imperfect.to_string()
    image = pd.read_csv(demo_workflow / "results" / "tables" / "image_main.csv", index_col="run")
    coverage = [c for c in image.columns if c.endswith("Coverage")]
    values = image.drop(columns=["Group", "Model", "Responses", "Expected", *coverage])
    assert (values.loc["oracle"] == 1.0).all()
    assert (image.loc["oracle", coverage] == 1.0).all() and len(coverage) == 4
    assert image.loc["oracle", "Responses"] == image.loc["oracle", "Expected"] == 64
    assert values.shape[1] == 4 * 3 + 4


def test_random_is_near_chance(demo_workflow: Path) -> None:
    metrics = pd.read_parquet(demo_workflow / "results" / "metrics" / "metrics.parquet")
    chosen = metrics[
        (metrics["model"] == "random")
        & (metrics["metric"] == "option_acc")
        & (metrics["parse"] == "compatible")
        & (metrics["stratum"] == "all")
    ]
    assert len(chosen) == 4
    # 64 four-way questions: chance is 0.25 (binomial sd ~0.054).
    assert 0.1 <= chosen["value"].mean() <= 0.4


def test_per_mille_run_recovers_under_compatible_parse(demo_workflow: Path) -> None:
    audit = pd.read_csv(demo_workflow / "results" / "tables" / "audit.csv", index_col="run")
    row = audit.loc[PERMILLE]
    assert row["Scale"].startswith("per_mille")
    assert row["Compatible BBox Acc@0.5"] > row["Original BBox Acc@0.5"] + 0.3
    assert row["Strict BBox Acc@0.5"] == 0.0  # fenced: never strict-valid


def test_second_run_has_nothing_to_do(demo_workflow: Path) -> None:
    result = run_snakemake(demo_workflow, "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_a_copy_of_the_run_is_up_to_date(demo_copy: Path) -> None:
    """What the tests that change a `demo_copy` and rerun build on."""
    result = run_snakemake(demo_copy, "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


def _planned_after_change(workdir: Path, name: str, **change) -> list:
    """Jobs a dry run plans after changing the settings of the model called `name`."""
    changed = [{**m, **change} if m["name"] == name else m for m in DEMO_MODELS]
    _write_config(workdir, changed)
    return _planned_jobs(run_snakemake(workdir, "--dry-run").stdout)


def test_changing_one_model_reruns_only_that_model(demo_copy: Path) -> None:
    jobs = _planned_after_change(demo_copy, PERMILLE, skill=0.5)
    models = {w.get("model") for rule, w in jobs if "model" in w}
    assert models == {PERMILLE}
    # A built-in backend answers all six tasks of a run in one job.
    assert [(rule, w) for rule, w in jobs if rule.startswith("infer")] == [
        ("infer_run", {"model": PERMILLE})
    ]
    rules = {rule for rule, _ in jobs}
    # stamp: the model's settings digest changed; explorer: that model's page only; compare:
    # the model is one side of the configured comparison.
    assert rules == {
        "infer_run", "collect_metrics", "tables", "leaderboard",
        "collect_intervals", "plots", "stamp", "explorer", "compare", "all",
    }  # fmt: skip


def test_changing_bootstrap_settings_reruns_only_the_scoring_jobs_and_what_reads_them(
    demo_copy: Path,
) -> None:
    """Each model's intervals are made by the job that scores it (its params hold the
    settings: `score`, or for a run answered one job per run the job that answers it too),
    under the replicate weights drawn once by `bootstrap_weights`: no render job, the
    weights, every model's scoring job once, then the readers."""
    config = yaml.safe_load((demo_copy / "config" / "config.yaml").read_text())
    config["bootstrap"] = {
        **config["bootstrap"],
        "replicates": config["bootstrap"]["replicates"] + 1,
    }
    write_config(demo_copy, config)
    jobs = _planned_jobs(run_snakemake(demo_copy, "--dry-run").stdout)
    scoring = [w["model"] for rule, w in jobs if rule == "score" or rule.startswith("infer_run")]
    assert sorted(scoring) == sorted(demo_model_names())
    assert {rule for rule, _ in jobs if rule != "score" and not rule.startswith("infer_run")} == {
        "bootstrap_weights", "collect_metrics", "collect_intervals", "tables",
        "leaderboard", "plots", "explorer", "compare", "all",
    }  # fmt: skip


def test_changing_video_mode_reruns_only_that_models_job(demo_copy: Path) -> None:
    """A built-in run's one job (an API run's video jobs alone: test_inference_workflow.py)."""
    jobs = _planned_after_change(demo_copy, CHATTY, video_frames=6)
    infer = [(rule, w) for rule, w in jobs if rule.startswith("infer")]
    assert infer == [("infer_run", {"model": CHATTY})]
    assert ("prepare_videos", {"vmode": "frames6"}) in jobs


def test_editing_a_replayed_file_reruns_only_the_replay_model(demo_copy: Path) -> None:
    recorded = demo_copy / "recorded" / "0_responses.jsonl"
    recorded.write_text(recorded.read_text() + "\n")
    jobs = _planned_jobs(run_snakemake(demo_copy, "--dry-run").stdout)
    assert {w["model"] for _, w in jobs if "model" in w} == {"recorded-Instant"}
    # One job replays all six tasks of the run; no per-task infer job.
    assert [(rule, w) for rule, w in jobs if rule.startswith("infer")] == [
        ("infer_run", {"model": "recorded-Instant"})
    ]


def test_bad_replay_line_fails_clearly_and_keeps_other_results(demo_copy: Path) -> None:
    recorded = demo_copy / "recorded" / "0_responses.jsonl"
    original = recorded.read_text()
    kept = demo_copy / "results" / "responses" / "oracle" / "landmark_position.parquet"
    kept_stamp = kept.stat().st_mtime_ns
    recorded.write_text(original + '{"sample_id": "x", "raw_te\n')
    result = run_snakemake(demo_copy, "--keep-going", check=False)
    assert result.returncode != 0
    logs = list((demo_copy / "results" / "logs" / "infer" / "recorded-Instant").glob("*.log"))
    messages = "\n".join(log.read_text() for log in logs)
    line = original.count("\n") + 1
    assert f"file recorded/0_responses.jsonl: line {line}: malformed JSON" in messages
    assert "Traceback" not in messages  # a data error, not a crash
    assert kept.stat().st_mtime_ns == kept_stamp


def test_replayed_runs_with_other_task_lists_get_a_rule_of_their_own(tmp_path: Path) -> None:
    full = replay_model(tmp_path)
    video_only = {**full, "name": "recorded-video", "tasks": ["landmark_visibility", "behavior"]}
    sharded = {**full, "name": "recorded-sharded", "shards": 2}
    config = {
        "data_root": str(REPO / "resources" / "demo"),
        "cache_dir": "results/cache",
        "models": [full, video_only, sharded],
    }
    write_config(tmp_path, config)
    jobs = _planned_jobs(run_snakemake(tmp_path, "--dry-run").stdout)
    replays = sorted((rule, w["model"]) for rule, w in jobs if rule.startswith("infer_run"))
    assert replays == [
        ("infer_run", "recorded-Instant"),
        ("infer_run_behavior_landmark_visibility", "recorded-video"),
    ]
    # A sharded replayed run is split like any other run.
    assert {w["model"] for rule, w in jobs if rule == "infer_shard"} == {"recorded-sharded"}


def test_the_snakefiles_imports_load_neither_pandas_nor_pyarrow() -> None:
    """Every Snakemake start-up reads the Snakefile (each cluster job's too): the modules it
    imports at its top level load neither pandas nor pyarrow, about 0.6 CPU-s a start-up; the
    jobs that need them import them (issue 21). Checked in a fresh interpreter importing what
    the Snakefile and rules/*.smk import (an installed executor plugin may still load pandas
    itself, as the SLURM plugin does; the onstart/onsuccess handlers may too)."""
    sources = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    modules = sorted(
        {
            m
            for path in sources
            for m in re.findall(r"^from (dualcog[\w.]*) import", path.read_text(), flags=re.M)
        }
    )
    assert "dualcog.ingest" in modules and "dualcog.config" in modules  # the imports are read
    check = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_snakemakes_start_up_in_the_test_environment_loads_no_pandas() -> None:
    """Snakemake imports every executor plugin installed beside it when it starts. The SLURM
    plugin imports pandas, numpy and pyarrow then (0.7 CPU-s of each of the suite's Snakemake
    start-ups), so `make` installs it off the path (Makefile, SLURM_PLUGIN) and only the tests
    that submit to SLURM put it back (workflow_runner: `run_snakemake(slurm_plugin=True)` for
    the main process alone, `slurm_plugin_env` for dry runs)."""
    check = "import sys, snakemake.cli\nprint('pandas' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_malformed_config_file_is_named_with_its_line_and_column(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(
        "data_root: x\nmodels:\n  - name: a\n   backend: oracle\n"
    )
    result = run_snakemake(tmp_path, "-n", check=False)
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert "config file config/config.yaml, line 4, column 4: not valid YAML" in said, said


@pytest.mark.workflow
def test_a_malformed_configfile_is_named_with_its_line_and_column(tmp_path):
    """Snakemake reads `--configfile` itself and names no line; the console adds it."""
    (tmp_path / "mine.yaml").write_text("data_root: x\nmodels:\n  - name: a\n   backend: oracle\n")
    mine = tmp_path / "mine.yaml"
    result = run_snakemake(tmp_path, "--cores", "1", "--configfile", str(mine), check=False)
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert f"config file {mine}, line 4, column 4: not valid YAML" in said, said
