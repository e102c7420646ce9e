"""A table laid out as cells: formatted text, best/second marks and coverage flags.

Every rendered format (Markdown, LaTeX, HTML, the leaderboard) reads the same grid, so
they cannot disagree on a mark, a dash or a dagger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualcog.stamp import stamp_line, stamp_rows
from dualcog.tables.coverage import coverage_text
from dualcog.tables.model import GROUP_TITLES, Column, Stamp, Table

COVERAGE_HEADER = "Coverage"
DAGGER = "†"
DASH = "–"


@dataclass(frozen=True)
class Cell:
    text: str
    value: float | None = None  # the fraction (value cells) or number behind the text
    mark: str = ""  # "best" | "second" within the model group
    flag: str = ""  # "partial" | "none" (coverage)
    column: Column | None = None  # set on value cells
    numeric: bool = False  # right-aligned: a number, or the dash of a numeric column


@dataclass(frozen=True)
class Row:
    model: str
    group: str
    cells: list[Cell]


@dataclass(frozen=True)
class Block:
    """The rows of one model group, under its title."""

    group: str
    title: str
    rows: list[Row]


@dataclass(frozen=True)
class Grid:
    headers: list[str]
    columns: list[Column | None]  # aligned with headers; None for text columns
    blocks: list[Block]

    @property
    def rows(self) -> list[Row]:
        return [row for block in self.blocks for row in block.rows]

    @property
    def has_partial(self) -> bool:
        return any(cell.flag == "partial" for row in self.rows for cell in row.cells)


def marks(table: Table) -> dict[tuple[str, str], str]:
    """(row, column) -> 'best' | 'second' within each model group."""
    found: dict[tuple[str, str], str] = {}
    if not table.highlight or table.frame.empty:
        return found
    for _, group in table.frame.groupby("Group", sort=False):
        for column in table.columns:
            values = group[column.header].dropna()
            distinct = sorted(set(np.round(values.to_numpy(dtype=float), 12)), reverse=True)
            if len(group) < 2 or not distinct:
                continue
            for model, value in values.items():
                rounded = round(float(value), 12)
                if rounded == distinct[0]:
                    found[(model, column.header)] = "best"
                elif len(distinct) > 1 and rounded == distinct[1]:
                    found[(model, column.header)] = "second"
    return found


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def percent(value: object) -> str:
    return DASH if _missing(value) else f"{float(value) * 100:.1f}"


def spread_text(spread: float | None, number_format: str = ".1f", scale: float = 100.0) -> str:
    """The text after a repeat set's value: " ±" and its between-repeat SD ("" without)."""
    if spread is None or _missing(spread):
        return ""
    return f" ±{format(float(spread) * scale, number_format.lstrip('+'))}"


def _text_cell(value: object, number_format: str | None, spread: float | None = None) -> Cell:
    if _missing(value):
        return Cell(DASH, numeric=number_format is not None)
    if number_format is not None:
        text = format(float(value), number_format) + spread_text(spread, number_format, 1.0)
        return Cell(text, value=float(value), numeric=True)
    if isinstance(value, float):
        return Cell(f"{value:+.1f}", value=value, numeric=True)
    if isinstance(value, (int, np.integer)):
        return Cell(str(value), value=float(value), numeric=True)
    return Cell(str(value))


def _coverage_cell(table: Table, model: str) -> Cell:
    responses = table.coverage.at[model, "responses"]
    expected = table.coverage.at[model, "expected"]
    if _missing(expected):
        return Cell(DASH, numeric=True)
    flag = "none" if responses == 0 else ("partial" if responses < expected else "")
    return Cell(
        coverage_text(responses, expected),
        value=float(responses / expected),
        flag=flag,
        numeric=True,
    )


def grid(table: Table) -> Grid:
    found = marks(table)
    by_header = {c.header: c for c in table.columns}
    headers = [h for h in table.frame.columns if h != "Group"]
    with_coverage = "responses" in table.coverage.columns
    if with_coverage:
        headers.insert(headers.index("Model") + 1, COVERAGE_HEADER)
    columns = [by_header.get(h) for h in headers]
    blocks: list[Block] = []
    for model, row in table.frame.iterrows():
        cells = []
        for header in headers:
            if header == COVERAGE_HEADER:
                cells.append(_coverage_cell(table, model))
            elif header in by_header:
                value = row[header]
                spread = None if _missing(value) else table.spreads.get((model, header))
                cells.append(
                    Cell(
                        percent(value) + spread_text(spread),
                        value=None if _missing(value) else float(value),
                        mark=found.get((model, header), ""),
                        flag=table.flags.get((model, header), ""),
                        column=by_header[header],
                        numeric=True,
                    )
                )
            else:
                cells.append(
                    _text_cell(
                        row[header],
                        table.number_formats.get(header),
                        table.spreads.get((model, header)),
                    )
                )
        group = str(row["Group"]) if table.grouped else ""
        if not blocks or blocks[-1].group != group:
            blocks.append(Block(group, GROUP_TITLES.get(group, group), []))
        blocks[-1].rows.append(Row(str(model), group, cells))
    return Grid(headers, columns, blocks)


def legend_lines(table: Table, layout: Grid) -> list[str]:
    """The notes under a table: units, marks, coverage marks, then the table's own notes."""
    lines = [
        table.unit_note
        + " "
        + ("Bold: best in group; underlined: second. " if table.highlight else "")
        + "ᵀ: reasoning-only model run at its lowest effort."
    ]
    if "responses" in table.coverage.columns:
        line = (
            f"{COVERAGE_HEADER}: samples with a response / samples expected, over the "
            f"table's requests. {DASH}: no value (no response at all, or not run)."
        )
        if layout.has_partial:
            line += (
                f" {DAGGER}: computed while some expected samples have no response "
                "(those count as wrong)."
            )
        lines.append(line)
    return lines + list(table.notes)


def stamp_items(stamp: Stamp | None) -> list[tuple[str, str]]:
    """(label, value) rows of a provenance stamp, short whatever the number of models."""
    return stamp_rows(stamp) if stamp else []


def stamp_lines(stamp: Stamp | None) -> list[str]:
    """The one short stamp line of a Markdown or LaTeX table."""
    return [stamp_line(stamp)] if stamp else []
