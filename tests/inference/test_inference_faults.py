"""Fault injection against a real HTTP server on loopback, for each transport of the request
engine (transports.py: `openai`, and the toy API added by docs/extending.md's recipe): every
fault ends in an answer or an error row of the right kind, never an exception; nothing answered
is sent twice; keys never reach a row, the cache or a log."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest
from loopback_server import LoopbackServer, Reply, completion
from test_inference_openai import SECRET, make_model, make_prompts, run
from transports import TRANSPORTS, Wire

from dualcog import schemas
from dualcog.inference import cache_path
from dualcog.inference.cache import ResponseCache
from dualcog.inference.outcome import assess, is_transient

pytestmark = pytest.mark.usefixtures("api_key_env", "toy_registered")


@pytest.fixture
def api_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALCOG_TEST_KEY", SECRET)


def first_fails(wire: Wire, reply: Reply, times: int = 1):
    """A responder failing each prompt's first `times` attempts with `reply`, then answering."""

    def responder(body: dict, count: int) -> Reply:
        return reply if count <= times else wire.api.echo(body, count)

    return responder


FAULTS = [
    pytest.param(name, reply, id=f"{name}-{fault}")
    for name, wire in TRANSPORTS.items()
    for fault, reply in [
        *wire.transient.items(),
        *((fault, (200, body, {})) for fault, body in wire.bad_200.items()),
    ]
]


@pytest.mark.parametrize(("transport", "reply"), FAULTS)
def test_transient_faults_are_retried_to_an_answer(transport, reply, media_store, tmp_path):
    wire = TRANSPORTS[transport]
    with wire.server(first_fails(wire, reply, times=2)) as server:
        out = run(wire.model(server, max_retries=2), make_prompts(3), media_store, tmp_path / "c")
    assert list(out.status) == ["ok"] * 3 and list(out.attempts) == [3] * 3
    assert list(out.raw_text) == [f'{{"echo":"prompt {i:03d}"}}' for i in range(3)]
    assert list(out.backend) == [transport] * 3
    assert server.requests == 9 and not server.resent_after_answer


BAD_200 = [
    pytest.param(name, fault, id=f"{name}-{fault}")
    for name, wire in TRANSPORTS.items()
    for fault in sorted(wire.bad_200)
]


