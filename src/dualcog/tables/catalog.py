"""The tables the workflow writes, declared once: name, report heading, what they need.

Each entry names its builder as "module:function" (imported when the tables job builds it),
so this module imports nothing heavy: the Snakefile reads it to list the `tables` rule's
outputs and their report captions (`report/tables/<name>.rst`). docs/extending.md, "Add a
table", follows it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pandas as pd

    from dualcog.tables.build import TableInputs, UsageInputs
    from dualcog.tables.model import Table

Needs = Literal["any", "image", "video"]


@dataclass(frozen=True)
class TableSpec:
    """One table of `results/tables/`.

    `heading` is its subcategory in `snakemake --report`; `needs` says which configured tasks
    it needs: `image` tables are written only when an image task is configured, `video` ones
    only with a video task.
    """

    name: str
    heading: str
    builder: str  # "module:function", called with a dualcog.tables.build.TableInputs
    needs: Needs = "any"

    def load(self) -> Callable[[TableInputs], Table]:
        module, function = self.builder.split(":")
        return getattr(importlib.import_module(module), function)


_BUILD = "dualcog.tables.build"

# In the order the tables are written and listed in the report.
TABLES: tuple[TableSpec, ...] = (
    TableSpec("audit", "Compatibility audit", f"{_BUILD}:audit_table"),
    TableSpec("audit_gains", "Compatibility audit", f"{_BUILD}:audit_gains_table"),
    TableSpec("image_main", "Image tasks", f"{_BUILD}:image_main_table", needs="image"),
    TableSpec("video_main", "Video tasks", f"{_BUILD}:video_main_table", needs="video"),
    TableSpec("overall", "Aggregates", f"{_BUILD}:overall_table"),
    TableSpec("usage", "Usage and cost", "dualcog.tables.usage:usage_table"),
)
TABLE_BY_NAME = {spec.name: spec for spec in TABLES}


def table_names(image_tasks: bool, video_tasks: bool) -> list[str]:
    """The tables a run writes, given whether it has image and video tasks."""
    wanted = {"any": True, "image": image_tasks, "video": video_tasks}
    return [spec.name for spec in TABLES if wanted[spec.needs]]


def table_spec(name: str) -> TableSpec:
    try:
        return TABLE_BY_NAME[name]
    except KeyError:
        raise ValueError(f"no table named {name!r} (known: {', '.join(TABLE_BY_NAME)})") from None


def build_all(
    names: Iterable[str],
    metrics: pd.DataFrame,
    models: Sequence[Mapping],
    runs: Mapping[str, Mapping],
    counts: Mapping[str, Mapping[str, int]],
    tokens: Mapping[str, float] | None = None,
    usage: UsageInputs | None = None,
) -> list[Table]:
    """Build the named tables of `dualcog.tables.catalog.TABLES`.

    `tokens` (mean output tokens per model) adds a column to `overall` when given; `usage`
    (the response facts and outcome shares) is what the `usage` table and the audit's outcome
    shares are built from.
    """
    from dualcog.tables.build import TableInputs  # here: pandas; the Snakefile reads the catalog

    inputs = TableInputs(metrics, models, runs, counts, tokens, usage)
    return [table_spec(name).load()(inputs) for name in names]
