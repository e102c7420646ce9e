"""Every metric of one model run as per-cluster sums, so that a replicate is a weight vector.

Each task and dual metric of `docs/protocol.md` is a ratio of sums over its population
(samples, gold intervals or pairs): accuracies count successes over units, pooled F1s are
2TP / (2TP + FP + FN), mean tIoU sums matched tIoU over gold intervals. Summing numerators
and denominators per cluster gives two (clusters x metrics) matrices; a bootstrap replicate
that draws cluster c w_c times then has the metric value (w @ N) / (w @ D), and all
replicates are one matrix product. The convenience aggregates are means of headline ratios
and are evaluated from the replicated ratios.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualcog.scoring.aggregate import AGGREGATE_PARSE, aggregate_inputs
from dualcog.scoring.dual import FAMILY_SIDES, dual_pairs, pairs_for_tasks
from dualcog.stats.clusters import Clusters
from dualcog.tasks import IMAGE_TASKS

KEY = ["task", "parse", "stratum", "metric"]

Columns = dict[str, np.ndarray]
# (numerator, denominator, population size) of every score row, and the metric's value
# when a replicate's denominator is 0 (pooled F1: nothing to find and nothing claimed = 1.0).
Ratio = tuple[Callable[[Columns], np.ndarray], Callable[[Columns], np.ndarray],
              Callable[[Columns], np.ndarray], float]  # fmt: skip


def _share(flag: str) -> Ratio:
    return (lambda c: c[flag], lambda c: c["one"], lambda c: c["one"], np.nan)


def _pooled_f1(prefix: str) -> Ratio:
    return (
        lambda c: 2 * c[f"{prefix}_tp"],
        lambda c: 2 * c[f"{prefix}_tp"] + c[f"{prefix}_fp"] + c[f"{prefix}_fn"],
        lambda c: c["one"],
        1.0,
    )


RATIOS: dict[str, Ratio] = {
    "response_rate": _share("responded"),
    "valid_rate": _share("valid"),
    "option_acc": _share("option_correct"),
    "bbox_acc50": _share("bbox_hit"),
    "bbox_miou": _share("iou"),
    "joint_acc": _share("joint_correct"),
    "count_acc": _share("count_correct"),
    "composite_acc": (
        lambda c: c["composite_set_correct"],
        lambda c: c["composite_scored"],
        lambda c: c["composite_scored"],
        np.nan,
    ),
    "atomic_f1": _pooled_f1("label"),
    "temporal_f1_50": _pooled_f1("interval"),
    "segment_f1_50": _pooled_f1("interval"),
    "mean_tiou": (
        lambda c: c["tiou_sum"],
        lambda c: c["n_gold_intervals"],
        lambda c: c["n_gold_intervals"],
        np.nan,
    ),
}
DUAL_METRICS = ("dual_semantic_acc", "dual_evidence_acc")
_RATES = ("response_rate", "valid_rate")
TASK_METRICS: dict[str, tuple[str, ...]] = {
    **{t: (*_RATES, "option_acc", "bbox_acc50", "bbox_miou", "joint_acc") for t in IMAGE_TASKS},
    "composite_behavior": (*_RATES, "composite_acc", "temporal_f1_50", "mean_tiou"),
    "atomic_behavior": (*_RATES, "atomic_f1", "temporal_f1_50", "mean_tiou"),
    "landmark_visibility": (*_RATES, "count_acc", "segment_f1_50", "mean_tiou"),
}
_NUMERIC = ("responded", "valid", "option_correct", "bbox_hit", "iou", "joint_correct",
            "count_correct", "label_tp", "label_fp", "label_fn", "interval_tp", "interval_fp",
            "interval_fn", "tiou_sum", "n_gold_intervals")  # fmt: skip


@dataclass(frozen=True)
class MetricMatrices:
    """Per-cluster sums of one model run's metrics.

    `keys` (columns task, parse, stratum, metric, n) lists the ratio metrics, in the column
    order of `numerator` / `denominator` (clusters x ratios); `empty_value` is each ratio's
    value when its denominator is 0. `present` marks the clusters holding part of a ratio's
    population. `derived` lists the convenience aggregates: key, n, and the ratio columns
    they average, by column of the evaluated matrix (ratios first, then aggregates in order,
    so an aggregate may average earlier aggregates).
    """

    keys: pd.DataFrame
    numerator: np.ndarray
    denominator: np.ndarray
    present: np.ndarray
    empty_value: np.ndarray
    derived: tuple[tuple[tuple[str, str, str, str], tuple[int, ...]], ...]

    def all_keys(self) -> pd.DataFrame:
        """Every metric: the ratios, then the aggregates (n = number of values averaged)."""
        derived = pd.DataFrame(
            [(*key, len(columns)) for key, columns in self.derived], columns=[*KEY, "n"]
        )
        return pd.concat([self.keys, derived], ignore_index=True).astype({"n": "int64"})

    def _with_derived(self, columns: np.ndarray, combine) -> np.ndarray:
        """Append each aggregate, combining the columns it refers to (earlier ones included)."""
        out = columns
        for _, refs in self.derived:
            out = np.column_stack([out, combine(out[:, list(refs)])])
        return out

    def n_clusters(self) -> np.ndarray:
        present = self._with_derived(self.present, lambda block: block.any(axis=1))
        return present.sum(axis=0).astype(np.int64)

    def evaluate(self, weights: np.ndarray) -> np.ndarray:
        """(replicates x metrics) values under (replicates x clusters) cluster weights."""
        numerator = weights @ self.numerator
        denominator = weights @ self.denominator
        ratios = np.broadcast_to(self.empty_value, numerator.shape).copy()
        np.divide(numerator, denominator, out=ratios, where=denominator > 0)
        return self._with_derived(ratios, lambda block: block.mean(axis=1))

    def point(self) -> np.ndarray:
        """Metric values on the sample as observed (every cluster once)."""
        return self.evaluate(np.ones((1, self.numerator.shape[0])))[0]


def _columns(rows: pd.DataFrame) -> Columns:
    columns = {
        name: pd.to_numeric(rows[name], errors="coerce").astype("Float64").fillna(0).to_numpy(float)
        for name in _NUMERIC
    }
    composite = rows["composite_set_correct"]
    columns["composite_scored"] = composite.notna().to_numpy(float)
    columns["composite_set_correct"] = (
        pd.to_numeric(composite, errors="coerce").astype("Float64").fillna(0).to_numpy(float)
    )
    columns["one"] = np.ones(len(rows))
    return columns


def _stratified(frame: pd.DataFrame, difficulty: str) -> pd.DataFrame:
    """Every row under stratum `all`, and again under its difficulty when it has one."""
    graded = frame[frame[difficulty].notna()]
    return pd.concat(
        [frame.assign(stratum="all"), graded.assign(stratum=graded[difficulty])],
        ignore_index=True,
    )


def _task_units(scores: pd.DataFrame, cluster: np.ndarray) -> list[pd.DataFrame]:
    rows = _stratified(scores.assign(cluster=cluster), "difficulty")
    # Numeric columns converted once for all rows, then taken per task (same values).
    every = _columns(rows)
    parse, stratum = rows["parse"].to_numpy(), rows["stratum"].to_numpy()
    of_cluster = rows["cluster"].to_numpy()
    parts = []
    for task, at in rows.groupby("task", sort=False).indices.items():
        columns = {name: values[at] for name, values in every.items()}
        for metric in TASK_METRICS.get(task, ()):
            numerator, denominator, size, _ = RATIOS[metric]
            parts.append(
                pd.DataFrame(
                    {
                        "task": task,
                        "parse": parse[at],
                        "stratum": stratum[at],
                        "metric": metric,
                        "cluster": of_cluster[at],
                        "num": numerator(columns),
                        "den": denominator(columns),
                        "n": size(columns),
                    }
                )
            )
    return parts


def _side_outcomes(scores: pd.DataFrame) -> pd.DataFrame:
    """Semantic / evidence success of each (sample, parse) side; behavior needs both levels."""
    flags = scores[["sample_id", "parse"]].assign(
        semantic_ok=scores["semantic_ok"].astype("boolean").fillna(False).astype(bool),
        evidence_ok=scores["evidence_ok"].astype("boolean").fillna(False).astype(bool),
    )
    return flags.groupby(["sample_id", "parse"], as_index=False)[
        ["semantic_ok", "evidence_ok"]
    ].all()


def _dual_units(scores: pd.DataFrame, pairs: pd.DataFrame, clusters: Clusters) -> list:
    """One unit per pair: both sides' outcomes; a side without an outcome failed."""
    outcomes = _side_outcomes(scores)
    parts = []
    for family, (agent_task, _) in FAMILY_SIDES.items():
        family_pairs = pairs[pairs["family"] == family]
        if family_pairs.empty:
            continue
        # Strata and clusters depend on the pairs only: once per family, not per parse mode.
        units = _stratified(family_pairs.reset_index(drop=True), "stratum_of_pair")
        cluster = clusters.indices(units["agent_sample_id"])
        stratum = units["stratum"].to_numpy()
        for parse in pd.unique(scores.loc[scores["request_task"] == agent_task, "parse"]):
            mode = outcomes[outcomes["parse"] == parse]
            position = pd.Index(mode["sample_id"])
            agent_at = position.get_indexer(units["agent_sample_id"])
            world_at = position.get_indexer(units["world_sample_id"])
            for metric, flag in zip(DUAL_METRICS, ("semantic_ok", "evidence_ok"), strict=True):
                ok = mode[flag].to_numpy(bool)
                both = _outcome_at(ok, agent_at) & _outcome_at(ok, world_at)
                parts.append(
                    pd.DataFrame(
                        {
                            "task": family,
                            "parse": parse,
                            "stratum": stratum,
                            "metric": metric,
                            "cluster": cluster,
                            "num": both.astype(float),
                            "den": 1.0,
                            "n": 1.0,
                        }
                    )
                )
    return parts


