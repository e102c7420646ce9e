"""The request engine: one model run's requests of one task, sent through a backend's transport.

A backend that calls an API provides a `Transport` (docs/extending.md, "Add an API backend"):
how a prompt becomes a request body, how a body is sent, and how a failed attempt is
classified, as an `AttemptFailed` whose `error_type` is one of `dualcog.inference.failures`;
optionally a batch interface (`Transport.batch`). Everything else is the engine's, the same
for every transport:

- the response cache (`dualcog.inference.cache`): cached ok answers are not sent again, and
  every answer reaches the cache through a background writer, so a rerun after a crash or a
  `kill -9` sends only what was not answered;
- spending limits (`dualcog.inference.limits`): a request holds a reservation before it goes
  out and is refused (a `budget_exhausted` row, never sent) once a limit would be passed;
- the model's rate and concurrency budgets (`dualcog.inference.budget`), shared by its jobs;
- retries: an attempt is sent again, after a backoff honouring Retry-After, exactly when its
  `error_type` is transient (`failures.is_transient`, the rule by which a job with such rows
  fails, so that a rerun sends them again);
- progress lines, and one RESPONSES row per prompt, with secrets scrubbed from messages.

`concurrency` workers take prompts from one shared iterator (linear bookkeeping, bounded
memory), each holding a budget slot while its request is in flight; rows land in a list by
index, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dualcog.backends import RunInputs, Runner
from dualcog.inference.budget import ConcurrencySlots, RateBudget, budget_folder
from dualcog.inference.cache import (
    CACHED_FIELDS,
    CacheWriter,
    ResponseCache,
    answer_settings_json,
    cache_key,
    cache_path,
    model_cache_dir,
)
from dualcog.inference.failures import is_transient
from dualcog.inference.limits import BUDGET_EXHAUSTED, Refusal, SpendLimit
from dualcog.inference.progress import ProgressReporter
from dualcog.inference.rows import response_row
from dualcog.inference.scrubbing import scrub
from dualcog.inference.values import escape_lone_surrogates

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_CONCURRENCY = 4
DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_S = 1.0
DEFAULT_BACKOFF_MAX_S = 60.0

# (index in the prompts, prompt, cache key) of a request not answered from the cache
Job = tuple[int, Mapping[str, Any], str]


@dataclass(frozen=True)
class SendSettings:
    """How a model's requests are sent, whatever its transport: from its config entry."""

    run_name: str
    timeout_s: float
    max_retries: int
    backoff_s: float
    backoff_max_s: float
    concurrency: int


def send_settings(model: Mapping[str, Any]) -> SendSettings:
    return SendSettings(
        run_name=str(model["name"]),
        timeout_s=float(model.get("timeout", DEFAULT_TIMEOUT_S)),
        max_retries=int(model.get("max_retries", DEFAULT_MAX_RETRIES)),
        backoff_s=float(model.get("retry_backoff_s", DEFAULT_BACKOFF_S)),
        backoff_max_s=float(model.get("retry_backoff_max_s", DEFAULT_BACKOFF_MAX_S)),
        concurrency=max(1, int(model.get("concurrency", DEFAULT_CONCURRENCY))),
    )


