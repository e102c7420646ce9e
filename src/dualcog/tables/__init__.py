"""The paper's tables rendered from the long metrics table, and the leaderboard page.

Every table is built once as a typed frame of fractions with its coverage (`build`), laid
out as cells with best/second marks and coverage flags (`cells`), then written in each
requested format: CSV keeps plain fractions for machines; Markdown, LaTeX and HTML show
percentages with one decimal, the best value of each column bold and the second underlined
within each model group, a `T` mark on reasoning-only rows, a dagger on values computed
while some samples have no response, and a dash where there is no value.
"""

from dualcog.tables.build import (
    audit_gains,
    build_all,
    build_audit,
    build_main,
    model_rows,
    stage_counts,
)
from dualcog.tables.coverage import coverage_from_metrics, mean_output_tokens
from dualcog.tables.html import to_html
from dualcog.tables.latex import latex_escape, to_latex
from dualcog.tables.markdown import to_markdown
from dualcog.tables.model import (
    GROUP_ORDER,
    GROUP_TITLES,
    TASK_ABBREVIATIONS,
    Column,
    Table,
    image_columns,
    overall_columns,
    video_columns,
)
from dualcog.tables.writers import WRITERS, to_csv, write_table

__all__ = [
    "GROUP_ORDER",
    "GROUP_TITLES",
    "TASK_ABBREVIATIONS",
    "WRITERS",
    "Column",
    "Table",
    "audit_gains",
    "build_all",
    "build_audit",
    "build_main",
    "coverage_from_metrics",
    "image_columns",
    "latex_escape",
    "mean_output_tokens",
    "model_rows",
    "overall_columns",
    "stage_counts",
    "to_csv",
    "to_html",
    "to_latex",
    "to_markdown",
    "video_columns",
    "write_table",
]
