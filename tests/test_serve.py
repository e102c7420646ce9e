"""Managed local servers: started, health awaited, used, and stopped with their workers.

The server is tests/fake_vllm.py, a real HTTP process started through the same code path as
`vllm serve` (only `serve.command` differs). Process checks are by PID, via /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from dualcog import schemas
from dualcog.inference import media_path, run_model
from dualcog.serving import (
    GpuClaim,
    ManagedServer,
    ServeError,
    gpu_pool,
    serve_spec,
    served_groups,
)

FAKE = Path(__file__).parent / "fake_vllm.py"
IMAGE = "cd" + "4" * 62


def alive(pid: int) -> bool:
    """True while `pid` is a live process (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def started(starts: Path) -> list[tuple[int, int]]:
    """(server pid, worker pid) of every start the fake server recorded."""
    if not starts.exists():
        return []
    return [
        (int(parts[1]), int(parts[2]))
        for parts in (line.split() for line in starts.read_text().splitlines())
    ]


def fake_model(starts: Path, *args: str, **serve: object) -> dict:
    return {
        "name": "Local-VLM-Instant",
        "backend": "openai",
        "family": "qwen_vllm",
        "max_retries": 0,
        "serve": {
            "model": "/models/local-vlm",
            "served_name": "local-vlm",
            "command": [sys.executable, str(FAKE)],
            "args": ["--starts-file", str(starts), *args],
            "gpus": 0,
            "health_timeout_s": 20,
            **serve,
        },
    }


def one_prompt(tmp_path: Path) -> tuple[pd.DataFrame, Path]:
    store = tmp_path / "media"
    path = media_path(store, IMAGE, "image")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xd8\xff\xe0jpeg")
    row = {
        "sample_id": "s1",
        "task": "landmark_position",
        "request_key": "rk1",
        "system_text": "Answer in JSON.",
        "user_text": "where?",
        "media_keys": [IMAGE],
        "media_kinds": ["image"],
        "offered_option_ids": ["A"],
    }
    return schemas.to_table(pd.DataFrame([row]), schemas.PROMPTS).to_pandas(), store


def test_serves_requests_then_stops_with_its_workers(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    model = fake_model(starts, "--startup-delay", "0.5")
    log = tmp_path / "logs" / "serve.log"
    with ManagedServer(serve_spec(model), log) as server:
        [(pid, worker)] = started(starts)
        assert server.pid == pid and alive(pid) and alive(worker)
        frame, store = one_prompt(tmp_path)
        served = {**model, "api_base": server.api_base, "request_model": "local-vlm"}
        out = run_model(served, frame, pd.DataFrame(), store, tmp_path / "cache")
        assert list(out.status) == ["ok"]
    assert not alive(pid) and not alive(worker)
    text = log.read_text()
    assert "--served-model-name local-vlm" in text and "request local-vlm" in text


def test_health_timeout_reports_the_log_tail_and_leaves_nothing(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    model = fake_model(starts, "--never-healthy", health_timeout_s=1.5)
    server = ManagedServer(serve_spec(model), tmp_path / "serve.log")
    with pytest.raises(ServeError) as info, server:
        pytest.fail("a server that is never healthy must not be used")
    message = str(info.value)
    assert "not healthy after 1.5 s" in message and "loading /models/local-vlm" in message
    [(pid, worker)] = started(starts)
    assert not alive(pid) and not alive(worker)


def test_a_server_that_exits_at_start_is_reported_at_once(tmp_path: Path) -> None:
    model = fake_model(tmp_path / "starts.txt", "--no-such-option")
    began = time.monotonic()
    server = ManagedServer(serve_spec(model), tmp_path / "serve.log")
    with pytest.raises(ServeError, match=r"(?s)exited with code 2.*unrecognized arguments"), server:
        pass
    assert time.monotonic() - began < 15


def test_a_missing_server_command_says_how_to_install_it(tmp_path: Path) -> None:
    model = fake_model(tmp_path / "s.txt", command=["no-such-vllm-binary", "serve"])
    with pytest.raises(ServeError, match="not found.*envs/vllm.yaml"):
        ManagedServer(serve_spec(model), tmp_path / "serve.log").start()


def test_a_server_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    model = fake_model(starts, "--ignore-term")
    server = ManagedServer(serve_spec(model), tmp_path / "serve.log", stop_grace_s=1.0)
    with server:
        [(pid, worker)] = started(starts)
    assert not alive(pid) and not alive(worker)


def test_sigterm_to_the_job_process_stops_the_server(tmp_path: Path) -> None:
    """A job killed by the scheduler (SIGTERM) still stops its server."""
    starts = tmp_path / "starts.txt"
    model = fake_model(starts)
    script = (
        "import sys, time\n"
        "from dualcog.serving import ManagedServer, exit_on_signals, serve_spec\n"
        f"model = {model!r}\n"
        "with exit_on_signals(), ManagedServer(serve_spec(model), sys.argv[1]):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
    )
    job = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "serve.log")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert job.stdout is not None and job.stdout.readline().strip() == "ready"
    [(pid, worker)] = started(starts)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) == 128 + signal.SIGTERM
    assert not alive(pid) and not alive(worker)


def test_runs_sharing_a_served_route_share_one_server() -> None:
    serve = {"model": "/m", "gpus": 2}
    models = [
        {"name": "Q-Instant", "backend": "openai", "serve": serve},
        {"name": "Q-Thinking", "backend": "openai", "serve": serve},
        {"name": "R-Instant", "backend": "openai", "serve": {"model": "/r", "gpus": 1}},
        {"name": "API-Instant", "backend": "openai", "api_base": "http://x/v1"},
        {"name": "Q-Fast", "backend": "openai", "route": "Q", "serve": {"model": "/q2"}},
    ]
    groups = served_groups(models)
    assert [(g.key, g.runs, g.gpus) for g in groups] == [
        ("Q", ("Q-Instant", "Q-Thinking"), 2),
        ("R", ("R-Instant",), 1),
        ("Q-2", ("Q-Fast",), 1),
    ]
    assert groups[2].rule_name == "infer_served_Q_2"


def test_gpu_pool_comes_from_the_job_or_the_machine(monkeypatch) -> None:
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "3"}) is None  # SLURM chose: keep it
    assert gpu_pool({"DUALCOG_GPUS": "0, 1,2"}) == ["0", "1", "2"]
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: leave the choice alone
    assert gpu_pool({}) is None


