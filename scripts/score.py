"""Snakemake adapter: parses of one model run -> per-sample scores and its metrics."""

import pyarrow.compute as pc

from dualcog.runtime import log, run_step
from dualcog.schemas import METRICS, read_arrow, write_table
from dualcog.scoring import SCORES, model_metrics, score_tables, scores_frame


def main(sm):
    parsed = read_arrow(sm.input.parsed)
    samples = read_arrow(sm.input.samples)
    samples = samples.filter(pc.is_in(samples["task"], pc.unique(parsed["task"])))
    scores = score_tables(samples, parsed)
    write_table(scores, SCORES, sm.output.scores)
    pairs = read_arrow(sm.input.pairs).to_pandas()
    tasks = samples.select(["sample_id", "task"]).to_pandas()  # dual metrics read the pairs
    metrics = model_metrics(sm.wildcards.model, tasks, scores_frame(scores), pairs)
    log.info("%d metric rows", len(metrics))
    write_table(metrics, METRICS, sm.output.metrics)


run_step(snakemake, main)  # noqa: F821
