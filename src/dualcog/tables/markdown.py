"""Markdown rendering: GitHub tables with group title rows, marks, daggers and a legend."""

from __future__ import annotations

from dualcog.tables.cells import DAGGER, Cell, grid, legend_lines, stamp_lines
from dualcog.tables.model import Stamp, Table

_MARKS = {"best": "**{}**", "second": "<u>{}</u>"}


def _cell(cell: Cell) -> str:
    text = cell.text.replace("|", r"\|")
    if cell.mark:
        text = _MARKS[cell.mark].format(text)
    if cell.flag == "partial" and cell.column is not None:
        text += DAGGER
    return text


def _comment(lines: list[str]) -> str:
    # "--" may not appear inside an HTML comment.
    body = "\n".join(line.replace("--", "- -") for line in lines)
    return f"<!-- dualcog stamp\n{body}\n-->"


def to_markdown(table: Table, stamp: Stamp | None = None) -> str:
    layout = grid(table)
    headers = layout.headers
    lines = [f"## {table.title}", ""]
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    for block in layout.blocks:
        if table.grouped:
            lines.append("| " + " | ".join([f"*{block.title}*"] + [""] * (len(headers) - 1)) + " |")
        for row in block.rows:
            lines.append("| " + " | ".join(_cell(c) for c in row.cells) + " |")
    lines.append("")
    lines.extend(legend_lines(table, layout))
    if stamp:
        lines += ["", _comment(stamp_lines(stamp))]
    return "\n".join(lines) + "\n"
