"""Sharded inference, per-provider job caps and the api_jobs switch.

The end-to-end test runs the real workflow against the loopback server: a sharded run equals
the unsharded run row for row, and changing the shard count sends no request.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from loopback_server import LoopbackServer, Reply, completion, request_marker
from workflow_runner import REPO, loopback_model, run_snakemake, write_config

from dualcog.cluster import api_resource, provider_of, provider_resources, provider_slot
from dualcog.sharding import (
    ShardError,
    assemble_shards,
    job_labels,
    select_shard,
    shard_bounds,
)

TASKS = ["landmark_position", "landmark_visibility"]
OPENAI = "loop-vlm-Instant"
SIMULATED = "sim-clean-Instant"
KEY = {"DUALCOG_LOOPBACK_KEY": "sk-loopback-shards"}
PROFILE = str(REPO / "profiles" / "cluster-generic")


# --- the library ------------------------------------------------------------------------------


@given(st.integers(0, 500), st.integers(1, 40))
def test_shards_cover_the_rows_once_in_order_and_evenly(total: int, shards: int) -> None:
    bounds = [shard_bounds(total, i, shards) for i in range(1, shards + 1)]
    assert bounds[0][0] == 0 and bounds[-1][1] == total
    assert all(stop == start for (_, stop), (start, _) in zip(bounds, bounds[1:], strict=False))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_shard_bounds_hand_computed() -> None:
    assert [shard_bounds(10, i, 3) for i in (1, 2, 3)] == [(0, 4), (4, 7), (7, 10)]
    assert [shard_bounds(2, i, 3) for i in (1, 2, 3)] == [(0, 1), (1, 2), (2, 2)]
    with pytest.raises(ValueError, match="shard 4 of 3"):
        shard_bounds(10, 4, 3)


def test_select_shard_keeps_prompt_order() -> None:
    prompts = pa.table({"sample_id": list("abcdefg")})
    parts = [select_shard(prompts, i, 3)["sample_id"].to_pylist() for i in (1, 2, 3)]
    assert parts == [["a", "b", "c"], ["d", "e"], ["f", "g"]]


def _shard(ids: list[str]) -> pa.Table:
    return pa.table({"sample_id": ids, "raw_text": [f"answer {i}" for i in ids]})


def test_assemble_puts_rows_in_prompt_order() -> None:
    shards = [_shard(["c", "a"]), _shard(["b"])]
    table = assemble_shards(["a", "b", "c"], shards, ["s1", "s2"])
    assert table.column("sample_id").to_pylist() == ["a", "b", "c"]
    assert table.column("raw_text").to_pylist() == ["answer a", "answer b", "answer c"]


def test_assemble_refuses_shards_that_do_not_add_up() -> None:
    with pytest.raises(ShardError, match="'a' is answered twice: in s1 and s2"):
        assemble_shards(["a", "b"], [_shard(["a"]), _shard(["a", "b"])], ["s1", "s2"])
    with pytest.raises(ShardError, match="1 prompts have no response.*sample 'c'"):
        assemble_shards(["a", "b", "c"], [_shard(["a"]), _shard(["b"])], ["s1", "s2"])
    with pytest.raises(ShardError, match="not in the prompts.*'z'"):
        assemble_shards(["a"], [_shard(["a"]), _shard(["z"])], ["s1", "s2"])


def test_job_labels_name_the_task_or_its_shards() -> None:
    assert job_labels({"name": "m"}, "behavior") == ["behavior"]
    assert job_labels({"name": "m", "shards": 1}, "behavior") == ["behavior"]
    assert job_labels({"name": "m", "shards": 2}, "behavior") == [
        "behavior.shard1of2",
        "behavior.shard2of2",
    ]


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ({"backend": "openai", "api_base": "https://api.openai.com/v1"}, "openai_com"),
        ({"backend": "openai", "api_base": "https://openrouter.ai/api/v1"}, "openrouter_ai"),
        ({"backend": "openai", "api_base": "http://127.0.0.1:8000/v1"}, "127_0_0_1_8000"),
        ({"backend": "openai", "api_base": "${DASHSCOPE_BASE_URL}"}, "dashscope_base_url"),
        ({"backend": "openai", "api_base": "http://x:1/v1", "provider": "bailian"}, "bailian"),
        ({"backend": "simulated"}, None),
        ({"backend": "replay", "replay": "r.jsonl"}, None),
        ({"backend": "openai", "serve": {"model": "Qwen/Qwen3.5-4B"}}, None),
    ],
)
def test_provider_of(model: dict, provider: str | None) -> None:
    assert provider_of(model) == provider


def test_each_provider_is_one_resource_held_by_its_models_only() -> None:
    models = [
        {"name": "a", "backend": "openai", "api_base": "https://openrouter.ai/api/v1"},
        {"name": "b", "backend": "openai", "api_base": "https://openrouter.ai/api/v1"},
        {"name": "c", "backend": "openai", "api_base": "https://api.openai.com/v1"},
        {"name": "d", "backend": "oracle"},
    ]
    assert provider_resources(models) == ["api_openai_com", "api_openrouter_ai"]
    held = {m["name"]: provider_slot(m, api_resource("openrouter_ai")) for m in models}
    assert held == {"a": 1, "b": 1, "c": 0, "d": 0}


# --- the workflow -----------------------------------------------------------------------------


def answer(body: dict, count: int) -> Reply:
    """A valid answer that differs by prompt, so a misordered assembly would show."""
    digest = int(hashlib.sha256(request_marker(body).encode()).hexdigest(), 16)
    option = "ABCD"[digest % 4]
    if '"answers"' in body["messages"][0]["content"]:
        text = json.dumps({"answers": [{"option_id": option, "intervals_sec": [[0.0, 1.0]]}]})
    else:
        low = (digest >> 8) % 400 / 1000
        text = json.dumps({"answer_option_id": option, "bbox_xyxy_norm": [low, low, 0.9, 0.9]})
    return 200, completion(text), {}


def _config(
    api_base: str, shards: int | None, sharded: tuple[str, ...] = (OPENAI, SIMULATED), **extra
) -> dict:
    models = [
        loopback_model(OPENAI, api_base, video_mode="frames", video_frames=3, concurrency=2),
        {"name": SIMULATED, "backend": "simulated", "group": "open-weights", "seed": 3,
         "skill": 0.7, "quirks": []},
    ]  # fmt: skip
    if shards is not None:
        for model in models:
            if model["name"] in sharded:
                model["shards"] = shards
    return {
        "data_root": str(REPO / "resources" / "demo"),
        "tasks": TASKS,
        "tables": {"formats": ["csv"]},
        "models": models,
        **extra,
    }


def _run(workdir: Path, config: dict, *args: str) -> str:
    write_config(workdir, config)
    result = run_snakemake(workdir, *args, env=KEY)
    return result.stdout + result.stderr


def _responses(workdir: Path) -> dict[tuple[str, str], pd.DataFrame]:
    return {
        (model, task): pd.read_parquet(workdir / f"results/responses/{model}/{task}.parquet")
        for model in (OPENAI, SIMULATED)
        for task in TASKS
    }


def _cache_entries(workdir: Path) -> set[str]:
    """Every cache line of the API model, less the measured latency, as canonical JSON."""
    entries = set()
    for path in sorted((workdir / "results/cache" / OPENAI).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            entry.pop("latency_ms", None)
            entries.add(json.dumps(entry, sort_keys=True))
    return entries


def _submitted_rules(workdir: Path) -> set[str]:
    """Rules of the jobs that went through the cluster-generic queue (profiles/)."""
    logs = (workdir / ".snakemake" / "localqueue").glob("*/output.log")
    return {m for log in logs for m in re.findall(r"^(?:local)?rule (\w+):", log.read_text(), re.M)}


@pytest.mark.workflow
def test_sharded_run_equals_unsharded_and_resharding_sends_nothing(tmp_path: Path) -> None:
    target = "results/metrics/metrics.parquet"
    with LoopbackServer(answer) as server:
        first = tmp_path / "unsharded"
        _run(first, _config(server.api_base, None), target)
        sent = server.requests
        assert sent == 16 + 16  # every sample of the two request kinds once
        reference = _responses(first)
        metrics = pd.read_parquet(first / target)
        cache_bytes = {p: p.read_bytes() for p in (first / "results/cache").rglob("*.jsonl")}

        # Split the API run into 3 shards, under the cluster executor with the API-calling
        # jobs kept on this machine (api_jobs: local): everything comes from the shared cache.
        # (The simulated run, left as it was, has nothing to redo; the fresh run below splits
        # it too.)
        sharded = _config(server.api_base, 3, sharded=(OPENAI,), api_jobs="local")
        _run(first, sharded, target, "--profile", PROFILE)
        assert server.requests == sent
        assert not server.resent_after_answer
        submitted = _submitted_rules(first)
        assert {"assemble_shards", "score", "collect_metrics"} <= submitted
        assert not {"infer", "infer_api", "infer_shard"} & submitted  # they ran here
        shard_files = sorted((first / "results/responses" / OPENAI).glob("*.shard*of3.parquet"))
        assert len(shard_files) == 3 * len(TASKS)
        for key, frame in _responses(first).items():
            pd.testing.assert_frame_equal(frame, reference[key], obj=str(key))
        pd.testing.assert_frame_equal(pd.read_parquet(first / target), metrics)
        assert {p: p.read_bytes() for p in (first / "results/cache").rglob("*.jsonl")} == (
            cache_bytes
        )

        # A fresh run in 2 shards sends every request once and gets the same rows and cache.
        second = tmp_path / "sharded"
        _run(second, _config(server.api_base, 2), target)
        assert server.requests == 2 * sent
        assert set(server.per_prompt.values()) == {2}  # once per run, never twice in one
        for key, frame in _responses(second).items():
            measured = ["latency_ms"] if key[0] == OPENAI else []
            pd.testing.assert_frame_equal(
                frame.drop(columns=measured), reference[key].drop(columns=measured), obj=str(key)
            )
        assert _cache_entries(second) == _cache_entries(first)
        pd.testing.assert_frame_equal(pd.read_parquet(second / target), metrics)


def _planned(output: str) -> list[str]:
    """The rule of every job a dry run lists."""
    return re.findall(r"^(?:local)?rule (\w+):", output, flags=re.M)


@pytest.mark.workflow
def test_one_shard_is_todays_dag_and_jobs_hold_their_providers_cap(tmp_path: Path) -> None:
    api_base = "http://127.0.0.1:9/v1"  # never contacted by a dry run
    plain = _run(tmp_path / "plain", _config(api_base, None), "--dry-run", "--profile", PROFILE)
    one = _run(tmp_path / "one", _config(api_base, 1), "--dry-run", "--profile", PROFILE)
    assert sorted(_planned(plain)) == sorted(_planned(one))
    assert "infer_api" in _planned(one)
    assert not {"infer_shard", "assemble_shards"} & set(_planned(one))
    # The API runs' one job holds the profile's cap on API units (no provider cap is set);
    # the simulated run's one job none.
    assert re.findall(r"api_(?:slots|127_0_0_1_9)=\d+", plain) == ["api_slots=48"]
    assert "infer_run" in _planned(plain)


@pytest.mark.workflow
def test_a_served_model_cannot_be_sharded(tmp_path: Path) -> None:
    served = {"name": "srv-Instant", "backend": "openai", "family": "qwen_vllm", "shards": 2,
              "serve": {"model": "tiny"}}  # fmt: skip
    config = {"data_root": str(REPO / "resources" / "demo"), "tasks": TASKS, "models": [served]}
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode != 0
    assert "model srv-Instant: `shards` splits the jobs of the infer rule" in result.stdout
