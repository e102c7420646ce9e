"""Test inputs built as pandas frames, handed to the library's Arrow entry points."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa


def arrow(frame: pd.DataFrame) -> pa.Table:
    """`frame` as an Arrow table (its index dropped)."""
    return pa.Table.from_pandas(frame, preserve_index=False)
