"""`openai` backend against a real HTTP server on loopback, the response cache, rate limits."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import socket
import time
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow
from inference_fixtures import IMAGE_BYTES, VIDEO_BYTES
from loopback_server import LoopbackServer, Reply, completion, echo_reply

from dualcog import schemas
from dualcog.inference import (
    build_messages,
    cache_path,
    media,
    openai_backend,
    request_settings,
    run_model,
)
from dualcog.inference import cache as cache_module
from dualcog.inference.budget import JITTER_GUARD_S, RateBudget
from dualcog.inference.cache import CacheWriter, ResponseCache

SECRET = "sk-test-Zq8Xv2Lp9Rt4Wm7Nc3Bd"


def make_prompts(count: int, task: str = "behavior") -> pd.DataFrame:
    rows = [
        {
            "sample_id": f"s{i:03d}",
            "task": task,
            "request_key": f"rk{i:03d}",
            "system_text": "You are a UAV.",
            "user_text": f"prompt {i:03d}",
            "media_keys": ["aa" + "1" * 62, "bb" + "2" * 62, "aa" + "1" * 62],
            "media_kinds": ["image", "video", "frames"],
            "offered_option_ids": ["A", "B"],
        }
        for i in range(count)
    ]
    return schemas.to_table(pd.DataFrame(rows), schemas.PROMPTS).to_pandas()


def make_model(server: LoopbackServer, **overrides: object) -> dict:
    model = {
        "name": "Qwen3-VL-8B-Instant",
        "backend": "openai",
        "family": "qwen_vllm",
        "api_base": server.api_base,
        "api_key": "${DUALCOG_TEST_KEY}",
        "max_retries": 2,
        "retry_backoff_s": 0.001,
        "concurrency": 2,
    }
    model.update(overrides)
    return model


@pytest.fixture(autouse=True)
def api_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALCOG_TEST_KEY", SECRET)


def run(model: dict, prompts: pd.DataFrame, media: Path, cache: Path, progress=None):
    out = run_model(model, arrow(prompts), None, media, cache, progress).to_pandas()
    schemas.to_table(out, schemas.RESPONSES)
    assert list(out.sample_id) == list(prompts.sample_id)
    assert SECRET not in out.to_json()
    return out


def test_request_body_shape_for_an_instant_qwen_vllm_run(server, media_store, tmp_path):
    model = make_model(
        server, extra_body={"top_k": 1, "chat_template_kwargs": {"add_vision_id": True}}
    )
    out = run(model, make_prompts(2), media_store, tmp_path / "cache")
    assert list(out.status) == ["ok", "ok"]
    assert list(out.raw_text) == ['{"echo":"prompt 000"}', '{"echo":"prompt 001"}']
    assert list(out.attempts) == [1, 1] and list(out.prompt_tokens) == [11, 11]
    assert list(out.completion_tokens) == [7, 7] and list(out.finish_reason) == ["stop", "stop"]
    assert (out.backend == "openai").all() and (out.model == "Qwen3-VL-8B-Instant").all()
    assert (out.latency_ms > 0).all()

    body = sorted(server.bodies, key=lambda b: b["messages"][1]["content"][0]["text"])[0]
    assert body["model"] == "Qwen3-VL-8B"  # run name without the mode suffix
    assert body["temperature"] == 0.2 and body["max_tokens"] == 2048  # PROTOCOL §11.1
    assert body["chat_template_kwargs"] == {"enable_thinking": False, "add_vision_id": True}
    assert body["top_k"] == 1
    system, user = body["messages"]
    assert system == {"role": "system", "content": "You are a UAV."}
    assert user["role"] == "user"
    image_uri = "data:image/jpeg;base64," + base64.b64encode(IMAGE_BYTES).decode()
    video_uri = "data:video/mp4;base64," + base64.b64encode(VIDEO_BYTES).decode()
    assert user["content"] == [
        {"type": "text", "text": "prompt 000"},
        {"type": "image_url", "image_url": {"url": image_uri}},
        {"type": "video_url", "video_url": {"url": video_uri}},
        {"type": "image_url", "image_url": {"url": image_uri}},
    ]
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in server.headers)


def test_settings_from_config():
    model = {
        "name": "Qwen3-VL-8B-Instant",
        "family": "qwen_vllm",
        "api_key": "${DUALCOG_TEST_KEY}",
        "request_model": "qwen/served",
        "temperature": 0.2,
        "max_tokens": None,
    }
    settings = request_settings(model)
    assert settings.request_model == "qwen/served" and settings.temperature == 0.2
    assert settings.max_tokens is None and SECRET not in repr(settings)


@pytest.mark.parametrize(
    ("family", "mode", "expected"),
    [
        ("qwen_vllm", "Thinking", {}),
        ("dashscope", "Instant", {"enable_thinking": False}),
        ("dashscope", "Thinking", {"enable_thinking": True, "thinking_budget": 4000}),
        ("intern_s1", "Instant", {"thinking_mode": False}),
        ("glm", "Instant", {"thinking": {"type": "disabled"}}),
        ("glm", "Thinking", {}),
        ("openrouter", "Instant", {"reasoning": {"enabled": False}}),
        ("openrouter", "Thinking", {"reasoning": {"enabled": True}}),
        ("openrouter", "Reasoning", {"reasoning": {"enabled": True}}),
        ("openrouter", "Thinking-High", {"reasoning": {"enabled": True, "effort": "high"}}),
        ("internvl", "Instant", {"continue_final_message": True, "add_generation_prompt": False}),
    ],
)
def test_mode_suffix_switch_per_family(family, mode, expected):
    settings = request_settings({"name": f"M-{mode}", "backend": "openai", "family": family})
    assert settings.extra_body == expected
    assert settings.request_model == "M"


def test_internvl_instant_prefills_an_empty_think_block(media_store):
    settings = request_settings({"name": "InternVL3-Instant", "family": "internvl"})
    messages = build_messages(make_prompts(1).iloc[0].to_dict(), settings, media_store)
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert messages[-1]["content"] == "<think>\n</think>"
    thinking = request_settings(
        {"name": "InternVL3-Thinking", "family": "internvl", "thinking_system_prefix": "THINK. "}
    )
    messages = build_messages(make_prompts(1).iloc[0].to_dict(), thinking, media_store)
    text = "THINK. \n\nThen follow the task-specific instruction below.\n\nYou are a UAV."
    assert messages[0]["content"] == [{"type": "text", "text": text}] and len(messages) == 2


def test_missing_system_prompt_sends_no_system_message(server, media_store, tmp_path):
    prompts = make_prompts(2)
    prompts.loc[0, "system_text"] = None
    prompts = schemas.to_table(prompts, schemas.PROMPTS).to_pandas()
    run(make_model(server), prompts, media_store, tmp_path / "c")
    roles = {
        b["messages"][-1]["content"][0]["text"]: [m["role"] for m in b["messages"]]
        for b in server.bodies
    }
    assert roles == {"prompt 000": ["user"], "prompt 001": ["system", "user"]}


def test_empty_prompt_set(server, media_store, tmp_path):
    out = run(make_model(server), make_prompts(0), media_store, tmp_path / "c")
    assert out.empty and list(out.columns) == schemas.RESPONSES.names and server.requests == 0


def test_config_errors_name_fields_not_secrets(monkeypatch):
    with pytest.raises(ValueError, match="no `family`"):
        request_settings({"name": "M-Instant"})
    with pytest.raises(ValueError, match="unknown family"):
        request_settings({"name": "M", "family": "qwen_hf"})
    with pytest.raises(ValueError, match="thinking_system_prefix"):
        request_settings({"name": "M-Thinking", "family": "internvl"})
    monkeypatch.delenv("DUALCOG_TEST_KEY")
    with pytest.raises(ValueError, match=r"\$\{DUALCOG_TEST_KEY\}, which is not set"):
        request_settings({"name": "M", "api_key": "${DUALCOG_TEST_KEY}"})


def test_retry_after_429_then_ok(media_store, tmp_path):
    def responder(body: dict, count: int) -> Reply:
        if count == 1:
            return 429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"}
        return echo_reply(body, count)

    with LoopbackServer(responder) as server:
        out = run(make_model(server), make_prompts(3), media_store, tmp_path / "c")
    assert list(out.status) == ["ok"] * 3 and list(out.attempts) == [2] * 3
    assert server.requests == 6


def test_500_exhausts_retries_without_leaking_the_key(media_store, tmp_path):
    def responder(body: dict, count: int) -> Reply:
        # A careless proxy echoing the credential back in its error text.
        return 500, {"error": {"message": f"upstream failed for key {SECRET}"}}, {}

    with LoopbackServer(responder) as server:
        out = run(make_model(server, max_retries=2), make_prompts(2), media_store, tmp_path / "c")
    assert server.requests == 6  # 1 + 2 retries each
    assert list(out.status) == ["error", "error"]
    assert list(out.error_type) == ["http_500", "http_500"]
    assert out.raw_text.isna().all() and list(out.attempts) == [3, 3]
    assert all("upstream failed" in m and SECRET not in m for m in out.error_message)
    assert "***" in out.error_message.iloc[0]


def test_400_is_not_retried(media_store, tmp_path):
    with LoopbackServer(lambda b, n: (400, {"error": {"message": "bad image"}}, {})) as server:
        out = run(make_model(server), make_prompts(1), media_store, tmp_path / "c")
    assert server.requests == 1 and out.error_type.iloc[0] == "http_400"


def test_timeout_and_connection_errors(media_store, tmp_path):
    with LoopbackServer(lambda b, n: (200, completion("late"), {"X-Delay": "1.0"})) as server:
        model = make_model(server, timeout=0.2, max_retries=0)
        out = run(model, make_prompts(1), media_store, tmp_path / "c1")
    assert out.status.iloc[0] == "error" and out.error_type.iloc[0] == "timeout"
    assert pd.isna(out.raw_text.iloc[0])

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    model = {
        **make_model(server, max_retries=1),
        "api_base": f"http://127.0.0.1:{closed_port}/v1",
    }
    out = run(model, make_prompts(1), media_store, tmp_path / "c2")
    assert out.error_type.iloc[0] == "connection" and out.attempts.iloc[0] == 2


def test_empty_content_stays_empty_and_bad_responses_are_errors(media_store, tmp_path):
    def responder(body: dict, count: int) -> Reply:
        text = body["messages"][-1]["content"][0]["text"]
        if text == "prompt 000":
            return 200, completion(None, reasoning_content='{"answer_option_id":"A"}'), {}
        if text == "prompt 001":
            return 200, completion(""), {}
        return 200, {"id": "x", "object": "chat.completion", "choices": []}, {}

    with LoopbackServer(responder) as server:
        out = run(make_model(server), make_prompts(3), media_store, tmp_path / "c")
    assert list(out.status) == ["ok", "ok", "error"]
    assert list(out.raw_text.iloc[:2]) == ["", ""]
    # The reasoning field is kept apart, never taken as the answer.
    assert out.reasoning_text.iloc[0] == '{"answer_option_id":"A"}'
    assert pd.isna(out.reasoning_text.iloc[1])
    # No choices: a bad_response, retried like a 5xx (1 + max_retries=2 attempts).
    assert out.error_type.iloc[2] == "bad_response" and out.attempts.iloc[2] == 3
    assert server.requests == 2 + 3


def test_cache_replays_ok_rows_and_retries_errors(server, media_store, tmp_path):
    cache = tmp_path / "cache"
    prompts = make_prompts(6)
    lines: list[str] = []
    first = run(make_model(server), prompts, media_store, cache, lines.append)
    assert server.requests == 6
    assert lines[-1].startswith("Qwen3-VL-8B-Instant/behavior: 6/6 done, ok=6, errors=0")
    # Settings that do not change answers do not invalidate the cache.
    relaxed = make_model(server, concurrency=1, rpm_limit=6000, api_key="EMPTY", max_retries=0)
    second = run(relaxed, prompts, media_store, cache)
    assert server.requests == 6
    pd.testing.assert_frame_equal(first, second)
    # A setting that does (temperature) sends everything again.
    run(make_model(server, temperature=0.7), prompts, media_store, cache)
    assert server.requests == 12
    path = cache_path(cache, "Qwen3-VL-8B-Instant", "behavior")
    assert SECRET not in path.read_text()


def test_identical_requests_of_two_samples_are_two_requests(media_store, tmp_path):
    # PROTOCOL §1 (v2.3): each sample gets its own request and its own response, also when
    # two samples render to the same request; a rerun sends nothing again.
    prompts = make_prompts(3)
    prompts.loc[1, ["request_key", "user_text"]] = prompts.loc[0, ["request_key", "user_text"]]
    cache = tmp_path / "cache"

    def numbered(body: dict, count: int) -> Reply:  # count: the how-many-th of this prompt
        return 200, completion(f"answer {count}"), {}

    with LoopbackServer(numbered) as server:
        out = run(make_model(server, concurrency=1), prompts, media_store, cache)
        assert server.requests == 3
        assert server.bodies[0] == server.bodies[1]
    assert list(out.raw_text) == ["answer 1", "answer 2", "answer 1"]  # its own answer each
    path = cache_path(cache, "Qwen3-VL-8B-Instant", "behavior")
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["sample_id"] for e in entries] == ["s000", "s001", "s002"]
    with LoopbackServer(numbered) as server:
        again = run(make_model(server), prompts, media_store, cache)
        assert server.requests == 0
    pd.testing.assert_frame_equal(out, again)


def test_errors_are_not_reused(media_store, tmp_path):
    def flaky(body: dict, count: int) -> Reply:
        if body["messages"][-1]["content"][0]["text"] == "prompt 001":
            return 503, {"error": {"message": "overloaded"}}, {}
        return echo_reply(body, count)

    cache = tmp_path / "cache"
    with LoopbackServer(flaky) as server:
        out = run(make_model(server, max_retries=0), make_prompts(3), media_store, cache)
    assert list(out.status) == ["ok", "error", "ok"]
    with LoopbackServer() as server:
        out = run(make_model(server), make_prompts(3), media_store, cache)
        assert server.requests == 1 and server.bodies[0]["messages"][1]["content"][0]["text"] == (
            "prompt 001"
        )
    assert list(out.status) == ["ok"] * 3


def test_resume_after_a_crash_sends_only_the_rest(server, media_store, tmp_path, caplog):
    cache = tmp_path / "cache"
    prompts = make_prompts(8)
    model = make_model(server, concurrency=1)
    complete = run(model, prompts, media_store, cache)
    path = cache_path(cache, model["name"], "behavior")
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 8
    # Crash mid-write: three whole lines, then half of the fourth.
    path.write_bytes(b"".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    with caplog.at_level(logging.WARNING, logger="dualcog.inference.cache"):
        resumed = run(model, prompts, media_store, cache)
    assert "torn last line" in caplog.text
    assert server.requests == 8 + 5
    pd.testing.assert_frame_equal(
        complete.drop(columns=["latency_ms"]), resumed.drop(columns=["latency_ms"])
    )
    reread = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(reread) == 8 and len({entry["sample_id"] for entry in reread}) == 8
    # A third run after the resume needs nothing.
    run(model, prompts, media_store, cache)
    assert server.requests == 13


def test_media_are_read_off_the_event_loop_and_memoized_media_skip_the_thread(
    server, media_store, tmp_path, monkeypatch
):
    media.clear_media_memo()
    reads: list[bool] = []  # per medium read from disk: whether an event loop ran there
    real_path = media.media_path

    def recording_path(store: Path, key: str, kind: str) -> Path:
        try:
            asyncio.get_running_loop()
            reads.append(True)
        except RuntimeError:
            reads.append(False)
        return real_path(store, key, kind)

    hops: list[str] = []
    real_to_thread = asyncio.to_thread

    async def counting_to_thread(function, *args):
        hops.append(function.__name__)
        return await real_to_thread(function, *args)

    monkeypatch.setattr(media, "media_path", recording_path)
    monkeypatch.setattr(asyncio, "to_thread", counting_to_thread)
    cache = tmp_path / "cache"
    model = make_model(server, concurrency=1)
    # Nothing memoized: the first body is built in a thread, where its media are read; the
    # second prompt's media are memoized by then.
    run(model, make_prompts(2), media_store, cache)
    assert hops == ["body"] and len(reads) == 3 and not any(reads)
    # Every medium memoized: no file read, no thread.
    out = run(model, make_prompts(3, "visibility"), media_store, cache)
    assert hops == ["body"] and len(reads) == 3
    # Memoized media past the size bound (videos) are encoded in the thread all the same.
    monkeypatch.setattr(openai_backend, "INLINE_MEDIA_CHARS", 0)
    again = run(model, make_prompts(3, "self_position"), media_store, cache)
    assert hops == ["body"] * 4 and len(reads) == 3
    assert list(again.raw_text) == list(out.raw_text)
    assert server.bodies[2:5] == server.bodies[5:8]  # the same bytes either way
    media.clear_media_memo()


def test_the_cache_writer_appends_at_once_and_syncs_in_batches(tmp_path, monkeypatch):
    synced: list[tuple[float, int]] = []  # (when, file size) at each fsync
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append((time.monotonic(), os.fstat(fd).st_size))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(cache_module, "SYNC_INTERVAL_S", 0.2)
    path = tmp_path / "m" / "t.jsonl"
    with ResponseCache(path) as cache:
        writer = CacheWriter(cache)
        for i in range(40):
            writer.put(f"k{i}", f"s{i}", {"status": "ok", "raw_text": str(i)})
            # In the file at once: a `kill -9` from here on loses nothing.
            assert len(path.read_bytes().splitlines()) == i + 1
            time.sleep(0.015)
        closing = time.monotonic()
        writer.close()
    by_thread = [when for when, _ in synced if when < closing]
    assert by_thread  # synced while rows came in, not only at the end
    assert all(b - a >= 0.2 * 0.9 for a, b in zip(by_thread, by_thread[1:], strict=False))
    assert synced[-1][1] == path.stat().st_size  # close syncs everything written


def test_rate_budget_spaces_requests_at_the_limit():
    now = [0.0]
    # 10 requests/s once the jitter guard is added to the window.
    budget = RateBudget({"rpm_limit": 10 * (60 + JITTER_GUARD_S)}, clock=lambda: now[0])
    waits = [budget.reserve() for _ in range(4)]  # four requests arriving at once
    assert waits == pytest.approx([0.0, 0.1, 0.2, 0.3])
    now[0] = 10.0  # long idle: the bucket refills only up to its capacity (no burst)
    assert [budget.reserve() for _ in range(2)] == pytest.approx([0.0, 0.1])


def test_rate_budget_rpm_tpm_and_reserve():
    now = [0.0]
    budget = RateBudget(
        {
            "rpm_limit": 2 * (60 + JITTER_GUARD_S),
            "rate_limit_reserve_ratio": 0.5,  # 60 rpm usable: one request a second
            "tpm_limit": 100 * (60 + JITTER_GUARD_S),  # 50 usable tokens/s
            "estimated_tokens_per_request": 100,
        },
        clock=lambda: now[0],
    )
    assert budget.reserve() == 0.0
    # Second request: 1 s for the request bucket, 100 tokens at 50/s = 2 s for the tokens.
    assert budget.reserve() == pytest.approx(2.0)
    budget.record_usage(400)  # 300 tokens more than estimated: 6 s more of debt
    assert budget.reserve() == pytest.approx(2.0 + 6.0 + 2.0)
    with pytest.raises(ValueError, match="estimated_tokens_per_request"):
        RateBudget({"tpm_limit": 1000})


def test_rate_budget_is_shared_through_its_state_file(tmp_path):
    now = [0.0]
    model = {"rpm_limit": 10 * (60 + JITTER_GUARD_S), "rate_limit_window_s": 60}
    first = RateBudget(model, tmp_path / "rate.bin", clock=lambda: now[0])
    second = RateBudget(model, tmp_path / "rate.bin", clock=lambda: now[0])
    assert [first.reserve(), second.reserve(), first.reserve()] == pytest.approx([0, 0.1, 0.2])
    short = RateBudget({"rpm_limit": 10, "rate_limit_window_s": 2}, clock=lambda: 0.0)
    spacing = (2 + JITTER_GUARD_S) / 10  # 10 per 2 s window, guard included
    assert [short.reserve(), short.reserve()] == pytest.approx([0.0, spacing])
