"""Explorer internals: matches against hand-computed cases, box placement, page and chunks;
cards as headless Chromium draws them from the chunks' sample cards and records."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pytest
from browser import Browser, require_chromium
from PIL import Image
from score_fixtures import (
    behavior_parsed,
    behavior_sample,
    image_parsed,
    image_sample,
    parsed_frame,
    samples_frame,
    visibility_parsed,
    visibility_sample,
)

from dualcog.explorer.matches import ExplorerError, behavior_matches, visibility_matches
from dualcog.explorer.media import (
    MAX_FRAMES,
    PLAIN_THUMB_SIZE,
    THUMB_SIZE,
    grid_times,
    image_thumbnail,
    prepare_explorer_media,
    shown_images,
    video_frames,
)
from dualcog.explorer.page import (
    CHUNK_BYTES_LIMIT,
    CHUNK_SIZE,
    PAGE_BYTES_LIMIT,
    UNSHOWN_KEYS,
    task_filters,
    write_explorer,
    write_sample_cards,
)
from dualcog.explorer.records import MediaIndex, sample_cards, sample_records
from dualcog.media.store import UnreadableMedia
from dualcog.outcomes import request_outcomes
from dualcog.schemas import PARSED, RESPONSES, SAMPLES, to_table
from dualcog.scoring import SCORES, score_samples


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    with Browser() as opened:
        yield opened


def _scores(samples: pd.DataFrame, parsed: pd.DataFrame) -> pd.DataFrame:
    """The compatible parse's SCORES of frames, as a frame (some tests edit it)."""
    tables = to_table(samples, SAMPLES), to_table(parsed, PARSED)
    return score_samples(*tables, ("compatible",)).to_pandas()


def _drawn(
    browser: Browser, folder: Path, cards, records, model: str = "m", others=()
) -> list[str]:
    """The cards of `records` on their samples' `cards` as the page draws them in Chromium
    (one page of them, the browser's serialization of each drawn card), with no script
    errors."""
    write_sample_cards(cards, folder / "samples")
    files = write_explorer(model, records, folder / "page.html", folder / "data" / model,
                           all_models=[model, *others], stamp=None)  # fmt: skip
    browser.open("about:blank")
    browser.errors.clear()
    browser.open(files.page.as_uri())
    browser.wait_for("document.body.dataset.rendered")
    cards = browser.evaluate(
        "Array.from(document.querySelectorAll('#cards > *')).map(e => e.outerHTML)"
    )
    # Thumbnails and frames these cases name are not on disk: only those loads may fail.
    assert [e for e in browser.errors if "ERR_FILE_NOT_FOUND" not in e] == []
    return cards


def _records(samples, parsed, scores, responses, media):
    """`sample_records` on the tables as the job reads them (typed Arrow), with the outcome
    classes the `parse` job writes for these rows."""
    responses, parsed = to_table(responses, RESPONSES), to_table(parsed, PARSED)
    outcomes = request_outcomes(responses, parsed)
    return sample_records(to_table(samples, SAMPLES), parsed,
                          to_table(scores, SCORES), responses, media, outcomes)  # fmt: skip


def _cards(samples, media):
    """`sample_cards` on the samples as the `explorer_samples` job reads them."""
    return sample_cards(to_table(samples, SAMPLES), media)


def test_visibility_matches_hand_computed() -> None:
    # gold [0,2] vs pred [0.5,2]: 1.5 / 2 = 0.75 (match); gold [3,5] vs pred [2.9,4]:
    # 1 / 2.1 = 0.476 (overlap below 0.5: missed); pred [6,7] overlaps nothing (false positive);
    # pred [9, 12] ends past D + 1 = 9: invalid (a false positive that is not drawn).
    match, counts = visibility_matches(
        [[0, 2], [3, 5]], [[0.5, 2], [2.9, 4], [6, 7], [9, 12]], duration=8.0
    )
    assert match.matched == [(0, 0, pytest.approx(0.75))]
    assert match.missed == [1]
    assert match.false_positive == [1, 2]
    assert match.overlap == {0: pytest.approx(0.75), 1: pytest.approx(1 / 2.1)}
    assert match.invalid_pred == 1
    assert (counts.tp, counts.fp, counts.fn) == (1, 3, 1)


def test_visibility_prediction_is_clipped_as_scored() -> None:
    match, _ = visibility_matches([[1, 4]], [[1, 4.5]], duration=4.0)  # ends within D + 1 s
    assert match.pred == [(1.0, 4.0)]
    assert match.matched == [(0, 0, 1.0)]


