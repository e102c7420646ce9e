"""`openai` backend: OpenAI-compatible Chat Completions (cloud APIs, local vLLM servers).

An asyncio engine per (model run, task): `concurrency` workers take prompts from one shared
iterator (linear bookkeeping, bounded memory), each holding a budget slot while its request is
in flight; rows land in a list by index and in the response cache through a background writer,
so the event loop never waits on the disk. Retries, rate limits and concurrency are ours (the
SDK's own retries are off), so every attempt is counted, spaced and budgeted per model
(`dualcog.inference.budget`). Request bodies come from `dualcog.inference.request`; the wire
and the decoding of replies from `dualcog.inference.client`, the only module importing
`openai` (imported when a job first sends).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from dualcog.backends import RunInputs
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
from dualcog.inference.limits import BUDGET_EXHAUSTED, Refusal, SpendLimit
from dualcog.inference.media import NotMemoized, memoized_data_uri
from dualcog.inference.progress import ProgressReporter
from dualcog.inference.request import encode_request_body, request_body, request_settings
from dualcog.inference.rows import response_row
from dualcog.inference.scrubbing import scrub
from dualcog.inference.values import as_list, escape_lone_surrogates

# Bodies whose memoized media pass this size (videos) are still encoded in a thread: copying
# them takes milliseconds that the event loop would stall for.
INLINE_MEDIA_CHARS = 4 * 1024 * 1024


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


class OpenAIRunner:
    """Sends one task's prompts for one model run, using and filling the response cache."""

    def __init__(self, model: Mapping[str, Any], media_store: Path) -> None:
        self.model = dict(model)
        self.settings = request_settings(model)
        self.media_store = Path(media_store)
        self.fingerprint = answer_settings_json(model)
        self.secrets = [self.settings.api_key]
        self.jitter = random.Random()  # backoff jitter only; never touches answers
        self.record = self.settings.record()  # PROTOCOL §11.5, the same for every request
        # Stored video key -> its re-encoded stand-in (PROTOCOL §11.4), filled by `run`.
        self.reencoded: dict[str, Any] = {}

    def outgoing(self, prompt: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
        """The prompt as sent (re-encoded videos in place of the stored ones) and the JSON
        record of those substitutions (None when there are none)."""
        if not self.reencoded:
            return prompt, None
        keys = [str(k) for k in as_list(prompt.get("media_keys"))]
        swapped = [self.reencoded[k] for k in keys if k in self.reencoded]
        if not swapped:
            return prompt, None
        sent = [self.reencoded[k].sent_key if k in self.reencoded else k for k in keys]
        described = json.dumps([made.describe() for made in swapped], sort_keys=True)
        return {**prompt, "media_keys": sent}, described

    def sent_record(self, prompt: Mapping[str, Any], body: bytes) -> dict[str, Any]:
        """The record of one posted body: its SHA-256 and the settings that shaped it."""
        return {
            **self.record,
            "request_sha256": hashlib.sha256(body).hexdigest(),
            "request_reencoded": self.outgoing(prompt)[1],
        }

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (attempt - 1))
        delay *= 1.0 + 0.25 * self.jitter.random()
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.settings.backoff_max_s))
        return delay

    def _error_row(
        self, prompt: Mapping[str, Any], error_type: str, message: str, attempts: int
    ) -> dict[str, Any]:
        return response_row(
            prompt,
            self.settings.run_name,
            "openai",
            status="error",
            error_type=error_type,
            error_message=scrub(escape_lone_surrogates(message), self.secrets),
            attempts=attempts,
        )

    def _body(self, prompt: Mapping[str, Any]) -> bytes:
        sent = self.outgoing(prompt)[0]
        return encode_request_body(request_body(sent, self.settings, self.media_store))

    def _memoized_body(self, prompt: Mapping[str, Any]) -> bytes | None:
        """The body when every medium of `prompt` is in the media memo (no file to read) and
        they are small enough to encode on the event loop; None otherwise."""
        size = 0

        def data_uri(store: Path, key: str, kind: str) -> str:
            nonlocal size
            uri = memoized_data_uri(store, key, kind)
            size += len(uri)
            if size > INLINE_MEDIA_CHARS:
                raise NotMemoized(key)
            return uri

        try:
            body = request_body(self.outgoing(prompt)[0], self.settings, self.media_store, data_uri)
        except NotMemoized:
            return None
        return encode_request_body(body)

    async def _send(
        self, prompt: Mapping[str, Any], client: Any, rate: RateBudget, slots: ConcurrencySlots
    ) -> dict[str, Any]:
        """One prompt -> one response row, after up to `max_retries` retries."""
        from dualcog.inference.client import AttemptFailed

        # Media files are read (and base64-encoded) in a thread, never on the event loop;
        # a prompt whose media are all in the memo reads none, and skips the thread hop.
        body = self._memoized_body(prompt)
        if body is None:
            body = await asyncio.to_thread(self._body, prompt)
        record = self.sent_record(prompt, body)  # the bytes handed to the transport
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
                    row = self._error_row(prompt, failure.error_type, str(failure), attempt)
                    return {**row, **record}
            else:
                rate.record_usage(reply.total_tokens)
                return response_row(
                    prompt,
                    self.settings.run_name,
                    "openai",
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
        jobs: list[tuple[int, Mapping[str, Any], str]],
        rows: list[dict[str, Any] | None],
        writer: CacheWriter,
        reporter: ProgressReporter,
        folder: Path,
    ) -> None:
        from dualcog.inference.client import ChatClient

        settings = self.settings
        workers = min(settings.concurrency, len(jobs))
        await ChatClient.warm_up()
        reporter.restart()  # the rate counts from the first request, not from the imports
        client = ChatClient(settings.api_base, settings.api_key, settings.timeout_s, workers)
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
                    rows[index] = self._error_row(prompt, BUDGET_EXHAUSTED, held.text, 0)
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

        samples: SAMPLES rows by sample id (a video's duration for the size ladder)."""
        name = self.settings.run_name
        reporter = ProgressReporter(
            f"{name}/{task}",
            len(prompts),
            progress,
            every_s=float(self.model.get("progress_every_s", 5.0)),
        )
        rows: list[dict[str, Any] | None] = [None] * len(prompts)
        jobs: list[tuple[int, Mapping[str, Any], str]] = []
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
                rows[index] = response_row(prompt, name, "openai", **cached)
                reporter.add("ok", cached=True)
            if reporter.cached:
                reporter.message(f"{reporter.cached} responses from the cache, {len(jobs)} to send")
            if jobs:
                # Before anything is sent: a run that cannot re-encode stops here (§11.4).
                self.prepare_videos([prompt for _, prompt, _ in jobs], samples or {})
                writer = CacheWriter(cache)
                try:
                    if self.model.get("batch"):  # the provider's Batch API (inference/batch.py)
                        from dualcog.inference.batch import run_batches

                        run_batches(self, jobs, rows, writer, reporter, cache_dir, task)
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

    def prepare_videos(
        self, prompts: list[Mapping[str, Any]], samples: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Re-encode the videos over the size limit of a size-limited route (PROTOCOL §11.4)
        into the media store, once; raises, naming the samples, when there is no encoder."""
        from dualcog.errors import DataError
        from dualcog.inference.media import media_path
        from dualcog.media.reencode import (
            VIDEO_SIZE_LIMIT,
            NoEncoder,
            find_encoder,
            reencode_video,
        )

        if not self.settings.size_limited:
            return
        large: dict[str, tuple[Path, float]] = {}
        named: dict[str, list[str]] = {}
        for prompt in prompts:
            kinds = [str(kind) for kind in as_list(prompt.get("media_kinds"))]
            for key, kind in zip(as_list(prompt.get("media_keys")), kinds, strict=True):
                path = media_path(self.media_store, str(key), kind)
                if kind != "video" or key in self.reencoded or not path.is_file():
                    continue
                if path.stat().st_size <= VIDEO_SIZE_LIMIT:
                    continue
                sample = samples.get(str(prompt["sample_id"])) or {}
                frames, fps = sample.get("frame_count"), sample.get("fps")
                if not frames or not fps:
                    raise DataError(
                        f"its video is over {VIDEO_SIZE_LIMIT} bytes and must be re-encoded "
                        f"for {self.settings.run_name}, which needs its duration; no SAMPLES "
                        "row gives it",
                        sample=str(prompt["sample_id"]),
                        field="frame_count, fps",
                    )
                large[str(key)] = (path, max(1.0, (int(frames) - 1) / float(fps)))
                named.setdefault(str(key), []).append(str(prompt["sample_id"]))
        if not large:
            return
        encoder = find_encoder()
        if encoder is None:
            samples_text = ", ".join(sorted({s for ids in named.values() for s in ids}))
            raise NoEncoder(
                f"{self.settings.run_name}: {len(large)} video(s) over {VIDEO_SIZE_LIMIT} bytes "
                f"must be re-encoded before they are sent (PROTOCOL §11.4), but no ffmpeg "
                f"with libx264 was found (the imageio-ffmpeg package, or IMAGEIO_FFMPEG_EXE); "
                f"nothing was sent. Samples: {samples_text}"
            )
        for key, (path, duration) in large.items():
            made = reencode_video(self.media_store, key, path, duration, encoder)
            if made is not None:  # nothing fits: the original goes, as the authors' code does
                self.reencoded[key] = made


def run_openai(
    model: Mapping[str, Any], prompt_rows: list[dict[str, Any]], inputs: RunInputs
) -> list[dict[str, Any]]:
    """The registry's runner (dualcog.backends): one engine run per task, rows in order."""
    runner = OpenAIRunner(model, inputs.media_store)
    samples = {str(row["sample_id"]): row for row in inputs.samples or ()}
    rows_by_index: dict[int, dict[str, Any]] = {}
    for task in dict.fromkeys(row["task"] for row in prompt_rows):
        indices = [i for i, row in enumerate(prompt_rows) if row["task"] == task]
        task_rows = runner.run(
            [prompt_rows[i] for i in indices], inputs.cache_dir, task, inputs.progress, samples
        )
        rows_by_index.update(zip(indices, task_rows, strict=True))
    return [rows_by_index[i] for i in range(len(prompt_rows))]
