"""One Chat Completions attempt, classified into a reply or a failure: the wire of the `openai`
transport (`dualcog.inference.openai_backend`); `Reply` and `AttemptFailed` are the engine's.

The body is serialised once by us and posted with the `openai` SDK's own HTTP client,
`DefaultAioHttpClient` (aiohttp's connection pool, TLS, proxies from the environment).
The SDK's typed request transformation, its per-request option models and its reply
models are skipped: at high concurrency they cost more CPU than the whole HTTP exchange
(benchmarks/inference_throughput.py). We decode the reply ourselves, so a 200 whose body
is not JSON, has no choices or cannot be decoded is a `bad_response` failure like any
other, never an exception that escapes; a status other than 200 is `http_<status>` with
the provider's error message, which the engine retries when it is transient
(`dualcog.inference.failures`).

`BatchClient` is the OpenAI Batch API as batch mode's `Batcher` (`dualcog.inference.batch`): its
few calls go through the SDK's typed methods (a handful per batch, so their CPU cost does not
matter), and its result lines are decoded like a direct reply.

This is the only module that imports `openai`; it is imported only by a job that sends.
"""

from __future__ import annotations

import email.utils
import errno
import functools
import json
import logging
import os
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import httpx2
import openai

from dualcog.inference.batch import BatchState, Result
from dualcog.inference.engine import AttemptFailed, Reply
from dualcog.inference.values import escape_lone_surrogates

# Separate reasoning fields used by OpenAI-compatible providers (vLLM and DeepSeek
# `reasoning_content`, OpenRouter and others `reasoning`), in the order they are looked up.
REASONING_FIELDS = ("reasoning_content", "reasoning")
OPENAI_API_BASE = "https://api.openai.com/v1"  # the SDK's default, when no api_base is set
# One INFO line per HTTP request from the stack would bury the progress lines of a job.
for _name in ("httpx2", "httpcore2", "openai"):
    logging.getLogger(_name).setLevel(logging.WARNING)


@functools.lru_cache(maxsize=8)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx2.create_ssl_context()  # reads SSL_CERT_FILE / SSL_CERT_DIR, hence the key


def tls_context() -> ssl.SSLContext:
    """The SDK client's default TLS context (CA bundle from the system, or SSL_CERT_FILE /
    SSL_CERT_DIR), built once per process and setting: loading the CA bundle costs tens of
    milliseconds, which every client (one per task run) paid again."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


tls_context()  # at import, with the rest of the HTTP stack (as aiohttp builds its own)


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
            "bad_response", f"the 200 reply is not JSON ({type(error).__name__})"
        ) from None
    if not isinstance(payload, dict):
        raise AttemptFailed("bad_response", "the 200 reply is not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AttemptFailed("bad_response", "the completion has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise AttemptFailed("bad_response", "the first choice has no message")
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
    prompt_details = usage.get("prompt_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    refusal = message.get("refusal")
    finish = choices[0].get("finish_reason")
    return Reply(
        content=content,
        reasoning_text=reasoning,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        reasoning_tokens=_int_or_none(details.get("reasoning_tokens")),
        total_tokens=_int_or_none(usage.get("total_tokens")),
        finish_reason=finish if isinstance(finish, str) else None,
        cached_tokens=_int_or_none(prompt_details.get("cached_tokens")),
        refusal=escape_lone_surrogates(refusal) if isinstance(refusal, str) else None,
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


# The OS errors a connection fails with, in a reader's words (the SDK reports them all as a
# connect timeout).
_CONNECT_CAUSES = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ETIMEDOUT: "connection timed out",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.EPIPE: "connection closed",
}


def connection_cause(error: BaseException) -> str:
    """What went wrong with a connection, in a reader's words: "connection refused", "host
    name not resolved", ... (the first OS or aiohttp error in the chain that says)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectorDNSError | socket.gaierror):
            return "host name not resolved"
        if isinstance(cause, aiohttp.ClientSSLError | ssl.SSLError):
            return "TLS handshake failed"
        if isinstance(cause, aiohttp.ServerDisconnectedError):
            return "server closed the connection"
        os_error = getattr(cause, "os_error", cause)  # aiohttp's connector errors wrap one
        if isinstance(os_error, OSError) and os_error.errno in _CONNECT_CAUSES:
            return _CONNECT_CAUSES[os_error.errno]
        cause = cause.__cause__ or cause.__context__
    return "connection failed"


