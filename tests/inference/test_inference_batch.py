"""Batch mode of the `openai` backend against a real Batch API server on loopback
(tests/batch_server.py): same answers as the direct path, `kill -9` and resume without a second
batch, expired and failed requests retried by the next run, input files split at the limits."""

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
from batch_server import BatchServer
from loopback_server import LoopbackServer, Reply, completion, echo_reply, request_marker
from test_inference_openai import (  # noqa: F401 (api_key_env: an autouse fixture)
    SECRET,
    api_key_env,
    make_model,
    make_prompts,
    run,
)

from dualcog.inference import cache_path
from dualcog.inference.batch import RECORD_FOLDER, BatchRecord

SRC = Path(__file__).resolve().parents[2] / "src"
FAST = {"batch": True, "batch_poll_s": 0.01, "batch_poll_max_s": 0.05}


def batch_model(server: BatchServer, **overrides: object) -> dict:
    return make_model(server, **{**FAST, **overrides})  # type: ignore[arg-type]


def records(cache: Path, model: str = "Qwen3-VL-8B-Instant") -> list[Path]:
    return sorted((cache / model / RECORD_FOLDER).glob("*"))


def sent_ids(lines: list[dict]) -> list[str]:
    return sorted(line["custom_id"].partition(":")[2] for line in lines)


def test_batch_gives_the_responses_table_of_the_direct_path(media_store, tmp_path):
    prompts = make_prompts(6)
    with LoopbackServer() as direct:
        expected = run(make_model(direct), prompts, media_store, tmp_path / "direct")
    lines: list[str] = []
    with BatchServer() as server:
        got = run(batch_model(server), prompts, media_store, tmp_path / "batch", lines.append)
        assert (server.uploads, server.creates) == (1, 1)
        sent = [line["body"] for line in server.inputs[0]]
    # Every column alike but the latency, which a batch does not report per request.
    assert got["latency_ms"].isna().all()
    pd.testing.assert_frame_equal(
        got.drop(columns="latency_ms"), expected.drop(columns="latency_ms")
    )
    # The batch lines carry exactly the bodies the direct path sent.
    key = request_marker
    assert sorted(sent, key=key) == sorted(direct.bodies, key=key)
    assert any("submitted batch" in line for line in lines)
    assert any("completed: 6/6 done, 0 failed" in line for line in lines)
    assert records(tmp_path / "batch") == []  # finished: no record left
    # A rerun answers from the cache: nothing uploaded or submitted.
    with BatchServer() as again:
        rerun = run(batch_model(again), prompts, media_store, tmp_path / "batch")
        assert (again.uploads, again.creates) == (0, 0)
    pd.testing.assert_frame_equal(rerun, got)


# A child process: run_model on the prompts of `prompts.parquet`, printing the statuses.
CHILD = """
import json, sys
from collections import Counter
from pathlib import Path
from dualcog.inference import run_model
from dualcog.schemas import read_arrow
work = Path(sys.argv[1])
model = json.loads((work / "model.json").read_text())
prompts = read_arrow(work / "prompts.parquet")
out = run_model(model, prompts, None, work / "media", work / "cache", print)
print(json.dumps(dict(Counter(out["status"].to_pylist()))))
"""


