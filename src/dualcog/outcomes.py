"""Outcome classes of requests: what became of each sample's request (answered, truncated,
refused, empty, unparsable, request error), one rule for every caller.

The `parse` job classifies each run once (`request_outcomes`, written beside the parses) and
the explorer, the tables and the leaderboard read that file. It works on Arrow tables.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa

# pyarrow.compute is imported where a non-string column needs it (`blank_list`), dualcog.schemas
# (which loads pyarrow.parquet) by the two table builders: the outcome rules alone load neither.

# finish_reason values meaning the provider withheld the answer.
REFUSAL_FINISH = frozenset({"content_filter", "refusal"})
# Error rows whose type or message names a content filter (e.g. Azure's 400 `content_filter`).
REFUSAL_ERROR = re.compile(r"content[_ -]?(?:filter|policy|management)|refus", re.IGNORECASE)


def blank_texts(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """True where a text is null or only whitespace (`blank_list` as a numpy array)."""

    return np.array(blank_list(values), dtype=bool)


def blank_list(values: pa.ChunkedArray | pa.Array) -> list[bool]:
    """True where a text is null or only whitespace.

    The whitespace is Arrow's (`utf8_trim_whitespace`), which is Python's `str.isspace`, code
    point for code point (tests/workflow/test_job_scripts.py checks every one): a string column is
    judged in Python, so that the `parse` job does not load pyarrow.compute (nor numpy) for it.
    """
    if pa.types.is_string(values.type):
        return [v is None or not v.strip() for v in values.to_pylist()]
    import pyarrow.compute as pc

    trimmed = pc.utf8_trim_whitespace(values.cast(pa.string()))
    empty = pc.invert(pc.cast(pc.utf8_length(trimmed), pa.bool_()))
    # No Python scalar and no bool-to-numpy conversion: pyarrow loads pandas for either.
    return [bool(v) for v in pc.or_kleene(pc.is_null(trimmed), empty).to_pylist()]


def outcome_class(
    status: Any,
    error_type: Any,
    error_message: Any,
    finish_reason: Any,
    refused: bool,
    empty: bool,
    unparsable: bool,
) -> str:
    """The outcome class (`OUTCOMES`) of one response row; the first rule that holds wins.

    Refused: a request error naming a content filter, a refusal finish reason, or a reply
    carrying the provider's `refusal` text (`refused`). `unparsable`: an answer whose
    compatible parse is not fully valid.
    """
    status = str(status)
    if status != "ok":
        error_text = f"{error_type or ''} {error_message or ''}"
        if status == "error" and REFUSAL_ERROR.search(error_text):
            return "refused"
        return "request_error"
    finish = str(finish_reason or "").lower()
    if finish in REFUSAL_FINISH or refused:
        return "refused"
    if finish == "length":
        return "truncated"
    if empty:
        return "empty"
    if unparsable:
        return "unparsable"
    return "answered"


def unparsable_keys(parsed: pa.Table | None) -> set[tuple[Any, Any]]:
    """(sample_id, task) of the answers whose compatible parse (PARSED rows) is not fully
    valid."""
    if parsed is None or parsed.num_rows == 0:
        return set()
    names = ("sample_id", "task", "parse", "stage", "all_valid")
    columns = [parsed.column(name).to_pylist() for name in names]
    return {
        (sample_id, task)
        for sample_id, task, parse, stage, valid in zip(*columns, strict=True)
        if parse == "compatible" and stage != "missing" and valid is not True
    }


# What classifying reads of a responses table (raw_text only to tell empty answers apart).
OUTCOME_COLUMNS = ("sample_id", "task", "status", "raw_text", "finish_reason", "error_type",
                   "error_message", "refusal")  # fmt: skip


# What `response_facts_table` reads of a responses table: its columns less the texts, whose
# flags it keeps instead.
FACT_TEXT_COLUMNS = ("raw_text", "reasoning_text", "refusal")


def _text(responses: pa.Table, name: str) -> pa.ChunkedArray | pa.Array:
    """A text column of `responses`; all null where the table lacks it."""
    if name in responses.column_names:
        return responses.column(name)
    return pa.nulls(responses.num_rows, pa.string())


def text_flags(responses: pa.Table) -> dict[str, list[bool]]:
    """Per response row: `empty` (no answer text, or only whitespace) and `refused` (a
    refusal text), what both `request_outcomes` and `response_facts_table` read; a job
    writing both computes them once and hands them to each."""
    return {
        "empty": blank_list(_text(responses, "raw_text")),
        "refused": [not blank for blank in blank_list(_text(responses, "refusal"))],
    }


def response_facts_table(
    responses: pa.Table, flags: dict[str, list[bool]] | None = None
) -> pa.Table:
    """One run's response rows as schemas.RESPONSE_FACTS: the bookkeeping columns as they are
    (one the table lacks all null), the texts reduced to the flags `empty`, `refused`
    (`text_flags`, computed here unless given) and `has_reasoning` (a reasoning text, or
    reasoning tokens above 0)."""
    from dualcog.schemas import RESPONSE_FACTS, column_array

    n, names = responses.num_rows, set(responses.column_names)

    def kept(field: pa.Field) -> pa.ChunkedArray | pa.Array:
        if field.name not in names:
            return pa.nulls(n, field.type)
        column = responses.column(field.name)
        return column if column.type == field.type else column.cast(field.type)

    columns = {field.name: kept(field) for field in RESPONSE_FACTS if field.type != pa.bool_()}
    reasoning = zip(
        blank_list(_text(responses, "reasoning_text")),
        columns["reasoning_tokens"].to_pylist(),
        strict=True,
    )
    flags = {
        **(text_flags(responses) if flags is None else flags),
        "has_reasoning": [
            not blank or (tokens is not None and tokens > 0) for blank, tokens in reasoning
        ],
    }
    arrays = [
        column_array(flags[field.name], field.type, field.name)
        if field.name in flags
        else columns[field.name]
        for field in RESPONSE_FACTS
    ]
    return pa.Table.from_arrays(arrays, schema=RESPONSE_FACTS)


def request_outcomes(
    responses: pa.Table,
    parsed: pa.Table | None,
    flags: dict[str, list[bool]] | None = None,
) -> pa.Table:
    """One run's outcome classes (schemas.REQUEST_OUTCOMES): sample_id, task, outcome of each
    sample's last response row; its compatible parse in `parsed` (PARSED rows) decides
    `unparsable` (without it no answer is); `flags`: the rows' `text_flags`, computed here
    unless given. The `parse` job writes it once per run (without loading pandas); the
    explorer and the tables read it."""
    from dualcog.schemas import REQUEST_OUTCOMES, table_from_columns

    n, names = responses.num_rows, set(responses.column_names)

    def values(name: str) -> list[Any]:
        return responses.column(name).to_pylist() if name in names else [None] * n

    flags = text_flags(responses) if flags is None else flags
    empty, refused = flags["empty"], flags["refused"]
    keys = unparsable_keys(parsed)
    sample_ids, tasks = values("sample_id"), values("task")
    rows = zip(values("status"), values("error_type"), values("error_message"),
               values("finish_reason"), refused, empty, sample_ids, tasks,
               strict=True)  # fmt: skip
    last: dict[tuple[Any, Any], tuple[int, str]] = {}
    for index, (status, kind, message, finish, refusal, blank, sample_id, task) in enumerate(rows):
        outcome = outcome_class(
            status, kind, message, finish, refusal, blank, (sample_id, task) in keys
        )
        last.pop((task, sample_id), None)  # a later row wins, at its own place
        last[(task, sample_id)] = (index, outcome)
    kept = sorted(last.values())
    return table_from_columns(
        [
            [str(sample_ids[i]) for i, _ in kept],
            [str(tasks[i]) for i, _ in kept],
            [outcome for _, outcome in kept],
        ],
        REQUEST_OUTCOMES,
    )