def classify(error: Exception, url: str = "") -> AttemptFailed:
    """An exception of the HTTP stack -> `AttemptFailed` (message not yet scrubbed). A
    connection failure's message starts with its cause and the URL: "connection refused:
    POST http://127.0.0.1:9/v1/chat/completions (ClientConnectorError: ...)"."""
    text = f"{type(error).__name__}: {error}"
    where = f"POST {url}" if url else "the server"
    # The SDK's aiohttp adapter maps every aiohttp connection error, a dropped connection
    # and a refused one included, to a connect timeout: the aiohttp exception underneath
    # tells them apart, and its name (not the SDK's) goes into the message.
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(
            cause, aiohttp.ServerTimeoutError
        ):
            detail = f"{type(cause).__name__}: {cause}"
            return AttemptFailed("connection", f"{connection_cause(cause)}: {where} ({detail})")
        cause = cause.__cause__
    if isinstance(error, httpx2.TimeoutException):
        return AttemptFailed("timeout", f"timed out: {where} ({text})")
    if isinstance(error, httpx2.TransportError | OSError):
        return AttemptFailed("connection", f"{connection_cause(error)}: {where} ({text})")
    # Anything else from the stack (a body it cannot decode, a protocol error) is an
    # unusable reply: retried like a 5xx.
    return AttemptFailed("bad_response", text)


def status_failure(status: int, body: bytes, headers: Any) -> AttemptFailed:
    """A reply other than 200 -> `AttemptFailed("http_<status>")` with the provider's message."""
    detail = body[:4096].decode("utf-8", "replace")
    try:
        payload = json.loads(body)
        error = payload.get("error") if isinstance(payload, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            detail = message
    except ValueError:
        pass
    text = f"HTTP {status}: {escape_lone_surrogates(detail)}"
    return AttemptFailed(f"http_{status}", text, retry_after_seconds(headers))


def _dropped_before_reply(error: BaseException) -> bool:
    """Whether the connection went away before any reply began: the race of a kept-alive
    connection that the server closed (an idle timeout) while we picked it for a request."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, aiohttp.ServerDisconnectedError | ConnectionResetError):
            return True  # aiohttp's ClientConnectionResetError is a ConnectionResetError
        if isinstance(cause, OSError) and cause.errno in (errno.ECONNRESET, errno.EPIPE):
            return True
        cause = cause.__cause__
    return False


class ChatClient:
    """Async sender of pre-serialised Chat Completions bodies to one endpoint.

    The HTTP client is the SDK's `DefaultAioHttpClient` (aiohttp's connection pool, TLS and
    proxies from the environment); the body is already JSON, so we post it with that client
    directly and skip the SDK's per-request option models, which cost more CPU than the
    rest of the request (benchmarks/inference_throughput.py)."""

    def __init__(self, api_base: str | None, api_key: str, timeout_s: float, pool: int) -> None:
        self.timeout_s = timeout_s
        limits = httpx2.Limits(max_connections=pool, max_keepalive_connections=pool)
        self.http = openai.DefaultAioHttpClient(
            limits=limits, timeout=timeout_s, verify=tls_context()
        )
        base = (api_base or os.environ.get("OPENAI_BASE_URL") or OPENAI_API_BASE).rstrip("/")
        self.url = f"{base}/chat/completions"
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        # What `build_request` merges for every request (the URL, the client's default
        # headers and ours, its timeout), merged once: about 90 µs of CPU per request
        # otherwise (docs/performance.md, "Sending requests").
        template = self.http.build_request("POST", self.url, headers=self.headers, content=b"-")
        del template.headers["content-length"]  # each request sets its own
        self._url = template.url
        self._request_headers = template.headers
        self._timeout = template.extensions["timeout"]

    @staticmethod
    async def warm_up() -> None:
        """Load what the HTTP stack imports lazily on its first request (about 0.1 s, seconds
        on a busy machine), so that a job's first request leaves when its budget says."""
        import httpcore2  # noqa: F401

        await anyio.sleep(0)  # loads anyio's asyncio backend

    async def _post(self, body: bytes) -> httpx2.Response:
        if self.http.cookies:  # a server set cookies: merged as `post` would
            return await self.http.post(self.url, content=body, headers=self.headers)
        request = httpx2.Request(
            "POST",
            self._url,
            content=body,
            headers=self._request_headers,
            extensions={"timeout": self._timeout},
        )
        return await self.http.send(request)

    async def send(self, body: bytes) -> Reply:
        for fresh in (False, True):
            try:
                response = await self._post(body)
                data = response.content
            except (httpx2.HTTPError, aiohttp.ClientError, OSError, ValueError) as error:
                # A kept-alive connection the server had closed: the request goes once more,
                # on a new connection, without counting as an attempt (at most one resend).
                if not fresh and _dropped_before_reply(error):
                    continue
                raise classify(error, self.url) from None
            if response.status_code != 200:
                raise status_failure(response.status_code, data, response.headers)
            return decode_reply(data)
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        await self.http.aclose()


