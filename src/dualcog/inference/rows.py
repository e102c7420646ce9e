"""RESPONSES rows: what every backend's runner returns, and the table they make."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dualcog import schemas


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
    cached_tokens: int | None = None,
    refusal: str | None = None,
    **record: Any,
) -> dict[str, Any]:
    """One RESPONSES row; a failure never carries answer text. `record`: the request record
    (`schemas.RECORD_FIELDS`, PROTOCOL §11.5) of a request that was posted."""
    unknown = set(record) - set(schemas.RECORD_FIELDS)
    if unknown:
        raise TypeError(f"response_row: unknown fields {sorted(unknown)}")
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
        "cached_tokens": cached_tokens,
        "refusal": refusal,
        **{field: record.get(field) for field in schemas.RECORD_FIELDS},
    }


def responses_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows -> RESPONSES Arrow table; a value that does not fit its column raises, naming it."""
    try:
        return schemas.table_from_rows(rows, schemas.RESPONSES)
    except ValueError as error:
        raise ValueError(f"responses: {error}") from error
