"""Offline backends (oracle, random, simulated) and the media store."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from frames import arrow

from dualcog import schemas
from dualcog.inference import media_data_uri, media_path, run_model
from dualcog.inference.media import clear_media_memo

IMAGE_OPTIONS = [{"option_id": o, "label": f"view {o}", "level": None} for o in "ABCD"]
BEHAVIOR_OPTIONS = [
    {"option_id": "A", "label": "orbit", "level": "atomic"},
    {"option_id": "B", "label": "ascend", "level": "atomic"},
    {"option_id": "C", "label": "descend", "level": "atomic"},
    {"option_id": "E", "label": "circular inspection", "level": "composite"},
]


def _image_sample(sample_id: str, task: str, gold: str, box: list[float]) -> dict:
    return {
        "sample_id": sample_id,
        "task": task,
        "modality": "image",
        "options": IMAGE_OPTIONS,
        "gold_option_id": gold,
        "gold_bbox": box,
        "difficulty": "4way",
    }


def build_samples() -> pd.DataFrame:
    """Twelve hand-built samples of every request kind, read back as from Parquet."""
    rows = []
    tasks = ["landmark_position", "future_observation", "self_position", "action_decision"]
    for i in range(8):
        box = [0.1 + 0.05 * i, 0.2, 0.5 + 0.04 * i, 0.7]
        rows.append(_image_sample(f"img_{i:02d}", tasks[i % 4], "ABCD"[i % 4], box))
    rows.append(
        {
            "sample_id": "vid_behavior_0",
            "task": "behavior",
            "modality": "video",
            "options": BEHAVIOR_OPTIONS,
            "duration_sec": 20.0,
            "gold_items": [
                {"option_id": "A", "label": "orbit", "level": "atomic", "intervals": [[0.0, 10.0]]},
                {"option_id": "C", "label": "descend", "level": "atomic", "intervals": [[10, 20]]},
                {
                    "option_id": "E",
                    "label": "circular inspection",
                    "level": "composite",
                    "intervals": [[0.0, 20.0]],
                },
            ],
            "composite_mission": True,
        }
    )
    rows.append(
        {
            "sample_id": "vid_behavior_1",
            "task": "behavior",
            "modality": "video",
            "options": BEHAVIOR_OPTIONS,
            "duration_sec": 12.5,
            "gold_items": [
                {"option_id": "B", "label": "ascend", "level": "atomic", "intervals": [[1, 4]]},
            ],
            "composite_mission": False,
        }
    )
    for j, (count, intervals) in enumerate([(2, [[0.0, 10.0], [20.0, 30.0]]), (0, [])]):
        rows.append(
            {
                "sample_id": f"vid_visibility_{j}",
                "task": "landmark_visibility",
                "modality": "video",
                "options": [],
                "duration_sec": 60.0,
                "gold_visible_count": count,
                "gold_visible_intervals": intervals,
            }
        )
    return schemas.to_table(pd.DataFrame(rows), schemas.SAMPLES).to_pandas()


def build_prompts(samples: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for sample in samples.to_dict(orient="records"):
        offered = [
            o["option_id"] for o in (sample["options"] if sample["options"] is not None else [])
        ]
        rows.append(
            {
                "sample_id": sample["sample_id"],
                "task": sample["task"],
                "request_key": f"rk-{sample['sample_id']}",
                "system_text": "system",
                "user_text": "question",
                "media_keys": [],
                "media_kinds": [],
                "offered_option_ids": offered,
            }
        )
    return schemas.to_table(pd.DataFrame(rows), schemas.PROMPTS).to_pandas()


@pytest.fixture(scope="module")
def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    samples = build_samples()
    return samples, build_prompts(samples)


def _run(model: dict, frames, tmp_path: Path, progress=None) -> pd.DataFrame:
    samples, prompts = frames
    out = run_model(
        model, arrow(prompts), arrow(samples), tmp_path / "media", tmp_path / "cache", progress
    ).to_pandas()
    schemas.to_table(out, schemas.RESPONSES)
    assert list(out["sample_id"]) == list(prompts["sample_id"])
    return out


def test_oracle_answers_are_gold_in_canonical_json(frames, tmp_path):
    out = _run({"name": "oracle", "backend": "oracle"}, frames, tmp_path)
    samples = frames[0].set_index("sample_id")
    assert (out["status"] == "ok").all() and (out["backend"] == "oracle").all()
    answers = {r.sample_id: json.loads(r.raw_text) for r in out.itertuples()}
    assert answers["img_00"] == {"answer_option_id": "A", "bbox_xyxy_norm": [0.1, 0.2, 0.5, 0.7]}
    assert answers["img_05"]["answer_option_id"] == "B"
    assert answers["img_05"]["bbox_xyxy_norm"] == list(samples.loc["img_05", "gold_bbox"])
    assert answers["vid_behavior_0"] == {
        "answers": [
            {"option_id": "A", "intervals_sec": [[0.0, 10.0]]},
            {"option_id": "C", "intervals_sec": [[10.0, 20.0]]},
            {"option_id": "E", "intervals_sec": [[0.0, 20.0]]},
        ]
    }
    assert answers["vid_visibility_0"] == {
        "visible_count": 2,
        "visible_intervals_sec": [[0.0, 10.0], [20.0, 30.0]],
    }
    assert answers["vid_visibility_1"] == {"visible_count": 0, "visible_intervals_sec": []}
    # Strict JSON, compact: the text itself is the canonical contract.
    assert out.loc[0, "raw_text"] == '{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.2,0.5,0.7]}'


def test_random_is_valid_seeded_and_order_independent(frames, tmp_path):
    samples, prompts = frames
    model = {"name": "chance", "backend": "random", "seed": 11}
    first = _run(model, frames, tmp_path)
    shuffled = prompts.iloc[::-1].reset_index(drop=True)
    second = run_model(model, arrow(shuffled), arrow(samples), tmp_path, tmp_path).to_pandas()
    assert dict(zip(first.sample_id, first.raw_text, strict=True)) == dict(
        zip(second.sample_id, second.raw_text, strict=True)
    )
    other_seed = _run({**model, "seed": 12}, frames, tmp_path)
    assert list(other_seed.raw_text) != list(first.raw_text)
    durations = dict(zip(samples.sample_id, samples.duration_sec, strict=True))
    for row in first.itertuples():
        answer = json.loads(row.raw_text)
        if row.task == "behavior":
            assert 1 <= len(answer["answers"]) <= 4
            ids = [a["option_id"] for a in answer["answers"]]
            assert len(set(ids)) == len(ids) and set(ids) <= {"A", "B", "C", "E"}
            for item in answer["answers"]:
                for start, end in item["intervals_sec"]:
                    assert 0 <= start <= end <= durations[row.sample_id]
        elif row.task == "landmark_visibility":
            assert 0 <= answer["visible_count"] <= 3
            assert len(answer["visible_intervals_sec"]) == answer["visible_count"]
            for start, end in answer["visible_intervals_sec"]:
                assert 0 <= start <= end <= 60.0
        else:
            assert answer["answer_option_id"] in "ABCD"
            x1, y1, x2, y2 = answer["bbox_xyxy_norm"]
            assert 0 <= x1 < x2 <= 1 and 0 <= y1 < y2 <= 1


def test_random_option_choice_is_spread_over_offered_ids(tmp_path):
    samples = schemas.to_table(
        pd.DataFrame(
            [
                _image_sample(f"s{i:03d}", "self_position", "A", [0.1, 0.1, 0.2, 0.2])
                for i in range(200)
            ]
        ),
        schemas.SAMPLES,
    ).to_pandas()
    prompts = build_prompts(samples)
    out = run_model(
        {"name": "r", "backend": "random", "seed": 1},
        arrow(prompts),
        arrow(samples),
        tmp_path,
        tmp_path,
    ).to_pandas()
    counts = pd.Series([json.loads(t)["answer_option_id"] for t in out.raw_text]).value_counts()
    assert set(counts.index) == set("ABCD")
    assert counts.min() >= 30  # 200 draws, expected 50 each


def test_simulated_skill_extremes(frames, tmp_path):
    perfect = _run(
        {"name": "sim-perfect", "backend": "simulated", "seed": 3, "skill": 1.0}, frames, tmp_path
    )
    hopeless = _run(
        {"name": "sim-zero", "backend": "simulated", "seed": 3, "skill": 0.0}, frames, tmp_path
    )
    samples = frames[0].set_index("sample_id")
    for good, bad in zip(perfect.itertuples(), hopeless.itertuples(), strict=True):
        assert good.backend == "simulated"
        gold = samples.loc[good.sample_id]
        right, wrong = json.loads(good.raw_text), json.loads(bad.raw_text)
        if good.task == "behavior":
            gold_ids = {item["option_id"] for item in gold["gold_items"]}
            assert {a["option_id"] for a in right["answers"]} == gold_ids
            assert all(a["option_id"] not in gold_ids for a in wrong["answers"])
        elif good.task == "landmark_visibility":
            assert right["visible_count"] == gold["gold_visible_count"]
        else:
            assert right["answer_option_id"] == gold["gold_option_id"]
            assert wrong["answer_option_id"] != gold["gold_option_id"]
            gx1, gy1, gx2, gy2 = gold["gold_bbox"]
            x1, y1, x2, y2 = right["bbox_xyxy_norm"]
            # Jitter of 5 % of the box size at most per edge.
            assert abs(x1 - gx1) <= 0.05 * (gx2 - gx1) + 1e-4
            assert abs(y2 - gy2) <= 0.05 * (gy2 - gy1) + 1e-4


def test_simulated_is_deterministic_per_sample(frames, tmp_path):
    samples, prompts = frames
    model = {"name": "sim", "backend": "simulated", "seed": 5, "skill": 0.6, "quirks": ["think"]}
    full = _run(model, frames, tmp_path)
    subset = run_model(
        model, arrow(prompts.iloc[3:6]), arrow(samples), tmp_path, tmp_path
    ).to_pandas()
    assert list(subset.raw_text) == list(full.raw_text.iloc[3:6])
    assert list(_run(model, frames, tmp_path).raw_text) == list(full.raw_text)


def _only_json(text: str) -> dict:
    """The JSON object of a quirky answer: after any think block, inside any fence/prose."""
    text = re.sub(r"(?s)<think>.*?</think>", "", text)
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


def test_simulated_quirks_appear(frames, tmp_path):
    base = {"name": "sim-q", "backend": "simulated", "seed": 3, "skill": 1.0}
    fenced = _run({**base, "quirks": ["fence"]}, frames, tmp_path)
    assert all(t.startswith("```json\n") and t.endswith("\n```") for t in fenced.raw_text)

    chatty = _run({**base, "quirks": ["prose", "think"]}, frames, tmp_path)
    for text in chatty.raw_text:
        assert text.startswith("<think>") and "Looking at the media" in text
        think = text[: text.index("</think>")]
        assert "{" in think and '"draft"' in think  # JSON-like text inside the reasoning
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
        _only_json(text)

    mille = _run({**base, "quirks": ["per_mille"]}, frames, tmp_path)
    box = json.loads(mille.raw_text.iloc[0])["bbox_xyxy_norm"]
    assert all(isinstance(v, int) for v in box) and max(box) > 1
    assert json.loads(mille.raw_text.iloc[8])["answers"]  # video answers untouched

    pixels = _run({**base, "quirks": ["pixel640x480"], "jitter": 0.0}, frames, tmp_path)
    assert json.loads(pixels.raw_text.iloc[0])["bbox_xyxy_norm"] == [64, 96, 320, 336]

    reversed_run = _run(
        {**base, "quirks": ["reversed_corners"], "reversed_rate": 0.5}, frames, tmp_path
    )
    boxes = [json.loads(t)["bbox_xyxy_norm"] for t in reversed_run.raw_text.iloc[:8]]
    flipped = [b for b in boxes if b[0] > b[2] and b[1] > b[3]]
    assert 0 < len(flipped) < 8

    aliased = _run({**base, "quirks": ["alias_keys"]}, frames, tmp_path)
    image = json.loads(aliased.raw_text.iloc[0])
    assert set(image) == {"answer", "box"}
    behavior = json.loads(aliased.raw_text.iloc[8])
    assert behavior["answers"][0]["option_ids"] == ["A"]
    assert behavior["answers"][0]["intervals_sec"][0].keys() == {"start_sec", "end_sec"}

    garbage = _run({**base, "quirks": ["garbage"], "garbage_rate": 0.5}, frames, tmp_path)
    non_json = [t for t in garbage.raw_text if "{" not in t]
    assert 0 < len(non_json) < len(garbage)
    assert (garbage["status"] == "ok").all()


def test_simulated_rejects_unknown_quirk(frames, tmp_path):
    with pytest.raises(ValueError, match="unknown simulated quirks"):
        _run({"name": "s", "backend": "simulated", "quirks": ["emoji"]}, frames, tmp_path)


def test_progress_reports_done_over_total(frames, tmp_path):
    lines: list[str] = []
    _run({"name": "oracle", "backend": "oracle"}, frames, tmp_path, lines.append)
    label = "oracle/" + "+".join(dict.fromkeys(frames[1]["task"]))
    assert lines and lines[-1].startswith(f"{label}: 12/12 done, ok=12, errors=0, cached=0")
    assert "ETA 0s" in lines[-1] and len(lines) <= 13
    assert all(line.count("oracle/") == 1 for line in lines)  # the label once, not doubled


def test_unknown_backend_and_missing_sample(frames, tmp_path):
    samples, prompts = frames
    with pytest.raises(ValueError, match="unknown backend"):
        run_model(
            {"name": "x", "backend": "magic"}, arrow(prompts), arrow(samples), tmp_path, tmp_path
        ).to_pandas()
    with pytest.raises(KeyError, match="img_00"):
        run_model(
            {"name": "x", "backend": "oracle"},
            arrow(prompts),
            arrow(samples.iloc[1:]),
            tmp_path,
            tmp_path,
        ).to_pandas()


def test_media_data_uri_reads_the_store_and_memoizes(tmp_path):
    clear_media_memo()
    key = "ab" + "0" * 62
    path = media_path(tmp_path, key, "image")
    assert path == tmp_path / "ab" / f"{key}.jpg"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xd8jpeg-bytes")
    uri = media_data_uri(tmp_path, key, "frames")
    assert uri == "data:image/jpeg;base64," + base64.b64encode(b"\xff\xd8jpeg-bytes").decode()
    video = media_path(tmp_path, key, "video")
    video.write_bytes(b"mp4")
    assert media_data_uri(tmp_path, key, "video") == "data:video/mp4;base64,bXA0"
    path.unlink()  # memoized: the file is not read again
    assert media_data_uri(tmp_path, key, "frames") == uri
    with pytest.raises(FileNotFoundError, match="cd" + "1" * 10):
        media_data_uri(tmp_path, "cd" + "1" * 62, "image")
    with pytest.raises(ValueError, match="unknown media kind"):
        media_data_uri(tmp_path, key, "audio")


def test_simulated_future_observation_boxes_the_selected_candidate():
    from dualcog.inference.offline import simulated_answer

    boxes = {"A": [0.1, 0.1, 0.2, 0.2], "B": [0.6, 0.6, 0.9, 0.9], "C": [0.1, 0.6, 0.3, 0.9]}
    sample = {
        "gold_option_id": "B",
        "gold_bbox": boxes["B"],
        "options": [{"option_id": o} for o in boxes],
        # as read back from Parquet: numpy arrays, not lists
        "candidates": np.array([{"option_id": o, "bbox": np.array(b)} for o, b in boxes.items()]),
    }
    wrong_option_near_its_box = 0
    for i in range(200):
        prompt = {"sample_id": f"s{i}", "offered_option_ids": list(boxes)}
        answer = simulated_answer("future_observation", prompt, sample, 1, 0.5, 0.02)
        option, box = answer["answer_option_id"], answer["bbox_xyxy_norm"]
        near = [
            o
            for o, b in boxes.items()
            if max(abs(x - y) for x, y in zip(box, b, strict=True)) < 0.1
        ]
        assert near in ([], [option])  # never near a candidate it did not select
        wrong_option_near_its_box += option != "B" and near == [option]
    assert wrong_option_near_its_box > 10
