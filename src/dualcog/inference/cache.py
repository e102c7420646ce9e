"""Crash-safe response cache: one append-only JSONL file per (model run, task).

Each completed request is one line, written with a single write and flushed, keyed by
`cache_key = sha256(request_key + model-settings fingerprint)`. On start the file is replayed
so that a rerun after a crash or Ctrl-C only sends what is missing. Only ok lines are reused;
errors are retried. A torn last line (crash mid-write) is dropped with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dualcog.config import answer_settings

LOG = logging.getLogger(__name__)

CACHED_FIELDS = (
    "raw_text",
    "status",
    "error_type",
    "error_message",
    "attempts",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
)


def model_fingerprint(model: Mapping[str, Any]) -> str:
    """Canonical JSON of the model settings that can change an answer."""
    return json.dumps(answer_settings(model), sort_keys=True, separators=(",", ":"), default=str)


def cache_key(request_key: str, fingerprint: str) -> str:
    return hashlib.sha256(f"{request_key}\n{fingerprint}".encode()).hexdigest()


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._\-]+", "_", name)


def cache_path(cache_dir: Path | str, model_name: str, task: str) -> Path:
    return Path(cache_dir) / _safe_name(model_name) / f"{_safe_name(task)}.jsonl"


class ResponseCache:
    """The cache file of one (model run, task); safe to `append` from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.ok: dict[str, dict[str, Any]] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        complete_end = data.rfind(b"\n") + 1
        if complete_end < len(data):
            # A crash mid-write left a partial line; drop it so the next append starts clean.
            LOG.warning(
                "response cache %s: ignoring a torn last line (%d bytes)",
                self.path,
                len(data) - complete_end,
            )
            with self.path.open("r+b") as handle:
                handle.truncate(complete_end)
        for number, line in enumerate(data[:complete_end].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                LOG.warning("response cache %s:%d: unreadable line ignored", self.path, number)
                continue
            if isinstance(entry, dict) and entry.get("status") == "ok" and "cache_key" in entry:
                self.ok[entry["cache_key"]] = entry

    def get(self, key: str) -> dict[str, Any] | None:
        return self.ok.get(key)

    def append(self, key: str, sample_id: str, row: Mapping[str, Any]) -> None:
        entry = {"cache_key": key, "sample_id": sample_id}
        entry.update({field: row.get(field) for field in CACHED_FIELDS})
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            if row.get("status") == "ok":
                self.ok[key] = entry
