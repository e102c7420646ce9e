"""inspect_ai's entry point for this package (pyproject.toml, `[project.entry-points.inspect_ai]`):
importing it registers `dualcog/uav_dualcog`."""

from dualcog.integrations.inspect_task import dualcog_metrics, dualcog_scorer, uav_dualcog

__all__ = ["dualcog_metrics", "dualcog_scorer", "uav_dualcog"]
