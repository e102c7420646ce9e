"""Snakemake adapter: prompts of one request kind -> raw responses of one model.

Arrow in and out (`run_model`).
"""

from collections import Counter
from pathlib import Path

import pyarrow as pa

from dualcog.backends import backend_of
from dualcog.config import model_by_name
from dualcog.inference import run_model
from dualcog.inference.outcome import InferenceFailed, record_outcome
from dualcog.media.store import require_prepared
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import RESPONSES, read_arrow, rows_of_tasks, write_table
from dualcog.sharding import select_shard, shard_label


def require_media(prompts: pa.Table, store: str) -> None:
    keys = [k for ks in prompts.column("media_keys").to_pylist() for k in ks or ()]
    kinds = [k for ks in prompts.column("media_kinds").to_pylist() for k in ks or ()]
    require_prepared(store, keys, kinds)


def task_samples(samples: pa.Table, task: str) -> pa.Table:
    return rows_of_tasks(samples, [task])


def main(sm):
    config = sm.config  # validated, defaults and routes filled, when the Snakefile was read
    model = model_by_name(config, sm.wildcards.model)
    task = sm.wildcards.task
    prompts = read_arrow(sm.input.prompts)
    samples = task_samples(read_arrow(sm.input.samples), task)
    label = task
    if hasattr(sm.wildcards, "shard"):  # rule infer_shard (rules/shards.smk)
        shard, shards = int(sm.wildcards.shard), int(sm.wildcards.shards)
        prompts = select_shard(prompts, shard, shards)
        label = shard_label(task, shard, shards)
    log.info(
        "%s on %s: %d requests (backend %s)", model["name"], label, len(prompts), model["backend"]
    )
    if backend_of(model).sends_media:
        require_media(prompts, sm.params.media_store)
    responses = run_model(
        model,
        prompts,
        samples,
        Path(sm.params.media_store),
        Path(sm.params.cache_dir),
        progress=progress_logger(),  # the engine's lines start with model/task already
    )
    statuses = responses.column("status").to_pylist()
    log.info("status counts: %s", dict(Counter(statuses).most_common()))
    outcome = record_outcome(model, label, responses, sm.params.cache_dir)
    if outcome is not None and outcome.failed:
        # The cache already holds every answer received: a rerun sends only the failures.
        raise InferenceFailed(outcome.failure_message())
    write_table(responses, RESPONSES, sm.output[0])


run_step(snakemake, main)  # noqa: F821
