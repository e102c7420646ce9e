"""`score_tables` / `score_samples`: one model run's parsed responses against the samples.

The work runs on Arrow tables: list columns (boxes, intervals, answer items) stay flat
buffers that the scorers read as numpy arrays, never as one Python object per value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.schemas import PARSED, SAMPLES, to_table
from dualcog.scoring.columns import flags, single
from dualcog.scoring.image import score_image_rows
from dualcog.scoring.schema import SCORES, conform_scores, empty_scores
from dualcog.scoring.video import score_behavior_rows, score_visibility_rows
from dualcog.tasks import IMAGE_TASKS, PARSE_MODES, REQUEST_BY_TASK

VIDEO_PARSE_MODES = ("strict", "compatible")  # legacy exists for image tasks only (§3.4)

_PARSED_COLUMNS = (
    "stage", "all_valid", "option_ids", "option_valid", "bbox", "bbox_valid", "answers",
    "answers_valid", "visible_count", "count_valid", "visible_intervals", "intervals_valid",
)  # fmt: skip
_FLAGS = ("all_valid", "option_valid", "bbox_valid", "answers_valid", "count_valid",
          "intervals_valid")  # fmt: skip
_SAMPLE_COLUMNS = (
    "sample_id", "task", "difficulty", "options", "gold_option_id", "gold_bbox", "candidates",
    "gold_option_ids", "answer_bbox", "composite_mission", "duration_sec", "gold_items",
    "gold_visible_count", "gold_visible_intervals",
)  # fmt: skip


def parse_modes_of(task: str) -> tuple[str, ...]:
    """Parse modes a request kind is scored in."""
    return PARSE_MODES if task in IMAGE_TASKS else VIDEO_PARSE_MODES


def as_table(frame: pd.DataFrame | pa.Table, schema: pa.Schema) -> pa.Table:
    """A frame or table with every column of `schema` (absent ones null), typed."""
    if not isinstance(frame, pa.Table):
        return to_table(frame, schema)
    for field in schema:
        if field.name not in frame.column_names:
            frame = frame.append_column(field, pa.nulls(frame.num_rows, field.type))
    return frame.select(schema.names).cast(schema)


def _keys(table: pa.Table) -> pa.Array:
    return single(pc.binary_join_element_wise(table["sample_id"], table["parse"], "\x1f"))


def expected_rows(samples: pa.Table, parses: tuple[str, ...] = PARSE_MODES) -> pa.Table:
    """Every (sample, parse mode) the run is scored on, sample columns attached."""
    tasks = samples["task"]
    unknown = {t for t in pc.unique(tasks).to_pylist()} - set(REQUEST_BY_TASK)
    if unknown:
        raise ValueError(f"samples hold unknown request kinds: {sorted(unknown, key=str)}")
    if pc.count_distinct(samples["sample_id"]).as_py() < samples.num_rows:
        raise ValueError("samples hold duplicate sample ids")
    base = samples.select(list(_SAMPLE_COLUMNS))
    parts = []
    for parse in parses:
        tasks_in_mode = [task for task in REQUEST_BY_TASK if parse in parse_modes_of(task)]
        part = base.filter(pc.is_in(tasks, pa.array(tasks_in_mode)))
        parts.append(part.append_column("parse", pa.array([parse] * part.num_rows, pa.string())))
    if not parts:
        return base.slice(0, 0).append_column("parse", pa.array([], pa.string()))
    return pa.concat_tables(parts)


def attach_parsed(expected: pa.Table, parsed: pa.Table) -> pa.Table:
    """Join parsed fields onto expected rows; absent rows and stage `missing` are unanswered."""
    parsed_keys = _keys(parsed)
    if pc.count_distinct(parsed_keys, mode="all").as_py() < parsed.num_rows:
        raise ValueError("parsed holds several rows for one (sample_id, parse)")
    position = pc.index_in(_keys(expected), value_set=parsed_keys)
    fields = parsed.select(list(_PARSED_COLUMNS)).take(position)
    stage = single(fields["stage"])
    responded = flags(pc.not_equal(stage, "missing"))  # null stage (no row) -> False
    merged = expected
    for name in _PARSED_COLUMNS:
        column = fields[name]
        if name in _FLAGS:
            column = pa.array(flags(column) & responded)
        merged = merged.append_column(name, column)
    return merged.append_column("responded", pa.array(responded))


def scores_frame(table: pa.Table) -> pd.DataFrame:
    """SCORES rows as pandas with nullable dtypes (object strings, boolean, Int64)."""
    return conform_scores(table.to_pandas())


def _scored(columns: dict, n: int) -> pa.Table:
    arrays = []
    for field in SCORES:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, np.ndarray):
            arrays.append(pa.array(value, type=field.type))
        else:
            arrays.append(single(value).cast(field.type))
    return pa.Table.from_arrays(arrays, schema=SCORES)


def score_tables(
    samples: pa.Table, parsed: pa.Table, parses: tuple[str, ...] = PARSE_MODES
) -> pa.Table:
    """Per-sample, per-parse score rows (Arrow, schema `SCORES`) of one model run.

    Every sample of `samples` is scored in every parse mode of its modality (image: strict,
    compatible, legacy; video: strict, compatible) found in `parses`; a sample without a
    parsed row there is a missing response. Behavior samples give a composite_behavior and
    an atomic_behavior row.
    """
    rows = attach_parsed(expected_rows(samples, parses), parsed)
    tasks = rows["task"]
    parts = []
    image = rows.filter(pc.is_in(tasks, pa.array(list(IMAGE_TASKS))))
    if image.num_rows:
        parts.append(_scored(score_image_rows(image), image.num_rows))
    behavior = rows.filter(pc.equal(tasks, "behavior"))
    if behavior.num_rows:
        parts.append(_scored(score_behavior_rows(behavior), 2 * behavior.num_rows))
    visibility = rows.filter(pc.equal(tasks, "landmark_visibility"))
    if visibility.num_rows:
        parts.append(_scored(score_visibility_rows(visibility), visibility.num_rows))
    if not parts:
        return SCORES.empty_table()
    return pa.concat_tables(parts)


def score_samples(
    samples: pd.DataFrame | pa.Table,
    parsed: pd.DataFrame | pa.Table,
    parses: tuple[str, ...] = PARSE_MODES,
) -> pd.DataFrame:
    """`score_tables` as a pandas frame (nullable dtypes), from frames or tables."""
    table = score_tables(as_table(samples, SAMPLES), as_table(parsed, PARSED), parses)
    return scores_frame(table) if table.num_rows else empty_scores()