def _outcome_at(ok: np.ndarray, at: np.ndarray) -> np.ndarray:
    """`ok` at positions `at`; -1 (a side without an outcome) counts as a failure."""
    return np.where(at >= 0, ok[np.maximum(at, 0)] if len(ok) else False, False)


def _aggregates(keys: pd.DataFrame) -> tuple:
    """Convenience aggregates over the headline ratios present (compatible, stratum all)."""
    base = keys[(keys["parse"] == AGGREGATE_PARSE) & (keys["stratum"] == "all")]
    column_of = {
        (t, m): int(i) for i, t, m in zip(base.index, base["task"], base["metric"], strict=True)
    }

    groups = {
        name: tuple(column_of[key] for key in keys)
        for name, keys in aggregate_inputs(column_of).items()
    }
    derived = [
        (("overall", AGGREGATE_PARSE, "all", metric), columns)
        for metric, columns in groups.items()
        if columns
    ]
    # overall_score averages the semantic and evidence scores (columns after the ratios).
    position = {key[3]: len(keys) + i for i, (key, _) in enumerate(derived)}
    halves = tuple(position[g] for g in ("semantic_score", "evidence_score") if g in position)
    if halves:
        derived.append((("overall", AGGREGATE_PARSE, "all", "overall_score"), halves))
    return tuple(derived)


