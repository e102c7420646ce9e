"""Usage, cost, outcome shares and the estimate through real Snakemake runs (loopback API).

The estimate sends nothing; after part of the run is cached it lists exactly the requests the
rest of the run then sends; the usage table (every format) and the leaderboard carry the
tokens, the dollars and the outcome shares computed by hand below.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd
import pytest
from browser import Browser, require_chromium
from loopback_server import LoopbackServer, Reply, completion
from workflow_runner import REPO, loopback_model, run_snakemake, write_config

# Real Snakemake runs against a loopback server; the explorer filter in Chromium.
pytestmark = [pytest.mark.workflow, pytest.mark.integration]

TASKS = ["landmark_position", "behavior"]
MODEL = "loop-vlm-Instant"
# Image answers: 1000 prompt + 100 completion tokens; behavior answers are cut off (length).
IMAGE_USAGE = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
VIDEO_USAGE = {"prompt_tokens": 3000, "completion_tokens": 200, "total_tokens": 3200}


def answer(body: dict, count: int) -> Reply:
    if '"answers"' in body["messages"][0]["content"]:
        reply = completion('{"answers":[{"option_id":"A","intervals_sec":[[0.0,1.0]]}]}')
        reply["choices"][0]["finish_reason"] = "length"
        reply["usage"] = VIDEO_USAGE
    else:
        reply = completion('{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,0.5,0.5]}')
        reply["usage"] = IMAGE_USAGE
    return 200, reply, {}


def configure(workdir: Path, api_base: str, **extra: object) -> None:
    write_config(
        workdir,
        {
            "data_root": str(REPO / "resources" / "demo"),
            "tasks": TASKS,
            "tables": {"formats": ["csv", "md", "tex", "html"]},
            "models": [
                loopback_model(
                    MODEL,
                    api_base,
                    api_key="EMPTY",
                    video_mode="frames",
                    video_frames=2,
                    concurrency=4,
                    estimated_tokens_per_request=500,
                    prices={"input": 2.0, "output": 8.0},
                    **extra,
                ),
                {"name": "oracle", "backend": "oracle"},
            ],
        },
    )


def read_estimate(workdir: Path) -> dict[str, dict[str, str]]:
    with open(workdir / "results" / "estimate" / "estimate.csv", encoding="utf-8") as handle:
        return {row["task"]: row for row in csv.DictReader(handle) if row["model"] == MODEL}


def test_estimate_then_run_usage_and_outcomes(tmp_path: Path) -> None:
    with LoopbackServer(answer) as server:
        configure(tmp_path, server.api_base)
        first = run_snakemake(tmp_path, "estimate")
        assert server.requests == 0  # the estimate sends nothing
        estimate = read_estimate(tmp_path)
        assert {t: int(r["to_send"]) for t, r in estimate.items()} == {
            "landmark_position": 16,
            "behavior": 16,
        }
        assert estimate["behavior"]["source"] == "estimated_tokens_per_request"
        assert f"{MODEL}: 32 of 32 requests to send (0 cached), ~16,000 tokens" in first.stdout

        # Part of the run: the image task only (the model's `tasks`: the one job of the API
        # runs answers every task they have), then the estimate again.
        configure(tmp_path, server.api_base, tasks=["landmark_position"])
        run_snakemake(tmp_path, f"results/responses/{MODEL}/landmark_position.parquet")
        assert server.requests == 16
        configure(tmp_path, server.api_base)
        run_snakemake(tmp_path, "estimate")
        assert server.requests == 16
        estimate = read_estimate(tmp_path)
        assert int(estimate["landmark_position"]["cached"]) == 16
        assert int(estimate["landmark_position"]["to_send"]) == 0
        behavior = estimate["behavior"]
        assert int(behavior["to_send"]) == 16 and "other tasks" in behavior["source"]
        # 16 requests at the measured 1000 + 100 tokens: 17,600 tokens, 16 x $0.0028
        assert float(behavior["tokens"]) == 17600
        assert abs(float(behavior["cost_usd_low"]) - 0.0448) < 1e-9

        # The rest of the run, up to what is read below: the tables (usage in every format),
        # the leaderboard and this model's explorer page; not the plots or the oracle's page.
        run_snakemake(
            tmp_path, "tables", "results/leaderboard.html", f"results/explorer/{MODEL}.html"
        )
        assert server.requests - 16 == int(behavior["to_send"])  # what the estimate said

    tables = tmp_path / "results" / "tables"
    for fmt in ("csv", "md", "tex", "html"):
        assert (tables / f"usage.{fmt}").is_file()
    usage = pd.read_csv(tables / "usage.csv", index_col="run")
    total = usage.loc[MODEL]
    # 16 x 1000 + 16 x 3000 prompt, 16 x 100 + 16 x 200 completion tokens; at $2 / $8 per M
    assert (total["Requests"], total["Prompt tokens"], total["Completion tokens"]) == (
        32,
        64000,
        4800,
    )
    assert abs(total["Cost (USD)"] - 0.1664) < 1e-9
    assert pd.isna(usage.loc["oracle", "Requests"]) and pd.isna(usage.loc["oracle", "Cost (USD)"])
    markdown = (tables / "usage.md").read_text()
    assert "| loop-vlm-Instant | all | 32 | 32 | 64,000 | 4,800 | – | – | 0.1664 |" in markdown
    assert "| oracle | all | – | – | – | – | – | – | – |" in markdown
    assert "0.1664" in (tables / "usage.tex").read_text()
    assert "0.1664" in (tables / "usage.html").read_text()

    page = (tmp_path / "results" / "leaderboard.html").read_text()
    assert "Usage and outcomes" in page and "Cost (USD)" in page and "Truncated %" in page
    aggregate_at = page.index('<section class="view" data-view="aggregate"')
    usage_at = page.index('<section class="view" data-view="usage"')
    usage_view = page[usage_at:]
    row = re.search(r'<tr data-model="loop-vlm-Instant".*?</tr>', usage_view, re.S).group(0)
    cells = re.findall(r'<span class="v">([^<]*)</span>', row)
    # answered 50.0 (the image task), truncated 50.0 (behavior), others 0.0
    assert cells[-6:] == ["50.0", "50.0", "0.0", "0.0", "0.0", "0.0"]
    aggregate = page[aggregate_at:usage_at]
    row = re.search(r'<tr data-model="loop-vlm-Instant".*?</tr>', aggregate, re.S).group(0)
    assert re.findall(r'<span class="v">([^<]*)</span>', row)[-1] == "0.17"  # $0.1664, 2 places

    # The explorer filters by outcome class: the 16 truncated samples are the behavior ones.
    require_chromium()
    explorer = (tmp_path / "results" / "explorer" / f"{MODEL}.html").as_uri()
    with Browser() as browser:
        browser.open(explorer + "#result=truncated")
        browser.wait_for("document.body.dataset.rendered")
        summary = browser.evaluate("document.getElementById('summary').textContent")
        assert summary.startswith("16 of 32 samples match")
        classes = browser.evaluate(
            "Array.from(document.querySelectorAll('#cards article')).map(a => a.className)"
        )
        assert classes and all(c == "card video" for c in classes)
        assert browser.evaluate("document.querySelector('select[name=result]').value") == (
            "truncated"
        )
        assert browser.errors == []


def test_a_cost_limit_fails_the_job_and_a_raised_limit_sends_only_the_rest(tmp_path: Path):
    target = f"results/responses/{MODEL}/landmark_position.parquet"
    with LoopbackServer(answer) as server:
        # An image answer costs 1000 x $2 + 100 x $8 per M = $0.0028; the configured estimate
        # is 500 tokens at the dearer $8/M = $0.004. A request goes while spent + $0.004
        # <= $0.03: after 9 answers (0.0252 + 0.004 = 0.0292) yes, after 10 (0.032) no.
        # The image task alone (the API runs' one job answers every task they have).
        configure(tmp_path, server.api_base, cost_limit=0.03, tasks=["landmark_position"])
        failed = run_snakemake(tmp_path, target, check=False)
        assert failed.returncode != 0
        assert server.requests == 10
        log = failed.stderr
        assert (
            f"{MODEL}/landmark_position: spending limit reached (cost_limit $0.0300: $0.0280 "
            "spent): 6 of 16 requests not sent (error_type budget_exhausted)"
        ) in re.sub(r"\s+", " ", log)
        assert not (tmp_path / target).exists()
        configure(tmp_path, server.api_base, cost_limit=1.0, tasks=["landmark_position"])
        run_snakemake(tmp_path, target)
        assert server.requests == 16 and server.resent_after_answer == []
    frame = pd.read_parquet(tmp_path / target)
    assert (frame.status == "ok").all() and len(frame) == 16
