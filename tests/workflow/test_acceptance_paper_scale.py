"""Acceptance at the paper's width: 45 model runs through the whole workflow, once, then every
output a person opens.

The benchmark is scripts/make_paper_scale.py at a few landmarks (the paper has 512) with the
paper's 45 runs: Instant/Thinking pairs over the paper's groups, replayed in the authors'
format and, for two of them, simulated. What breaks at 45 runs and not at the demo's 7 is the
width of every output: table rows, stamp lines, the console. Checked here: each .tex compiles
with pdflatex in a one-column and a two-column article (no error, no box overfull by more than
10 pt, no float too large for its page; in two columns no type below 6 pt), the leaderboard,
an explorer page and `snakemake --report` open in headless Chromium with no console error, the
leaderboard keeps its header in view 40 rows down, its explorer links resolve, and the run's
console stays under 300 kB with a summary at the end.

Then, as a researcher does after `make demo`: a config of their own (40 of the runs, tables in
CSV only) into the same folder. The folder's default config plays the demo here (every table
format, more models): no table, page or plot of it is left to be read as this run's, the
summary lists only what this run wrote, and the report of the user's config shows only its
models (the report of the other config is refused).

With DUALCOG_SCREENSHOTS=<folder> the leaderboard and the first page of each table are saved
there as PNG (docs/img/ holds the ones from such a run).
"""

from __future__ import annotations

import base64
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
from pdf_fonts import font_sizes
from workflow_runner import REPO, run_snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.integration]

