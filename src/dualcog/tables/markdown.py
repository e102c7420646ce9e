"""Markdown rendering: GitHub tables with group title rows, marks, daggers and a legend."""

from __future__ import annotations

from dualcog.tables.cells import DAGGER, Cell, grid, legend_lines, stamp_lines
from dualcog.tables.model import Stamp, Table

_MARKS = {"best": "**{}**", "second": "<u>{}</u>"}


_ESCAPES = str.maketrans(
    {"\\": "\\\\", "|": "\\|", "&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": " ", "\r": " "}
)


def escape_cell(text: str) -> str:
    """Text as a literal GitHub table cell: no column break, no HTML, no line break."""
    return text.translate(_ESCAPES)


def _cell(cell: Cell) -> str:
    text = escape_cell(cell.text)
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
    lines.append("| " + " | ".join(escape_cell(h) for h in headers) + " |")
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    for block in layout.blocks:
        if table.grouped:
            title = f"*{escape_cell(block.title)}*"
            lines.append("| " + " | ".join([title] + [""] * (len(headers) - 1)) + " |")
        for row in block.rows:
            lines.append("| " + " | ".join(_cell(c) for c in row.cells) + " |")
    lines.append("")
    lines.extend(legend_lines(table, layout))
    if stamp:
        lines += ["", _comment(stamp_lines(stamp))]
    return "\n".join(lines) + "\n"
