"""Snakemake adapter: every distinct video -> the media store, in one rendering mode.

Each video is decoded end to end first (in both modes); the bad ones are reported together
after all the good ones are prepared.
"""

import pandas as pd

from dualcog.media.problems import bad_media_error, video_frame_counts
from dualcog.media.store import ImageSettings, MediaFailures, prepare_videos
from dualcog.prompts.render import video_sources
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import read_arrow


def main(sm):
    samples = read_arrow(sm.input[0]).to_pandas()
    media = sm.params.settings
    settings = ImageSettings(media["max_width"], media["max_height"], media["jpeg_quality"])
    mode = sm.wildcards.vmode
    frames = None if mode == "video_url" else int(mode[6:])
    sources = video_sources(samples)
    log.info("preparing %d distinct videos (%s)", len(sources), mode)
    try:
        rows = prepare_videos(
            sources,
            media["store"],
            frames,
            settings,
            video_frame_counts(samples),
            progress_logger("videos"),
        )
    except MediaFailures as failed:
        raise bad_media_error(samples, failed.failures) from None
    pd.DataFrame(rows, columns=["source", "keys", "timestamps"]).to_parquet(
        sm.output[0], index=False
    )


run_step(snakemake, main)  # noqa: F821