@pytest.mark.parametrize(("transport", "fault"), BAD_200)
def test_bad_200_that_never_heals_is_a_transient_bad_response_row(
    transport, fault, media_store, tmp_path
):
    wire = TRANSPORTS[transport]
    with wire.server(lambda b, n: (200, wire.bad_200[fault], {})) as server:
        out = run(wire.model(server, max_retries=1), make_prompts(2), media_store, tmp_path / "c")
    assert list(out.status) == ["error", "error"]
    assert list(out.error_type) == ["bad_response"] * 2 and list(out.attempts) == [2, 2]
    assert out.raw_text.isna().all() and server.requests == 4
    outcome = assess({"name": "m"}, "behavior", out.status, out.error_type)
    assert outcome.failed and outcome.transient == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_retry_after_is_honoured(transport, media_store, tmp_path):
    wire = TRANSPORTS[transport]
    with wire.server(first_fails(wire, wire.slow_down(0.4))) as server:
        model = wire.model(server, max_retries=1, retry_backoff_s=0.001, concurrency=1)
        out = run(model, make_prompts(1), media_store, tmp_path / "c")
    assert out.status.iloc[0] == "ok" and out.attempts.iloc[0] == 2
    assert server.arrivals[1] - server.arrivals[0] >= 0.4


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_timeouts_then_answer(transport, media_store, tmp_path):
    wire = TRANSPORTS[transport]

    def responder(body: dict, count: int) -> Reply:
        if count == 1:
            return 200, wire.api.answer("late"), {"X-Delay": "0.6"}
        return wire.api.echo(body, count)

    with wire.server(responder) as server:
        model = wire.model(server, timeout=0.2, max_retries=1)
        out = run(model, make_prompts(2), media_store, tmp_path / "c")
    assert list(out.status) == ["ok", "ok"] and list(out.attempts) == [2, 2]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refusal_echoing_the_key_is_a_permanent_error_without_the_key(
    transport, media_store, tmp_path, caplog
):
    wire = TRANSPORTS[transport]
    refusal = wire.refusal(f"Incorrect API key provided: {SECRET}")
    cache = tmp_path / "c"
    with caplog.at_level(logging.DEBUG), wire.server(lambda b, n: refusal) as server:
        out = run(wire.model(server, max_retries=3), make_prompts(2), media_store, cache)
    assert server.requests == 2  # permanent: not retried
    assert list(out.error_type) == [wire.refusal_type] * 2
    assert all("Incorrect API key" in m and SECRET not in m for m in out.error_message)
    assert SECRET not in caplog.text
    assert SECRET not in cache_path(cache, "Qwen3-VL-8B-Instant", "behavior").read_text()
    outcome = assess({"name": "m"}, "behavior", out.status, out.error_type)
    assert not outcome.failed and outcome.permanent == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_fault_mix_ends_in_answers_and_a_rerun_sends_only_what_failed(
    transport, media_store, tmp_path
):
    """Eight prompts, each with its own faults: slowed down, failing twice in a row, unusable
    replies, a timeout, a permanent refusal, and a fault past the retries; the job fails for
    the last one, and the rerun sends that and the refused prompt only."""
    wire = TRANSPORTS[transport]
    transient = list(wire.transient.values())
    bad = (200, next(iter(wire.bad_200.values())), {})
    late = (200, wire.api.answer("late"), {"X-Delay": "0.6"})
    faults = {  # prompt -> the replies of its first attempts; then it is answered
        0: [],
        1: [wire.slow_down(0)],
        2: transient[:2],
        3: [bad, transient[-1]],
        4: [late],
        5: [wire.refusal("no")] * 9,
        6: [transient[0]] * 3,  # one more failure than max_retries allows
        7: [wire.slow_down(0), bad],
    }

    def responder(body: dict, count: int) -> Reply:
        index = int(wire.api.prompt_text(body).split()[-1])
        return faults[index][count - 1] if count <= len(faults[index]) else wire.api.echo(body, 0)

    cache = tmp_path / "c"
    with wire.server(responder) as server:
        model = wire.model(server, max_retries=2, timeout=0.3, concurrency=3)
        out = run(model, make_prompts(8), media_store, cache)
        assert server.requests == 1 + 2 + 3 + 3 + 2 + 1 + 3 + 3
        assert list(out.status) == ["ok"] * 5 + ["error"] * 2 + ["ok"]
        assert list(out.attempts) == [1, 2, 3, 3, 2, 1, 3, 3]
        assert out.error_type[5] == wire.refusal_type and is_transient(out.error_type[6])
        outcome = assess(model, "behavior", out.status, out.error_type)
        assert outcome.failed and (outcome.transient, outcome.permanent) == (1, 1)
        again = run(model, make_prompts(8), media_store, cache)
        # Prompt 6 is answered now (its fourth attempt), prompt 5 refused once more.
        assert server.requests == 18 + 2 and not server.resent_after_answer
    assert list(again.status) == ["ok"] * 5 + ["error"] + ["ok"] * 2
    assert list(again.raw_text[again.status == "ok"]) == [
        f'{{"echo":"prompt {i:03d}"}}' for i in (0, 1, 2, 3, 4, 6, 7)
    ]


def test_lone_surrogates_are_stored_escaped_and_parse(media_store, tmp_path):
    def responder(body: dict, count: int) -> Reply:
        text = body["messages"][-1]["content"][0]["text"]
        if text == "prompt 000":
            # The server's JSON holds a lone surrogate escape in the content itself.
            return 200, b'{"choices":[{"message":{"content":"A\\ud800"}}]}', {}
        return 200, completion('{"answer_option_id":"B\\udc00"}'), {}

    cache = tmp_path / "c"
    with LoopbackServer(responder) as server:
        out = run(make_model(server), make_prompts(2), media_store, cache)
        schemas.write_table(out, schemas.RESPONSES, tmp_path / "r.parquet")  # valid UTF-8
    assert list(out.status) == ["ok", "ok"]
    assert out.raw_text.iloc[0] == "A\\ud800"  # the escape, as the server wrote it
    assert json.loads(out.raw_text.iloc[1]) == {"answer_option_id": "B\udc00"}
    # The cache is ASCII and a rerun reads the same rows back without sending.
    path = cache_path(cache, "Qwen3-VL-8B-Instant", "behavior")
    assert path.read_bytes().isascii() and len(path.read_bytes().splitlines()) == 2
    with LoopbackServer(responder) as again:
        again_out = run(make_model(again), make_prompts(2), media_store, cache)
        assert again.requests == 0
    pd.testing.assert_frame_equal(out, again_out)


def test_unreadable_cache_lines_are_skipped_with_file_and_line(
    server, media_store, tmp_path, caplog
):
    cache = tmp_path / "c"
    run(make_model(server), make_prompts(3), media_store, cache)
    path = cache_path(cache, "Qwen3-VL-8B-Instant", "behavior")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b'{"cache_key": "\xff\xfe broken"}\n' + b"not json\n" + lines[2])
    with caplog.at_level(logging.WARNING, logger="dualcog.inference.cache"):
        out = run(make_model(server), make_prompts(3), media_store, cache)
    assert f"{path}:2: unreadable line skipped" in caplog.text
    assert f"{path}:3: unreadable line skipped" in caplog.text
    assert server.requests == 3 + 1  # only the sample whose line was lost
    assert list(out.status) == ["ok"] * 3