def metric_matrices(
    scores: pd.DataFrame,
    samples: pd.DataFrame,
    clusters: Clusters,
    pairs: pd.DataFrame | None = None,
) -> MetricMatrices:
    """Per-cluster numerator and denominator sums of every metric of one model's scores.

    `pairs` (default: every matched-context pair of `samples`) may be narrowed, e.g. to the
    pairs whose two samples two models have in common. Only families whose two tasks were
    both scored count, as in the metrics table (`pairs_for_tasks`): a run of a task subset
    has no dual rows for a family it ran one side of.
    """
    if pairs is None:
        pairs, _ = dual_pairs(samples)
    pairs = pairs_for_tasks(pairs, scores["request_task"].unique())
    pairs = pairs.rename(columns={"stratum": "stratum_of_pair"})
    cluster = clusters.indices(scores["sample_id"])
    parts = _task_units(scores, cluster) + _dual_units(scores, pairs, clusters)
    units = pd.concat(parts, ignore_index=True) if parts else None
    if units is None or units.empty:
        empty = np.zeros((len(clusters), 0))
        keys = pd.DataFrame(columns=[*KEY, "n"]).astype({"n": "int64"})
        return MetricMatrices(keys, empty, empty, empty.astype(bool), np.zeros(0), ())
    grouped = units.groupby(KEY, sort=True)
    code = grouped.ngroup().to_numpy()
    sizes = np.bincount(code, weights=units["n"].to_numpy())
    keys = grouped.size().reset_index()[KEY]
    keys["n"] = np.rint(sizes).astype(np.int64)
    kept = np.flatnonzero(keys["n"].to_numpy() > 0)  # a metric with an empty population has no row
    remap = np.full(len(keys), -1)
    remap[kept] = np.arange(len(kept))
    keys = keys.iloc[kept].reset_index(drop=True)
    column = remap[code]
    use = column >= 0
    shape = (len(clusters), len(keys))
    flat = units["cluster"].to_numpy()[use] * len(keys) + column[use]

    def summed(values: np.ndarray) -> np.ndarray:
        return np.bincount(flat, weights=values[use], minlength=shape[0] * shape[1]).reshape(shape)

    empty_value = np.array(
        [np.nan if m in DUAL_METRICS else RATIOS[m][3] for m in keys["metric"]], dtype=float
    )
    return MetricMatrices(
        keys=keys,
        numerator=summed(units["num"].to_numpy(float)),
        denominator=summed(units["den"].to_numpy(float)),
        present=summed(units["n"].to_numpy(float)) > 0,
        empty_value=empty_value,
        derived=_aggregates(keys),
    )
