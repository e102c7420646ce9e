"""Snakemake adapter: prepared images and source videos -> explorer thumbnails and frame grids."""

from pathlib import Path

from dualcog.explorer.media import prepare_explorer_media
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import read_frame


def main(sm):
    samples = read_frame(sm.input.samples)
    images = read_frame(sm.input.images)
    folder = Path(sm.output.media).parent
    index = prepare_explorer_media(
        samples, images, sm.params.store, folder, sm.threads, progress_logger("explorer media")
    )
    log.info(
        "%d images, %d videos", (index["kind"] == "image").sum(), (index["kind"] == "video").sum()
    )
    index.to_parquet(sm.output.index, index=False)


run_step(snakemake, main)  # noqa: F821