def test_behavior_matches_split_levels_and_merge_repeats() -> None:
    options = [
        {"option_id": "A", "level": "atomic"},
        {"option_id": "B", "level": "composite"},
        {"option_id": "C", "level": "atomic"},
    ]
    gold = [
        {"option_id": "A", "level": "atomic", "intervals": [[0, 2], [4, 6]]},
        {"option_id": "B", "level": "composite", "intervals": [[0, 6]]},
    ]
    answers = [
        {"option_id": "A", "intervals": [[0, 2]]},
        {"option_id": "A", "intervals": [[4.5, 6]]},  # a repeat: merged into class A
        {"option_id": "C", "intervals": [[1, 2]]},  # not gold: a false-positive class
    ]
    levels = behavior_matches(options, gold, answers, duration=6.0)
    composite = {c.label: c for c in levels["composite"]}
    atomic = {c.label: c for c in levels["atomic"]}
    assert composite["B"].missed == [0] and composite["B"].pred == []
    assert atomic["A"].matched == [(0, 0, 1.0), (1, 1, pytest.approx(0.75))]
    assert atomic["C"].gold == [] and atomic["C"].false_positive == [0]


def _image_case():
    fo = image_sample(
        "fo1",
        task="future_observation",
        gold_option="B",
        gold_bbox=(0.1, 0.1, 0.3, 0.3),
        candidates={"A": (0.5, 0.5, 0.9, 0.9), "B": (0.1, 0.1, 0.3, 0.3),
                    "C": (0, 0, 1, 1), "D": (0, 0, 1, 1)},
    )  # fmt: skip
    fo["media"] = [{"role": "reference", "path": "r", "resolved_path": "/r.jpg"}] + [
        {"role": f"candidate_{o}", "path": o, "resolved_path": f"/{o}.jpg"} for o in "ABCD"
    ]
    lp = image_sample("lp1", gold_option="A", gold_bbox=(0.2, 0.2, 0.6, 0.6))
    lp["media"] = [
        {"role": "reference", "path": "r", "resolved_path": "/r.jpg"},
        {"role": "target", "path": "t", "resolved_path": "/t.jpg"},
    ]
    samples = samples_frame([fo, lp])
    parsed = parsed_frame(
        [
            image_parsed("fo1", "compatible", ["A"], (0.5, 0.5, 0.8, 0.9),
                         task="future_observation"),
            image_parsed("lp1", "compatible", ["A"], (0.2, 0.2, 0.6, 0.5)),
        ]
    )  # fmt: skip
    return samples, parsed


def _media(paths) -> MediaIndex:
    return MediaIndex({p: (f"media/{p.strip('/')}", 320, 240) for p in paths}, {})


def _responses(ids, task_of) -> pd.DataFrame:
    return pd.DataFrame(
        {"sample_id": ids, "task": [task_of[i] for i in ids], "raw_text": ["{}"] * len(ids),
         "status": ["ok"] * len(ids), "error_type": [None] * len(ids)}
    )  # fmt: skip


def test_future_observation_boxes_go_on_gold_and_chosen_candidates() -> None:
    samples, parsed = _image_case()
    scores = _scores(samples, parsed)
    media = _media(["/r.jpg", "/t.jpg", "/A.jpg", "/B.jpg", "/C.jpg", "/D.jpg"])
    tasks = dict(zip(samples.sample_id, samples.task, strict=True))
    fo, lp = _records(samples, parsed, scores, _responses(["fo1", "lp1"], tasks), media)
    fo_card, lp_card = _cards(samples, media)
    # The model's boxes go on its sample card's images, by position.
    assert len(fo["boxes"]) == len(fo_card["images"]) and len(lp["boxes"]) == len(lp_card["images"])
    boxes = {im["role"]: b for im, b in zip(fo_card["images"], fo["boxes"], strict=True)}
    assert boxes["reference"] == [] and boxes["candidate_C"] == []
    assert boxes["candidate_B"] == [{"kind": "gold", "xyxy": [0.1, 0.1, 0.3, 0.3]}]
    assert boxes["candidate_A"] == [
        {"kind": "scored-against", "xyxy": [0.5, 0.5, 0.9, 0.9]},
        {"kind": "pred", "xyxy": [0.5, 0.5, 0.8, 0.9]},
    ]
    # IoU is the scorer's: against the chosen candidate A, 0.3*0.4 / (0.4*0.4) = 0.75.
    assert fo["iou"] == pytest.approx(0.75) and fo["bbox_hit"] and not fo["option_correct"]
    assert [o["id"] for o in fo_card["options"] if o["gold"]] == ["B"]
    assert fo["chosen"] == ["A"]
    assert fo["outcomes"] == {"future_observation": 2}  # right box only
    target = next(b for im, b in zip(lp_card["images"], lp["boxes"], strict=True)
                  if im["role"] == "target")  # fmt: skip
    assert [b["kind"] for b in target] == ["gold", "pred"]
    assert lp["iou"] == pytest.approx(0.75) and lp["outcomes"] == {"landmark_position": 3}


