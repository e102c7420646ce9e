"""Paired comparison of two runs on their common samples: a hand-computed case."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest
from score_fixtures import image_parsed, image_sample, parsed_frame, samples_table

from dualcog.errors import ConfigError
from dualcog.schemas import PARSED, to_table
from dualcog.scoring import score_samples
from dualcog.stats import (
    COMPARISON,
    BootstrapSettings,
    build_clusters,
    compare_models,
    comparison_markdown,
    comparison_pairs,
)

GOLD = (0.2, 0.2, 0.6, 0.6)
MISS = (0.7, 0.7, 0.9, 0.9)


def _scores(samples, rows):
    """SCORES of a run over `samples` (a table) whose compatible parse equals its strict one."""
    parsed = parsed_frame(rows)
    parsed = pd.concat([parsed, parsed.assign(parse="compatible")], ignore_index=True)
    return score_samples(samples, to_table(parsed, PARSED), parses=("strict", "compatible"))


def _world():
    samples = samples_table(
        [
            image_sample("a1", landmark_id="lm1", context_index=1),
            image_sample("a2", landmark_id="lm1", context_index=3),
            image_sample("b1", landmark_id="lm2", context_index=1),
        ]
    )
    model_a = _scores(
        samples,
        [
            image_parsed("a1", option_ids=["A"], bbox=GOLD),
            image_parsed("a2", option_ids=["B"], bbox=GOLD),
            image_parsed("b1", option_ids=["A"], bbox=MISS),
        ],
    )
    # Model b was run on a1 and b1 only: a2 is not a common sample.
    model_b = _scores(
        samples.filter(pc.not_equal(samples["sample_id"], "a2")),
        [
            image_parsed("a1", option_ids=["C"], bbox=MISS),
            image_parsed("b1", option_ids=["A"], bbox=MISS),
        ],
    )
    return samples, model_a, model_b


def _metric(frame, metric, parse="compatible"):
    hit = frame[
        (frame["task"] == "landmark_position")
        & (frame["metric"] == metric)
        & (frame["stratum"] == "all")
        & (frame["parse"] == parse)
    ]
    assert len(hit) == 1
    return hit.iloc[0]


def test_hand_computed_paired_difference_and_interval():
    samples, model_a, model_b = _world()
    # Clusters: lm1 (a1 common), lm2 (b1). Replicates: lm1 twice, lm2 twice, each once.
    weights = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    frame = compare_models(
        ("a", "b"), samples, model_a, model_b, build_clusters(samples),
        BootstrapSettings(replicates=3, seed=0, level=0.5), weights,
    )  # fmt: skip
    assert list(frame.columns) == COMPARISON.names
    option = _metric(frame, "option_acc")
    # Common samples a1, b1: a right on both (1.0), b right on b1 only (0.5).
    assert (option["value_a"], option["value_b"], option["difference"]) == (1.0, 0.5, 0.5)
    assert option["n"] == 2 and option["n_clusters"] == 2 and option["n_boot"] == 3
    # Replicate differences: lm1 twice 1 - 0 = 1, lm2 twice 1 - 1 = 0, once each 1 - 0.5.
    # Linear quantiles 0.25 / 0.75 of (0, 0.5, 1): 0.25 and 0.75.
    assert option["ci_low"] == pytest.approx(0.25)
    assert option["ci_high"] == pytest.approx(0.75)
    bbox = _metric(frame, "bbox_acc50")  # a hits a1 only, b none: 0.5 - 0 on common samples
    assert (bbox["value_a"], bbox["value_b"]) == (0.5, 0.0)
    assert bbox["ci_low"] == pytest.approx(0.25) and bbox["ci_high"] == pytest.approx(0.75)


def test_a_run_compared_with_itself_differs_by_zero_everywhere():
    samples, model_a, _ = _world()
    frame = compare_models(
        ("a", "a2"), samples, model_a, model_a, build_clusters(samples),
        BootstrapSettings(replicates=200, seed=3),
    )  # fmt: skip
    assert (frame["difference"] == 0).all()
    assert (frame["ci_low"] == 0).all() and (frame["ci_high"] == 0).all()


def test_markdown_lists_headline_metrics_with_marks():
    samples, model_a, model_b = _world()
    frame = compare_models(
        ("a", "b"), samples, model_a, model_b, build_clusters(samples),
        BootstrapSettings(replicates=3, level=0.5), np.array([[1.0, 1.0]] * 3),
    )  # fmt: skip
    text = comparison_markdown(frame, {"a": "Model A", "b": "Model B"})
    assert "# Paired comparison: Model A vs Model B" in text
    row = "| landmark_position | option_acc | 100.0 | 50.0 | +50.0 * | [+50.0, +50.0] | 2 |"
    assert row in text


def test_compare_entries_are_checked_against_models():
    config = {"models": [{"name": "x"}, {"name": "y"}], "compare": [["x", "y"], ["x", "y"]]}
    assert comparison_pairs(config) == [("x", "y")]
    with pytest.raises(ConfigError, match="no model named 'z'"):
        comparison_pairs({**config, "compare": [["x", "z"]]})
    with pytest.raises(ConfigError, match="itself"):
        comparison_pairs({**config, "compare": [["x", "x"]]})


def test_config_schema_and_defaults_for_bootstrap_and_compare():
    from dualcog.config import validate_config

    base = {"data_root": "x", "models": [{"name": "m", "backend": "oracle"}]}
    config = validate_config(base)
    assert config["bootstrap"] == {"replicates": 1000, "seed": 0, "level": 0.95}
    assert config["compare"] == []
    assert validate_config({**base, "bootstrap": {"seed": 4}})["bootstrap"]["seed"] == 4
    for bad in ({"bootstrap": {"level": 1.5}}, {"bootstrap": {"replicates": 0}},
                {"compare": [["m"]]}, {"bootstrap": {"seeds": 1}}):  # fmt: skip
        with pytest.raises(ConfigError):
            validate_config({**base, **bad})