class AttemptFailed(Exception):
    """One failed attempt, as its transport classified it: `error_type` as stored in RESPONSES
    (`timeout`, `connection`, `bad_response`, `http_<status>`, ...), a message (the engine
    scrubs secrets from it) and the server's Retry-After in seconds."""

    def __init__(self, error_type: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Sent again: the job-outcome rules' own test (`failures.is_transient`)."""
        return is_transient(self.error_type)


@dataclass
class Reply:
    """An answered request: the answer and what the provider reported with it."""

    content: str
    reasoning_text: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None  # what a `tpm_limit` counts
    finish_reason: str | None = None
    cached_tokens: int | None = None  # prompt tokens the provider served from its cache
    refusal: str | None = None  # the provider declined to answer

    def row_fields(self) -> dict[str, Any]:
        """The RESPONSES fields of an answered request (direct and batch paths alike)."""
        return {
            "raw_text": self.content,
            "reasoning_text": self.reasoning_text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "finish_reason": self.finish_reason,
            "cached_tokens": self.cached_tokens,
            "refusal": self.refusal,
        }


@dataclass(frozen=True)
class Unsent:
    """One task's requests that the cache did not answer, and where their answers go."""

    jobs: list[Job]
    rows: list[dict[str, Any] | None]  # the task's rows by prompt index, None until answered
    writer: CacheWriter  # the response cache's background writer
    reporter: ProgressReporter
    cache_dir: Path
    task: str


class Sender(Protocol):
    """An open connection pool of a transport."""

    async def send(self, body: bytes) -> Reply:
        """One attempt: the reply, or `AttemptFailed` (never another exception)."""
        ...

    async def close(self) -> None: ...


class Transport(ABC):
    """What a backend provides the engine: subclass it, write `body` and `connect` (and
    override what else its API needs), and name `transport_runner(YourTransport)` as its
    runner."""

    def __init__(self, model: Mapping[str, Any], media_store: Path) -> None:
        self.model = dict(model)
        self.media_store = Path(media_store)

    @property
    def secrets(self) -> list[str]:
        """Values that must never reach a row, the cache or a log (API keys)."""
        return []

    def prepare(
        self, prompts: list[Mapping[str, Any]], samples: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Called once before anything is sent, with the prompts to send and the SAMPLES rows
        by sample id; raise to send nothing."""
        return None  # nothing to prepare unless the API needs it

    @abstractmethod
    def body(self, prompt: Mapping[str, Any]) -> bytes:
        """The request body of one prompt; run in a thread, so it may read files."""

    def inline_body(self, prompt: Mapping[str, Any]) -> bytes | None:
        """The body when it is cheap enough to build on the event loop; None: use `body`."""
        return None

    def record(self, prompt: Mapping[str, Any], body: bytes) -> dict[str, Any]:
        """The request record of a sent body (`schemas.RECORD_FIELDS`); missing ones are null."""
        return {}

    @abstractmethod
    async def connect(self, pool: int, timeout_s: float) -> Sender:
        """A sender for up to `pool` requests at once, each given up after `timeout_s`."""

    def batch(self, engine: Engine, unsent: Unsent) -> None:
        """Answer `unsent.jobs` through the provider's batch interface (`batch: true`): their
        rows go into `unsent.rows` by index and into the cache through `unsent.writer`. A
        transport with one hands its `dualcog.inference.batch.Batcher` to `run_batches`."""
        raise ValueError(f"model {self.model.get('name')!r}: its backend has no batch mode")


def _run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """`asyncio.run`, also from code that already runs an event loop (e.g. a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    result: list[Any] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coroutine))
        except BaseException as error:  # re-raised in the caller's thread
            failure.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


class Engine:
    """Sends one task's prompts for one model run through `transport`, using and filling the
    response cache."""

    def __init__(self, model: Mapping[str, Any], transport: Transport) -> None:
        self.model = dict(model)
        self.transport = transport
        self.settings = send_settings(model)
        self.backend = str(model["backend"])
        self.fingerprint = answer_settings_json(model)
        self.jitter = random.Random()  # backoff jitter only; never touches answers

    @property
    def secrets(self) -> list[str]:
        return self.transport.secrets

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (attempt - 1))
        delay *= 1.0 + 0.25 * self.jitter.random()
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.settings.backoff_max_s))
        return delay

    def row(self, prompt: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
        return response_row(prompt, self.settings.run_name, self.backend, **fields)

    def error_fields(self, error_type: str, message: str, attempts: int) -> dict[str, Any]:
        return {
            "status": "error",
            "error_type": error_type,
            "error_message": scrub(escape_lone_surrogates(message), self.secrets),
            "attempts": attempts,
        }

    def error_row(
        self, prompt: Mapping[str, Any], error_type: str, message: str, attempts: int
    ) -> dict[str, Any]:
        return self.row(prompt, **self.error_fields(error_type, message, attempts))

    async def _send(
        self, prompt: Mapping[str, Any], client: Sender, rate: RateBudget, slots: ConcurrencySlots
    ) -> dict[str, Any]:
        """One prompt -> one response row, after up to `max_retries` retries."""
        # A body that may read files is built in a thread, never on the event loop.
        body = self.transport.inline_body(prompt)
        if body is None:
            body = await asyncio.to_thread(self.transport.body, prompt)
        record = self.transport.record(prompt, body)  # the bytes handed to the transport
        attempt = 0
        while True:
            attempt += 1
            slot = await slots.acquire()
            try:
                # Reserved once a slot is held, so a request waiting for a slot cannot
                # later go out in a burst with others.
                await rate.acquire()
                started = time.perf_counter()
                reply = await client.send(body)
            except AttemptFailed as failure:
                if failure.retryable and attempt <= self.settings.max_retries:
                    delay = self._backoff(attempt, failure.retry_after)
                else:
                    row = self.error_row(prompt, failure.error_type, str(failure), attempt)
                    return {**row, **record}
            else:
                rate.record_usage(reply.total_tokens)
                return self.row(
                    prompt,
                    attempts=attempt,
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                    **reply.row_fields(),
                    **record,
                )
            finally:
                slots.release(slot)
            await asyncio.sleep(delay)

    async def _send_all(
        self,
        jobs: list[Job],
        rows: list[dict[str, Any] | None],
        writer: CacheWriter,
        reporter: ProgressReporter,
        folder: Path,
    ) -> None:
        settings = self.settings
        workers = min(settings.concurrency, len(jobs))
        client = await self.transport.connect(workers, settings.timeout_s)
        reporter.restart()  # the rate counts from the first request, not from the imports
        rate = RateBudget(self.model, folder / "rate.bin")
        slots = ConcurrencySlots(settings.concurrency, folder)
        queue = iter(jobs)
        # The limits read usage from the model's cache files; this job's file is the writer's.
        limit = SpendLimit(self.model, writer.cache.path.parent, writer.cache.path.stem)
        refused: list[Refusal] = []

        async def worker() -> None:
            for index, prompt, key in queue:
                if writer.failure is not None:  # the cache cannot keep answers: send no more
                    break
                sample_id = str(prompt["sample_id"])
                held = await limit.reserve(key, sample_id)
                if isinstance(held, Refusal):  # not sent, so nothing goes to the cache
                    if not refused:
                        reporter.message(f"{held.text}; the rest is not sent")
                    refused.append(held)
                    rows[index] = self.error_row(prompt, BUDGET_EXHAUSTED, held.text, 0)
                    reporter.add("error")
                    continue
                row = await self._send(prompt, client, rate, slots)
                rows[index] = row
                writer.put(key, sample_id, row)
                if writer.failure is None:  # its usage is counted from the cache line now
                    limit.settle(held, key, sample_id)
                # else (and on an error or Ctrl-C before this) the reservation stays held;
                # `limit.close` moves it to the lost ledger unless its line was written.
                reporter.add(row["status"])

        async def ticker() -> None:
            while True:
                await asyncio.sleep(max(0.5, reporter.every_s / 2))
                reporter.tick()

        tick = asyncio.create_task(ticker())
        try:
            await asyncio.gather(*(worker() for _ in range(workers)))
        finally:
            tick.cancel()
            await client.close()
            rate.close()
            slots.close()
            limit.close()

    def run(
        self,
        prompts: list[Mapping[str, Any]],
        cache_dir: Path,
        task: str,
        progress: Callable[[str], None] | None = None,
        samples: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Rows for `prompts` (all of one task) in their order; cached ok rows are not resent.

        samples: SAMPLES rows by sample id (for `Transport.prepare`)."""
        name = self.settings.run_name
        reporter = ProgressReporter(
            f"{name}/{task}",
            len(prompts),
            progress,
            every_s=float(self.model.get("progress_every_s", 5.0)),
        )
        rows: list[dict[str, Any] | None] = [None] * len(prompts)
        jobs: list[Job] = []
        # One request per sample (PROTOCOL §1, v2.3), also when two samples' requests are
        # identical: the cache is keyed by (cache_key, sample_id).
        with ResponseCache(cache_path(cache_dir, name, task)) as cache:
            for index, prompt in enumerate(prompts):
                key = cache_key(str(prompt["request_key"]), self.fingerprint)
                entry = cache.get(key, str(prompt["sample_id"]))
                if entry is None:
                    jobs.append((index, prompt, key))
                    continue
                cached = {field: entry.get(field) for field in entry if field in CACHED_FIELDS}
                rows[index] = self.row(prompt, **cached)
                reporter.add("ok", cached=True)
            if reporter.cached:
                reporter.message(f"{reporter.cached} responses from the cache, {len(jobs)} to send")
            if jobs:
                self.transport.prepare([prompt for _, prompt, _ in jobs], samples or {})
                writer = CacheWriter(cache)
                try:
                    if self.model.get("batch"):
                        unsent = Unsent(jobs, rows, writer, reporter, cache_dir, task)
                        self.transport.batch(self, unsent)
                    else:
                        # A repeat set's runs share one rate budget and concurrency: the
                        # provider's limits are the model's, not each repeat's.
                        owner = str(self.model.get("repeat_of") or name)
                        folder = budget_folder(model_cache_dir(cache_dir, owner))
                        _run_coroutine(self._send_all(jobs, rows, writer, reporter, folder))
                finally:
                    # Whatever completed is written, also on Ctrl-C or an error.
                    writer.close()
        reporter.finish()
        return [row for row in rows if row is not None]


TransportFactory = Callable[[Mapping[str, Any], Path], Transport]


def run_transport(
    make: TransportFactory,
    model: Mapping[str, Any],
    prompt_rows: list[dict[str, Any]],
    inputs: RunInputs,
) -> list[dict[str, Any]]:
    """A registry runner (dualcog.backends): one engine run per task, rows in order."""
    engine = Engine(model, make(model, inputs.media_store))
    samples = {str(row["sample_id"]): row for row in inputs.samples or ()}
    rows_by_index: dict[int, dict[str, Any]] = {}
    for task in dict.fromkeys(row["task"] for row in prompt_rows):
        indices = [i for i, row in enumerate(prompt_rows) if row["task"] == task]
        task_rows = engine.run(
            [prompt_rows[i] for i in indices], inputs.cache_dir, task, inputs.progress, samples
        )
        rows_by_index.update(zip(indices, task_rows, strict=True))
    return [rows_by_index[i] for i in range(len(prompt_rows))]


def transport_runner(make: TransportFactory) -> Runner:
    """The runner of a backend whose requests go through `make(model, media_store)`."""
    return functools.partial(run_transport, make)
