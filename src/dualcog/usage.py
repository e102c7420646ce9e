"""What a run used: tokens, dollars and the mode check, summed in Arrow.

Everything is read from the response rows (schemas.RESPONSES) the workflow already writes,
or from the `parse` jobs' response facts (schemas.RESPONSE_FACTS), as Arrow tables:

- usage per model and task (`usage_records`): requests, prompt / completion / reasoning /
  cached prompt tokens as the server reported them, and the cost in USD from the model's
  `prices` (USD per million tokens; cached prompt tokens at `cached_input` where given).
  Reasoning tokens are part of `completion_tokens` in the OpenAI usage convention, so they are
  shown but not priced a second time. Built-in backends (oracle, random, simulated) send no
  request and report nothing: their counts are missing (None; tables render "–"), never 0;
- the mode check (`mode_flags`): a -Thinking run none of whose answers carries reasoning, or
  an -Instant run some of whose answers do, is flagged (the provider's switch did not take
  effect).

`run_usage_lines` gives the end-of-run summary's lines from the files under results/ (in the
Snakemake process after every completed run); the usage table builds its frames from `usage_records`
(dualcog.tables.usage). The outcome classes are dualcog.outcomes'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dualcog.backends import declared
from dualcog.config import model_tasks
from dualcog.errors import DataError
from dualcog.outcomes import response_facts_table
from dualcog.prices import model_prices
from dualcog.routes import split_mode
from dualcog.schemas import RESPONSE_FACTS, column_array

# pyarrow.compute is imported by the functions that compute with it: the Snakefile's onsuccess
# handler imports this module for `run_usage_lines`, which needs none of it.

# cached_tokens: the part of prompt_tokens the provider served from its prompt cache.
TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")
USAGE_COLUMNS = ("model", "task", "requests", "reported", *TOKEN_COLUMNS, "cost_usd")
# What is read of a responses file: the texts only to tell empty answers and reasoning apart.
_READ_COLUMNS = (
    "sample_id", "task", "model", "backend", "status", "raw_text", "reasoning_text",
    *TOKEN_COLUMNS, "finish_reason", "refusal", "error_type", "error_message",
)  # fmt: skip


def _concat(tables: list[pa.Table]) -> pa.Table:
    """RESPONSE_FACTS tables as one (`Schema.empty_table` would import pandas: pyarrow asks
    whether its empty columns are pandas objects)."""
    return pa.concat_tables(tables) if tables else pa.Table.from_batches([], RESPONSE_FACTS)


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


def read_response_facts(paths: Iterable[str | Path]) -> pa.Table:
    """RESPONSE_FACTS rows (`outcomes.response_facts_table`) of several responses files,
    concatenated in the order given; DataError names a bad file."""
    tables = [response_facts_table(_read(p, _READ_COLUMNS, "responses")) for p in paths]
    return _concat(tables)


def read_facts(paths: Iterable[str | Path]) -> pa.Table:
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
    return _concat(tables)


def _runs(table: pa.Table, keys: tuple[str, ...]) -> list[tuple[tuple[Any, ...], int, int]]:
    """(key values, start, length) of each run of consecutive rows with equal `keys`.

    Facts are concatenated file by file, so a run holds one file's task: a few hundred runs
    at the paper's scale, where its rows are a quarter of a million. Summing each run's slice
    in Arrow costs a few milliseconds; a Python loop over the rows cost most of a CPU second
    (and Arrow's group_by would import pandas)."""
    import pyarrow.compute as pc

    n = table.num_rows
    if n == 0:
        return []
    boundary = None
    for name in keys:
        column = table.column(name)
        differs = pc.not_equal(column.slice(1), column.slice(0, n - 1))
        differs = pc.or_kleene(differs, pc.is_null(differs))  # a null key ends a run too
        boundary = differs if boundary is None else pc.or_(boundary, differs)
    starts = [0, *(int(i) + 1 for i in pc.indices_nonzero(boundary).to_pylist())]
    stops = [*starts[1:], n]
    columns = [table.column(name) for name in keys]
    return [
        (tuple(column[start].as_py() for column in columns), start, stop - start)
        for start, stop in zip(starts, stops, strict=True)
    ]


def _sum(values: pa.ChunkedArray | pa.Array, start: int, length: int) -> Any:
    """The sum of a slice; None where it has no value."""
    import pyarrow.compute as pc

    return pc.sum(values.slice(start, length)).as_py()


def _strings(values: tuple[str, ...]) -> pa.Array:

    return column_array(list(values), pa.string(), "value_set")


def usage_records(facts: pa.Table, models: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, task) of `models` with rows in `facts` (RESPONSE_FACTS), in the order of
    their first row: a dict of `USAGE_COLUMNS`.

    `requests`: rows that were a request (status ok or error; not `missing`); `reported`:
    those whose server reported usage; token sums over the reported ones; `cost_usd` from the
    model's prices. A built-in backend's row has only `model` and `task`; a count nobody
    reported and a cost without prices are None, never 0.
    """
    import pyarrow.compute as pc

    sent = pc.is_in(facts.column("status"), value_set=_strings(("ok", "error")))
    prompt, completion = facts.column("prompt_tokens"), facts.column("completion_tokens")
    reported = pc.and_(sent, pc.or_(pc.is_valid(prompt), pc.is_valid(completion)))
    unsent = pa.nulls(facts.num_rows, pa.int64())
    tokens = [pc.if_else(sent, facts.column(name), unsent) for name in TOKEN_COLUMNS]
    # [requests, reported, *token sums] per (model, task); a key may have several runs
    sums: dict[tuple[Any, ...], list[Any]] = {}
    for key, start, length in _runs(facts, ("model", "task")):
        entry = sums.setdefault(key, [0, 0] + [None] * len(TOKEN_COLUMNS))
        entry[0] += _sum(sent, start, length) or 0
        entry[1] += _sum(reported, start, length) or 0
        for index, values in enumerate(tokens, start=2):
            total = _sum(values, start, length)
            if total is not None:
                entry[index] = (entry[index] or 0) + total
    by_name = {str(m["name"]): m for m in models}
    records = []
    for (model, task), entry in sums.items():
        config = by_name.get(str(model))
        if config is None:
            continue
        record: dict[str, Any] = {"model": str(model), "task": str(task)}
        records.append(record)
        if not declared(config.get("backend")).reports_usage:
            continue
        record.update(zip(("requests", "reported", *TOKEN_COLUMNS), entry, strict=True))
        prices = model_prices(config)
        if prices is not None and record["reported"]:
            record["cost_usd"] = prices.cost(
                record["prompt_tokens"] or 0,
                record["completion_tokens"] or 0,
                record["cached_tokens"] or 0,
            )
    return records


def model_totals(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model (in order of its first record): the sums of its `usage_records` over its
    tasks, None where none of them has the number."""
    totals: dict[str, dict[str, list[float]]] = {}
    for record in records:
        numbers = totals.setdefault(record["model"], {c: [] for c in USAGE_COLUMNS[2:]})
        for name, values in numbers.items():
            if record.get(name) is not None:
                values.append(record[name])
    return {
        model: {name: math.fsum(values) if values else None for name, values in numbers.items()}
        for model, numbers in totals.items()
    }


def has_mode(name: str) -> str | None:
    """`Thinking`, `Instant` or `Reasoning` from a run name's suffix (None without one)."""

    return split_mode(name)[1]


def mode_flags(facts: pa.Table, models: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Run name -> why its mode looks switched off (or on) against its name; only flagged runs.

    Checked over the ok answers (RESPONSE_FACTS rows) of runs that send requests (not
    built-ins): a -Thinking run none of whose answers has reasoning, an -Instant run some of
    whose answers have.
    """
    import pyarrow.compute as pc

    ok = pc.is_in(facts.column("status"), value_set=_strings(("ok",)))
    reasoned = pc.and_(ok, facts.column("has_reasoning"))  # a null flag counts as none
    counts: dict[str, list[int]] = {}  # run -> [answers, answers with reasoning]
    for (model,), start, length in _runs(facts, ("model",)):
        entry = counts.setdefault(str(model), [0, 0])
        entry[0] += _sum(ok, start, length) or 0
        entry[1] += _sum(reasoned, start, length) or 0
    flags = {}
    for model in models:
        name = str(model["name"])
        mode = has_mode(name)
        if not declared(model.get("backend")).reports_usage or mode not in ("Thinking", "Instant"):
            continue
        answers, with_reasoning = counts.get(name, (0, 0))
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


def _count(value: float | None) -> str:
    return "–" if value is None else f"{int(value):,}"


def _dollars(value: float | None) -> str:
    return "–" if value is None else f"${value:,.4f}"


def _cached(value: float | None) -> str:
    return "" if value is None or value == 0 else f", {_count(value)} of the prompt cached"


def usage_lines(facts: pa.Table, models: Iterable[Mapping[str, Any]]) -> list[str]:
    """Per-model usage and the total, plus mode-check flags, as short summary lines."""
    models = list(models)
    totals = model_totals(usage_records(facts, models))
    sending = {model: row for model, row in totals.items() if row["requests"] is not None}
    if not sending:
        return []
    lines = ["usage (tokens as the servers reported them; – where none was reported):"]
    for model, row in sending.items():
        lines.append(
            f"  {model}: {_count(row['requests'])} requests, {_count(row['prompt_tokens'])} "
            f"prompt + {_count(row['completion_tokens'])} completion tokens "
            f"({_count(row['reasoning_tokens'])} reasoning{_cached(row['cached_tokens'])}), "
            f"{_dollars(row['cost_usd'])}"
        )
    sums = model_totals({"model": "", **row} for row in sending.values())[""]
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
        combined = _concat([read_facts(facts), read_response_facts(responses)])
    except DataError as error:
        return [f"usage: not summed ({error})"]
    return usage_lines(combined, config.get("models", []))


def _newer_than_all(path: Path, others: Iterable[Path]) -> bool:
    try:
        written = path.stat().st_mtime
    except OSError:
        return False
    return all(written >= other.stat().st_mtime for other in others)
