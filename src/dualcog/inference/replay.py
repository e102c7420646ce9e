"""`replay` backend: raw responses read from files (ours, or the authors' `responses.jsonl`).

Rows are in completion order and a resumed run appends, so the last row that is a response
is the one used; which rows are responses is `dualcog.parsing.sources` (docs/protocol.md).
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dualcog.backends import RunInputs
from dualcog.errors import DataError
from dualcog.inference.progress import ProgressFn
from dualcog.inference.rows import response_row
from dualcog.inference.values import as_list, escape_lone_surrogates, is_missing
from dualcog.parsing.sources import record_is_response
from dualcog.schemas import read_arrow

LOG = logging.getLogger(__name__)
# The RESPONSES columns' ranges: a value outside them is stored as null, never a stopped job.
INT_RANGES = {
    "attempts": 2**31 - 1,
    "prompt_tokens": 2**63 - 1,
    "completion_tokens": 2**63 - 1,
    "cached_tokens": 2**63 - 1,
}


def replay_paths(model: Mapping[str, Any]) -> list[Path]:
    value = model.get("replay", model.get("replay_path"))
    if is_missing(value):
        raise ValueError(f"model {model.get('name')!r}: backend replay needs `replay` (a path)")
    paths = [Path(str(p)) for p in ([value] if isinstance(value, (str, Path)) else as_list(value))]
    if not paths:
        raise ValueError(f"model {model.get('name')!r}: `replay` names no file")
    return paths


def _jsonl_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _jsonl_records_by_line(path)  # names the line that is not UTF-8
    records = []
    # A UTF-8 sequence never holds the byte of "\n": the lines are those of the bytes.
    for line_number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            records.append((line_number, _json_object(line, line_number, path)))
    return records


def _json_object(line: str, line_number: int, path: Path) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataError(
            f"line {line_number}: malformed JSON ({error.msg})", file=str(path)
        ) from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise DataError(
            f"line {line_number}: JSON nested too deeply to read (thousands of levels)",
            file=str(path),
        ) from None
    if not isinstance(record, dict):
        raise DataError(f"line {line_number}: expected a JSON object per line", file=str(path))
    return record


def _jsonl_records_by_line(path: Path) -> list[tuple[int, dict[str, Any]]]:
    records = []
    with path.open("rb") as handle:
        for line_number, data in enumerate(handle, start=1):
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as error:
                # Like a malformed JSON line: the file is not what it claims to be.
                raise DataError(
                    f"line {line_number}: not valid UTF-8 (byte 0x{data[error.start]:02x} at "
                    f"column {error.start + 1}); is this a binary file?",
                    file=str(path),
                ) from None
            if line.strip():
                records.append((line_number, _json_object(line, line_number, path)))
    return records


def _parquet_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    table = read_arrow(path)  # not pq.read_table: its dataset import loads pandas
    return [(i + 1, record) for i, record in enumerate(table.to_pylist())]


def read_source(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line or row number, record) pairs in file order."""
    if not path.is_file():
        raise DataError("replay source not found", file=str(path))
    if path.suffix == ".parquet":
        return _parquet_records(path)
    return _jsonl_records(path)


def _record_is_ok(record: Mapping[str, Any]) -> bool:
    # The §10 row rule: every carried status field `ok` (trimmed, any case), text a string.
    return record_is_response(record)


class _Invalid:
    """Metadata values of the wrong type or range in one file: per field, count and first row."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.first: dict[str, int] = {}

    def note(self, field: str, number: int) -> None:
        self.counts[field] += 1
        self.first.setdefault(field, number)

    def warn(self, path: Path, name: str, progress: ProgressFn | None) -> None:
        if not self.counts:
            return
        fields = "; ".join(
            f"{field}: {count} (first at line {self.first[field]})"
            for field, count in sorted(self.counts.items())
        )
        message = (
            f"{name}: replay source {path}: metadata of the wrong type or out of range stored "
            f"as null: {fields}"
        )
        LOG.warning("%s", message)
        if progress is not None:
            progress(message)


def _integer(value: Any, field: str) -> int | None:
    """A non-negative integer within its column (JSON `40` or `40.0`), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= INT_RANGES[field]:
        return value
    return None


