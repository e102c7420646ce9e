"""Every metric of one model run as per-cluster sums, so that a replicate is a weight vector.

Each task and dual metric of `docs/protocol.md` is a ratio of sums over its population
(samples, gold intervals or pairs): accuracies count successes over units, pooled F1s are
2TP / (2TP + FP + FN), mean tIoU sums matched tIoU over gold intervals. Summing numerators
and denominators per cluster gives two (clusters x metrics) matrices; a bootstrap replicate
that draws cluster c w_c times then has the metric value (w @ N) / (w @ D), and all
replicates are one matrix product. The convenience aggregates are means of headline ratios
and are evaluated from the replicated ratios.

The sums are built from Arrow tables with numpy (`metric_matrices`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from dualcog.scoring.aggregate import AGGREGATE_PARSE, aggregate_inputs
from dualcog.scoring.columns import (
    counts,
    dense_groups,
    encoded,
    first_seen,
    flags,
    floats,
)
from dualcog.scoring.dual import (
    FAMILY_SIDES,
    _success_by_sample,
    pair_codes,
    pairs_for_tasks,
)
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


Key = tuple[str, str, str, str]  # task, parse, stratum, metric


@dataclass(frozen=True)
class MetricMatrices:
    """Per-cluster sums of one model run's metrics.

    `keys` ((task, parse, stratum, metric, n) tuples) lists the ratio metrics, in the column
    order of `numerator` / `denominator` (clusters x ratios); `empty_value` is each ratio's
    value when its denominator is 0. `present` marks the clusters holding part of a ratio's
    population. `derived` lists the convenience aggregates: key, n, and the ratio columns
    they average, by column of the evaluated matrix (ratios first, then aggregates in order,
    so an aggregate may average earlier aggregates).
    """

    keys: tuple[tuple[str, str, str, str, int], ...]
    numerator: np.ndarray
    denominator: np.ndarray
    present: np.ndarray
    empty_value: np.ndarray
    derived: tuple[tuple[Key, tuple[int, ...]], ...]

    def key_rows(self) -> list[tuple[str, str, str, str, int]]:
        """Every metric: the ratios, then the aggregates (n = number of values averaged)."""
        return [*self.keys, *((*key, len(columns)) for key, columns in self.derived)]

    def _with_derived(self, columns: np.ndarray, combine) -> np.ndarray:
        """Append each aggregate, combining the columns it refers to (earlier ones included)."""
        width = columns.shape[1]
        out = np.empty((columns.shape[0], width + len(self.derived)), dtype=columns.dtype)
        out[:, :width] = columns
        for at, (_, refs) in enumerate(self.derived, start=width):
            out[:, at] = combine(out[:, list(refs)])
        return out

    def n_clusters(self) -> np.ndarray:
        present = self._with_derived(self.present, lambda block: block.any(axis=1))
        return present.sum(axis=0).astype(np.int64)

    @cached_property
    def _distinct_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """The numerator and denominator columns side by side, each distinct column once
        (clusters x distinct), and where each of them is among those (numerators first).

        Most columns repeat: every share metric of a (task, parse, stratum) has the same
        denominator, the unit count, and pooled F1s share theirs. A replicate's sum of a
        column is the same dot product wherever the column stands in the product (BLAS splits
        the output, never one dot product's order), so each is computed once."""
        both = np.hstack([self.numerator, self.denominator])
        index_of: dict[bytes, int] = {}
        where = np.empty(both.shape[1], dtype=np.int64)
        for at, column in enumerate(np.ascontiguousarray(both.T)):
            where[at] = index_of.setdefault(column.tobytes(), len(index_of))
        first = np.unique(where, return_index=True)[1]
        return np.ascontiguousarray(both[:, first]), where

    def evaluate(self, weights: np.ndarray) -> np.ndarray:
        """(replicates x metrics) values under (replicates x clusters) cluster weights."""
        distinct, where = self._distinct_sums
        sums = weights @ distinct
        width = self.numerator.shape[1]
        numerator, denominator = sums[:, where[:width]], sums[:, where[width:]]
        ratios = np.broadcast_to(self.empty_value, numerator.shape).copy()
        np.divide(numerator, denominator, out=ratios, where=denominator > 0)
        return self._with_derived(ratios, lambda block: block.mean(axis=1))

    def point(self) -> np.ndarray:
        """Metric values on the sample as observed (every cluster once)."""
        return self.evaluate(np.ones((1, self.numerator.shape[0])))[0]


def _columns(scores: pa.Table) -> Columns:
    """The score columns the ratios read, as floats: null (and NaN) is 0."""
    columns = {}
    for name in _NUMERIC:
        values = floats(scores[name])
        columns[name] = np.where(np.isnan(values), 0.0, values)
    composite, known = counts(scores["composite_set_correct"].cast(pa.int64()))
    columns["composite_scored"] = known.astype(float)
    columns["composite_set_correct"] = composite.astype(float)
    columns["one"] = np.ones(scores.num_rows)
    return columns


class _Units:
    """Population units of every metric, part by part: key parts (names), cluster, num, den,
    n. A (metric key, cluster) cell's units come from one part, in row order, so its sums
    add in the order the units were added."""

    def __init__(self) -> None:
        self.names: list[dict[str, int]] = [{}, {}, {}, {}]
        self.parts: list[tuple] = []

    def codes(self, part: int, names: list) -> np.ndarray:
        table = self.names[part]
        return np.array([table.setdefault(name, len(table)) for name in names], dtype=np.int64)

    def add(self, key_codes, cluster, num, den, n) -> None:
        self.parts.append((key_codes, cluster, num, den, n))


def _stratified(n: int, stratum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows under stratum `all` (code -1 here), and again under their own when they have one
    (`stratum` >= 0): (rows, their stratum code)."""
    graded = np.flatnonzero(stratum >= 0)
    return np.concatenate([np.arange(n), graded]), np.concatenate(
        [np.full(n, -1, np.int64), stratum[graded]]
    )


def _task_units(units: _Units, scores: pa.Table, cluster: np.ndarray) -> None:
    task, tasks = encoded(scores["task"])
    parse, parses = encoded(scores["parse"])
    difficulty, difficulties = encoded(scores["difficulty"])
    rows, stratum = _stratified(scores.num_rows, difficulty)
    every = _columns(scores)
    parse_code = units.codes(1, parses)
    stratum_code = units.codes(2, ["all", *difficulties])  # -1 + 1 = "all"
    for t in first_seen(task[rows]):
        if t < 0:
            continue
        at = task[rows] == t
        rows_at = rows[at]
        columns = {name: values[rows_at] for name, values in every.items()}
        keep = parse[rows_at] >= 0
        for metric in TASK_METRICS.get(tasks[t], ()):
            numerator, denominator, size, _ = RATIOS[metric]
            codes = (
                units.codes(0, [tasks[t]])[0],
                parse_code[parse[rows_at][keep]],
                stratum_code[stratum[at][keep] + 1],
                units.codes(3, [metric])[0],
            )
            units.add(codes, cluster[rows_at][keep], numerator(columns)[keep],
                      denominator(columns)[keep], size(columns)[keep])  # fmt: skip


def _dual_units(units: _Units, scores: pa.Table, pairs: pa.Table, clusters: Clusters) -> None:
    """One unit per pair: both sides' outcomes; a side without an outcome failed."""
    score_code, agent_code, world_code, n_codes = pair_codes(scores, pairs)
    parse, parses = encoded(scores["parse"])
    request, requests = encoded(scores["request_task"])
    outcome = {
        "semantic_ok": flags(scores["semantic_ok"]),
        "evidence_ok": flags(scores["evidence_ok"]),
    }
    family_of, families = encoded(pairs["family"])
    stratum_of, strata = encoded(pairs["stratum"])
    stratum_code = units.codes(2, ["all", *strata])
    agent_cluster = clusters.indices(pairs["agent_sample_id"])
    for family, (agent_task, _) in FAMILY_SIDES.items():
        if family not in families:
            continue
        in_family = np.flatnonzero(family_of == families.index(family))
        # Strata and clusters depend on the pairs only: once per family, not per parse mode.
        at, stratum = _stratified(len(in_family), stratum_of[in_family])
        pair_at = in_family[at]
        cluster = agent_cluster[pair_at]
        agent, world = agent_code[pair_at], world_code[pair_at]
        ones = np.ones(len(pair_at))
        agent_request = requests.index(agent_task) if agent_task in requests else -2
        for mode in first_seen(parse[request == agent_request]):
            if mode < 0:
                continue
            in_mode = (parse == mode) & (score_code >= 0)
            for metric, flag in zip(DUAL_METRICS, ("semantic_ok", "evidence_ok"), strict=True):
                ok = _success_by_sample(score_code[in_mode], outcome[flag][in_mode], n_codes)
                both = ok[agent] & ok[world]
                codes = (
                    units.codes(0, [family])[0],
                    units.codes(1, [parses[mode]])[0],
                    stratum_code[stratum + 1],
                    units.codes(3, [metric])[0],
                )
                units.add(codes, cluster, both.astype(float), ones, ones)


def _aggregates(keys: list[Key]) -> tuple:
    """Convenience aggregates over the headline ratios present (compatible, stratum all)."""
    column_of = {
        (t, m): i for i, (t, p, s, m) in enumerate(keys) if p == AGGREGATE_PARSE and s == "all"
    }
    groups = {
        name: tuple(column_of[key] for key in inputs)
        for name, inputs in aggregate_inputs(column_of).items()
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


def metric_matrices(scores: pa.Table, clusters: Clusters, pairs: pa.Table) -> MetricMatrices:
    """Per-cluster numerator and denominator sums of every metric of one model's scores
    (a SCORES table).

    `pairs` (PAIRS) may be narrowed, e.g. to the pairs whose two samples two models have in
    common. Only families whose two tasks were both scored count, as in the metrics table
    (`pairs_for_tasks`): a run of a task subset has no dual rows for a family it ran
    one side of.
    """
    requested = [t for t in encoded(scores["request_task"])[1] if t is not None]
    pairs = pairs_for_tasks(pairs, requested)
    units = _Units()
    _task_units(units, scores, clusters.indices(scores["sample_id"]))
    _dual_units(units, scores, pairs, clusters)
    sizes = [sum(len(part[1]) for part in units.parts)]
    if not units.parts or sizes[0] == 0:
        empty = np.zeros((len(clusters), 0))
        return MetricMatrices((), empty, empty, empty.astype(bool), np.zeros(0), ())
    length = [len(part[1]) for part in units.parts]
    parts = [np.concatenate([np.broadcast_to(part[0][i], n) for part, n in
                             zip(units.parts, length, strict=True)]) for i in range(4)]  # fmt: skip
    cluster, num, den, n_unit = (np.concatenate([part[i] for part in units.parts]) for i in
                                 range(1, 5))  # fmt: skip
    names = [list(table) for table in units.names]
    widths = [max(len(table), 1) for table in names]
    combined = ((parts[0] * widths[1] + parts[1]) * widths[2] + parts[2]) * widths[3] + parts[3]
    found, code = dense_groups(combined, widths[0] * widths[1] * widths[2] * widths[3])
    decoded = []
    for value in found.tolist():
        rest, m = divmod(value, widths[3])
        rest, s = divmod(rest, widths[2])
        t, p = divmod(rest, widths[1])
        decoded.append((names[0][t], names[1][p], names[2][s], names[3][m]))
    order = sorted(range(len(decoded)), key=decoded.__getitem__)  # keys sorted, as a group-by
    rank = np.empty(len(decoded), np.int64)
    rank[order] = np.arange(len(decoded))
    code = rank[code]
    keys = [decoded[i] for i in order]
    sizes = np.rint(np.bincount(code, weights=n_unit, minlength=len(keys))).astype(np.int64)
    kept = np.flatnonzero(sizes > 0)  # a metric with an empty population has no row
    remap = np.full(len(keys), -1)
    remap[kept] = np.arange(len(kept))
    keys = [keys[i] for i in kept]
    column = remap[code]
    use = column >= 0
    shape = (len(clusters), len(keys))
    flat = cluster[use] * len(keys) + column[use]

    def summed(values: np.ndarray) -> np.ndarray:
        return np.bincount(flat, weights=values[use], minlength=shape[0] * shape[1]).reshape(shape)

    empty_value = np.array(
        [np.nan if key[3] in DUAL_METRICS else RATIOS[key[3]][3] for key in keys], dtype=float
    )
    return MetricMatrices(
        keys=tuple((*key, int(sizes[i])) for key, i in zip(keys, kept, strict=True)),
        numerator=summed(num),
        denominator=summed(den),
        present=summed(n_unit) > 0,
        empty_value=empty_value,
        derived=_aggregates(keys),
    )
