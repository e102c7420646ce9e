"""Snakemake adapter: the shards of one (model, request kind) -> its raw responses."""

import pyarrow.parquet as pq

from dualcog.runtime import log, run_step
from dualcog.schemas import RESPONSES, read_arrow, write_table
from dualcog.sharding import assemble_shards


def main(sm):
    prompt_ids = read_arrow(sm.input.prompts, columns=["sample_id"])["sample_id"].to_pylist()
    shards = [pq.read_table(path).cast(RESPONSES) for path in sm.input.shards]
    responses = assemble_shards(prompt_ids, shards, list(sm.input.shards))
    log.info("%d responses from %d shards", responses.num_rows, len(shards))
    write_table(responses, RESPONSES, sm.output[0])


run_step(snakemake, main)  # noqa: F821
