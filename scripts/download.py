"""Snakemake adapter: the `download` section -> a verified copy of the release (its record)."""

import logging

from dualcog.download import download_release, download_settings
from dualcog.runtime import run_step


def main(sm):
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request otherwise
    download_release(download_settings({"download": sm.params.download, "tasks": sm.params.tasks}))


run_step(snakemake, main)  # noqa: F821
