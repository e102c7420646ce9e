"""`replay` backend: raw responses read from files (ours, or the authors' `responses.jsonl`).

Rows are in completion order and a resumed run appends, so the last row that is a response
is the one used; which rows are responses is `dualcog.parsing.sources` (docs/protocol.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from dualcog.errors import DataError
from dualcog.inference.common import ProgressFn, as_list, is_missing, response_row
from dualcog.parsing.sources import record_is_response


def replay_paths(model: Mapping[str, Any]) -> list[Path]:
    value = model.get("replay", model.get("replay_path"))
    if is_missing(value):
        raise ValueError(f"model {model.get('name')!r}: backend replay needs `replay` (a path)")
    paths = [Path(str(p)) for p in ([value] if isinstance(value, (str, Path)) else as_list(value))]
    if not paths:
        raise ValueError(f"model {model.get('name')!r}: `replay` names no file")
    return paths


def _jsonl_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    records = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataError(
                    f"line {line_number}: malformed JSON ({error.msg})", file=str(path)
                ) from None
            if not isinstance(record, dict):
                raise DataError(
                    f"line {line_number}: expected a JSON object per line", file=str(path)
                )
            records.append((line_number, record))
    return records


def _parquet_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    table = pq.read_table(path)
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


def _optional_number(value: Any, kind: type) -> Any:
    if is_missing(value) or isinstance(value, bool):
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def _details(record: Mapping[str, Any]) -> dict[str, Any]:
    """Latency, token counts and finish reason from our columns or the authors' raw_response."""
    raw = record.get("raw_response")
    raw = raw if isinstance(raw, dict) else {}
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
    return {
        "latency_ms": _optional_number(record.get("latency_ms"), float),
        "prompt_tokens": _optional_number(
            record.get("prompt_tokens", usage.get("prompt_tokens")), int
        ),
        "completion_tokens": _optional_number(
            record.get("completion_tokens", usage.get("completion_tokens")), int
        ),
        "finish_reason": record.get("finish_reason") or raw.get("finish_reason"),
        "attempts": _optional_number(record.get("attempts"), int),
    }


def replay_rows(
    model: Mapping[str, Any],
    prompts: Sequence[Mapping[str, Any]],
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """One row per prompt from the configured source files (read in the order given)."""
    name = str(model["name"])
    wanted = {str(p["sample_id"]) for p in prompts}
    last_ok: dict[str, Mapping[str, Any]] = {}
    unknown_ids: set[str] = set()
    unknown_rows = 0
    for path in replay_paths(model):
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
                last_ok[sample_id] = record
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
            rows.append(
                response_row(
                    prompt, name, "replay", raw_text=str(record["raw_text"]), **_details(record)
                )
            )
    if progress is not None:
        found = sum(r["status"] == "ok" for r in rows)
        progress(f"{name}: replay found {found}/{len(rows)} responses")
    return rows
