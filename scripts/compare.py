"""Snakemake adapter: two models' scores -> their paired comparison (Parquet + Markdown)."""

from pathlib import Path

from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow, write_table
from dualcog.stats import (
    COMPARISON,
    BootstrapSettings,
    build_clusters,
    compare_models,
    comparison_markdown,
)


def main(sm):
    samples = read_arrow(sm.input.samples)
    names = (sm.wildcards.model_a, sm.wildcards.model_b)
    comparison = compare_models(
        names,
        samples,
        [read_arrow(path) for path in sm.input.scores_a],  # a repeat set: one per repeat
        [read_arrow(path) for path in sm.input.scores_b],
        build_clusters(samples),
        BootstrapSettings.from_config(sm.params.bootstrap),
    )
    log.info("%s vs %s: %d metrics on common samples", *names, len(comparison))
    write_table(comparison, COMPARISON, sm.output.parquet)
    markdown = comparison_markdown(comparison, sm.params.display_names, sm.params.repeats)
    Path(sm.output.markdown).write_text(markdown, encoding="utf-8")


run_step(snakemake, main)  # noqa: F821
