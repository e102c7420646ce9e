"""What a run would still send, and cost, before anything is sent (`snakemake estimate`).

Per model and request kind: the prompts (one request per sample), minus the ok answers the
response cache already holds for them under the model's current settings (the very lookup the
`openai` backend makes before sending), gives the requests still to send. Tokens per request
come, in this order, from the mean of the cached answers of that task that report usage, the
mean over the model's other cached tasks, or `estimated_tokens_per_request`. That setting counts
all tokens of a request without saying how many are input, so its dollars are a range (all at
the input price .. all at the output price); measured means give one figure. Only `openai`
models send anything: the others are listed with 0 to send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dualcog.backends import declared
from dualcog.usage import model_prices

ESTIMATE_COLUMNS = (
    "model", "task", "backend", "requests", "cached", "to_send", "source",
    "prompt_tokens_per_request", "completion_tokens_per_request", "tokens",
    "cost_usd_low", "cost_usd_high",
)  # fmt: skip


@dataclass(frozen=True)
class CacheState:
    """The cached ok answers of one (model, task) that match its prompts."""

    cached: int
    prompt_tokens: list[float]
    completion_tokens: list[float]


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
        return CacheState(0, [], [])
    fingerprint = answer_settings_json(model)
    hits = 0
    prompt_tokens: list[float] = []
    completion_tokens: list[float] = []
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
    return CacheState(hits, prompt_tokens, completion_tokens)


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
        }
        if state.prompt_tokens:
            prompt, completion = _mean(state.prompt_tokens), _mean(state.completion_tokens)
            row["source"] = f"mean of {len(state.prompt_tokens)} cached answers"
        elif all_prompt:
            prompt, completion = _mean(all_prompt), _mean(all_completion)
            row["source"] = f"mean of {len(all_prompt)} cached answers of its other tasks"
        else:
            prompt = completion = np.nan
            row["source"] = "estimated_tokens_per_request" if configured else "unknown"
        to_send = row["to_send"]
        if not np.isnan(prompt):
            row["prompt_tokens_per_request"] = prompt
            row["completion_tokens_per_request"] = completion
            row["tokens"] = to_send * (prompt + completion)
            if prices is not None:
                row["cost_usd_low"] = row["cost_usd_high"] = prices.cost(
                    to_send * prompt, to_send * completion
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
    numbers = [c for c in ESTIMATE_COLUMNS[7:]]
    return frame.astype({c: "float64" for c in numbers})


def _tokens(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:,.0f}"


def _cost(low: float, high: float) -> str:
    if pd.isna(low):
        return "–"
    if np.isclose(low, high):
        return f"${low:,.2f}"
    return f"${low:,.2f}–{high:,.2f}"


def estimate_lines(frame: pd.DataFrame) -> list[str]:
    """Per model: requests to send (cached subtracted), tokens and dollars; then the total."""
    lines = ["estimate (nothing sent; – where no price or token estimate is known):"]
    for model, group in frame.groupby("model", sort=False):
        tokens = group["tokens"].sum(min_count=1)
        low = group["cost_usd_low"].sum(min_count=1)
        high = group["cost_usd_high"].sum(min_count=1)
        unknown = group["to_send"].gt(0) & group["tokens"].isna()
        note = f"; no estimate for {', '.join(group.loc[unknown, 'task'])}" if unknown.any() else ""
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