RUNS, SIMULATED = 45, 2
EXPLORED = "sim-run-01-Instant"  # the explorer page opened
CONSOLE_LIMIT = 300_000  # bytes of stdout + stderr for the whole run
OVERFULL_LIMIT_PT = 10.0
SMALLEST_TYPE_PT = 5.95  # 6 pt, as pdfTeX rounds a scaled size
USER_RUNS = 40  # the user's config: the first 40 runs, CSV only
SCROLLED_ROWS = 40
# Uncompressed, so that tests/pdf_fonts.py reads the type sizes from the page streams.
TEX_PREAMBLE = r"""\documentclass[%s]{article}
\pdfcompresslevel=0 \pdfobjcompresslevel=0
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
    assert re.search(r"start infer_run \(model=sim-run-01-Instant\)", text)
    assert re.search(r"done  infer_run \(model=sim-run-01-Instant\) in \d", text)
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
        assert "Float too large" not in log, f"{source.name} in {columns}: a float too large"
        if columns == "twocolumn":  # the page the parts are made for
            pdf = document.with_suffix(".pdf")
            smallest = min(font_sizes(pdf.read_bytes()))
            assert smallest >= SMALLEST_TYPE_PT, f"{source.name}: {smallest} pt type"
            _screenshot_pdf(pdf, f"latex_{source.stem}")


def _screenshots() -> Path | None:
    folder = os.environ.get("DUALCOG_SCREENSHOTS")
    return Path(folder) if folder else None


def _screenshot_pdf(pdf: Path, name: str) -> None:
    """The first page of `pdf` as <name>.png in DUALCOG_SCREENSHOTS, when set."""
    folder = _screenshots()
    if folder is None:
        return
    pdftoppm = shutil.which("pdftoppm")
    if pdftoppm is None:
        pytest.fail("DUALCOG_SCREENSHOTS is set but pdftoppm (poppler-utils) is missing")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [pdftoppm, "-png", "-r", "80", "-f", "1", "-l", "1", "-singlefile", str(pdf),
         str(folder / name)],
        check=True, timeout=60,
    )  # fmt: skip


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


# The header cell over the first value column, and what a person sees at its centre.
HEADER_IN_VIEW = """(() => {
  const table = document.querySelector(
    'section.view:not([hidden]) div.variant:not([hidden]) table.results');
  const head = table.querySelector('thead tr:last-child th:nth-child(2)').getBoundingClientRect();
  const row = table.querySelectorAll('tbody tr[data-model]')[%d].getBoundingClientRect();
  const seen = document.elementFromPoint(head.left + head.width / 2, head.top + head.height / 2);
  return {top: head.top, bottom: head.bottom, height: innerHeight, row: row.top,
          seen: seen ? seen.closest('thead') !== null : false, scrolled: scrollY};
})()"""


def test_the_leaderboard_keeps_its_header_in_view_40_rows_down(paper_run) -> None:
    workdir, _ = paper_run
    with Browser(width=1400, height=900) as browser:
        browser.open((workdir / "results" / "leaderboard.html").as_uri())
        x, y = browser.evaluate(
            "(() => { const r = document.querySelector('table.results tbody')"
            ".getBoundingClientRect(); return [r.left + 200, Math.min(r.top + 40, 800)]; })()"
        )
        row_height = browser.evaluate(
            "document.querySelector('tbody tr[data-model]').getBoundingClientRect().height"
        )
        # A person's mouse wheel over the table, 40 rows' worth.
        browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for _ in range(SCROLLED_ROWS):
            browser.call(
                "Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0,
                deltaY=row_height,
            )  # fmt: skip
        browser.wait_for(f"scrollY >= {SCROLLED_ROWS * row_height * 0.9}")
        browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        seen = browser.evaluate(HEADER_IN_VIEW % SCROLLED_ROWS)
        assert seen["top"] >= 0 and seen["bottom"] <= seen["height"], seen
        assert seen["seen"], f"the header is covered: {seen}"
        assert seen["bottom"] <= seen["row"] < seen["height"], seen  # row 40 below it, in view
        if _screenshots():
            browser.screenshot(_screenshots() / "leaderboard_45_runs.png")
        assert browser.errors == []


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


# After every test above, which read the default config's outputs: the user's config next.
@pytest.fixture(scope="module")
def user_run(paper_run) -> tuple[Path, list[str], list[str], subprocess.CompletedProcess]:
    workdir, _ = paper_run
    config = yaml.safe_load((workdir / "config" / "config.yaml").read_text())
    names = [m["name"] for m in config["models"]]
    kept, dropped = names[:USER_RUNS], names[USER_RUNS:]
    config["models"] = config["models"][:USER_RUNS]
    config["compare"] = [p for p in config.get("compare") or [] if set(p) <= set(kept)]
    config["tables"] = {**config.get("tables", {}), "formats": ["csv"]}
    (workdir / "user.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run = snakemake(workdir, "--configfile", str(workdir / "user.yaml"))
    (workdir / "console_user.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stderr[-4000:]
    return workdir, kept, dropped, run


def _presented(results: Path) -> list[Path]:
    pages = sorted((results / "explorer").glob("*.html"))
    folders = ("tables", "plots", "compare")
    return [p for f in folders for p in sorted((results / f).glob("*"))] + pages


def test_a_user_config_leaves_none_of_the_other_configs_outputs(user_run) -> None:
    workdir, kept, dropped, run = user_run
    results = workdir / "results"
    tables = sorted(p.name for p in (results / "tables").iterdir())
    assert tables and all(n.endswith((".csv", ".stamp.json")) for n in tables), tables
    assert {p.stem for p in (results / "explorer").glob("*.html")} == set(kept)
    for path in [*_presented(results), results / "leaderboard.html"]:
        text = path.read_text(encoding="utf-8", errors="replace")
        found = [name for name in dropped if name in text]
        assert not found, f"{path} names runs of the other config: {found}"
    summary = run.stderr[run.stderr.rindex("run summary") :]
    assert re.search(r"tables: .*/results/tables/ \([a-z_, ]+; csv\)\n", summary), summary
    assert "removed " in run.stderr and "left by a run of another config" in run.stderr


def test_the_report_of_the_user_config_shows_only_its_models(user_run) -> None:
    workdir, kept, dropped, _ = user_run
    # The other config's report now would show this run's files as its own: refused.
    other = snakemake(workdir, "--report", str(workdir / "other.html"))
    assert other.returncode != 0 and "would mix the two" in other.stderr
    assert not (workdir / "other.html").exists()
    user = str(workdir / "user.yaml")
    report = snakemake(workdir, "--configfile", user, "--report", str(workdir / "user_report.html"))
    assert report.returncode == 0, report.stderr[-3000:]
    text = (workdir / "user_report.html").read_text(encoding="utf-8")
    results = json.loads(re.search(r"var results = (\{.*?\});\n", text, re.S).group(1))
    shown = {path for path in results}
    assert "results/leaderboard.html" in shown
    assert not [p for p in shown if p.startswith("results/tables/") and not p.endswith(".csv")]
    for path, entry in results.items():
        encoded = entry.get("data_uri", ",").split(",", 1)[1]
        data = base64.b64decode(encoded).decode("utf-8", "replace")
        found = [name for name in dropped if name in data]
        assert not found, f"{path} in the report names runs of the other config: {found}"
    with Browser() as browser:
        browser.open(results["results/leaderboard.html"]["data_uri"], timeout=60)
        rows = browser.evaluate(
            "Array.from(new Set(Array.from(document.querySelectorAll('tr[data-model]'),"
            " r => r.dataset.model)))"
        )
        assert sorted(rows) == sorted(kept)
