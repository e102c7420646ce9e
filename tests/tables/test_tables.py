from __future__ import annotations

import io

import pandas as pd
import pytest

from dualcog.tables import (
    audit_gains,
    build_all,
    build_audit,
    build_main,
    image_columns,
    to_csv,
    to_html,
    to_latex,
    to_markdown,
)
from dualcog.tasks import IMAGE_TASKS

MODELS = [
    {"name": "a", "group": "proprietary", "backend": "openai"},
    {"name": "b", "group": "proprietary", "backend": "openai", "reasoning_only": True},
    {"name": "c", "group": "proprietary", "backend": "openai"},
    {"name": "sim", "group": "open-weights", "backend": "simulated", "display_name": "Sim"},
]


def _metrics(rows):
    return pd.DataFrame(
        [
            {"model": m, "task": t, "parse": p, "stratum": s, "metric": k, "value": v, "n": 10}
            for m, t, p, s, k, v in rows
        ]
    )


def _image_metrics(values: dict[str, float], parse="compatible", metric="option_acc"):
    return _metrics(
        [
            (model, task, parse, "all", metric, value)
            for model, value in values.items()
            for task in IMAGE_TASKS
        ]
    )


def test_main_table_marks_best_and_second_within_group() -> None:
    metrics = pd.concat(
        [
            _image_metrics({"a": 0.5, "b": 0.75, "c": 0.25, "sim": 0.1}),
            _metrics([("a", "landmark_position", "compatible", "4way", "option_acc", 0.9)]),
        ]
    )
    table = build_main("image_main", "Image", metrics, MODELS, image_columns())
    assert [c.header for c in table.columns] == [
        "LP Option Acc",
        "FO Option Acc",
        "SP Option Acc",
        "AD Option Acc",
    ]
    markdown = to_markdown(table)
    line_b = next(line for line in markdown.splitlines() if line.startswith("| b ᵀ"))
    line_a = next(line for line in markdown.splitlines() if line.startswith("| a |"))
    line_c = next(line for line in markdown.splitlines() if line.startswith("| c |"))
    assert "**75.0**" in line_b
    assert "<u>50.0</u>" in line_a
    assert "25.0" in line_c and "**" not in line_c and "<u>" not in line_c
    # A group of one gets no marks; the simulated label is explicit.
    line_sim = next(line for line in markdown.splitlines() if "Sim (simulated)" in line)
    assert "**" not in line_sim
    assert "LP = Landmark-relative Position Reasoning" in markdown
    # Strata other than `all` never leak into the main table.
    assert "90.0" not in markdown


def test_csv_keeps_fractions_and_latex_html_escape() -> None:
    metrics = _image_metrics({"a": 0.5, "b": 0.75, "c": 0.25, "sim": 0.1})
    table = build_main("image_main", "Image", metrics, MODELS, image_columns())
    frame = pd.read_csv(io.StringIO(to_csv(table)), index_col="run")
    assert frame.loc["b", "LP Option Acc"] == 0.75
    latex = to_latex(table)
    assert r"\textbf{75.0}" in latex and r"\underline{50.0}" in latex
    assert r"\textsuperscript{\scriptsize T}" in latex  # a 7 pt mark, legible when scaled
    html = to_html(table)
    assert "<b>75.0</b>" in html and "<u>50.0</u>" in html


def test_ties_share_the_mark_and_missing_values_show_a_dash() -> None:
    metrics = _image_metrics({"a": 0.5, "b": 0.5, "c": 0.25})
    table = build_main("image_main", "Image", metrics, MODELS, image_columns())
    markdown = to_markdown(table)
    assert markdown.count("**50.0**") == 8  # a and b tie for best in all 4 columns
    assert "<u>25.0</u>" in markdown
    assert "sim" not in table.frame.index  # a model without values is left out


