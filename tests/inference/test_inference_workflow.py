"""End-to-end fault runs: real Snakemake against a real loopback server with injected faults.

A run ends either with every response or with a failed job whose plain rerun sends only the
failed requests; the server never sees an answered request twice; the job log and the run
summary name the model, the count of each error type and what to type; a model's six task
jobs running at once keep its `rpm_limit`.
"""

from __future__ import annotations

import re
import time
import zlib
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from loopback_server import LoopbackServer, Reply, assert_rate_limited, completion, request_marker
from workflow_runner import REPO, run_snakemake, write_config

# Snakemake runs against a loopback server.
pytestmark = pytest.mark.workflow

SECRET = "sk-faults-Vb4Nq8Zr2Tx6Kp3W"
MODEL = "fault-vlm-Instant"


def answer(body: dict) -> Reply:
    system = body["messages"][0]["content"]
    if '"answers"' in system:
        text = '{"answers":[{"option_id":"A","intervals_sec":[[0.0,1.0]]}]}'
    elif "visible_count" in system:
        text = '{"visible_count":1,"visible_intervals_sec":[[0.0,1.0]]}'
    else:
        text = '{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,0.5,0.5]}'
    return 200, completion(text), {}


def bucket(body: dict) -> int:
    return zlib.crc32(body["messages"][-1]["content"][0]["text"].encode()) % 8


class Faults:
    """Until `healed`: bucket 0 -> 503 always, bucket 1 -> 401 echoing the key (always),
    bucket 2 -> a non-JSON 200 on the first try, bucket 3 -> a lone surrogate in the answer."""

    def __init__(self) -> None:
        self.healed = False

    def __call__(self, body: dict, count: int) -> Reply:
        kind = bucket(body)
        if kind == 1:
            return 401, {"error": {"message": f"invalid key {SECRET}"}}, {}
        if kind == 0 and not self.healed:
            return 503, {"error": {"message": "overloaded"}}, {"Retry-After": "0"}
        if kind == 2 and count == 1:
            return 200, b"<html>upstream hiccup</html>", {}
        if kind == 3:
            status, payload, headers = answer(body)
            payload["choices"][0]["message"]["content"] += " \ud800"
            return status, payload, headers
        return answer(body)


def _config(workdir: Path, api_base: str, tasks: list[str], **model: object) -> None:
    write_config(
        workdir,
        {
            "data_root": str(REPO / "resources" / "demo"),
            "tasks": tasks,
            "tables": {"formats": ["csv"]},
            "models": [
                {
                    "name": MODEL,
                    "backend": "openai",
                    "api_base": api_base,
                    "api_key": "${DUALCOG_FAULT_KEY}",
                    "family": "qwen_vllm",
                    "video_mode": "frames",
                    "video_frames": 2,
                    "concurrency": 4,
                    "max_retries": 1,
                    "retry_backoff_s": 0.01,
                    **model,
                }
            ],
        },
    )


def _snakemake(workdir: Path, *args: str):
    result = run_snakemake(workdir, *args, env={"DUALCOG_FAULT_KEY": SECRET}, check=False)
    assert SECRET not in result.stdout + result.stderr
    return result