def child(work: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(work)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(condition, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


STEP = """
import signal, sys
from types import SimpleNamespace
from dualcog.runtime import run_step
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's foreground job
job = SimpleNamespace(log=[sys.argv[1] + "/job.log"], rule="infer")
run_step(job, lambda sm: exec(sys.argv[2]))
"""


@pytest.mark.integration
def test_ctrl_c_while_a_batch_never_ends_says_in_one_line_what_is_pending(media_store, tmp_path):
    make_prompts(3).to_parquet(tmp_path / "prompts.parquet")
    with BatchServer() as server:
        (tmp_path / "model.json").write_text(json.dumps(batch_model(server, api_key="EMPTY")))
        server.hold.set()  # the batch never ends
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        process = subprocess.Popen(
            [sys.executable, "-c", STEP, str(tmp_path), CHILD],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_for(lambda: server.retrieves >= 2, "the child to poll its batch")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 1 and len(lines) == 1, err.decode()
    assert f"interrupted: batch {server.order[0]} (3 requests) still pending" in lines[0]
    assert "run the same command again to collect the answers" in lines[0]
    assert len(records(tmp_path / "cache")) == 1


@pytest.mark.integration
def test_kill_9_while_pending_resumes_the_same_batch(media_store, tmp_path):
    prompts = make_prompts(8)
    prompts.to_parquet(tmp_path / "prompts.parquet")
    with BatchServer() as server:
        (tmp_path / "model.json").write_text(json.dumps(batch_model(server, api_key="EMPTY")))
        server.hold.set()  # the batch stays in progress
        process = child(tmp_path)
        wait_for(lambda: server.retrieves >= 2, "the child to poll its batch")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        # The record holds the batch id, durable before the first poll.
        (path,) = records(tmp_path / "cache")
        head, batch_id = BatchRecord.read(path)
        assert head is not None and batch_id == server.order[0]
        assert not cache_path(tmp_path / "cache", "Qwen3-VL-8B-Instant", "behavior").read_text()

        polls = server.retrieves
        process = child(tmp_path)
        wait_for(lambda: server.retrieves > polls, "the rerun to poll the same batch")
        server.hold.clear()
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()[-2000:]
        assert (server.uploads, server.creates) == (1, 1)  # never submitted twice
        assert json.loads(out.decode().strip().splitlines()[-1]) == {"ok": 8}
        assert f"resuming batch {batch_id} of 8 requests" in out.decode()
        assert f"batch {batch_id}: in_progress, 0/8 done, 0 failed" in out.decode()
    lines = cache_path(tmp_path / "cache", "Qwen3-VL-8B-Instant", "behavior").read_text()
    assert len(lines.splitlines()) == 8
    assert records(tmp_path / "cache") == []


@pytest.mark.integration
def test_a_second_run_at_once_waits_for_the_batch_and_takes_its_answers(
    media_store, tmp_path, monkeypatch
):
    prompts = make_prompts(5)
    prompts.to_parquet(tmp_path / "prompts.parquet")
    with BatchServer() as server:
        model = batch_model(server, api_key="EMPTY")
        (tmp_path / "model.json").write_text(json.dumps(model))
        server.hold.set()
        process = child(tmp_path)
        wait_for(lambda: server.retrieves >= 2, "the child to poll its batch")
        take = BatchRecord.take

        def take_then_release(path: Path, blocking: bool = True) -> BatchRecord | None:
            # The child's batch may end only once this run has found its record.
            assert blocking
            threading.Timer(0.2, server.hold.clear).start()
            return take(path, blocking)

        monkeypatch.setattr(BatchRecord, "take", take_then_release)
        out = run(model, prompts, media_store, tmp_path / "cache")
        assert process.wait(timeout=60) == 0
        assert (out.status == "ok").all() and (server.uploads, server.creates) == (1, 1)
    assert records(tmp_path / "cache") == []


def test_a_failed_download_is_retried_at_the_next_poll(media_store, tmp_path):
    with BatchServer() as server:
        server.content_failures = 3  # the SDK's 2 tries of the first download, then one
        out = run(batch_model(server, max_retries=1), make_prompts(2), media_store, tmp_path)
        assert (out.status == "ok").all() and server.creates == 1
        assert server.content_failures == 0
    assert records(tmp_path) == []


def test_files_left_by_a_killed_process_are_removed_not_those_in_use(media_store, tmp_path):
    import fcntl

    folder = tmp_path / "Qwen3-VL-8B-Instant" / RECORD_FOLDER
    folder.mkdir(parents=True)
    for name in ("behavior.dead.input", "behavior.dead.draft", "behavior.live.input"):
        (folder / name).write_bytes(b"{}\n")
    with open(folder / "behavior.live.input", "rb") as live, BatchServer() as server:
        fcntl.flock(live.fileno(), fcntl.LOCK_EX)  # a live process still uploading it
        out = run(batch_model(server), make_prompts(2), media_store, tmp_path)
    assert (out.status == "ok").all()
    assert [path.name for path in records(tmp_path)] == ["behavior.live.input"]


def test_unreadable_output_lines_are_skipped_with_a_warning(media_store, tmp_path, caplog):
    with BatchServer() as server:
        server.junk = [b"not json \xff", b'{"custom_id": ["a"]}', b'{"custom_id": "other"}']
        out = run(batch_model(server), make_prompts(2), media_store, tmp_path)
    assert (out.status == "ok").all()
    warned = [r.getMessage() for r in caplog.records if "unreadable" in r.getMessage()]
    assert [line.split(" output_file_id ")[1] for line in warned] == [
        "line 3 unreadable, skipped", "line 4 unreadable, skipped", "line 5 unreadable, skipped"
    ]  # fmt: skip


def test_duplicate_and_conflicting_result_lines_never_drop_an_ok_answer(
    media_store, tmp_path, caplog
):
    """s0 answered twice (the first ok line stands), s1 answered and also in the error file
    (the answer stands, not paid for again), s2 failed twice (an error row): each duplicate
    is a warning naming both lines, and the batch's summary counts them."""

    def rewrite(output: list, errors: list) -> tuple[list, list]:
        first, second = output[0], output[1]
        other = json.loads(json.dumps(first))
        other["response"]["body"]["choices"][0]["message"]["content"] = "a later answer"
        failed = {"custom_id": second["custom_id"], "response": None,
                  "error": {"code": "server_error", "message": "lost"}}  # fmt: skip
        failed2 = {**failed, "custom_id": output[2]["custom_id"]}
        return [first, other, second], [failed, failed2, failed2]

    with BatchServer() as server:
        server.rewrite = rewrite
        model = batch_model(server)
        out = run(model, make_prompts(3), media_store, tmp_path)
        assert list(out.status) == ["ok", "ok", "error"]
        assert "a later answer" not in out.raw_text[0] and "lost" in out.error_message[2]
        warned = [r.getMessage() for r in caplog.records if " again at " in r.getMessage()]
        assert [w.split(": custom_id ")[1].split(" ", 1)[1] for w in warned] == [
            "again at output_file_id line 2 (first at output_file_id line 1); kept: "
            "output_file_id line 1",
            "again at error_file_id line 1 (first at output_file_id line 3); kept: "
            "output_file_id line 3",
            "again at error_file_id line 3 (first at error_file_id line 2); kept: "
            "error_file_id line 2",
        ]
        assert any("3 duplicate result lines" in r.getMessage() for r in caplog.records)
        server.rewrite = None
        again = run(model, make_prompts(3), media_store, tmp_path)  # only s2 goes again
        assert list(again.status) == ["ok", "ok", "ok"]
        assert sent_ids(server.inputs[-1]) == ["s002"]


def test_a_kill_between_create_and_record_finds_the_created_batch(
    media_store, tmp_path, monkeypatch
):
    prompts = make_prompts(4)

    def killed(self: BatchRecord, batch_id: str) -> None:
        raise KeyboardInterrupt  # as if killed right after `batches.create` answered

    with BatchServer() as server:
        server.hold.set()
        with monkeypatch.context() as patched:
            patched.setattr(BatchRecord, "note_batch", killed)
            with pytest.raises(KeyboardInterrupt):
                run(batch_model(server), prompts, media_store, tmp_path)
        (path,) = records(tmp_path)
        assert BatchRecord.read(path)[1] is None  # the input file id only
        assert server.creates == 1
        server.hold.clear()
        out = run(batch_model(server), prompts, media_store, tmp_path)
        assert (out.status == "ok").all()
        assert (server.uploads, server.creates) == (1, 1) and server.lists == 1


def test_a_record_without_a_created_batch_is_submitted_on_resume(
    media_store, tmp_path, monkeypatch
):
    from dualcog.inference.client import BatchClient

    def killed(self: BatchClient, input_file_id: str, metadata: dict) -> str:
        raise KeyboardInterrupt  # killed after the record, before `batches.create`

    with BatchServer() as server:
        with monkeypatch.context() as patched:
            patched.setattr(BatchClient, "submit", killed)
            with pytest.raises(KeyboardInterrupt):
                run(batch_model(server), make_prompts(3), media_store, tmp_path)
        assert server.creates == 0 and len(records(tmp_path)) == 1
        out = run(batch_model(server), make_prompts(3), media_store, tmp_path)
        assert (out.status == "ok").all()
        # The recorded file was used: no second upload.
        assert (server.uploads, server.creates) == (1, 1)
    assert records(tmp_path) == []


def test_expired_and_failed_requests_are_error_rows_then_only_they_are_resent(
    media_store, tmp_path
):
    prompts = make_prompts(8)

    def mixed(body: dict, count: int) -> Reply:
        text = body["messages"][-1]["content"][0]["text"]
        if text == "prompt 002" and count == 1:
            return 503, {"error": {"message": "overloaded"}}, {}
        if text == "prompt 003":
            return 400, {"error": {"message": f"refused, key {SECRET}"}}, {}
        if text == "prompt 004" and count == 1:
            return 200, {"choices": []}, {}
        return echo_reply(body, count)

    with BatchServer(mixed) as server:
        expired = {request_marker(line) for line in _bodies(prompts, media_store, [5, 6])}
        server.expire = expired
        out = run(batch_model(server), prompts, media_store, tmp_path / "cache")
        kinds = out.error_type.astype(object).where(out.error_type.notna(), None)
        by_id = dict(zip(out.sample_id, kinds, strict=True))
        assert by_id == {
            "s000": None, "s001": None, "s002": "http_503", "s003": "http_400",
            "s004": "bad_response", "s005": "timeout", "s006": "timeout", "s007": None,
        }  # fmt: skip
        assert list(out.status == "ok") == [by_id[s] is None for s in out.sample_id]
        messages = dict(zip(out.sample_id, out.error_message, strict=True))
        assert "refused, key ***" in messages["s003"]
        assert "batch_expired" in messages["s005"] and "batch_" in messages["s002"]
        cache_text = cache_path(tmp_path / "cache", "Qwen3-VL-8B-Instant", "behavior").read_text()
        assert SECRET not in cache_text

        # The next run sends only the failed requests, in a new batch.
        server.expire = set()
        again = run(batch_model(server), prompts, media_store, tmp_path / "cache")
        assert sent_ids(server.inputs[1]) == ["s002", "s003", "s004", "s005", "s006"]
        assert (server.uploads, server.creates) == (2, 2)
        assert list(again.status) == ["ok"] * 3 + ["error"] + ["ok"] * 4
        assert list(again.error_type)[3] == "http_400"  # a refusal stays one


def _bodies(prompts: pd.DataFrame, media: Path, indices: list[int]) -> list[dict]:
    from dualcog.inference.request import request_body, request_settings

    settings = request_settings({"name": "Qwen3-VL-8B-Instant", "family": "qwen_vllm"})
    rows = prompts.to_dict(orient="records")
    return [request_body(rows[i], settings, media) for i in indices]


def test_a_failed_batch_makes_transient_error_rows_naming_the_reason(media_store, tmp_path):
    prompts = make_prompts(3)
    with BatchServer() as server:
        server.final_status = "failed"
        server.errors = {"data": [{"code": "invalid_request", "message": "bad line", "line": 2}]}
        out = run(batch_model(server), prompts, media_store, tmp_path)
        assert (out.error_type == "bad_response").all()
        assert out.error_message.str.contains("ended failed").all()
        assert out.error_message.str.contains(r"invalid_request: bad line \(line 2\)").all()
        server.final_status = None
        again = run(batch_model(server), prompts, media_store, tmp_path)
        assert (again.status == "ok").all() and server.creates == 2


def test_input_files_are_split_at_the_byte_and_request_limits(media_store, tmp_path):
    prompts = make_prompts(7)
    with BatchServer() as server:
        out = run(batch_model(server, batch_max_requests=3), prompts, media_store, tmp_path / "a")
        assert [len(lines) for lines in server.inputs] == [3, 3, 1]
        assert (out.status == "ok").all() and server.creates == 3
    line_bytes = max(len(data) for data in _raw_lines(server))
    limit = int(line_bytes * 2.5)  # two lines per file, never three
    with BatchServer() as server:
        out = run(batch_model(server, batch_max_bytes=limit), prompts, media_store, tmp_path / "b")
        sizes = [len(data) for data in _raw_files(server)]
        assert len(sizes) == 4 and all(size <= limit for size in sizes), (sizes, limit)
        assert sum(len(lines) for lines in server.inputs) == 7 and server.creates == 4
        assert (out.status == "ok").all()
        assert sorted(out.raw_text) == sorted(f'{{"echo":"prompt {i:03d}"}}' for i in range(7))


def _raw_files(server: BatchServer) -> list[bytes]:
    inputs = {file_id for file_id in server.files if any(
        batch["input_file_id"] == file_id for batch in server.batches.values()
    )}  # fmt: skip
    return [server.files[file_id] for file_id in sorted(inputs)]


def _raw_lines(server: BatchServer) -> list[bytes]:
    return [line + b"\n" for data in _raw_files(server) for line in data.splitlines()]


def test_a_request_larger_than_a_batch_file_is_a_permanent_error_row(media_store, tmp_path):
    prompts = make_prompts(3)
    prompts.loc[1, "user_text"] = "x" * 4000
    with BatchServer() as server:
        out = run(batch_model(server, batch_max_bytes=2048), prompts, media_store, tmp_path)
        assert list(out.status) == ["ok", "error", "ok"]
        assert out.error_type[1] == "too_large" and "batch_max_bytes" in out.error_message[1]
        assert sent_ids(server.inputs[0]) == ["s000", "s002"]


def test_an_unreachable_batch_server_gives_connection_error_rows(media_store, tmp_path):
    prompts = make_prompts(2)
    with BatchServer() as server:
        server.hold.set()
        model = batch_model(server, max_retries=0)
        base = server.api_base
    # The server is gone now: every request of the job fails, classified as a connection.
    model["api_base"] = base
    out = run(model, prompts, media_store, tmp_path)
    assert (out.error_type == "connection").all()
    assert out.error_message.str.contains("uploading").all()
    assert records(tmp_path) == []  # nothing was uploaded, so nothing to resume


def test_failed_polls_give_error_rows_and_the_next_run_resumes_the_batch(media_store, tmp_path):
    prompts = make_prompts(3)
    with BatchServer() as server:
        server.retrieve_status = 500
        out = run(batch_model(server, max_retries=1), prompts, media_store, tmp_path)
        assert (out.error_type == "http_500").all()
        assert out.error_message.str.contains("polling batch batch_").all()
        # The key the server echoed is scrubbed.
        assert out.error_message.str.contains("key ***", regex=False).all()
        assert len(records(tmp_path)) == 1  # kept: the batch goes on at the provider
        server.retrieve_status = None
        again = run(batch_model(server), prompts, media_store, tmp_path)
        assert (again.status == "ok").all()
        assert (server.uploads, server.creates) == (1, 1)
    assert records(tmp_path) == []


def test_polls_slow_down_while_nothing_changes(media_store, tmp_path, monkeypatch):
    import types

    import dualcog.inference.batch as batch_module

    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)
        if len(delays) == 6:
            server.hold.clear()

    clock = types.SimpleNamespace(monotonic=time.monotonic, time=time.time, sleep=sleep)
    monkeypatch.setattr(batch_module, "time", clock)
    with BatchServer() as server:
        server.hold.set()
        out = run(batch_model(server), make_prompts(2), media_store, tmp_path)
    assert (out.status == "ok").all()
    assert delays == pytest.approx([0.01, 0.015, 0.0225, 0.03375, 0.05, 0.05])


def test_reasoning_and_usage_come_through_a_batch(media_store, tmp_path):
    def thinking(body: dict, count: int) -> Reply:
        reply = completion("{}", reasoning_content="because")
        reply["usage"]["completion_tokens_details"] = {"reasoning_tokens": 5}
        return 200, reply, {}

    with BatchServer(thinking) as server:
        out = run(batch_model(server), make_prompts(2), media_store, tmp_path)
    assert list(out.reasoning_text) == ["because", "because"]
    assert list(out.reasoning_tokens) == [5, 5] and list(out.prompt_tokens) == [11, 11]
    assert list(out.attempts) == [1, 1] and list(out.finish_reason) == ["stop", "stop"]


def test_a_token_limit_decides_what_goes_into_a_batch_and_a_raised_one_sends_the_rest(
    media_store, tmp_path
):
    # Each fake reply reports 11 + 7 = 18 tokens; 18 per request estimated: 3 fit in 60.
    prompts = make_prompts(6)
    cache = tmp_path / "cache"
    with BatchServer() as server:
        model = batch_model(server, token_limit=60, estimated_tokens_per_request=18)
        lines: list[str] = []
        out = run(model, prompts, media_store, cache, lines.append)
        assert (server.uploads, server.creates) == (1, 1)
        assert len(server.inputs[0]) == 3  # the batch holds only what fits
        assert list(out.status) == ["ok"] * 3 + ["error"] * 3
        assert set(out.error_type.dropna()) == {"budget_exhausted"}
        # The fourth would pass the limit with the three in flight (none has settled yet).
        assert any(
            "the next request could pass its limit (token_limit 60 tokens: 0 tokens spent)" in line
            for line in lines
        )
        # Never sent, so not cached: the cache holds the 3 answers alone.
        assert len(cache_path(cache, model["name"], "behavior").read_text().splitlines()) == 3
        resumed = run({**model, "token_limit": 200}, prompts, media_store, cache)
        assert list(resumed.status) == ["ok"] * 6
        assert (server.uploads, server.creates) == (2, 2)
        assert len(server.inputs[1]) == 3  # the rest, nothing answered sent again
        assert sent_ids(server.inputs[0] + server.inputs[1]) == sorted(prompts.sample_id)


def test_a_resumed_batch_holds_its_estimate_against_new_requests(tmp_path):
    from dualcog.inference.limits import Spend, SpendLimit

    model = {"name": "m", "token_limit": 100, "estimated_tokens_per_request": 20}
    limit = SpendLimit(model, tmp_path / "m", "behavior")
    try:
        assert limit.hold(4) == Spend(80, 0)  # a batch of 4 already sent
        assert limit.try_reserve() == Spend(20, 0)  # 80 + 20 <= 100
        assert limit.try_reserve() is None  # only the requests in flight stand in the way
        limit.settle(Spend(80, 0))  # the batch's answers are in the cache (none here)
        assert limit.try_reserve() == Spend(20, 0)
    finally:
        limit.close()


def test_batch_with_a_limit_needs_an_estimate_at_validation():
    from dualcog.config import validate_config
    from dualcog.errors import ConfigError

    model = {"name": "m", "backend": "openai", "api_base": "http://x", "batch": True}
    config = {"data_root": "data", "models": [{**model, "token_limit": 1000}]}
    with pytest.raises(ConfigError, match=r"batch with token_limit needs estimated_tokens_per"):
        validate_config(config)
    config["models"][0]["estimated_tokens_per_request"] = 500
    validate_config(config)
