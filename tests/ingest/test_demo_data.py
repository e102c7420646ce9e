"""The embedded demo benchmark (resources/demo/) has the released layout, keys and media.

Reads the JSON and media directly (no ingest code), so a broken demo is caught on its own.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from functools import cache
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from dualcog.prompts.templates import render_prompt_texts

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo"
TASK_ROOT = DEMO / "task_pipeline_data" / "UAV-DualCog-V1"

IMAGE_TOP_KEYS = {
    "generation_id", "generated_at", "scene_id", "engine", "sample_count",
    "reference_main_only", "seed", "difficulties", "view_definitions", "task_types",
    "selected_landmark_categories", "samples",
}  # fmt: skip
IMAGE_SAMPLE_KEYS = {
    "sample_id", "scene_id", "engine", "landmark_id", "landmark_category",
    "landmark_description", "task_family", "task_group", "view_definition", "task_type",
    "difficulty", "reference_image", "reference_image_with_bbox", "reference_bbox_xyxy_norm",
    "reference_object_view", "target_image", "answer_option_id", "answer_bbox_xyxy_norm",
    "prompt_text", "user_prompt", "system_prompt",
}  # fmt: skip
IMAGE_EXTRA_KEYS = {
    "self_where": {"label_options", "reference_view", "metadata"},
    "self_what": {"candidates", "answer_option_ids", "behavior_instance", "multi_select"},
    "env_where": {"label_options"},
    "env_how": {"label_options"},
}
VIDEO_TOP_KEYS = {
    "generation_id", "generated_at", "scene_id", "engine", "mode", "sample_count", "seed",
    "forms", "include_temporal_localization", "task_group", "samples", "summary",
}  # fmt: skip
VIDEO_SAMPLE_KEYS = {
    "sample_id", "scene_id", "engine", "form", "task_name", "task_group", "mission_id",
    "set_id", "element_instances", "behavior_intervals_sec", "landmark_id",
    "landmark_description", "reference_image_with_bbox", "reference_bbox_xyxy_norm",
    "video_path", "video_web_path", "fps", "frame_count", "video_width", "video_height",
    "visible_count", "visible_intervals_sec", "difficulty_score", "difficulty_band",
    "prompt_text", "user_prompt", "system_prompt",
}  # fmt: skip
BEHAVIOR_KEYS = {"choice_options", "multi_select", "answer_option_ids", "answer_items"}
IMAGE_SAMPLE_ID = re.compile(
    r"^(env_\d+)_(\w+?)_(self|env)_shared_(4way|8way)_(\d{6})_(where|what|how)$"
)
TEMPLATE_TASK = {
    "self_where": "landmark_position",
    "self_what": "future_observation",
    "env_where": "self_position",
    "env_how": "action_decision",
}


@cache
def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def manifests(kind: str) -> list[Path]:
    folder = "image_tasks/manifests" if kind == "image" else "video_tasks/datasets"
    return sorted(TASK_ROOT.glob(f"airsim_env_*/{folder}/*.latest_manifest.json"))


def samples(kind: str) -> list[dict]:
    return [sample for path in manifests(kind) for sample in load(path)["samples"]]


@cache
def pixels(relative: str) -> np.ndarray:
    # int16: signed room for differences, a quarter of int64's memory (and traffic).
    return np.asarray(Image.open(DEMO / relative).convert("RGB")).astype(np.int16)


def colour_mask(image: np.ndarray, colour, tolerance: float = 45.0) -> np.ndarray:
    """Pixels within `tolerance` (Euclidean, RGB) of `colour`: the norm's test, without
    square roots. Colours are whole or half (medians) and below 256, so the squared
    distances (under 2**18, in quarters) are exact even in float32."""
    difference = image - np.asarray(colour, dtype=np.float32)
    return np.einsum("...c,...c->...", difference, difference) < tolerance * tolerance


def box_pixels(box, image: np.ndarray) -> tuple[int, int, int, int]:
    height, width = image.shape[:2]
    return (
        round(box[0] * width),
        round(box[1] * height),
        round(box[2] * width),
        round(box[3] * height),
    )


def landmark_colour(relative: str, box) -> np.ndarray:
    """Every demo landmark covers its box centre."""
    image = pixels(relative)
    x1, y1, x2, y2 = box_pixels(box, image)
    cy, cx = (y1 + y2) // 2, (x1 + x2) // 2
    return np.median(image[cy - 2 : cy + 3, cx - 2 : cx + 3].reshape(-1, 3), axis=0)


def media_paths(sample: dict) -> list[str]:
    paths = [sample["reference_image_with_bbox"]]
    for key in ("reference_image", "target_image", "video_path", "video_web_path"):
        if key in sample:
            paths.append(sample[key])
    paths += [candidate["image"] for candidate in sample.get("candidates", [])]
    return paths


def test_layout_two_scenes_with_identical_timestamped_copies():
    assert [p.parent.parent.parent.name for p in manifests("image")] == [
        "airsim_env_12",
        "airsim_env_7",
    ]
    for kind in ("image", "video"):
        for latest in manifests(kind):
            copies = [p for p in latest.parent.glob("*.json") if p != latest]
            assert len(copies) == 1
            assert re.search(r"_\d+samples_\d{8}_\d{6}\.json$", copies[0].name)
            assert copies[0].read_bytes() == latest.read_bytes()
            assert f"_{load(latest)['sample_count']}samples_" in copies[0].name


def test_image_manifests_have_every_key():
    for path in manifests("image"):
        manifest = load(path)
        assert set(manifest) == IMAGE_TOP_KEYS
        assert manifest["sample_count"] == len(manifest["samples"])
        for sample in manifest["samples"]:
            expected = IMAGE_SAMPLE_KEYS | IMAGE_EXTRA_KEYS[sample["task_type"]]
            assert set(sample) == expected, sample["sample_id"]
            assert isinstance(sample["landmark_id"], str)
            assert sample["prompt_text"] == sample["user_prompt"]


def test_image_sample_ids_contexts_and_coverage():
    seen = set()
    for sample in samples("image"):
        match = IMAGE_SAMPLE_ID.match(sample["sample_id"])
        assert match, sample["sample_id"]
        scene, landmark, side, difficulty, index, suffix = match.groups()
        assert (scene, landmark, difficulty) == (
            sample["scene_id"],
            sample["landmark_id"],
            sample["difficulty"],
        )
        assert int(index) % 2 == (1 if side == "self" else 0)
        assert f"{side}_{suffix}" == sample["task_type"]
        seen.add((sample["task_type"], difficulty))
    assert seen == {(t, d) for t in TEMPLATE_TASK for d in ("4way", "8way")}
    assert {s["answer_option_id"] for s in samples("image")} == set("ABCD")


def test_quirk_landmark_with_two_4way_contexts_and_no_8way():
    by_landmark: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for sample in samples("image"):
        if sample["task_type"] == "self_where":
            key = (sample["scene_id"], sample["landmark_id"])
            index = sample["sample_id"].split("_")[-2]
            by_landmark.setdefault(key, set()).add((sample["difficulty"], index))
    quirky = [key for key, contexts in by_landmark.items() if len(contexts) == 2]
    assert len(by_landmark) == 8
    assert [key for key in quirky if {d for d, _ in by_landmark[key]} == {"4way"}]


def test_self_what_target_is_stale_and_gold_is_the_candidate():
    by_id = {s["sample_id"]: s for s in samples("image")}
    for sample in by_id.values():
        if sample["task_type"] != "self_what":
            continue
        where = by_id[sample["sample_id"].removesuffix("_what") + "_where"]
        assert sample["target_image"] == where["target_image"]
        assert sample["reference_image_with_bbox"] == where["reference_image_with_bbox"]
        assert [c["option_id"] for c in sample["candidates"]] == list("ABCD")
        gold = {c["option_id"]: c for c in sample["candidates"]}[sample["answer_option_id"]]
        assert sample["answer_bbox_xyxy_norm"] == gold["bbox_xyxy_norm"]
        assert sample["answer_option_ids"] == [sample["answer_option_id"]]
        assert sample["multi_select"] is False


def test_stored_prompts_are_the_templates_rendering():
    for sample in samples("image"):
        variables = {
            "landmark_description": sample["landmark_description"],
            "reference_object_view": sample["reference_object_view"],
            "options": sample.get("label_options"),
            "behavior_instance": sample.get("behavior_instance"),
        }
        rendered = render_prompt_texts(TEMPLATE_TASK[sample["task_type"]], variables)
        assert rendered == (sample["system_prompt"], sample["user_prompt"])


def test_referenced_media_exist_and_images_are_800x600_jpeg():
    paths = {p for s in samples("image") + samples("video") for p in media_paths(s)}
    for relative in paths:
        assert relative.startswith(("task_pipeline_data/", "scene_data/")), relative
        assert (DEMO / relative).is_file(), relative
        if relative.endswith(".jpg"):
            with Image.open(DEMO / relative) as image:
                assert (image.format, image.size) == ("JPEG", (800, 600)), relative


def test_demo_size_limits():
    files = [p for p in DEMO.rglob("*") if p.is_file()]
    media = sum(p.stat().st_size for p in files if p.suffix in {".jpg", ".mp4"})
    assert media < 6_000_000
    assert sum(p.stat().st_size for p in files) < 10_000_000


def test_red_box_sits_on_reference_bbox():
    sample = next(s for s in samples("image") if s["task_type"] == "self_where")
    boxed = pixels(sample["reference_image_with_bbox"])
    raw = pixels(sample["reference_image"])
    x1, y1, x2, y2 = box_pixels(sample["reference_bbox_xyxy_norm"], boxed)
    red = colour_mask(boxed, (255, 0, 0), tolerance=80)
    xs = np.linspace(x1 + 10, x2 - 10, 7).astype(int)
    ys = np.linspace(y1 + 10, y2 - 10, 7).astype(int)
    # middle of the 5-pixel line, drawn inside the box edges
    assert red[y1 + 2, xs].all() and red[y2 - 3, xs].all()
    assert red[ys, x1 + 2].all() and red[ys, x2 - 3].all()
    # nothing red just outside the line, nor anywhere in the raw view
    assert not red[y1 - 6, xs].any() and not red[y2 + 5, xs].any()
    assert not red[ys, x1 - 6].any() and not red[ys, x2 + 5].any()
    assert not colour_mask(raw, (255, 0, 0), tolerance=80).any()


def test_landmark_is_drawn_exactly_in_the_gold_boxes():
    # the self_what target_image is stale (its box is the future view's): not a pair
    truth = {}
    for sample in samples("image"):
        if sample["task_type"] != "self_what":
            truth[sample["target_image"]] = tuple(sample["answer_bbox_xyxy_norm"])
        for candidate in sample.get("candidates", []):
            truth[candidate["image"]] = tuple(candidate["bbox_xyxy_norm"])
    assert len(truth) > 40
    for relative, box in truth.items():
        image = pixels(relative)
        mask = colour_mask(image, landmark_colour(relative, box))
        ys, xs = np.nonzero(mask)
        x1, y1, x2, y2 = box_pixels(box, image)
        # nothing of the landmark's colour outside the box (JPEG blur: 3 px) ...
        assert xs.min() >= x1 - 3 and ys.min() >= y1 - 3, relative
        assert xs.max() + 1 <= x2 + 3 and ys.max() + 1 <= y2 + 3, relative
        # ... and the shape reaches every side (thin tips of triangles and stars blur away)
        assert xs.min() <= x1 + 6 and ys.min() <= y1 + 6, relative
        assert xs.max() + 1 >= x2 - 6 and ys.max() + 1 >= y2 - 6, relative


def test_video_manifests_have_every_key_and_pair_by_mission():
    for path in manifests("video"):
        manifest = load(path)
        assert set(manifest) == VIDEO_TOP_KEYS
        assert manifest["sample_count"] == len(manifest["samples"])
        forms: dict[str, list[str]] = {}
        for sample in manifest["samples"]:
            extra = (
                BEHAVIOR_KEYS
                if sample["form"] == "self_instance_recognition_joint"
                else {"gold_environment_answer"}
            )
            assert set(sample) == VIDEO_SAMPLE_KEYS | extra, sample["sample_id"]
            assert sample["task_name"] == sample["form"]
            assert sample["sample_id"] == (
                f"{sample['scene_id']}_{sample['mission_id']}_{sample['form']}_000001"
            )
            assert sample["prompt_text"] == sample["user_prompt"]
            assert sample["fps"] == 10.0 and 41 <= sample["frame_count"] <= 61
            forms.setdefault(sample["mission_id"], []).append(sample["form"])
        assert all(
            sorted(f) == ["env_visibility_reasoning", "self_instance_recognition_joint"]
            for f in forms.values()
        )
        assert {s["difficulty_band"] for s in manifest["samples"]} == {"easy", "medium", "hard"}


def pairs(intervals) -> list[tuple[float, float]]:
    return [
        (i["start_sec"], i["end_sec"]) if isinstance(i, dict) else (i[0], i[1]) for i in intervals
    ]


def test_behavior_gold_levels_and_interval_encodings():
    for path in manifests("video"):
        behavior = [
            s for s in load(path)["samples"] if s["form"] == "self_instance_recognition_joint"
        ]
        composite_labels = set()
        for sample in behavior:
            duration = (sample["frame_count"] - 1) / sample["fps"]
            ids = [o["option_id"] for o in sample["choice_options"]]
            assert ids == [chr(ord("A") + i) for i in range(len(ids))] and len(ids) <= 8
            assert sample["answer_option_ids"] == [i["option_id"] for i in sample["answer_items"]]
            pair_items = [
                i for i in sample["answer_items"] if isinstance(i["intervals_sec"][0], list)
            ]
            dict_items = [
                i for i in sample["answer_items"] if isinstance(i["intervals_sec"][0], dict)
            ]
            if "_composite_" in sample["mission_id"]:
                assert len(pair_items) == 1 and len(dict_items) >= 2
                ((start, end),) = pair_items[0]["intervals_sec"]
                assert (start, end) == (0.0, round(duration, 3))
                for item in dict_items:
                    assert all(start <= s < e <= end for s, e in pairs(item["intervals_sec"]))
                composite_labels.add(pair_items[0]["label"])
            else:
                assert "_atomic_" in sample["mission_id"] and sample["set_id"].startswith("atomic_")
                assert not pair_items and dict_items
        for sample in behavior:
            gold = {i["label"] for i in sample["answer_items"]}
            offered = {o["label"] for o in sample["choice_options"]}
            if "_atomic_" in sample["mission_id"]:
                # atomic missions show composite distractors from the same manifest
                assert (offered - gold) & composite_labels


def test_visibility_gold_matches_frames():
    saw_two = False
    for sample in samples("video"):
        intervals = pairs(sample["visible_intervals_sec"])
        assert sample["visible_count"] == len(intervals)
        saw_two |= len(intervals) == 2
        for start, end in intervals:
            assert start < end  # no zero-length interval in the demo
            assert round(end * sample["fps"]) < sample["frame_count"]
        if sample["form"] == "env_visibility_reasoning":
            assert sample["gold_environment_answer"] == {
                "visible_count": sample["visible_count"],
                "visible_intervals_sec": sample["visible_intervals_sec"],
            }
    assert saw_two


VISIBILITY = [s for s in samples("video") if s["form"] == "env_visibility_reasoning"]


@pytest.mark.parametrize("sample", VISIBILITY, ids=[s["mission_id"] for s in VISIBILITY])
def test_landmark_colour_appears_exactly_inside_visibility_intervals(sample):
    colour = landmark_colour(
        sample["reference_image_with_bbox"], sample["reference_bbox_xyxy_norm"]
    )
    intervals = pairs(sample["visible_intervals_sec"])
    with av.open(str(DEMO / sample["video_web_path"])) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        frames = [f.to_ndarray(format="rgb24").astype(np.int16) for f in container.decode(stream)]
    assert len(frames) == sample["frame_count"]
    assert frames[0].shape == (sample["video_height"], sample["video_width"], 3)
    for index, frame in enumerate(frames):
        count = int(colour_mask(frame, colour, tolerance=60).sum())
        inside = any(s - 1e-6 <= index / sample["fps"] <= e + 1e-6 for s, e in intervals)
        assert (count > 500) if inside else (count < 20), (index, count)


def test_committed_manifests_match_the_generator(monkeypatch):
    spec = importlib.util.spec_from_file_location("make_demo", REPO / "scripts" / "make_demo.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "make_demo", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    plan = module.build_plan()
    committed = {
        str(p.relative_to(DEMO)) for p in DEMO.rglob("*") if p.is_file() and p.suffix != ".md"
    }
    planned = set(plan.json_files) | set(plan.jsonl_files) | set(plan.images) | set(plan.videos)
    assert committed == planned
    for relative, content in plan.json_files.items():
        assert (DEMO / relative).read_text(encoding="utf-8") == module.manifest_text(content)
    for relative, rows in plan.jsonl_files.items():
        assert (DEMO / relative).read_text(encoding="utf-8") == module.jsonl_text(rows)


# ----------------------------------------------------------------------------- recorded run

RUN_ID = "demo_recorded_run"
RESPONSE_KEYS = {"run_id", "sample_id", "request_status", "latency_ms", "raw_text", "raw_response"}
RAW_RESPONSE_KEYS = {"finish_reason", "usage", "request_retry_attempts", "request_retry_errors"}
REQUEST_KEYS = {"run_id", "sample_id", "model", "request_model"}


def run_file(scene: str, kind: str, name: str) -> Path:
    return TASK_ROOT / f"airsim_{scene}" / f"{kind}_tasks" / "experiments" / RUN_ID / name


def jsonl(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines and all(line.strip() for line in lines), path
    return [json.loads(line) for line in lines]


def manifest_of(scene: str, kind: str) -> dict:
    folder = "image_tasks/manifests" if kind == "image" else "video_tasks/datasets"
    return load(TASK_ROOT / f"airsim_{scene}" / folder / f"{scene}.latest_manifest.json")


RUN_FILES = [(scene, kind) for scene in ("env_7", "env_12") for kind in ("image", "video")]


def rows_by_sample(rows: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        grouped.setdefault(row["sample_id"], []).append(row)
    return grouped


def answer_json(raw_text: str) -> dict | None:
    """The one JSON object of a recorded text (its think blocks and prose hold no braces)."""
    if "{" not in raw_text:
        return None
    return json.loads(raw_text[raw_text.index("{") : raw_text.rindex("}") + 1])


@pytest.mark.parametrize(("scene", "kind"), RUN_FILES)
def test_recorded_run_files_are_jsonl_in_the_authors_format(scene, kind):
    responses = jsonl(run_file(scene, kind, "responses.jsonl"))
    requests = jsonl(run_file(scene, kind, "requests.jsonl"))
    sample_ids = {s["sample_id"] for s in manifest_of(scene, kind)["samples"]}
    for row in responses:
        assert set(row) == RESPONSE_KEYS, row["sample_id"]
        assert row["run_id"] == RUN_ID and row["sample_id"] in sample_ids
        assert row["request_status"] in ("ok", "error")
        assert isinstance(row["latency_ms"], float) and row["latency_ms"] > 0
        raw = row["raw_response"]
        assert set(raw) >= RAW_RESPONSE_KEYS
        usage = raw["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert len(raw["request_retry_errors"]) == raw["request_retry_attempts"]
        if row["request_status"] == "ok":
            assert isinstance(row["raw_text"], str) and row["raw_text"]
            assert raw["finish_reason"] in ("stop", "length")
        else:
            assert row["raw_text"] in (None, "") and raw["finish_reason"] is None
    # every sample was requested; requests.jsonl logs each response row's request, in order
    assert {row["sample_id"] for row in responses} == sample_ids
    assert [r["sample_id"] for r in requests] == [r["sample_id"] for r in responses]
    for request in requests:
        assert set(request) == REQUEST_KEYS and request["run_id"] == RUN_ID
        assert (request["model"], request["request_model"]) == (
            "RecordedVLM-Instant",
            "recordedvlm-7b-instruct",
        )


@pytest.mark.parametrize(("scene", "kind"), RUN_FILES)
def test_recorded_run_has_resumed_error_only_and_truncated_samples(scene, kind):
    responses = jsonl(run_file(scene, kind, "responses.jsonl"))
    grouped = rows_by_sample(responses)
    statuses = {sid: [r["request_status"] for r in rows] for sid, rows in grouped.items()}
    resumed = [sid for sid, s in statuses.items() if s == ["error", "ok"]]
    error_only = [sid for sid, s in statuses.items() if set(s) == {"error"}]
    assert len(resumed) == 2 and len(error_only) == 1
    # a resumed run appends: every retry comes after the whole first pass
    first_pass = len(grouped)
    appended = {r["sample_id"] for r in responses[first_pass:]}
    assert len({r["sample_id"] for r in responses[:first_pass]}) == first_pass
    assert set(resumed) | set(error_only) <= appended
    truncated = [r for r in responses if r["raw_response"]["finish_reason"] == "length"]
    assert len(truncated) == 1 and answer_json(truncated[0]["raw_text"]) is None
    assert "<think>" in truncated[0]["raw_text"] and "</think>" not in truncated[0]["raw_text"]
    # completion order is a shuffle, not the manifest order
    order = [s["sample_id"] for s in manifest_of(scene, kind)["samples"]]
    assert [r["sample_id"] for r in responses[:first_pass]] != order


def test_recorded_run_answers_one_sample_twice_and_the_last_differs():
    responses = jsonl(run_file("env_7", "image", "responses.jsonl"))
    twice = {
        sid: [r for r in rows if r["request_status"] == "ok"]
        for sid, rows in rows_by_sample(responses).items()
    }
    twice = {sid: rows for sid, rows in twice.items() if len(rows) == 2}
    assert len(twice) == 1
    first, last = next(iter(twice.values()))
    assert responses.index(last) > responses.index(first)
    assert (
        answer_json(first["raw_text"])["answer_option_id"]
        != answer_json(last["raw_text"])["answer_option_id"]
    )
    for scene, kind in RUN_FILES[1:]:
        rows = jsonl(run_file(scene, kind, "responses.jsonl"))
        oks = [r["sample_id"] for r in rows if r["request_status"] == "ok"]
        assert len(oks) == len(set(oks))


def test_recorded_image_answers_are_per_mille_boxes_in_mixed_wrappers():
    texts, boxes, correct, answered = [], [], 0, 0
    for scene in ("env_7", "env_12"):
        gold = {s["sample_id"]: s for s in manifest_of(scene, "image")["samples"]}
        latest = {}
        for row in jsonl(run_file(scene, "image", "responses.jsonl")):
            if row["request_status"] == "ok":
                latest[row["sample_id"]] = row["raw_text"]
        for sid, text in latest.items():
            texts.append(text)
            answer = answer_json(text)
            if answer is None:
                continue
            boxes.append(answer["bbox_xyxy_norm"])
            answered += 1
            correct += answer["answer_option_id"] == gold[sid]["answer_option_id"]
    # the whole run writes its boxes as per-mille integers (the authors' quirk)
    assert boxes and all(
        len(box) == 4 and all(isinstance(v, int) and 0 <= v <= 1000 for v in box) for box in boxes
    )
    assert any(box[2] > 640 or box[3] > 480 for box in boxes)  # not a 640x480 pixel run
    assert 0.4 <= correct / answered <= 0.8
    assert any(t.startswith("{") for t in texts)
    assert any(t.startswith("```json") for t in texts)
    assert any(t.startswith("<think>") and "</think>" in t for t in texts)
    assert any(not t.startswith(("{", "```", "<think>")) and "{" in t for t in texts)  # prose
    assert any("{" not in t and "<think>" not in t for t in texts)  # a refusal


def test_recorded_video_answers_follow_the_canonical_contract():
    kinds = set()
    for scene in ("env_7", "env_12"):
        samples_by_id = {s["sample_id"]: s for s in manifest_of(scene, "video")["samples"]}
        for row in jsonl(run_file(scene, "video", "responses.jsonl")):
            if row["request_status"] != "ok" or row["raw_response"]["finish_reason"] != "stop":
                continue
            sample = samples_by_id[row["sample_id"]]
            answer = answer_json(row["raw_text"])
            duration = (sample["frame_count"] - 1) / sample["fps"]
            if sample["form"] == "self_instance_recognition_joint":
                offered = {o["option_id"] for o in sample["choice_options"]}
                assert list(answer) == ["answers"] and answer["answers"]
                for item in answer["answers"]:
                    assert set(item) == {"option_id", "intervals_sec"}
                    assert item["option_id"] in offered
                    intervals = item["intervals_sec"]
                    assert all(0 <= s < e <= duration for s, e in intervals)
                kinds.add("behavior")
            else:
                assert set(answer) == {"visible_count", "visible_intervals_sec"}
                intervals = answer["visible_intervals_sec"]
                assert answer["visible_count"] == len(intervals)
                assert all(0 <= s < e <= duration for s, e in intervals)
                kinds.add("visibility")
    assert kinds == {"behavior", "visibility"}
