"""What a run would still send, and cost, before anything is sent (`snakemake estimate`).

Per model and request kind: the prompts (one request per sample), minus the ok answers the
response cache already holds for them under the model's current settings (the very lookup the
`openai` backend makes before sending), gives the requests still to send. Tokens per request
come, in this order, from the mean of the cached answers of that task that report usage, the
mean over the model's other cached tasks, or `estimated_tokens_per_request`. That setting counts
all tokens of a request without saying how many are input, so its dollars are a range (all at
the input price .. all at the output price); measured means give one figure, cached prompt
tokens priced at `prices.cached_input`. Only `openai` models send anything: the others are
listed with 0 to send. A model with `cost_limit` or `token_limit` is listed with what it has
spent so far (read from its cache, as the client reads it) and whether the estimate would
pass the limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dualcog.backends import declared
from dualcog.prices import model_prices

# The response cache (pyarrow.parquet) is imported where it is read: only for models that call an
# API, so an estimate without one never loads it.

ESTIMATE_COLUMNS = (
    "model", "task", "backend", "requests", "cached", "to_send", "source",
    "prompt_tokens_per_request", "completion_tokens_per_request", "tokens",
    "cost_usd_low", "cost_usd_high", "spent_usd", "spent_tokens", "cost_limit", "token_limit",
)  # fmt: skip
NUMBER_COLUMNS = ESTIMATE_COLUMNS[7:]


@dataclass(frozen=True)
class CacheState:
    """The cached ok answers of one (model, task) that match its prompts."""

    cached: int
    prompt_tokens: list[float]
    completion_tokens: list[float]
    cached_tokens: list[float]


def cache_state(
    cache_dir: str | Path, model: Mapping[str, Any], task: str, prompts: pd.DataFrame
) -> CacheState:
    """How many of `prompts` the cache answers, and those answers' reported token counts."""
    from dualcog.inference.cache import (
        ResponseCache,
        answer_settings_json,
        cache_key,
        cache_path,
    )

    path = cache_path(cache_dir, str(model["name"]), task)
    if not path.is_file():  # nothing cached yet; do not create the file
        return CacheState(0, [], [], [])
    fingerprint = answer_settings_json(model)
    hits = 0
    prompt_tokens: list[float] = []
    completion_tokens: list[float] = []
    cached_tokens: list[float] = []
    with ResponseCache(path) as cache:
        keys = zip(prompts["request_key"], prompts["sample_id"], strict=True)
        for request_key, sample_id in keys:
            entry = cache.get(cache_key(str(request_key), fingerprint), str(sample_id))
            if entry is None:
                continue
            hits += 1
            if None not in (entry.get("prompt_tokens"), entry.get("completion_tokens")):
                prompt_tokens.append(float(entry["prompt_tokens"]))
                completion_tokens.append(float(entry["completion_tokens"]))
                cached = entry.get("cached_tokens")
                cached_tokens.append(float(cached) if isinstance(cached, int) else 0.0)
    return CacheState(hits, prompt_tokens, completion_tokens, cached_tokens)


def _limit_columns(model: Mapping[str, Any], cache_dir: str | Path) -> dict[str, float]:
    """A limited model's limits and what its cache says it has spent (dualcog.inference.limits)."""
    if model.get("cost_limit") is None and model.get("token_limit") is None:
        return {}
    from dualcog.inference.cache import model_cache_dir
    from dualcog.inference.limits import SpendLimit

    model_dir = model_cache_dir(cache_dir, str(model["name"]))
    limit = SpendLimit(model, model_dir, task="")
    spent = limit.spent_now()
    return {
        "spent_usd": spent.cost if limit.cost_limit is not None else np.nan,
        "spent_tokens": spent.tokens,
        "cost_limit": np.nan if limit.cost_limit is None else limit.cost_limit,
        "token_limit": np.nan if limit.token_limit is None else limit.token_limit,
    }


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else np.nan


def estimate_model(
    model: Mapping[str, Any], prompts_by_task: Mapping[str, pd.DataFrame], cache_dir: str | Path
) -> list[dict[str, Any]]:
    """`ESTIMATE_COLUMNS` rows of one model, one per task of `prompts_by_task`."""
    name, backend = str(model["name"]), str(model.get("backend"))
    if not declared(backend).calls_api:  # only requests to an endpoint cost anything
        return [
            {"model": name, "task": task, "backend": backend, "requests": len(prompts),
             "cached": 0, "to_send": 0, "source": f"nothing sent (backend {backend})"}
            for task, prompts in prompts_by_task.items()
        ]  # fmt: skip
    states = {
        task: cache_state(cache_dir, model, task, prompts)
        for task, prompts in prompts_by_task.items()
    }
    all_prompt = [v for s in states.values() for v in s.prompt_tokens]
    all_completion = [v for s in states.values() for v in s.completion_tokens]
    all_cached = [v for s in states.values() for v in s.cached_tokens]
    limits = _limit_columns(model, cache_dir)
    prices = model_prices(model)
    configured = model.get("estimated_tokens_per_request")
    rows = []
    for task, prompts in prompts_by_task.items():
        state = states[task]
        row: dict[str, Any] = {
            "model": name,
            "task": task,
            "backend": backend,
            "requests": len(prompts),
            "cached": state.cached,
            "to_send": len(prompts) - state.cached,
            **limits,
        }
        if state.prompt_tokens:
            prompt, completion = _mean(state.prompt_tokens), _mean(state.completion_tokens)
            cached = _mean(state.cached_tokens)
            row["source"] = f"mean of {len(state.prompt_tokens)} cached answers"
        elif all_prompt:
            prompt, completion = _mean(all_prompt), _mean(all_completion)
            cached = _mean(all_cached)
            row["source"] = f"mean of {len(all_prompt)} cached answers of its other tasks"
        else:
            prompt = completion = cached = np.nan
            row["source"] = "estimated_tokens_per_request" if configured else "unknown"
        to_send = row["to_send"]
        if not np.isnan(prompt):
            row["prompt_tokens_per_request"] = prompt
            row["completion_tokens_per_request"] = completion
            row["tokens"] = to_send * (prompt + completion)
            if prices is not None:
                row["cost_usd_low"] = row["cost_usd_high"] = prices.cost(
                    to_send * prompt, to_send * completion, to_send * cached
                )
        elif configured:
            row["tokens"] = float(to_send * int(configured))
            if prices is not None:
                low, high = sorted((prices.input, prices.output))
                row["cost_usd_low"] = row["tokens"] * low / 1e6
                row["cost_usd_high"] = row["tokens"] * high / 1e6
        rows.append(row)
    return rows


