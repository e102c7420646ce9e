"""Snakemake adapter: one model run's raw responses -> strict/compatible/legacy parses."""

import json

import pandas as pd

from dualcog.parsing import parse_run
from dualcog.runtime import log, run_step
from dualcog.schemas import PARSED, read_frame, write_table


def main(sm):
    responses = pd.concat([read_frame(p) for p in sm.input.responses], ignore_index=True)
    samples = read_frame(sm.input.samples)
    samples = samples[samples["task"].isin(set(responses["task"]))]
    parsed, run = parse_run(samples, responses, sm.params.bbox_scale)
    run = {"model": sm.wildcards.model, **run}
    log.info(
        "run scale: %s; stages: %s",
        run.get("scale"),
        parsed.groupby(["parse", "stage"]).size().to_dict(),
    )
    write_table(parsed, PARSED, sm.output.parsed)
    with open(sm.output.run, "w", encoding="utf-8") as handle:
        json.dump(run, handle, indent=2, sort_keys=True, default=str)


run_step(snakemake, main)  # noqa: F821
