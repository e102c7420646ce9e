"""The table catalog (dualcog.tables.catalog) and docs/extending.md's "Add a table" recipe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dualcog.tables import build_all, build_main, catalog, image_columns, write_table
from dualcog.tables.build import TableInputs
from dualcog.tables.catalog import TableSpec, table_names, table_spec
from dualcog.tables.model import Table
from dualcog.tasks import IMAGE_TASKS

REPO = Path(__file__).resolve().parents[2]
MODELS = [
    {"name": "a", "group": "proprietary", "backend": "openai"},
    {"name": "b", "group": "open-weights", "backend": "openai"},
]


def legacy_image_table(inputs: TableInputs) -> Table:
    """The recipe's example builder: the image table read under the legacy parse."""
    columns = image_columns(parse="legacy")
    return build_main(
        "legacy_image", "Image tasks, legacy parse", inputs.metrics, inputs.models, columns
    )


def _metrics() -> pd.DataFrame:
    rows = [
        {"model": m, "task": t, "parse": p, "stratum": "all", "metric": "option_acc",
         "value": v, "n": 10, "responses": 10, "expected": 10}
        for m, v in (("a", 0.5), ("b", 0.25))
        for t in IMAGE_TASKS
        for p in ("compatible", "legacy")
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_each_table_has_a_report_caption_and_a_loadable_builder() -> None:
    for spec in catalog.TABLES:
        assert (REPO / "report" / "tables" / f"{spec.name}.rst").is_file(), spec.name
        assert callable(spec.load()), spec.name
    assert len(catalog.TABLE_BY_NAME) == len(catalog.TABLES)  # names are unique


def test_tables_a_run_writes_follow_its_tasks() -> None:
    every = [spec.name for spec in catalog.TABLES]
    assert table_names(True, True) == every
    assert "video_main" not in table_names(True, False)
    assert "image_main" not in table_names(False, True)
    assert {"audit", "overall", "usage"} <= set(table_names(False, False))


def test_an_unknown_table_is_named() -> None:
    with pytest.raises(ValueError, match="no table named 'nope'"):
        table_spec("nope")


def test_the_catalog_loads_no_pandas() -> None:
    # The Snakefile reads it to list the tables rule's outputs on every run.
    code = "import sys, dualcog.tables.catalog; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_add_a_table_recipe(monkeypatch, tmp_path) -> None:
    """docs/extending.md, "Add a table": one catalog entry and its builder."""
    spec = TableSpec("legacy_image", "Image tasks", f"{__name__}:legacy_image_table", needs="image")
    monkeypatch.setattr(catalog, "TABLES", (*catalog.TABLES, spec))
    monkeypatch.setattr(catalog, "TABLE_BY_NAME", {s.name: s for s in catalog.TABLES})
    assert table_names(True, False)[-1] == "legacy_image"
    assert "legacy_image" not in table_names(False, True)

    (table,) = build_all(["legacy_image"], _metrics(), MODELS, {}, {})
    assert table.name == "legacy_image"
    assert {c.parse for c in table.columns} == {"legacy"}
    assert list(table.frame["LP Option Acc"]) == [0.5, 0.25]
    written = write_table(table, tmp_path, ["csv", "md", "tex", "html"])
    assert sorted(p.name for p in written) == [
        "legacy_image.csv", "legacy_image.html", "legacy_image.md", "legacy_image.tex",
    ]  # fmt: skip
    assert "50.0" in (tmp_path / "legacy_image.md").read_text()