def _video_case():
    behavior = behavior_sample(
        "b1", {"A": "atomic", "B": "composite"},
        [("A", "atomic", [[0, 2]]), ("B", "composite", [[0, 6]])], True, duration=6.0,
    )  # fmt: skip
    visibility = visibility_sample("v1", 1, [[1, 3]], duration=6.0)
    for sample in (behavior, visibility):
        sample["media"] = [{"role": "video", "path": "v", "resolved_path": "/v.mp4"}]
    samples = samples_frame([behavior, visibility])
    parsed = parsed_frame(
        [
            behavior_parsed("b1", [("A", [[0, 2]]), ("B", [[3, 6]])], "compatible"),
            visibility_parsed("v1", 2, [[1, 3], [4, 5]], "compatible"),
        ]
    )
    return samples, parsed


def test_video_records_carry_the_scorers_matches_and_frames() -> None:
    samples, parsed = _video_case()
    scores = _scores(samples, parsed)
    media = MediaIndex({}, {"/v.mp4": ("v.jpg", [i * 0.5 for i in range(13)], 160, 120)})
    tasks = dict(zip(samples.sample_id, samples.task, strict=True))
    behavior, visibility = _records(samples, parsed, scores, _responses(["b1", "v1"], tasks), media)
    composite = behavior["levels"]["composite"]
    # B: gold [0,6] vs predicted [3,6]: tIoU 3/6 = 0.5, which matches (tIoU >= 0.5).
    assert composite["classes"][0]["matched"] == [(0, 0, 0.5)] and composite["tp"] == 1
    assert composite["classes"][0]["missed"] == [] and composite["set_exact"]
    atomic = behavior["levels"]["atomic"]
    assert atomic["classes"][0]["matched"] == [(0, 0, 1.0)] and atomic["tp"] == 1
    assert behavior["outcomes"] == {"composite_behavior": 3, "atomic_behavior": 3}
    assert [(f["file"], f["frame"], f["time"]) for f in behavior["strip"]] == [
        ("v.jpg", 0, 0.0), ("v.jpg", 6, 3.0)]  # fmt: skip
    assert {(f["frames"], f["width"], f["height"]) for f in behavior["strip"]} == {(13, 160, 120)}
    vis = visibility["levels"]["visibility"]
    assert vis["classes"][0]["false_positive"] == [1] and vis["tp"] == 1 and vis["fp"] == 1
    assert visibility["count"] == 2 and _cards(samples, media)[1]["gold_count"] == 1
    assert not visibility["count_correct"]
    assert visibility["outcomes"] == {"landmark_visibility": 2}


def test_stale_scores_are_refused() -> None:
    samples, parsed = _video_case()
    scores = _scores(samples, parsed)
    scores.loc[scores["task"] == "landmark_visibility", "interval_tp"] = 0
    tasks = dict(zip(samples.sample_id, samples.task, strict=True))
    with pytest.raises(ExplorerError, match="sample v1, landmark_visibility"):
        _records(samples, parsed, scores, _responses(["b1", "v1"], tasks),
                       MediaIndex({}, {}))  # fmt: skip
    # Each count the table holds is checked: false positives, missed, the tIoU sum.
    for column, task in (("interval_fp", "atomic_behavior"), ("interval_fn", "composite_behavior"),
                         ("tiou_sum", "landmark_visibility")):  # fmt: skip
        scores = _scores(samples, parsed)
        scores.loc[scores["task"] == task, column] += 1
        with pytest.raises(ExplorerError, match=f"{task}: .*{column}"):
            _records(samples, parsed, scores, _responses(["b1", "v1"], tasks), MediaIndex({}, {}))


def test_task_filters_accept_scored_tasks_and_families() -> None:
    filters = task_filters(["landmark_position", "self_position", "behavior"])
    assert filters["atomic_behavior"] == {"tasks": [2], "slot": "b"}
    assert filters["composite_behavior"] == {"tasks": [2], "slot": "a"}
    assert filters["position"] == {"tasks": [0, 1], "slot": "a"}
    assert "action_observation" not in filters
    assert filters["overall"] == {"tasks": [0, 1, 2], "slot": "ab"}


