"""What a run used and what became of each request: tokens, dollars, outcome classes, mode check.

Everything is read from the response rows (schemas.RESPONSES) the workflow already writes:

- usage per model and task: requests, prompt / completion / reasoning / cached prompt tokens
  as the server reported them, and the cost in USD from the model's `prices` (USD per million
  tokens; cached prompt tokens at `cached_input` where given).
  Reasoning tokens are part of `completion_tokens` in the OpenAI usage convention, so they are
  shown but not priced a second time. Built-in backends (oracle, random, simulated) send no
  request and report nothing: their cells are missing (rendered "–"), never 0;
- one outcome class per sample (`OUTCOMES`), first match wins: request error, refused,
  truncated, empty, unparsable, answered;
- the mode check: a -Thinking run none of whose answers carries reasoning, or an -Instant run
  some of whose answers do, is flagged (the provider's switch did not take effect).

`run_usage_lines` gives the end-of-run summary's lines from the files under results/.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dualcog.errors import DataError
from dualcog.outcomes import (
    outcome_class,
    response_facts_table,
    unparsable_keys,
)
from dualcog.prices import model_prices
from dualcog.schemas import OUTCOMES, RESPONSE_FACTS

# cached_tokens: the part of prompt_tokens the provider served from its prompt cache.
TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")
USAGE_COLUMNS = ("model", "task", "requests", "reported", *TOKEN_COLUMNS, "cost_usd")
# What is read of a responses file: the texts only to tell empty answers and reasoning apart.
_READ_COLUMNS = (
    "sample_id", "task", "model", "backend", "status", "raw_text", "reasoning_text",
    *TOKEN_COLUMNS, "finish_reason", "refusal", "error_type", "error_message",
)  # fmt: skip


def _facts_frame(facts: pa.Table) -> pd.DataFrame:
    """RESPONSE_FACTS rows as the frame the tables read: token counts as nullable Float64,
    `has_reasoning` as nullable boolean (never null)."""
    for name in TOKEN_COLUMNS:
        index = facts.schema.get_field_index(name)
        facts = facts.set_column(index, name, facts.column(name).cast(pa.float64()))
    frame = facts.to_pandas(types_mapper={pa.float64(): pd.Float64Dtype()}.get)
    frame["has_reasoning"] = frame["has_reasoning"].astype("boolean")
    return frame


def response_facts(table: pa.Table) -> pd.DataFrame:
    """One row per response row, texts reduced to flags: `empty` (no answer text),
    `refused` (a refusal text) and `has_reasoning` (a reasoning text, or reasoning tokens
    above 0); `response_facts_table` as a frame."""
    return _facts_frame(response_facts_table(table))


def _read(path: str | Path, columns: Iterable[str], what: str) -> pa.Table:
    """The `columns` a Parquet file has; DataError names a file that does not read or lacks
    one of the columns every caller needs."""
    try:
        source = pq.ParquetFile(path)
        wanted = [c for c in columns if c in source.schema_arrow.names]
        # Without Arrow's thread pool: on files this small its hand-offs cost more CPU than
        # they save (0.84-0.44 against 1.12-0.59 CPU-s for the paper scale's 270 responses).
        table = source.read(columns=wanted, use_threads=False)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"cannot read {what}: {exc}", file=str(path)) from exc
    for required in ("sample_id", "task", "model", "status"):
        if required not in table.column_names:
            raise DataError(f"{what} table lacks a column", file=str(path), field=required)
    return table


def read_response_facts(paths: Iterable[str | Path]) -> pd.DataFrame:
    """`response_facts` of several responses files, concatenated; DataError names a bad file.

    Built in Arrow per file and converted to pandas once: a conversion per file and column
    cost most of the time at the paper's 270 files."""
    tables = [response_facts_table(_read(p, _READ_COLUMNS, "responses")) for p in paths]
    if not tables:
        return response_facts(pa.table({c: pa.array([], pa.string()) for c in _READ_COLUMNS}))
    return _facts_frame(pa.concat_tables(tables))


def read_facts(paths: Iterable[str | Path]) -> pd.DataFrame:
    """The `parse` jobs' RESPONSE_FACTS files, concatenated, as `read_response_facts` gives
    them from the responses files; DataError names a bad file."""
    tables = []
    for path in paths:
        table = _read(path, RESPONSE_FACTS.names, "response facts")
        missing = [name for name in RESPONSE_FACTS.names if name not in table.column_names]
        if missing:
            raise DataError("response facts table lacks a column", file=str(path),
                            field=missing[0])  # fmt: skip
        tables.append(table.select(RESPONSE_FACTS.names).cast(RESPONSE_FACTS))
    if not tables:
        return _facts_frame(RESPONSE_FACTS.empty_table())
    return _facts_frame(pa.concat_tables(tables))


