"""Snakemake adapter: metrics + run info -> the paper's tables under results/tables/."""

import json
from pathlib import Path

from dualcog.runtime import log, run_step
from dualcog.schemas import read_frame
from dualcog.stamp import read_stamp
from dualcog.tables import build_all, stage_counts, write_table


def main(sm):
    metrics = read_frame(sm.input.metrics)
    runs = {}
    for path in sm.input.runs:
        with open(path, encoding="utf-8") as handle:
            run = json.load(handle)
        runs[run["model"]] = run
    counts = {Path(p).stem: stage_counts(read_frame(p)) for p in sm.input.parsed}
    stamp = read_stamp(sm.input.stamp)
    tables = [Path(p) for p in sm.output if not p.endswith(".stamp.json")]
    names = list(dict.fromkeys(p.stem for p in tables))
    for table in build_all(names, metrics, sm.params.models, runs, counts):
        for path in write_table(table, tables[0].parent, sm.params.formats, stamp):
            log.info("wrote %s", path)


run_step(snakemake, main)  # noqa: F821
