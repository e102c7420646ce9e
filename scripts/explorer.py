"""Snakemake adapter: one model run's samples, parses, scores and responses -> its explorer."""

import json
from pathlib import Path

import pyarrow as pa

from dualcog.explorer.page import CHUNK_BYTES_LIMIT, PAGE_BYTES_LIMIT, write_explorer
from dualcog.explorer.records import (
    PARSED_COLUMNS,
    RESPONSE_COLUMNS,
    SAMPLE_COLUMNS,
    SCORE_COLUMNS,
    MediaIndex,
    sample_records,
)
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow
from dualcog.stamp import build_stamp


def main(sm):
    model = sm.wildcards.model
    # Arrow only, no pandas; of each table only the columns a record reads (reasoning texts,
    # token counts, the samples' prompts and the other parse modes' columns are never read).
    responses = pa.concat_tables(
        [read_arrow(p, columns=list(RESPONSE_COLUMNS)) for p in sm.input.responses]
    )
    records = sample_records(
        read_arrow(sm.input.samples, columns=list(SAMPLE_COLUMNS)),
        read_arrow(sm.input.parsed, columns=[*PARSED_COLUMNS, "parse"]),
        read_arrow(sm.input.scores, columns=[*SCORE_COLUMNS, "parse"]),
        responses,
        MediaIndex.from_table(read_arrow(sm.input.media)),
        read_arrow(sm.input.outcomes),
    )
    stamp = build_stamp(
        {model: sm.params.stamp},
        [],
        sm.params.data_root,
        data=json.loads(Path(sm.input.data_stamp).read_text(encoding="utf-8")),
    )
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