def test_page_sizes_at_paper_scale(tmp_path: Path) -> None:
    """The stated limits (docs/explorer.md) hold for a benchmark-sized synthetic run."""
    spec = importlib.util.spec_from_file_location(
        "explorer_scale", Path(__file__).parents[2] / "benchmarks" / "explorer_scale.py"
    )
    scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scale)
    samples, parsed, responses = scale.synthetic_run(np.random.default_rng(0))
    scores = _scores(samples, parsed)
    records = _records(samples, parsed, scores, responses, scale.media_index(samples))
    assert sum(r is not None for r in records) == 4096 + 2048
    files = write_explorer("m", records, tmp_path / "m.html", tmp_path / "data",
                           all_models=["m"], stamp=None)  # fmt: skip
    sizes = files.sizes()
    assert sizes["page_bytes"] < PAGE_BYTES_LIMIT
    assert sizes["largest_chunk_bytes"] < CHUNK_BYTES_LIMIT


def test_grid_times_are_bounded() -> None:
    assert grid_times(2.0) == [0.0, 0.5, 1.0, 1.5, 2.0]
    long = grid_times(600.0)
    assert len(long) <= MAX_FRAMES and long[-1] <= 600.0


def test_page_and_chunks(tmp_path: Path, browser: Browser) -> None:
    samples, parsed = _image_case()
    scores = _scores(samples, parsed)
    tasks = dict(zip(samples.sample_id, samples.task, strict=True))
    media = _media(["/r.jpg", "/t.jpg", "/A.jpg", "/B.jpg", "/C.jpg", "/D.jpg"])
    records = _records(samples, parsed, scores, _responses(["fo1", "lp1"], tasks), media)
    cards = _cards(samples, media)
    records = records + [None] * CHUNK_SIZE  # a chunk with no sample of this run
    (tmp_path / "data" / "m").mkdir(parents=True)
    (tmp_path / "data" / "m" / "c00009.js").write_text("stale")
    files = write_explorer(
        "m", records, tmp_path / "m.html", tmp_path / "data" / "m",
        all_models=["m", "other"], stamp={"version": "0.1.0", "stage_versions": {}},
    )  # fmt: skip
    assert [p.name for p in files.chunks] == ["c00000.js"]
    html = files.page.read_text()
    index = json.loads(re.search(r'id="explorer-index" type="application/json">(.*?)</script>',
                                 html).group(1))  # fmt: skip
    # the last element: the request outcome class (0: answered; dualcog.schemas.OUTCOMES)
    assert index["entries"][:2] == [[1, 0, 0, 2, -1, 0], [0, 0, 0, 3, -1, 0]]
    assert index["results"][0] == "answered"
    assert index["tasks"] == ["landmark_position", "future_observation"]
    # Nothing is fetched from the network (the SVG namespace is a name, not a fetch).
    offline = html.replace("http-equiv", "").replace('"http://www.w3.org/2000/svg"', "")
    assert '<option value="other">' in html and "http" not in offline
    chunk = files.chunks[0].read_text()
    assert chunk.startswith('dualcogChunk("m",0,[')
    shown = json.loads(chunk[len('dualcogChunk("m",0,') : -len(");\n")])
    assert len(shown) == CHUNK_SIZE and shown[2:] == [None] * (CHUNK_SIZE - 2)
    # The records as built, less what no card shows; tuples become JSON arrays.
    assert shown[0] == json.loads(json.dumps({k: v for k, v in records[0].items()
                                              if k not in UNSHOWN_KEYS}))  # fmt: skip
    assert "question" not in shown[0] and "images" not in shown[0]  # the sample card's
    (card_chunk,) = write_sample_cards(cards, tmp_path / "samples")
    assert card_chunk.read_text().startswith("dualcogSamples(0,[")
    shown_cards = json.loads(card_chunk.read_text()[len("dualcogSamples(0,") : -len(");\n")])
    assert shown_cards == json.loads(json.dumps(cards))
    assert shown_cards[0]["images"][1]["file"] == "media/A.jpg"
    drawn = _drawn(browser, tmp_path / "drawn", cards, records)
    assert len(drawn) == 2  # the page's cards: the two samples of this run
    elements = _elements(drawn[0])
    boxes = [a["class"] for tag, a in elements if tag == "rect"]
    assert boxes == ["box scored-against", "box pred", "box gold"]
    rects = {a["class"]: a for tag, a in elements if tag == "rect"}
    # On candidate A's 320 x 240 thumbnail: the chosen candidate's box and the prediction.
    assert [float(v) for v in rects["box pred"]["data-xyxy"].split(",")] == [0.5, 0.5, 0.8, 0.9]
    assert {k: rects["box pred"][k] for k in ("x", "y", "width", "height")} == {
        "x": "160", "y": "120", "width": "96", "height": "96"}  # fmt: skip
    text = elements[-1][1]["text"]
    assert "Future Observation" in text and "✓ box (IoU ≥ 0.5)" in text and "IoU 0.750" in text
    assert "✗ answer" in text and "request outcome" in text and "answered" in text


