"""Snakemake adapter: samples -> results/prompts/<task>[.<video mode>].parquet.

Media keys come from the sources' bytes (what `prepare_images` / `prepare_videos` will store
them under), so prompts never wait on media preparation; only `frames` mode reads the
sampled frames (their timestamps are part of the prompt text). Arrow in and out.
"""

from dualcog.media.store import ImageSettings, PreparedFrames, image_key, video_file_key
from dualcog.prompts.render import RENDER_COLUMNS, image_sources, render_prompt_rows, video_sources
from dualcog.runtime import log, run_step
from dualcog.schemas import PROMPTS, read_arrow, rows_of_tasks, table_from_rows, write_table


def main(sm):
    # Only this task's samples, and only the columns a prompt is made of, become Python values.
    samples = read_arrow(sm.input.samples, columns=RENDER_COLUMNS)
    task = sm.wildcards.task
    samples = rows_of_tasks(samples, [task])
    samples = samples.to_pylist()
    media = sm.params.settings
    settings = ImageSettings(media["max_width"], media["max_height"], media["jpeg_quality"])
    images = {source: image_key(source, settings) for source in image_sources(samples)}
    videos = frames = None
    if hasattr(sm.input, "videos"):  # frames mode
        frames = {
            row["source"]: PreparedFrames(row["source"], list(row["keys"]), list(row["timestamps"]))
            for row in read_arrow(sm.input.videos).to_pylist()
        }
    elif hasattr(sm.wildcards, "vmode"):
        videos = {source: video_file_key(source) for source in video_sources(samples)}
    prompts = render_prompt_rows(samples, task, images, videos, frames)
    log.info("rendered %d %s prompts", len(prompts), task)
    write_table(table_from_rows(prompts, PROMPTS), PROMPTS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
