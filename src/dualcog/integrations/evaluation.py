"""One model run's answers scored exactly as the workflow scores them (parse -> score -> metrics).

The workflow's `parse` and `score` jobs read RESPONSES files; here the same library calls are
fed answers held in memory (an inspect_ai log's outputs), so both give the same METRICS rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from dualcog.parsing import parse_run
from dualcog.schemas import RESPONSES, table_from_columns
from dualcog.scoring.pairing import dual_pairs


@dataclass(frozen=True)
class Answer:
    """A model's answer to one sample: its text, or why there is none."""

    text: str | None
    error_type: str | None = None
    error_message: str | None = None


def responses_table(
    samples: pa.Table, answers: Mapping[str, Answer], model: str, backend: str
) -> pa.Table:
    """RESPONSES rows for every sample of `samples`: `ok` with the answer's text, else an
    `error` row (a request failed) or a `missing` row (no answer was recorded)."""
    columns: dict[str, list] = {name: [] for name in RESPONSES.names}
    for sample_id, task in zip(
        samples.column("sample_id").to_pylist(), samples.column("task").to_pylist(), strict=True
    ):
        answer = answers.get(sample_id)
        ok = answer is not None and answer.text is not None and answer.error_type is None
        if ok:
            status = "ok"
        elif answer is not None and answer.error_type is not None:
            status = "error"
        else:
            status = "missing"
        row = {
            "sample_id": sample_id,
            "task": task,
            "model": model,
            "backend": backend,
            "raw_text": answer.text if ok else None,
            "status": status,
            "error_type": None if ok or answer is None else answer.error_type,
            "error_message": None if ok or answer is None else answer.error_message,
        }
        for name in RESPONSES.names:
            columns[name].append(row.get(name))
    return table_from_columns([columns[name] for name in RESPONSES.names], RESPONSES)


@dataclass(frozen=True)
class RunResult:
    parsed: pa.Table  # PARSED
    run: dict  # the run-level parse facts (scale, stage counts)
    scores: pa.Table  # SCORES
    metrics: pa.Table  # METRICS


def score_answers(
    model: str,
    samples: pa.Table,
    answers: Mapping[str, Answer],
    *,
    bbox_scale: str | None = None,
    backend: str = "inspect",
) -> RunResult:
    """Parse, score and aggregate one run's answers to `samples` (SAMPLES rows of the tasks
    it was asked): the calls of the workflow's `pairs`, `parse` and `score` jobs, in order."""
    # here: scoring loads pyarrow.compute, which mlflow_tracking's use of this module does not need
    from dualcog.scoring import model_metrics, score_samples

    responses = responses_table(samples, answers, model, backend)
    parsed, run = parse_run(
        samples.select(["sample_id", "task", "options"]),
        responses.select(["sample_id", "task", "raw_text", "status"]),
        bbox_scale,
    )
    scores = score_samples(samples, parsed)
    pairs, _ = dual_pairs(samples)
    tasks = list(dict.fromkeys(samples.column("task").to_pylist()))
    metrics = model_metrics(model, tasks, scores, pairs)
    return RunResult(parsed, run, scores, metrics)


def metric_key(task: str, parse: str, stratum: str, metric: str) -> str:
    """The name one METRICS row goes by outside the workflow (inspect, MLflow): parse mode,
    task, stratum (`all` left out) and metric, joined by `/`."""
    parts = [parse, task] + ([] if stratum == "all" else [stratum]) + [metric]
    return "/".join(parts)


def metric_values(metrics: pa.Table) -> dict[str, float]:
    """METRICS rows of one model as {metric_key: value} (NaN values kept)."""
    rows = metrics.select(["task", "parse", "stratum", "metric", "value"]).to_pylist()
    return {
        metric_key(r["task"], r["parse"], r["stratum"], r["metric"]): float(r["value"])
        for r in rows
    }
