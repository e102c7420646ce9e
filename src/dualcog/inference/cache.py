"""Crash-safe response cache: one append-only JSONL file per (model run, task).

Each completed request is one line keyed by `cache_key = sha256(request_key + model-settings
fingerprint)` and its `sample_id`: two samples with identical requests are two requests and two
entries (PROTOCOL §1, v2.3). On start the file is replayed so that a rerun after a crash, Ctrl-C
or failed job sends only what is missing. Only ok lines are reused; errors are sent again.

Contract (several processes may use one file at once, e.g. shards of one (model, task)):
- Every append is one `write` of whole lines made while holding an exclusive `flock` on the
  file, so lines of concurrent writers never interleave.
- Loading takes the same lock. A torn last line (a writer killed mid-write, or a full disk)
  is cut off there, with a warning; since writers hold the lock, it cannot be a line another
  process is still writing.
- A line that cannot be read (invalid UTF-8, not JSON) is skipped with a warning naming the
  file and line number; it is never fatal.
- Lines are ASCII (`ensure_ascii`), so any string a server returns, lone surrogates included,
  is stored losslessly and writing can never fail on encoding.
- Writers share nothing else: prompts may be split among processes in any way, and a process
  reads every line written before it started, so changing the split re-sends nothing.

`CacheWriter` appends each row the moment it is decoded (one `write`, so a `kill -9` loses no
completed request) and leaves the `fsync`, the part that waits on the disk, to a background
thread, so the event loop never blocks on it. The thread syncs at most every
`SYNC_INTERVAL_S`, one `fsync` for all rows written meanwhile: a row is on disk (safe from a
power loss) within about that long of its reply.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dualcog.atomic import disk_full, is_disk_full
from dualcog.config import answer_settings
from dualcog.inference.locks import flock
from dualcog.schemas import RECORD_FIELDS

LOG = logging.getLogger(__name__)
# One fsync per reply costs more CPU than the rest of writing it (benchmarks/
# inference_throughput.py); rows written within this many seconds share one.
SYNC_INTERVAL_S = 0.1

CACHED_FIELDS = (
    "raw_text",
    "reasoning_text",
    "status",
    "error_type",
    "error_message",
    "attempts",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "finish_reason",
    "cached_tokens",
    "refusal",
    # the record of what was sent (PROTOCOL §11.5): a cached answer keeps its request's
    *RECORD_FIELDS,
)


def answer_settings_json(model: Mapping[str, Any]) -> str:
    """Canonical JSON of the model settings that can change an answer."""
    return json.dumps(answer_settings(model), sort_keys=True, separators=(",", ":"), default=str)


def cache_key(request_key: str, fingerprint: str) -> str:
    return hashlib.sha256(f"{request_key}\n{fingerprint}".encode()).hexdigest()


def safe_name(name: str) -> str:
    # `~` is kept: a repeat's run name (`<name>~r2`, dualcog.repeats) must not share the
    # folder of a configured run `<name>_r2`; configured names never hold one.
    return re.sub(r"[^A-Za-z0-9._\-~]+", "_", name)


def model_cache_dir(cache_dir: Path | str, model_name: str) -> Path:
    return Path(cache_dir) / safe_name(model_name)


def cache_path(cache_dir: Path | str, model_name: str, task: str) -> Path:
    return model_cache_dir(cache_dir, model_name) / f"{safe_name(task)}.jsonl"


# `json.dumps(entry, ensure_ascii=True, allow_nan=False)`, its encoder made once.
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False)


def cache_line(key: str, sample_id: str, row: Mapping[str, Any]) -> bytes:
    entry = {"cache_key": key, "sample_id": sample_id}
    for field in CACHED_FIELDS:
        entry[field] = row.get(field)
    return (_LINE_ENCODER.encode(entry) + "\n").encode("ascii")


class _Locked:
    """An exclusive `flock` on an open file, released on exit."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    def __enter__(self) -> None:
        flock(self.fd, fcntl.LOCK_EX, self.path)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


