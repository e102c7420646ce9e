"""Snakemake adapter: released manifests -> results/benchmark/samples.parquet (+ excluded.json)."""

import json
from collections import Counter

from dualcog.ingest import ingest
from dualcog.runtime import log, run_step
from dualcog.schemas import SAMPLES, write_table


def main(sm):
    samples, excluded = ingest(
        sm.params.data_root,
        sm.params.tasks,
        sm.params.exclude_samples,
        sm.params.media_roots,
    )
    tasks = Counter(samples.column("task").to_pylist())
    log.info("samples per task: %s", dict(sorted(tasks.items())))
    write_table(samples, SAMPLES, sm.output[0])
    requested = sorted(set(sm.params.exclude_samples))
    record = {
        "count": len(excluded),
        "excluded": excluded,
        "not_found": sorted(set(requested) - set(excluded)),
    }
    with open(sm.output[1], "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)


run_step(snakemake, main)  # noqa: F821