def test_audit_change_and_gains_view() -> None:
    metrics = pd.concat(
        [
            _image_metrics({"a": 0.10, "b": 0.40, "c": 0.3}, "legacy", "bbox_acc50"),
            _image_metrics({"a": 0.35, "b": 0.40, "c": 0.2}, "compatible", "bbox_acc50"),
            _image_metrics({"a": 0.05, "b": 0.40, "c": 0.2}, "strict", "bbox_acc50"),
        ]
    )
    runs = {"a": {"scale": "per_mille", "scale_source": "inferred", "n_over_one": 12}}
    counts = {"a": {"fence": 7, "strict": 3}}
    audit = build_audit(metrics, MODELS, runs, counts)
    row = audit.frame.loc["a"]
    assert row["Change (pp)"] == pytest.approx(25.0)
    assert row["Scale"] == "per_mille (inferred)"
    assert row["n fence"] == 7 and row["n keys"] == 0
    gains = audit_gains(audit)
    assert list(gains.frame.index) == ["a"]
    assert "+25.0" in to_markdown(gains)


def test_audit_needs_all_four_image_tasks() -> None:
    metrics = _image_metrics({"a": 0.5}, "compatible", "bbox_acc50")
    metrics = metrics[metrics["task"] != "action_decision"]
    audit = build_audit(metrics, MODELS, {}, {})
    assert audit.frame.empty or pd.isna(audit.frame.loc["a", "Compatible BBox Acc@0.5"])


def test_build_all_names() -> None:
    metrics = _image_metrics({"a": 0.5})
    names = [t.name for t in build_all(["audit", "overall"], metrics, MODELS, {}, {})]
    assert names == ["audit", "overall"]


def test_a_run_off_the_main_tables_stays_in_the_audit_and_takes_no_marks() -> None:
    models = [
        {"name": "a", "group": "proprietary", "backend": "openai"},
        {"name": "c", "group": "proprietary", "backend": "openai"},
        {"name": "x", "display_name": "A (Thinking)", "group": "proprietary",
         "backend": "openai", "main_table": False},
    ]  # fmt: skip
    values = {"a": 0.5, "c": 0.25, "x": 0.9}
    metrics = pd.concat(
        [
            _image_metrics(values),
            _image_metrics(values, "compatible", "bbox_acc50"),
            _image_metrics({m: v / 2 for m, v in values.items()}, "legacy", "bbox_acc50"),
            _metrics(
                [
                    (m, "composite_behavior", "compatible", "all", "composite_acc", v)
                    for m, v in values.items()
                ]
                + [
                    (m, "overall", "compatible", "all", "overall_score", v)
                    for m, v in values.items()
                ]
            ),
        ]
    )
    names = ["image_main", "video_main", "overall", "audit", "audit_gains"]
    tables = {t.name: t for t in build_all(names, metrics, models, {}, {})}
    for name in ("image_main", "video_main", "overall"):
        assert list(tables[name].frame.index) == ["a", "c"], name
        markdown = to_markdown(tables[name])
        # Best and second are ranked over the rows shown: the hidden 90.0 does not take "best".
        assert "**50.0**" in markdown and "<u>25.0</u>" in markdown, name
        assert "A (Thinking)" not in markdown and "90.0" not in markdown, name
    for name in ("audit", "audit_gains"):
        assert "x" in tables[name].frame.index, name
    assert "A (Thinking)" in to_markdown(tables["audit"])


# -- coverage -------------------------------------------------------------------------------


def _rates(model: str, rates: dict[str, tuple[int, int]]) -> pd.DataFrame:
    """response_rate rows (responses, expected) of one model, compatible parse, stratum all."""
    return pd.DataFrame(
        [
            {
                "model": model,
                "task": task,
                "parse": "compatible",
                "stratum": "all",
                "metric": "response_rate",
                "value": responses / expected,
                "n": expected,
            }
            for task, (responses, expected) in rates.items()
        ]
    )


FULL = {task: (10, 10) for task in IMAGE_TASKS}


def _coverage_metrics() -> pd.DataFrame:
    """a: all answered; b: SP 7/10; c: no response at all (metrics 0.0 as scored)."""
    values = _image_metrics({"a": 0.5, "b": 0.75, "c": 0.0})
    dual = _metrics(
        [(m, "position", "compatible", "all", "dual_semantic_acc", v)
         for m, v in (("a", 0.3), ("b", 0.2), ("c", 0.0))]
    )  # fmt: skip
    return pd.concat(
        [
            values,
            dual,
            _rates("a", FULL),
            _rates("b", {**FULL, "self_position": (7, 10)}),
            _rates("c", {task: (0, 10) for task in IMAGE_TASKS}),
        ],
        ignore_index=True,
    )