BATCH_ENDPOINT = "/v1/chat/completions"
# How far before a record's time a batch found by `BatchClient.find` may have been created
# (clocks of the provider and of this machine differ); the listing stops there.
FIND_MARGIN_S = 3600.0
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
# error_type of a request a batch gave no result for, by the batch's final status: an expired
# window is a timeout; a failed or cancelled batch, or a missing line, an unusable reply.
MISSING_ERROR_TYPE = {"expired": "timeout"}


def _counts_text(batch: Mapping[str, Any]) -> str:
    counts = batch.get("request_counts") or {}
    return (
        f"{counts.get('completed', 0)}/{counts.get('total', 0)} done, "
        f"{counts.get('failed', 0)} failed"
    )


def _batch_errors(batch: Mapping[str, Any]) -> str:
    """The provider's reasons for a failed batch (e.g. its input file's validation errors)."""
    errors = batch.get("errors")
    data = errors.get("data") if isinstance(errors, dict) else None
    if not isinstance(data, list) or not data:
        return ""
    parts = []
    for error in data[:3]:
        if isinstance(error, dict):
            line = f" (line {error['line']})" if error.get("line") is not None else ""
            parts.append(f"{error.get('code')}: {error.get('message')}{line}")
    more = f" and {len(data) - 3} more" if len(data) > 3 else ""
    return f" ({'; '.join(parts)}{more})"


def _line_outcome(batch_id: str, item: Mapping[str, Any]) -> Reply | AttemptFailed:
    """One output or error file line -> its reply, or its failure (decoded like a direct
    reply: `decode_reply`, `status_failure`)."""
    response = item.get("response")
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        body = json.dumps(response.get("body")).encode()
        try:
            if response["status_code"] != 200:
                raise status_failure(response["status_code"], body, {})
            return decode_reply(body)
        except AttemptFailed as failure:
            return AttemptFailed(failure.error_type, f"batch {batch_id}: {failure}")
    error = item.get("error")
    error = error if isinstance(error, dict) else {}
    code = str(error.get("code") or "no result")
    message = f"batch {batch_id}: {code}: {error.get('message') or 'no response'}"
    return AttemptFailed("timeout" if code == "batch_expired" else "bad_response", message)


