"""End to end: Snakemake starts a served model's server once, runs all its tasks through it, and
leaves no server process behind after success, after a failing job, or when it is stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from demo_fixtures import copy_run
from fake_vllm import FAKE_VERSION
from test_serve import FAKE, alive, started
from workflow_runner import REPO, run_snakemake, write_config

from dualcog.digests import file_digest
from dualcog.inference import media_path
from dualcog.stamp import parquet_stamp

# Snakemake runs that start (fake) vLLM servers.
pytestmark = [pytest.mark.workflow, pytest.mark.integration]

# (future_observation is in: without it, ingest fails on the all-empty `candidates` column.)
TASKS = ["landmark_position", "future_observation", "behavior"]
SERVED_JOB = "infer_served_Local_VLM"
# The furthest output a test reads: the tables, explorer and plots downstream add nothing here.
METRICS = "results/metrics/metrics.parquet"
# The outputs the one-server test reads: the metrics and both runs' explorer pages.
SERVED_OUTPUTS = [METRICS] + [
    f"results/explorer/{run}.html" for run in ("Local-VLM-Instant", "Local-VLM-Thinking")
]


def config(
    starts: Path, *server_args: str, health_timeout_s: float = 60, command: list | None = None
) -> dict:
    serve = {
        "model": "/models/local-vlm",
        "served_name": "local-vlm",
        "command": command or [sys.executable, str(FAKE)],
        "args": [
            "--starts-file",
            str(starts),
            "--requests-file",
            str(starts.with_name("requests.jsonl")),
            *server_args,
        ],
        "gpus": 0,
        "health_timeout_s": health_timeout_s,
    }
    served = {"backend": "openai", "family": "qwen_vllm", "group": "open-weights",
              "max_retries": 0, "serve": serve, "video_mode": "frames",
              "video_frames": 2}  # fmt: skip
    return {
        "data_root": str(REPO / "resources" / "demo"),
        "tasks": TASKS,
        "tables": {"formats": ["csv"]},
        "models": [
            {"name": "oracle", "backend": "oracle"},
            {"name": "Local-VLM-Instant", **served},
            {"name": "Local-VLM-Thinking", **served},
        ],
    }


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run done up to the served job (benchmark, media, prompts, the oracle's answers)."""
    workdir = tmp_path_factory.mktemp("served")
    write_config(workdir, config(workdir / "starts.txt"))
    run_snakemake(workdir, "--omit-from", SERVED_JOB)
    return workdir


def _media_store(workdir: Path) -> Path:
    """The run's media store, as its configuration names it (the session's shared one)."""
    configured = yaml.safe_load((workdir / "config" / "config.yaml").read_text())
    store = Path(configured.get("media", {}).get("store", "results/media/store"))
    return store if store.is_absolute() else workdir / store


def served_run(prepared: Path, tmp_path: Path, *server_args: str, **settings) -> Path:
    """A copy of `prepared` whose next run starts the server with `server_args`."""
    workdir = copy_run(prepared, tmp_path / "run")
    write_config(workdir, config(workdir / "starts.txt", *server_args, **settings))
    return workdir


