from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dataset_builder import (
    SCENE,
    TASK_ROOT,
    default_image_samples,
    default_video_samples,
    image_sample,
    write_dataset,
)

from dualcog.errors import DataError
from dualcog.ingest import find_manifests, ingest
from dualcog.schemas import SAMPLES, read_arrow, write_table


def _by_id(table):
    return {row["sample_id"]: row for row in table.to_pylist()}


def test_image_samples_are_canonical(tmp_path: Path) -> None:
    samples, _ = ingest(write_dataset(tmp_path))
    counts = samples.to_pandas().groupby("task").size().to_dict()
    assert counts == {
        "action_decision": 1,
        "behavior": 2,
        "future_observation": 1,
        "landmark_position": 2,
        "landmark_visibility": 2,
        "self_position": 2,
    }
    rows = _by_id(samples)
    where = rows["env_3_5_self_shared_4way_000001_where"]
    assert where["upstream_task_type"] == "self_where"
    assert where["context_index"] == 1 and where["context_slot"] == 0
    assert where["gold_option_id"] == "B"
    assert where["gold_bbox"] == [0.2, 0.2, 0.6, 0.6]
    assert [m["role"] for m in where["media"]] == ["reference", "target"]
    assert [o["option_id"] for o in where["options"]] == ["A", "B", "C", "D"]
    env = rows["env_3_5_env_shared_4way_000002_how"]
    assert env["context_slot"] == 0  # built beside self context 1
    eight = rows["env_3_5_env_shared_8way_000004_where"]
    assert eight["context_slot"] == 1 and eight["difficulty"] == "8way"


def test_future_observation_uses_candidates_not_stale_target(tmp_path: Path) -> None:
    samples, _ = ingest(write_dataset(tmp_path))
    what = _by_id(samples)["env_3_5_self_shared_4way_000001_what"]
    roles = [m["role"] for m in what["media"]]
    assert roles == ["reference", "candidate_A", "candidate_B", "candidate_C", "candidate_D"]
    assert all("target" not in m["path"] for m in what["media"])
    assert [c["option_id"] for c in what["candidates"]] == ["A", "B", "C", "D"]
    assert what["candidates"][0]["bbox"] == [0.1, 0.1, 0.3, 0.3]
    assert json.loads(what["prompt_vars"])["behavior_instance"].startswith("a 90-degree")


def test_round_trips_through_the_typed_schema(tmp_path: Path) -> None:
    samples = ingest(write_dataset(tmp_path))[0].to_pandas()
    path = tmp_path / "samples.parquet"
    write_table(samples, SAMPLES, path)
    again = read_arrow(path).to_pandas()
    assert list(again.columns) == SAMPLES.names
    assert len(again) == len(samples)


def test_video_levels_gold_and_duration(tmp_path: Path) -> None:
    rows = _by_id(ingest(write_dataset(tmp_path))[0])
    composite = rows[
        "env_3_batch_env_3_5_composite_0001_fill_01_self_instance_recognition_joint_000001"
    ]
    assert composite["composite_mission"] is True
    assert composite["duration_sec"] == pytest.approx(5.0)
    levels = {g["option_id"]: g["level"] for g in composite["gold_items"]}
    assert levels == {"C": "composite", "A": "atomic", "B": "atomic"}
    assert composite["gold_items"][1]["intervals"] == [[0.0, 2.5]]
    assert [m["role"] for m in composite["media"]] == ["video", "reference"]
    assert composite["media"][0]["path"].endswith("task_rgb_web.mp4")
    atomic = rows["env_3_batch_env_3_5_atomic_0002_fill_01_self_instance_recognition_joint_000001"]
    assert atomic["composite_mission"] is False
    option_levels = {o["option_id"]: o["level"] for o in atomic["options"]}
    # "circular inspection" is the composite gold label of another sample in the manifest.
    assert option_levels == {"A": "atomic", "B": "atomic", "C": "composite", "D": "atomic"}
    visibility = rows["env_3_batch_env_3_5_composite_0001_fill_01_env_visibility_reasoning_000001"]
    # gold_environment_answer wins over the top-level keys
    assert visibility["gold_visible_count"] == 2
    assert visibility["gold_visible_intervals"] == [[0.0, 1.0], [2.0, 3.5]]