def _latency(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value) if abs(value) < 1e308 else math.inf
    return value if math.isfinite(value) and value >= 0 else None


def _details(record: Mapping[str, Any], number: int, invalid: _Invalid) -> dict[str, Any]:
    """Latency, token counts and finish reason from our columns or the authors' raw_response.

    A value of the wrong type or range becomes None and is counted in `invalid`.
    """
    raw = record.get("raw_response")
    raw = raw if isinstance(raw, dict) else {}
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
    # OpenAI-style usage objects nest cached prompt tokens; absent in most records (null).
    prompt_details = usage.get("prompt_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    given = {
        "latency_ms": record.get("latency_ms"),
        "prompt_tokens": record.get("prompt_tokens", usage.get("prompt_tokens")),
        "completion_tokens": record.get("completion_tokens", usage.get("completion_tokens")),
        "cached_tokens": record.get("cached_tokens", prompt_details.get("cached_tokens")),
        "finish_reason": record.get("finish_reason") or raw.get("finish_reason"),
        "refusal": record.get("refusal"),
        "attempts": record.get("attempts"),
    }
    details: dict[str, Any] = {}
    for field, value in given.items():
        if value is None or is_missing(value):  # most fields of most records are absent
            details[field] = None
            continue
        if field == "latency_ms":
            details[field] = _latency(value)
        elif field in ("finish_reason", "refusal"):
            details[field] = escape_lone_surrogates(value) if isinstance(value, str) else None
        else:
            details[field] = _integer(value, field)
        if details[field] is None:
            invalid.note(field, number)
    return details


def replay_rows(
    model: Mapping[str, Any],
    prompts: Sequence[Mapping[str, Any]],
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """One row per prompt from the configured source files (read in the order given)."""
    name = str(model["name"])
    wanted = {str(p["sample_id"]) for p in prompts}
    last_ok: dict[str, dict[str, Any]] = {}
    unknown_ids: set[str] = set()
    unknown_rows = 0
    for path in replay_paths(model):
        invalid = _Invalid()
        for number, record in read_source(path):
            sample_id = record.get("sample_id")
            if not isinstance(sample_id, str) or not sample_id:
                raise DataError(
                    f"row {number} has no string sample_id", file=str(path), field="sample_id"
                )
            if sample_id not in wanted:
                unknown_rows += 1
                unknown_ids.add(sample_id)
                continue
            if _record_is_ok(record):
                # Read now so that the warning names this file; the text as the cache keeps it.
                text = escape_lone_surrogates(str(record["raw_text"]))
                last_ok[sample_id] = {"raw_text": text, **_details(record, number, invalid)}
        invalid.warn(path, name, progress)
    if progress is not None and unknown_rows:
        progress(
            f"{name}: replay ignored {unknown_rows} rows for {len(unknown_ids)} sample ids "
            "not in this prompt set"
        )
    rows = []
    for prompt in prompts:
        record = last_ok.get(str(prompt["sample_id"]))
        if record is None:
            rows.append(
                response_row(
                    prompt,
                    name,
                    "replay",
                    status="missing",
                    error_type="no_response_in_source",
                    error_message="no ok row for this sample in the replay source",
                )
            )
        else:
            rows.append(response_row(prompt, name, "replay", **record))
    if progress is not None:
        found = sum(r["status"] == "ok" for r in rows)
        progress(f"{name}: replay found {found}/{len(rows)} responses")
    return rows


def run_replay(
    model: Mapping[str, Any], prompt_rows: list[dict[str, Any]], inputs: RunInputs
) -> list[dict[str, Any]]:
    """The registry's runner (dualcog.backends): reads only the model's files."""
    return replay_rows(model, prompt_rows, inputs.progress)