def test_coverage_marks_partial_cells_and_dashes_models_without_responses() -> None:
    table = build_main("image_main", "Image", _coverage_metrics(), MODELS, image_columns())
    assert table.flags[("b", "SP Option Acc")] == "partial"
    assert table.flags[("b", "Pos Dual Semantic")] == "partial"  # SP is one side of Pos
    assert ("b", "LP Option Acc") not in table.flags
    assert ("a", "SP Option Acc") not in table.flags
    # c has no response: every value cell is a dash, never 0.0, and it wins no mark.
    assert table.frame.loc["c", [c.header for c in table.columns]].isna().all()
    markdown = to_markdown(table)
    line_b = next(line for line in markdown.splitlines() if line.startswith("| b ᵀ"))
    line_c = next(line for line in markdown.splitlines() if line.startswith("| c |"))
    cells_c = [cell.strip() for cell in line_c.strip("|").split("|")]
    assert cells_c[1] == "0/40" and set(cells_c[2:]) == {"–"}
    assert "0.0" not in line_c
    assert "| 37/40 |" in line_b and "**75.0**†" in line_b  # SP cell of b: best and partial
    assert line_b.count("†") == 2  # SP Option Acc and Pos Dual Semantic
    assert "†: computed while some expected samples have no response" in markdown
    assert "LP = Landmark-relative Position Reasoning" in markdown


def test_dual_cell_with_one_silent_side_is_a_dash() -> None:
    metrics = pd.concat(
        [
            _coverage_metrics()[lambda f: f["model"] == "a"],
            _rates("b", {**FULL, "landmark_position": (0, 10)}),
            _image_metrics({"b": 0.4}),
            _metrics([("b", "position", "compatible", "all", "dual_semantic_acc", 0.0)]),
        ],
        ignore_index=True,
    )
    metrics = metrics.drop_duplicates(["model", "task", "parse", "stratum", "metric"])
    table = build_main("image_main", "Image", metrics, MODELS, image_columns())
    assert table.flags[("b", "Pos Dual Semantic")] == "none"
    assert pd.isna(table.frame.loc["b", "Pos Dual Semantic"])
    assert table.frame.loc["b", "SP Option Acc"] == 0.4  # the answered side keeps its value


def test_csv_has_coverage_columns_and_writers_render_the_stamp() -> None:
    table = build_main("image_main", "Image", _coverage_metrics(), MODELS, image_columns())
    frame = pd.read_csv(io.StringIO(to_csv(table)), index_col="run")
    assert frame.loc["b", "Responses"] == 37 and frame.loc["b", "Expected"] == 40
    assert frame.loc["b", "SP Coverage"] == 0.7 and frame.loc["a", "SP Coverage"] == 1.0
    assert frame.loc["c", "Responses"] == 0
    assert pd.isna(frame.loc["c", "LP Option Acc"])
    stamp = {
        "version": "0.1.0--rc",
        "git": {"commit": "abc123def4567890", "dirty": False},
        "models": {"a": {"digest": "sha256:1--2"}},
        "data": {"digest": "d1", "manifests": {"m.json": "x"}},
    }
    assert "abc123" not in to_csv(table, stamp)
    markdown = to_markdown(table, stamp)
    comment = markdown[markdown.index("<!--") :]
    assert comment.rstrip().endswith("-->") and "abc123def456" in comment
    assert "--" not in comment[4:-4]  # nothing closes the comment early
    latex = to_latex(table, stamp)
    assert "% dualcog stamp " in latex and "full stamp: results/stamp.json" in latex
    assert "sha256:1" not in latex  # per-model digests stay in the full stamp
    html = to_html(table, stamp)
    assert "<footer" in html and "abc123def456" in html and "1 manifests, digest d1" in html
    assert "abc123" not in to_markdown(table) + to_latex(table) + to_html(table)


