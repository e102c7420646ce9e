"""End-to-end: the demo's tables compile with pdflatex, the Snakemake report lists them with
their captions, and the leaderboard works in a real headless Chromium.

They read the shared demo run (`demo_workflow`) rather than a run of their own: its seven
runs and tables are those of the shipped demo's kinds (oracle, random, simulated with every
quirk, replayed), and a second whole run cost 22 CPU-s of every suite.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from browser import Browser
from workflow_runner import REPO, run_snakemake

from dualcog.tables.inputs import load_inputs
from dualcog.tables.leaderboard import render_leaderboard

# A Snakemake run; pdflatex and Chromium read its outputs.
pytestmark = [pytest.mark.workflow, pytest.mark.integration]

TABLES = ("audit", "audit_gains", "image_main", "video_main", "overall", "usage")
TEX_DOCUMENT = r"""\documentclass{article}
\usepackage{booktabs}
\usepackage{graphicx}
\begin{document}
\input{%s}
\end{document}
"""


@pytest.fixture
def demo(demo_workflow: Path) -> Path:
    """The shared demo run (tests/demo_fixtures.py: seven runs of every backend kind but the
    API's, tables in every format). Read only; the report is written into a copy."""
    return demo_workflow


def _pdflatex_or_skip() -> str:
    found = shutil.which("pdflatex")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("pdflatex is missing but CI is set (texlive-latex-base, -recommended)")
    pytest.skip("pdflatex is not installed")


def test_every_tex_compiles_and_the_image_table_fits_the_page(demo: Path, tmp_path) -> None:
    pdflatex = _pdflatex_or_skip()
    for name in TABLES:
        source = demo / "results" / "tables" / f"{name}.tex"
        shutil.copyfile(source, tmp_path / source.name)
        document = tmp_path / f"doc_{name}.tex"
        document.write_text(TEX_DOCUMENT % source.name)
        result = subprocess.run(
            [pdflatex, "-interaction=nonstopmode", "-halt-on-error", document.name],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        log = (tmp_path / f"doc_{name}.log").read_text(errors="replace")
        assert result.returncode == 0, f"{name}.tex does not compile:\n{log[-3000:]}"
        assert (tmp_path / f"doc_{name}.pdf").stat().st_size > 0
        assert "Overfull \\hbox" not in log, f"{name}.tex is wider than the text"
        assert "Missing character" not in log, f"{name}.tex prints a glyph the font lacks"
        # A bitmap font generated on the fly means a glyph outside the Type 1 fonts.
        assert "mktexpk" not in result.stdout + result.stderr


def test_image_table_needs_at_most_a_modest_scale(demo: Path, tmp_path) -> None:
    """The scaled image table stays legible: natural width within 2x a two-column page."""
    pdflatex = _pdflatex_or_skip()
    shutil.copyfile(demo / "results" / "tables" / "image_main.tex", tmp_path / "image_main.tex")
    probe = TEX_DOCUMENT.replace(
        r"\begin{document}",
        r"\let\origresizebox\resizebox"
        r"\renewcommand{\resizebox}[3]{\sbox0{#3}\typeout{NATURAL=\the\wd0}"
        r"\origresizebox{#1}{#2}{\usebox0}}"
        "\n"
        r"\begin{document}",
    )
    (tmp_path / "probe.tex").write_text(probe % "image_main.tex")
    result = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "probe.tex"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
    natural = float(re.search(r"NATURAL=([\d.]+)pt", result.stdout).group(1))
    # A typical two-column \textwidth is about 500pt; the scale stays above 0.7 there.
    assert natural < 2 * 345, natural


def _report_data(report: Path) -> tuple[dict, dict]:
    text = report.read_text(encoding="utf-8")
    results = re.search(r"var results = (\{.*?\});\n", text, re.S)
    categories = re.search(r"var categories = (\{.*?\});\n", text, re.S)
    assert results and categories, "unexpected report layout"
    return json.loads(results.group(1)), json.loads(categories.group(1))


def test_report_lists_every_table_and_the_leaderboard_with_captions(demo_copy: Path) -> None:
    run_snakemake(demo_copy, "--report", "report.html")
    results, categories = _report_data(demo_copy / "report.html")
    for name in TABLES:
        entry = results[f"results/tables/{name}.html"]
        caption = (REPO / "report" / "tables" / f"{name}.rst").read_text()
        first_words = re.sub(r"[*\\]", "", caption).split(".")[0]
        assert re.sub(r"<[^>]+>", "", entry["caption"]).startswith(first_words)
        assert "mailto:" not in entry["caption"]
        listed = [path for paths in categories["Tables"].values() for path in paths]
        assert f"results/tables/{name}.html" in listed
    board = results["results/leaderboard.html"]
    assert "self-contained page" in board["caption"]
    assert categories["Leaderboard"]


def _visible_models(browser: Browser) -> list[str]:
    return browser.evaluate(
        "Array.from(document.querySelectorAll("
        "'section.view:not([hidden]) div.variant:not([hidden]) tbody:not([hidden]) tr[data-model]'"
        "), (row) => row.dataset.model)"
    )


def test_leaderboard_sorts_filters_and_switches_in_chromium(demo: Path, tmp_path) -> None:
    page = demo / "results" / "leaderboard.html"
    metrics = pd.read_parquet(demo / "results" / "metrics" / "metrics.parquet")
    config = yaml.safe_load((demo / "config" / "config.yaml").read_text())
    group = {m["name"]: m.get("group", "baseline") for m in config["models"]}  # the default
    browser = Browser()
    try:
        browser.open(page.as_uri())
        initial = _visible_models(browser)
        assert initial and set(initial) == set(group)  # image view, every model

        # Sorting by LP Option Acc reorders the rows within each group, best first.
        browser.click("section.view:not([hidden]) div.variant:not([hidden]) th[data-col='2']")
        header = browser.evaluate(
            "document.querySelector('section.view:not([hidden]) div.variant:not([hidden])"
            ' th[data-col="2"]\').textContent'
        )
        assert header == "Option Acc"
        sorted_rows = _visible_models(browser)
        lp = metrics[
            (metrics["task"] == "landmark_position") & (metrics["metric"] == "option_acc")
            & (metrics["parse"] == "compatible") & (metrics["stratum"] == "all")
        ].set_index("model")["value"]  # fmt: skip
        expected = []
        for name in dict.fromkeys(group[m] for m in initial):
            members = [m for m in initial if group[m] == name]
            expected += sorted(members, key=lambda m: (-lp[m], members.index(m)))
        assert sorted_rows == expected and sorted_rows != initial

        # The group filter hides a group's rows.
        browser.click("input.group-filter[value='baseline']")
        filtered = _visible_models(browser)
        assert filtered == [m for m in sorted_rows if group[m] != "baseline"]

        # The strict switch shows the strict figures.
        browser.click("input[name=parse][value=strict]")
        # The value itself, not the interval beside it.
        strict_cell = browser.evaluate(
            "document.querySelector('section.view:not([hidden]) div.variant:not([hidden])"
            ' tr[data-model="sim-permille-Instant"] td:nth-child(3)\').firstElementChild'
            ".textContent"
        )
        strict = metrics[
            (metrics["model"] == "sim-permille-Instant") & (metrics["task"] == "landmark_position")
            & (metrics["metric"] == "option_acc") & (metrics["parse"] == "strict")
            & (metrics["stratum"] == "all")
        ]["value"].item()  # fmt: skip
        assert strict_cell == f"{strict * 100:.1f}"
        browser.click("input[name=parse][value=compatible]")
        browser.click("input.group-filter[value='baseline']")

        # Other views open; the aggregate view carries the mean output tokens column.
        browser.click("nav.views button[data-view='aggregate']")
        headers = browser.evaluate(
            "Array.from(document.querySelectorAll('section.view:not([hidden]) th'),"
            " (th) => th.textContent)"
        )
        assert "Mean output tokens" in headers and "Coverage" in headers
        browser.click("nav.views button[data-view='image']")
        shot = browser.screenshot(tmp_path / "leaderboard.png")
        assert shot.stat().st_size > 10_000
        if os.environ.get("DUALCOG_UPDATE_SCREENSHOTS"):
            shutil.copyfile(shot, REPO / "docs" / "img" / "leaderboard.png")
        assert browser.errors == []

        # With intervals given, the toggle shows them in the cells.
        with_intervals = tmp_path / "with_intervals.html"
        with_intervals.write_text(_page_with_intervals(demo, config["models"]), encoding="utf-8")
        browser.open(with_intervals.as_uri())
        display = (
            "getComputedStyle(document.querySelector('section.view:not([hidden])"
            " div.variant:not([hidden]) span.ci')).display"
        )
        assert browser.evaluate(display) == "none"
        browser.click("#show-ci")
        assert browser.evaluate(display) == "inline"
        assert browser.errors == []
    finally:
        browser.close()


def _page_with_intervals(demo: Path, models: list[dict]) -> str:
    """The demo leaderboard given a hand-made intervals table (value +- 5 points)."""
    results = demo / "results"
    inputs = load_inputs(
        results / "metrics" / "metrics.parquet",
        sorted((results / "parsed").glob("*.run.json")),
    )
    main = inputs.metrics[inputs.metrics["metric"].isin(["option_acc", "bbox_acc50"])]
    inputs.intervals = main.assign(
        ci_low=(main["value"] - 0.05).clip(0, 1), ci_high=(main["value"] + 0.05).clip(0, 1),
        n_clusters=8, n_boot=200, seed=0, level=0.95,
    )  # fmt: skip
    return render_leaderboard(inputs, models)
