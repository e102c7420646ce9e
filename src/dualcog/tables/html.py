"""HTML rendering: each table as a complete, self-contained page (results/tables/*.html)."""

from __future__ import annotations

from dataclasses import dataclass

from dualcog.tables.cells import COVERAGE_HEADER, Cell, Grid, grid, legend_lines, stamp_items
from dualcog.tables.model import Stamp, Table
from dualcog.tables.render_env import html_environment


@dataclass(frozen=True)
class HeaderCell:
    text: str
    colspan: int = 1
    rowspan: int = 1
    numeric: bool = False
    column_index: int | None = None  # the body column under it, when it heads exactly one


def header_rows(layout: Grid) -> list[list[HeaderCell]]:
    """One header row, or two when value columns carry a task label above their metric."""
    pairs = list(enumerate(zip(layout.headers, layout.columns, strict=True)))
    if not any(column is not None and column.span for column in layout.columns):
        return [
            [
                HeaderCell(h, numeric=c is not None or h == COVERAGE_HEADER, column_index=i)
                for i, (h, c) in pairs
            ]
        ]
    top: list[HeaderCell] = []
    bottom: list[HeaderCell] = []
    previous_span = ""
    for index, (header, column) in pairs:
        span = column.span if column is not None else ""
        if not span:
            numeric = column is not None or header == COVERAGE_HEADER
            top.append(HeaderCell(header, rowspan=2, numeric=numeric, column_index=index))
        elif span == previous_span:
            top[-1] = HeaderCell(span, top[-1].colspan + 1, numeric=True)
            bottom.append(HeaderCell(column.label, numeric=True, column_index=index))
        else:
            top.append(HeaderCell(span, numeric=True))
            bottom.append(HeaderCell(column.label, numeric=True, column_index=index))
        previous_span = span
    return [top, bottom]


def cell_classes(cell: Cell) -> str:
    classes = []
    if cell.numeric:
        classes.append("num")
    if cell.mark:
        classes.append(cell.mark)
    if cell.flag:
        classes.append(cell.flag)
    return " ".join(classes)


def to_html(table: Table, stamp: Stamp | None = None) -> str:
    layout = grid(table)
    return (
        html_environment()
        .get_template("table.html.j2")
        .render(
            table=table,
            layout=layout,
            header_rows=header_rows(layout),
            cell_classes=cell_classes,
            legend=legend_lines(table, layout),
            stamp=stamp_items(stamp),
        )
    )
