"""The workflow through cluster executors: cluster-generic with our local batch queue, SLURM.

Every job of a cluster-generic run is submitted by `profiles/cluster-generic/submit.py` as its
own detached process, polled through `status.py` and hands its outputs over the shared file
system. The SLURM run goes through snakemake-executor-plugin-slurm to a one-node SLURM cluster
(`scripts/ci/start_slurm.sh`). The tables must come out byte-identical to a local run's.

Every run here builds the `tables` rule (the tables in every format, their stamps, and the
metrics upstream of them) rather than `all`: the comparison reads only those. The explorer,
plot and leaderboard jobs that `all` adds (a third of its jobs here, each a Snakemake start-up
of its own on a cluster) would go through the same job script and submission as the jobs kept.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_runner import REPO, run_snakemake, write_config

# A batch queue's detached processes, SLURM; the runs are `workflow` too.
pytestmark = pytest.mark.integration

PROFILE = REPO / "profiles" / "cluster-generic"
# Both runs of a comparison claim the same creation time (the stamps' `created`).
PINNED = {"SOURCE_DATE_EPOCH": "1767225600"}
# One simulated model (frames video mode, non-trivial scores), an image and a video task:
# every cluster job is a Snakemake start-up of its own (two under SLURM: script and srun step).
DEMO_MODELS = ("sim-chatty-Thinking",)
TASKS = ["landmark_position", "landmark_visibility"]  # agent-state image, world-state video
# Rules upstream of inference (the pairs and the bootstrap weights too: a built-in run's job
# scores what it answers); the SLURM run groups them into one job, and the rest into another.
INPUT_RULES = ("ingest", "prepare_images", "prepare_videos", "render_image_prompts",
               "render_video_prompts", "pairs", "bootstrap_weights")  # fmt: skip
INFERENCE_RULES = ("infer", "infer_api", "infer_run", "infer_shard", "assemble_shards")
# What every run builds: the rule writing the compared tables (metrics and stamp upstream).
TARGET = "tables"


def _queue(command: str, *args: str, spool: Path) -> str:
    result = subprocess.run(
        [str(PROFILE / f"{command}.py"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "DUALCOG_QUEUE_SPOOL": str(spool)},
        check=True,
    )
    return result.stdout.strip()


def _wait_for(spool: Path, job_id: str, wanted: str, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    state = _queue("status", job_id, spool=spool)
    while state != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
        state = _queue("status", job_id, spool=spool)
    return state


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    return str(path)


def test_queue_reports_success_failure_and_cancel(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    marker = tmp_path / "ran"
    ok = _queue("submit", _script(tmp_path, "ok.sh", f"echo hi > {marker}"), spool=spool)
    bad = _queue("submit", _script(tmp_path, "bad.sh", "exit 3"), spool=spool)
    slow = _queue("submit", _script(tmp_path, "slow.sh", "sleep 60"), spool=spool)
    assert len({ok, bad, slow}) == 3
    assert _wait_for(spool, ok, "success") == "success"
    assert marker.read_text() == "hi\n"
    assert _wait_for(spool, bad, "failed") == "failed"
    assert _queue("status", slow, spool=spool) == "running"
    _queue("cancel", slow, spool=spool)
    assert _wait_for(spool, slow, "failed") == "failed"


def test_queue_reports_a_vanished_job_as_failed(tmp_path: Path) -> None:
    """A job killed without the chance to record its status (node lost) is failed, not running."""
    spool = tmp_path / "spool"
    job = _queue("submit", _script(tmp_path, "slow.sh", "sleep 60"), spool=spool)
    assert _queue("status", job, spool=spool) == "running"
    pid = int((spool / job / "pid").read_text())
    os.killpg(pid, 9)
    assert _wait_for(spool, job, "failed") == "failed"
    assert not (spool / job / "returncode").exists()


def test_queue_refuses_a_path_as_job_id(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(PROFILE / "status.py"), "../etc"],
        capture_output=True,
        text=True,
        env={**os.environ, "DUALCOG_QUEUE_SPOOL": str(tmp_path)},
    )
    assert result.returncode != 0 and "not a job id" in result.stderr


def _demo_config(models: tuple[str, ...] = DEMO_MODELS, tasks: list[str] = TASKS) -> dict:
    """The demo configuration cut to a few models and tasks (CI time)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["data_root"] = str(REPO / "resources" / "demo")
    config["tasks"] = tasks
    config.pop("compare", None)  # names models left out here
    config["models"] = [m for m in config["models"] if m["name"] in models]
    for model in config["models"]:
        if "replay" in model:
            model["replay"] = [str(REPO / path) for path in model["replay"]]
    return config


