"""Scored rows as positions into the samples and parsed tables, never as joined copies.

A scored row is (sample position, parse mode, parsed position or -1). Scorers read a sample
column once per sample and a parsed column once per parsed row, then gather numbers by
position; list columns are read as (row, item index) pairs into their flattened items, so
no nested Arrow column is copied row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.scoring.columns import (
    at_rows,
    counts,
    flags,
    flatten,
    floats,
    interval_pairs,
    list_layout,
    single,
    take_rows,
)


def ranges(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranges [start[i], start[i] + count[i]) one after another: (i, value) per item."""
    owner = np.repeat(np.arange(len(count)), count)
    value = np.arange(len(owner)) - np.repeat(np.cumsum(count) - count - start, count)
    return owner, value


def interval_items(
    intervals: pa.Array, items: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`interval_pairs` of the rows `items` of a list<list<double>> column, as if those rows
    had been taken: (position in `items`, start, end, well formed) per interval."""
    owner, start, end, pair = interval_pairs(intervals)
    if len(items) == len(intervals) and np.array_equal(items, np.arange(len(items))):
        return owner, start, end, pair
    count = np.bincount(owner, minlength=len(intervals))
    first = np.cumsum(count) - count
    which, at = ranges(first[items], count[items])
    return which, start[at], end[at], pair[at]


@dataclass(frozen=True)
class RowSource:
    """Row i is sample `sample_at[i]` in parse mode `parse[i]`, answered by parsed row
    `parsed_at[i]` (-1: none); `responded` is False where there is no answer or its stage
    is `missing`; `legacy` is True where the parse mode is legacy."""

    samples: pa.Table
    parsed: pa.Table
    sample_at: np.ndarray
    parsed_at: np.ndarray
    parse: pa.Array | pa.ChunkedArray
    responded: np.ndarray
    legacy: np.ndarray

    @classmethod
    def of(
        cls,
        samples: pa.Table,
        parsed: pa.Table,
        sample_at: np.ndarray,
        parsed_at: np.ndarray,
        parse: pa.Array | pa.ChunkedArray,
        legacy: np.ndarray,
    ) -> RowSource:
        answered = flags(pc.not_equal(single(parsed["stage"]), "missing"))
        responded = at_rows(answered, parsed_at, False)
        return cls(samples, parsed, sample_at, parsed_at, parse, responded, legacy)

    @classmethod
    def joined(cls, rows: pa.Table) -> RowSource:
        """Rows with sample and parsed columns side by side and a `responded` column."""
        at = np.arange(rows.num_rows)
        legacy = flags(pc.equal(rows["parse"], "legacy"))
        return cls(rows, rows, at, at, rows["parse"], flags(rows["responded"]), legacy)

    def __len__(self) -> int:
        return len(self.sample_at)

    def parsed_flag(self, name: str) -> np.ndarray:
        """A parsed flag per row, False where null or not responded."""
        return self.responded & at_rows(flags(self.parsed[name]), self.parsed_at, False)

    def parsed_counts(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """An integer parsed column per row as (int64 values, present), exactly: no float64
        detour, which would merge counts above 2**53 and reject them in a safe cast."""
        values, present = counts(self.parsed[name])
        return at_rows(values, self.parsed_at, 0), at_rows(present, self.parsed_at, False)

    def sample_counts(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        values, present = counts(self.samples[name])
        return values[self.sample_at], present[self.sample_at]

    def sample_floats(self, name: str) -> np.ndarray:
        return floats(self.samples[name])[self.sample_at]

    def sample_column(self, name: str, repeat: int = 1) -> pa.Array | pa.ChunkedArray:
        at = self.sample_at if repeat == 1 else np.repeat(self.sample_at, repeat)
        return take_rows(self.samples[name], at)

    def sample_items(self, name: str) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        """A list column of the samples: (its flattened items, row of each row item, index
        of each row item into the flattened items), rows in order."""
        column = single(self.samples[name])
        start, count = list_layout(column)
        row, item = ranges(start[self.sample_at], count[self.sample_at])
        return flatten(column), row, item

    def parsed_items(self, name: str, use: np.ndarray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        """`sample_items` of a parsed list column, for the rows where `use` holds."""
        column = single(self.parsed[name])
        start, count = list_layout(column)
        at = np.where(use, self.parsed_at, -1)
        row, item = ranges(at_rows(start, at, 0), at_rows(count, at, 0))
        return flatten(column), row, item
