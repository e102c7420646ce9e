"""Matplotlib figures of the results (Agg backend: no display needed), saved as PNG and SVG."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from dualcog.plots.data import (  # noqa: E402
    DIFFICULTY_PANELS,
    GROUP_ORDER,
    GROUP_TITLES,
    answer_vs_grounding,
    audit_gains,
    by_difficulty,
    cognition_balance,
)
from dualcog.tasks import IMAGE_TASKS, SCORED_BY_TASK  # noqa: E402

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
GROUP_COLOURS = {
    "proprietary": "#D55E00",
    "open-weights": "#0072B2",
    "spatial": "#009E73",
    "baseline": "#7F7F7F",
}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
FORMATS = ("png", "svg")
DPI = 150
STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "none",  # text stays text in the SVG: searchable, selectable
    "svg.hashsalt": "dualcog",  # stable ids: the same results give the same file
}


def _colour(group: str) -> str:
    return GROUP_COLOURS.get(group, "#333333")


def _markers(models: pd.DataFrame) -> dict[str, str]:
    """One marker per model within its group, so same-coloured models stay apart."""
    marker = {}
    for _, of_group in models.groupby("group", sort=False):
        for i, name in enumerate(of_group.index):
            marker[name] = MARKERS[i % len(MARKERS)]
    return marker


def _group_legend(ax_or_fig, groups: Iterable[str], **kwargs) -> None:
    present = [g for g in GROUP_ORDER if g in set(groups)] + sorted(set(groups) - set(GROUP_ORDER))
    handles = [
        Line2D([], [], marker="o", linestyle="", color=_colour(g), label=GROUP_TITLES.get(g, g))
        for g in present
    ]
    ax_or_fig.legend(handles=handles, title="Model group", frameon=False, **kwargs)


def _percent_axis(ax: Axes, axis: str) -> None:
    ticks = np.linspace(0, 1, 6)
    getattr(ax, f"set_{axis}lim")(-0.03, 1.03)
    getattr(ax, f"set_{axis}ticks")(ticks, [f"{100 * t:.0f}" for t in ticks])


def _error_bar(row, value: str, low: str, high: str) -> np.ndarray | None:
    """The (2, 1) error extents of one point, from a row's value and interval bounds: None
    without a lower bound, a missing or negative extent drawn as 0."""
    if low not in row or pd.isna(row[low]):
        return None
    return np.array([[_extent(row[value] - row[low])], [_extent(row[high] - row[value])]])


def _extent(difference) -> float:
    return 0.0 if pd.isna(difference) else max(float(difference), 0.0)


# Up to this many models, points carry their names; beyond, a number and a key below.
NAME_LABEL_LIMIT = 12
KEY_COLUMNS = 4
KEY_ROW_INCHES = 0.2


def _label_points(ax: Axes, xs, ys, labels) -> None:
    """Name every point; labels of nearby points are stacked so that they do not overlap."""
    placed: list[tuple[float, float]] = []
    for x, y, label in sorted(zip(xs, ys, labels, strict=True), key=lambda p: (-p[1], p[0])):
        ty = y
        while any(abs(px - x) < 0.25 and abs(py - ty) < 0.045 for px, py in placed):
            ty -= 0.045
        placed.append((x, ty))
        ax.annotate(label, (x, y), xytext=(x + 0.02, ty), fontsize=7, va="center", zorder=5,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.75},
                    arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "#999999"}
                    if ty != y else None)  # fmt: skip


def _number_points(ax: Axes, xs, ys, numbers) -> None:
    for x, y, number in zip(xs, ys, numbers, strict=True):
        ax.annotate(str(number), (x, y), xytext=(3, 3), textcoords="offset points",
                    fontsize=6, zorder=7)  # fmt: skip


class _Key:
    """How points name their model: by name (few models) or by number with a key below."""

    def __init__(self, models: pd.DataFrame, shown: Iterable[str]) -> None:
        self.models = models
        self.shown = [m for m in models.index if m in set(shown)]
        self.numbered = len(self.shown) > NAME_LABEL_LIMIT
        self.number = {m: i + 1 for i, m in enumerate(self.shown)}
        self.markers = _markers(models)

    @property
    def extra_height(self) -> float:
        """Inches to add below the plots for the key."""
        if not self.numbered:
            return 0.0
        return KEY_ROW_INCHES * (-(-len(self.shown) // KEY_COLUMNS) + 1)

    def label(self, ax: Axes, xs, ys, names) -> None:
        if self.numbered:
            _number_points(ax, xs, ys, [self.number[m] for m in names])
        else:
            _label_points(ax, xs, ys, [self.models.loc[m, "label"] for m in names])

    def draw(self, fig: Figure, line: bool = False) -> None:
        """The model key below the plots (number, marker, colour and name of each model)."""
        if not self.numbered:
            # Points carry their model's name; say what colour and shape mean.
            fig.text(0.5, 0.005, "Colour: model group. Marker shape: tells apart the models "
                     "of one group; each point is labelled with its model.", ha="center",
                     va="bottom", fontsize=7, color="#555555")  # fmt: skip
            return
        handles = [
            Line2D([], [], marker=self.markers[m], ls="-" if line else "", ms=5,
                   color=_colour(self.models.loc[m, "group"]),
                   label=f"{self.number[m]}  {self.models.loc[m, 'label']}")
            for m in self.shown
        ]  # fmt: skip
        fig.legend(handles=handles, title="Models", loc="lower center", ncol=KEY_COLUMNS,
                   fontsize=7, frameon=False, bbox_to_anchor=(0.5, 0.0))  # fmt: skip


def _margins(fig: Figure, top: float, bottom: float, right: float = 0.2,
             hspace: float = 0.25) -> None:  # fmt: skip
    """Fixed margins in inches (titles and legends above, labels and the key below)."""
    height, width = fig.get_figheight(), fig.get_figwidth()
    fig.subplots_adjust(top=1 - top / height, bottom=bottom / height, left=0.8 / width,
                        right=1 - right / width, hspace=hspace, wspace=0.12)  # fmt: skip


def _no_data(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#666666")


def plot_answer_vs_grounding(
    metrics: pd.DataFrame, models: pd.DataFrame, intervals: pd.DataFrame | None = None
) -> Figure:
    data = answer_vs_grounding(metrics, intervals)
    data = data[data["model"].isin(models.index)]
    key = _Key(models, data["model"])
    # One panel per image task the run has (all four when it has none, to say so).
    tasks = [t for t in IMAGE_TASKS if t in set(data["task"])] or list(IMAGE_TASKS)
    ncols = min(2, len(tasks))
    nrows = -(-len(tasks) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 4.9 * nrows + key.extra_height),
                             sharex=True, sharey=True, squeeze=False)  # fmt: skip
    for ax in axes.flat[len(tasks) :]:
        ax.set_visible(False)
    for ax, task in zip(axes.flat, tasks, strict=False):
        ax.set_title(SCORED_BY_TASK[task].display_name, fontsize=9)
        ax.fill_between([0, 1], [0, 0], [0, 1], color="#F3E2D3", alpha=0.6, lw=0)
        ax.text(0.97, 0.04, "right answer,\nwrong place", ha="right", va="bottom",
                fontsize=8, color="#A0522D", style="italic")  # fmt: skip
        ax.plot([0, 1], [0, 1], ls="--", lw=0.8, color="#999999")
        of_task = data[data["task"] == task]
        if of_task.empty:
            _no_data(ax, "no model ran this task")
        for row in of_task.to_dict("records"):
            name = row["model"]
            group = models.loc[name, "group"]
            ax.errorbar(
                row["option_acc"], row["bbox_acc50"], fmt=key.markers[name],
                xerr=_error_bar(row, "option_acc", "option_acc_ci_low", "option_acc_ci_high"),
                yerr=_error_bar(row, "bbox_acc50", "bbox_acc50_ci_low", "bbox_acc50_ci_high"),
                color=_colour(group), ecolor=_colour(group) + "80", elinewidth=0.8,
                markersize=6, capsize=0, zorder=6,
            )  # fmt: skip
        key.label(ax, of_task["option_acc"], of_task["bbox_acc50"], of_task["model"])
        _percent_axis(ax, "x")
        _percent_axis(ax, "y")
        ax.set_aspect("equal")
    for ax in axes[-1]:
        ax.set_xlabel("Option accuracy (%)")
    for ax in axes[:, 0]:
        ax.set_ylabel("BBox Acc@0.5 (%)")
    fig.suptitle("Answer vs grounding per image task (compatible parse; bars: 95% CI)")
    _group_legend(fig, models["group"], loc="upper center", ncol=4,
                  bbox_to_anchor=(0.5, 0.975))  # fmt: skip
    key.draw(fig)
    _margins(fig, top=1.0, bottom=0.7 + key.extra_height, hspace=0.2)
    return fig


def plot_cognition_balance(
    metrics: pd.DataFrame, models: pd.DataFrame, intervals: pd.DataFrame | None = None
) -> Figure:
    data = cognition_balance(metrics, intervals)
    data = data[data["model"].isin(models.index)]
    key = _Key(models, data["model"])
    fig, ax = plt.subplots(figsize=(8.5, 6.5 + key.extra_height))
    ax.plot([0, 1], [0, 1], ls="--", lw=0.8, color="#999999")
    ax.text(0.98, 0.9, "balanced", rotation=45, ha="right", va="top", fontsize=8,
            color="#777777", rotation_mode="anchor", transform_rotates_text=True)  # fmt: skip
    ax.text(0.03, 0.97, "stronger on world-state", fontsize=8, color="#777777", va="top")
    ax.text(0.97, 0.03, "stronger on agent-state", fontsize=8, color="#777777", ha="right")
    if data.empty:
        _no_data(ax, "no model has both agent-state and world-state scores")
    for row in data.to_dict("records"):
        group = models.loc[row["model"], "group"]
        ax.errorbar(
            row["agent"], row["world"], fmt=key.markers[row["model"]],
            xerr=_error_bar(row, "agent", "agent_state_score_ci_low", "agent_state_score_ci_high"),
            yerr=_error_bar(row, "world", "world_state_score_ci_low", "world_state_score_ci_high"),
            color=_colour(group), ecolor=_colour(group) + "80", elinewidth=0.8, markersize=7,
            capsize=0, zorder=6,
        )  # fmt: skip
    key.label(ax, data["agent"], data["world"], data["model"])
    _percent_axis(ax, "x")
    _percent_axis(ax, "y")
    ax.set_aspect("equal")
    ax.set_xlabel("Agent-state score (%): mean of the 8 agent-state headline metrics")
    ax.set_ylabel("World-state score (%): mean of the 6 world-state headline metrics")
    ax.set_title("Agent-state vs world-state balance (compatible parse; bars: 95% CI)")
    _group_legend(ax, models["group"], loc="upper left", bbox_to_anchor=(1.02, 1.0))
    key.draw(fig)
    _margins(fig, top=0.4, bottom=0.7 + key.extra_height, right=1.9)
    return fig


def plot_by_difficulty(metrics: pd.DataFrame, models: pd.DataFrame) -> Figure:
    data = by_difficulty(metrics)
    data = data[data["model"].isin(models.index)]
    key = _Key(models, data["model"])
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5 + key.extra_height), sharey=True)
    for ax, (title, _, _, strata) in zip(axes.flat, DIFFICULTY_PANELS, strict=True):
        of_panel = data[data["panel"] == title]
        # `data` is sorted by panel, model and order: each model's line is one group.
        lines = dict(tuple(of_panel.groupby("model", sort=False)))
        for name in key.shown:
            line = lines.get(name)
            if line is None:
                continue
            ax.plot(line["order"], line["value"], marker=key.markers[name], ms=5, lw=1.2,
                    color=_colour(models.loc[name, "group"]), alpha=0.9)  # fmt: skip
            if key.numbered:
                last = line.iloc[-1]
                _number_points(ax, [last["order"]], [last["value"]], [key.number[name]])
        if of_panel.empty:
            _no_data(ax, "no model has this metric by difficulty")
        ax.set_xticks(range(len(strata)), strata)
        ax.set_xlim(-0.3, len(strata) - 0.7)
        ax.set_title(title)
        ax.set_xlabel("Difficulty band" if len(strata) == 3 else "View directions (difficulty)")
        _percent_axis(ax, "y")
        ax.grid(axis="y", lw=0.3, color="#DDDDDD")
    for ax in axes[:, 0]:
        ax.set_ylabel("Score (%)")
    fig.suptitle("Accuracy by difficulty (compatible parse)")
    if key.numbered:
        _group_legend(fig, models.loc[key.shown, "group"], loc="upper center", ncol=4,
                      bbox_to_anchor=(0.5, 0.975), fontsize=8)  # fmt: skip
        key.draw(fig, line=True)
        _margins(fig, top=1.0, bottom=0.7 + key.extra_height, hspace=0.45)
        return fig
    handles = [
        Line2D([], [], marker=key.markers[m], color=_colour(models.loc[m, "group"]),
               label=models.loc[m, "label"])
        for m in key.shown
    ]  # fmt: skip
    fig.legend(handles=handles, title="Model", loc="lower left",
               bbox_to_anchor=(0.78, 0.5), frameon=False, fontsize=8)  # fmt: skip
    _group_legend(fig, models.loc[key.shown, "group"], loc="upper left",
                  bbox_to_anchor=(0.78, 0.48), fontsize=8)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 0.78, 0.96))
    return fig


def plot_audit_gains(metrics: pd.DataFrame, models: pd.DataFrame) -> Figure:
    data = audit_gains(metrics)
    data = data[data["model"].isin(models.index)].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.42 * max(len(data), 2)))
    if data.empty:
        _no_data(ax, "no model ran all four image tasks")
    for y, row in data.iterrows():
        group = models.loc[row["model"], "group"]
        ax.plot([row["original"], row["compatible"]], [y, y], color="#BBBBBB", lw=2, zorder=1)
        ax.scatter(row["original"], y, color="white", edgecolor="#555555", s=40, zorder=2)
        ax.scatter(row["compatible"], y, color=_colour(group), s=45, zorder=3)
        ax.text(1.06, y, f"{100 * row['gain']:+.1f} pp", va="center", fontsize=8)
    ax.text(1.06, len(data) - 0.45, "Change", va="bottom", fontsize=8, weight="bold")
    ax.set_yticks(range(len(data)), [models.loc[m, "label"] for m in data["model"]])
    ax.set_ylim(-0.7, max(len(data), 1) - 0.3)
    _percent_axis(ax, "x")
    ax.set_xlabel("BBox Acc@0.5 (%), mean of the four image tasks")
    ax.set_title("Compatibility audit: Original (legacy) parser vs compatible parser")
    handles = [
        Line2D([], [], marker="o", ls="", markerfacecolor="white", markeredgecolor="#555555",
               color="#555555", label="Original (legacy parse)"),
        Line2D([], [], marker="o", ls="", color="#333333", label="Compatible (colour: group)"),
    ]  # fmt: skip
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.5 / max(len(data), 2)
              - 0.12), ncol=2, frameon=False)  # fmt: skip
    ax.grid(axis="x", lw=0.3, color="#DDDDDD")
    fig.tight_layout()
    return fig


PLOTS: dict[str, Callable[..., Figure]] = {
    "answer_vs_grounding": plot_answer_vs_grounding,
    "cognition_balance": plot_cognition_balance,
    "by_difficulty": plot_by_difficulty,
    "audit_gains": plot_audit_gains,
}
WITH_INTERVALS = {"answer_vs_grounding", "cognition_balance"}


def tight_bbox(fig: Figure, dpi: float) -> Bbox:
    """The area `savefig(bbox_inches="tight")` keeps of `fig` at `dpi` (padded as it pads).

    savefig finds it by laying the whole figure out once more, without painting, before
    each file it writes: found once here with the raster renderer, it serves every format
    (a third of the plots' CPU; the PNG is the same to the byte, the SVG's page is cropped
    to the PNG's box, which differs from its own by fractions of a point)."""
    original = fig.dpi
    fig.set_dpi(dpi)
    try:
        fig.draw_without_rendering()
        box = fig.get_tightbbox(fig.canvas.get_renderer())
    finally:
        fig.set_dpi(original)
    pad = matplotlib.rcParams["savefig.pad_inches"]
    return box.padded(pad, pad)


def save_figure(fig: Figure, stem: str | Path, formats: Iterable[str] = FORMATS) -> list[Path]:
    """Write `fig` as <stem>.<format>, reproducibly (no timestamps in the files)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    box = tight_bbox(fig, DPI)
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(path, dpi=DPI, bbox_inches=box, metadata=metadata)
        paths.append(path)
    plt.close(fig)
    return paths


def draw_plots(
    names: Iterable[str],
    metrics: pd.DataFrame,
    models: pd.DataFrame,
    intervals: pd.DataFrame | None,
    directory: str | Path,
    formats: Iterable[str] = FORMATS,
) -> list[Path]:
    """Draw each named plot into `directory`; returns the files written."""
    written = []
    with plt.rc_context(STYLE):
        for name in names:
            draw = PLOTS[name]
            fig = (draw(metrics, models, intervals) if name in WITH_INTERVALS
                   else draw(metrics, models))  # fmt: skip
            written += save_figure(fig, Path(directory) / name, formats)
    return written