def _elements(html: str) -> list[tuple[str, dict[str, str]]]:
    """(tag, attributes) of every element, as a browser's parser reads them."""

    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.found: list[tuple[str, dict[str, str]]] = []
            self.text: list[str] = []

        def handle_starttag(self, tag, attrs) -> None:
            self.found.append((tag, dict(attrs)))

        def handle_data(self, data) -> None:
            self.text.append(data)

    parser = Collect()
    parser.feed(html)
    parser.close()
    return parser.found + [("#text", {"text": "".join(parser.text)})]


def test_card_text_is_escaped_in_attributes_and_text(tmp_path: Path, browser: Browser) -> None:
    """Quotes, apostrophes and markup in ids, labels, raw responses and the model's name stay
    text in the drawn cards, and none of it runs."""
    samples, parsed = _image_case()
    odd = "lp1'\"<b>&"
    samples.loc[samples.sample_id == "lp1", "sample_id"] = odd
    parsed.loc[parsed.sample_id == "lp1", "sample_id"] = odd
    samples.at[1, "options"] = [{"option_id": "A", "label": 'it\'s <i>"A"</i>', "level": None}]
    scores = _scores(samples, parsed)
    responses = _responses(["fo1", odd], {"fo1": "future_observation", odd: "landmark_position"})
    hostile = ("</pre><script>window.ran = 1</script><img src=x onerror='window.ran = 2'>"
               "</script><!--")  # fmt: skip
    responses["raw_text"] = [hostile, 'say "hi" & <bye>']
    media = _media(["/r.jpg", "/t.jpg"])
    records = _records(samples, parsed, scores, responses, media)
    model = "m'o\"d<img src=x onerror='window.ran = 3'>"
    other = "<script>window.ran = 4</script>"
    cards = _drawn(browser, tmp_path, _cards(samples, media), records, model, [other])
    assert browser.evaluate("window.ran === undefined")  # nothing ran
    assert browser.evaluate("document.querySelectorAll('[onerror]').length") == 0
    scripts = browser.evaluate(
        "Array.from(document.scripts).map(s => s.id || s.src.replace(/^.*\\/data\\//, 'data/')"
        " || 'inline')"
    )
    chunk = next(s for s in scripts if s.startswith("data/"))  # the one chunk it loaded
    cards_chunk = next(s for s in scripts if s.endswith("/samples/c00000.js"))  # and its cards
    assert sorted(scripts) == sorted([chunk, cards_chunk, "explorer-index", "inline"])
    assert unquote(chunk) == f"data/{model}/c00000.js"
    assert browser.evaluate("document.querySelector('nav.models').textContent").count(model) == 1
    assert browser.evaluate("document.querySelector('nav.models a').textContent") == other
    assert browser.evaluate("document.title") == f"Explorer · {model}"
    elements = _elements(cards[1])
    article = next(a for tag, a in elements if tag == "article")
    assert article["data-sample"] == odd and article["data-model"] == model
    tags = [tag for tag, _ in elements]
    assert tags.count("b") == 1 and "i" not in tags  # the one option's id; its label is text
    text = elements[-1][1]["text"]
    assert 'it\'s <i>"A"</i>' in text and 'say "hi" & <bye>' in text and model in text
    first = _elements(cards[0])
    assert "script" not in [tag for tag, _ in first]
    assert [tag for tag, _ in first].count("img") == 0  # thumbnails are SVG <image> elements
    assert hostile in first[-1][1]["text"]
    # The raw response is the <pre>'s one text node, in full.
    assert browser.evaluate("document.querySelector('#cards article pre').textContent") == hostile


DEMO_ROOT = Path(__file__).parents[2] / "resources" / "demo"
DEMO_VIDEO = next(DEMO_ROOT.glob("**/final_task/task_rgb_web.mp4"))


