"""Snakemake adapter: one model run's raw responses -> its parses, request outcomes, response
facts, per-sample scores, metrics and their bootstrap intervals (dualcog.evaluate)."""

from dualcog.evaluate import (
    SAMPLE_COLUMNS,
    ScoredRunPaths,
    evaluate_run,
    read_responses,
    write_scored_run,
)
from dualcog.runtime import run_step
from dualcog.schemas import read_arrow


def main(sm):
    scored = evaluate_run(
        sm.wildcards.model,
        read_responses(sm.input.responses),
        read_arrow(sm.input.samples, columns=SAMPLE_COLUMNS),
        read_arrow(sm.input.pairs),
        read_arrow(sm.input.weights),
        sm.params.bootstrap,
        sm.params.bbox_scale,
    )
    write_scored_run(scored, ScoredRunPaths.of(sm.output))


run_step(snakemake, main)  # noqa: F821