def _plugin_installed() -> bool:
    if importlib.util.find_spec("snakemake_executor_plugin_cluster_generic"):
        return True
    if os.environ.get("CI"):
        pytest.fail("snakemake-executor-plugin-cluster-generic is missing (test extra)")
    pytest.skip("snakemake-executor-plugin-cluster-generic is not installed")


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: the same configuration and target run by the local executor."""
    workdir = tmp_path_factory.mktemp("local")
    write_config(workdir, _demo_config())
    run_snakemake(workdir, TARGET, env=PINNED)
    return workdir


@pytest.mark.workflow
def test_cluster_run_equals_local_run(tmp_path: Path, local_run: Path) -> None:
    _plugin_installed()
    cluster = tmp_path / "cluster"
    write_config(cluster, _demo_config())
    result = run_snakemake(cluster, TARGET, "--profile", str(PROFILE), env=PINNED)

    # Every job went through the queue and recorded exit status 0.
    jobs = sorted((cluster / ".snakemake" / "localqueue").iterdir())
    submitted = result.stderr.count("with external jobid")
    assert submitted == len(jobs) >= 10
    assert all((job / "returncode").read_text() == "0" for job in jobs)
    ran = {line.split()[-1] for job in jobs for line in job.joinpath("output.log").open()
           if line.startswith("localrule ")}  # fmt: skip
    assert {"ingest:", "infer_run:", "collect_metrics:", "tables:"} <= ran

    _assert_same_results(local_run, cluster)

    # Nothing left to do: the cluster run's outputs and metadata are complete.
    again = run_snakemake(cluster, TARGET, "--profile", str(PROFILE), "--dry-run", env=PINNED)
    assert "Nothing to be done" in again.stdout + again.stderr


def _assert_same_results(local: Path, cluster: Path) -> None:
    tables = sorted(p.name for p in (local / "results" / "tables").iterdir())
    assert tables == sorted(p.name for p in (cluster / "results" / "tables").iterdir())
    assert len(tables) == 6 * 5  # six tables in four formats, each with its stamp
    for name in tables:
        assert (local / "results/tables" / name).read_bytes() == (
            cluster / "results/tables" / name
        ).read_bytes(), name
    pd.testing.assert_frame_equal(
        pd.read_parquet(local / "results/metrics/metrics.parquet"),
        pd.read_parquet(cluster / "results/metrics/metrics.parquet"),
    )


def _slurm_is_up() -> None:
    if shutil.which("scontrol"):
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        if "is UP" in ping.stdout:
            return
    message = "no SLURM controller is up (start one with scripts/ci/start_slurm.sh as root)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.mark.workflow
def test_slurm_run_equals_local_run(tmp_path: Path, local_run: Path) -> None:
    """The same workflow through snakemake-executor-plugin-slurm (sbatch, squeue, srun)."""
    _slurm_is_up()
    partition = (
        subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, check=True)
        .stdout.split()[0]
        .rstrip("*")
    )
    cluster = tmp_path / "slurm"
    write_config(cluster, _demo_config())
    listed = run_snakemake(cluster, "--list-rules").stdout.split()
    scoring_rules = [r for r in listed if r not in {"all", *INPUT_RULES, *INFERENCE_RULES}]
    result = run_snakemake(
        cluster,
        TARGET,
        "--executor", "slurm", "--jobs", "4", "--latency-wait", "10",
        # Finished jobs stay in squeue for MinJobAge (an hour in start_slurm.sh); CI has no
        # accounting database for sacct.
        "--slurm-status-command", "squeue",
        "--slurm-init-seconds-before-status-checks", "1",
        "--seconds-between-status-checks", "1",
        "--default-resources", f"slurm_partition={partition}", "mem_mb=500", "runtime=10",
        "--slurm-keep-successful-logs",
        # The inputs chain and the scoring chain run as one SLURM job each (group jobs, as on
        # a real cluster for many small steps); the run's inference job on its own.
        "--groups", *(f"{rule}=inputs" for rule in INPUT_RULES),
        *(f"{rule}=scoring" for rule in scoring_rules),
        env=PINNED,
        slurm_plugin=True,  # the main process's; its jobs' Snakemakes use slurm-jobstep
    )  # fmt: skip
    submitted = result.stderr.count("has been submitted with SLURM jobid")
    assert submitted == 3  # inputs, the run's infer_run job, scoring
    slurm_logs = cluster / ".snakemake" / "slurm_logs"
    jobs = sorted(log.relative_to(slurm_logs).parts[0] for log in slurm_logs.rglob("*.log"))
    assert [job.split("_")[:2] for job in jobs] == [
        ["group", "inputs"], ["group", "scoring"], ["rule", "infer"]
    ]  # fmt: skip
    assert jobs[2].startswith("rule_infer_run")
    _assert_same_results(local_run, cluster)


def test_source_date_epoch_pins_the_stamp_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from dualcog.errors import ConfigError
    from dualcog.stamp import build_stamp

    monkeypatch.setenv("SOURCE_DATE_EPOCH", PINNED["SOURCE_DATE_EPOCH"])
    assert build_stamp({}, [], REPO)["created"] == "2026-01-01T00:00:00Z"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(ConfigError, match="SOURCE_DATE_EPOCH"):
        build_stamp({}, [], REPO)
