"""`repeats: k` through the real workflow: a simulated sampling model's repeats are distinct
runs and every table shows the set's spread; an API model's repeat set survives a `kill -9`
of Snakemake during its second repeat without sending any answered request again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from loopback_server import LoopbackServer, Reply, completion
from workflow_runner import REPO, loopback_model, run_snakemake, write_config

from dualcog.inference.cache import cache_path
from dualcog.tasks import IMAGE_TASKS

pytestmark = pytest.mark.workflow

DEMO = REPO / "resources" / "demo"
SET = "sim-Instant"
RUNS = [f"{SET}~r{i}" for i in (1, 2, 3)]


def test_simulated_repeats_are_three_runs_and_every_table_shows_the_spread(tmp_path: Path):
    config = {
        "data_root": str(DEMO),
        # The four image tasks (the audit averages them) and one video task: every table.
        "tasks": [*IMAGE_TASKS, "behavior"],
        "tables": {"formats": ["csv", "md"]},
        "bootstrap": {"replicates": 200, "seed": 1},
        "compare": [[SET, "other"]],
        "models": [
            {
                "name": SET,
                "backend": "simulated",
                "group": "open-weights",
                "seed": 3,
                "skill": 0.6,
                "repeats": 3,
            },  # fmt: skip
            {"name": "other", "backend": "random", "group": "baseline", "seed": 1},
        ],
    }
    write_config(tmp_path, config)
    run_snakemake(tmp_path, "--omit-from", "plots", "explorer_media")
    results = tmp_path / "results"

    # Three runs, each answered from its own seed: no two alike.
    texts = []
    for run in RUNS:
        responses = pd.read_parquet(results / "responses" / run / "landmark_position.parquet")
        texts.append(tuple(responses.sort_values("sample_id")["raw_text"]))
    assert len(set(texts)) == 3
    metrics = pd.read_parquet(results / "metrics/metrics.parquet")
    assert set(RUNS) <= set(metrics["model"]) and SET not in set(metrics["model"])

    # Every table: the set is one row, 3 of 3 repeats, with its spread (the usage table has
    # no number for a built-in backend to spread: its cells are dashes).
    tables = sorted((results / "tables").glob("*.md"))
    assert {t.stem for t in tables} >= {"audit", "image_main", "video_main", "overall", "usage"}
    for table in tables:
        rows = [line for line in table.read_text().splitlines() if line.startswith(f"| {SET}")]
        assert len(rows) == 1, table.name
        assert "| 3/3 |" in rows[0], table.name
        if table.stem != "usage":
            assert "±" in rows[0], table.name
        assert not any(run in table.read_text() for run in RUNS), table.name
    overall = pd.read_csv(results / "tables/overall.csv", index_col="run")
    per_run = metrics[(metrics["task"] == "overall") & (metrics["metric"] == "overall_score")
                      & (metrics["stratum"] == "all")].set_index("model")["value"]  # fmt: skip
    assert overall.loc[SET, "Overall"] == pytest.approx(per_run[RUNS].mean(), abs=1e-6)
    assert overall.loc[SET, "Overall SD"] == pytest.approx(per_run[RUNS].std(ddof=1), abs=1e-6)

    # The leaderboard: the set's bootstrap interval (of the mean over repeats) and its spread.
    intervals = pd.read_parquet(results / "metrics/intervals.parquet")
    mine = intervals[(intervals["model"] == SET) & (intervals["stratum"] == "all")]
    lp = mine[(mine["task"] == "landmark_position") & (mine["metric"] == "option_acc")
              & (mine["parse"] == "compatible")].iloc[0]  # fmt: skip
    runs_lp = metrics[
        (metrics["task"] == "landmark_position")
        & (metrics["stratum"] == "all")
        & (metrics["metric"] == "option_acc")
        & (metrics["parse"] == "compatible")
    ]
    assert lp["value"] == pytest.approx(runs_lp.set_index("model")["value"][RUNS].mean())
    assert lp["ci_low"] <= lp["value"] <= lp["ci_high"]
    board = (results / "leaderboard.html").read_text()
    assert f"{lp['value'] * 100:.1f} ±" in board
    assert f"[{lp['ci_low'] * 100:.1f}, {lp['ci_high'] * 100:.1f}]" in board
    assert f"explorer/{SET}~r1.html" in board and f"explorer/{SET}.html" not in board

    # `compare:` names the set: the mean of its three repeats with their SD, and the interval.
    compared = pd.read_parquet(results / f"compare/{SET}__vs__other.parquet")
    assert set(compared["repeats_a"]) == {3} and set(compared["repeats_b"]) == {1}
    assert compared["sd_a"].notna().any() and compared["sd_b"].isna().all()
    summary = (results / f"compare/{SET}__vs__other.md").read_text()
    assert f"{SET}: the mean of 3 repeats" in summary and "±" in summary


# --- kill -9 during the second repeat of an API model ---------------------------------------

SECRET = "sk-loopback-Rp3Kq8Zx2Vw7Nm4T"
API_SET = "loop-vlm-Instant"
API_RUNS = [f"{API_SET}~r{i}" for i in (1, 2, 3)]
TASK = "landmark_position"
SAMPLES = 16  # demo samples of the task
KILL_AT = SAMPLES + 5  # answers before the server holds every request: five into repeat 2


class HoldingResponder:
    """Answers until `KILL_AT` answers are out, then holds each request (a delayed reply the
    loopback server never counts as answered) until released; counts the answers given."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answers = 0
        self.holding = True

    def __call__(self, body: dict, count: int) -> Reply:
        with self.lock:
            if self.holding and self.answers >= KILL_AT:
                return 200, completion("held"), {"X-Delay": "20"}
            self.answers += 1
        text = '{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,0.5,0.5]}'
        return 200, completion(text), {}


