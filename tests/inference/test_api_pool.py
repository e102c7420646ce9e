"""API runs are not bound by --cores: their (run, task) units run side by side in one job
(rules/api.smk), within each provider's cap (`api_<provider>`), each unit with its own log."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from loopback_server import LoopbackServer, Reply, completion
from workflow_runner import REPO, run_snakemake, write_config

from dualcog.cluster import provider_caps
from dualcog.console import JobConsole
from dualcog.estimate import providers_bound_s, run_seconds
from dualcog.inference.by_provider import run_by_provider

TASK = "landmark_position"  # one image task: 16 requests per run, no video preparation
DELAY_S = 0.15


class InFlight:
    """Answers after DELAY_S; records the most runs in flight at once, per provider and in
    all (the request's `model` is its run: each run sends one request at a time)."""

    def __init__(self, provider_of: dict[str, str]) -> None:
        self.provider_of = provider_of
        self.lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.most_runs = 0

    def __call__(self, body: dict, count: int) -> Reply:
        run = body["model"]
        with self.lock:
            self.now[run] += 1
            runs = [r for r, n in self.now.items() if n]
            self.most_runs = max(self.most_runs, len(runs))
            for provider in set(self.provider_of.values()):
                here = sum(1 for r in runs if self.provider_of[r] == provider)
                self.most[provider] = max(self.most[provider], here)
        time.sleep(DELAY_S)
        with self.lock:
            self.now[run] -= 1
        return 200, completion('{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,0.5,0.5]}'), {}


@pytest.mark.workflow
def test_api_units_run_beyond_cores_within_provider_caps(tmp_path: Path) -> None:
    provider_of = {"pa-1": "pa", "pa-2": "pa", "pa-3": "pa", "pb-1": "pb"}
    recorder = InFlight(provider_of)
    with LoopbackServer(recorder) as server:
        models = [
            {"name": run, "backend": "openai", "api_base": server.api_base, "api_key": "EMPTY",
             "provider": provider, "request_model": run, "concurrency": 1, "max_retries": 0}
            for run, provider in provider_of.items()
        ]  # fmt: skip
        write_config(tmp_path, {"data_root": str(REPO / "resources" / "demo"), "tasks": [TASK],
                                "models": models})  # fmt: skip
        responses = [f"results/responses/{run}/{TASK}.parquet" for run in provider_of]
        result = run_snakemake(tmp_path, *responses, "--cores", "1", "--resources", "api_pa=2")
        assert result.returncode == 0, result.stderr[-3000:]
    assert server.requests == 16 * len(provider_of)
    # One core, yet three runs answered at once: two of pa (its cap) and pb's.
    assert recorder.most_runs == 3
    assert recorder.most == {"pa": 2, "pb": 1}
    for run in provider_of:  # each unit's own log, as a job of its own would have written
        log = (tmp_path / f"results/logs/infer/{run}/{TASK}.log").read_text()
        assert f"{run} on {TASK}: 16 requests" in log and "16/16 done" in log
        assert all(other not in log for other in provider_of if other != run)


def test_run_by_provider_keeps_each_cap_and_returns_failures_in_place() -> None:
    lock, now, most = threading.Lock(), Counter(), Counter()
    units = [("a", i) for i in range(5)] + [("b", i) for i in range(3)] + [("c", 0)]

    def work(unit: tuple[str, int]) -> str:
        with lock:
            now[unit[0]] += 1
            now["all"] += 1
            for key in (unit[0], "all"):
                most[key] = max(most[key], now[key])
        time.sleep(0.05)
        with lock:
            now[unit[0]] -= 1
            now["all"] -= 1
        if unit == ("b", 1):
            raise RuntimeError("refused")
        return f"{unit[0]}{unit[1]}"

    results = run_by_provider(units, lambda u: u[0], work, {"a": 2, "b": None})
    assert [r if isinstance(r, str) else repr(r) for r in results] == [
        "a0", "a1", "a2", "a3", "a4", "b0", "RuntimeError('refused')", "b2", "c0",
    ]  # fmt: skip
    assert most == {"a": 2, "b": 3, "c": 1, "all": 6}
    most.clear()
    run_by_provider(units, lambda u: u[0], work, total=3)  # api_slots: all providers together
    assert most["all"] == 3
    with pytest.raises(ValueError, match="cap of a must be at least 1"):
        run_by_provider(units, lambda u: u[0], work, {"a": 0})


def test_provider_caps_read_snakemake_resources() -> None:
    class Resource:  # what workflow.global_resources holds
        def __init__(self, value: int | None) -> None:
            self.value = value

    caps = provider_caps({"api_pa": Resource(3), "api_slots": 8, "_nodes": Resource(None)},
                         ["pb", "pa"])  # fmt: skip
    assert caps.per_provider == {"pa": 3, "pb": None}
    assert caps.total == 8
    assert caps.job_resources == {"api_pa": 3, "api_slots": 8}
    assert provider_caps({}, ["pa"]).job_resources == {}


def test_providers_bound_from_each_runs_limits_and_the_caps() -> None:
    models = {
        "a1": {"rpm_limit": 30},  # 90 requests at 30 per 60 s: 180 s
        "a2": {"rpm_limit": 60},  # 90 s
        # 120 requests x 100 tokens at 6,000 tokens per 10 s: 20 s (its rpm allows 12 s)
        "b1": {
            "tpm_limit": 6000,
            "estimated_tokens_per_request": 100,
            "rpm_limit": 100,
            "rate_limit_window_s": 10,
        },  # fmt: skip
        "c1": {},  # no limit stated: its time depends on latencies, 0 here
    }
    requests = {"a1": 90, "a2": 90, "b1": 120, "c1": 50}
    provider = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
    assert run_seconds(models["b1"], 120) == 20.0 and run_seconds(models["c1"], 50) == 0.0
    assert providers_bound_s(requests, models, provider, {}) == 180.0
    # One unit of provider a at a time: its runs take turns, 180 + 90 s.
    assert providers_bound_s(requests, models, provider, {"a": 1, "b": None}) == 270.0
    # Two units of all providers at once: (180 + 90 + 20) / 2 = 145 s, under a1's own 180 s.
    assert providers_bound_s(requests, models, provider, {}, total=2) == 180.0
    assert providers_bound_s(requests, models, provider, {}, total=1) == 290.0
    assert providers_bound_s({}, {}, {}, {}) == 0.0


def test_console_eta_is_never_shorter_than_a_running_jobs_providers_bound() -> None:
    now = [100.0]
    console = JobConsole(lambda r: "", every_s=0, clock=lambda: now[0], wall_clock=lambda: "T")

    def record(**extra: object) -> logging.LogRecord:
        item = logging.LogRecord("snakemake", logging.INFO, __file__, 1, None, None, None)
        item.__dict__.update(extra)
        return item

    start = record(event="job_info", jobid=3, rule_name="infer_api", wildcards={},
                   resources={"api_bound_s": 3600, "_cores": 0})  # fmt: skip
    assert console.line(start) == (
        "T start infer_api [job 3], the providers' limits allow it no less than 1h00m"
    )
    now[0] += 600
    # 2 of 4 jobs in 10 minutes would say 10 more minutes; the API job has 50 left at least.
    assert console.line(record(event="progress", done=2, total=4)).endswith("ETA 50m00s")
    console.line(record(event="job_finished", job_id=3))
    now[0] += 60
    assert console.line(record(event="progress", done=3, total=4)).endswith("ETA 3m40s")