def test_video_frame_grid_from_a_real_video(tmp_path: Path) -> None:
    row = video_frames(str(DEMO_VIDEO), None, tmp_path)  # duration read from the video
    assert row.kind == "video" and (row.width, row.height) == (160, 120)
    assert len(row.files) == 1 and len(row.times) >= 2
    assert row.times == sorted(row.times) and row.times[0] == 0.0
    steps = np.diff(row.times)
    assert np.all(np.abs(steps - 0.5) <= 0.1)  # grid every 0.5 s, nearest decoded frame
    with Image.open(tmp_path / row.files[0]) as sheet:  # the frames side by side
        assert sheet.size == (160 * len(row.times), 120)
        sheet = np.asarray(sheet.convert("L"), dtype=float)
    # Each cell is its own frame of the grid: the decoded frames, scaled, in time order.
    import av

    with av.open(str(DEMO_VIDEO)) as container:
        stream = container.streams.video[0]
        decoded = [(float(f.pts * stream.time_base), f) for f in container.decode(stream)]
    first = decoded[0][0]
    for k, time in enumerate(row.times):
        nearest = min(decoded, key=lambda d: abs(d[0] - first - time))[1]
        expected = np.asarray(nearest.to_image().convert("L").resize((160, 120)), dtype=float)
        cell = sheet[:, 160 * k : 160 * (k + 1)]
        assert np.abs(cell - expected).mean() < 6  # JPEG and scaling differences only


def test_worker_processes_make_what_one_worker_makes(tmp_path: Path) -> None:
    """The demo's explorer media by two worker processes: the same index rows in the same
    order, and the same bytes in every file, as one worker's."""
    from dualcog.ingest import ingest

    samples = ingest(DEMO_ROOT)[0].to_pandas()
    one = prepare_explorer_media(samples, tmp_path / "one", workers=1)
    two = prepare_explorer_media(samples, tmp_path / "two", workers=2)
    pd.testing.assert_frame_equal(one, two)
    assert set(one["kind"]) == {"image", "video"}
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*.jpg"))
    assert len(files) == len(one)  # a thumbnail per image, a sprite sheet per video
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_thumbnails_only_of_shown_images_at_their_drawn_size(tmp_path: Path) -> None:
    """Image cards show every image of their sample, boxes never on a reference (shown small);
    video cards show no still image."""

    def media(*items):
        return [{"role": role, "path": path, "resolved_path": path} for role, path in items]

    samples = pd.DataFrame({"media": [
        media(("reference", "/r1.jpg"), ("target", "/t1.jpg")),
        media(("reference", "/r2.jpg"), ("candidate_A", "/a.jpg")),
        media(("reference", "/t1.jpg"), ("target", "/r1.jpg")),  # each also a target: large
        media(("video", "/v.mp4"), ("reference", "/vr.jpg")),  # not shown
    ]})  # fmt: skip
    large, small = THUMB_SIZE, PLAIN_THUMB_SIZE
    assert shown_images(samples) == {
        "/a.jpg": large, "/r1.jpg": large, "/r2.jpg": small, "/t1.jpg": large
    }  # fmt: skip
    source = tmp_path / "big.jpg"
    Image.new("RGB", (800, 600), (90, 120, 30)).save(source, format="JPEG")
    small = image_thumbnail(str(source), tmp_path, PLAIN_THUMB_SIZE)
    large = image_thumbnail(str(source), tmp_path / "large")
    # 320 x 240 asked: the 1/2-scale decode (400 x 300) is within DRAFT_SLACK, kept as it is;
    # a 1,000 x 750 source decodes to 500 x 375 at 1/2 and is scaled to 320 x 240.
    assert (small.width, small.height, large.width, large.height) == (200, 150, 400, 300)
    bigger = tmp_path / "bigger.jpg"
    Image.new("RGB", (1000, 750), (90, 120, 30)).save(bigger, format="JPEG")
    scaled = image_thumbnail(str(bigger), tmp_path / "scaled")
    assert (scaled.width, scaled.height) == (320, 240)
    with Image.open(tmp_path / "scaled" / scaled.files[0]) as image:
        assert image.size == (320, 240)
    with Image.open(tmp_path / small.files[0]) as image:
        assert image.size == (200, 150)
        pixel = image.getpixel((100, 75))
        assert max(abs(a - b) for a, b in zip(pixel, (90, 120, 30), strict=True)) <= 3


def test_undecodable_source_image_is_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "broken.jpg"
    source.write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(UnreadableMedia, match="image does not decode") as info:
        image_thumbnail(str(source), tmp_path)
    assert info.value.file == str(source)


