"""The paper's tables rendered from the long metrics table, and the leaderboard page.

Every table is built once as a typed frame of fractions with its coverage (`build`), laid
out as cells with best/second marks and coverage flags (`cells`), then written in each
requested format: CSV keeps plain fractions for machines; Markdown, LaTeX and HTML show
percentages with one decimal, the best value of each column bold and the second underlined
within each model group, a `T` mark on reasoning-only rows, a dagger on values computed
while some samples have no response, and a dash where there is no value.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use, so that the Snakefile can read `dualcog.tables.catalog` without
# loading pandas.
_EXPORTS = {
    "audit_gains": "build",
    "build_all": "catalog",
    "build_audit": "build",
    "build_main": "build",
    "model_rows": "build",
    "coverage_from_metrics": "coverage",
    "mean_output_tokens": "coverage",
    "to_html": "html",
    "latex_escape": "latex",
    "to_latex": "latex",
    "to_markdown": "markdown",
    "GROUP_ORDER": "model",
    "GROUP_TITLES": "model",
    "TASK_ABBREVIATIONS": "model",
    "Column": "model",
    "Table": "model",
    "image_columns": "model",
    "overall_columns": "model",
    "video_columns": "model",
    "WRITERS": "writers",
    "to_csv": "writers",
    "write_table": "writers",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
