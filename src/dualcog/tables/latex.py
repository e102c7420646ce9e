"""LaTeX rendering for a paper: booktabs, task header row, group blocks, fits \\textwidth.

A wide table is scaled down to the text width (never up) with graphicx's \\resizebox, so
the image table stays one table that compares every model across all tasks at once; see
docs/tables.md for why it is not split.
"""

from __future__ import annotations

import re

from dualcog.tables.cells import DAGGER, DASH, Cell, Grid, grid, legend_lines, stamp_lines
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
    "ᵀ": r"\textsuperscript{T}",
    DASH: "--",
    "—": "---",
    DAGGER: r"$^{\dagger}$",
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
        text += r"$^{\dagger}$"
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


def to_latex(table: Table, stamp: Stamp | None = None) -> str:
    layout = grid(table)
    spans = _spans(layout)
    has_task_row = any(label for label, _, _ in spans)
    headers = [
        latex_escape(_short(header, column))
        for header, column in zip(layout.headers, layout.columns, strict=True)
    ]
    notes = [_latex_wording(line) for line in legend_lines(table, layout)]
    abbreviations = _abbreviations(layout)
    if abbreviations:
        notes.append(f"Headers: {abbreviations}.")
    blocks = [
        {
            "title": latex_escape(block.title),
            "rows": [[_cell(c) for c in r.cells] for r in block.rows],
        }
        for block in layout.blocks
    ]
    return (
        latex_environment()
        .get_template("table.tex.j2")
        .render(
            name=table.name,
            title=latex_escape(table.title),
            label=_label(table.name),
            stamp=[line.replace("\n", " ") for line in stamp_lines(stamp)],
            column_format=_column_format(layout),
            n_columns=len(layout.headers),
            task_row=[(latex_escape(label), first, last) for label, first, last in spans]
            if has_task_row
            else [],
            headers=headers,
            blocks=blocks,
            grouped=table.grouped,
            notes=[latex_escape(line) for line in notes],
        )
    )
