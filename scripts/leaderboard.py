"""Snakemake adapter: metrics + run info (+ intervals, stamp) -> results/leaderboard.html."""

from dualcog.runtime import log, run_step
from dualcog.tables.inputs import load_inputs
from dualcog.tables.leaderboard import write_leaderboard


def main(sm):
    models = [{**m, "prices": sm.params.prices.get(m["name"])} for m in sm.params.models]
    inputs = load_inputs(
        sm.input.metrics,
        sm.input.runs,
        sm.input.facts,
        sm.input.outcomes,
        intervals=sm.input.get("intervals"),
        stamp=sm.input.get("stamp"),
        models=models,
    )
    path = write_leaderboard(sm.output[0], inputs, models)
    log.info("wrote %s", path)


run_step(snakemake, main)  # noqa: F821
