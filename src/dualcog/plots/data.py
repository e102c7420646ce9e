"""The numbers behind each plot, as plain frames drawn from the metrics and intervals tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from dualcog.tables.model import GROUP_ORDER, marked_label
from dualcog.tasks import IMAGE_DIFFICULTIES, IMAGE_TASKS, VIDEO_DIFFICULTIES

MAIN_PARSE = "compatible"
LEGACY_PARSE = "legacy"
# Short group names for legends (the tables spell them out).
GROUP_TITLES = {
    "proprietary": "Proprietary",
    "open-weights": "Open-weights",
    "spatial": "Spatially specialized",
    "baseline": "Baselines",
}
# (panel title, task(s) averaged, metric, strata) of the difficulty plot.
DIFFICULTY_PANELS: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...]], ...] = (
    ("Image: Option Acc (mean of 4 tasks)", IMAGE_TASKS, "option_acc", IMAGE_DIFFICULTIES),
    ("Image: BBox Acc@0.5 (mean of 4 tasks)", IMAGE_TASKS, "bbox_acc50", IMAGE_DIFFICULTIES),
    ("Video: Atomic F1", ("atomic_behavior",), "atomic_f1", VIDEO_DIFFICULTIES),
    ("Video: Count Acc", ("landmark_visibility",), "count_acc", VIDEO_DIFFICULTIES),
)


def model_frame(models: Sequence[Mapping]) -> pd.DataFrame:
    """Index: run name; columns label (display name, marked simulated/replayed), group, rank."""
    rows = []
    for order, model in enumerate(models):
        label = marked_label(model, " (sim.)", " [T]")
        group = model.get("group") or "baseline"
        rank = GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)
        rows.append({"model": model["name"], "label": label, "group": group,
                     "rank": (rank, order)})  # fmt: skip
    frame = pd.DataFrame(rows, columns=["model", "label", "group", "rank"])
    return frame.sort_values("rank").set_index("model")


def _main(metrics: pd.DataFrame, parse: str = MAIN_PARSE) -> pd.DataFrame:
    return metrics[(metrics["parse"] == parse) & (metrics["stratum"] == "all")]


def _with_intervals(values: pd.DataFrame, intervals: pd.DataFrame | None) -> pd.DataFrame:
    key = ["model", "task", "parse", "stratum", "metric"]
    if intervals is None or intervals.empty:
        return values.assign(ci_low=np.nan, ci_high=np.nan)
    return values.merge(intervals[key + ["ci_low", "ci_high"]], on=key, how="left")


def _wide(rows: pd.DataFrame, index: list[str], metrics: tuple[str, ...]) -> pd.DataFrame:
    """One row per `index`, columns <metric>_value / _ci_low / _ci_high for every metric
    (NaN where a metric is absent)."""
    columns = [f"{m}_{part}" for m in metrics for part in ("value", "ci_low", "ci_high")]
    if rows.empty:
        return pd.DataFrame(columns=index + columns)
    wide = rows.pivot_table(
        index=index, columns="metric", values=["value", "ci_low", "ci_high"], dropna=False
    )
    wide.columns = [f"{metric}_{part}" for part, metric in wide.columns]
    return wide.reindex(columns=columns).reset_index()


def answer_vs_grounding(
    metrics: pd.DataFrame, intervals: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per model and image task: option accuracy and BBox Acc@0.5 with their intervals."""
    rows = _with_intervals(
        _main(metrics)[lambda f: f["task"].isin(IMAGE_TASKS)
                       & f["metric"].isin(["option_acc", "bbox_acc50"])],
        intervals,
    )  # fmt: skip
    wide = _wide(rows, ["model", "task"], ("option_acc", "bbox_acc50"))
    wide = wide.rename(columns={"option_acc_value": "option_acc", "bbox_acc50_value": "bbox_acc50"})
    return wide.dropna(subset=["option_acc", "bbox_acc50"]).reset_index(drop=True)


def cognition_balance(metrics: pd.DataFrame, intervals: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model: agent-state and world-state convenience scores with their intervals."""
    rows = _with_intervals(
        _main(metrics)[lambda f: (f["task"] == "overall")
                       & f["metric"].isin(["agent_state_score", "world_state_score"])],
        intervals,
    )  # fmt: skip
    wide = _wide(rows, ["model"], ("agent_state_score", "world_state_score"))
    wide = wide.rename(
        columns={"agent_state_score_value": "agent", "world_state_score_value": "world"}
    )
    return wide.dropna(subset=["agent", "world"]).reset_index(drop=True)


def by_difficulty(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per panel, model and stratum: the panel's metric, averaged over its tasks.

    An image mean is drawn only where a model has all four tasks in that stratum.
    """
    compatible = metrics[metrics["parse"] == MAIN_PARSE]
    parts = []
    for title, tasks, metric, strata in DIFFICULTY_PANELS:
        rows = compatible[compatible["task"].isin(tasks) & (compatible["metric"] == metric)
                          & compatible["stratum"].isin(strata)]  # fmt: skip
        grouped = rows.groupby(["model", "stratum"])["value"].agg(["mean", "size"])
        grouped = grouped[grouped["size"] == len(tasks)].reset_index()
        grouped["panel"] = title
        grouped["order"] = grouped["stratum"].map({s: i for i, s in enumerate(strata)})
        parts.append(grouped.rename(columns={"mean": "value"})[
            ["panel", "model", "stratum", "order", "value"]])  # fmt: skip
    columns = ["panel", "model", "stratum", "order", "value"]
    frame = pd.concat([p for p in parts if not p.empty] or [pd.DataFrame(columns=columns)],
                      ignore_index=True)  # fmt: skip
    return frame.sort_values(["panel", "model", "order"]).reset_index(drop=True)


def audit_gains(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per model with all four image tasks: legacy ("Original") and compatible BBox Acc@0.5,
    each averaged over the four tasks, and the change (compatible - original)."""
    columns = {}
    for parse in (LEGACY_PARSE, MAIN_PARSE):
        rows = _main(metrics, parse)
        rows = rows[rows["task"].isin(IMAGE_TASKS) & (rows["metric"] == "bbox_acc50")]
        grouped = rows.groupby("model")["value"].agg(["mean", "size"])
        columns[parse] = grouped.loc[grouped["size"] == len(IMAGE_TASKS), "mean"]
    frame = pd.DataFrame({"original": columns[LEGACY_PARSE], "compatible": columns[MAIN_PARSE]})
    frame = frame.dropna()
    frame["gain"] = frame["compatible"] - frame["original"]
    return frame.sort_values("gain").reset_index(names="model")
