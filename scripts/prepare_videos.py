"""Snakemake adapter: every distinct video -> the media store, in one rendering mode."""

import pandas as pd

from dualcog.media import ImageSettings, prepare_video_file, prepare_video_frames
from dualcog.render import video_sources
from dualcog.runtime import log, run_step
from dualcog.schemas import read_frame


def main(sm):
    samples = read_frame(sm.input[0])
    media = sm.params.settings
    settings = ImageSettings(media["max_width"], media["max_height"], media["jpeg_quality"])
    mode = sm.wildcards.vmode
    sources = video_sources(samples)
    log.info("preparing %d distinct videos (%s)", len(sources), mode)
    rows = []
    for i, source in enumerate(sources, 1):
        if mode == "video_url":
            rows.append(
                {
                    "source": source,
                    "keys": [prepare_video_file(source, media["store"])],
                    "timestamps": None,
                }
            )
        else:
            frames = prepare_video_frames(source, media["store"], int(mode[6:]), settings)
            rows.append({"source": source, "keys": frames.keys, "timestamps": frames.timestamps})
        if i % 20 == 0:
            log.info("videos: %d/%d", i, len(sources))
    pd.DataFrame(rows, columns=["source", "keys", "timestamps"]).to_parquet(
        sm.output[0], index=False
    )


run_step(snakemake, main)  # noqa: F821
