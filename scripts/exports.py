"""Snakemake adapter: a finished run -> Hub Eval Results YAML and Every Eval Ever records."""

from dualcog.integrations.exports import export_run
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow
from dualcog.stamp import read_stamp


def main(sm):
    models = sm.params.models
    names = [m["name"] for m in models]
    run_files = {
        name: {
            "metrics": metrics,
            "scores": scores,
            "parsed": parsed,
            "responses": [p for p in sm.input.responses if p.split("/")[-2] == name],
        }
        for name, metrics, scores, parsed in zip(
            names, sm.input.metrics, sm.input.scores, sm.input.parsed, strict=True
        )
    }
    stamp = read_stamp(sm.input.stamp)
    export_run(
        "results/exports", models, stamp, read_arrow(sm.input.samples), run_files,
        sm.params.dataset_id,
    )  # fmt: skip
    log.info("exported %d model runs to results/exports", len(models))


run_step(snakemake, main)  # noqa: F821
