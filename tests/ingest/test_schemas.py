"""Typed Parquet conversion edge cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from dualcog.schemas import to_table

SCHEMA = pa.schema([("sample_id", pa.string()), ("boxes", pa.list_(pa.list_(pa.float64())))])


def test_an_all_missing_nested_column_becomes_nulls() -> None:
    """pandas turns a column with no value at all into float NaN; it is still a list column."""
    frame = pd.DataFrame({"sample_id": ["a", "b"], "boxes": [np.nan, np.nan]})
    table = to_table(frame, SCHEMA)
    assert table.column("boxes").null_count == 2
    assert table.schema == SCHEMA


def test_a_partly_missing_nested_column_keeps_its_values() -> None:
    frame = pd.DataFrame({"sample_id": ["a", "b"], "boxes": [[[0.0, 1.0]], None]})
    table = to_table(frame, SCHEMA)
    assert table.column("boxes").to_pylist() == [[[0.0, 1.0]], None]
