"""Typed Arrow schemas of every artifact the workflow writes (see docs/artifacts.md).

Each stage validates its output against one of these before writing, so a column that
drifts (a float where an int belongs, a renamed field) fails where it is produced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dualcog import atomic

if TYPE_CHECKING:  # pandas is slow to import; jobs that write Arrow tables never need it
    import pandas as pd

BOX = pa.list_(pa.float64())  # [x1, y1, x2, y2]
INTERVALS = pa.list_(pa.list_(pa.float64()))  # [[s, e], ...] in seconds

MEDIA_ITEM = pa.struct(
    [
        ("role", pa.string()),  # reference | target | candidate_A.. | video
        ("path", pa.string()),  # as written in the manifest
        ("resolved_path", pa.string()),  # absolute path on this machine
    ]
)
OPTION = pa.struct(
    [
        ("option_id", pa.string()),
        ("label", pa.string()),
        ("level", pa.string()),  # behavior options: composite | atomic; else null
    ]
)
CANDIDATE = pa.struct([("option_id", pa.string()), ("bbox", BOX), ("view", pa.string())])
GOLD_ITEM = pa.struct(
    [
        ("option_id", pa.string()),
        ("label", pa.string()),
        ("level", pa.string()),  # composite | atomic
        ("intervals", INTERVALS),
    ]
)
ANSWER_ITEM = pa.struct([("option_id", pa.string()), ("intervals", INTERVALS)])

SAMPLES = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),  # request kind id (tasks.REQUEST_KINDS)
        ("upstream_task_type", pa.string()),
        ("modality", pa.string()),
        ("scene_id", pa.string()),
        ("engine", pa.string()),
        ("landmark_id", pa.string()),
        ("landmark_category", pa.string()),
        ("landmark_description", pa.string()),
        ("difficulty", pa.string()),  # 4way/8way, or easy/medium/hard (difficulty_band)
        ("manifest_path", pa.string()),
        ("manifest_order", pa.int32()),  # position of the sample in its manifest
        ("system_prompt", pa.string()),  # stored prompt, null when absent
        ("user_prompt", pa.string()),
        ("prompt_vars", pa.string()),  # JSON object of template variables
        ("media", pa.list_(MEDIA_ITEM)),  # in the order sent to the model
        ("options", pa.list_(OPTION)),
        # image tasks
        ("context_index", pa.int32()),
        ("context_slot", pa.int32()),
        ("gold_option_id", pa.string()),
        ("gold_bbox", BOX),
        # Legacy scoring (docs/protocol.md): the gold id set (`answer_option_ids` stripped,
        # empties dropped, else [gold_option_id]) and `answer_bbox_xyxy_norm` as released.
        ("gold_option_ids", pa.list_(pa.string())),
        ("answer_bbox", BOX),
        ("candidates", pa.list_(CANDIDATE)),  # future_observation only
        # video tasks
        ("mission_id", pa.string()),
        ("set_id", pa.string()),
        ("composite_mission", pa.bool_()),
        ("fps", pa.float64()),
        ("frame_count", pa.int64()),
        ("duration_sec", pa.float64()),
        ("gold_items", pa.list_(GOLD_ITEM)),  # behavior
        ("gold_visible_count", pa.int64()),  # visibility
        ("gold_visible_intervals", INTERVALS),
    ]
)

PROMPTS = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),
        ("request_key", pa.string()),  # hash of all that decides the request but the model
        ("system_text", pa.string()),
        ("user_text", pa.string()),
        ("media_keys", pa.list_(pa.string())),  # content hashes in the media store, in order
        ("media_kinds", pa.list_(pa.string())),  # image | video | frames
        ("offered_option_ids", pa.list_(pa.string())),
    ]
)

# results/served/<run>.frames.parquet: per frames-mode video request of a served run, the
# frames sent (media keys, in order) and their timestamps in the video (dualcog.serving.facts).
SERVED_FRAMES = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),
        ("request_key", pa.string()),
        ("frame_keys", pa.list_(pa.string())),
        ("timestamps_sec", pa.list_(pa.float64())),
    ]
)

RESPONSE_STATUSES = ("ok", "error", "missing")

RESPONSES = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),
        ("model", pa.string()),
        ("backend", pa.string()),
        ("request_key", pa.string()),
        ("raw_text", pa.string()),  # null unless status == ok
        ("reasoning_text", pa.string()),  # provider's separate reasoning field; never parsed
        ("status", pa.string()),  # ok | error | missing
        ("error_type", pa.string()),
        ("error_message", pa.string()),
        ("attempts", pa.int32()),
        ("latency_ms", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),  # usage.completion_tokens_details.reasoning_tokens
        ("finish_reason", pa.string()),
        ("cached_tokens", pa.int64()),  # usage.prompt_tokens_details.cached_tokens (of prompt)
        ("refusal", pa.string()),  # the provider's message.refusal text, when it declined
        # PROTOCOL §11.5: what was sent (null where nothing was posted, e.g. built-ins)
        ("request_sha256", pa.string()),  # SHA-256 of the exact body bytes posted
        ("request_temperature", pa.float64()),
        ("request_max_tokens", pa.int64()),  # null: no max_tokens was sent
        ("request_switch", pa.string()),  # JSON: mode, family, body fields, prefill, prefix
        ("request_prefill", pa.string()),  # the assistant prefill message, if any
        ("request_reencoded", pa.string()),  # JSON list of re-encoded videos, if any
    ]
)
RECORD_FIELDS = (
    "request_sha256",
    "request_temperature",
    "request_max_tokens",
    "request_switch",
    "request_prefill",
    "request_reencoded",
)

PARSE_STAGES = ("strict", "fence", "balanced", "keys", "invalid", "missing", "legacy")

PARSED = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),
        ("parse", pa.string()),  # strict | compatible | legacy
        ("stage", pa.string()),
        ("all_valid", pa.bool_()),
        # image fields
        ("option_ids", pa.list_(pa.string())),  # legacy may hold several letters
        ("option_valid", pa.bool_()),
        ("option_reason", pa.string()),
        ("bbox", BOX),  # normalized, after scale and reordering
        ("bbox_valid", pa.bool_()),
        ("bbox_reason", pa.string()),
        ("bbox_rescaled", pa.bool_()),
        ("bbox_reordered", pa.bool_()),
        ("run_scale", pa.string()),
        # behavior
        ("answers", pa.list_(ANSWER_ITEM)),
        ("answers_valid", pa.bool_()),
        ("answers_reason", pa.string()),
        # visibility
        ("visible_count", pa.int64()),
        ("count_valid", pa.bool_()),
        ("count_reason", pa.string()),
        ("visible_intervals", INTERVALS),
        ("intervals_valid", pa.bool_()),
        ("intervals_reason", pa.string()),
    ]
)

# The request outcome classes, in the order `dualcog.outcomes.outcome_class` tries them after
# its errors (docs/usage-and-cost.md); here, free of pandas, for the explorer pages too.
OUTCOMES = ("answered", "truncated", "refused", "empty", "unparsable", "request_error")
OUTCOME_TITLES = {
    "answered": "Answered",
    "truncated": "Truncated",
    "refused": "Refused",
    "empty": "Empty",
    "unparsable": "Unparsable",
    "request_error": "Request error",
}
# One row per sample of a run with a response row: its request outcome class (OUTCOMES),
# written by the `parse` job, read by the explorer and the tables.
REQUEST_OUTCOMES = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),
        ("outcome", pa.string()),
    ]
)

# One run's response rows without their texts (dualcog.outcomes.response_facts_table), written
# by the `parse` job: what the usage table, the mode check and the run summary read, instead
# of every responses file with its texts.
RESPONSE_FACTS = pa.schema(
    [
        ("sample_id", pa.string()),
        ("task", pa.string()),
        ("model", pa.string()),
        ("backend", pa.string()),
        ("status", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("finish_reason", pa.string()),
        ("error_type", pa.string()),
        ("error_message", pa.string()),
        ("empty", pa.bool_()),  # no answer text (null or only whitespace)
        ("refused", pa.bool_()),  # a refusal text
        ("has_reasoning", pa.bool_()),  # a reasoning text, or reasoning tokens above 0
    ]
)

METRICS = pa.schema(
    [
        ("model", pa.string()),
        ("task", pa.string()),
        ("parse", pa.string()),
        ("stratum", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("n", pa.int64()),
    ]
)


_MISFITS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeError)


def column_array(values: Sequence[Any], type_: pa.DataType, column: str = "?") -> pa.Array:
    """Plain Python values (None for null) as an Arrow array of `type_`; a float NaN is a
    null, as pandas writes it. A value that does not fit raises ValueError naming the column
    and the first row that does not fit."""
    try:
        return pa.array(values, type=type_, from_pandas=True)
    except _MISFITS as error:
        for row, value in enumerate(values):
            try:
                pa.array([value], type=type_, from_pandas=True)
            except _MISFITS as misfit:
                raise ValueError(f"column {column!r}, row {row}: {misfit}") from error
        raise ValueError(f"column {column!r}: {error}") from error


def table_from_columns(columns: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """Columns of plain values, in schema order, as a table of `schema` (`column_array`)."""
    arrays = [
        column_array(values, field.type, field.name)
        for field, values in zip(schema, columns, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Row mappings as a table of `schema`: a field a row lacks is null, other keys ignored."""
    return table_from_columns([[row.get(name) for row in rows] for name in schema.names], schema)