def classify(facts: pd.DataFrame, parsed: pd.DataFrame | None = None) -> pd.Series:
    """`outcome_class` of each row of `facts` (`response_facts`); `parsed` (PARSED rows:
    sample_id, task, parse, stage, all_valid) decides `unparsable`: without it no answer is
    unparsable."""
    keys = unparsable_keys(parsed)
    rows = zip(
        facts["status"], facts["error_type"], facts["error_message"], facts["finish_reason"],
        facts["refused"] if "refused" in facts else [False] * len(facts), facts["empty"],
        facts["sample_id"], facts["task"], strict=True,
    )  # fmt: skip
    classes = [
        outcome_class(
            status, kind, message, finish, bool(refused), bool(empty), (sample_id, task) in keys
        )  # fmt: skip
        for status, kind, message, finish, refused, empty, sample_id, task in rows
    ]
    return pd.Series(classes, index=facts.index, name="outcome", dtype=object)


def read_request_outcomes(paths: Mapping[str, str | Path]) -> pd.DataFrame:
    """model, task, sample_id, outcome from each model's REQUEST_OUTCOMES file (model -> path);
    DataError names a file that does not read or lacks a column."""
    frames = []
    for model, path in paths.items():
        try:
            table = pq.ParquetFile(path).read()
        except (OSError, pa.ArrowException) as exc:
            raise DataError(f"cannot read outcome classes: {exc}", file=str(path)) from exc
        for required in ("sample_id", "task", "outcome"):
            if required not in table.column_names:
                raise DataError("outcome table lacks a column", file=str(path), field=required)
        frame = table.select(["task", "sample_id", "outcome"]).to_pandas()
        frames.append(frame.assign(model=str(model))[["model", "task", "sample_id", "outcome"]])
    if not frames:
        return pd.DataFrame(columns=["model", "task", "sample_id", "outcome"], dtype=object)
    return pd.concat(frames, ignore_index=True)


def outcome_shares(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per model: the share of its samples in each class (columns `OUTCOMES`) and `samples`."""
    counts = pd.crosstab(outcomes["model"], outcomes["outcome"])
    counts = counts.reindex(columns=list(OUTCOMES), fill_value=0)
    total = counts.sum(axis=1)
    shares = counts.div(total.where(total > 0), axis=0)
    shares["samples"] = total
    return shares


def _sum_reported(values: np.ndarray) -> float:
    present = values[~np.isnan(values)]
    return float(present.sum()) if len(present) else np.nan


def usage_by_task(facts: pd.DataFrame, models: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Per (model, task) of `models` with rows in `facts`: `USAGE_COLUMNS`.

    `requests`: rows that were a request (status ok or error; not `missing`); `reported`:
    those whose server reported usage; token sums over the reported ones; `cost_usd` from the
    model's prices. A built-in backend's row, a count nobody reported and a cost without
    prices are NaN, never 0.
    """
    from dualcog.backends import declared  # here: the explorer and parse jobs need not load it

    rows = []
    by_name = {str(m["name"]): m for m in models}
    for (model, task), group in facts.groupby(["model", "task"], sort=False):
        config = by_name.get(str(model))
        if config is None:
            continue
        row: dict[str, Any] = {"model": str(model), "task": str(task)}
        if not declared(config.get("backend")).reports_usage:
            rows.append(row)
            continue
        # numpy rather than a pandas filter per column: 270 groups at the paper's scale.
        sent = np.isin(group["status"].to_numpy(dtype=object), ["ok", "error"])
        tokens = {
            name: group[name].to_numpy(dtype=np.float64, na_value=np.nan)[sent]
            for name in TOKEN_COLUMNS
        }
        row["requests"] = int(sent.sum())
        reported = ~np.isnan(tokens["prompt_tokens"]) | ~np.isnan(tokens["completion_tokens"])
        row["reported"] = int(reported.sum())
        for name in TOKEN_COLUMNS:
            row[name] = _sum_reported(tokens[name])
        prices = model_prices(config)
        if prices is not None and row["reported"]:
            row["cost_usd"] = prices.cost(
                np.nan_to_num(row["prompt_tokens"]),
                np.nan_to_num(row["completion_tokens"]),
                np.nan_to_num(row["cached_tokens"]),
            )
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(USAGE_COLUMNS))
    return frame.astype({c: "float64" for c in USAGE_COLUMNS[2:]})


def usage_totals(by_task: pd.DataFrame) -> pd.DataFrame:
    """Per model: the sums of `usage_by_task` over its tasks (NaN stays NaN when all are)."""
    numbers = list(USAGE_COLUMNS[2:])
    return by_task.groupby("model", sort=False)[numbers].sum(min_count=1)


