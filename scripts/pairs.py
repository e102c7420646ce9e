"""Snakemake adapter: benchmark samples -> matched-context pairs (once for every model)."""

from collections import Counter

from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow, write_table
from dualcog.scoring.pairing import PAIR_INPUT_COLUMNS, dual_pairs
from dualcog.scoring.schema import PAIRS


def main(sm):
    samples = read_arrow(sm.input[0], columns=PAIR_INPUT_COLUMNS)
    pairs, unpaired = dual_pairs(samples)
    log.info("pairs per family: %s", dict(sorted(Counter(pairs["family"].to_pylist()).items())))
    log.info(
        "unpaired samples: %s",
        [dict(zip(("family", "task", "unpaired"), row, strict=True)) for row in unpaired],
    )
    write_table(pairs, PAIRS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