def test_failed_run_then_plain_rerun_sends_only_the_failed_requests(tmp_path: Path) -> None:
    tasks = ["future_observation", "behavior"]
    target = "results/metrics/metrics.parquet"  # responses -> parsed -> scores -> metrics
    faults = Faults()
    with LoopbackServer(faults) as server:
        _config(tmp_path, server.api_base, tasks)
        # --keep-going (as the profiles set it): the other task's job runs despite the failure.
        first = _snakemake(tmp_path, target, "--keep-going")
        assert first.returncode != 0
        sent_first = server.requests
        per_prompt = dict(server.per_prompt)
        bodies = {request_marker(b): b for b in server.bodies}
        failing = [m for m, b in bodies.items() if bucket(b) == 0]
        refused = [m for m, b in bodies.items() if bucket(b) == 1]
        # 32 samples; two of them are the very same request, sent once for each (§1 v2.3).
        twin = list(server.resent_after_answer)  # the second sample's own request
        assert len(twin) == 1
        assert (
            failing
            and refused
            and len(bodies) == server.requests - sum(n - 1 for n in per_prompt.values()) == 31
        )
        assert all(per_prompt[t] == 2 for t in failing)  # 1 + max_retries
        assert all(per_prompt[t] == 1 for t in refused)  # permanent: not retried

        # The job log and the run summary say what failed and what to type.
        for text in (first.stderr, *_infer_logs(tmp_path)):
            assert SECRET not in text
        assert "inference summary" in first.stderr and MODEL in first.stderr
        assert re.search(r"http_503: \d+", first.stderr)
        assert "run the same snakemake command again" in first.stderr
        failed_jobs = {t for t in tasks if "the job failed" in (tmp_path / _log(t)).read_text()}
        assert failed_jobs
        assert all("http_503" in (tmp_path / _log(t)).read_text() for t in failed_jobs)

        # Plain rerun once the server is healthy: only the failed requests go out again.
        faults.healed = True
        second = _snakemake(tmp_path, target)
        assert second.returncode == 0, second.stderr[-3000:]
        resent = server.bodies[sent_first:]
        resent_markers = sorted(request_marker(b) for b in resent)
        expected = sorted(t for t in failing + refused if _task_of(bodies[t], tasks) in failed_jobs)
        assert resent_markers == expected
        assert server.resent_after_answer == twin  # the other sample's own request, nothing else
        # A third plain run has nothing to do.
        third = _snakemake(tmp_path, target)
        assert third.returncode == 0 and server.requests == sent_first + len(expected)

        # A cache line that is not UTF-8 is skipped with a warning naming file and line; a
        # forced rerun resends only the refused requests (errors are never reused). Its
        # targets are the two responses files: what it checks is inference (the log, the
        # requests, the responses read below); the parsed file read below is the second run's,
        # parsed from the same deterministic answers.
        cache = f"results/cache/{MODEL}/behavior.jsonl"
        lines = (tmp_path / cache).read_bytes().count(b"\n")
        with (tmp_path / cache).open("ab") as handle:
            handle.write(b'{"cache_key": "\xff\xfe"}\n')
        before = server.requests
        responses = [f"results/responses/{MODEL}/{task}.parquet" for task in tasks]
        fourth = _snakemake(tmp_path, *responses, "--forcerun", "infer_api")
        assert fourth.returncode == 0, fourth.stderr[-3000:]
        assert f"{cache}:{lines + 1}: unreadable line skipped" in (
            (tmp_path / _log("behavior")).read_text()
        )
        assert server.requests - before == len(refused)
        assert server.resent_after_answer == twin

    # Progress lines: done/total, counts, rate and ETA, the model/task label once.
    for task in tasks:
        log = (tmp_path / _log(task)).read_text()
        assert re.search(rf"{MODEL}/{task}: 16/16 done, ok=\d+, errors=\d+, cached=\d+, ", log)
        assert "ETA 0s" in log and f"{MODEL}/{task}: {MODEL}" not in log
        assert "HTTP Request:" not in log  # no line per request from the HTTP stack

    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    responses = pd.concat(
        pd.read_parquet(tmp_path / f"results/responses/{MODEL}/{task}.parquet") for task in tasks
    )
    errors = responses[responses.status == "error"]
    assert set(errors.error_type) == {"http_401"}  # only the permanent refusals remain
    # The lone surrogate is stored as its escape, and the answer around it still parses.
    escaped = responses[responses.raw_text.fillna("").str.endswith(" \\ud800")].sample_id
    parsed = pd.read_parquet(tmp_path / f"results/parsed/{MODEL}.parquet")
    compatible = parsed[(parsed.parse == "compatible") & parsed.sample_id.isin(escaped)]
    assert len(escaped) and len(compatible) == len(escaped) and compatible.all_valid.all()
    assert "401" in second.stderr and "permanent failures" in second.stderr
    assert (tmp_path / "results/metrics/metrics.parquet").is_file()

    # A setting of an API run plans the one job of all API runs again (rules/api.smk); its
    # units answer from the cache what the change leaves alone.
    _config(tmp_path, server.api_base, tasks, video_frames=3)
    targets = [f"results/responses/{MODEL}/{task}.parquet" for task in tasks]
    planned = _snakemake(tmp_path, *targets, "--dry-run")
    assert planned.returncode == 0, planned.stdout[-3000:]
    assert re.findall(r"^rule (infer\w*):", planned.stdout, re.M) == ["infer_api"]


def _log(task: str) -> str:
    return f"results/logs/infer/{MODEL}/{task}.log"


def _infer_logs(workdir: Path, folder: str = "") -> list[str]:
    """The inference logs (of one run's units: `folder` = its name)."""
    logs = workdir / "results/logs/infer" / folder
    return [p.read_text() for p in sorted(logs.rglob("*.log"))]


