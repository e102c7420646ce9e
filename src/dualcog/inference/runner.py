"""`run_model`: one model run over its prompts, handed to its backend's runner
(dualcog.backends). Arrow tables in (PROMPTS, SAMPLES) and out (RESPONSES).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from dualcog.backends import RunInputs, backend_of, missing_fields
from dualcog.inference.progress import ProgressFn
from dualcog.inference.rows import responses_table

Rows = list[dict[str, Any]]


def _require_unique_samples(prompt_rows: Rows) -> None:
    seen: set[Any] = set()
    for row in prompt_rows:
        if row["sample_id"] in seen:
            raise ValueError(f"prompts hold sample {row['sample_id']!r} more than once")
        seen.add(row["sample_id"])


def _run(model: Mapping[str, Any], prompt_rows: Rows, inputs: RunInputs) -> Rows:
    if "name" not in model or not model["name"]:
        raise ValueError("a model config needs a `name` (the run name)")
    backend = backend_of(model)
    missing = missing_fields(model)
    if missing:
        raise ValueError(
            f"model {model['name']!r}: backend {backend.name} needs "
            + ", ".join(f"`{field}`" for field in missing)
        )
    _require_unique_samples(prompt_rows)
    return backend.load_runner()(model, prompt_rows, inputs)


def run_model(
    model: Mapping[str, Any],
    prompts: pa.Table,
    samples: pa.Table | None,
    media_store: Path,
    cache_dir: Path,
    progress: ProgressFn | None = None,
) -> pa.Table:
    """Responses (a RESPONSES table) of one model run, one row per prompt row (PROMPTS), in
    order. `samples`: the SAMPLES rows of the prompts' kind, for a backend that
    `reads_samples` (None: no rows)."""
    rows = samples.to_pylist() if samples is not None else []
    inputs = RunInputs(rows, Path(media_store), Path(cache_dir), progress)
    return responses_table(_run(model, prompts.to_pylist(), inputs))


def _run_per_model(
    model: Mapping[str, Any],
    rows_by_task: Mapping[str, Rows],
    samples: Rows,
    progress: ProgressFn | None,
) -> dict[str, Rows]:
    if not backend_of(model).run_per_model:
        raise ValueError(
            f"model {model.get('name')!r}: backend {model.get('backend')} runs one job per task"
        )
    prompt_rows = [row for rows in rows_by_task.values() for row in rows]
    # Such runners read neither media nor a cache (Backend.run_per_model).
    answered = _run(model, prompt_rows, RunInputs(samples, Path(), Path(), progress))
    out, at = {}, 0
    for task, rows in rows_by_task.items():
        out[task] = answered[at : at + len(rows)]
        at += len(rows)
    return out


def run_per_model(
    model: Mapping[str, Any],
    prompts_by_task: Mapping[str, pa.Table],
    samples: pa.Table | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, pa.Table]:
    """Responses of one run for several request kinds in one runner call (a backend declared
    `run_per_model`: replay reads its files once, a built-in backend starts once). `samples`:
    the SAMPLES rows of those kinds, for a backend that `reads_samples`.

    Each kind's table equals `run_model` on that kind's prompts alone: a sample's response is
    the last response row for its id, whichever kinds are run with it.
    """
    rows_by_task = {task: table.to_pylist() for task, table in prompts_by_task.items()}
    rows = samples.to_pylist() if samples is not None else []
    answered = _run_per_model(model, rows_by_task, rows, progress)
    return {task: responses_table(rows) for task, rows in answered.items()}
