"""A repeat set (`repeats: k`, dualcog.repeats) as one row of every table.

Each repeat is a run of its own through inference, parsing and scoring; here its rows become
the row of the model it repeats:

- a metric is the mean over the repeats that have it;
- the response rate counts the set: responses over all repeats / k x the samples of one, so a
  set with a repeat missing (not run, or selected out) shows its coverage short of k runs,
  and its cells carry the dagger of values computed from fewer than all expected answers;
- the usage figures, stage counts and outcome shares are summed (or pooled) over the set;
- the spread is the sample standard deviation (ddof 1) over the repeats of each cell's value,
  read off the same table built with one row per repeat, so every table's spread is that of
  exactly what its cell shows (a 4-task mean, an overall score, the tokens of a run).

A column `Repeats` says how many repeats the row averages of how many configured ("2/3" is an
incomplete set, never shown as whole).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dualcog.repeats import REPEAT_OF, REPEATS, fold_sets
from dualcog.tables.build import UsageInputs
from dualcog.tables.catalog import build_all
from dualcog.tables.coverage import mean_output_tokens
from dualcog.tables.inputs import TableInputs
from dualcog.tables.model import Table

REPEATS_HEADER = "Repeats"
REPEATS_NOTE = (
    "Repeats: runs averaged / runs configured of a sampling model run several times; "
    "its values are the mean over those runs and ±x.x the standard deviation between them "
    "(percentage points, or the column's unit). A row with fewer runs than configured is "
    "incomplete: its coverage counts the missing runs as missing answers (†)."
)


# A table whose rows are a filter of another's takes its spread from the other's rows: a
# repeat left out by the filter still counts (audit_gains keeps rows whose change is > 0).
SPREAD_SOURCE = {"audit_gains": "audit"}


@dataclass(frozen=True)
class RepeatSet:
    base: str
    runs: tuple[str, ...]  # the configured repeats' run names (those selected)
    size: int  # repeats configured


def repeat_plan(models: Iterable[Mapping[str, Any]]) -> dict[str, RepeatSet]:
    """Base name -> its repeat set, from the configured runs (empty without repeats)."""
    runs: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    for model in models:
        if model.get(REPEAT_OF):
            base = str(model[REPEAT_OF])
            runs.setdefault(base, []).append(str(model["name"]))
            sizes[base] = int(model.get(REPEATS) or 1)
    return {base: RepeatSet(base, tuple(names), sizes[base]) for base, names in runs.items()}


def run_to_set(plan: Mapping[str, RepeatSet]) -> dict[str, str]:
    return {run: entry.base for entry in plan.values() for run in entry.runs}


def collapse_models(models: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The models with each repeat set in one entry, named and labelled as configured, at
    the place of its first repeat."""
    out = []
    for entry, first in fold_sets(models, lambda model: bool(model.get(REPEAT_OF))):
        if first is not None:
            entry["display_name"] = first.get("repeat_label") or entry["name"]
            entry["explorer_page"] = str(first["name"])  # a set has no page: its first repeat's
        out.append(entry)
    return out


def collapse_metrics(metrics: pd.DataFrame, plan: Mapping[str, RepeatSet]) -> pd.DataFrame:
    """METRICS rows with each repeat set's runs replaced by one row per metric of the set."""
    owner = run_to_set(plan)
    if not owner:
        return metrics
    is_repeat = metrics["model"].isin(list(owner))
    kept = metrics[~is_repeat]
    rows = metrics[is_repeat].assign(model=metrics.loc[is_repeat, "model"].map(owner))
    key = ["model", "task", "parse", "stratum", "metric"]
    grouped = rows.groupby(key, sort=False, dropna=False)
    merged = grouped.agg(value=("value", "mean"), n=("n", "max")).reset_index()
    rate = merged["metric"] == "response_rate"
    if rate.any():
        # Responses of the set over k runs' worth of samples: a missing run is missing answers.
        responses = (rows["value"] * rows["n"]).groupby([rows[c] for c in key], sort=False)
        counted = responses.sum().reindex(pd.MultiIndex.from_frame(merged[key])).to_numpy()
        sizes = merged["model"].map({b: s.size for b, s in plan.items()}).to_numpy()
        expected = merged["n"].to_numpy() * sizes
        merged.loc[rate, "value"] = np.rint(counted[rate]) / expected[rate]
        merged.loc[rate, "n"] = expected[rate]
    merged = merged.astype({"n": metrics["n"].dtype}) if len(merged) else merged
    return pd.concat([kept, merged[metrics.columns]], ignore_index=True)


def present_runs(metrics: pd.DataFrame, plan: Mapping[str, RepeatSet]) -> dict[str, list[str]]:
    """Base -> the runs of its set that have metrics (were run and scored)."""
    have = set(metrics["model"].astype(str))
    return {base: [r for r in entry.runs if r in have] for base, entry in plan.items()}


def rename_runs(table: pa.Table, owner: Mapping[str, str], column: str = "model") -> pa.Table:
    """`table` with each repeat's run name in `column` replaced by its set's name."""
    if not owner or column not in table.column_names:
        return table
    names = [owner.get(v, v) if v is not None else None for v in table.column(column).to_pylist()]
    at = table.column_names.index(column)
    return table.set_column(at, column, pa.array(names, type=table.schema.field(column).type))


