"""`run_model`: one model run over a prompts frame, dispatched to its backend."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dualcog.inference.common import ProgressFn, ProgressReporter, responses_frame
from dualcog.inference.offline import offline_row
from dualcog.inference.replay import replay_rows

OFFLINE_BACKENDS = ("oracle", "random", "simulated")
BACKENDS = (*OFFLINE_BACKENDS, "replay", "openai")


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dict(orient="records")


def _require_unique_samples(prompt_rows: list[dict[str, Any]]) -> None:
    seen: set[Any] = set()
    for row in prompt_rows:
        if row["sample_id"] in seen:
            raise ValueError(f"prompts hold sample {row['sample_id']!r} more than once")
        seen.add(row["sample_id"])


def run_model(
    model: Mapping[str, Any],
    prompts: pd.DataFrame,
    samples: pd.DataFrame,
    media_store: Path,
    cache_dir: Path,
    progress: ProgressFn | None = None,
) -> pd.DataFrame:
    """Responses (schemas.RESPONSES) of one model run, one row per prompt row, in order."""
    if "name" not in model or not model["name"]:
        raise ValueError("a model config needs a `name` (the run name)")
    backend = model.get("backend")
    if backend not in BACKENDS:
        raise ValueError(
            f"model {model['name']!r}: unknown backend {backend!r} (one of {BACKENDS})"
        )
    prompt_rows = _records(prompts)
    _require_unique_samples(prompt_rows)
    if backend in OFFLINE_BACKENDS:
        return responses_frame(_offline(model, backend, prompt_rows, samples, progress))
    if backend == "replay":
        return responses_frame(replay_rows(model, prompt_rows, progress))
    # Imported here so that offline and replay jobs never load the HTTP stack.
    from dualcog.inference.openai_backend import OpenAIRunner

    runner = OpenAIRunner(model, Path(media_store))
    rows_by_index: dict[int, dict[str, Any]] = {}
    for task in dict.fromkeys(row["task"] for row in prompt_rows):
        indices = [i for i, row in enumerate(prompt_rows) if row["task"] == task]
        task_rows = runner.run([prompt_rows[i] for i in indices], Path(cache_dir), task, progress)
        rows_by_index.update(zip(indices, task_rows, strict=True))
    return responses_frame([rows_by_index[i] for i in range(len(prompt_rows))])


def replay_tasks(
    model: Mapping[str, Any],
    prompts_by_task: Mapping[str, pd.DataFrame],
    progress: ProgressFn | None = None,
) -> dict[str, pd.DataFrame]:
    """Responses of one replayed run for several request kinds, its files read once.

    Each kind's frame equals `run_model` on that kind's prompts alone: a sample's response is
    the last response row for its id, whichever kinds are replayed with it.
    """
    if model.get("backend") != "replay":
        raise ValueError(f"model {model.get('name')!r}: replay_tasks needs backend replay")
    rows_by_task = {task: _records(frame) for task, frame in prompts_by_task.items()}
    prompt_rows = [row for rows in rows_by_task.values() for row in rows]
    _require_unique_samples(prompt_rows)
    replayed = replay_rows(model, prompt_rows, progress)
    out, at = {}, 0
    for task, rows in rows_by_task.items():
        out[task] = responses_frame(replayed[at : at + len(rows)])
        at += len(rows)
    return out


def _offline(
    model: Mapping[str, Any],
    backend: str,
    prompt_rows: list[dict[str, Any]],
    samples: pd.DataFrame,
    progress: ProgressFn | None,
) -> list[dict[str, Any]]:
    by_id = {row["sample_id"]: row for row in _records(samples)}
    tasks = "+".join(dict.fromkeys(str(row["task"]) for row in prompt_rows)) or backend
    reporter = ProgressReporter(f"{model['name']}/{tasks}", len(prompt_rows), progress)
    rows = []
    for prompt in prompt_rows:
        sample = by_id.get(prompt["sample_id"])
        if sample is None:
            raise KeyError(f"sample {prompt['sample_id']!r} is in the prompts but not the samples")
        rows.append(offline_row(model, backend, prompt, sample))
        reporter.add("ok")
    reporter.finish()
    return rows
