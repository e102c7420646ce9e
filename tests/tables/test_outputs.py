"""Outputs belong to the config that made them (dualcog.outputs), the summary lists this
config's tables (dualcog.summary), and a long or wide LaTeX table is split into parts that fit
a two-column page (dualcog.tables.latex): hand-made folders and grids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualcog.errors import ConfigError
from dualcog.outputs import (
    check_report_config,
    foreign_outputs,
    remove_foreign_outputs,
    removed_text,
    report_requested,
)
from dualcog.summary import outputs_lines
from dualcog.tables import latex
from dualcog.tables.cells import Block, Cell, Grid, Row
from dualcog.tables.model import Column


def _touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")


def test_only_presented_files_that_the_config_does_not_make_are_foreign(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _touch(
        tmp_path,
        "results/tables/image_main.csv", "results/tables/image_main.tex",
        "results/tables/image_main.stamp.json", "results/plots/audit_gains.png",
        "results/compare/a__vs__b.md", "results/explorer/demo-model.html",
        "results/explorer/mine.html", "results/explorer/data/demo-model/x.json",
        "results/responses/demo-model/behavior.parquet", "results/leaderboard.html",
    )  # fmt: skip
    expected = [
        "results/tables/image_main.csv", "results/tables/image_main.stamp.json",
        "results/explorer/mine.html", "results/leaderboard.html",
    ]  # fmt: skip
    results = Path("results")
    foreign = [str(p) for p in foreign_outputs(results, expected)]
    assert foreign == [
        "results/compare/a__vs__b.md", "results/explorer/demo-model.html",
        "results/plots/audit_gains.png", "results/tables/image_main.tex",
    ]  # fmt: skip
    removed = remove_foreign_outputs(results, expected)
    assert [str(p) for p in removed] == foreign and not any(Path(p).exists() for p in foreign)
    # Intermediate per-model files and everything expected stay.
    assert Path("results/responses/demo-model/behavior.parquet").exists()
    assert Path("results/explorer/data/demo-model/x.json").exists()
    assert all(Path(p).exists() for p in expected)
    assert remove_foreign_outputs(results, expected) == []  # nothing left to remove
    text = removed_text([Path(f"results/plots/p{i}.png") for i in range(8)], limit=2)
    assert text.startswith("removed 8 output(s) that this config does not make")
    assert text.endswith("results/plots/p0.png, results/plots/p1.png and 6 more")


def test_the_summary_lists_only_the_tables_of_this_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path, "results/tables/usage.csv", "results/tables/usage.stamp.json",
           "results/tables/usage.tex", "results/tables/image_main.html")  # fmt: skip
    mine = ["results/tables/usage.csv", "results/tables/usage.stamp.json",
            "results/tables/audit.csv"]  # fmt: skip
    lines = outputs_lines(Path("results"), mine)
    assert lines == [f"tables: {tmp_path}/results/tables/ (usage; csv)"]
    every = outputs_lines(Path("results"))  # no list: every table file found
    assert every == [f"tables: {tmp_path}/results/tables/ (image_main, usage; csv, html, tex)"]


def test_a_report_of_another_config_than_the_run_is_refused(tmp_path):
    stamp = tmp_path / "results" / "stamp.json"
    check_report_config(stamp, ["a"], "my.yaml")  # no run yet: nothing to mix
    stamp.parent.mkdir()
    stamp.write_text(json.dumps({"models": {"a": {}, "b": {}}}))
    check_report_config(stamp, ["b", "a"], "my.yaml")
    with pytest.raises(ConfigError) as refused:
        check_report_config(stamp, ["a", "c"], "my.yaml")
    message = str(refused.value)
    assert "models only there: b; models only in my.yaml: c" in message
    assert "make report CONFIG=my.yaml" in message
    stamp.write_text("{")
    with pytest.raises(ConfigError, match="unreadable provenance stamp"):
        check_report_config(stamp, ["a"], "my.yaml")


def test_a_report_is_asked_for_by_either_spelling():
    assert report_requested(["snakemake", "--cores", "2", "--report", "r.html"])
    assert report_requested(["snakemake", "--report=r.html"])
    assert not report_requested(["snakemake", "--report-stylesheet", "s.css", "--cores", "1"])


def _grid(models: int, groups: int, value_columns: int, name: str = "m") -> Grid:
    """`models` rows in `groups` blocks; Model, Coverage, then value columns of 2 per task."""
    columns = [
        Column(f"T{i // 2}", f"Value {i % 2}", f"t{i // 2}", "option_acc")
        for i in range(value_columns)
    ]
    headers = ["Model", "Coverage", *(c.header for c in columns)]
    blocks = []
    for g in range(groups):
        rows = [
            Row(f"{name}{g}-{i}", f"g{g}", [
                Cell(f"{name}{g}-{i}"), Cell("16/16", numeric=True),
                *(Cell("50.0", 0.5, column=c, numeric=True) for c in columns),
            ])
            for i in range(models // groups)
        ]  # fmt: skip
        blocks.append(Block(f"g{g}", f"Group {g}", rows))
    return Grid(headers, [None, None, *columns], blocks)


def test_rows_split_into_even_parts_of_at_most_34_lines_titles_repeated():
    layout = _grid(45, 3, 2)  # 45 rows + 3 titles = 48 lines: two parts
    parts = latex.row_parts(layout, grouped=True)
    lines = [sum(len(b.rows) + 1 for b in part) for part in parts]
    assert len(parts) == 2 and max(lines) <= latex.ROWS_PER_PART and sum(lines) == 49
    assert [b.title for b in parts[1]][0] == "Group 1 (continued)"
    assert [r.model for p in parts for b in p for r in b.rows] == [r.model for r in layout.rows]
    assert len(latex.row_parts(_grid(30, 3, 2), grouped=True)) == 1  # 33 lines: one part
    ungrouped = latex.row_parts(_grid(315, 1, 2), grouped=False)
    # 315 lines over ceil(315 / 34) = 10 parts: 32 lines each (ceil(315 / 10)), 27 in the last.
    assert [sum(len(b.rows) for b in p) for p in ungrouped] == [32] * 9 + [27]


def test_columns_split_as_evenly_as_the_fewest_parts_allow_keeping_tasks_whole():
    narrow = _grid(4, 1, 4)
    headers = [latex._short(h, c) for h, c in zip(narrow.headers, narrow.columns, strict=True)]
    assert latex.column_parts(narrow, headers) == [list(range(6))]
    wide = _grid(4, 1, 40)  # 20 tasks of 2 columns, each column ~ 40 pt: beyond one page
    headers = [latex._short(h, c) for h, c in zip(wide.headers, wide.columns, strict=True)]
    parts = latex.column_parts(wide, headers)
    assert len(parts) > 1 and all(part[:2] == [0, 1] for part in parts)  # Model, Coverage
    values = [i for part in parts for i in part[2:]]
    assert values == list(range(2, 42))  # every value column once, in order
    assert all(len(part[2:]) % 2 == 0 for part in parts)  # a task's two columns together
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 2  # even
    width = [sum(latex._width_pt(wide, i, headers[i]) for i in part) for part in parts]
    assert max(width) <= latex.PART_WIDTH_PT


def test_a_split_table_is_one_float_per_part_with_the_notes_at_the_end():
    from test_tables import _image_metrics

    from dualcog.tables.build import build_main, image_columns

    models = [{"name": f"run-{i:02d}", "group": "proprietary"} for i in range(40)]
    values = {m["name"]: 0.5 for m in models}
    table = build_main("image_main", "Image", _image_metrics(values), models, image_columns())
    text = latex.to_latex(table)
    assert text.count(r"\begin{table*}") == 2 and r"(part 2 of 2)" in text
    assert r"\label{tab:image_main}" in text and r"\label{tab:image_main:part2}" in text
    assert text.count(r"\parbox{\linewidth}") == 1
    assert text.rindex(r"\parbox{\linewidth}") > text.rindex(r"\begin{table*}")
