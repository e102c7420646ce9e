"""One Chat Completions attempt over `openai.AsyncOpenAI`, classified into a reply or a failure.

The body is serialised once by us and sent through the SDK's low-level `post` with the raw
HTTP response returned (`cast_to=httpx.Response`): the SDK still does authentication,
timeouts, connection pooling and its HTTP error classes, but not its per-request typed
transformation of the body and of the reply, which is most of its CPU cost per request at
high concurrency (measured by benchmarks/inference_throughput.py). We decode the reply
ourselves, so a 200 whose body is not JSON, has no choices or cannot be decoded is a
`bad_response` failure like any other, never an exception that escapes.

The HTTP client under the SDK is its `DefaultAioHttpClient` (aiohttp's pool, TLS and proxies).
This is the only module that imports `openai`; it is imported only by a job that sends.
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
import httpx2
import openai

from dualcog.inference.common import escape_lone_surrogates

# Separate reasoning fields used by OpenAI-compatible providers (vLLM and DeepSeek
# `reasoning_content`, OpenRouter and others `reasoning`), in the order they are looked up.
REASONING_FIELDS = ("reasoning_content", "reasoning")
RETRYABLE_STATUS = frozenset({408, 409, 429})
# One INFO line per HTTP request from the stack would bury the progress lines of a job.
for _name in ("httpx2", "httpcore2", "openai"):
    logging.getLogger(_name).setLevel(logging.WARNING)


@dataclass
class Reply:
    content: str
    reasoning_text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    total_tokens: int | None
    finish_reason: str | None


class AttemptFailed(Exception):
    """One failed attempt: `error_type` as stored in RESPONSES, whether to retry, Retry-After."""

    def __init__(
        self, error_type: str, message: str, retryable: bool, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.retryable = retryable
        self.retry_after = retry_after


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text_or_none(value: Any) -> str | None:
    if isinstance(value, str):
        return escape_lone_surrogates(value)
    if isinstance(value, dict):  # e.g. {"text": ...} from some gateways
        text = value.get("text") or value.get("content")
        return escape_lone_surrogates(text) if isinstance(text, str) else None
    return None


def decode_reply(data: bytes) -> Reply:
    """A 200 body -> `Reply`; anything unusable raises `AttemptFailed("bad_response")`."""
    try:
        payload = json.loads(data)
    except ValueError as error:  # not JSON, or not UTF-8
        raise AttemptFailed(
            "bad_response", f"the 200 reply is not JSON ({type(error).__name__})", True
        ) from None
    if not isinstance(payload, dict):
        raise AttemptFailed("bad_response", "the 200 reply is not a JSON object", True)
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AttemptFailed("bad_response", "the completion has no choices", True)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise AttemptFailed("bad_response", "the first choice has no message", True)
    # An empty or null content stays empty: never fall back to a reasoning field.
    content = message.get("content")
    content = escape_lone_surrogates(content) if isinstance(content, str) else ""
    reasoning = None
    for name in REASONING_FIELDS:
        reasoning = _text_or_none(message.get(name))
        if reasoning is not None:
            break
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    finish = choices[0].get("finish_reason")
    return Reply(
        content=content,
        reasoning_text=reasoning,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        reasoning_tokens=_int_or_none(details.get("reasoning_tokens")),
        total_tokens=_int_or_none(usage.get("total_tokens")),
        finish_reason=finish if isinstance(finish, str) else None,
    )


def retry_after_seconds(headers: Any) -> float | None:
    """`Retry-After` as seconds (a number or an HTTP date); None when absent or unreadable."""
    try:
        value = headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def classify(error: Exception) -> AttemptFailed:
    """An exception of the SDK or the HTTP stack -> `AttemptFailed` (message not yet scrubbed)."""
    text = f"{type(error).__name__}: {error}"
    # The SDK's aiohttp adapter maps every aiohttp connection error, a dropped connection
    # included, to a connect timeout: the aiohttp exception underneath tells them apart.
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(
            cause, aiohttp.ServerTimeoutError
        ):
            return AttemptFailed("connection", f"{text} ({type(cause).__name__}: {cause})", True)
        cause = cause.__cause__
    if isinstance(error, openai.APITimeoutError | httpx2.TimeoutException):
        return AttemptFailed("timeout", text, True)
    if isinstance(error, openai.APIConnectionError | httpx2.TransportError):
        return AttemptFailed("connection", text, True)
    if isinstance(error, openai.APIStatusError):
        status = int(error.status_code)
        retry_after = retry_after_seconds(getattr(error.response, "headers", None))
        retryable = status in RETRYABLE_STATUS or status >= 500
        return AttemptFailed(f"http_{status}", text, retryable, retry_after)
    # Anything else from the stack (a body it cannot decode, a protocol error) is an
    # unusable reply: retried like a 5xx.
    return AttemptFailed("bad_response", text, True)


def _never_written(error: BaseException) -> bool:
    while error.__cause__ is not None:
        error = error.__cause__
    return isinstance(error, aiohttp.ClientConnectionResetError) and "closing transport" in str(
        error
    )


class ChatClient:
    """Async sender of pre-serialised Chat Completions bodies to one endpoint."""

    def __init__(self, api_base: str | None, api_key: str, timeout_s: float, pool: int) -> None:
        self.timeout_s = timeout_s
        # aiohttp's connection pool under the SDK: at 256 requests in flight it costs about
        # half the CPU per request of httpx's own pool (benchmarks/inference_throughput.py).
        limits = httpx2.Limits(max_connections=pool, max_keepalive_connections=pool)
        http_client = openai.DefaultAioHttpClient(limits=limits, timeout=timeout_s)
        self.client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=api_base,
            timeout=timeout_s,
            max_retries=0,  # ours are counted and rate-limited
            http_client=http_client,
        )
        self._options = {
            "headers": {"Content-Type": "application/json"},
            "timeout": timeout_s,
            "security": {"bearer_auth": True},
        }

    @staticmethod
    async def warm_up() -> None:
        """Load what the HTTP stack imports lazily on its first request (about 0.1 s, seconds
        on a busy machine), so that a job's first request leaves when its budget says."""
        import httpcore2  # noqa: F401

        await anyio.sleep(0)  # loads anyio's asyncio backend

    async def send(self, body: bytes) -> Reply:
        for fresh in (False, True):
            try:
                response = await self.client.post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    content=body,
                    options=self._options,
                )
                data = response.content
            except (openai.OpenAIError, httpx2.HTTPError, ValueError) as error:
                # A kept-alive connection the server had closed: nothing was written, so the
                # request goes once more, on a new connection, without counting as an attempt.
                if not fresh and _never_written(error):
                    continue
                raise classify(error) from None
            return decode_reply(data)
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        await self.client.close()