def test_composite_gold_falls_back_to_pair_encoding(tmp_path: Path) -> None:
    videos = default_video_samples()
    items = videos[0]["answer_items"]
    # Two items span everything (equal intervals): the [[s,e]]-encoded one is composite.
    items[1]["intervals_sec"] = [{"start_sec": 0.0, "end_sec": 5.0}]
    items[2]["intervals_sec"] = [{"start_sec": 0.0, "end_sec": 5.0}]
    rows = _by_id(ingest(write_dataset(tmp_path, video_samples_=videos))[0])
    levels = {g["option_id"]: g["level"] for g in rows[videos[0]["sample_id"]]["gold_items"]}
    assert levels["C"] == "composite"


def test_tasks_filter(tmp_path: Path) -> None:
    samples = ingest(write_dataset(tmp_path), tasks=["future_observation"])[0].to_pandas()
    assert set(samples["task"]) == {"future_observation"}


def test_rerooted_download_resolves(tmp_path: Path) -> None:
    root = write_dataset(tmp_path, task_root="task_data")
    samples = ingest(root)[0].to_pandas()
    first = samples.iloc[0]["media"][0]
    assert first["path"].startswith(TASK_ROOT)  # as written by the authors
    assert Path(first["resolved_path"]).is_file()
    assert "task_data" in first["resolved_path"]


def test_timestamped_copy_used_without_latest(tmp_path: Path) -> None:
    root = write_dataset(tmp_path)
    folder = root / TASK_ROOT / SCENE / "image_tasks" / "manifests"
    latest = folder / "env_3.latest_manifest.json"
    data = json.loads(latest.read_text())
    older = dict(data, samples=data["samples"][:1])
    (folder / "env_3_qa_manifest_1samples_20250101_000000.json").write_text(json.dumps(older))
    latest.rename(folder / "env_3_qa_manifest_6samples_20250202_000000.json")
    chosen = [m.path.name for m in find_manifests(root) if m.modality == "image"]
    assert chosen == ["env_3_qa_manifest_6samples_20250202_000000.json"]


# -- bad data: every error names file, sample and field ----------------------------------


def _expect_error(tmp_path, *, images=None, videos=None, field, message):
    root = write_dataset(tmp_path, image_samples=images, video_samples_=videos)
    with pytest.raises(DataError) as info:
        ingest(root)
    error = info.value
    assert error.field == field
    assert error.file and error.file.endswith(".json")
    assert message in str(error)
    return error


def test_missing_key(tmp_path: Path) -> None:
    images = default_image_samples()
    del images[2]["answer_bbox_xyxy_norm"]
    error = _expect_error(
        tmp_path, images=images, field="answer_bbox_xyxy_norm", message="required key is missing"
    )
    assert error.sample == images[2]["sample_id"]


def test_unknown_task_type(tmp_path: Path) -> None:
    images = default_image_samples()
    images[0]["task_type"] = "self_when"
    error = _expect_error(tmp_path, images=images, field="task_type", message="self_when")
    assert error.sample == images[0]["sample_id"]


@pytest.mark.parametrize(
    "box", [[0.5, 0.2, 0.4, 0.6], [0.1, 0.2, 0.3], [0.1, 0.2, 1.3, 0.6], "0.1,0.2,0.3,0.4"]
)
def test_malformed_box(tmp_path: Path, box) -> None:
    images = default_image_samples()
    images[0]["answer_bbox_xyxy_norm"] = box
    _expect_error(tmp_path, images=images, field="answer_bbox_xyxy_norm", message="malformed box")


def test_malformed_candidate_box(tmp_path: Path) -> None:
    images = default_image_samples()
    images[1]["candidates"][2]["bbox_xyxy_norm"] = [0.5, 0.5, 0.5, 0.9]
    _expect_error(
        tmp_path, images=images, field="candidates[2].bbox_xyxy_norm", message="malformed box"
    )


def test_missing_media_file(tmp_path: Path) -> None:
    root = write_dataset(tmp_path)
    sample = image_sample("env_how", 2)
    (root / sample["target_image"]).unlink()
    with pytest.raises(DataError) as info:
        ingest(root)
    assert info.value.field == "target_image"
    assert info.value.sample == sample["sample_id"]
    assert "media file not found" in str(info.value)


def test_duplicate_sample_id(tmp_path: Path) -> None:
    images = default_image_samples()
    images.append(dict(images[0]))
    error = _expect_error(tmp_path, images=images, field="sample_id", message="duplicate sample id")
    assert error.sample == images[0]["sample_id"]


