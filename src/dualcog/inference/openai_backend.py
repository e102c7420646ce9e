"""`openai` backend: OpenAI-compatible Chat Completions (cloud APIs, local vLLM servers).

Request bodies are built by `dualcog.inference.request`.
Retries, rate limits and concurrency are ours (the client's own retries are turned off), so
every attempt is counted and rate-limited.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import openai

from dualcog.inference.cache import (
    CACHED_FIELDS,
    ResponseCache,
    cache_key,
    cache_path,
    model_fingerprint,
)
from dualcog.inference.common import ProgressReporter, response_row, scrub
from dualcog.inference.ratelimit import RateLimiter
from dualcog.inference.request import build_messages, request_settings

RETRYABLE_STATUS = frozenset({408, 409, 429})


def classify_error(error: BaseException) -> tuple[str, bool, float | None]:
    """(error_type, retryable, server's Retry-After seconds) of a failed request."""
    if isinstance(error, openai.APITimeoutError):
        return "timeout", True, None
    if isinstance(error, openai.APIConnectionError):
        return "connection", True, None
    if isinstance(error, openai.APIStatusError):
        status = int(error.status_code)
        retry_after = None
        try:
            header = error.response.headers.get("retry-after")
            retry_after = float(header) if header is not None else None
        except (AttributeError, ValueError):
            retry_after = None
        return f"http_{status}", status in RETRYABLE_STATUS or status >= 500, retry_after
    return "bad_response", False, None


class OpenAIRunner:
    """Sends one task's prompts for one model run, using and filling the response cache."""

    def __init__(
        self,
        model: Mapping[str, Any],
        media_store: Path,
        limiter: RateLimiter | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = dict(model)
        self.settings = request_settings(model)
        self.media_store = Path(media_store)
        self.limiter = limiter or RateLimiter(model)
        self.sleep = sleep
        self.fingerprint = model_fingerprint(model)
        self.client = openai.OpenAI(
            api_key=self.settings.api_key,
            base_url=self.settings.api_base,
            timeout=self.settings.timeout_s,
            max_retries=0,
        )
        self.secrets = [self.settings.api_key]
        self.jitter = random.Random()  # backoff jitter only; never touches answers
        self.jitter_lock = threading.Lock()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (attempt - 1))
        with self.jitter_lock:
            delay *= 1.0 + 0.25 * self.jitter.random()
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.settings.backoff_max_s))
        return delay

    def _request_kwargs(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.settings.request_model,
            "messages": messages,
            "temperature": self.settings.temperature,
            "timeout": self.settings.timeout_s,
        }
        if self.settings.max_tokens is not None:
            kwargs["max_tokens"] = self.settings.max_tokens
        if self.settings.extra_body:
            kwargs["extra_body"] = self.settings.extra_body
        return kwargs

    def send(self, prompt: Mapping[str, Any]) -> dict[str, Any]:
        """One prompt -> one response row, after up to `max_retries` retries."""
        kwargs = self._request_kwargs(build_messages(prompt, self.settings, self.media_store))
        name = self.settings.run_name
        attempt = 0
        while True:
            attempt += 1
            self.limiter.acquire()
            started = time.monotonic()
            try:
                completion = self.client.chat.completions.create(**kwargs)
                latency_ms = (time.monotonic() - started) * 1000.0
                return self._ok_row(prompt, completion, attempt, latency_ms)
            except openai.OpenAIError as error:
                error_type, retryable, retry_after = classify_error(error)
                if retryable and attempt <= self.settings.max_retries:
                    self.sleep(self._backoff(attempt, retry_after))
                    continue
                message = scrub(f"{type(error).__name__}: {error}", self.secrets)
                return response_row(
                    prompt,
                    name,
                    "openai",
                    status="error",
                    error_type=error_type,
                    error_message=message,
                    attempts=attempt,
                )
            except _BadResponse as error:
                return response_row(
                    prompt,
                    name,
                    "openai",
                    status="error",
                    error_type="bad_response",
                    error_message=scrub(str(error), self.secrets),
                    attempts=attempt,
                )

    def _ok_row(
        self, prompt: Mapping[str, Any], completion: Any, attempt: int, latency_ms: float
    ) -> dict[str, Any]:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise _BadResponse("the completion has no choices")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise _BadResponse("the first choice has no message")
        # An empty or null content stays empty: never fall back to a reasoning field.
        content = message.content if isinstance(message.content, str) else ""
        usage = getattr(completion, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        total = getattr(usage, "total_tokens", None)
        self.limiter.record_usage(total if isinstance(total, int) else None)
        return response_row(
            prompt,
            self.settings.run_name,
            "openai",
            raw_text=content,
            attempts=attempt,
            latency_ms=latency_ms,
            prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
            completion_tokens=completion_tokens if isinstance(completion_tokens, int) else None,
            finish_reason=getattr(choices[0], "finish_reason", None),
        )

    def _send_and_cache(
        self, prompt: Mapping[str, Any], key: str, cache: ResponseCache
    ) -> dict[str, Any]:
        # Cached from the worker so that a completed request is kept even if the caller died.
        row = self.send(prompt)
        cache.append(key, str(prompt["sample_id"]), row)
        return row

    def run(
        self,
        prompts: list[Mapping[str, Any]],
        cache_dir: Path,
        task: str,
        progress: Callable[[str], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Rows for `prompts` (all of one task) in their order; cached ok rows are not resent."""
        name = self.settings.run_name
        cache = ResponseCache(cache_path(cache_dir, name, task))
        reporter = ProgressReporter(
            f"{name}/{task}",
            len(prompts),
            progress,
            every_s=float(self.model.get("progress_every_s", 10.0)),
        )
        rows: list[dict[str, Any] | None] = [None] * len(prompts)
        pending: list[tuple[int, str]] = []
        for index, prompt in enumerate(prompts):
            key = cache_key(str(prompt["request_key"]), self.fingerprint)
            entry = cache.get(key)
            if entry is None:
                pending.append((index, key))
                continue
            cached = {field: entry.get(field) for field in entry if field in CACHED_FIELDS}
            rows[index] = response_row(prompt, name, "openai", **cached)
            reporter.add("ok", cached=True)
        if reporter.cached:
            reporter.message(f"{reporter.cached} responses from the cache, {len(pending)} to send")
        executor = ThreadPoolExecutor(max_workers=self.settings.concurrency)
        futures: dict[Future, int] = {}
        interrupted = True
        try:
            for index, key in pending:
                future = executor.submit(self._send_and_cache, prompts[index], key, cache)
                futures[future] = index
            remaining = set(futures)
            while remaining:
                done, remaining = wait(remaining, timeout=1.0, return_when=FIRST_COMPLETED)
                for future in done:
                    row = future.result()
                    rows[futures[future]] = row
                    reporter.add(row["status"])
            interrupted = False
        finally:
            # On Ctrl-C or an error, drop what has not started and do not wait for requests in
            # flight; each one still lands in the cache if it completes.
            executor.shutdown(wait=not interrupted, cancel_futures=True)
        if reporter.done != reporter.last_reported_done:
            reporter.report()
        return [row for row in rows if row is not None]


class _BadResponse(Exception):
    pass
