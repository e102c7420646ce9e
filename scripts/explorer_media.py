"""Snakemake adapter: source images and videos -> explorer thumbnails and frame grids."""

from pathlib import Path

from dualcog.explorer.media import prepare_explorer_media
from dualcog.media.problems import bad_media_error
from dualcog.media.store import MediaFailures
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import read_arrow


def main(sm):
    samples = read_arrow(sm.input.samples).to_pandas()
    folder = Path(sm.output.media).parent
    try:
        index = prepare_explorer_media(
            samples, folder, sm.threads, progress_logger("explorer media")
        )
    except MediaFailures as failed:
        raise bad_media_error(samples, failed.failures) from None
    log.info(
        "%d images, %d videos", (index["kind"] == "image").sum(), (index["kind"] == "video").sum()
    )
    index.to_parquet(sm.output.index, index=False)


run_step(snakemake, main)  # noqa: F821
