"""CSV for machines, and writing a table in each requested format."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from dualcog.tables.html import to_html
from dualcog.tables.latex import to_latex
from dualcog.tables.markdown import to_markdown
from dualcog.tables.model import TASK_ABBREVIATIONS, Stamp, Table


def to_csv(table: Table, stamp: Stamp | None = None) -> str:
    """Fractions as stored, with coverage columns; the stamp is not written inline.

    Coverage: `Responses` / `Expected` over the table's requests and `<task> Coverage`
    (responses / expected of that task) per scored task the table draws on. With repeat sets,
    `<header> SD`: the between-repeat standard deviation of that column (dualcog.tables.repeats).
    """
    del stamp  # a CSV stays a plain table; provenance goes in a sidecar file
    frame = table.frame.copy()
    coverage = table.coverage
    if "responses" in coverage.columns:
        frame["Responses"] = coverage["responses"].astype("Int64")
        frame["Expected"] = coverage["expected"].astype("Int64")
        for task in coverage.columns.drop(["responses", "expected"]):
            frame[f"{TASK_ABBREVIATIONS[task]} Coverage"] = coverage[task]
    # A repeat set's between-repeat SD of a column, beside the mean it qualifies.
    for header in dict.fromkeys(h for _, h in table.spreads):
        frame[f"{header} SD"] = [table.spreads.get((m, header)) for m in frame.index]
    frame.index.name = "run"
    return frame.to_csv(float_format="%.6g")


WRITERS = {"csv": to_csv, "md": to_markdown, "tex": to_latex, "html": to_html}


def write_table(
    table: Table, directory: str | Path, formats: Iterable[str], stamp: Stamp | None = None
) -> list[Path]:
    """Write `table` in each format; with a stamp, CSV gets `<name>.stamp.json` beside it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = directory / f"{table.name}.{fmt}"
        path.write_text(WRITERS[fmt](table, stamp), encoding="utf-8")
        written.append(path)
        if fmt == "csv" and stamp:
            sidecar = directory / f"{table.name}.stamp.json"
            sidecar.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", "utf-8")
            written.append(sidecar)
    return written
