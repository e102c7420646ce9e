"""Snakemake adapter: metrics + run info -> the paper's tables under results/tables/."""

from pathlib import Path

from dualcog.runtime import log, run_step
from dualcog.tables import write_table
from dualcog.tables.inputs import load_inputs
from dualcog.tables.repeats import build_tables


def main(sm):
    # The prices only decide dollars, so they travel beside the table settings of each run.
    models = [{**m, "prices": sm.params.prices.get(m["name"])} for m in sm.params.models]
    inputs = load_inputs(
        sm.input.metrics,
        sm.input.runs,
        sm.input.facts,
        sm.input.outcomes,
        stamp=sm.input.get("stamp"),
        models=models,
    )
    tables_out = [Path(p) for p in sm.output if not p.endswith(".stamp.json")]  # CSV sidecars
    names = list(dict.fromkeys(p.stem for p in tables_out))
    tables = build_tables(names, inputs, models)
    for table in tables:
        for path in write_table(
            table, Path(sm.output[0]).parent, sm.params.formats, stamp=inputs.stamp
        ):
            log.info("wrote %s", path)


run_step(snakemake, main)  # noqa: F821
