"""Snakemake adapter: every distinct still image -> the content-addressed media store."""

import pandas as pd

from dualcog.media.problems import bad_media_error
from dualcog.media.store import ImageSettings, MediaFailures, prepare_images
from dualcog.prompts.render import image_sources
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import read_arrow


def main(sm):
    samples = read_arrow(sm.input[0]).to_pandas()
    media = sm.params.settings
    settings = ImageSettings(media["max_width"], media["max_height"], media["jpeg_quality"])
    sources = image_sources(samples)
    log.info("preparing %d distinct images into %s", len(sources), media["store"])
    try:
        prepared = prepare_images(
            sources, media["store"], settings, sm.threads, progress_logger("images")
        )
    except MediaFailures as failed:
        raise bad_media_error(samples, failed.failures) from None
    pd.DataFrame([vars(p) for p in prepared]).to_parquet(sm.output[0], index=False)


run_step(snakemake, main)  # noqa: F821
