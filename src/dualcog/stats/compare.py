"""Paired comparison of two model runs on the samples both were scored on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from dualcog.scoring.aggregate import AGGREGATE_PARSE, EVIDENCE_METRICS, SEMANTIC_METRICS
from dualcog.scoring.dual import dual_pairs
from dualcog.stats.bootstrap import BootstrapSettings, percentile_interval
from dualcog.stats.clusters import Clusters
from dualcog.stats.estimands import KEY, metric_matrices

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
    ]
)
HEADLINE = (*SEMANTIC_METRICS, *EVIDENCE_METRICS)


def compare_models(
    names: Sequence[str],
    samples: pd.DataFrame,
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    clusters: Clusters,
    settings: BootstrapSettings,
    weights: np.ndarray | None = None,
) -> pd.DataFrame:
    """COMPARISON rows: every metric both runs have on their common samples.

    Common samples are those scored for both runs (both ran their task); a missing response
    stays a wrong answer, as in the main metrics. Dual metrics use the pairs whose two
    samples are common. Both runs are evaluated under the same replicate weights, so the
    interval of the difference is a paired one.
    """
    model_a, model_b = names
    common = set(scores_a["sample_id"]) & set(scores_b["sample_id"])
    pairs, _ = dual_pairs(samples)
    pairs = pairs[pairs["agent_sample_id"].isin(common) & pairs["world_sample_id"].isin(common)]
    weights = settings.weights(clusters) if weights is None else weights
    sides = []
    for scores in (scores_a, scores_b):
        matrices = metric_matrices(
            scores[scores["sample_id"].isin(common)], samples, clusters, pairs
        )
        keys = matrices.all_keys()
        keys["n_clusters"] = matrices.n_clusters()
        sides.append((keys, matrices.point(), matrices.evaluate(weights)))
    (keys_a, point_a, boot_a), (keys_b, point_b, boot_b) = sides
    index_b = {tuple(k): i for i, k in enumerate(keys_b[KEY].itertuples(index=False))}
    rows_a = [i for i, k in enumerate(keys_a[KEY].itertuples(index=False)) if tuple(k) in index_b]
    rows_b = [index_b[tuple(keys_a.loc[i, KEY])] for i in rows_a]
    difference = boot_a[:, rows_a] - boot_b[:, rows_b]
    low, high, defined = percentile_interval(difference, settings.level)
    frame = keys_a.loc[rows_a, KEY].reset_index(drop=True)
    frame.insert(0, "model_b", model_b)
    frame.insert(0, "model_a", model_a)
    frame["value_a"] = point_a[rows_a]
    frame["value_b"] = point_b[rows_b]
    frame["difference"] = frame["value_a"] - frame["value_b"]
    frame["ci_low"] = low
    frame["ci_high"] = high
    frame["n"] = keys_a.loc[rows_a, "n"].to_numpy()
    frame["n_clusters"] = keys_a.loc[rows_a, "n_clusters"].to_numpy()
    frame["n_boot"] = defined.astype(np.int64)
    frame["seed"] = settings.seed
    frame["level"] = settings.level
    return frame[COMPARISON.names]


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def comparison_markdown(frame: pd.DataFrame, display: Mapping[str, str] | None = None) -> str:
    """A readable summary: headline metrics and aggregates, compatible parse, stratum all."""
    display = display or {}
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
        f"| Task | Metric | {name_a} | {name_b} | Difference | {level:.0%} interval | n |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for key in wanted:
        row = by_key.get(key)
        if row is None:
            continue
        excludes_zero = row.ci_low > 0 or row.ci_high < 0
        lines.append(
            f"| {row.task} | {row.metric} | {100 * row.value_a:.1f} | {100 * row.value_b:.1f} "
            f"| {_points(row.difference)}{' *' if excludes_zero else ''} "
            f"| [{_points(row.ci_low)}, {_points(row.ci_high)}] | {row.n} |"
        )
    lines += ["", "Every metric, parse mode and stratum is in the Parquet file beside this.", ""]
    return "\n".join(lines)