def test_gpu_claims_share_the_pool_without_overlap(tmp_path: Path) -> None:
    first = GpuClaim(1, ["0", "1", "2"], tmp_path)
    second = GpuClaim(2, ["0", "1", "2"], tmp_path)
    assert first.acquire() == ["0"] and second.acquire() == ["1", "2"]
    third = GpuClaim(1, ["0", "1", "2"], tmp_path, wait_s=0.3, poll_s=0.05)
    with pytest.raises(ServeError, match=r"no 1 free GPUs in \['0', '1', '2'\] after 0.3 s"):
        third.acquire()
    first.release()
    assert third.acquire() == ["0"]
    with pytest.raises(ServeError, match="needs 4 GPUs; the pool has 3"):
        GpuClaim(4, ["0", "1", "2"], tmp_path)


def test_two_servers_get_different_devices(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("DUALCOG_GPUS", "4,5")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a lock folder of this test's own
    monkeypatch.setattr(tempfile, "tempdir", None)
    starts = tmp_path / "starts.txt"
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    model = fake_model(starts, gpus=1)
    with ManagedServer(serve_spec(model), logs[0]), ManagedServer(serve_spec(model), logs[1]):
        seen = sorted(
            line for log in logs for line in log.read_text().splitlines()
            if line.startswith("CUDA_VISIBLE_DEVICES=")
        )  # fmt: skip
    assert seen == ["CUDA_VISIBLE_DEVICES=4", "CUDA_VISIBLE_DEVICES=5"]
    # Released with the servers: both devices are free again.
    assert GpuClaim(2, ["4", "5"], tmp_path / "dualcog-gpu-locks", wait_s=0).acquire() == ["4", "5"]
