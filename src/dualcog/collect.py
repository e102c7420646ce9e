"""Per-model artifacts -> one table for all models, with Arrow only.

The collect jobs run once per workflow but pay the same start-up as every job; pandas alone
would be a third of their CPU, so nothing here touches it (nor `pyarrow.dataset`,
`pyarrow.acero` or `pc.fill_null`, which import it) except to word an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dualcog.schemas import read_arrow

METRIC_KEY = ["model", "task", "parse", "stratum", "metric"]


def concat_artifacts(paths: Iterable[str | Path]) -> pa.Table:
    """The Parquet files' rows, file after file."""
    return pa.concat_tables([read_arrow(p) for p in paths])


def repeats_previous_key(ordered: pa.Table, key: list[str]) -> bool:
    """Whether a row of the `key`-sorted table has the key of the row before it (nulls equal)."""
    if ordered.num_rows < 2:
        return False
    same = None
    for name in key:
        column = ordered[name]
        later, earlier = column.slice(1), column.slice(0, len(column) - 1)
        # Null where one side only is null (Kleene logic), which `any` then skips.
        equal = pc.or_kleene(
            pc.equal(later, earlier), pc.and_(pc.is_null(later), pc.is_null(earlier))
        )
        same = equal if same is None else pc.and_kleene(same, equal)
    return bool(pc.any(same).as_py())


def collect_metrics(metrics: pa.Table) -> pa.Table:
    """Every model's metric rows sorted by METRIC_KEY; a repeated key is an error.

    Arrow's sort is stable, puts nulls last and orders strings by code point, as pandas'
    stable `sort_values` did, so the collected file keeps its bytes.
    """
    ordered = metrics.sort_by([(k, "ascending", "at_end") for k in METRIC_KEY])
    if repeats_previous_key(ordered, METRIC_KEY):
        frame = metrics.select(METRIC_KEY).to_pandas()
        repeated = frame[frame.duplicated(METRIC_KEY)].head().to_dict("records")
        raise ValueError(f"duplicate metric rows: {repeated}")
    return ordered


def distinct_models(table: pa.Table) -> int:
    return pc.count_distinct(table["model"]).as_py()