def test_timeline_labels_are_escaped(tmp_path: Path, browser: Browser) -> None:
    samples, parsed = _video_case()
    samples.at[0, "options"] = [
        {"option_id": "A", "label": "<b>it's</b>", "level": "atomic"},
        {"option_id": "B", "label": 'a "B"', "level": "composite"},
    ]
    scores = _scores(samples, parsed)
    tasks = dict(zip(samples.sample_id, samples.task, strict=True))
    records = _records(samples, parsed, scores, _responses(["b1", "v1"], tasks),
                             MediaIndex({}, {}))  # fmt: skip
    cards = _cards(samples, MediaIndex({}, {}))
    elements = _elements(_drawn(browser, tmp_path, cards, records)[0])
    assert [tag for tag, _ in elements].count("b") == 2  # the option ids; labels are text
    assert "A. <b>it's</b>" in elements[-1][1]["text"] and 'B. a "B"' in elements[-1][1]["text"]


def test_video_cards_draw_the_scored_matches(tmp_path: Path, browser: Browser) -> None:
    """Timelines: gold and predicted bars where the records put them, matched pairs, false
    positives, the level headings and the frame strip."""
    samples, parsed = _video_case()
    scores = _scores(samples, parsed)
    media = MediaIndex({}, {"/v.mp4": ("v.jpg", [i * 0.5 for i in range(13)], 160, 120)})
    tasks = dict(zip(samples.sample_id, samples.task, strict=True))
    records = _records(samples, parsed, scores, _responses(["b1", "v1"], tasks), media)
    drawn = _drawn(browser, tmp_path, _cards(samples, media), records)
    behavior, visibility = (_elements(card) for card in drawn)
    svgs = [a for tag, a in visibility if tag == "svg" and a["class"] == "timeline"]
    assert [a["data-duration"] for a in svgs] == ["6"]
    rects = [(a["class"].split(), a["data-interval"], a["x"], a["width"])
             for tag, a in visibility if tag == "rect"]  # fmt: skip
    # 440 px for 6 s from x = 170: [1, 3] at 243.33, 146.67 wide; [4, 5] 73.33 wide.
    assert rects == [
        (["interval", "gold"], "1,3", "243.33", "146.67"),
        (["interval", "pred"], "1,3", "243.33", "146.67"),
        (["interval", "pred", "fp"], "4,5", "463.33", "73.33"),
    ]
    text = visibility[-1][1]["text"]
    assert "Visibility segments: 1 matched (tIoU ≥ 0.5), 1 false positive, 0 missed" in text
    assert "count: predicted 2, gold 1" in text and "1.00" in text  # the matched pair's tIoU
    lines = [a["class"] for tag, a in visibility if tag == "line"]
    assert lines.count("pair") == 1 and lines.count("tick") == 7  # 0..6 s, one a second
    headings = behavior[-1][1]["text"]
    assert "Composite level: 1 matched" in headings and "option set exact" in headings
    # Frames 0 and 6 of the sprite sheet: its 1st and 7th 160 x 120 cells.
    frames = [a["viewbox"] for tag, a in behavior if tag == "svg" and a["class"] == "frame"]
    assert frames == ["0 0 160 120", "960 0 160 120"]
    sheets = [(a["href"], a["width"], a["height"]) for tag, a in behavior if tag == "image"]
    assert sheets == [("v.jpg", "2080", "120")] * 2


