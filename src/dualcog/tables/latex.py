"""LaTeX rendering for a paper: booktabs, task header row, group blocks, fits a page of a
two-column paper.

A table is one `table*` float or, where one would not fit a page of a two-column paper, several
(`parts`): its rows split into parts of at most `ROWS_PER_PART` (a model group that goes on is
titled again), and a table too wide to stay readable its columns too, each part repeating the
Model and Coverage columns (a task's columns stay together). What is left a little wider than
the text is scaled down to it (never up) with graphicx's \\resizebox, no further than
`MIN_SCALE`: the smallest type on the page (the 7 pt marks) then stays at 6 pt or more.
docs/tables.md says why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from dualcog.tables.cells import (
    COVERAGE_HEADER,
    DAGGER,
    DASH,
    Block,
    Cell,
    Grid,
    Row,
    grid,
    legend_lines,
    stamp_lines,
)
from dualcog.tables.model import CHANGE_HEADER, TOKENS_HEADER, Stamp, Table
from dualcog.tables.render_env import latex_environment

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # Under the default OT1 font encoding a raw < or > prints as an inverted mark.
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    # Marks at 7 pt (\scriptsize), not the 5-6 pt of a plain superscript: legible when scaled.
    "ᵀ": r"\textsuperscript{\scriptsize T}",
    DASH: "--",
    "—": "---",
    DAGGER: r"\textsuperscript{\scriptsize$\dagger$}",
    "×": r"\texttimes{}",
    "±": r"\textpm{}",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
}
_SPECIAL_RE = re.compile("|".join(re.escape(char) for char in _SPECIAL))
_MARKS = {"best": r"\textbf{%s}", "second": r"\underline{%s}"}

# Compact headers under the task row keep the widest table readable on a page; the notes
# spell each one out.
SHORT_HEADERS = {
    "Option Acc": "Opt.",
    "BBox Acc@50": "Acc@.5",
    "BBox mIoU": "mIoU",
    "Dual Semantic": "Sem.",
    "Dual Evidence": "Evi.",
    "Temporal F1@0.5": "tF1@.5",
    "mean tIoU": "mtIoU",
    "Count Acc": "Count",
    "Segment F1@0.5": "sF1@.5",
    "Original BBox Acc@0.5": "Original",
    "Compatible BBox Acc@0.5": "Compat.",
    "Strict BBox Acc@0.5": "Strict",
    CHANGE_HEADER: "Change",
    TOKENS_HEADER: "Tokens",
    "Coverage": "Cov.",
    "With usage": "w/ usage",
    "Prompt tokens": "Prompt",
    "Completion tokens": "Compl.",
    "Reasoning tokens": "Reason.",
    "Cached prompt tokens": "Cached",
}
STAGE_PREFIX = "n "
# The LaTeX headers name the stage columns under "Samples per parse stage", not "n <stage>".
LEGEND_WORDING = {"n <stage>:": "Samples per parse stage:"}


def latex_escape(text: str) -> str:
    """Text safe in LaTeX text mode under any font encoding."""
    return _SPECIAL_RE.sub(lambda match: _SPECIAL[match.group(0)], text)


def _cell(cell: Cell) -> str:
    text = latex_escape(cell.text)
    if cell.mark:
        text = _MARKS[cell.mark] % text
    if cell.flag == "partial" and cell.column is not None:
        text += _SPECIAL[DAGGER]
    return text


def _is_numeric(layout: Grid, index: int) -> bool:
    values = [row.cells[index] for row in layout.rows]
    return all(cell.numeric or cell.text == DASH for cell in values)


def _column_format(layout: Grid) -> str:
    spec = []
    for index, column in enumerate(layout.columns):
        numeric = column is not None or (layout.rows and _is_numeric(layout, index))
        spec.append("r" if numeric and layout.headers[index] != "Model" else "l")
    return "".join(spec)


def _span_of(header: str, column) -> str:
    if column is not None:
        return column.span or ("BBox Acc@0.5" if not column.task else "")
    if header == CHANGE_HEADER:  # sits between the audit's BBox columns
        return "BBox Acc@0.5"
    return "Samples per parse stage" if header.startswith(STAGE_PREFIX) else ""


def _short(header: str, column) -> str:
    if column is not None and column.span:
        header = column.label
    if header.startswith(STAGE_PREFIX):
        return header[len(STAGE_PREFIX) :]
    return SHORT_HEADERS.get(header, header)


def _abbreviations(layout: Grid) -> str:
    used = {}
    for header, column in zip(layout.headers, layout.columns, strict=True):
        full = column.label if column is not None and column.span else header
        short = _short(header, column)
        if short != full and not header.startswith(STAGE_PREFIX):
            used[short] = full
    return "; ".join(f"{short} = {full}" for short, full in used.items())


def _spans(layout: Grid) -> list[tuple[str, int, int]]:
    """(task label, first column, last column), 1-based, of each task header group."""
    spans: list[tuple[str, int, int]] = []
    for index, (header, column) in enumerate(zip(layout.headers, layout.columns, strict=True), 1):
        span = _span_of(header, column)
        if spans and span and spans[-1][0] == span and spans[-1][2] == index - 1:
            spans[-1] = (span, spans[-1][1], index)
        else:
            spans.append((span, index, index))
    return spans


def _latex_wording(line: str) -> str:
    for old, new in LEGEND_WORDING.items():
        line = line.replace(old, new)
    return line


def _label(name: str) -> str:
    return "tab:" + re.sub(r"[^A-Za-z0-9:_-]", "-", name)


# The page the parts are made for: a two-column article's \textwidth (ACL 455 pt, CVPR
# 496 pt, IEEE 516 pt) and its \textheight. The type is \footnotesize (8 pt in a 10 pt paper),
# the marks \scriptsize (7 pt); 6 pt at the least: the scale goes no lower than 6/7.
PAGE_WIDTH_PT = 469.0
MIN_SCALE = 6 / 7
# Estimated widths of a \footnotesize character (CMR8: digits 4.25 pt, lower case 3.5-4.5)
# and of a column's padding (\tabcolsep 3 pt twice): 3-10 % above pdfTeX's widths at the
# paper's scale, with 3 % more slack.
CHAR_PT = 4.25
COLUMN_PAD_PT = 6.0
PART_WIDTH_PT = PAGE_WIDTH_PT / MIN_SCALE * 0.97
# Rows (group titles included) of one float: with its caption, two header rows and notes it
# fits a 550 pt page (9.5 pt a row at \footnotesize; the notes of the last part included).
ROWS_PER_PART = 34


def _width_pt(layout: Grid, index: int, header: str) -> float:
    texts = [header, *(row.cells[index].text for row in layout.rows)]
    marks = any(row.cells[index].flag == "partial" for row in layout.rows)
    return max(map(len, texts)) * CHAR_PT + COLUMN_PAD_PT + (5.0 if marks else 0.0)


def _pack(sizes: Sequence[float], width: float) -> list[list[int]]:
    """Consecutive items (their indices) into parts no wider than `width` (an item wider than
    that alone in its part)."""
    parts: list[list[int]] = [[]]
    used = 0.0
    for index, size in enumerate(sizes):
        if parts[-1] and used + size > width:
            parts.append([])
            used = 0.0
        parts[-1].append(index)
        used += size
    return parts


def column_parts(layout: Grid, headers: Sequence[str]) -> list[list[int]]:
    """The columns of each part: the key columns (the leading text columns such as Model and
    Task, and Coverage), then as many of the others as fit `PART_WIDTH_PT`; a task's columns
    (one header span) are never split."""
    key = []
    for index, header in enumerate(layout.headers):
        text = layout.columns[index] is None and not _is_numeric(layout, index)
        if not (text or header == COVERAGE_HEADER):
            break
        key.append(index)
    widths = [_width_pt(layout, i, h) for i, h in enumerate(headers)]
    groups: list[list[int]] = []
    last_span = None
    for index, (header, column) in enumerate(zip(layout.headers, layout.columns, strict=True)):
        if index in key:
            continue
        span = _span_of(header, column)
        if groups and span and span == last_span and groups[-1][-1] == index - 1:
            groups[-1].append(index)
        else:
            groups.append([index])
        last_span = span
    budget = PART_WIDTH_PT - sum(widths[i] for i in key)
    sizes = [sum(widths[i] for i in group) for group in groups]
    fewest = len(_pack(sizes, budget))
    # As even as the fewest parts allow: the narrowest width that still packs into them.
    width = max([*sizes, sum(sizes) / fewest]) if sizes else budget
    while len(_pack(sizes, width)) > fewest:
        width += 1.0
    parts = [[i for g in part for i in groups[g]] for part in _pack(sizes, min(width, budget))]
    return [sorted(key + part) for part in parts]


def row_parts(layout: Grid, grouped: bool, limit: int | None = None) -> list[list[Block]]:
    """The blocks of each part, at most `limit` lines each (a group title is a line) and as
    even as that allows; a block split over two parts keeps its title in both."""
    limit = limit or ROWS_PER_PART
    head = 1 if grouped else 0
    lines = len(layout.rows) + head * len(layout.blocks)
    count = max(1, math.ceil(lines / limit))
    # Even parts, with room for the title a group split over two parts repeats.
    size = max(min(limit, math.ceil((lines + head * (count - 1)) / count)), head + 1)
    parts: list[list[Block]] = [[]]
    used = 0
    for block in layout.blocks:
        rows, title = list(block.rows), block.title
        while rows:
            room = size - used - head
            if room < 1:
                parts.append([])
                used = 0
                continue
            taken, rows = rows[:room], rows[room:]
            parts[-1].append(Block(block.group, title, taken))
            used += len(taken) + head
            title = f"{block.title} (continued)"
    return [part for part in parts if part]


def _part_context(layout: Grid, columns: list[int], blocks: list[Block]) -> dict[str, Any]:
    sub = Grid(
        [layout.headers[i] for i in columns],
        [layout.columns[i] for i in columns],
        [
            Block(
                b.group,
                b.title,
                [Row(r.model, r.group, [r.cells[i] for i in columns]) for r in b.rows],
            )
            for b in blocks
        ],
    )
    spans = _spans(sub)
    has_task_row = any(label for label, _, _ in spans)
    return {
        "column_format": _column_format(sub),
        "n_columns": len(sub.headers),
        "task_row": [(latex_escape(label), first, last) for label, first, last in spans]
        if has_task_row
        else [],
        "headers": [
            latex_escape(_short(header, column))
            for header, column in zip(sub.headers, sub.columns, strict=True)
        ],
        "blocks": [
            {"title": latex_escape(b.title), "rows": [[_cell(c) for c in r.cells] for r in b.rows]}
            for b in sub.blocks
        ],
    }


def to_latex(table: Table, stamp: Stamp | None = None) -> str:
    layout = grid(table)
    notes = [_latex_wording(line) for line in legend_lines(table, layout)]
    abbreviations = _abbreviations(layout)
    if abbreviations:
        notes.append(f"Headers: {abbreviations}.")
    headers = [_short(h, c) for h, c in zip(layout.headers, layout.columns, strict=True)]
    by_columns = column_parts(layout, headers)
    by_rows = row_parts(layout, table.grouped)
    title = latex_escape(table.title)
    label = _label(table.name)
    count = len(by_columns) * len(by_rows)
    parts = []
    for columns in by_columns:
        for blocks in by_rows:
            number = len(parts) + 1
            part = _part_context(layout, columns, blocks)
            part["title"] = title if count == 1 else f"{title} (part {number} of {count})"
            part["label"] = label if number == 1 else f"{label}:part{number}"
            part["notes"] = [latex_escape(line) for line in notes] if number == count else []
            parts.append(part)
    return (
        latex_environment()
        .get_template("table.tex.j2")
        .render(
            name=table.name,
            stamp=[line.replace("\n", " ") for line in stamp_lines(stamp)],
            parts=parts,
            grouped=table.grouped,
        )
    )