def add_spread(
    table: Table, per_run: Table, plan: Mapping[str, RepeatSet], present: Mapping[str, list[str]]
) -> Table:
    """`table` (repeat sets collapsed) with the between-repeat SD of every numeric cell of a
    set's row, read from `per_run` (the same table, one row per repeat), and the `Repeats`
    column. Tables without a repeat set's row come back unchanged."""
    frame = table.frame
    sets = [base for base in plan if base in frame.index]
    if not sets:
        return table
    numeric = [*table.value_headers, *(h for h in table.number_formats if h in frame.columns)]
    spreads = dict(table.spreads)
    for base in sets:
        runs = [r for r in present.get(base, []) if r in per_run.frame.index]
        for header in numeric:
            if header not in per_run.frame.columns:
                continue
            values = pd.to_numeric(per_run.frame.loc[runs, header], errors="coerce").dropna()
            if len(values) >= 2:
                spreads[(base, header)] = float(values.std(ddof=1))
    frame = frame.copy()
    counts = [f"{len(present.get(m, []))}/{plan[m].size}" if m in plan else "" for m in frame.index]
    frame.insert(list(frame.columns).index("Model") + 1, REPEATS_HEADER, counts)
    text = list(table.text_columns)
    text.insert(text.index("Model") + 1 if "Model" in text else 0, REPEATS_HEADER)
    return replace(
        table,
        frame=frame,
        text_columns=text,
        spreads=spreads,
        notes=[*table.notes, REPEATS_NOTE],
    )


def _pooled_shares(shares: pd.DataFrame, owner: Mapping[str, str]) -> pd.DataFrame:
    """Outcome shares of each set over all its repeats' samples (weighted by `samples`)."""
    if shares.empty or not owner:
        return shares
    classes = [c for c in shares.columns if c != "samples"]
    counts = shares[classes].mul(shares["samples"], axis=0)
    counts["samples"] = shares["samples"]
    counts = counts.groupby(lambda run: owner.get(str(run), str(run)), sort=False).sum()
    pooled = counts[classes].div(counts["samples"].where(counts["samples"] > 0), axis=0)
    pooled["samples"] = counts["samples"]
    return pooled


def collapse_inputs(inputs: TableInputs, plan: Mapping[str, RepeatSet]) -> TableInputs:
    """What the tables read, with each repeat set as one model (module docstring)."""

    owner = run_to_set(plan)
    present = present_runs(inputs.metrics, plan)
    runs = {k: v for k, v in inputs.runs.items() if k not in owner}
    counts = {k: dict(v) for k, v in inputs.counts.items() if k not in owner}
    for base, names in present.items():
        if names and names[0] in inputs.runs:
            runs[base] = {**inputs.runs[names[0]], "model": base}
        summed: dict[str, int] = {}
        for name in names:
            for stage, count in inputs.counts.get(name, {}).items():
                summed[stage] = summed.get(stage, 0) + int(count)
        counts[base] = summed
    usage = inputs.usage
    tokens = dict(inputs.tokens)
    if usage is not None:
        facts = rename_runs(usage.facts, owner)
        # A mode flag of any repeat is the set's (its notes and badges name the row).
        flags = {owner.get(run, run): why for run, why in usage.mode_flags.items()}
        usage = UsageInputs(facts, _pooled_shares(usage.shares, owner), flags)
        tokens = mean_output_tokens(
            [facts.select(["model", "status", "completion_tokens"]).to_pandas()]
        )
    return replace(
        inputs,
        metrics=collapse_metrics(inputs.metrics, plan),
        runs=runs,
        counts=counts,
        tokens=tokens,
        usage=usage,
    )


def build_tables(
    names: Iterable[str], inputs: TableInputs, models: Sequence[Mapping[str, Any]]
) -> list[Table]:
    """The catalog's tables `names` (dualcog.tables.build.build_all), each repeat set as one
    row with its mean, spread and `Repeats` count; without repeats exactly `build_all`."""

    names = list(names)

    def build(source: TableInputs, runs: Sequence[Mapping[str, Any]]) -> list[Table]:
        return build_all(
            names, source.metrics, runs, source.runs, source.counts, source.tokens, source.usage
        )

    plan = repeat_plan(models)
    if not plan:
        return build(inputs, models)
    tables = build(collapse_inputs(inputs, plan), collapse_models(models))
    sources = [SPREAD_SOURCE.get(name, name) for name in names]
    per_run = dict(zip(sources, build_all(
        sources, inputs.metrics, models, inputs.runs, inputs.counts, inputs.tokens, inputs.usage
    ), strict=True))  # fmt: skip
    present = present_runs(inputs.metrics, plan)
    return [
        add_spread(table, per_run[source], plan, present)
        for table, source in zip(tables, sources, strict=True)
    ]


def collapsed_views(
    inputs: TableInputs, models: Sequence[Mapping[str, Any]], build_views: Any
) -> tuple[TableInputs, list[Mapping[str, Any]], list[Any]]:
    """The leaderboard's inputs, models and views (`build_views(inputs, models)`) with each
    repeat set as one row, its spread beside its interval."""
    plan = repeat_plan(models)
    if not plan:
        return inputs, list(models), build_views(inputs, models)
    per_run = {view.key: view for view in build_views(inputs, models)}
    collapsed, merged = collapse_inputs(inputs, plan), collapse_models(models)
    present = present_runs(inputs.metrics, plan)
    views = []
    for view in build_views(collapsed, merged):
        runs = {v.parse: v.table for v in per_run[view.key].variants} if view.key in per_run else {}
        variants = [
            replace(v, table=add_spread(v.table, runs[v.parse], plan, present))
            if v.parse in runs
            else v
            for v in view.variants
        ]
        views.append(replace(view, variants=variants))
    return collapsed, merged, views
