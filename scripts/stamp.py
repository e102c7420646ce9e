"""Snakemake adapter: configuration, versions and manifests -> results/stamp.json."""

from dualcog.runtime import log, run_step
from dualcog.stamp import build_stamp, stamp_summary, write_stamp


def main(sm):
    stamp = build_stamp(sm.params.models, list(sm.input.manifests), sm.params.data_root)
    write_stamp(stamp, sm.output[0])
    log.info("%s", stamp_summary(stamp))


run_step(snakemake, main)  # noqa: F821