def rows_of_tasks(table: pa.Table, tasks: Iterable[str]) -> pa.Table:
    """The rows of `table` whose `task` is one of `tasks`, in order."""
    import pyarrow.compute as pc  # here: only the infer and render jobs filter by task

    wanted = pa.array(sorted(set(tasks)), type=pa.string())
    return table.filter(pc.is_in(table.column("task"), value_set=wanted))


def to_table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """Convert a frame to `schema`, adding absent columns as nulls, in schema order."""
    frame = frame.copy()
    for name in schema.names:
        if name not in frame.columns:
            frame[name] = None
        elif pa.types.is_nested(schema.field(name).type) and frame[name].isna().all():
            frame[name] = None  # all missing (e.g. no task has candidates): pandas made it float
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)


def conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table`'s columns of `schema`, in its order and types: what `write_table` writes."""
    table = table.select(schema.names)
    if not table.schema.equals(schema, check_metadata=True):
        table = table.cast(schema)
    return table


def padded(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with every column of `schema` (absent ones null), in schema order, typed."""
    for field in schema:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return conformed(table, schema)


def write_table(
    frame: pd.DataFrame | pa.Table,
    schema: pa.Schema,
    path: str | Path,
    metadata: dict[bytes, bytes] | None = None,
) -> None:
    """Write a typed Parquet artifact atomically (temp file then rename).

    `metadata` is added to the file's schema metadata (e.g. the result stamp).
    """
    table = conformed(frame if isinstance(frame, pa.Table) else to_table(frame, schema), schema)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    atomic.write_with(path, lambda tmp: pq.write_table(table, tmp))


def read_arrow(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """One Parquet artifact as an Arrow table (optionally only `columns`).

    `pq.ParquetFile` rather than `pq.read_table`: the latter goes through `pyarrow.dataset`,
    whose import pulls in pandas (a fifth of a CPU second), which Arrow-only jobs avoid.
    """
    return pq.ParquetFile(path).read(columns=columns)
