"""Batch mode (`batch: true`) of the request engine (`dualcog.inference.engine`): a job's
uncached requests through a provider's batch interface instead of one by one, with the engine's
cache, spending limits and rows. The provider's side is a `Batcher` (upload an input file,
submit a batch of it, find one, poll, collect its results); the OpenAI Batch API is the first
(`dualcog.inference.client.BatchClient`, for the `openai` transport).

The requests are written as batch input files (one line per request, `Batcher.line`: a
`custom_id` naming its cache key and sample id, and the very bytes of the body the direct path
would send), split at `batch_max_requests` and `batch_max_bytes`, uploaded and submitted. The
job then polls its batches until each ends; each result is decoded like a direct reply and
written to the response cache as an ordinary row; failed, expired or missing ones become
ordinary error rows, which the next run sends again (not cached as answers). A request answered
twice keeps its first ok answer.

Crash safety: each batch has a record in `<cache_dir>/<model>/batches/`, a small append-only
JSONL file holding the input file id and the custom ids (first line) and then the batch id,
each line fsynced before the next step, so the batch id is on disk before any wait. A process
holds an exclusive `flock` on each record it works on (released by the kernel when it dies);
after a kill a rerun finds the record, takes it over and resumes polling the same batch. A
process killed between creating a batch and recording its id leaves the input file id: the
rerun looks the batch up by it (`Batcher.find`) before creating one, so no batch is submitted
twice. A record is removed once its rows are in the cache (fsynced).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dualcog.config import model_defaults
from dualcog.console import format_duration
from dualcog.errors import DualCogError
from dualcog.inference.cache import (
    CACHED_FIELDS,
    CacheWriter,
    ResponseCache,
    model_cache_dir,
    safe_name,
)
from dualcog.inference.engine import AttemptFailed, Engine, Job, Reply, Transport, Unsent
from dualcog.inference.limits import BUDGET_EXHAUSTED, Refusal, Spend, SpendLimit
from dualcog.inference.locks import flock
from dualcog.inference.progress import ProgressReporter
from dualcog.inference.scrubbing import scrub

LOG = logging.getLogger(__name__)

RECORD_FOLDER = "batches"
POLL_GROWTH = 1.5  # the poll interval grows by this while a batch's counts stay the same
# A request larger than a whole batch file: sending it again cannot help (not transient).
TOO_LARGE = "too_large"


@dataclass(frozen=True)
class BatchState:
    """A batch as its provider reported it at a poll."""

    batch_id: str
    status: str  # the provider's word: "in_progress", "completed", "expired", ...
    ended: bool  # no more results will come: collect them
    counts: str  # progress in a reader's words: "3/10 done, 1 failed"
    raw: Mapping[str, Any] = field(default_factory=dict)  # what `collect` reads

    @property
    def text(self) -> str:
        return f"{self.status}, {self.counts}"


# One result line: where it is (for warnings), its custom id (None: unreadable), its outcome.
Result = tuple[str, str | None, Reply | AttemptFailed]


class Batcher(Protocol):
    """A provider's batch interface (its owner, the transport, closes it). Each call that fails
    raises `AttemptFailed`, classified like a direct attempt (a transient one is tried again at
    the next poll or run)."""

    def line(self, custom_id: str, body: bytes) -> bytes:
        """One request as a line of a batch input file, newline included."""
        ...

    def upload(self, path: Path) -> str:
        """Upload a batch input file; its id."""
        ...

    def submit(self, input_file_id: str, metadata: dict[str, str]) -> str:
        """Create the batch of an uploaded file; its id."""
        ...

    def find(self, input_file_id: str, since: float) -> str | None:
        """The id of the batch made from `input_file_id` (created after `since`, a time
        stamp), if there is one: what a process killed before recording it left behind."""
        ...

    def poll(self, batch_id: str) -> BatchState: ...

    def collect(self, state: BatchState) -> Iterator[Result]:
        """The results of an ended batch, one per line it returned."""
        ...

    def missing(self, state: BatchState) -> AttemptFailed:
        """The failure of a request an ended batch returned no result for."""
        ...


class BatchPending(DualCogError):
    """Ctrl-C while batches are pending at the provider: they go on there, and their records
    let the same command collect them later (the job's one line says so)."""


@dataclass(frozen=True)
class BatchSettings:
    max_requests: int
    max_bytes: int
    poll_s: float
    poll_max_s: float


def batch_settings(model: Mapping[str, Any]) -> BatchSettings | None:
    """The model's batch settings (schema defaults for those not set); None without `batch`."""
    if not model.get("batch"):
        return None
    defaults = model_defaults()

    def value(key: str) -> Any:
        return model[key] if model.get(key) is not None else defaults[key]

    return BatchSettings(
        max_requests=int(value("batch_max_requests")),
        max_bytes=int(value("batch_max_bytes")),
        poll_s=float(value("batch_poll_s")),
        poll_max_s=max(float(value("batch_poll_s")), float(value("batch_poll_max_s"))),
    )


def custom_id(key: str, sample_id: str) -> str:
    """A request's id in a batch: its cache key (hex) and sample id, split at the first `:`."""
    return f"{key}:{sample_id}"


def split_custom_id(value: str) -> tuple[str, str]:
    key, _, sample_id = value.partition(":")
    return key, sample_id


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BatchRecord:
    """The durable record of one batch: first line the task, input file id, custom ids and
    time; a later line the batch id. Open records hold an exclusive `flock` on the file."""

    def __init__(self, path: Path, fd: int, head: dict[str, Any], batch_id: str | None) -> None:
        self.path = path
        self.fd = fd
        self.task = str(head["task"])
        self.input_file_id = str(head["input_file_id"])
        self.custom_ids = [str(value) for value in head["custom_ids"]]
        self.created = float(head["created"])
        self.batch_id = batch_id

    @staticmethod
    def _append(fd: int, data: dict[str, Any]) -> None:
        os.write(fd, (json.dumps(data, ensure_ascii=True) + "\n").encode("ascii"))
        os.fsync(fd)

    @classmethod
    def create(
        cls, path: Path, task: str, input_file_id: str, custom_ids: list[str]
    ) -> BatchRecord:
        """Write a new record (locked) and make it durable: file, then its folder entry.
        Written under another name and renamed, so that no process ever finds it unlocked
        and half-written."""
        draft = path.with_suffix(".draft")
        fd = os.open(draft, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        flock(fd, fcntl.LOCK_EX, draft)
        head = {
            "task": task,
            "input_file_id": input_file_id,
            "custom_ids": custom_ids,
            "created": time.time(),
        }
        cls._append(fd, head)
        os.rename(draft, path)  # the lock stays: it is on the file, not the name
        _fsync_folder(path.parent)
        return cls(path, fd, head, None)

    @staticmethod
    def read(path: Path) -> tuple[dict[str, Any] | None, str | None]:
        """(first line, batch id) of a record as it is on disk; (None, None) when its first
        line is missing, torn or unreadable."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None, None
        lines = data.split(b"\n")[:-1]  # a torn last line has no newline: left out
        try:
            head = json.loads(lines[0]) if lines else None
            batch_id = None
            for line in lines[1:]:
                batch_id = str(json.loads(line)["batch_id"])
        except (ValueError, KeyError, TypeError):
            return None, None
        if not isinstance(head, dict) or not {"task", "input_file_id", "custom_ids"} <= set(head):
            return None, None
        return head, batch_id

    @classmethod
    def take(cls, path: Path, blocking: bool = True) -> BatchRecord | None:
        """The record at `path`, locked; None when it is gone (finished by another process),
        unreadable, or (not `blocking`) locked by a live process."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            return None
        try:
            flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB), path)
            if os.fstat(fd).st_nlink == 0:  # removed while we waited for the lock
                os.close(fd)
                return None
        except BlockingIOError:
            os.close(fd)
            return None
        head, batch_id = cls.read(path)
        if head is None:
            # Locked by nobody and unreadable: its writer died before the first fsync, so no
            # batch was created from it.
            LOG.warning("batch record %s: unreadable, removed (no batch was created)", path)
            os.unlink(path)
            os.close(fd)
            return None
        return cls(path, fd, {"created": 0.0, **head}, batch_id)

    def note_batch(self, batch_id: str) -> None:
        self._append(self.fd, {"batch_id": batch_id})
        self.batch_id = batch_id

    def remove(self) -> None:
        os.unlink(self.path)
        _fsync_folder(self.path.parent)
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the lock
            self.fd = -1


