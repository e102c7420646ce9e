"""The run's console lines (dualcog.console) and its closing summary (dualcog.summary)."""

from __future__ import annotations

import io
import logging

import pyarrow as pa
import pyarrow.parquet as pq

from dualcog.console import (
    JobConsole,
    configfile_paths,
    progress_text,
    unreadable_config_detail,
)
from dualcog.summary import model_summaries, print_final_summary


def record(message: str | None = None, **extra) -> logging.LogRecord:
    item = logging.LogRecord("snakemake", logging.INFO, __file__, 1, message, None, None)
    item.__dict__.update(extra)
    return item


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_job_start_and_end_and_rate_limited_progress() -> None:
    clock = Clock()
    console = JobConsole(lambda r: f"other: {r.getMessage()}", every_s=10, clock=clock,
                         wall_clock=lambda: "12:00:00")  # fmt: skip
    info = record(" Rule: parse, Jobid: 7", event="job_info", jobid=7, rule_name="parse",
                  wildcards={"model": "m-Instant"}, input=["x"] * 10_000)  # fmt: skip
    assert console.line(info) == "12:00:00 start parse (model=m-Instant) [job 7]"
    assert console.line(record("Select jobs to execute...")) is None
    assert console.line(record("Execute 1 jobs...", event="job_started", jobs=[7])) is None
    clock.now += 65
    finished = record("Finished jobid: 7 (Rule: parse)", event="job_finished", job_id=7)
    assert console.line(finished) == "12:00:00 done  parse (model=m-Instant) in 1m05s [job 7]"
    first = console.line(record(None, event="progress", done=1, total=4))
    assert first == "12:00:00 1 of 4 jobs done (25%), elapsed 1m05s, ETA 3m15s"
    clock.now += 5
    assert console.line(record(None, event="progress", done=2, total=4)) is None  # < 10 s
    clock.now += 6
    assert "3 of 4 jobs done" in console.line(record(None, event="progress", done=3, total=4))
    clock.now += 1
    last = console.line(record(None, event="progress", done=4, total=4))
    assert last == "12:00:00 4 of 4 jobs done (100%), elapsed 1m17s"  # the last always shows
    assert console.line(record("Building DAG of jobs...")) == "other: Building DAG of jobs..."
    silent = JobConsole(lambda r: r.msg or "")  # Snakemake's format of a None message
    assert silent.line(record(None)) is None


def test_progress_text_without_a_rate_says_so() -> None:
    assert progress_text(0, 5, 3.0) == "0 of 5 jobs done (0%), elapsed 3s, ETA ?"
    assert progress_text(1, 5, 10.0).endswith("ETA 40s")


def _responses(path, statuses, error_types) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"status": statuses, "error_type": error_types}), path)


def test_summary_names_coverage_unanswered_requests_and_outputs(tmp_path) -> None:
    results = tmp_path / "results"
    (results / "metrics").mkdir(parents=True)
    rows = [  # response_rate rows: value = responses / expected, n = expected
        ("a", "landmark_position", "compatible", "all", "response_rate", 0.75, 4),
        ("a", "behavior", "compatible", "all", "response_rate", 1.0, 2),
        ("a", "landmark_position", "strict", "all", "response_rate", 0.75, 4),  # not counted
        ("a", "landmark_position", "compatible", "easy", "response_rate", 1.0, 1),  # stratum
        ("b", "landmark_position", "compatible", "all", "option_acc", 0.5, 4),
    ]
    names = ["model", "task", "parse", "stratum", "metric", "value", "n"]
    pq.write_table(pa.table(dict(zip(names, map(list, zip(*rows, strict=True)), strict=True))),
                   results / "metrics" / "metrics.parquet")  # fmt: skip
    _responses(results / "responses" / "a" / "landmark_position.parquet",
               ["ok", "error", "ok", "ok"], [None, "http_503", None, None])  # fmt: skip
    _responses(results / "responses" / "b" / "landmark_position.parquet",
               ["missing", "ok"], ["no_response_in_source", None])  # fmt: skip
    (results / "tables").mkdir()
    for name in ("image_main.tex", "image_main.csv", "image_main.stamp.json", "audit.md"):
        (results / "tables" / name).write_text("x")
    summaries = model_summaries(
        results / "metrics" / "metrics.parquet",
        {"a": [results / "responses" / "a" / "landmark_position.parquet"],
         "b": [results / "responses" / "b" / "landmark_position.parquet"]},
    )  # fmt: skip
    assert [(s.responses, s.expected) for s in summaries] == [(5, 6), (0, 0)]
    assert summaries[0].coverage == "5/6 (83.3%)" and summaries[1].coverage == "–"
    assert summaries[0].unanswered_text == "1 (http_503 1)"
    assert summaries[1].unanswered_text == "1 (no_response_in_source 1)"

    config = {"tasks": ["landmark_position"], "models": [{"name": "a"}, {"name": "b"}]}
    out = io.StringIO()
    print_final_summary(config, results, extra=[("cost", lambda m: f"${len(m)}")], stream=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "run summary: 2 models"
    assert lines[1].split() == ["model", "coverage", "requests", "without", "an", "answer", "cost"]
    assert lines[2].split()[:3] == ["a", "5/6", "(83.3%)"] and lines[2].endswith("$1")
    assert lines[-1] == f"tables: {results.resolve()}/tables/ (audit, image_main; csv, md, tex)"


def test_no_summary_without_metrics(tmp_path) -> None:
    out = io.StringIO()
    print_final_summary({"tasks": [], "models": []}, tmp_path / "results", stream=out)
    assert out.getvalue() == ""


def test_configfile_paths_are_read_from_the_command_line():
    argv = ["snakemake", "--configfile", "a.yaml", "b.yaml", "--cores", "2", "--configfiles=c.yaml"]
    assert configfile_paths(argv) == ["a.yaml", "b.yaml", "c.yaml"]
    assert configfile_paths(["snakemake", "-n"]) == []


def test_an_unreadable_config_is_named_with_line_and_column(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("models: []\n")
    bad.write_text("a: 1\n b: 2\n")
    message = "Config file is not valid JSON or YAML. In case of YAML, ..."
    argv = ["snakemake", "--configfile", str(good), str(bad)]
    detail = unreadable_config_detail(message, argv)
    assert detail is not None and detail.startswith(f"config file {bad}, line 2, column ")
    assert str(good) not in detail
    assert unreadable_config_detail("MissingInputException", argv) is None
