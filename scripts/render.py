"""Snakemake adapter: samples -> results/prompts/<task>[.<video mode>].parquet.

Media keys come from the sources' bytes (what `prepare_images` / `prepare_videos` will store
them under), so prompts never wait on media preparation; only `frames` mode reads the
sampled frames (their timestamps are part of the prompt text).
"""

import pyarrow.compute as pc

from dualcog.media.store import ImageSettings, PreparedFrames, image_key, video_file_key
from dualcog.prompts.render import image_sources, render_prompts, video_sources
from dualcog.runtime import log, run_step
from dualcog.schemas import PROMPTS, read_arrow, read_frame, write_table


def main(sm):
    # Only this task's samples reach pandas: converting every task's nested columns was most
    # of the job's own work.
    samples = read_arrow(sm.input.samples)
    samples = samples.filter(pc.equal(samples["task"], sm.wildcards.task)).to_pandas()
    media = sm.params.settings
    settings = ImageSettings(media["max_width"], media["max_height"], media["jpeg_quality"])
    images = {source: image_key(source, settings) for source in image_sources(samples)}
    videos = frames = None
    if hasattr(sm.input, "videos"):  # frames mode
        frames = {
            row["source"]: PreparedFrames(row["source"], list(row["keys"]), list(row["timestamps"]))
            for row in read_frame(sm.input.videos).to_dict("records")
        }
    elif hasattr(sm.wildcards, "vmode"):
        videos = {source: video_file_key(source) for source in video_sources(samples)}
    prompts = render_prompts(samples, sm.wildcards.task, images, videos, frames)
    log.info("rendered %d %s prompts", len(prompts), sm.wildcards.task)
    write_table(prompts, PROMPTS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
