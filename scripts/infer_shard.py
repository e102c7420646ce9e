"""Snakemake adapter: one shard of one request kind's prompts -> that shard's raw responses."""

from pathlib import Path

from dualcog.config import model_by_name, validate_config
from dualcog.errors import DualCogError
from dualcog.media import missing_media
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import RESPONSES, read_frame, write_table
from dualcog.sharding import run_shard, select_shard


def main(sm):
    config = validate_config(sm.config, "the workflow configuration")
    model = model_by_name(config, sm.wildcards.model)
    task = sm.wildcards.task
    shard, shards = int(sm.wildcards.shard), int(sm.wildcards.shards)
    prompts = read_frame(sm.input.prompts)
    samples = read_frame(sm.input.samples)
    samples = samples[samples["task"] == task]
    part = select_shard(prompts, shard, shards)
    store = Path(sm.params.media_store)
    keys = [k for ks in part["media_keys"] for k in ks]
    kinds = [k for ks in part["media_kinds"] for k in ks]
    missing = missing_media(store, keys, kinds)
    if missing:
        raise DualCogError(
            f"{len(missing)} prepared media files are missing from {store} (e.g. {missing[0]}); "
            "refill the store with: snakemake --cores N --forcerun prepare_images prepare_videos"
        )
    log.info(
        "%s on %s, shard %d of %d: %d of %d requests (backend %s)",
        model["name"], task, shard, shards, len(part), len(prompts), model["backend"],
    )  # fmt: skip
    responses = run_shard(
        model,
        prompts,
        samples,
        store,
        Path(sm.params.cache_dir),
        shard,
        shards,
        progress=progress_logger(f"{model['name']}/{task} shard {shard}/{shards}"),
    )
    log.info("status counts: %s", responses["status"].value_counts().to_dict())
    write_table(responses, RESPONSES, sm.output[0])


run_step(snakemake, main)  # noqa: F821
