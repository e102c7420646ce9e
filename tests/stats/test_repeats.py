"""`repeats: k`: k independent runs of a sampling model, one row of the tables with their
mean and between-repeat SD, incomplete sets marked (unit level; the workflow runs are in
tests/stats/test_repeats_workflow.py)."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from test_tables import _metrics

from dualcog.config import model_fingerprint, validate_config
from dualcog.errors import ConfigError
from dualcog.inference.cache import cache_key, model_cache_dir, safe_name
from dualcog.inference.offline import sample_seed
from dualcog.repeats import run_seed, split_repeat_name
from dualcog.routes import split_mode
from dualcog.stats.pairs import comparison_pairs
from dualcog.tables import to_csv, to_latex, to_markdown
from dualcog.tables.cells import DAGGER
from dualcog.tables.inputs import TableInputs
from dualcog.tables.repeats import build_tables, collapse_metrics, repeat_plan
from dualcog.tasks import IMAGE_TASKS


def _config(*models: dict, **top) -> dict:
    return {"data_root": "data", "models": list(models), **top}


SIM = {"name": "sim-Instant", "backend": "simulated", "seed": 5, "repeats": 3}


def test_repeats_become_runs_named_after_the_model() -> None:
    config = validate_config(_config(SIM, {"name": "o", "backend": "oracle"}))
    runs = config["models"]
    assert [m["name"] for m in runs] == ["sim-Instant~r1", "sim-Instant~r2", "sim-Instant~r3", "o"]
    assert [m.get("repeat") for m in runs] == [1, 2, 3, None]
    assert {m.get("repeat_of") for m in runs[:3]} == {"sim-Instant"}
    assert runs[1]["display_name"] == "sim-Instant (repeat 2/3)"
    assert split_repeat_name("sim-Instant~r12") == ("sim-Instant", 12)
    assert split_repeat_name("sim-Instant") is None
    # A repeat keeps its run's mode (the request switch reads it from the name).
    assert split_mode("Qwen3-VL-Thinking~r2") == ("Qwen3-VL", "Thinking")
    # Validating what was validated (a job re-reading the config) gives the same runs.
    again = validate_config(config)
    assert [m["name"] for m in again["models"]] == [m["name"] for m in runs]


def test_each_repeat_has_its_own_cache_keys_and_folder() -> None:
    runs = validate_config(_config(SIM))["models"]
    prints = {model_fingerprint(m) for m in runs}
    assert len(prints) == 3
    assert len({cache_key("request-1", p) for p in prints}) == 3
    assert len({model_cache_dir("c", m["name"]) for m in runs}) == 3
    # `~` is kept in folder names: a repeat never shares a configured run's folder.
    assert safe_name("m~r2") != safe_name("m_r2")
    # A larger set re-sends none of the repeats already answered.
    grown = validate_config(_config({**SIM, "repeats": 5}))["models"]
    assert [model_fingerprint(m) for m in grown[:3]] == [model_fingerprint(m) for m in runs]


def test_built_in_repeats_draw_from_their_own_seeds() -> None:
    runs = validate_config(_config(SIM))["models"]
    seeds = [run_seed(m) for m in runs]
    assert seeds == ["5~r1", "5~r2", "5~r3"]
    assert run_seed({"seed": 5}) == 5
    draws = {sample_seed(s, "sample-1", "answer") for s in seeds}
    assert len(draws) == 3 and sample_seed(5, "sample-1", "answer") not in draws


@pytest.mark.parametrize(
    ("model", "backend"),
    [
        ({"name": "gold", "backend": "oracle", "repeats": 2}, "oracle"),
        ({"name": "rec", "backend": "replay", "replay": "r.jsonl", "repeats": 3}, "replay"),
    ],
)
def test_repeats_are_refused_where_answers_never_vary(model, backend) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config(_config(model), "my.yaml")
    message = str(info.value)
    assert "my.yaml" in message and f"models ({model['name']}).repeats" in message
    assert f"backend {backend} gives the same answers" in message
    assert "openai" in message and "simulated" in message


def test_repeats_one_is_a_plain_run_and_a_tilde_name_is_refused() -> None:
    runs = validate_config(_config({**SIM, "repeats": 1}))["models"]
    assert [m["name"] for m in runs] == ["sim-Instant"] and "repeat" not in runs[0]
    with pytest.raises(ConfigError, match=r"models\[0\] \(m~r1\)\.name"):
        validate_config(_config({"name": "m~r1", "backend": "random"}))
    with pytest.raises(ConfigError, match=r"repeats: 0 is less than the minimum of 1"):
        validate_config(_config({**SIM, "repeats": 0}))
    # The keys a repeat's entry gets are not configuration: written by hand they are refused.
    with pytest.raises(ConfigError, match="'repeat_of' was unexpected"):
        validate_config(_config({"name": "a", "backend": "random", "repeat_of": "b"}))


def test_select_takes_a_set_or_one_repeat_and_compare_names_the_set() -> None:
    other = {"name": "o", "backend": "oracle"}
    whole = validate_config(_config(SIM, other, select=["sim-Instant"]))
    assert [m["name"] for m in whole["models"]] == [f"sim-Instant~r{i}" for i in (1, 2, 3)]
    one = validate_config(_config(SIM, other, select=["sim-Instant~r2"]))
    assert [m["name"] for m in one["models"]] == ["sim-Instant~r2"]
    config = validate_config(_config(SIM, other, compare=[["sim-Instant", "o"]]))
    assert comparison_pairs(config) == [("sim-Instant", "o")]


# --- tables: a hand-computed set --------------------------------------------------------

SET_MODELS = [
    {"name": f"m~r{i}", "backend": "openai", "group": "proprietary", "repeat": i,
     "repeat_of": "m", "repeats": 3, "repeat_label": "Model M"}
    for i in (1, 2, 3)
] + [{"name": "x", "backend": "openai", "group": "proprietary"}]  # fmt: skip
# Option accuracy per run on every image task; the response rate of each is 1.
VALUES = {"m~r1": 0.5, "m~r2": 0.7, "m~r3": 0.9, "x": 0.6}


def _set_metrics(values: dict[str, float]) -> pd.DataFrame:
    rows = []
    for run, value in values.items():
        for task in IMAGE_TASKS:
            rows.append((run, task, "compatible", "all", "option_acc", value))
            rows.append((run, task, "compatible", "all", "response_rate", 1.0))
    return _metrics(rows)  # n = 10 samples per task


def _tables(values: dict[str, float], names=("image_main",)):
    metrics = _set_metrics(values)
    return build_tables(list(names), TableInputs(metrics), SET_MODELS)


def test_a_set_is_one_row_with_its_mean_and_sd() -> None:
    (table,) = _tables(VALUES)
    frame = table.frame
    assert list(frame.index) == ["m", "x"]
    assert frame.loc["m", "Model"] == "Model M" and frame.loc["m", "Repeats"] == "3/3"
    assert frame.loc["m", "LP Option Acc"] == pytest.approx(0.7)  # (0.5 + 0.7 + 0.9) / 3
    assert table.spreads[("m", "LP Option Acc")] == pytest.approx(0.2)  # SD, ddof 1
    assert ("x", "LP Option Acc") not in table.spreads
    markdown = to_markdown(table)
    row = next(line for line in markdown.splitlines() if line.startswith("| Model M"))
    assert "| 3/3 |" in row and "**70.0 ±20.0**" in row and "120/120" in row
    assert DAGGER not in row
    assert "Repeats: runs averaged / runs configured" in markdown
    assert r"70.0 \textpm{}20.0" in to_latex(table)
    csv = pd.read_csv(io.StringIO(to_csv(table)), index_col="run")
    assert csv.loc["m", "LP Option Acc SD"] == pytest.approx(0.2)
    assert math.isnan(csv.loc["x", "LP Option Acc SD"])


def test_an_incomplete_set_is_marked_and_averaged_over_what_ran() -> None:
    values = {k: v for k, v in VALUES.items() if k != "m~r3"}  # repeat 3 never ran
    (table,) = _tables(values)
    assert table.frame.loc["m", "Repeats"] == "2/3"
    assert table.frame.loc["m", "LP Option Acc"] == pytest.approx(0.6)
    assert table.spreads[("m", "LP Option Acc")] == pytest.approx(math.sqrt(0.02))
    # Coverage counts three runs' samples, two answered: every cell carries the dagger.
    assert table.coverage.loc["m", "responses"] == 80 and table.coverage.loc["m", "expected"] == 120
    row = next(line for line in to_markdown(table).splitlines() if "Model M" in line)
    assert "| 2/3 |" in row and "80/120" in row and f"60.0 ±14.1**{DAGGER}" in row


def test_one_run_of_a_set_has_no_spread() -> None:
    (table,) = _tables({"m~r2": 0.7, "x": 0.6})
    assert table.frame.loc["m", "Repeats"] == "1/3" and not table.spreads


def test_collapsed_response_rate_counts_the_whole_set() -> None:
    metrics = _set_metrics({"m~r1": 0.5, "m~r2": 0.7})
    metrics.loc[(metrics.model == "m~r2") & (metrics.metric == "response_rate"), "value"] = 0.5
    plan = repeat_plan(SET_MODELS)
    collapsed = collapse_metrics(metrics, plan)
    rate = collapsed[(collapsed.model == "m") & (collapsed.metric == "response_rate")]
    # (10 + 5 responses) / (3 runs x 10 samples), per task
    assert np.allclose(rate["value"], 0.5) and set(rate["n"]) == {30}
    assert set(collapsed["model"]) == {"m"}


def test_without_repeats_the_tables_are_unchanged() -> None:
    models = [{"name": "x", "backend": "openai", "group": "proprietary"}]
    (table,) = build_tables(["image_main"], TableInputs(_set_metrics({"x": 0.6})), models)
    assert "Repeats" not in table.frame.columns and not table.spreads


# --- compare: a set against a run, hand-computed ----------------------------------------


def test_compare_averages_a_set_under_the_same_replicates_and_reports_its_sd() -> None:
    from score_fixtures import image_parsed
    from test_stats_compare import GOLD, MISS, _metric, _scores, _world

    from dualcog.stats import (
        BootstrapSettings,
        build_clusters,
        compare_models,
        comparison_markdown,
    )

    samples, repeat_1, model_b = _world()
    # Repeat 2 of model a: wrong option on a1, right on a2 and b1.
    repeat_2 = _scores(
        samples,
        [
            image_parsed("a1", option_ids=["C"], bbox=GOLD),
            image_parsed("a2", option_ids=["B"], bbox=GOLD),
            image_parsed("b1", option_ids=["A"], bbox=MISS),
        ],
    )
    weights = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])  # lm1 twice, lm2 twice, each once
    frame = compare_models(
        ("a", "b"), samples, [repeat_1, repeat_2], model_b, build_clusters(samples),
        BootstrapSettings(replicates=3, seed=0, level=0.5), weights,
    )  # fmt: skip
    option = _metric(frame, "option_acc")
    # Common samples a1, b1: repeat 1 right on both (1.0), repeat 2 on b1 only (0.5).
    assert option["value_a"] == pytest.approx(0.75) and option["value_b"] == 0.5
    assert option["sd_a"] == pytest.approx(math.sqrt(0.125))  # SD of (1.0, 0.5), ddof 1
    assert math.isnan(option["sd_b"])
    assert (option["repeats_a"], option["repeats_b"]) == (2, 1)
    # Replicates of the set's mean: (1 + 0) / 2, (1 + 1) / 2, (1 + 0.5) / 2; of b: 0, 1, 0.5.
    # Differences 0.5, 0, 0.25: linear quantiles 0.25 / 0.75 are 0.125 and 0.375.
    assert option["ci_low"] == pytest.approx(0.125) and option["ci_high"] == pytest.approx(0.375)
    text = comparison_markdown(frame, {"a": "Model A"}, {"a": 3})
    assert "Model A: the mean of 2 repeats of the 3 configured (incomplete" in text
    assert "| landmark_position | option_acc | 75.0 ±35.4 | 50.0 | +25.0 * |" in text


def test_outcome_shares_and_mode_flags_pool_over_the_set() -> None:
    from dualcog.tables.build import UsageInputs
    from dualcog.tables.repeats import collapse_inputs

    shares = pd.DataFrame(
        {"answered": [1.0, 0.5, 0.2], "refused": [0.0, 0.5, 0.8], "samples": [10, 30, 5]},
        index=["m~r1", "m~r2", "x"],
    )
    facts = pd.DataFrame({"model": ["m~r1", "x"], "status": ["ok", "ok"],
                          "completion_tokens": [4, 9]})  # fmt: skip
    usage = UsageInputs(pa.Table.from_pandas(facts), shares, {"m~r2": "no reasoning"})
    inputs = TableInputs(_set_metrics({"m~r1": 0.5, "m~r2": 0.7, "x": 0.6}), usage=usage)
    collapsed = collapse_inputs(inputs, repeat_plan(SET_MODELS))
    pooled = collapsed.usage.shares
    # (10 x 1.0 + 30 x 0.5) / 40 answered; x unchanged.
    assert pooled.loc["m", "answered"] == pytest.approx(0.625)
    assert pooled.loc["m", "samples"] == 40 and pooled.loc["x", "answered"] == 0.2
    assert collapsed.usage.mode_flags == {"m": "no reasoning"}
    assert collapsed.tokens == {"m": 4.0, "x": 9.0}
