"""Plots of the results: answer vs grounding, cognition balance, difficulty, audit gains.

`data` computes each plot's numbers from the metrics (and intervals) tables; `figures` draws
them with matplotlib (Agg backend) and writes PNG and SVG.
"""

from dualcog.plots.data import model_frame
from dualcog.plots.figures import FORMATS, PLOTS, draw_plots, save_figure

__all__ = ["FORMATS", "PLOTS", "draw_plots", "model_frame", "save_figure"]