class BatchJob:
    """One job's requests through a `Batcher`: resume its recorded batches, submit the rest,
    poll until all end, write every result to the cache."""

    def __init__(
        self,
        engine: Engine,
        transport: Transport,
        settings: BatchSettings,
        batcher: Batcher,
        writer: CacheWriter,
        reporter: ProgressReporter,
        folder: Path,
        task: str,
    ) -> None:
        self.engine = engine
        self.transport = transport
        self.settings = settings
        self.batcher = batcher
        self.writer = writer
        self.reporter = reporter
        self.folder = folder
        self.task = task
        self.pending: dict[str, tuple[int, Mapping[str, Any]]] = {}
        # custom id -> the record of the body this process put in an input file (§11.5); a
        # result collected for a file another process wrote carries none.
        self.records: dict[str, dict[str, Any]] = {}
        # Spending limits: each request in a batch holds its estimate until its result is in
        # the cache (the model's cache folder is the records folder's parent).
        self.limit = SpendLimit(engine.model, folder.parent, task)
        self.holds: dict[str, Spend] = {}
        self.rows: list[dict[str, Any] | None] = []
        self.started = time.monotonic()

    # --- results -------------------------------------------------------------------------

    def _error_fields(self, error_type: str, message: str) -> dict[str, Any]:
        return self.engine.error_fields(error_type, message, 1)

    def _deliver(self, cid: str, fields: dict[str, Any]) -> None:
        """One request's result: to the cache, and to this job's rows when it is ours (a
        record taken over from another split may hold requests of other jobs)."""
        key, sample_id = split_custom_id(cid)
        entry = self.pending.pop(cid, None)
        if entry is None:
            self.writer.put(key, sample_id, {field: fields.get(field) for field in CACHED_FIELDS})
            return
        index, prompt = entry
        fields = {**fields, **self.records.pop(cid, {})}
        row = self.engine.row(prompt, **fields)
        self.rows[index] = row
        self.writer.put(key, sample_id, row)
        self.reporter.add(row["status"])

    def _from_cache(self, ids: list[str]) -> None:
        """Take the answers of `ids` that another process wrote to the cache since we read
        it; the rest stay pending."""

        with ResponseCache(self.writer.cache.path) as fresh:
            for cid in ids:
                entry = fresh.get(*split_custom_id(cid))
                if entry is None or cid not in self.pending:
                    continue
                index, prompt = self.pending.pop(cid)
                cached = {field: entry.get(field) for field in entry if field in CACHED_FIELDS}
                self.rows[index] = self.engine.row(prompt, **cached)
                self.reporter.add("ok", cached=True)

    def _fields(self, outcome: Reply | AttemptFailed) -> dict[str, Any]:
        if isinstance(outcome, AttemptFailed):
            return self._error_fields(outcome.error_type, str(outcome))
        return {"status": "ok", "attempts": 1, **outcome.row_fields()}

    def _collect(self, record: BatchRecord, state: BatchState) -> None:
        """Every request of an ended batch -> a row in the cache; then the record goes."""
        batch_id = state.batch_id
        results: dict[str, dict[str, Any]] = {}
        seen: dict[str, str] = {}  # custom_id -> where its kept line is
        duplicates = 0
        wanted = set(record.custom_ids)
        for where, cid, outcome in self.batcher.collect(state):  # downloads: may fail, retried
            if cid is None or cid not in wanted:
                LOG.warning("batch %s: %s unreadable, skipped", batch_id, where)
                continue
            fields = self._fields(outcome)
            if cid in results:
                # A custom_id answered twice: an ok answer is never dropped (the first ok
                # line wins; an error line only stands where no line is ok).
                duplicates += 1
                replace = results[cid]["status"] != "ok" and fields["status"] == "ok"
                LOG.warning("batch %s: custom_id %s again at %s (first at %s); kept: %s",
                            batch_id, cid, where, seen[cid],
                            where if replace else seen[cid])  # fmt: skip
                if not replace:
                    continue
            results[cid], seen[cid] = fields, where
        missing = self._fields(self.batcher.missing(state))
        for cid in record.custom_ids:
            self._deliver(cid, results.get(cid, missing))
        self.writer.sync()  # the rows are on disk before the record goes
        self.limit.settle(self._held(record.custom_ids))  # their usage is in the cache now
        record.remove()
        again = ""
        if duplicates:
            again = f", {duplicates} duplicate result lines (see the warnings)"
            LOG.warning("batch %s: %d duplicate result lines; no ok answer dropped (docs/"
                        "failures.md)", batch_id, duplicates)  # fmt: skip
        self.reporter.message(
            f"batch {batch_id} {state.status}: {state.counts}{again}, "
            f"elapsed {format_duration(time.monotonic() - self.started)}"
        )

    def _fail(self, record: BatchRecord, failure: AttemptFailed) -> None:
        """The batch could not be reached: its requests of this job become error rows of
        this run; the record stays, so the next run resumes the same batch."""
        for cid in record.custom_ids:
            if cid in self.pending:
                self._deliver(cid, self._error_fields(failure.error_type, str(failure)))
        record.close()

    # --- spending limits -----------------------------------------------------------------

    def _held(self, ids: list[str]) -> Spend:
        total = Spend()
        for cid in ids:
            total = total + self.holds.pop(cid, Spend())
        return total

    def _hold_resumed(self, records: list[BatchRecord]) -> None:
        """A resumed batch was sent already: what it will cost counts against new requests."""
        for record in records:
            if not record.custom_ids:
                continue
            held = self.limit.hold(len(record.custom_ids))
            share = Spend(held.tokens / len(record.custom_ids), held.cost / len(record.custom_ids))
            for cid in record.custom_ids:
                self.holds[cid] = share

    def _admitted(
        self, items: list[tuple[str, Mapping[str, Any]]]
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """The requests the model's limits let go into new batches, each holding its
        estimate; the others become `budget_exhausted` rows (not cached: never sent). A batch
        cannot wait for requests in flight to settle, so a request that would pass a limit
        only with them counts as refused too."""
        if not self.limit.active:
            return items
        self.limit.open()
        admitted = []
        refused: str | None = None
        for cid, prompt in items:
            decision = None if refused else self.limit.try_reserve()
            if isinstance(decision, Spend):
                self.holds[cid] = decision
                admitted.append((cid, prompt))
                continue
            if refused is None:
                refused = (
                    decision.text
                    if isinstance(decision, Refusal)
                    else "not sent: with the requests in flight of model "
                    f"{self.engine.settings.run_name}, the next request could pass its limit "
                    f"({self.limit.state_text()})"
                )
                self.reporter.message(f"{refused}; the rest is not sent")
            index, prompt = self.pending.pop(cid)
            self.rows[index] = self.engine.error_row(prompt, BUDGET_EXHAUSTED, refused, 0)
            self.reporter.add("error")
        return admitted

    # --- submission ----------------------------------------------------------------------

    def _input_files(
        self, items: list[tuple[str, Mapping[str, Any]]]
    ) -> Iterator[tuple[Path, list[str]]]:
        """Batch input files of at most `max_requests` lines and `max_bytes` bytes each, each
        locked until the caller is done with it (so `_remove_leftovers` leaves it alone)."""
        path = Path()
        handle: Any = None
        ids: list[str] = []
        size = 0
        try:
            for cid, prompt in items:
                body = self.transport.body(prompt)  # the bytes the direct path would send
                line = self.batcher.line(cid, body)
                if len(line) > self.settings.max_bytes:
                    self._deliver(cid, self._error_fields(
                        TOO_LARGE,
                        f"the request is {len(line)} bytes, more than a whole batch file may "
                        f"hold (batch_max_bytes {self.settings.max_bytes}); raise it or send "
                        "this model without `batch`",
                    ))  # fmt: skip
                    continue
                self.records[cid] = self.transport.record(prompt, body)  # what the line holds
                full = len(ids) >= self.settings.max_requests
                if handle is not None and (full or size + len(line) > self.settings.max_bytes):
                    handle.flush()
                    yield path, ids
                    handle.close()
                    handle = None
                if handle is None:
                    path = self.folder / f"{safe_name(self.task)}.{uuid.uuid4().hex[:12]}.input"
                    handle = open(path, "wb")  # noqa: SIM115 (closed once uploaded)
                    flock(handle.fileno(), fcntl.LOCK_EX, path)
                    ids, size = [], 0
                handle.write(line)
                ids.append(cid)
                size += len(line)
            if handle is not None:
                handle.flush()
                yield path, ids
        finally:
            if handle is not None:
                handle.close()
                path.unlink(missing_ok=True)

    def _submit(self, path: Path, ids: list[str]) -> BatchRecord | None:
        """Upload one input file, record it, create its batch, record the batch id."""
        try:
            try:
                file_id = self.batcher.upload(path)
            finally:
                path.unlink(missing_ok=True)
        except AttemptFailed as failure:
            for cid in ids:
                self._deliver(cid, self._error_fields(failure.error_type, str(failure)))
            return None
        record = BatchRecord.create(path.with_suffix(".jsonl"), self.task, file_id, ids)
        try:
            if not self._confirm(record, look_up=False):
                return None
        except BaseException:
            record.close()  # left for the next run (Ctrl-C, an error), unlocked
            raise
        self.reporter.message(
            f"submitted batch {record.batch_id}: {len(ids)} requests "
            f"(file {file_id}, record {record.path})"
        )
        return record

    def _confirm(self, record: BatchRecord, look_up: bool) -> bool:
        """Make sure `record` names a created batch: (`look_up`) find the one a killed process
        created from its file, else create it. False (record handled) when that fails."""
        try:
            batch_id = None
            if look_up:
                batch_id = self.batcher.find(record.input_file_id, record.created)
            if batch_id is None:
                batch_id = self.batcher.submit(
                    record.input_file_id,
                    {"dualcog_record": record.path.name, "dualcog_task": self.task},
                )
        except AttemptFailed as failure:
            if failure.retryable:
                self._fail(record, failure)  # perhaps created: the next run looks it up
            else:
                # Refused (e.g. the file is gone): no batch exists; the next run starts anew.
                for cid in record.custom_ids:
                    if cid in self.pending:
                        self._deliver(cid, self._error_fields(failure.error_type, str(failure)))
                record.remove()
            return False
        record.note_batch(batch_id)
        return True

    # --- the run -------------------------------------------------------------------------

    def _remove_leftovers(self) -> None:
        """Input files and record drafts of killed processes (no batch was made from a draft;
        an input file is only needed until its upload). Those of live processes are locked."""
        for suffix in ("input", "draft"):
            for path in self.folder.glob(f"{safe_name(self.task)}.*.{suffix}"):
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, path)
                    path.unlink(missing_ok=True)
                    LOG.warning("batch files: removed %s, left by a killed process", path)
                except BlockingIOError:
                    pass
                finally:
                    os.close(fd)

    def _recorded(self) -> list[BatchRecord]:
        """The records of this task that hold requests of this job, taken over (locked)."""
        self._remove_leftovers()
        taken = []
        for path in sorted(self.folder.glob(f"{safe_name(self.task)}.*.jsonl")):
            head, _ = BatchRecord.read(path)
            ids = head["custom_ids"] if head is not None else []
            if head is not None and head["task"] != self.task:
                continue
            ours = head is not None and any(cid in self.pending for cid in ids)
            # One of another job (a concurrent shard) is polled by it: wait only for ours.
            record = BatchRecord.take(path, blocking=ours)
            if record is None:
                if ours:  # finished by a process that held it: its answers are cached
                    self._from_cache(ids)
                continue
            if not ours:
                # Not locked and none of ours: a leftover of a process killed after writing
                # its rows (removed when all are answered), or of a run not going on now
                # (another split, other settings), kept for it.
                cache = self.writer.cache
                if all(cache.get(*split_custom_id(cid)) for cid in record.custom_ids):
                    record.remove()
                else:
                    record.close()
                continue
            taken.append(record)
        return taken

    def _poll(self, records: list[BatchRecord]) -> None:
        send = self.engine.settings
        delay = self.settings.poll_s
        failures: dict[str, int] = {}
        last: dict[str, str] = {}
        reported = 0.0
        while records:
            changed = False
            for record in list(records):
                batch_id = str(record.batch_id)
                try:
                    batch = self.batcher.poll(batch_id)
                    if batch.ended:
                        self._collect(record, batch)  # downloads first: may fail, then retried
                        records.remove(record)
                        changed = True
                        continue
                except AttemptFailed as failure:
                    failures[batch_id] = failures.get(batch_id, 0) + 1
                    if failure.retryable and failures[batch_id] <= send.max_retries:
                        message = scrub(str(failure), self.engine.secrets)
                        LOG.warning("%s (will poll again)", message)
                        continue
                    records.remove(record)
                    self._fail(record, failure)
                    continue
                failures.pop(batch_id, None)
                changed |= last.get(batch_id) != batch.text
                last[batch_id] = batch.text
            now = time.monotonic()
            if records and (changed or now - reported >= self.reporter.every_s):
                reported = now
                for record in records:
                    self.reporter.message(
                        f"batch {record.batch_id}: {last.get(str(record.batch_id), 'polling')}, "
                        f"elapsed {format_duration(now - self.started)}"
                    )
            if not records:
                break
            # Back to the short interval while counts move; longer and longer while they stay.
            delay = (
                self.settings.poll_s
                if changed
                else min(self.settings.poll_max_s, delay * POLL_GROWTH)
            )
            time.sleep(delay)

    def run(
        self,
        jobs: list[Job],
        rows: list[dict[str, Any] | None],
    ) -> None:
        self.rows = rows
        self.pending = {
            custom_id(key, str(prompt["sample_id"])): (index, prompt) for index, prompt, key in jobs
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        records = self._recorded()
        try:
            for record in records:
                self.reporter.message(
                    f"resuming batch {record.batch_id or '(submission not confirmed)'} of "
                    f"{len(record.custom_ids)} requests (record {record.path})"
                )
            confirmed = [
                r for r in records if r.batch_id is not None or self._confirm(r, look_up=True)
            ]
            records[:] = confirmed
            covered = {cid for record in records for cid in record.custom_ids}
            items = [(cid, prompt) for cid, (_, prompt) in self.pending.items()
                     if cid not in covered]  # fmt: skip
            self._hold_resumed(records)
            for path, ids in self._input_files(self._admitted(items)):
                record = self._submit(path, ids)
                if record is not None:
                    records.append(record)
            self._poll(records)
        except KeyboardInterrupt:
            pending = [r for r in records if r.batch_id is not None]
            if not pending:
                raise
            ids = ", ".join(str(r.batch_id) for r in pending)
            count = sum(len(r.custom_ids) for r in pending)
            raise BatchPending(
                f"interrupted: batch {ids} ({count} requests) still pending at the provider, "
                f"recorded in {self.folder}; run the same command again to collect the answers "
                "(nothing is sent twice)"
            ) from None
        finally:
            for record in records:
                record.close()
            self.limit.close()


def run_batches(engine: Engine, transport: Transport, batcher: Batcher, unsent: Unsent) -> None:
    """Answer `unsent.jobs` (index, prompt, cache key) of one task through `batcher`, with
    bodies and request records from `transport`: their rows land in `unsent.rows` by index
    and in the cache through `unsent.writer`."""
    settings = batch_settings(engine.model)
    if settings is None:
        raise ValueError(f"model {engine.settings.run_name!r} is not in batch mode")
    folder = model_cache_dir(unsent.cache_dir, engine.settings.run_name) / RECORD_FOLDER
    unsent.reporter.restart()
    BatchJob(
        engine, transport, settings, batcher, unsent.writer, unsent.reporter, folder, unsent.task
    ).run(unsent.jobs, unsent.rows)
