"""Paired comparison of two model runs on the samples both were scored on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.scoring.aggregate import AGGREGATE_PARSE, EVIDENCE_METRICS, SEMANTIC_METRICS
from dualcog.scoring.pairing import dual_pairs
from dualcog.stats.bootstrap import BootstrapSettings, percentile_interval
from dualcog.stats.clusters import Clusters
from dualcog.stats.estimands import KEY
from dualcog.stats.repeat_sets import set_estimates

COMPARISON = pa.schema(
    [
        ("model_a", pa.string()),
        ("model_b", pa.string()),
        ("task", pa.string()),
        ("parse", pa.string()),
        ("stratum", pa.string()),
        ("metric", pa.string()),
        ("value_a", pa.float64()),  # on the common samples only
        ("value_b", pa.float64()),
        ("difference", pa.float64()),  # value_a - value_b
        ("ci_low", pa.float64()),  # paired percentile interval of the difference
        ("ci_high", pa.float64()),
        ("n", pa.int64()),  # population on the common samples (samples, gold intervals, pairs)
        ("n_clusters", pa.int64()),
        ("n_boot", pa.int64()),
        ("seed", pa.int64()),
        ("level", pa.float64()),
        # a repeat set (dualcog.repeats): runs averaged, and their between-repeat SD (NaN
        # for a single run)
        ("repeats_a", pa.int64()),
        ("repeats_b", pa.int64()),
        ("sd_a", pa.float64()),
        ("sd_b", pa.float64()),
    ]
)
HEADLINE = (*SEMANTIC_METRICS, *EVIDENCE_METRICS)


def _runs(scores: pa.Table | Sequence[pa.Table]) -> list[pa.Table]:
    return [scores] if isinstance(scores, pa.Table) else list(scores)


def _among(table: pa.Table, column: str, ids: pa.Array) -> pa.Array:
    return pc.is_in(table[column], value_set=ids)


def compare_models(
    names: Sequence[str],
    samples: pa.Table,
    scores_a: pa.Table | Sequence[pa.Table],
    scores_b: pa.Table | Sequence[pa.Table],
    clusters: Clusters,
    settings: BootstrapSettings,
    weights: np.ndarray | None = None,
) -> pd.DataFrame:
    """COMPARISON rows (a frame, which `comparison_markdown` reads): every metric both sides
    have on their common samples.

    `samples`: the benchmark's SAMPLES (at least the pairing's and clusters' columns). A side
    is one run's SCORES table or a repeat set's (one table per repeat, dualcog.repeats): its
    value is the mean over its repeats, `sd_a`/`sd_b` the between-repeat standard deviation.
    Common samples are those scored for every run of both sides (each ran its task); a
    missing response stays a wrong answer, as in the main metrics. Dual metrics use the pairs
    whose two samples are common. Every run is evaluated under the same replicate weights and
    a set's replicates are averaged over its repeats, so the interval of the difference is a
    paired one of the two means (the samples resampled, the answers held).
    """
    model_a, model_b = names
    runs_a, runs_b = _runs(scores_a), _runs(scores_b)
    common = set.intersection(*(set(s["sample_id"].to_pylist()) for s in (*runs_a, *runs_b)))
    ids = pa.array(list(common), type=pa.string())
    pairs, _ = dual_pairs(samples)
    pairs = pairs.filter(
        pc.and_(_among(pairs, "agent_sample_id", ids), _among(pairs, "world_sample_id", ids))
    )
    weights = settings.weights(clusters) if weights is None else weights
    sides = []
    for runs in (runs_a, runs_b):
        tables = [s.filter(_among(s, "sample_id", ids)) for s in runs]
        sides.append(set_estimates(tables, clusters, pairs, weights))
    side_a, side_b = sides
    index_b = {key[:4]: i for i, key in enumerate(side_b.keys)}
    rows_a = [i for i, key in enumerate(side_a.keys) if key[:4] in index_b]
    rows_b = [index_b[side_a.keys[i][:4]] for i in rows_a]
    difference = side_a.replicates[:, rows_a] - side_b.replicates[:, rows_b]
    low, high, defined = percentile_interval(difference, settings.level)
    frame = pd.DataFrame([side_a.keys[i][:4] for i in rows_a], columns=KEY)
    frame.insert(0, "model_b", model_b)
    frame.insert(0, "model_a", model_a)
    frame["value_a"] = side_a.mean[rows_a]
    frame["value_b"] = side_b.mean[rows_b]
    frame["difference"] = frame["value_a"] - frame["value_b"]
    frame["ci_low"] = low
    frame["ci_high"] = high
    frame["n"] = np.array([side_a.keys[i][4] for i in rows_a], dtype=np.int64)
    frame["n_clusters"] = side_a.n_clusters[rows_a].astype(np.int64)
    frame["n_boot"] = defined.astype(np.int64)
    frame["seed"] = settings.seed
    frame["level"] = settings.level
    frame["repeats_a"] = len(runs_a)
    frame["repeats_b"] = len(runs_b)
    frame["sd_a"] = side_a.spread[rows_a]
    frame["sd_b"] = side_b.spread[rows_b]
    return frame[COMPARISON.names]


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def _with_spread(value: float, spread: float) -> str:
    text = f"{100 * value:.1f}"
    return text if pd.isna(spread) else f"{text} ±{100 * spread:.1f}"


def _repeats_line(name: str, averaged: int, configured: int) -> str | None:
    """What a side that is a repeat set averages; an incomplete set says so."""
    if configured <= 1 and averaged <= 1:
        return None
    line = f"{name}: the mean of {averaged} repeats"
    if averaged < configured:
        line += f" of the {configured} configured (incomplete: not the whole set)"
    return line + "; ±x.x is the standard deviation between repeats."


def comparison_markdown(
    frame: pd.DataFrame,
    display: Mapping[str, str] | None = None,
    repeats: Mapping[str, int] | None = None,
) -> str:
    """A readable summary: headline metrics and aggregates, compatible parse, stratum all.

    `repeats`: the configured size of each repeat set among the two (dualcog.repeats)."""
    display = display or {}
    repeats = repeats or {}
    if frame.empty:
        return "# Paired comparison\n\nThe two runs share no scored sample.\n"
    model_a, model_b = frame["model_a"].iloc[0], frame["model_b"].iloc[0]
    name_a, name_b = (display.get(m, m).replace("|", "\\|") for m in (model_a, model_b))
    level = float(frame["level"].iloc[0])
    main = frame[(frame["parse"] == AGGREGATE_PARSE) & (frame["stratum"] == "all")]
    wanted = [*HEADLINE, *(("overall", m) for m in ("semantic_score", "evidence_score",
              "agent_state_score", "world_state_score", "overall_score"))]  # fmt: skip
    wanted += [(f, m) for f in ("position", "action_observation", "video")
               for m in ("dual_semantic_acc", "dual_evidence_acc")]  # fmt: skip
    by_key = {(r.task, r.metric): r for r in main.itertuples(index=False)}
    lines = [
        f"# Paired comparison: {name_a} vs {name_b}",
        "",
        f"Both runs scored on their common samples (compatible parse, all strata). Difference "
        f"= {name_a} minus {name_b} in percentage points, with its {level:.0%} paired "
        f"cluster-bootstrap interval ({int(frame['n_boot'].max())} replicates, seed "
        f"{int(frame['seed'].iloc[0])}); `*` marks an interval that excludes 0. n: samples, "
        "gold intervals (mean tIoU) or pairs (dual metrics); for overall scores, the number of "
        "metrics averaged.",
        "",
        *(
            f"{line}\n"
            for line in (
                _repeats_line(name, int(frame[f"repeats_{side}"].iloc[0]), repeats.get(model, 1))
                for side, name, model in (("a", name_a, model_a), ("b", name_b, model_b))
            )
            if line
        ),
        f"| Task | Metric | {name_a} | {name_b} | Difference | {level:.0%} interval | n |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for key in wanted:
        row = by_key.get(key)
        if row is None:
            continue
        excludes_zero = row.ci_low > 0 or row.ci_high < 0
        lines.append(
            f"| {row.task} | {row.metric} | {_with_spread(row.value_a, row.sd_a)} "
            f"| {_with_spread(row.value_b, row.sd_b)} "
            f"| {_points(row.difference)}{' *' if excludes_zero else ''} "
            f"| [{_points(row.ci_low)}, {_points(row.ci_high)}] | {row.n} |"
        )
    lines += ["", "Every metric, parse mode and stratum is in the Parquet file beside this.", ""]
    return "\n".join(lines)
