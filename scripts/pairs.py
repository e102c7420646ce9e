"""Snakemake adapter: benchmark samples -> matched-context pairs (once for every model)."""

import pyarrow.parquet as pq

from dualcog.runtime import log, run_step
from dualcog.schemas import write_table
from dualcog.scoring import PAIRS, dual_pairs

PAIR_INPUT_COLUMNS = [
    "sample_id", "task", "scene_id", "landmark_id", "difficulty", "context_index",
    "context_slot", "manifest_path", "manifest_order", "mission_id",
]  # fmt: skip


def main(sm):
    samples = pq.read_table(sm.input[0], columns=PAIR_INPUT_COLUMNS).to_pandas()
    pairs, unpaired = dual_pairs(samples)
    log.info("pairs per family: %s", pairs.groupby("family").size().to_dict())
    log.info("unpaired samples: %s", unpaired.to_dict("records"))
    write_table(pairs, PAIRS, sm.output[0])


run_step(snakemake, main)  # noqa: F821
