"""The summary a successful run ends with (the Snakefile's `onsuccess`): per model its coverage
(samples with a response / samples expected, from the metrics' `response_rate` rows) and its
requests without an answer by type (its response rows whose status is not `ok`), then where
the tables, the leaderboard and the explorer are. The Snakefile's process imports this
module: pyarrow only, no pandas.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dualcog.config import model_tasks

# Extra per-model columns: (header, function of the model name -> cell text). The usage and
# outcome summary (requests, tokens, cost; answered/truncated/refused shares) plugs in here.
ExtraColumn = tuple[str, Callable[[str], str]]
# The metrics rows (metric, stratum, parse) that hold a model's coverage of a task.
RESPONSE_RATE_ROW = ("response_rate", "all", "compatible")


@dataclass
class ModelSummary:
    model: str
    responses: int = 0
    expected: int = 0
    unanswered: Counter[str] = field(default_factory=Counter)  # error type -> rows

    @property
    def coverage(self) -> str:
        if not self.expected:
            return "–"
        share = 100 * self.responses / self.expected
        return f"{self.responses:,}/{self.expected:,} ({share:.1f}%)"

    @property
    def unanswered_text(self) -> str:
        if not self.unanswered:
            return "0"
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in self.unanswered.most_common())
        return f"{sum(self.unanswered.values()):,} ({kinds})"


def model_summaries(metrics: Path, responses: Mapping[str, Sequence[Path]]) -> list[ModelSummary]:
    """One summary per model of `responses` (model -> its responses files), in that order."""
    import pyarrow.parquet as pq  # here: the Snakefile's onsuccess handler imports this module

    # ParquetFile and plain lists, not read_table's filters or a compute filter: those import
    # pandas (pyarrow.dataset; the pandas check of a Python scalar), half a CPU second.
    summaries = {model: ModelSummary(model) for model in responses}
    names = ["model", "metric", "stratum", "parse", "value", "n"]
    table = pq.ParquetFile(metrics).read(columns=names, use_threads=False)
    for model, metric, stratum, parse, value, n in zip(
        *(table.column(name).to_pylist() for name in names), strict=True
    ):
        summary = summaries.get(model)
        if summary is not None and (metric, stratum, parse) == RESPONSE_RATE_ROW:
            summary.expected += int(n)
            summary.responses += round(value * n)
    for model, paths in responses.items():
        for path in paths:
            table = pq.ParquetFile(path).read(columns=["status", "error_type"], use_threads=False)
            statuses, kinds = (table.column(n).to_pylist() for n in ("status", "error_type"))
            rows = zip(statuses, kinds, strict=True)
            summaries[model].unanswered.update(
                str(kind or status) for status, kind in rows if status != "ok"
            )
    return list(summaries.values())


def outputs_lines(results: Path, tables: Sequence[str | Path] | None = None) -> list[str]:
    """Where a person finds the outputs, as they exist on disk (absolute: a run may have been
    started from another folder with --directory). `tables`: the table files this config
    makes (relative to the working directory, like `results`); only those are listed, never
    another config's left in the folder. None: every table file found."""
    lines = []
    if tables is None:
        found = sorted((results / "tables").glob("*.*"))
    else:
        found = sorted(p for p in map(Path, tables) if p.is_file())
    found = [p for p in found if p.name.count(".") == 1]  # not the .stamp.json sidecars
    results = results.resolve()
    if found:
        stems = ", ".join(dict.fromkeys(p.stem for p in found))
        formats = ", ".join(sorted({p.suffix[1:] for p in found}))
        lines.append(f"tables: {results}/tables/ ({stems}; {formats})")
    for label, path in (("leaderboard", results / "leaderboard.html"),
                        ("explorer", results / "explorer")):  # fmt: skip
        if path.exists():
            lines.append(f"{label}: {path}{'/' if path.is_dir() else ''}")
    return lines


def summary_lines(
    summaries: Sequence[ModelSummary],
    results: Path,
    extra: Sequence[ExtraColumn] = (),
    tables: Sequence[str | Path] | None = None,
) -> list[str]:
    headers = ["model", "coverage", "requests without an answer", *(h for h, _ in extra)]
    rows = [
        [s.model, s.coverage, s.unanswered_text, *(cell(s.model) for _, cell in extra)]
        for s in summaries
    ]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [f"run summary: {len(summaries)} models"]
    for row in [headers, *rows]:
        lines.append(
            "  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        )
    return lines + outputs_lines(results, tables)


def print_final_summary(
    config: Mapping[str, Any],
    results: Path = Path("results"),
    extra: Sequence[ExtraColumn] = (),
    stream: Any = None,
    tables: Sequence[str | Path] | None = None,
) -> None:
    """The run summary to stderr; nothing when the run made no metrics (e.g. one target)."""

    metrics = results / "metrics" / "metrics.parquet"
    if not metrics.is_file():
        return
    responses = {
        str(model["name"]): [
            path
            for task in model_tasks(config, model)
            if (path := results / "responses" / str(model["name"]) / f"{task}.parquet").is_file()
        ]
        for model in config["models"]
    }
    for line in summary_lines(model_summaries(metrics, responses), results, extra, tables):
        print(line, file=stream or sys.stderr)
