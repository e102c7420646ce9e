"""Snakemake adapter: one model run's samples, parses, scores and responses -> its explorer."""

from pathlib import Path

import pandas as pd

from dualcog.explorer.page import CHUNK_BYTES_LIMIT, PAGE_BYTES_LIMIT, write_explorer
from dualcog.explorer.records import RESPONSE_COLUMNS, MediaIndex, sample_records
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow, read_frame
from dualcog.stamp import build_stamp


def main(sm):
    model = sm.wildcards.model
    # Only the columns a card shows: reasoning texts and token counts are never converted.
    responses = pd.concat(
        [read_arrow(p, columns=list(RESPONSE_COLUMNS)).to_pandas() for p in sm.input.responses],
        ignore_index=True,
    )
    records = sample_records(
        read_frame(sm.input.samples),
        read_frame(sm.input.parsed),
        read_frame(sm.input.scores),
        responses,
        MediaIndex.from_frame(read_frame(sm.input.media)),
        read_frame(sm.input.outcomes),
    )
    stamp = build_stamp({model: sm.params.stamp}, list(sm.input.manifests), sm.params.data_root)
    files = write_explorer(
        model,
        records,
        sm.output.page,
        sm.output.data,
        all_models=sm.params.models,
        stamp=stamp,
        label=sm.params.label,
    )
    sizes = files.sizes()
    log.info("explorer %s: %s", Path(sm.output.page).name, sizes)
    if sizes["page_bytes"] > PAGE_BYTES_LIMIT or sizes["largest_chunk_bytes"] > CHUNK_BYTES_LIMIT:
        log.warning(
            "explorer %s is over the stated size limits (page %d B, chunk %d B): long raw "
            "responses?",
            model,
            PAGE_BYTES_LIMIT,
            CHUNK_BYTES_LIMIT,
        )


run_step(snakemake, main)  # noqa: F821