def test_latex_escapes_every_special_character_and_has_paper_structure() -> None:
    models = [
        {"name": "x", "display_name": "A&B_50% #1 {v2} ~x^y <z> \\ $", "group": "proprietary"},
        {"name": "y", "group": "proprietary", "reasoning_only": True},
        {"name": "z", "group": "baseline"},
    ]
    values = {"x": 0.5, "y": 0.75, "z": 0.1}
    metrics = pd.concat(
        [_image_metrics(values, metric=m) for m in ("option_acc", "bbox_acc50", "bbox_miou")]
    )
    latex = to_latex(build_main("image_main", "Image", metrics, models, image_columns()))
    row = next(line for line in latex.splitlines() if line.startswith("A"))
    assert row.startswith(
        r"A\&B\_50\% \#1 \{v2\} \textasciitilde{}x\textasciicircum{}y "
        r"\textless{}z\textgreater{} \textbackslash{} \$ &"
    )
    assert r"\toprule" in latex and r"\bottomrule" in latex
    assert r"\multicolumn{3}{c}{LP}" in latex and r"\cmidrule(lr){2-4}" in latex
    assert r"\multicolumn{13}{l}{\textit{Proprietary models}}" in latex
    assert r"\multicolumn{13}{l}{\textit{Baselines}}" in latex
    assert latex.count(r"\midrule") == 2  # under the header, then between the two groups
    assert r"\begin{tabular}{l" + "r" * 12 + "}" in latex  # Model left, values right
    assert r"\resizebox{\ifdim\width>\textwidth\textwidth\else\width\fi}{!}" in latex


def test_audit_latex_prints_a_real_greater_than_sign() -> None:
    metrics = _image_metrics({"a": 0.35}, "compatible", "bbox_acc50")
    latex = to_latex(build_audit(metrics, MODELS, {}, {}))
    assert r"\textgreater{}" in latex or "$>$" in latex
    body = [line for line in latex.splitlines() if not line.startswith("%")]
    assert not any(">" in line.replace(r"\width>\textwidth", "") for line in body)


def test_html_table_is_a_full_page_with_group_rows_and_legend() -> None:
    table = build_main("image_main", "Image", _coverage_metrics(), MODELS, image_columns())
    page = to_html(table)
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in page and "<style>" in page
    assert '<th class="num span" scope="col">LP</th>' in page
    assert '<th rowspan="2" scope="col">Model</th>' in page
    assert "Proprietary models" in page and "Open-weights foundation models" not in page
    assert 'class="num best partial"><b>75.0</b><sup class="dagger">†</sup>' in page
    assert "Values are percentages" in page and "</html>" in page


def test_overall_shows_mean_output_tokens() -> None:
    from dualcog.tables import mean_output_tokens

    responses = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b"],
            "status": ["ok", "ok", "error", "ok"],
            "completion_tokens": [100.0, 50.0, 999.0, None],
        }
    )
    tokens = mean_output_tokens([responses])
    assert tokens == {"a": 75.0}
    metrics = _metrics(
        [(m, "overall", "compatible", "all", "overall_score", v) for m, v in (("a", .5), ("b", .4))]
    )  # fmt: skip
    (overall,) = build_all(["overall"], metrics, MODELS, {}, {}, tokens)
    markdown = to_markdown(overall)
    assert "Mean output tokens" in markdown
    assert "| **50.0** | 75 |" in markdown and "| <u>40.0</u> | – |" in markdown


def test_markdown_cells_are_literal_text() -> None:
    from dualcog.tables.markdown import escape_cell

    assert escape_cell("a|b") == r"a\|b"
    assert escape_cell("</script><b>x & y</b>") == "&lt;/script&gt;&lt;b&gt;x &amp; y&lt;/b&gt;"
    assert escape_cell("back\\slash\nnext") == "back\\\\slash next"


def test_markdown_group_rows_follow_grouped_not_highlight() -> None:
    """An unhighlighted grouped table (the audit) keeps its group rows, as in LaTeX and HTML."""
    table = build_main("image_main", "Image", _coverage_metrics(), MODELS, image_columns())
    table.highlight = False
    grouped = to_markdown(table)
    table.grouped = False
    assert grouped.count("| *") > to_markdown(table).count("| *") == 0
