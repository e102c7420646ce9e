"""Acceptance at the paper's width: 45 model runs through the whole workflow, once, then every
output a person opens.

The benchmark is scripts/make_paper_scale.py at a few landmarks (the paper has 512) with the
paper's 45 runs: Instant/Thinking pairs over the paper's groups, replayed in the authors'
format and, for two of them, simulated. What breaks at 45 runs and not at the demo's 7 is the
width of every output: table rows, stamp lines, the console. Checked here: each .tex compiles
with pdflatex in a one-column and a two-column article (no error, no box overfull by more than
10 pt), the leaderboard, an explorer page and `snakemake --report` open in headless Chromium
with no console error, the leaderboard's explorer links resolve, and the run's console stays
under 300 kB with a summary at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from browser import Browser
from workflow_runner import REPO, run_snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.integration]

RUNS, SIMULATED = 45, 2
EXPLORED = "sim-run-01-Instant"  # the explorer page opened
CONSOLE_LIMIT = 300_000  # bytes of stdout + stderr for the whole run
OVERFULL_LIMIT_PT = 10.0
TEX_PREAMBLE = r"""\documentclass[%s]{article}
\usepackage{booktabs}
\usepackage{graphicx}
\begin{document}
\input{%s}
\end{document}
"""


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    # Generous: on a shared 2-core machine this run alone takes minutes.
    return run_snakemake(workdir, *args, check=False, timeout=3600)


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    workdir = tmp_path_factory.mktemp("paper_width")
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_paper_scale.py"), "--out", str(workdir),
         "--scenes", "2", "--landmarks", "2", "--runs", str(RUNS), "--simulated", str(SIMULATED)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    run = snakemake(workdir)
    (workdir / "console.txt").write_text(run.stdout + run.stderr)  # to read when a check fails
    assert run.returncode == 0, run.stderr[-4000:]
    return workdir, run


def test_the_benchmark_has_the_papers_runs(paper_run) -> None:
    workdir, _ = paper_run
    models = yaml.safe_load((workdir / "config" / "config.yaml").read_text())["models"]
    assert len(models) == RUNS
    assert {m["backend"] for m in models} == {"replay", "simulated"}
    assert {m["group"] for m in models} == {"proprietary", "open-weights", "spatial"}
    names = {m["name"] for m in models}
    assert "sim-run-01-Instant" in names and "sim-run-01-Thinking" in names
    for model in models:
        assert (workdir / "results" / "explorer" / f"{model['name']}.html").is_file()


def test_console_is_bounded_and_ends_with_a_summary(paper_run) -> None:
    _, run = paper_run
    text = run.stdout + run.stderr
    size = len(text.encode())
    assert size <= CONSOLE_LIMIT, f"{size:,} bytes of console output"
    longest = max(map(len, text.splitlines()))
    assert longest < 2_000, f"a console line of {longest:,} characters"
    assert re.search(r"start parse \(model=sim-run-01-Instant\)", text)
    assert re.search(r"done  parse \(model=sim-run-01-Instant\) in \d", text)
    assert re.search(r"\d+ of \d+ jobs done \(\d+%\), elapsed .*, ETA ", text)
    assert "run summary" in text and "results/tables/" in text


def _pdflatex() -> str:
    found = shutil.which("pdflatex")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("pdflatex is missing but CI is set (texlive-latex-base, -recommended)")
    pytest.skip("pdflatex is not installed")


def overfull_boxes(log: str) -> list[float]:
    """The overshoot in pt of every overfull \\hbox that pdflatex reports."""
    return [float(pt) for pt in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


@pytest.mark.parametrize("columns", ["onecolumn", "twocolumn"])
def test_every_tex_compiles_in_a_paper(paper_run, tmp_path, columns) -> None:
    pdflatex = _pdflatex()
    workdir, _ = paper_run
    sources = sorted((workdir / "results" / "tables").glob("*.tex"))
    assert {p.stem for p in sources} >= {"image_main", "video_main", "audit", "overall"}
    for source in sources:
        shutil.copyfile(source, tmp_path / source.name)
        document = tmp_path / f"{columns}_{source.stem}.tex"
        document.write_text(TEX_PREAMBLE % (columns, source.name))
        result = subprocess.run(
            [pdflatex, "-interaction=nonstopmode", "-halt-on-error", document.name],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        log = document.with_suffix(".log").read_text(errors="replace")
        errors = [line for line in log.splitlines() if line.startswith("! ")]
        assert result.returncode == 0 and not errors, f"{source.name}: {errors or log[-2000:]}"
        too_wide = [pt for pt in overfull_boxes(log) if pt > OVERFULL_LIMIT_PT]
        assert not too_wide, f"{source.name} in {columns}: overfull by {too_wide} pt"


def test_legends_are_smaller_than_the_table_and_in_readers_words(paper_run) -> None:
    workdir, _ = paper_run
    for source in sorted((workdir / "results" / "tables").glob("*.tex")):
        text = source.read_text(encoding="utf-8")
        legend = re.search(r"\\parbox\{\\linewidth\}\{(\\\w+)\\raggedright\n(.*?)\n\}", text, re.S)
        assert legend, f"{source.name}: no legend"
        assert legend.group(1) == r"\scriptsize"  # the table itself is \footnotesize
        assert "\\_" not in legend.group(2), f"{source.name}: a code identifier in the legend"
        assert "results/" not in legend.group(2) and ".py" not in legend.group(2)


def test_overfull_boxes_are_read_from_the_log() -> None:
    log = "Overfull \\hbox (12.5pt too wide) in paragraph\nOverfull \\hbox (0.3pt too wide) in"
    assert overfull_boxes(log) == [12.5, 0.3]


def test_pages_open_without_console_errors(paper_run) -> None:
    workdir, _ = paper_run
    results = workdir / "results"
    board = results / "leaderboard.html"
    with Browser() as browser:
        browser.open(board.as_uri())
        rows = browser.evaluate("document.querySelectorAll('tr[data-model]').length")
        assert rows >= RUNS
        links = browser.evaluate(
            "Array.from(document.querySelectorAll('a[href^=\"explorer/\"]'), a => a.href)"
        )
        assert links
        for link in {urlsplit(href).path for href in links}:
            assert Path(link).is_file(), f"dead explorer link {link}"
        # An explorer page, then one opened by a leaderboard link (on a task).
        for url in ((results / "explorer" / f"{EXPLORED}.html").as_uri(), links[0]):
            browser.open(url)
            browser.wait_for("document.body.dataset.rendered")
            assert browser.evaluate("document.querySelectorAll('#cards article').length") > 0
        assert browser.errors == []


def test_report_builds_and_opens_and_its_leaderboard_has_no_dead_links(paper_run) -> None:
    workdir, _ = paper_run
    report = snakemake(workdir, "--report", "report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    text = (workdir / "report.html").read_text(encoding="utf-8")
    results = json.loads(re.search(r"var results = (\{.*?\});\n", text, re.S).group(1))
    with Browser() as browser:
        browser.open((workdir / "report.html").as_uri(), timeout=60)
        assert browser.evaluate("document.title")
        # The leaderboard as the report shows it: its data: URI in a frame.
        browser.open(results["results/leaderboard.html"]["data_uri"], timeout=60)
        assert browser.evaluate("document.querySelectorAll('tr[data-model]').length") >= RUNS
        assert browser.evaluate("document.querySelectorAll('a[href^=\"explorer/\"]').length") == 0
        note = browser.evaluate("document.querySelector('p.explorer-note').textContent")
        assert "results/leaderboard.html" in note
        assert browser.errors == []