def estimate(
    models: Sequence[Mapping[str, Any]],
    prompts: Mapping[str, Mapping[str, pd.DataFrame]],
    cache_dir: str | Path,
) -> pd.DataFrame:
    """`ESTIMATE_COLUMNS` for every model of `prompts` (run name -> task -> its prompts)."""
    rows = []
    for model in models:
        if str(model["name"]) in prompts:
            rows += estimate_model(model, prompts[str(model["name"])], cache_dir)
    frame = pd.DataFrame(rows, columns=list(ESTIMATE_COLUMNS))
    return frame.astype({c: "float64" for c in NUMBER_COLUMNS})


def _tokens(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:,.0f}"


def _cost(low: float, high: float) -> str:
    if pd.isna(low):
        return "–"
    if np.isclose(low, high):
        return f"${low:,.2f}"
    return f"${low:,.2f}–{high:,.2f}"


def _limit_note(row: pd.Series, tokens: float, high: float) -> str:
    """ "; cost_limit $5.00: $1.20 spent, ..." for a model with a limit, else ""."""
    notes = []
    checks = (
        ("cost_limit", row["cost_limit"], row["spent_usd"], high, lambda v: f"${v:,.2f}"),
        ("token_limit", row["token_limit"], row["spent_tokens"], tokens, _tokens),
    )
    for name, limit, spent, planned, show in checks:
        if pd.isna(limit):
            continue
        note = f"{name} {show(limit)}: {show(spent)} spent"
        if pd.isna(planned):
            note += ", the rest unknown"
        elif spent + planned > limit:
            note += f", the estimate passes it by {show(spent + planned - limit)}"
        else:
            note += ", the estimate stays within it"
        notes.append(note)
    return "".join(f"; {note}" for note in notes)


def estimate_lines(frame: pd.DataFrame) -> list[str]:
    """Per model: requests to send (cached subtracted), tokens and dollars; then the total."""
    lines = ["estimate (nothing sent; – where no price or token estimate is known):"]
    for model, group in frame.groupby("model", sort=False):
        tokens = group["tokens"].sum(min_count=1)
        low = group["cost_usd_low"].sum(min_count=1)
        high = group["cost_usd_high"].sum(min_count=1)
        unknown = group["to_send"].gt(0) & group["tokens"].isna()
        note = f"; no estimate for {', '.join(group.loc[unknown, 'task'])}" if unknown.any() else ""
        note += _limit_note(group.iloc[0], tokens, high)
        lines.append(
            f"  {model}: {int(group['to_send'].sum()):,} of {int(group['requests'].sum()):,} "
            f"requests to send ({int(group['cached'].sum()):,} cached), ~{_tokens(tokens)} "
            f"tokens, {_cost(low, high)}{note}"
        )
    low = frame["cost_usd_low"].sum(min_count=1)
    high = frame["cost_usd_high"].sum(min_count=1)
    tokens = frame["tokens"].sum(min_count=1)
    lines.append(
        f"  total: {int(frame['to_send'].sum()):,} requests to send, ~{_tokens(tokens)} tokens, "
        f"{_cost(low, high)}"
    )
    return lines


def run_seconds(model: Mapping[str, Any], requests: int) -> float:
    """The least time `requests` of one run take at its own limits: `rpm_limit` and
    `tpm_limit` (at `estimated_tokens_per_request`) per `rate_limit_window_s`; 0 without them
    (its time then depends on latencies no configuration states)."""
    window = float(model.get("rate_limit_window_s") or 60.0)
    times = [0.0]
    if model.get("rpm_limit"):
        times.append(requests * window / float(model["rpm_limit"]))
    tokens = model.get("estimated_tokens_per_request")
    if model.get("tpm_limit") and tokens:
        times.append(requests * float(tokens) * window / float(model["tpm_limit"]))
    return max(times)


def providers_bound_s(
    requests: Mapping[str, int],
    models: Mapping[str, Mapping[str, Any]],
    provider_of: Mapping[str, str],
    caps: Mapping[str, int | None],
    total: int | None = None,
) -> float:
    """The least time the API runs' `requests` (run -> count) can take: the slowest run at its
    own limits (`run_seconds`), and, where a cap lets fewer (run, task) units run at once than
    there are runs, the runs' summed times shared among that many (a provider's `caps`, all
    providers' `total`): at most that many runs advance at their full rate at any time."""
    times = {run: run_seconds(models[run], n) for run, n in requests.items()}
    bound = max(times.values(), default=0.0)
    for provider, cap in caps.items():
        if cap is not None:
            bound = max(bound, sum(t for r, t in times.items() if provider_of[r] == provider) / cap)
    if total is not None:
        bound = max(bound, sum(times.values()) / total)
    return bound
