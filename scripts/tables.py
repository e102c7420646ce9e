"""Snakemake adapter: metrics + run info -> the paper's tables under results/tables/."""

import json
from pathlib import Path

from dualcog.runtime import log, run_step
from dualcog.schemas import read_frame
from dualcog.tables import build_all, stage_counts, write_table


def main(sm):
    metrics = read_frame(sm.input.metrics)
    runs = {}
    for path in sm.input.runs:
        with open(path, encoding="utf-8") as handle:
            run = json.load(handle)
        runs[run["model"]] = run
    counts = {Path(p).stem: stage_counts(read_frame(p)) for p in sm.input.parsed}
    names = list(dict.fromkeys(Path(p).stem for p in sm.output))
    for table in build_all(names, metrics, sm.params.models, runs, counts):
        for path in write_table(table, Path(sm.output[0]).parent, sm.params.formats):
            log.info("wrote %s", path)


run_step(snakemake, main)  # noqa: F821