def test_answer_not_offered(tmp_path: Path) -> None:
    images = default_image_samples()
    images[0]["answer_option_id"] = "E"
    _expect_error(tmp_path, images=images, field="answer_option_id", message="not one of")


def test_unknown_option_in_answer_items(tmp_path: Path) -> None:
    videos = default_video_samples()
    videos[0]["answer_items"][1]["option_id"] = "Z"
    _expect_error(
        tmp_path, videos=videos, field="answer_items[1].option_id", message="unknown option 'Z'"
    )


@pytest.mark.parametrize("interval", [[[3.0, 1.0]], [{"start_sec": 1.0}], [[0.0, "x"]], [1.0]])
def test_malformed_interval(tmp_path: Path, interval) -> None:
    videos = default_video_samples()
    videos[0]["answer_items"][1]["intervals_sec"] = interval
    _expect_error(
        tmp_path, videos=videos, field="answer_items[1].intervals_sec", message="malformed interval"
    )


def test_missing_video(tmp_path: Path) -> None:
    root = write_dataset(tmp_path)
    video = default_video_samples()[0]
    (root / video["video_web_path"]).unlink()
    with pytest.raises(DataError) as info:
        ingest(root)
    assert info.value.field == "video_web_path"


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    root = write_dataset(tmp_path)
    path = root / TASK_ROOT / SCENE / "video_tasks" / "datasets" / "env_3.latest_manifest.json"
    path.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON") as info:
        ingest(root)
    assert info.value.file == str(path)


def test_empty_root(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no manifests found"):
        ingest(tmp_path)
    shutil.rmtree(tmp_path)
    with pytest.raises(DataError, match="not a folder"):
        ingest(tmp_path)


# -- media paths stay inside data_root (or a listed media_roots folder) -----------------------


def _point_target_at(root: Path, written: str) -> dict:
    """Rewrite the env_how sample's target_image in the written manifest; returns the sample."""
    sample = image_sample("env_how", 2)
    path = root / TASK_ROOT / SCENE / "image_tasks" / "manifests" / "env_3.latest_manifest.json"
    data = json.loads(path.read_text())
    for raw in data["samples"]:
        if raw["sample_id"] == sample["sample_id"]:
            raw["target_image"] = written
    path.write_text(json.dumps(data))
    return sample


def _outside_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside" / "x.jpg"
    outside.parent.mkdir()
    shutil.copy(next((tmp_path / "data").rglob("*.jpg")), outside)
    return outside


@pytest.mark.parametrize(
    "written", ["../outside/x.jpg", "ABSOLUTE", "LINK", "../../../../etc/passwd"]
)
def test_media_outside_data_root_is_refused(tmp_path: Path, written: str) -> None:
    root = write_dataset(tmp_path / "data")
    outside = _outside_file(tmp_path)
    if written == "ABSOLUTE":
        written = str(outside)
    elif written == "LINK":
        link = root / TASK_ROOT / SCENE / "link.jpg"
        link.symlink_to(outside)
        written = f"{TASK_ROOT}/{SCENE}/link.jpg"
    sample = _point_target_at(root, written)
    with pytest.raises(DataError, match="refused") as info:
        ingest(root)
    error = info.value
    assert (error.sample, error.field) == (sample["sample_id"], "target_image")
    assert error.file.endswith("env_3.latest_manifest.json")
    assert written in str(error)


def test_symlink_within_data_root_is_accepted(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "data")
    sample = image_sample("env_how", 2)
    link = root / TASK_ROOT / SCENE / "link.jpg"
    link.symlink_to(root / sample["target_image"])
    _point_target_at(root, f"{TASK_ROOT}/{SCENE}/link.jpg")
    rows = _by_id(ingest(root)[0])
    media = {m["role"]: m for m in rows[sample["sample_id"]]["media"]}
    assert media["target"]["resolved_path"] == str(link)


def test_media_roots_allow_an_outside_folder(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "data")
    outside = _outside_file(tmp_path)
    sample = _point_target_at(root, str(outside))
    with pytest.raises(DataError, match="media_roots"):
        ingest(root)
    rows = _by_id(ingest(root, media_roots=[outside.parent])[0])
    media = {m["role"]: m for m in rows[sample["sample_id"]]["media"]}
    assert media["target"]["resolved_path"] == str(outside)
