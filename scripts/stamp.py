"""Snakemake adapter: configuration, versions and manifests -> results/stamp.json."""

from pathlib import Path

from dualcog.runtime import log, run_step
from dualcog.stamp import build_stamp, stamp_summary, write_stamp


def main(sm):
    requests = {}  # results/responses/<run>/<task>.parquet of the runs that send requests
    for path in sm.input.responses:
        requests.setdefault(Path(path).parent.name, []).append(path)
    stamp = build_stamp(
        sm.params.models, list(sm.input.manifests), sm.params.data_root, requests=requests
    )
    write_stamp(stamp, sm.output[0])
    log.info("%s", stamp_summary(stamp))


run_step(snakemake, main)  # noqa: F821
