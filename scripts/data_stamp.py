"""Snakemake adapter: the data root's manifests -> results/data_stamp.json (a stamp's `data`)."""

import json

from dualcog import atomic
from dualcog.runtime import log, run_step
from dualcog.stamp import data_stamp


def main(sm):
    data = data_stamp(list(sm.input.manifests), sm.params.data_root)
    atomic.write_text(sm.output[0], json.dumps(data, indent=2, sort_keys=True) + "\n")
    log.info("%d manifests, digest %s", len(data["manifests"]), data["digest"])


run_step(snakemake, main)  # noqa: F821