class BatchClient:
    """The OpenAI Batch API as a `dualcog.inference.batch.Batcher`: files up and down, batches
    created, found and polled, their result lines decoded.

    Each call goes through the SDK (`files.create`, `batches.create`, `batches.retrieve`,
    `batches.list`, `files.content`) with the SDK's own retries (`max_retries`, backoff,
    `Retry-After`): a call that still fails raises `AttemptFailed`, classified like a chat
    request's failure."""

    def __init__(
        self, api_base: str | None, api_key: str, timeout_s: float, max_retries: int
    ) -> None:
        base = (api_base or os.environ.get("OPENAI_BASE_URL") or OPENAI_API_BASE).rstrip("/")
        self.sdk = openai.OpenAI(
            base_url=base, api_key=api_key, timeout=timeout_s, max_retries=max_retries
        )

    @staticmethod
    def _failure(what: str, error: Exception) -> AttemptFailed:
        if isinstance(error, openai.APIStatusError):
            response = error.response
            failed = status_failure(response.status_code, response.content, response.headers)
        elif isinstance(error, openai.APITimeoutError):
            failed = AttemptFailed("timeout", f"{type(error).__name__}: {error}")
        elif isinstance(error, openai.APIConnectionError):
            cause = connection_cause(error)
            failed = AttemptFailed("connection", f"{cause} ({type(error).__name__}: {error})")
        else:  # a reply the SDK could not read
            failed = AttemptFailed("bad_response", f"{type(error).__name__}: {error}")
        return AttemptFailed(failed.error_type, f"{what}: {failed}", failed.retry_after)

    def _call(self, what: str, call: Any) -> Any:
        try:
            return call()
        except (openai.OpenAIError, httpx2.HTTPError, OSError, ValueError) as error:
            raise self._failure(f"{what} at {self.sdk.base_url}", error) from None

    def upload(self, path: Path) -> str:
        """Upload a batch input file (purpose `batch`); its file id."""
        with open(path, "rb") as handle:
            uploaded = self._call(
                f"uploading {path.name}",
                lambda: self.sdk.files.create(
                    file=(path.name, handle, "application/jsonl"), purpose="batch"
                ),
            )
        return str(uploaded.id)

    @staticmethod
    def line(custom_id: str, body: bytes) -> bytes:
        """A batch input line: the custom id, the endpoint, and the chat body's bytes as sent."""
        return b"".join((
            b'{"custom_id": ', json.dumps(custom_id).encode(),
            b', "method": "POST", "url": "/v1/chat/completions", "body": ', body, b"}\n",
        ))  # fmt: skip

    def submit(self, input_file_id: str, metadata: dict[str, str]) -> str:
        batch = self._call(
            f"creating the batch of file {input_file_id}",
            lambda: self.sdk.batches.create(
                completion_window="24h",
                endpoint=BATCH_ENDPOINT,
                input_file_id=input_file_id,
                metadata=metadata,
            ),
        )
        return str(batch.id)

    def poll(self, batch_id: str) -> BatchState:
        batch = self._call(f"polling batch {batch_id}", lambda: self.sdk.batches.retrieve(batch_id))
        raw = batch.model_dump()
        status = str(raw.get("status"))
        return BatchState(str(raw["id"]), status, status in TERMINAL, _counts_text(raw), raw)

    def find(self, input_file_id: str, since: float) -> str | None:
        """The batch made from `input_file_id`, if one was created (newest first, back to
        `since` less a margin): what a process killed between creating a batch and recording
        its id left behind."""

        def search() -> str | None:
            for batch in self.sdk.batches.list(limit=100):
                if batch.input_file_id == input_file_id:
                    return str(batch.id)
                if batch.created_at < since - FIND_MARGIN_S:
                    return None
            return None

        return self._call(f"looking for the batch of file {input_file_id}", search)

    def content(self, file_id: str) -> bytes:
        response = self._call(
            f"downloading file {file_id}", lambda: self.sdk.files.content(file_id)
        )
        return bytes(response.content)

    def collect(self, state: BatchState) -> Iterator[Result]:
        """The lines of the batch's output and error files, each file downloaded whole before
        its lines are read."""
        for field in ("output_file_id", "error_file_id"):
            if not state.raw.get(field):
                continue
            data = self.content(str(state.raw[field]))
            for number, line in enumerate(data.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    item = None
                cid = item.get("custom_id") if isinstance(item, dict) else None
                where = f"{field} line {number}"
                if not isinstance(cid, str) or not isinstance(item, dict):
                    yield where, None, AttemptFailed("bad_response", "unreadable")
                    continue
                yield where, cid, _line_outcome(state.batch_id, item)

    @staticmethod
    def missing(state: BatchState) -> AttemptFailed:
        return AttemptFailed(
            MISSING_ERROR_TYPE.get(state.status, "bad_response"),
            f"batch {state.batch_id} ended {state.status} without a result for this request"
            + _batch_errors(state.raw),
        )

    def close(self) -> None:
        self.sdk.close()
