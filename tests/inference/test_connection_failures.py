"""A model whose `api_base` is a closed port: what fails is named, with the URL, in the
failure's message, the job log and the run summary ("connection refused", never the SDK's
`ConnectTimeout`). A real closed port on loopback: bound, its number read, then closed."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from workflow_runner import REPO, run_snakemake, write_config

from dualcog.inference.client import AttemptFailed, ChatClient
from dualcog.inference.outcome import assess

MODEL = "closed-port-Instant"
TASK = "self_position"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nobody listens once it is closed


def test_a_refused_connection_is_named_with_its_url() -> None:
    port = closed_port()

    async def send() -> AttemptFailed:
        client = ChatClient(f"http://127.0.0.1:{port}/v1", "key", 5.0, 2)
        try:
            await client.send(b"{}")
        except AttemptFailed as failed:
            return failed
        finally:
            await client.close()
        raise AssertionError("a closed port answered")

    failed = asyncio.run(send())
    assert failed.error_type == "connection" and failed.retryable
    message = str(failed)
    assert message.startswith(f"connection refused: POST http://127.0.0.1:{port}/v1/chat/")
    assert "ConnectTimeout" not in message


def test_the_outcome_quotes_each_error_types_most_frequent_message() -> None:
    refused = "connection refused: POST http://127.0.0.1:9/v1/chat/completions (detail)"
    outcome = assess(
        {"name": "m"},
        "t",
        ["error", "error", "error", "ok", "error"],
        ["connection", "connection", "connection", None, "http_401"],
        [refused, refused, "connection reset: POST x", None, "HTTP 401:\n bad key"],
    )
    assert outcome.causes == {"connection": refused, "http_401": "HTTP 401: bad key"}
    lines = outcome.lines()
    assert lines[0] == "m/t: 1/5 ok; errors connection: 3, http_401: 1"
    assert lines[1:3] == [f"  connection: {refused}", "  http_401: HTTP 401: bad key"]
    assert refused in outcome.failure_message()
    # Without messages (an older outcome file, a backend without them): no cause lines.
    assert assess({"name": "m"}, "t", ["error"], ["timeout"]).causes == {}


@pytest.mark.workflow
def test_a_closed_api_base_is_named_in_the_summary_and_the_job_log(tmp_path: Path) -> None:
    api_base = f"http://127.0.0.1:{closed_port()}/v1"
    write_config(
        tmp_path,
        {
            "data_root": str(REPO / "resources" / "demo"),
            "tasks": [TASK],
            "tables": {"formats": ["csv"]},
            "models": [
                {
                    "name": MODEL,
                    "backend": "openai",
                    "api_base": api_base,
                    "api_key": "EMPTY",
                    "family": "qwen_vllm",
                    "max_retries": 1,
                    "retry_backoff_s": 0.01,
                }
            ],
        },
    )
    run = run_snakemake(tmp_path, f"results/responses/{MODEL}/{TASK}.parquet", check=False)
    assert run.returncode != 0
    expected = f"connection refused: POST {api_base}/chat/completions"
    assert "inference summary" in run.stderr, run.stderr[-3000:]
    summary = run.stderr[run.stderr.index("inference summary") :]
    assert expected in summary, run.stderr[-3000:]
    log = (tmp_path / f"results/logs/infer/{MODEL}/{TASK}.log").read_text()
    assert expected in log and "ConnectTimeout" not in log
