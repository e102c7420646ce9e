"""The leaderboard page rendered from hand-made metrics (the browser test is end-to-end)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from dualcog.errors import DataError
from dualcog.tables.inputs import INTERVAL_COLUMNS, TableInputs, load_inputs, read_intervals
from dualcog.tables.leaderboard import build_views, explorer_link, render_leaderboard
from dualcog.tasks import IMAGE_TASKS

MODELS = [
    {"name": "vlm a/b", "group": "proprietary", "backend": "openai"},
    {"name": "rec", "group": "proprietary", "backend": "replay"},
    {"name": "oracle", "group": "baseline", "backend": "oracle"},
]


def _row(model, task, parse, metric, value, n=10):
    return {"model": model, "task": task, "parse": parse, "stratum": "all", "metric": metric,
            "value": value, "n": n}  # fmt: skip


def _metrics() -> pd.DataFrame:
    rows = []
    for model, value in (("vlm a/b", 0.5), ("rec", 0.7), ("oracle", 1.0)):
        for task in IMAGE_TASKS:
            rows.append(_row(model, task, "compatible", "option_acc", value))
            rows.append(_row(model, task, "strict", "option_acc", value / 2))
            rows.append(_row(model, task, "compatible", "response_rate", 1.0))
            rows.append(_row(model, task, "compatible", "bbox_acc50", value))
            rows.append(_row(model, task, "legacy", "bbox_acc50", value / 4))
        rows.append(_row(model, "overall", "compatible", "overall_score", value, 2))
    return pd.DataFrame(rows)


def _intervals(metrics: pd.DataFrame) -> pd.DataFrame:
    main = metrics[metrics["metric"] == "option_acc"].copy()
    return main.assign(
        ci_low=main["value"] - 0.1, ci_high=main["value"] + 0.1, n_clusters=6, n_boot=1000,
        seed=1, level=0.95,
    )[list(INTERVAL_COLUMNS)]  # fmt: skip


def test_explorer_links_quote_the_model_name() -> None:
    assert explorer_link("vlm a/b", "landmark_position") == (
        "explorer/vlm%20a%2Fb.html#task=landmark_position"
    )
    assert explorer_link("oracle") == "explorer/oracle.html"


def test_page_has_views_parses_links_and_no_external_resources() -> None:
    metrics = _metrics()
    page = render_leaderboard(TableInputs(metrics, tokens={"rec": 42.0}), MODELS)
    assert page.startswith("<!DOCTYPE html>") and "<script>" in page and "<style>" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # opens offline
    for view in ("image", "audit", "aggregate"):
        assert f'data-view="{view}"' in page
    assert 'data-view="video"' not in page  # no video metrics, no empty view
    assert 'data-parse="compatible"' in page and 'data-parse="strict"' in page
    assert 'href="explorer/vlm%20a%2Fb.html#task=landmark_position">50.0</a>' in page
    assert ">25.0</a>" in page  # the strict variant holds the strict values
    assert '<span class="badge">replayed</span>' in page
    assert "<b>" not in page  # marks are classes here, styled by the inlined CSS
    assert 'class="num best"' in page and 'class="num second"' in page
    assert ">42</span>" in page  # mean output tokens in the aggregate view
    assert "Show 95% intervals" not in page and "CI [" not in page
    assert "Provenance" not in page


def test_a_run_off_the_main_tables_shows_only_in_the_audit_view() -> None:
    base = _metrics()
    metrics = pd.concat([base, base[base["model"] == "rec"].assign(model="rec-T")])
    models = [*MODELS, {"name": "rec-T", "group": "proprietary", "backend": "replay",
                        "main_table": False}]  # fmt: skip
    views = {view.key: view for view in build_views(TableInputs(metrics), models)}
    for key in ("image", "aggregate"):
        for variant in views[key].variants:
            assert "rec-T" not in variant.table.frame.index and "rec" in variant.table.frame.index
    assert "rec-T" in views["audit"].variants[0].table.frame.index
    page = render_leaderboard(TableInputs(metrics), models)
    # rec: image (compatible, strict), audit, aggregate; rec-T: the audit only.
    assert page.count('data-model="rec"') == 4 and page.count('data-model="rec-T"') == 1


def test_intervals_and_stamp_are_rendered_when_given() -> None:
    metrics = _metrics()
    inputs = TableInputs(
        metrics, intervals=_intervals(metrics), stamp={"git": {"commit": "abc123def4567890"}}
    )
    page = render_leaderboard(inputs, MODELS)
    assert "Show 95% intervals" in page
    assert "95% CI [40.0, 60.0] (6 clusters, 1000 resamples)" in page
    assert '<span class="ci">[40.0, 60.0]</span>' in page
    assert '<th scope="row">Git commit</th><td>abc123def456</td>' in page


def test_bad_intervals_file_names_file_and_field(tmp_path) -> None:
    path = tmp_path / "intervals.parquet"
    _intervals(_metrics()).drop(columns=["ci_high"]).to_parquet(path)
    with pytest.raises(DataError, match=r"intervals\.parquet.*ci_high"):
        read_intervals(path)
    metrics_path = tmp_path / "metrics.parquet"
    metrics_path.write_text("not parquet")
    with pytest.raises(DataError, match="metrics.parquet"):
        load_inputs(metrics_path)
