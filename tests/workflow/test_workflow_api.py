"""End-to-end through the `openai` backend: a real Snakemake run against a loopback server.

Checks what only the whole stack shows: media from the shared store reach the server as data
URIs in the right order, the mode suffix becomes the provider switch, the API key travels
only in the Authorization header (never into results or logs), the compatible parser recovers
a fenced per-mille run, and the response cache makes a rerun send nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from loopback_server import LoopbackServer, Reply, completion
from workflow_runner import REPO, loopback_model, run_snakemake, write_config

pytestmark = pytest.mark.workflow

SECRET = "sk-loopback-Hq7Vt3Xw9Pz2Lm5K"
TASKS = ["landmark_position", "future_observation", "behavior"]


def answer(body: dict, count: int) -> Reply:
    system = body["messages"][0]["content"]
    if '"answers"' in system:
        text = '{"answers":[{"option_id":"A","intervals_sec":[[0.0,1.0]]}]}'
    else:  # image tasks: a fenced per-mille answer, as some real models give
        text = '```json\n{"answer_option_id":"A","bbox_xyxy_norm":[100,100,500,500]}\n```'
    return 200, completion(text), {}


def _run(workdir: Path, api_base: str, *extra: str) -> None:
    config = {
        "data_root": str(REPO / "resources" / "demo"),
        "tasks": TASKS,
        "tables": {"formats": ["csv"]},
        "models": [
            loopback_model(
                "loop-vlm-Instant", api_base, video_mode="frames", video_frames=3, concurrency=4
            )
        ],
    }
    write_config(workdir, config)
    result = run_snakemake(workdir, *extra, env={"DUALCOG_LOOPBACK_KEY": SECRET})
    assert SECRET not in result.stdout + result.stderr


def test_openai_backend_end_to_end(tmp_path: Path) -> None:
    with LoopbackServer(answer) as server:
        # Every output but the plots (4 CPU-s; they draw the metrics the checks below read,
        # from no configuration): each is searched for the key.
        _run(tmp_path, server.api_base, "--omit-from", "plots")
        first_requests = server.requests
        bodies, headers = list(server.bodies), list(server.headers)
        posted = {hashlib.sha256(raw).hexdigest() for raw in server.raw_bodies}
        # One request per sample of the three tasks, also for the two demo samples whose
        # requests are the very same (PROTOCOL §1, v2.3).
        assert first_requests == 16 * 3

        # Rerunning inference after losing the responses is served from the crash-safe cache.
        # Only the responses are rebuilt: the cache is what this run checks, and `--forcerun`
        # with `all` would redo every job downstream of them (parse to plots) for nothing read
        # below; the key check still reads every artifact of the first, whole run.
        shutil.rmtree(tmp_path / "results" / "responses")
        responses = [f"results/responses/loop-vlm-Instant/{task}.parquet" for task in TASKS]
        _run(tmp_path, server.api_base, *responses, "--forcerun", "infer_api")
        assert server.requests == first_requests

    assert all(h["authorization"] == f"Bearer {SECRET}" for h in headers)
    for body in bodies:
        assert body["model"] == "loop/vlm"
        assert body["temperature"] == 0.2 and body["max_tokens"] == 2048  # PROTOCOL §11.1
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        content = body["messages"][1]["content"]
        assert content[0]["type"] == "text"
        urls = [block["image_url"]["url"] for block in content[1:]]
        assert all(url.startswith("data:image/jpeg;base64,") for url in urls)
        if '"answers"' in body["messages"][0]["content"]:
            assert len(urls) == 3 + 1  # three sampled frames, then the reference image
            assert "timestamps: 0.00s" in content[0]["text"]
        else:
            assert len(urls) in (2, 5)  # reference + target, or reference + 4 candidates

    # The key never reaches any artifact or log.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

    # Each request's record names the bytes that arrived; the stamp digests the set (§11.5).
    lines = []
    for task in TASKS:
        frame = pd.read_parquet(tmp_path / f"results/responses/loop-vlm-Instant/{task}.parquet")
        assert set(frame.request_sha256) <= posted and frame.request_temperature.eq(0.2).all()
        lines += [
            f"{task}\t{s}\t{h}\n"
            for s, h in zip(frame.sample_id, frame.request_sha256, strict=True)
        ]
    entry = json.loads((tmp_path / "results/stamp.json").read_text())["models"]["loop-vlm-Instant"]
    digest = hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()[:16]
    assert entry["request_set"] == {"requests": 48, "digest": digest}

    responses = pd.read_parquet(tmp_path / "results/responses/loop-vlm-Instant/behavior.parquet")
    assert (responses["status"] == "ok").all()
    assert responses["prompt_tokens"].notna().all()
    run = json.loads((tmp_path / "results/parsed/loop-vlm-Instant.run.json").read_text())
    assert run["scale"] == "per_mille"
    metrics = pd.read_parquet(tmp_path / "results/metrics/metrics.parquet")
    valid = metrics[
        (metrics["metric"] == "valid_rate")
        & (metrics["parse"] == "compatible")
        & (metrics["stratum"] == "all")
    ].set_index("task")["value"]
    assert valid["landmark_position"] == 1.0  # fence + per-mille recovered for every sample
    strict = metrics[
        (metrics["metric"] == "valid_rate")
        & (metrics["parse"] == "strict")
        & (metrics["stratum"] == "all")
    ].set_index("task")["value"]
    assert strict["landmark_position"] == 0.0
    assert strict["atomic_behavior"] == strict["composite_behavior"] == 1.0
