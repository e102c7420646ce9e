"""Snakemake adapter: metrics + intervals -> the plots under results/plots/ (PNG and SVG)."""

from pathlib import Path

from dualcog.plots import draw_plots, model_frame
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow


def main(sm):
    written = draw_plots(
        sm.params.names,
        read_arrow(sm.input.metrics).to_pandas(),
        model_frame(sm.params.models),
        read_arrow(sm.input.intervals).to_pandas(),
        Path(sm.output[0]).parent,
    )
    for path in written:
        log.info("wrote %s", path)


run_step(snakemake, main)  # noqa: F821
