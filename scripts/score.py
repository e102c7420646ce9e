"""Snakemake adapter: parses of one model run -> per-sample scores and its metrics."""

from dualcog.runtime import log, run_step
from dualcog.schemas import METRICS, read_frame, write_table
from dualcog.scoring import SCORES, model_metrics, score_samples


def main(sm):
    parsed = read_frame(sm.input.parsed)
    samples = read_frame(sm.input.samples)
    samples = samples[samples["task"].isin(set(parsed["task"]))]
    scores = score_samples(samples, parsed)
    write_table(scores, SCORES, sm.output.scores)
    metrics = model_metrics(sm.wildcards.model, samples, scores)
    log.info("%d metric rows", len(metrics))
    write_table(metrics, METRICS, sm.output.metrics)


run_step(snakemake, main)  # noqa: F821