class ResponseCache:
    """The cache file of one (model run, task): ok entries read at start, appends under lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.ok: dict[tuple[str, str], dict[str, Any]] = {}  # (cache_key, sample_id) -> entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self.write_lock = threading.Lock()
        self._load()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self) -> None:
        with _Locked(self.fd, self.path):
            size = os.fstat(self.fd).st_size
            data = os.pread(self.fd, size, 0) if size else b""
            complete_end = data.rfind(b"\n") + 1
            if complete_end < len(data):
                LOG.warning(
                    "response cache %s: ignoring a torn last line %d (%d bytes)",
                    self.path,
                    data.count(b"\n") + 1,
                    len(data) - complete_end,
                )
                os.ftruncate(self.fd, complete_end)
        for number, line in enumerate(data[:complete_end].split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
                LOG.warning(
                    "response cache %s:%d: unreadable line skipped (%s)",
                    self.path,
                    number,
                    type(error).__name__,
                )
                continue
            if isinstance(entry, dict) and entry.get("status") == "ok" and "cache_key" in entry:
                self.ok[(str(entry["cache_key"]), str(entry.get("sample_id")))] = entry

    def get(self, key: str, sample_id: str) -> dict[str, Any] | None:
        return self.ok.get((key, sample_id))

    def write_lines(self, lines: list[bytes], sync: bool = True) -> None:
        """Append whole lines in one write under the file lock (thread- and process-safe)."""
        if not lines:
            return
        data = b"".join(lines)
        with self.write_lock, _Locked(self.fd, self.path):
            written = 0
            while written < len(data):  # one write in practice; loop for a short write
                written += os.write(self.fd, data[written:])
        if sync:
            os.fsync(self.fd)

    def append(self, key: str, sample_id: str, row: Mapping[str, Any]) -> None:
        self.write_lines([cache_line(key, sample_id, row)])
        if row.get("status") == "ok":
            self.ok[(key, sample_id)] = dict(row)


class CacheWriter:
    """Appends rows to a `ResponseCache` as they complete; `fsync` runs in a background thread.

    The append itself (one `write` to the page cache, microseconds) happens at once, so a row
    is in the file as soon as its reply is decoded and a `kill -9` can lose no completed row;
    only the `fsync` (milliseconds, against power loss) is left to the thread, batched: at
    most one per `SYNC_INTERVAL_S`.
    """

    def __init__(self, cache: ResponseCache) -> None:
        self.cache = cache
        self.dirty = threading.Event()
        self.stopped = threading.Event()
        self.stopping = False
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._sync_loop, name="cache-fsync", daemon=True)
        self.thread.start()

    def put(self, key: str, sample_id: str, row: Mapping[str, Any]) -> None:
        try:
            line = cache_line(key, sample_id, row)
        except (TypeError, ValueError) as error:  # a row that cannot be encoded: keep going
            LOG.error("response cache %s: row of %s not stored: %s", self.cache.path, sample_id,
                      error)  # fmt: skip
            return
        try:
            self.cache.write_lines([line], sync=False)
        except OSError as error:
            self.failure = error
            LOG.error("response cache %s: write failed: %s", self.cache.path, error)
            return
        self.dirty.set()

    def _sync_loop(self) -> None:
        while True:
            self.dirty.wait()
            self.dirty.clear()
            try:
                os.fsync(self.cache.fd)
            except OSError as error:
                self.failure = error
            if self.stopping:
                return
            self.stopped.wait(SYNC_INTERVAL_S)  # rows written meanwhile share the next fsync

    def sync(self) -> None:
        """Sync everything written so far now, in the caller's thread; raises when a write
        failed (as `close` does)."""
        try:
            os.fsync(self.cache.fd)
        except OSError as error:
            self.failure = error
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self.failure is not None:
            if is_disk_full(self.failure):
                raise disk_full(self.cache.path, self.failure)  # type: ignore[arg-type]
            raise OSError(f"response cache {self.cache.path}: {self.failure}")

    def close(self) -> None:
        """Sync everything written so far, then stop the thread."""
        self.stopping = True
        self.stopped.set()
        self.dirty.set()
        self.thread.join()
        try:
            os.fsync(self.cache.fd)  # rows written while the thread's last fsync ran
        except OSError as error:
            self.failure = error
        self._raise_failure()
