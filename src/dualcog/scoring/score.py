"""`score_tables` / `score_samples`: one model run's parsed responses against the samples.

The work runs on Arrow tables: list columns (boxes, intervals, answer items) stay flat
buffers that the scorers read as numpy arrays, never as one Python object per value.
"""

from __future__ import annotations

from dataclasses import dataclass

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

# Columns each scorer reads: (sample columns, parsed columns); flags are null-as-False.
_COLUMNS = {
    "image": (
        ("sample_id", "task", "difficulty", "gold_option_id", "gold_bbox", "candidates",
         "gold_option_ids", "answer_bbox"),  # the last two: legacy scoring (§3.4)
        ("all_valid", "option_ids", "option_valid", "bbox", "bbox_valid"),
    ),
    "behavior": (
        ("sample_id", "task", "difficulty", "options", "gold_items", "duration_sec",
         "composite_mission"),
        ("all_valid", "answers", "answers_valid"),
    ),
    "landmark_visibility": (
        ("sample_id", "task", "difficulty", "gold_visible_count", "gold_visible_intervals",
         "duration_sec"),
        ("all_valid", "visible_count", "count_valid", "visible_intervals", "intervals_valid"),
    ),
}  # fmt: skip
_FLAGS = ("all_valid", "option_valid", "bbox_valid", "answers_valid", "count_valid",
          "intervals_valid")  # fmt: skip
_SCORERS = {
    "image": (score_image_rows, 1),
    "behavior": (score_behavior_rows, 2),
    "landmark_visibility": (score_visibility_rows, 1),
}


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


def _keys(sample_id: pa.Array | pa.ChunkedArray, parse: pa.Array) -> pa.Array:
    return single(pc.binary_join_element_wise(sample_id, parse, "\x1f"))


@dataclass(frozen=True)
class RowIndex:
    """Every (sample, parse mode) a run is scored on, as positions into the two tables."""

    sample: np.ndarray  # row of samples
    parse: pa.Array  # parse mode
    parsed: pa.Array  # row of parsed, null where the run has no row


def row_index(samples: pa.Table, parsed: pa.Table, parses: tuple[str, ...]) -> RowIndex:
    """Expected rows: each sample in every mode of its modality found in `parses`, modes in
    order, samples in order; joined to the parsed rows on (sample_id, parse)."""
    tasks = samples["task"]
    unknown = set(pc.unique(tasks).to_pylist()) - set(REQUEST_BY_TASK)
    if unknown:
        raise ValueError(f"samples hold unknown request kinds: {sorted(unknown, key=str)}")
    if pc.count_distinct(samples["sample_id"]).as_py() < samples.num_rows:
        raise ValueError("samples hold duplicate sample ids")
    positions, modes = [], []
    for parse in parses:
        tasks_in_mode = [task for task in REQUEST_BY_TASK if parse in parse_modes_of(task)]
        chosen = np.flatnonzero(flags(pc.is_in(tasks, pa.array(tasks_in_mode))))
        positions.append(chosen)
        modes.append(np.full(len(chosen), parse, dtype=object))
    sample = np.concatenate(positions) if positions else np.empty(0, np.int64)
    parse_column = pa.array(np.concatenate(modes) if modes else [], pa.string())
    parsed_keys = _keys(parsed["sample_id"], parsed["parse"])
    if len(pc.unique(parsed_keys)) < parsed.num_rows:
        raise ValueError("parsed holds several rows for one (sample_id, parse)")
    wanted = _keys(samples["sample_id"].take(pa.array(sample)), parse_column)
    return RowIndex(sample, parse_column, pc.index_in(wanted, value_set=parsed_keys))


def scorer_rows(
    samples: pa.Table, parsed: pa.Table, index: RowIndex, at: np.ndarray, kind: str
) -> pa.Table:
    """The rows `at` (positions into `index`) with the columns the `kind` scorer reads.

    An absent parsed row or stage `missing` is unanswered: `responded` is False and every
    validity flag False.
    """
    sample_columns, parsed_columns = _COLUMNS[kind]
    where = pa.array(at)
    rows = samples.select(list(sample_columns)).take(pa.array(index.sample[at]))
    found = index.parsed.take(where)
    fields = parsed.select(["stage", *parsed_columns]).take(found)
    responded = flags(pc.not_equal(single(fields["stage"]), "missing"))  # no row: False
    rows = rows.append_column("parse", index.parse.take(where))
    rows = rows.append_column("responded", pa.array(responded))
    for name in parsed_columns:
        column = fields[name]
        if name in _FLAGS:
            column = pa.array(flags(column) & responded)
        rows = rows.append_column(name, column)
    return rows


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
    samples, parsed = as_table(samples, SAMPLES), as_table(parsed, PARSED)
    index = row_index(samples, parsed, parses)
    task = samples["task"].take(pa.array(index.sample))
    kinds = {
        "image": flags(pc.is_in(task, pa.array(list(IMAGE_TASKS)))),
        "behavior": flags(pc.equal(task, "behavior")),
        "landmark_visibility": flags(pc.equal(task, "landmark_visibility")),
    }
    parts = []
    for kind, mask in kinds.items():
        at = np.flatnonzero(mask)
        if len(at):
            scorer, rows_per_row = _SCORERS[kind]
            columns = scorer(scorer_rows(samples, parsed, index, at, kind))
            parts.append(_scored(columns, rows_per_row * len(at)))
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