def has_mode(name: str) -> str | None:
    """`Thinking`, `Instant` or `Reasoning` from a run name's suffix (None without one)."""
    from dualcog.routes import split_mode  # here: routes loads yaml, which few callers need

    return split_mode(name)[1]


def mode_flags(facts: pd.DataFrame, models: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Run name -> why its mode looks switched off (or on) against its name; only flagged runs.

    Checked over the ok answers of runs that send requests (not built-ins): a -Thinking run
    none of whose answers has reasoning, an -Instant run some of whose answers have.
    """
    from dualcog.backends import declared

    flags = {}
    # Answers and answers with reasoning per run, counted in one pass over the two columns
    # (a filter of the whole frame copied its text columns: 1 CPU-s at the paper's scale).
    ok = facts.loc[facts["status"] == "ok", ["model", "has_reasoning"]]
    counts = ok.groupby("model", sort=False)["has_reasoning"].agg(["size", "sum"])
    for model in models:
        name = str(model["name"])
        mode = has_mode(name)
        if not declared(model.get("backend")).reports_usage or mode not in ("Thinking", "Instant"):
            continue
        if name not in counts.index:
            continue
        answers, with_reasoning = int(counts.at[name, "size"]), int(counts.at[name, "sum"])
        if answers == 0:
            continue
        if mode == "Thinking" and with_reasoning == 0:
            flags[name] = (
                f"-Thinking run without reasoning: none of its {answers} answers has a "
                "reasoning text or reasoning tokens (did the thinking switch take effect?)"
            )
        elif mode == "Instant" and with_reasoning:
            flags[name] = (
                f"-Instant run with reasoning: {with_reasoning} of its {answers} answers "
                "carry a reasoning text or reasoning tokens (did the switch take effect?)"
            )
    return flags


def _count(value: float) -> str:
    return "–" if pd.isna(value) else f"{int(value):,}"


def _dollars(value: float) -> str:
    return "–" if pd.isna(value) else f"${value:,.4f}"


def _cached(value: float) -> str:
    return "" if pd.isna(value) or value == 0 else f", {_count(value)} of the prompt cached"


def usage_lines(facts: pd.DataFrame, models: Iterable[Mapping[str, Any]]) -> list[str]:
    """Per-model usage and the total, plus mode-check flags, as short summary lines."""
    models = list(models)
    totals = usage_totals(usage_by_task(facts, models))
    sending = totals.dropna(subset=["requests"])
    lines = []
    for model, row in sending.iterrows():
        lines.append(
            f"  {model}: {_count(row['requests'])} requests, {_count(row['prompt_tokens'])} "
            f"prompt + {_count(row['completion_tokens'])} completion tokens "
            f"({_count(row['reasoning_tokens'])} reasoning{_cached(row['cached_tokens'])}), "
            f"{_dollars(row['cost_usd'])}"
        )
    if not lines:
        return []
    sums = sending.sum(min_count=1)
    lines.insert(0, "usage (tokens as the servers reported them; – where none was reported):")
    lines.append(
        f"  total: {_count(sums['requests'])} requests, {_count(sums['prompt_tokens'])} prompt"
        f" + {_count(sums['completion_tokens'])} completion tokens, {_dollars(sums['cost_usd'])}"
        " (models without prices not counted)"
    )
    for model, why in mode_flags(facts, models).items():
        lines.append(f"  mode check {model}: {why}")
    return lines


def run_usage_lines(config: Mapping[str, Any], results: str | Path = "results") -> list[str]:
    """The end-of-run summary's usage lines, from each configured model's files under
    `results/`: its `parse` job's response facts where they are newer than every responses
    file of the model, else the responses files that exist (a run that stopped before
    parsing, or targeted inference only, reports what it has)."""
    from dualcog.config import model_tasks

    facts, responses = [], []
    for model in config.get("models", []):
        name = str(model["name"])
        answered = [
            path
            for task in model_tasks(config, model)
            if (path := Path(results) / "responses" / name / f"{task}.parquet").is_file()
        ]
        summary = Path(results) / "parsed" / f"{name}.facts.parquet"
        if answered and _newer_than_all(summary, answered):
            facts.append(summary)
        else:
            responses.extend(answered)
    if not facts and not responses:
        return []
    try:
        frames = [read_facts(facts)] if facts else []
        if responses:
            frames.append(read_response_facts(responses))
    except DataError as error:
        return [f"usage: not summed ({error})"]
    combined = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return usage_lines(combined, config.get("models", []))


def _newer_than_all(path: Path, others: Iterable[Path]) -> bool:
    try:
        written = path.stat().st_mtime
    except OSError:
        return False
    return all(written >= other.stat().st_mtime for other in others)