def test_an_append_that_cannot_encode_never_empties_the_cache(tmp_path):
    path = tmp_path / "m" / "t.jsonl"
    with ResponseCache(path) as cache:
        cache.append("k1", "s1", {"status": "ok", "raw_text": "fine"})
        with pytest.raises(ValueError):
            cache.append("k2", "s2", {"status": "ok", "raw_text": "x", "latency_ms": float("nan")})
        cache.append("k3", "s3", {"status": "ok", "raw_text": "A\ud800"})  # lossless escape
    with ResponseCache(path) as reread:
        assert set(reread.ok) == {("k1", "s1"), ("k3", "s3")}
        assert reread.get("k3", "s3")["raw_text"] == "A\ud800"


def test_error_kinds():
    transient = ["timeout", "connection", "bad_response", "http_408", "http_409", "http_429"]
    assert all(is_transient(kind) for kind in [*transient, "http_500", "http_503", "http_599"])
    permanent = ["http_400", "http_401", "http_403", "http_404", "http_422", None, "x"]
    assert not any(is_transient(kind) for kind in permanent)


def test_max_error_rate_accepts_a_few_transient_failures():
    statuses = ["ok"] * 18 + ["error"] * 2
    kinds = [None] * 18 + ["http_503", "timeout"]
    assert assess({"name": "m"}, "t", statuses, kinds).failed
    accepted = assess({"name": "m", "max_error_rate": 0.1}, "t", statuses, kinds)
    assert not accepted.failed and accepted.allowed == 2
    assert assess({"name": "m", "max_error_rate": 0.05}, "t", statuses, kinds).failed
    lines = assess({"name": "m"}, "t", statuses, kinds).lines()
    assert "http_503: 1, timeout: 1" in lines[0] and "the job failed" in lines[1]
    assert "run the same snakemake command again" in lines[1]


def test_progress_lines_show_counts_rate_and_eta_every_few_seconds():
    from dualcog.inference.progress import ProgressReporter

    now = [0.0]
    lines: list[str] = []
    reporter = ProgressReporter(
        "m/behavior", 100, lines.append, every_fraction=1.0, every_s=5.0, clock=lambda: now[0]
    )
    for _ in range(10):
        reporter.add("ok", cached=True)
    now[0] = 2.0
    for _ in range(20):
        reporter.add("ok")
    assert lines == []  # neither 5 s nor the whole run yet
    now[0] = 5.0
    reporter.add("error")
    assert lines == [
        "m/behavior: 31/100 done, ok=30, errors=1, cached=10, 4.20 req/s, ETA 16s, elapsed 5s"
    ]
    now[0] = 9.0
    reporter.tick()
    assert len(lines) == 1  # 4 s since the last line
    now[0] = 10.5
    reporter.tick()  # a timer reports while requests are slow to come back
    assert len(lines) == 2 and lines[1].startswith("m/behavior: 31/100 done")
    for _ in range(69):
        reporter.add("ok")
    reporter.finish()
    assert lines[-1].startswith("m/behavior: 100/100 done, ok=99, errors=1, cached=10")
    assert "ETA 0s" in lines[-1] and all(line.count("m/behavior") == 1 for line in lines)


def test_a_filesystem_without_flock_stops_with_a_clear_error(tmp_path, monkeypatch):
    import errno
    import fcntl

    from dualcog.errors import DualCogError

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(DualCogError, match=r"flock\) do not work on this filesystem.*cache_dir"):
        ResponseCache(tmp_path / "m" / "t.jsonl")


def test_reasoning_text_and_tokens_are_kept_apart_from_the_answer(media_store, tmp_path):
    def responder(body: dict, count: int) -> Reply:
        text = body["messages"][-1]["content"][0]["text"]
        if text == "prompt 000":  # vLLM / DeepSeek style
            payload = completion('{"answer_option_id":"B"}', reasoning_content="I think A.")
            payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": 42}
        else:  # OpenRouter style, no token details
            payload = completion('{"answer_option_id":"C"}', reasoning="Maybe D.")
        return 200, payload, {}

    with LoopbackServer(responder) as server:
        out = run(make_model(server), make_prompts(2), media_store, tmp_path / "c")
    assert list(out.raw_text) == ['{"answer_option_id":"B"}', '{"answer_option_id":"C"}']
    assert list(out.reasoning_text) == ["I think A.", "Maybe D."]
    assert out.reasoning_tokens.iloc[0] == 42 and pd.isna(out.reasoning_tokens.iloc[1])
    assert schemas.RESPONSES.field("reasoning_text").type == "string"