def _as_a_terminal_job() -> None:
    """Ctrl-C reaches a terminal's foreground job; a test run started in the background of a
    non-interactive shell has SIGINT ignored, which Python and Snakemake would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def snakemake_process(workdir: Path) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(workdir), "--cores", "2",
    ]  # fmt: skip
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own group, as a terminal's foreground job
        preexec_fn=_as_a_terminal_job,
    )


def wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_one_server_for_all_runs_and_tasks_then_gone(prepared: Path, tmp_path: Path) -> None:
    workdir = served_run(prepared, tmp_path, "--startup-delay", "1.5")  # health is awaited
    starts = workdir / "starts.txt"
    plan = run_snakemake(workdir, *SERVED_OUTPUTS, "-n")
    assert SERVED_JOB in plan.stdout
    assert "rule ingest" not in plan.stdout  # the copy's earlier jobs are up to date
    run_snakemake(workdir, *SERVED_OUTPUTS)
    [(pid, worker)] = started(starts)  # one server for two runs x two tasks
    assert not alive(pid) and not alive(worker)
    distinct_requests = 0
    for run in ("Local-VLM-Instant", "Local-VLM-Thinking"):
        for task in TASKS:
            out = pd.read_parquet(workdir / f"results/responses/{run}/{task}.parquet")
            assert len(out) == 16 and (out["status"] == "ok").all()
            # One request per sample, identical requests too (PROTOCOL §1, v2.3).
            distinct_requests += len(out)
    log = (workdir / "results/logs/serve/Local-VLM.log").read_text()
    assert log.count("request local-vlm") == distinct_requests
    job_log = (workdir / "results/logs/infer/Local-VLM.served.log").read_text()
    assert f"pid {pid}" in job_log and "server stopped" in job_log
    metrics = pd.read_parquet(workdir / "results/metrics/metrics.parquet")
    assert {"Local-VLM-Instant", "Local-VLM-Thinking"} <= set(metrics["model"])
    check_what_the_model_saw(workdir)

    # Nothing changed: nothing reruns and no server is started.
    again = run_snakemake(workdir, *SERVED_OUTPUTS)
    assert "Nothing to be done" in again.stdout + again.stderr
    assert len(started(starts)) == 1


def check_what_the_model_saw(workdir: Path) -> None:
    """The served facts in the stamp, the metrics' stamp and each run's explorer page; the
    frames and timestamps recorded per request are those the requests sent."""
    runs = ("Local-VLM-Instant", "Local-VLM-Thinking")
    stamp = json.loads((workdir / "results/stamp.json").read_text())
    assert "served" not in stamp["models"]["oracle"]
    carried = parquet_stamp(workdir / "results/metrics/metrics.parquet")
    recorded = []
    for run in runs:
        served = stamp["models"][run]["served"]
        assert carried["models"][run]["served"] == served
        assert (served["vllm_version"], served["vllm_version_source"]) == (FAKE_VERSION, "server")
        assert served["launch_args"][-4:-2] == ["--requests-file", str(workdir / "requests.jsonl")]
        assert served["chat_template"]["source"] == "model default"
        video = served["video"]
        assert video["mode"] == "frames" and video["frames_per_request"] == 2
        assert video["requests"] == 16  # behavior is the one video task
        page = (workdir / f"results/explorer/{run}.html").read_text()
        assert f"{FAKE_VERSION} (server)" in page and video["timestamps_digest"] in page
        frames = pd.read_parquet(workdir / video["per_request"])
        assert len(frames) == 16 and set(frames["task"]) == {"behavior"}
        for keys, stamps in zip(frames["frame_keys"], frames["timestamps_sec"], strict=True):
            files = [media_path(_media_store(workdir), k, "frames") for k in keys]
            recorded.append(([file_digest(f) for f in files], [round(t, 2) for t in stamps]))
    # The fake server's record of each request: its images' bytes and the times its text states.
    sent = [json.loads(line) for line in (workdir / "requests.jsonl").read_text().splitlines()]
    # (behavior requests: the frames, then the reference image)
    sent_frames = [(r["images"][: len(r["timestamps"])], r["timestamps"])
                   for r in sent if r["timestamps"]]  # fmt: skip
    assert len(sent_frames) == len(recorded) == 32
    assert sorted(sent_frames) == sorted(recorded)
    assert len({tuple(stamps) for _, stamps in recorded}) > 1  # real, differing times


def test_a_failing_job_leaves_no_server(prepared: Path, tmp_path: Path) -> None:
    workdir = served_run(prepared, tmp_path, "--never-healthy", health_timeout_s=2)
    result = run_snakemake(workdir, check=False)
    assert result.returncode != 0
    [(pid, worker)] = started(workdir / "starts.txt")
    assert not alive(pid) and not alive(worker)
    job_log = (workdir / "results/logs/infer/Local-VLM.served.log").read_text()
    assert "not healthy after 2 s" in job_log and "loading /models/local-vlm" in job_log


def start_and_wait_for_requests(workdir: Path) -> tuple[subprocess.Popen, int, int]:
    log = workdir / "results/logs/serve/Local-VLM.log"
    snakemake = snakemake_process(workdir)
    wait_for(lambda: log.exists() and "request local-vlm" in log.read_text())
    [(pid, worker)] = started(workdir / "starts.txt")
    assert alive(pid) and alive(worker)
    return snakemake, pid, worker


def test_sigterm_to_snakemake_leaves_no_server(prepared: Path, tmp_path: Path) -> None:
    # Snakemake lets the running job finish, then exits; the job stops its server.
    workdir = served_run(prepared, tmp_path, "--reply-delay", "0.2")
    snakemake, pid, worker = start_and_wait_for_requests(workdir)
    snakemake.send_signal(signal.SIGTERM)
    snakemake.communicate(timeout=300)
    assert not alive(pid) and not alive(worker)


def test_ctrl_c_to_snakemake_leaves_no_server(prepared: Path, tmp_path: Path) -> None:
    # Ctrl-C: SIGINT to the whole foreground group interrupts the job, which stops the server.
    # The server holds every request after the first, so the signal lands mid-run however
    # slowly this test gets to send it.
    workdir = served_run(prepared, tmp_path, "--hold-after", "1")
    snakemake, pid, worker = start_and_wait_for_requests(workdir)
    os.killpg(snakemake.pid, signal.SIGINT)
    output, _ = snakemake.communicate(timeout=120)
    assert snakemake.returncode != 0, output[-3000:]
    wait_for(lambda: not alive(pid) and not alive(worker), timeout=60)


def test_kill_9_leaves_a_server_that_the_next_run_reaps(prepared: Path, tmp_path: Path) -> None:
    """SIGKILL to Snakemake and its job: the leader and its worker outlive the job (the leader
    ignores its PDEATHSIG, the worker never gets one); the next run's served job reaps both
    from their pidfile before starting its own server.

    The orphans stop at the reaper's SIGTERM (--leader-ignores-term: the worker stops, and the
    leader with it): a worker that ignored SIGTERM too would hold the reaping run for the 30 s
    stop grace before its SIGKILL. That escalation is test_serve.py's
    `test_a_server_left_by_a_killed_job_is_reaped_by_the_next` (the same reaper, 1 s grace)."""
    # Started through `#!/usr/bin/env python3`: its command line changes after the start.
    launcher = tmp_path / "serve-launcher"
    launcher.write_text(
        "#!/usr/bin/env python3\nimport runpy, sys\n"
        f"sys.argv[0] = {str(FAKE)!r}\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    launcher.chmod(0o755)
    workdir = served_run(
        prepared, tmp_path, "--hold-after", "1", "--leader-ignores-term", command=[str(launcher)]
    )
    starts = workdir / "starts.txt"
    log = workdir / "results/logs/serve/Local-VLM.log"
    snakemake = snakemake_process(workdir)
    wait_for(lambda: log.exists() and "request local-vlm" in log.read_text())
    [(pid, worker)] = started(starts)
    pidfiles = list((workdir / "results/logs/serve").glob("*.pid"))
    assert len(pidfiles) == 1
    os.killpg(snakemake.pid, signal.SIGKILL)
    snakemake.communicate(timeout=60)
    time.sleep(1.0)  # PDEATHSIG has arrived and was ignored: both are still there
    try:
        assert alive(pid) and alive(worker)
        # The next run's own server is a plain one: it answers at once and stops on SIGTERM
        # (the orphans hold every request after the first: the job was killed mid-run).
        write_config(workdir, config(starts))
        run_snakemake(workdir, "--unlock")
        run_snakemake(workdir, "--rerun-incomplete", SERVED_JOB)  # the job that reaps
        assert not alive(pid) and not alive(worker)
        assert len(started(starts)) == 2 and not any(alive(p) for p, _ in started(starts))
        assert not list((workdir / "results/logs/serve").glob("*.pid"))
    finally:
        for leftover in (pid, worker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)
