"""`score_samples`: one model run's parsed responses against the samples.

The work runs on Arrow tables: the join of samples and parsed rows is integer positions
(`row_index`, by Arrow's hash lookups), and the scorers read list columns (boxes, intervals,
answer items) as flat arrays by position (`row_source.RowSource`), never as one Python object
per value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.schemas import PARSED, SAMPLES, padded
from dualcog.scoring.columns import bool_array, flags, single
from dualcog.scoring.image import score_image
from dualcog.scoring.row_source import RowSource
from dualcog.scoring.schema import SCORES
from dualcog.scoring.video import score_behavior, score_visibility
from dualcog.tasks import IMAGE_TASKS, PARSE_MODES, REQUEST_BY_TASK

VIDEO_PARSE_MODES = ("strict", "compatible")  # legacy exists for image tasks only (§3.4)

# Columns each scorer reads: (sample columns, parsed columns); flags are null-as-False.
# `scorer_rows` joins them into one table for the `score_*_rows` entry points.
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
# Every samples column a scorer reads (`score_samples` treats the others as null): a job reads
# only these of the benchmark's samples, not their prompts and media lists.
SCORED_SAMPLE_COLUMNS = tuple(dict.fromkeys(c for sample, _ in _COLUMNS.values() for c in sample))
_FLAGS = ("all_valid", "option_valid", "bbox_valid", "answers_valid", "count_valid",
          "intervals_valid")  # fmt: skip
_SCORERS = {
    "image": (score_image, 1),
    "behavior": (score_behavior, 2),
    "landmark_visibility": (score_visibility, 1),
}


def parse_modes_of(task: str) -> tuple[str, ...]:
    """Parse modes a request kind is scored in."""
    return PARSE_MODES if task in IMAGE_TASKS else VIDEO_PARSE_MODES


def _keys(sample_id: pa.Array | pa.ChunkedArray, parse: pa.Array) -> pa.Array:
    return single(pc.binary_join_element_wise(sample_id, parse, "\x1f"))


def _positions(found: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """index_in results as int64 positions, -1 where not found."""
    return np.asarray(pc.fill_null(found, -1).to_numpy(), dtype=np.int64)


def _task_codes(tasks: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Position of each sample's request kind in REQUEST_BY_TASK; unknown kinds raise."""
    code = _positions(pc.index_in(tasks, value_set=pa.array(list(REQUEST_BY_TASK))))
    if (code < 0).any():
        unknown = pc.unique(single(tasks).filter(pa.array(code < 0))).to_pylist()
        raise ValueError(f"samples hold unknown request kinds: {sorted(unknown, key=str)}")
    return code


def _runs_of(names: tuple[str, ...], code: np.ndarray) -> pa.ChunkedArray:
    """`names[code]` as a string column, built run by run (codes come in long runs)."""
    breaks = [0, *(np.flatnonzero(np.diff(code) != 0) + 1).tolist(), len(code)]
    return pa.chunked_array(
        [pa.repeat(names[code[a]], b - a) for a, b in zip(breaks[:-1], breaks[1:], strict=False)
         if b > a],
        type=pa.string(),
    )  # fmt: skip


@dataclass(frozen=True)
class RowIndex:
    """Every (sample, parse mode) a run is scored on, as positions into the two tables."""

    sample: np.ndarray  # row of samples
    mode: np.ndarray  # position of the row's parse mode in `parses`
    parses: tuple[str, ...]
    parsed: np.ndarray  # row of parsed, -1 where the run has no row
    task: np.ndarray  # position of the row's request kind in REQUEST_BY_TASK

    def in_mode(self, parse: str) -> np.ndarray:
        """Which rows are in parse mode `parse`."""
        if parse not in self.parses:
            return np.zeros(len(self.mode), bool)
        return self.mode == self.parses.index(parse)

    def parse(self, at: np.ndarray) -> pa.ChunkedArray:
        """The parse mode names of the rows `at` (ascending)."""
        return _runs_of(self.parses, self.mode[at])


def _parsed_positions(samples: pa.Table, parsed: pa.Table, modes: tuple[str, ...]) -> np.ndarray:
    """Row of parsed at `sample * len(modes) + mode` (-1: none), for every sample and mode.

    The join is on integers: a sample's position (one hash lookup of every sample_id, which
    also finds duplicate sample ids) and the parse mode's position in `modes`.
    """
    sample_ids = single(samples["sample_id"])
    n, m = samples.num_rows, len(modes)
    ids = pa.chunked_array([sample_ids, *single_chunks(parsed["sample_id"])], type=sample_ids.type)
    position = _positions(pc.index_in(ids, value_set=sample_ids))
    if sample_ids.null_count or not np.array_equal(position[:n], np.arange(n)):
        raise ValueError("samples hold duplicate sample ids")
    position = position[n:]
    mode = _positions(pc.index_in(parsed["parse"], value_set=pa.array(list(modes))))
    joined = (position >= 0) & (mode >= 0)
    rows = np.flatnonzero(joined)
    key = position[rows] * m + mode[rows]
    lookup = np.full(n * m, -1, np.int64)
    lookup[key] = rows
    several = not np.array_equal(lookup[key], rows)
    others = np.flatnonzero(~joined)  # unknown sample or mode: compare them as strings
    if not several and len(others) > 1:
        where = pa.array(others)
        keys = _keys(parsed["sample_id"].take(where), parsed["parse"].take(where))
        several = len(pc.unique(keys)) < len(others)
    if several:
        raise ValueError("parsed holds several rows for one (sample_id, parse)")
    return lookup