def _ok_lines(workdir: Path, run: str) -> int:
    path = cache_path(workdir / "results/cache", run, TASK)
    if not path.exists():
        return 0
    lines = path.read_bytes().split(b"\n")
    return sum(1 for line in lines if line.strip() and json.loads(line)["status"] == "ok")


def _config(api_base: str) -> dict:
    return {
        "data_root": str(DEMO),
        "tasks": [TASK],
        "tables": {"formats": ["md"]},
        "bootstrap": {"replicates": 50},
        "models": [loopback_model(API_SET, api_base, temperature=0.2, concurrency=1, repeats=3)],
    }


def test_kill_9_during_repeat_2_resends_no_answered_request(tmp_path: Path) -> None:
    responder = HoldingResponder()
    env = {**os.environ, "DUALCOG_LOOPBACK_KEY": SECRET}
    with LoopbackServer(responder) as server:
        write_config(tmp_path, _config(server.api_base))
        command = [
            sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(tmp_path), "--cores", "1",
            *(f"results/responses/{run}/{TASK}.parquet" for run in API_RUNS),
            # One API unit at a time (the repeats are units of the one API job): repeat 1
            # whole, then repeat 2.
            "--resources", "api_slots=1",
        ]  # fmt: skip
        snakemake = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            # Every answer given is in a cache before the kill: none is in flight to the client.
            while sum(_ok_lines(tmp_path, run) for run in API_RUNS) < KILL_AT:
                assert snakemake.poll() is None, snakemake.stdout.read().decode()[-3000:]
                assert time.monotonic() < deadline, "the repeats never got to repeat 2"
                time.sleep(0.05)
        finally:
            os.killpg(snakemake.pid, signal.SIGKILL)
            snakemake.wait(timeout=60)
        at_kill = sorted(_ok_lines(tmp_path, run) for run in API_RUNS)
        assert at_kill == [0, 5, SAMPLES], at_kill  # one repeat whole, the second under way
        assert responder.answers == KILL_AT
        with responder.lock:
            responder.holding = False

        run_snakemake(tmp_path, "--unlock", env={"DUALCOG_LOOPBACK_KEY": SECRET})
        run_snakemake(tmp_path, "--rerun-incomplete", "results/tables/usage.md",
                      env={"DUALCOG_LOOPBACK_KEY": SECRET})  # fmt: skip

    # Every answer the server gave went to exactly one repeat's cache: 3 x 16 answers in all,
    # so not one answered request was sent again.
    assert [_ok_lines(tmp_path, run) for run in API_RUNS] == [SAMPLES] * 3
    assert responder.answers == 3 * SAMPLES
    # Each repeat's responses are whole, and the usage table shows the set's spread.
    for run in API_RUNS:
        responses = pd.read_parquet(tmp_path / f"results/responses/{run}/{TASK}.parquet")
        assert len(responses) == SAMPLES and (responses["status"] == "ok").all()
    # The repeats share the model's concurrency slots and rate budget (one folder).
    cache = tmp_path / "results/cache"
    assert (cache / API_SET / ".budget").is_dir()
    assert not any((cache / run / ".budget").exists() for run in API_RUNS)
    usage = (tmp_path / "results/tables/usage.md").read_text()
    row = next(line for line in usage.splitlines() if line.startswith(f"| {API_SET} |"))
    # Requests summed over the set (3 x 16), each repeat sent 16: a spread of 0.
    assert "| 3/3 |" in row and f"| {3 * SAMPLES} ±0 |" in row
