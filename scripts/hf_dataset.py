"""Snakemake adapter: the ingested samples -> a `datasets`-loadable folder with its card."""

from pathlib import Path

from dualcog.integrations.hf_dataset import write_dataset
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow
from dualcog.stamp import read_stamp


def main(sm):
    splits = write_dataset(
        Path(sm.output.card).parent,
        read_arrow(sm.input.samples),
        sm.params.data_root,
        read_stamp(sm.input.stamp),
        sm.params.repo,
        bool(sm.params.embed_media),
    )
    log.info("samples per split: %s", splits)


run_step(snakemake, main)  # noqa: F821
