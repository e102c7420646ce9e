"""Snakemake adapter: released manifests -> results/benchmark/samples.parquet."""

from dualcog.ingest import ingest
from dualcog.runtime import log, run_step
from dualcog.schemas import SAMPLES, write_table


def main(sm):
    samples = ingest(sm.params.data_root, sm.params.tasks)
    counts = samples.groupby("task").size().to_dict()
    log.info("samples per task: %s", counts)
    write_table(samples, SAMPLES, sm.output[0])


run_step(snakemake, main)  # noqa: F821