def single_chunks(array: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return list(array.chunks) if isinstance(array, pa.ChunkedArray) else [array]


def row_index(samples: pa.Table, parsed: pa.Table, parses: tuple[str, ...]) -> RowIndex:
    """Expected rows: each sample in every mode of its modality found in `parses`, modes in
    order, samples in order; joined to the parsed rows on (sample_id, parse)."""
    task = _task_codes(samples["task"])
    modes = tuple(dict.fromkeys((*parses, *PARSE_MODES)))
    lookup = _parsed_positions(samples, parsed, modes)
    kinds = list(REQUEST_BY_TASK)
    positions, blocks, found = [], [], []
    for block, parse in enumerate(parses):
        in_mode = np.array([parse in parse_modes_of(kind) for kind in kinds], bool)
        chosen = np.flatnonzero(in_mode[task]) if len(task) else np.empty(0, np.int64)
        positions.append(chosen)
        blocks.append(np.full(len(chosen), block, np.int64))
        found.append(lookup[chosen * len(modes) + modes.index(parse)])
    empty = np.empty(0, np.int64)
    sample = np.concatenate(positions) if positions else empty
    return RowIndex(
        sample=sample,
        mode=np.concatenate(blocks) if blocks else empty,
        parses=tuple(parses),
        parsed=np.concatenate(found) if found else empty,
        task=task[sample],
    )


def scorer_rows(
    samples: pa.Table, parsed: pa.Table, index: RowIndex, at: np.ndarray, kind: str
) -> pa.Table:
    """The rows `at` (positions into `index`) with the columns the `kind` scorer reads.

    An absent parsed row or stage `missing` is unanswered: `responded` is False and every
    validity flag False.
    """
    sample_columns, parsed_columns = _COLUMNS[kind]
    rows = samples.select(list(sample_columns)).take(pa.array(index.sample[at]))
    positions = index.parsed[at]
    found = pa.array(positions, mask=positions < 0)
    fields = parsed.select(["stage", *parsed_columns]).take(found)
    responded = flags(pc.not_equal(single(fields["stage"]), "missing"))  # no row: False
    rows = rows.append_column("parse", index.parse(at))
    rows = rows.append_column("responded", pa.array(responded))
    for name in parsed_columns:
        column = fields[name]
        if name in _FLAGS:
            column = pa.array(flags(column) & responded)
        rows = rows.append_column(name, column)
    return rows


def _scored(columns: dict, n: int) -> pa.Table:
    arrays = []
    for field in SCORES:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, np.ndarray) and value.dtype == bool and field.type == pa.bool_():
            arrays.append(bool_array(value))
        elif isinstance(value, np.ndarray):
            arrays.append(pa.array(value, type=field.type))
        else:
            arrays.append(value.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=SCORES)


def score_samples(
    samples: pa.Table, parsed: pa.Table, parses: tuple[str, ...] = PARSE_MODES
) -> pa.Table:
    """Per-sample, per-parse score rows (Arrow, schema `SCORES`) of one model run.

    Every sample of `samples` is scored in every parse mode of its modality (image: strict,
    compatible, legacy; video: strict, compatible) found in `parses`; a sample without a
    parsed row there is a missing response. Behavior samples give a composite_behavior and
    an atomic_behavior row. `samples` (SAMPLES) and `parsed` (PARSED) may lack the columns no
    scorer reads (SCORED_SAMPLE_COLUMNS); those count as null.
    """
    samples, parsed = padded(samples, SAMPLES), padded(parsed, PARSED)
    index = row_index(samples, parsed, parses)
    kinds = list(REQUEST_BY_TASK)
    kind_of_task = {
        "image": np.array([kind in IMAGE_TASKS for kind in kinds], bool),
        "behavior": np.array([kind == "behavior" for kind in kinds], bool),
        "landmark_visibility": np.array([kind == "landmark_visibility" for kind in kinds]),
    }
    in_legacy = index.in_mode("legacy")
    parts = []
    for kind, of_task in kind_of_task.items():
        at = np.flatnonzero(of_task[index.task])
        if not len(at):
            continue
        scorer, rows_per_row = _SCORERS[kind]
        every = len(at) == len(index.sample)  # no copies of the positions then
        sample_at = index.sample if every else index.sample[at]
        parsed_at = index.parsed if every else index.parsed[at]
        legacy = in_legacy if every else in_legacy[at]
        source = RowSource.of(samples, parsed, sample_at, parsed_at, index.parse(at), legacy)
        columns = scorer(source)
        parts.append(_scored(columns, rows_per_row * len(at)))
    if not parts:
        return SCORES.empty_table()
    return pa.concat_tables(parts)
