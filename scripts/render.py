"""Snakemake adapter: samples + prepared media -> results/prompts/<task>[.<video mode>].parquet."""

import pyarrow.compute as pc

from dualcog.media import PreparedFrames, PreparedImage
from dualcog.render import render_prompts
from dualcog.runtime import log, run_step
from dualcog.schemas import PROMPTS, read_arrow, read_frame, write_table


def main(sm):
    # Only this task's samples reach pandas: converting every task's nested columns was most
    # of the job's own work.
    samples = read_arrow(sm.input.samples)
    samples = samples.filter(pc.equal(samples["task"], sm.wildcards.task)).to_pandas()
    images = {
        row["source"]: PreparedImage(**row)
        for row in read_frame(sm.input.images).to_dict("records")
    }
    videos = frames = None
    if hasattr(sm.input, "videos"):
        table = read_frame(sm.input.videos).to_dict("records")
        if sm.wildcards.vmode == "video_url":
            videos = {row["source"]: row["keys"][0] for row in table}
        else:
            frames = {
                row["source"]: PreparedFrames(
                    row["source"], list(row["keys"]), list(row["timestamps"])
                )
                for row in table
            }
    prompts = render_prompts(samples, sm.wildcards.task, images, videos, frames)
    log.info("rendered %d %s prompts", len(prompts), sm.wildcards.task)
    write_table(prompts, PROMPTS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