def _task_of(body: dict, tasks: list[str]) -> str:
    return "behavior" if '"answers"' in body["messages"][0]["content"] else tasks[0]


def _job_span(text: str) -> tuple[datetime, datetime]:
    stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})", text, flags=re.M)
    parsed = [datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f") for s in stamps]
    return parsed[0], parsed[-1]


def _answer_once_jobs_overlap(workdir: Path, jobs: int, timeout_s: float = 300.0):
    """`answer`, held until `jobs` infer jobs have started (their logs exist), or timeout_s.

    An event, not a race: on a loaded machine the jobs start tens of seconds apart (the video
    prompts take longer to render), and the first could be done before the third starts. Held
    answers keep a job running (its log's last line comes after them) without touching the
    arrival times the limit is checked on; jobs that never run at once run into the timeout
    and fail the overlap assertion as before."""
    logs = workdir / "results" / "logs" / "infer" / MODEL
    deadline = time.monotonic() + timeout_s

    def reply(body: dict, count: int) -> Reply:
        while len(list(logs.glob("*.log"))) < jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        return answer(body)

    return reply


def test_three_task_jobs_of_one_model_keep_its_rpm_limit(tmp_path: Path) -> None:
    """Three image tasks: three jobs of the model at once, each with its own process (six
    tasks proved no more and cost the video media and three more jobs, 7 CPU-s)."""
    limit, window = 24, 2.0
    tasks = ["landmark_position", "self_position", "action_decision"]
    with LoopbackServer(_answer_once_jobs_overlap(tmp_path, len(tasks))) as server:
        _config(tmp_path, server.api_base, tasks, rpm_limit=limit, rate_limit_window_s=window)
        # Only the responses: everything asserted on is upstream of parsing.
        responses = [f"results/responses/{MODEL}/{task}.parquet" for task in tasks]
        result = _snakemake(tmp_path, *responses, "--cores", "6")
        assert result.returncode == 0, result.stderr[-3000:]
        arrivals = list(server.arrivals)
    samples = sum(  # one request per sample, identical ones too (§1 v2.3)
        len(pd.read_parquet(path)) for path in (tmp_path / "results/prompts").glob("*.parquet")
    )
    assert len(arrivals) == samples > len(tasks) * 15
    assert_rate_limited(arrivals, limit, window)
    spans = [_job_span(text) for text in _infer_logs(tmp_path, MODEL)]
    assert len(spans) == len(tasks)
    # The jobs ran at once (so the limit held across jobs, not by taking turns).
    latest_start = max(start for start, _ in spans)
    overlapping = sum(start <= latest_start <= end for start, end in spans)
    assert overlapping == len(tasks)


def test_budget_holds_for_cluster_jobs_sharing_only_the_cache_folder(tmp_path: Path) -> None:
    """As on a cluster: the API job is submitted (cluster-generic executor) and runs as a
    detached process, not a child of Snakemake, its three units side by side; only the
    filesystem is shared."""
    submit = tmp_path / "submit.sh"
    submit.write_text(
        '#!/bin/bash\nsetsid nohup bash "$1" > "$1.out" 2>&1 < /dev/null &\necho "$!"\n'
    )
    submit.chmod(0o755)
    limit, window = 12, 2.0
    tasks = ["future_observation", "behavior", "landmark_position"]
    with LoopbackServer(lambda body, count: answer(body)) as server:
        _config(tmp_path, server.api_base, tasks, rpm_limit=limit, rate_limit_window_s=window)
        responses = [f"results/responses/{MODEL}/{task}.parquet" for task in tasks]
        # Locally, for speed, and only what the responses need (not the explorer's media).
        upstream = _snakemake(tmp_path, *responses, "--omit-from", "infer_api")
        assert upstream.returncode == 0, upstream.stderr[-3000:]
        result = _snakemake(
            tmp_path,
            *responses,
            "--executor", "cluster-generic", "--cluster-generic-submit-cmd", str(submit),
            "--jobs", "6", "--latency-wait", "5",
            "--seconds-between-status-checks", "1",  # not 10: the jobs take seconds
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        arrivals = list(server.arrivals)
    assert len(arrivals) == 3 * 16  # one request per sample, identical ones too (§1 v2.3)
    assert_rate_limited(arrivals, limit, window)
    spans = [_job_span(text) for text in _infer_logs(tmp_path, MODEL)]
    latest_start = max(start for start, _ in spans)
    assert sum(start <= latest_start <= end for start, end in spans) >= 2
