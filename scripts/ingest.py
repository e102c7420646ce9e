"""Snakemake adapter: released manifests -> results/benchmark/samples.parquet (+ excluded.json)."""

import json
from collections import Counter

from dualcog.ingest import ingest_rows
from dualcog.runtime import log, run_step
from dualcog.schemas import SAMPLES, table_from_rows, write_table


def main(sm):
    rows, excluded = ingest_rows(
        sm.params.data_root,
        sm.params.tasks,
        sm.params.exclude_samples,
        sm.params.media_roots,
    )
    log.info("samples per task: %s", dict(sorted(Counter(row["task"] for row in rows).items())))
    # Built from the rows in Arrow: pandas would cost this job half its CPU.
    write_table(table_from_rows(rows, SAMPLES), SAMPLES, sm.output[0])
    requested = sorted(set(sm.params.exclude_samples))
    record = {
        "count": len(excluded),
        "excluded": excluded,
        "not_found": sorted(set(requested) - set(excluded)),
    }
    with open(sm.output[1], "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)


run_step(snakemake, main)  # noqa: F821
