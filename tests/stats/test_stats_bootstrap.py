"""Cluster-bootstrap intervals: hand-computed cases, determinism, degenerate runs, agreement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from score_fixtures import (
    behavior_sample,
    image_parsed,
    image_sample,
    parsed_frame,
    samples_frame,
    visibility_parsed,
    visibility_sample,
)

from dualcog.errors import DataError
from dualcog.schemas import PARSED, SAMPLES, to_table
from dualcog.scoring import dual_pairs, model_metrics, score_samples
from dualcog.stats import (
    CONFIDENCE_INTERVALS,
    BootstrapSettings,
    MetricMatrices,
    build_clusters,
    metric_matrices,
    model_intervals,
    percentile_interval,
    replicate_weights,
    replicate_weights_table,
    weights_from_table,
    weights_metadata,
)

GOLD = (0.2, 0.2, 0.6, 0.6)
HIT = GOLD
MISS = (0.7, 0.7, 0.9, 0.9)


def _image_world():
    """Three landmark_position samples in two clusters: (s1, lm1) x2 and (s1, lm2) x1."""
    samples = samples_frame(
        [
            image_sample("a1", landmark_id="lm1", context_index=1),
            image_sample("a2", landmark_id="lm1", context_index=3, difficulty="8way"),
            image_sample("b1", landmark_id="lm2", context_index=1),
        ]
    )
    parsed = parsed_frame(
        [
            image_parsed("a1", option_ids=["A"], bbox=HIT),  # right answer, right place
            image_parsed("a2", option_ids=["B"], bbox=HIT),  # wrong answer, right place
            image_parsed("b1", option_ids=["A"], bbox=MISS),  # right answer, wrong place
        ]
    )
    return samples, parsed


def _scored(samples, parsed, parses, model="m"):
    """(samples, scores, metrics, pairs) tables of a run over every task of `samples`, as the
    `pairs` and `score` jobs make them."""
    table = to_table(samples, SAMPLES)
    scores = score_samples(table, to_table(parsed, PARSED), parses=parses)
    pairs, _ = dual_pairs(table)
    metrics = model_metrics(model, table["task"].unique().to_pylist(), scores, pairs)
    return table, scores, metrics, pairs


def _intervals(samples, parsed, settings=None, weights=None, model="m"):
    """Intervals of a run whose compatible parse equals its strict one, and its metrics."""
    parsed = pd.concat([parsed, parsed.assign(parse="compatible")], ignore_index=True)
    table, scores, metrics, pairs = _scored(samples, parsed, ("strict", "compatible"), model)
    settings = settings or BootstrapSettings(replicates=200, seed=1)
    intervals = model_intervals(
        model, scores, metrics, build_clusters(table), settings, pairs, weights
    )
    return intervals.to_pandas(), metrics.to_pandas()


def _row(frame, metric, task="landmark_position", stratum="all", parse="compatible"):
    hit = frame[
        (frame["task"] == task)
        & (frame["metric"] == metric)
        & (frame["stratum"] == stratum)
        & (frame["parse"] == parse)
    ]
    assert len(hit) == 1, (task, metric, stratum)
    return hit.iloc[0]


def test_clusters_are_scene_by_landmark_and_mission():
    samples = samples_frame(
        [
            image_sample("a1", landmark_id="lm1"),
            image_sample("a2", landmark_id="lm1", task="self_position", context_index=2),
            image_sample("b1", landmark_id="lm2"),
            behavior_sample(
                "v1", {"A": "atomic"}, [("A", "atomic", [[0, 1]])], False, mission_id="m1"
            ),  # fmt: skip
            visibility_sample("v2", 1, [[0, 1]], mission_id="m1"),
            visibility_sample("v3", 1, [[0, 1]], mission_id=None),
        ]
    )
    clusters = build_clusters(to_table(samples, SAMPLES))
    assert clusters.group_sizes == (2, 2)  # images: lm1, lm2; video: m1, and v3 on its own
    assert clusters.index_of["a1"] == clusters.index_of["a2"] != clusters.index_of["b1"]
    assert clusters.index_of["v1"] == clusters.index_of["v2"] != clusters.index_of["v3"]


def test_replicate_weights_redraw_each_modality_to_its_size_and_are_seeded():
    weights = replicate_weights((3, 2), replicates=50, seed=9)
    assert weights.shape == (50, 5)
    assert (weights[:, :3].sum(axis=1) == 3).all() and (weights[:, 3:].sum(axis=1) == 2).all()
    assert np.array_equal(weights, replicate_weights((3, 2), replicates=50, seed=9))
    assert not np.array_equal(weights, replicate_weights((3, 2), replicates=50, seed=10))


def test_replicate_weights_file_gives_back_the_draw_and_refuses_a_stale_one(tmp_path):
    """The `bootstrap_weights` job's file holds exactly the weights each `score` job drew
    before; one drawn for other clusters, another seed or replicate count is an error."""
    from dualcog.schemas import read_arrow, write_table
    from dualcog.stats import REPLICATE_WEIGHTS

    samples, _ = _image_world()
    table = to_table(samples, SAMPLES)
    clusters = build_clusters(table)
    settings = BootstrapSettings(replicates=40, seed=5)
    weights = settings.weights(clusters)
    path = tmp_path / "weights.parquet"
    metadata = weights_metadata(clusters.group_sizes, settings.seed)
    write_table(replicate_weights_table(weights), REPLICATE_WEIGHTS, path, metadata)
    written = read_arrow(path)
    back = weights_from_table(written, clusters, settings.replicates, settings.seed)
    assert back.dtype == np.float64 and np.array_equal(back, weights)
    large = replicate_weights((700, 1200), replicates=3, seed=0)  # counts above 255
    assert np.array_equal(
        replicate_weights_table(large)["counts"].combine_chunks().flatten().to_numpy(),
        large.ravel(),
    )
    with pytest.raises(DataError, match="rerun"):
        weights_from_table(written, clusters, settings.replicates, seed=6)
    with pytest.raises(DataError, match="rerun"):
        weights_from_table(written, clusters, 41, settings.seed)
    other = build_clusters(table.slice(0, 1))
    with pytest.raises(DataError, match="rerun"):
        weights_from_table(written, other, settings.replicates, settings.seed)


def test_hand_computed_replicates_and_percentiles():
    samples, parsed = _image_world()
    # Clusters in order lm1 (a1 correct, a2 wrong), lm2 (b1 correct).
    weights = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0], [1.0, 1.0]])
    table, scores, _, pairs = _scored(samples, parsed, ("strict",))
    matrices = metric_matrices(scores, build_clusters(table), pairs)
    keys = [row[:4] for row in matrices.key_rows()]
    option = keys.index(("landmark_position", "strict", "all", "option_acc"))
    bbox = keys.index(("landmark_position", "strict", "all", "bbox_acc50"))
    replicated = matrices.evaluate(weights)
    # option: lm1 twice -> 2/4; lm2 twice -> 2/2; each once -> 2/3.
    assert replicated[:, option].tolist() == pytest.approx([0.5, 1.0, 2 / 3, 2 / 3])
    # bbox hits: a1, a2 yes, b1 no -> lm1 twice 4/4, lm2 twice 0/2, once each 2/3.
    assert replicated[:, bbox].tolist() == pytest.approx([1.0, 0.0, 2 / 3, 2 / 3])
    assert matrices.point()[option] == pytest.approx(2 / 3)
    # 50 % percentile interval of (0.5, 2/3, 2/3, 1): linear quantiles at 0.25 and 0.75.
    low, high, defined = percentile_interval(replicated[:, [option]], level=0.5)
    assert low[0] == pytest.approx(0.5 + 0.75 * (2 / 3 - 0.5))
    assert high[0] == pytest.approx(2 / 3 + 0.25 * (1 - 2 / 3))
    assert defined[0] == 4


def test_percentiles_equal_nanquantile_column_by_column_bit_for_bit():
    """Columns without NaN go through np.quantile along the axis at once; every column's
    bounds are exactly those np.nanquantile gives that column on its own."""
    rng = np.random.default_rng(3)
    for rows, columns in ((1, 5), (2, 7), (999, 40), (1000, 393)):
        values = rng.random((rows, columns))
        values[:, ::7] = np.round(values[:, ::7], 1)  # ties
        values[:, 1::9] = 0.25  # constant columns
        values[rng.random((rows, columns)) < 0.05] = np.nan  # undefined replicates
        values[:, 2::11] = np.nan  # never defined
        if columns > 5:
            values[:, 3] = np.inf  # an infinite value is not defined but still ordered
        for level in (0.95, 0.5, 0.999):
            with np.errstate(invalid="ignore"):  # inf - inf in the interpolation: NaN
                low, high, defined = percentile_interval(values, level)
            tail = (1 - level) / 2
            for j in range(columns):
                column = values[:, j]
                assert defined[j] == np.isfinite(column).sum()
                if np.isnan(column).all():
                    assert np.isnan(low[j]) and np.isnan(high[j])
                    continue
                with np.errstate(invalid="ignore"):
                    expected = np.nanquantile(column, [tail, 1 - tail])
                assert np.array_equal([low[j], high[j]], expected, equal_nan=True), (rows, j)


def test_repeated_sum_columns_are_multiplied_once_with_the_same_values():
    """`evaluate` multiplies each distinct numerator / denominator column once; every
    replicate value equals the product of the full matrices, bit for bit, fractional sums
    (IoU, tIoU) and all."""
    rng = np.random.default_rng(5)
    clusters, ratios = 300, 60
    numerator = rng.integers(0, 4, (clusters, ratios)).astype(float)
    numerator[:, ::5] = rng.random((clusters, 12)) * 3  # fractional sums
    numerator[:, 1::6] = numerator[:, :10]  # repeated columns
    denominator = np.repeat(rng.integers(1, 5, (clusters, 6)).astype(float), 10, axis=1)
    matrices = MetricMatrices(
        keys=tuple(("t", "p", "all", f"m{i}", 1) for i in range(ratios)),
        numerator=numerator,
        denominator=denominator,
        present=denominator > 0,
        empty_value=np.full(ratios, np.nan),
        derived=((("overall", "p", "all", "mean"), (0, 5, 7)),),
    )
    distinct, _ = matrices._distinct_sums
    assert distinct.shape[1] < 2 * ratios
    weights = rng.multinomial(clusters, np.full(clusters, 1 / clusters), size=200).astype(float)
    expected = (weights @ numerator) / (weights @ denominator)
    expected = np.column_stack([expected, expected[:, [0, 5, 7]].mean(axis=1)])
    assert np.array_equal(matrices.evaluate(weights), expected)


def test_undefined_replicates_are_left_out_and_counted():
    samples, parsed = _image_world()
    # The 8way stratum lives in lm1 only; a replicate without lm1 has no 8way sample.
    weights = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    frame, _ = _intervals(samples, parsed, weights=weights)
    row = _row(frame, "option_acc", stratum="8way")
    assert row["n_boot"] == 2 and row["n_clusters"] == 1
    assert row["ci_low"] == row["ci_high"] == 0.0


def test_interval_rows_match_metrics_exactly_and_follow_the_schema():
    samples, parsed = _image_world()
    frame, metrics = _intervals(samples, parsed)
    assert list(frame.columns) == CONFIDENCE_INTERVALS.names
    key = ["task", "parse", "stratum", "metric"]
    assert frame[key].values.tolist() == metrics[key].values.tolist()
    assert (frame["value"].to_numpy() == metrics["value"].to_numpy()).all()  # exact
    assert (frame["ci_low"] <= frame["value"] + 1e-12).all()
    assert (frame["value"] <= frame["ci_high"] + 1e-12).all()
    assert (frame["seed"] == 1).all() and (frame["level"] == 0.95).all()


def _mixed_world():
    """Thirty samples in fifteen clusters, some answers wrong, boxes of varied overlap."""
    samples = samples_frame(
        [image_sample(f"i{k}", landmark_id=f"lm{k % 15}", context_index=2 * k + 1)
         for k in range(30)]
    )  # fmt: skip
    parsed = parsed_frame(
        [image_parsed(f"i{k}", option_ids=["A" if k % 3 else "C"],
                      bbox=(0.2, 0.2, 0.45 + 0.02 * k, 0.6)) for k in range(30)]
    )  # fmt: skip
    return samples, parsed


def test_same_seed_same_intervals_other_seed_other_intervals():
    samples, parsed = _mixed_world()
    first, _ = _intervals(samples, parsed, BootstrapSettings(replicates=300, seed=4))
    again, _ = _intervals(samples, parsed, BootstrapSettings(replicates=300, seed=4))
    other, _ = _intervals(samples, parsed, BootstrapSettings(replicates=300, seed=5))
    pd.testing.assert_frame_equal(first, again)
    miou = [_row(f, "bbox_miou") for f in (first, other)]
    assert (miou[0]["ci_low"], miou[0]["ci_high"]) != (miou[1]["ci_low"], miou[1]["ci_high"])
    assert miou[0]["ci_low"] < miou[0]["value"] < miou[0]["ci_high"]


def _oracle_world():
    samples = samples_frame(
        [image_sample(f"i{k}", landmark_id=f"lm{k % 3}", context_index=2 * k + 1)
         for k in range(6)]
        + [visibility_sample(f"v{k}", 1, [[0.0, 10.0]], mission_id=f"m{k}") for k in range(4)]
    )  # fmt: skip
    parsed = parsed_frame(
        [image_parsed(f"i{k}", option_ids=["A"], bbox=GOLD) for k in range(6)]
        + [visibility_parsed(f"v{k}", 1, [[0.0, 10.0]]) for k in range(4)]
    )
    return samples, parsed


def test_a_perfect_run_has_zero_width_intervals():
    samples, parsed = _oracle_world()
    frame, _ = _intervals(samples, parsed, BootstrapSettings(replicates=500, seed=3))
    assert (frame["value"] == 1.0).all()
    assert (frame["ci_low"] == frame["value"]).all() and (frame["ci_high"] == frame["value"]).all()
    assert (frame["n_boot"] == 500).all()
    overall = frame[frame["task"] == "overall"]
    assert set(overall["metric"]) >= {"semantic_score", "evidence_score", "overall_score"}


def test_overall_aggregates_are_replicated_means():
    samples, parsed = _oracle_world()
    parsed.loc[parsed["sample_id"] == "v0", "visible_count"] = 3  # one count wrong
    frame, metrics = _intervals(samples, parsed, BootstrapSettings(replicates=400, seed=2))
    semantic = _row(frame, "semantic_score", task="overall")
    count = _row(frame, "count_acc", task="landmark_visibility")
    # semantic = mean(option_acc = 1, count_acc): its replicates move with count_acc's.
    assert semantic["value"] == pytest.approx((1 + count["value"]) / 2)
    assert semantic["ci_low"] == pytest.approx((1 + count["ci_low"]) / 2)
    assert semantic["ci_high"] == pytest.approx((1 + count["ci_high"]) / 2)
    assert semantic["n_clusters"] == 3 + 4


def test_disagreeing_metrics_table_is_a_clear_error():
    samples, parsed = _image_world()
    table, scores, metrics, pairs = _scored(samples, parsed, ("strict",))
    clusters = build_clusters(table)
    settings = BootstrapSettings(replicates=10)
    values = metrics["value"].to_pylist()
    values[0] += 0.01
    at = metrics.schema.get_field_index("value")
    tampered = metrics.set_column(at, "value", pa.array(values, pa.float64()))
    with pytest.raises(DataError, match="out of step"):
        model_intervals("m", scores, tampered, clusters, settings, pairs)
    with pytest.raises(DataError, match="only in the scores"):
        model_intervals("m", scores, metrics.slice(1), clusters, settings, pairs)


def test_settings_from_config_and_bounds():
    assert BootstrapSettings.from_config(None) == BootstrapSettings(1000, 0, 0.95)
    assert BootstrapSettings.from_config({"seed": 5}).seed == 5
    with pytest.raises(ValueError):
        BootstrapSettings.from_config({"level": 1.5})
