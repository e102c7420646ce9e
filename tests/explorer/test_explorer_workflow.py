"""End-to-end: the shared demo run stamps its outputs and builds an explorer page per model;
headless Chromium opens a page, filters it, and the drawn boxes and intervals sit on the
pixels of the coordinates the scorer used."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser import Browser, require_chromium
from demo_fixtures import CLEAN, DEMO_MODELS, PROSE, demo_model_names, write_demo_config
from PIL import Image
from workflow_runner import run_snakemake

from dualcog.scoring import box_iou, match_classes
from dualcog.scoring.intervals import clip_predicted, gold_array
from dualcog.stamp import parquet_stamp, read_stamp, stamp_digest

# Snakemake runs, and a headless Chromium opens the pages.
pytestmark = [pytest.mark.workflow, pytest.mark.integration]

SIM = PROSE  # the model whose page the browser opens
GOLD = (0, 200, 83)  # explorer.css --gold
PRED = (255, 0, 255)  # --pred
FALSE_POSITIVE = (255, 109, 0)  # --fp


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    with Browser() as opened:
        yield opened


def _page(demo_workflow: Path, model: str, hash_: str = "") -> str:
    return (demo_workflow / "results" / "explorer" / f"{model}.html").as_uri() + hash_


def _open(browser: Browser, url: str) -> None:
    browser.open("about:blank")
    browser.open(url)
    browser.wait_for("document.body.dataset.rendered")
    _settle(browser)


def _settle(browser: Browser) -> None:
    """Let local thumbnails in view decode before a screenshot."""
    browser.evaluate("new Promise(done => setTimeout(done, 400))")


def test_every_output_carries_the_stamp(demo_workflow: Path) -> None:
    results = demo_workflow / "results"
    stamp = read_stamp(results / "stamp.json")
    models = demo_model_names()
    assert set(stamp["models"]) == models
    assert stamp["git"] and len(stamp["git"]["commit"]) == 40  # the repo is a checkout
    assert parquet_stamp(results / "metrics" / "metrics.parquet") == stamp
    for name in ("image_main", "video_main", "audit", "audit_gains", "overall"):
        assert read_stamp(results / "tables" / f"{name}.stamp.json") == stamp
        for fmt in ("md", "tex", "html"):  # the formats this run writes besides CSV
            text = (results / "tables" / f"{name}.{fmt}").read_text()
            if fmt != "html":  # the page shows the stamp as a table of its own
                assert f"dualcog stamp {stamp_digest(stamp)}: " in text
            assert stamp_digest(stamp) in text
            assert stamp["git"]["commit"][:12] in text and stamp["data"]["digest"] in text
    leaderboard = (results / "leaderboard.html").read_text()
    assert stamp["git"]["commit"][:12] in leaderboard and stamp["data"]["digest"] in leaderboard
    for model in models:
        page = (results / "explorer" / f"{model}.html").read_text()
        assert stamp["models"][model]["digest"] in page
        assert not any(stamp["models"][o]["digest"] in page for o in models - {model})
        assert (results / "explorer" / "data" / model / "c00000.js").is_file()


def test_page_is_offline_and_filters_by_hash(demo_workflow: Path, browser: Browser) -> None:
    page = (demo_workflow / "results" / "explorer" / f"{SIM}.html").read_text()
    # Nothing fetched from a network (the SVG namespace the script creates elements in is a
    # name, never fetched).
    page = page.replace('"http://www.w3.org/2000/svg"', "")
    assert "http://" not in page and "https://" not in page
    _open(browser, _page(demo_workflow, SIM, "#task=atomic_behavior&outcome=neither"))
    assert browser.errors == []
    state = browser.evaluate(
        "[document.querySelector('select[name=task]').value,"
        " document.querySelector('select[name=outcome]').value,"
        " Array.from(document.querySelectorAll('#cards article')).map(a => a.className)]"
    )
    assert state[:2] == ["atomic_behavior", "neither"]
    assert state[2] and all(c == "card video" for c in state[2])


def test_pager_moves_through_pages(demo_workflow: Path, browser: Browser) -> None:
    _open(browser, _page(demo_workflow, SIM))
    assert "showing 1–20" in browser.evaluate("document.getElementById('summary').textContent")
    before = browser.evaluate("document.body.dataset.rendered")
    browser.evaluate(
        "Array.from(document.querySelectorAll('#pager button'))"
        ".find(b => b.textContent.startsWith('next')).click()"
    )
    browser.wait_for(f"document.body.dataset.rendered !== {json.dumps(before)}")
    assert browser.evaluate("location.hash") == "#page=2"
    assert "showing 21–40" in browser.evaluate("document.getElementById('summary').textContent")
    assert browser.evaluate("document.querySelectorAll('#cards article').length") == 20


def _apply(browser: Browser, name: str, value: str) -> None:
    before = browser.evaluate("document.body.dataset.rendered")
    browser.evaluate(
        f"(() => {{ const s = document.querySelector('select[name={name}]'); s.value = "
        f"{json.dumps(value)}; s.dispatchEvent(new Event('change', {{bubbles: true}})); }})()"
    )
    browser.wait_for(f"document.body.dataset.rendered !== {json.dumps(before)}")


def test_filter_compare_and_screenshot(
    demo_workflow: Path, browser: Browser, tmp_path: Path
) -> None:
    _open(browser, _page(demo_workflow, SIM))
    total = browser.evaluate("document.getElementById('summary').textContent")
    _apply(browser, "task", "future_observation")
    assert "task=future_observation" in browser.evaluate("location.hash")
    summary = browser.evaluate("document.getElementById('summary').textContent")
    assert summary.startswith("16 of ") and summary != total
    counts = browser.evaluate(
        "[document.querySelectorAll('#cards article.card.image').length,"
        " document.querySelectorAll('#cards rect.box.gold').length,"
        " document.querySelectorAll('#cards rect.box.pred').length]"
    )
    assert counts[0] == 16 and counts[1] == 16 and counts[2] > 0
    _settle(browser)
    image_shot = browser.screenshot(tmp_path / "image.png")
    _apply(browser, "task", "landmark_visibility")
    assert browser.evaluate("document.querySelectorAll('#cards svg.timeline').length") == 16
    assert browser.evaluate("document.querySelectorAll('#cards .strip svg.frame image').length") > 0
    browser.evaluate("document.querySelector('#cards article').scrollIntoView()")
    _settle(browser)
    video_shot = browser.screenshot(tmp_path / "video.png")
    _apply(browser, "compare", "oracle")
    pairs = browser.evaluate(
        "Array.from(document.querySelectorAll('.pair-row')).map(r =>"
        " Array.from(r.querySelectorAll('article')).map(a => a.dataset.model + ' ' +"
        " a.dataset.sample))"
    )
    assert len(pairs) == 16
    assert all(a.split()[0] == SIM and b.split()[0] == "oracle" for a, b in pairs)
    assert all(a.split()[1] == b.split()[1] for a, b in pairs)  # the same sample
    assert browser.errors == []
    with Image.open(image_shot) as image, Image.open(video_shot) as video:
        assert image.size == video.size == (1400, 1000)
        both = Image.new("RGB", (1400, 2000), "white")
        both.paste(image, (0, 0))
        both.paste(video, (0, 1000))
        both.save(tmp_path / "explorer.png")
        target = os.environ.get("DUALCOG_SCREENSHOT")
        if target:  # docs/img/explorer.png is refreshed this way
            small = both.resize((1050, 1500), Image.Resampling.LANCZOS)
            small.quantize(256, method=Image.Quantize.FASTOCTREE).save(target, optimize=True)


def _near(pixel, colour, tolerance=60) -> bool:
    return sum((int(a) - int(b)) ** 2 for a, b in zip(pixel[:3], colour, strict=True)) ** 0.5 < (
        tolerance
    )


def _line_pixel(shot: Image.Image, x: float, y: float, colour, vertical: bool) -> bool:
    """The line colour within ±1 px across a 3 px line centred on (x, y)."""
    for d in (-1, 0, 1):
        px, py = (x + d, y) if vertical else (x, y + d)
        if _near(shot.getpixel((round(px), round(py))), colour):
            return True
    return False


def _read(demo_workflow: Path, kind: str, model: str = SIM) -> pd.DataFrame:
    frame = pd.read_parquet(demo_workflow / "results" / kind / f"{model}.parquet")
    return frame[frame["parse"] == "compatible"] if "parse" in frame else frame


def test_drawn_boxes_are_the_scored_coordinates(
    demo_workflow: Path, browser: Browser, tmp_path
) -> None:
    samples = pd.read_parquet(demo_workflow / "results" / "benchmark" / "samples.parquet")
    parsed, scores = _read(demo_workflow, "parsed"), _read(demo_workflow, "scores")
    rows = samples.merge(parsed, on=["sample_id", "task"]).merge(
        scores[["sample_id", "iou"]], on="sample_id"
    )
    rows = rows[(rows["task"] == "landmark_position") & rows["bbox_valid"].astype(bool)]
    gold_boxes, pred_boxes = np.stack(rows["gold_bbox"]), np.stack(rows["bbox"])
    # These are the coordinates the score came from: the scorer's IoU gives the stored value.
    np.testing.assert_allclose(box_iou(pred_boxes, gold_boxes), rows["iou"].to_numpy())
    apart = np.abs(gold_boxes - pred_boxes).min(axis=1)  # every edge well apart
    pick = int(np.argmax(apart))
    sample_id, gold, pred = rows["sample_id"].iloc[pick], gold_boxes[pick], pred_boxes[pick]
    assert apart[pick] > 0.05
    _open(browser, _page(demo_workflow, SIM, "#task=landmark_position"))
    left, top, width, height = browser.evaluate(
        f'(() => {{ const s = document.querySelector(\'article[data-sample="{sample_id}"] '
        "svg[data-role=target]'); s.scrollIntoView({block: 'center'});"
        " const r = s.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()"
    )
    _settle(browser)
    shot = Image.open(browser.screenshot(tmp_path / "boxes.png")).convert("RGB")
    for box, colour in ((gold, GOLD), (pred, PRED)):
        x1, y1, x2, y2 = (left + box[0] * width, top + box[1] * height,
                          left + box[2] * width, top + box[3] * height)  # fmt: skip
        ym, xm = (y1 + y2) / 2, (x1 + x2) / 2
        for x, y, vertical in ((x1, ym, True), (x2, ym, True), (xm, y1, False), (xm, y2, False)):
            assert _line_pixel(shot, x, y, colour, vertical), (sample_id, box, x, y)
        # Away from the edges (6 px inside the corner) the line colour is absent.
        assert not _near(shot.getpixel((round(x1 + 6), round(y1 + 6))), colour)


def test_drawn_intervals_are_the_scored_coordinates(
    demo_workflow: Path, browser: Browser, tmp_path
):
    samples = pd.read_parquet(demo_workflow / "results" / "benchmark" / "samples.parquet")
    parsed, scores = _read(demo_workflow, "parsed"), _read(demo_workflow, "scores")
    rows = samples.merge(parsed, on=["sample_id", "task"]).merge(
        scores[["sample_id", "task", "interval_tp", "interval_fp"]], on=["sample_id", "task"]
    )
    rows = rows[(rows["task"] == "landmark_visibility") & rows["intervals_valid"].astype(bool)]
    picked = None
    for row in rows.itertuples():
        gold = gold_array(row.gold_visible_intervals)
        pred, invalid = clip_predicted(row.visible_intervals, row.duration_sec)
        counts = match_classes({"visible": gold}, {"visible": pred}, invalid)
        # The scorer, fed these coordinates, gives the stored counts.
        assert (counts.tp, counts.fp) == (row.interval_tp, row.interval_fp), row.sample_id
        if picked is None and counts.tp >= 1 and len(pred):
            picked = (row.sample_id, gold, pred, row.duration_sec)
    assert picked, "no visibility sample with a matched interval"
    sample_id, gold, pred, duration = picked
    _open(browser, _page(demo_workflow, SIM, "#task=landmark_visibility"))
    geometry = browser.evaluate(
        f'(() => {{ const s = document.querySelector(\'article[data-sample="{sample_id}"] '
        "svg.timeline'); s.scrollIntoView({block: 'center'}); const r = s.getBoundingClientRect();"
        " return [r.left, r.top, r.width / s.viewBox.baseVal.width, +s.dataset.left,"
        " +s.dataset.track, +s.dataset.duration,"
        " Array.from(s.querySelectorAll('rect.pred')).map(e => e.classList.contains('fp'))]; })()"
    )
    left, top, k, lane_left, track, drawn_duration, false_positive = geometry
    assert drawn_duration == pytest.approx(duration)
    _settle(browser)
    shot = Image.open(browser.screenshot(tmp_path / "timeline.png")).convert("RGB")

    def x_of(t: float) -> float:
        return left + (lane_left + t / duration * track) * k

    # One lane (visibility): gold bar centred 9 px below the top, predicted bar 21 px.
    bars = [(g, top + 9 * k, GOLD) for g in gold]
    bars += [(p, top + 21 * k, FALSE_POSITIVE if fp else PRED)
             for p, fp in zip(pred, false_positive, strict=True)]  # fmt: skip
    checked = {GOLD: 0, PRED: 0, FALSE_POSITIVE: 0}
    for (start, end), y_mid, colour in bars:
        inside = [x_of(start) + 3, x_of(end) - 3]
        if end - start < 0.3 or (
            colour == GOLD
            and not any(_near(shot.getpixel((round(x), round(y_mid))), GOLD) for x in inside)
        ):
            continue  # too short to probe, or a missed gold bar (drawn hollow)
        for x in inside:
            assert _near(shot.getpixel((round(x), round(y_mid))), colour), (sample_id, start, x)
        outside = x_of(start) - 4
        assert not _near(shot.getpixel((round(outside), round(y_mid))), colour)
        checked[colour] += 1
    # The sample has a match: at least one filled gold bar and one predicted bar were probed.
    assert checked[GOLD] >= 1 and checked[PRED] >= 1, checked


def test_changing_one_model_changes_only_its_stamp(demo_copy: Path) -> None:
    results = demo_copy / "results"
    before = read_stamp(results / "stamp.json")
    pages = {name: results / "explorer" / f"{name}.html" for name in demo_model_names()}
    mtimes = {name: path.stat().st_mtime_ns for name, path in pages.items()}
    name = CLEAN
    write_demo_config(
        demo_copy, [{**m, "skill": 0.4} if m["name"] == name else m for m in DEMO_MODELS]
    )
    # What the assertions read (not the tables, plots and leaderboard: 5 CPU-s more).
    targets = [str(p.relative_to(demo_copy)) for p in pages.values()]
    run_snakemake(demo_copy, "results/stamp.json", "results/metrics/metrics.parquet", *targets)
    after = read_stamp(results / "stamp.json")
    assert after["models"][name]["digest"] != before["models"][name]["digest"]
    for other in demo_model_names() - {name}:
        assert after["models"][other] == before["models"][other]
        assert pages[other].stat().st_mtime_ns == mtimes[other]  # its explorer not rebuilt
    assert pages[name].stat().st_mtime_ns != mtimes[name]
    assert after["models"][name]["digest"] in pages[name].read_text()
    assert parquet_stamp(results / "metrics" / "metrics.parquet") == after