def test_nearest_frame_is_numpys_first_nearest() -> None:
    """The strip's frame: the grid frame nearest a start, the first of equals as numpy's argmin
    picks it (grid times rise; past the video's end the last frame repeats)."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        times = sorted(float(t) for t in np.round(rng.uniform(0, 10, rng.integers(1, 12)), 1))
        times += [times[-1]] * int(rng.integers(0, 3))
        media = MediaIndex({}, {"v": ("v.jpg", times, 160, 120)})
        for start in [*np.round(rng.uniform(-1, 11, 20), 2), *times]:
            first = int(np.argmin(np.abs(np.asarray(times) - start)))
            assert media.nearest_frame("v", float(start)) == (first, times[first])


def test_scored_pairs_are_the_scorers() -> None:
    """The explorer's plain-float pairs are the scorer's `_scored_pairs`, value for value and
    in the same order, ties, touching ends, malformed (NaN) and unbounded gold included."""
    from dualcog.explorer.matches import scored_pairs
    from dualcog.scoring.intervals import _scored_pairs

    rng = np.random.default_rng(11)
    for _ in range(2000):
        gold = np.round(rng.uniform(0, 10, (int(rng.integers(0, 5)), 2)), int(rng.integers(0, 3)))
        gold.sort(axis=1)
        pred = np.round(rng.uniform(0, 10, (int(rng.integers(0, 5)), 2)), int(rng.integers(0, 3)))
        pred.sort(axis=1)
        if len(gold) and rng.random() < 0.2:
            gold[int(rng.integers(len(gold)))] = rng.choice([np.nan, np.inf])
        if len(gold) and len(pred) and rng.random() < 0.2:
            pred[0] = gold[0]  # an exact tie
        mine = scored_pairs([tuple(r) for r in gold.tolist()], [tuple(r) for r in pred.tolist()])
        with np.errstate(invalid="ignore"):  # inf - inf in the scorer's matrix: NaN, no pair
            assert mine == _scored_pairs(gold, pred)


def test_interval_lists_are_the_scorers() -> None:
    """`gold_pairs` / `clipped_pairs` give the scorer's `gold_array` / `clip_predicted`: the
    same values (NaN for a malformed gold interval), the same invalid count, on plain, odd and
    out-of-range intervals, with and without a duration."""
    from dualcog.explorer.matches import clipped_pairs, gold_pairs
    from dualcog.scoring.intervals import clip_predicted, gold_array

    odd = [None, "1,2", [1.0], [True, 2.0], [1, 2], (0.5, 1.5), np.array([0.25, 0.75]),
           [2.0, 1.0], [-1.0, 1.0], [1.0, 1.0], [0.0, np.inf], [np.nan, 1.0], [5.0, 6.5],
           [5.5, 9.0], [7.0, 7.5], [1.0, None]]  # fmt: skip
    rng = np.random.default_rng(5)
    for _ in range(500):
        chosen = [odd[int(i)] for i in rng.integers(0, len(odd), int(rng.integers(0, 6)))]
        chosen += [sorted(rng.uniform(-1, 9, 2).round(2).tolist()) for _ in range(3)]
        for duration in (6.0, None, math.nan, 0.0):
            pairs, invalid = clipped_pairs(chosen, duration)
            array, scorer_invalid = clip_predicted(chosen, duration)
            assert invalid == scorer_invalid and pairs == [tuple(r) for r in array.tolist()]
        mine = np.asarray(gold_pairs(chosen), dtype=float).reshape(-1, 2)
        np.testing.assert_array_equal(mine, gold_array(chosen))  # NaN where NaN


def test_records_show_what_was_posted(tmp_path: Path, browser: Browser) -> None:
    samples, parsed = _image_case()
    scores = _scores(samples, parsed)
    media = _media(["/r.jpg", "/t.jpg", "/A.jpg", "/B.jpg", "/C.jpg", "/D.jpg"])
    responses = _responses(["fo1", "lp1"], dict(zip(samples.sample_id, samples.task, strict=True)))
    switch = {"mode": "Instant", "family": "internvl", "body": {"continue_final_message": True},
              "prefill": "<think>\n</think>", "system_prefix": False}  # fmt: skip
    video = [{"source": "a", "sent": "b", "sent_sha256": "c" * 64, "bytes_before": 12_000_000,
              "bytes_after": 4_500_000, "width": None, "bitrate_k": 1200}]  # fmt: skip
    responses = responses.assign(
        request_sha256=["f" * 64, None], request_temperature=[0.2, None],
        request_max_tokens=pd.array([None, None], dtype="Int64"),
        request_switch=[json.dumps(switch), None], request_prefill=["<think>\n</think>", None],
        request_reencoded=[json.dumps(video), None],
    )  # fmt: skip
    records = _records(samples, parsed, scores, responses, media)
    fo, lp = records
    assert fo["request"] == {
        "sha256": "f" * 64, "temperature": 0.2, "max_tokens": None, "switch": switch,
        "prefill": "<think>\n</think>", "reencoded": video,
    }  # fmt: skip
    assert lp["request"] is None  # nothing recorded (a built-in backend's row)
    # The card draws it: the sha, the settings and the re-encoding, as text.
    cards = _drawn(browser, tmp_path, _cards(samples, media), records, "m", [])
    text = " ".join(a.get("text", "") for _, a in _elements(cards[0]))
    assert "Request sent" in text and "f" * 64 in text and "none sent" in text
    assert "Instant (family internvl)" in text and "12000000 → 4500000 bytes (1200 kb/s)" in text
    assert "Request sent" not in " ".join(a.get("text", "") for _, a in _elements(cards[1]))
