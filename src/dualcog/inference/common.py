"""Pieces shared by every inference backend: run names, response rows, secrets, progress."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dualcog import schemas
from dualcog.console import format_duration

MODE_SUFFIX = re.compile(r"^(.+?)-(Instant|Thinking|Reasoning)$")
ENV_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")

ProgressFn = Callable[[str], None]


def split_mode(run_name: str) -> tuple[str, str | None]:
    """`"Qwen3-VL-8B-Instant"` -> `("Qwen3-VL-8B", "Instant")`; no suffix -> `(name, None)`."""
    match = MODE_SUFFIX.match(run_name)
    if match is None:
        return run_name, None
    return match.group(1), match.group(2)


def resolve_env_value(value: str | None, field: str) -> str | None:
    """Read a value that is exactly `${VAR}` from the environment; other values pass through.

    The error names the variable and the field, never a value.
    """
    if value is None:
        return None
    match = ENV_REFERENCE.match(str(value))
    if match is None:
        return str(value)
    name = match.group(1)
    if name not in os.environ:
        raise ValueError(f"model config field {field!r} refers to ${{{name}}}, which is not set")
    return os.environ[name]


def as_list(value: Any) -> list:
    """A list/tuple/numpy array (or None) from a Parquet-read cell as a plain list."""
    if value is None:
        return []
    if isinstance(value, float) and math.isnan(value):
        return []
    if isinstance(value, np.ndarray):
        return value.tolist()
    return list(value)


def to_plain(value: Any) -> Any:
    """Nested numpy arrays/scalars -> plain Python lists/numbers (JSON-serialisable)."""
    if isinstance(value, np.ndarray):
        return [to_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def canonical_json(value: Any) -> str:
    """Compact JSON as in docs/protocol.md §2's examples."""
    return json.dumps(to_plain(value), separators=(",", ":"), ensure_ascii=False)


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, float) and math.isnan(value)


def response_row(
    prompt: Mapping[str, Any],
    model_name: str,
    backend: str,
    *,
    raw_text: str | None = None,
    reasoning_text: str | None = None,
    status: str = "ok",
    error_type: str | None = None,
    error_message: str | None = None,
    attempts: int | None = None,
    latency_ms: float | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """One RESPONSES row; a failure never carries answer text."""
    if status not in schemas.RESPONSE_STATUSES:
        raise ValueError(f"unknown response status {status!r}")
    if status != "ok":
        raw_text = None
        reasoning_text = None
    elif raw_text is None:
        raise ValueError("an ok response needs raw_text (an empty string is allowed)")
    return {
        "sample_id": prompt["sample_id"],
        "task": prompt["task"],
        "model": model_name,
        "backend": backend,
        "request_key": prompt["request_key"],
        "raw_text": raw_text,
        "reasoning_text": reasoning_text,
        "status": status,
        "error_type": error_type,
        "error_message": error_message,
        "attempts": attempts,
        "latency_ms": latency_ms,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "reasoning_tokens": reasoning_tokens,
        "finish_reason": finish_reason,
    }


def responses_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows -> frame in RESPONSES column order, checked against the schema."""
    frame = pd.DataFrame(list(rows), columns=schemas.RESPONSES.names)
    for column in ("attempts", "prompt_tokens", "completion_tokens", "reasoning_tokens"):
        frame[column] = frame[column].astype("Int64")
    frame["attempts"] = frame["attempts"].astype("Int32")
    frame["latency_ms"] = frame["latency_ms"].astype("float64")
    schemas.to_table(frame, schemas.RESPONSES)  # raises when a column does not conform
    return frame


def sample_seed(seed: int, sample_id: str, stream: str) -> int:
    """A 64-bit seed for one (run seed, sample, purpose); independent of row order."""
    digest = hashlib.sha256(f"{seed}\x00{sample_id}\x00{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class ProgressReporter:
    """Reports done/total, ok/error/cached counts, rate and ETA every `every_s` seconds (and
    every `every_fraction` of the work) and at the end.

    `label` (e.g. `model/task`) starts each line once; callers pass a plain sink such as
    `logging.info`, not one that adds its own prefix.
    """

    def __init__(
        self,
        label: str,
        total: int,
        progress: ProgressFn | None,
        every_fraction: float = 1.0,
        every_s: float = 30.0,  # a line per job every 30 s keeps a 45-model console short
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.progress = progress
        self.step = max(1, math.ceil(total * every_fraction))
        self.every_s = every_s
        self.clock = clock
        self.started = clock()
        self.last_report = self.started
        self.next_count = self.step
        self.done = self.ok = self.errors = self.cached = 0
        self.last_reported_done = -1

    def restart(self) -> None:
        """Start the clock of the rate and ETA now (after start-up work)."""
        self.started = self.last_report = self.clock()

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.label}: {text}")

    def add(self, status: str, cached: bool = False) -> None:
        self.done += 1
        self.ok += status == "ok"
        self.errors += status == "error"
        self.cached += cached
        if self.progress is None or cached:  # cached rows are summed up in one message
            return
        now = self.clock()
        if self.done >= self.next_count or now - self.last_report >= self.every_s:
            self.report(now)
            while self.next_count <= self.done:
                self.next_count += self.step

    def tick(self) -> None:
        """Report if `every_s` passed without a report (called by a timer while waiting)."""
        now = self.clock()
        if now - self.last_report >= self.every_s:
            self.report(now)

    def finish(self) -> None:
        if self.done != self.last_reported_done:
            self.report()

    def report(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self.last_report = now
        self.last_reported_done = self.done
        elapsed = max(now - self.started, 1e-9)
        sent = self.done - self.cached
        rate = sent / elapsed
        remaining = self.total - self.done
        if remaining == 0:
            eta = "0s"
        elif rate > 0:
            eta = format_duration(remaining / rate)
        else:
            # Nothing answered yet: the model's other jobs hold its shared requests budget.
            model = self.label.split("/")[0]
            self.message(
                f"{self.done}/{self.total} done, waiting for {model}'s shared concurrency slot "
                f"(or its first reply), elapsed {format_duration(elapsed)}"
            )
            return
        self.message(
            f"{self.done}/{self.total} done, ok={self.ok}, errors={self.errors}, "
            f"cached={self.cached}, {rate:.2f} req/s, ETA {eta}, elapsed {format_duration(elapsed)}"
        )


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_lone_surrogates(text: str | None) -> str | None:
    """Write each lone surrogate as its JSON escape (`\\ud800`), so the text is valid UTF-8.

    A server may return any JSON string, including a half of a surrogate pair, which cannot be
    written to Parquet or UTF-8 files. The escape is the text the server sent, so nothing is
    lost and a JSON answer that held it still parses.
    """
    if text is None or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
