"""Build a tiny released-layout dataset in a temporary folder, for ingestion tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from PIL import Image

TASK_ROOT = "task_pipeline_data/UAV-DualCog-V1"
SCENE = "airsim_env_3"
VIDEO_ROOT = f"{TASK_ROOT}/{SCENE}/video_tasks"


def _jpeg(path: Path, colour=(90, 120, 90)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (80, 60), colour).save(path, format="JPEG")


def image_sample(task_type: str, index: int, diff: str = "4way", landmark: str = "5") -> dict:
    side = "self" if task_type.startswith("self") else "env"
    suffix = {"self_where": "where", "self_what": "what", "env_where": "where", "env_how": "how"}
    sid = f"env_3_{landmark}_{side}_shared_{diff}_{index:06d}_{suffix[task_type]}"
    assets = f"{TASK_ROOT}/{SCENE}/image_tasks/assets"
    sample = {
        "sample_id": sid,
        "scene_id": "env_3",
        "engine": "airsim",
        "landmark_id": landmark,
        "landmark_category": "building",
        "landmark_description": "a red-roofed tower",
        "task_family": "qa",
        "task_group": "self-aware" if side == "self" else "environment-aware",
        "view_definition": "Self-Aware" if side == "self" else "Environment-Aware",
        "task_type": task_type,
        "difficulty": diff,
        "reference_image": f"scene_data/{SCENE}/landmarks_raw/rgb_views/{landmark}/view_00_a.jpg",
        "reference_image_with_bbox": f"{assets}/reference_bbox/{landmark}/{sid}_ref.jpg",
        "reference_bbox_xyxy_norm": [0.1, 0.1, 0.5, 0.5],
        "reference_object_view": "Front",
        "target_image": f"{assets}/env_observations/{landmark}/{sid}_target.jpg",
        "answer_option_id": "B",
        "answer_bbox_xyxy_norm": [0.2, 0.2, 0.6, 0.6],
        "prompt_text": f"question {sid}",
        "user_prompt": f"question {sid}",
        "system_prompt": "system",
    }
    if task_type == "self_what":
        sample["candidates"] = [
            {
                "option_id": letter,
                "image": f"{assets}/env_observations/{landmark}/{sid}_cand_{letter}.jpg",
                "view_under_definition": "Front",
                "bbox_xyxy_norm": [0.2, 0.2, 0.6, 0.6] if letter == "B" else [0.1, 0.1, 0.3, 0.3],
            }
            for letter in "ABCD"
        ]
        sample["answer_option_ids"] = ["B"]
        sample["behavior_instance"] = "a 90-degree clockwise turn around the landmark"
        sample["multi_select"] = False
    else:
        sample["label_options"] = [
            {"option_id": o, "label": label}
            for o, label in zip("ABCD", ("Front", "Back", "Left", "Right"), strict=True)
        ]
    return sample


def video_samples(mission: str, composite: bool) -> list[dict]:
    base = {
        "scene_id": "env_3",
        "engine": "airsim",
        "mission_id": mission,
        "set_id": "circular_inspection" if composite else "atomic_single",
        "landmark_id": "5",
        "landmark_description": "a red-roofed tower",
        "reference_image_with_bbox": f"{VIDEO_ROOT}/cache/assets/reference_bbox/5/ref.jpg",
        "reference_bbox_xyxy_norm": [0.1, 0.1, 0.5, 0.5],
        "video_path": f"{VIDEO_ROOT}/missions/{mission}/final_task/task_rgb.mp4",
        "video_web_path": f"{VIDEO_ROOT}/missions/{mission}/final_task/task_rgb_web.mp4",
        "fps": 10.0,
        "frame_count": 51,
        "video_width": 320,
        "video_height": 240,
        "visible_count": 1,
        "visible_intervals_sec": [{"start_sec": 0.0, "end_sec": 2.0}],
        "difficulty_score": 0.3,
        "difficulty_band": "easy",
        "prompt_text": "video question",
        "user_prompt": "video question",
        "system_prompt": "video system",
    }
    options = [
        {"option_id": "A", "label": "orbit clockwise"},
        {"option_id": "B", "label": "ascend"},
        {"option_id": "C", "label": "circular inspection"},
        {"option_id": "D", "label": "descend"},
    ]
    if composite:
        items = [
            {"option_id": "C", "label": "circular inspection", "intervals_sec": [[0.0, 5.0]]},
            {
                "option_id": "A",
                "label": "orbit clockwise",
                "intervals_sec": [{"start_sec": 0.0, "end_sec": 2.5}],
            },
            {
                "option_id": "B",
                "label": "ascend",
                "intervals_sec": [{"start_sec": 2.5, "end_sec": 5.0}],
            },
        ]
    else:
        items = [
            {
                "option_id": "D",
                "label": "descend",
                "intervals_sec": [{"start_sec": 1.0, "end_sec": 4.0}],
            },
        ]
    behavior = {
        **base,
        "sample_id": f"env_3_{mission}_self_instance_recognition_joint_000001",
        "form": "self_instance_recognition_joint",
        "task_name": "self_instance_recognition_joint",
        "task_group": "self-state",
        "choice_options": options,
        "multi_select": True,
        "answer_option_ids": [i["option_id"] for i in items],
        "answer_items": items,
    }
    visibility = {
        **base,
        "sample_id": f"env_3_{mission}_env_visibility_reasoning_000001",
        "form": "env_visibility_reasoning",
        "task_name": "env_visibility_reasoning",
        "task_group": "environmental",
        "gold_environment_answer": {
            "visible_count": 2,
            "visible_intervals_sec": [
                {"start_sec": 0.0, "end_sec": 1.0},
                {"start_sec": 2.0, "end_sec": 3.5},
            ],
        },
    }
    return [behavior, visibility]


def default_image_samples() -> list[dict]:
    return [
        image_sample("self_where", 1),
        image_sample("self_what", 1),
        image_sample("env_where", 2),
        image_sample("env_how", 2),
        image_sample("self_where", 3, "8way"),
        image_sample("env_where", 4, "8way"),
    ]


def default_video_samples() -> list[dict]:
    return video_samples("batch_env_3_5_composite_0001_fill_01", True) + video_samples(
        "batch_env_3_5_atomic_0002_fill_01", False
    )


def write_dataset(
    root: Path,
    image_samples: list[dict] | None = None,
    video_samples_: list[dict] | None = None,
    task_root: str = TASK_ROOT,
) -> Path:
    """Write manifests and every referenced media file; returns the data root."""
    image_samples = copy.deepcopy(
        default_image_samples() if image_samples is None else image_samples
    )
    video_samples_ = copy.deepcopy(
        default_video_samples() if video_samples_ is None else video_samples_
    )
    scene_dir = root / task_root / SCENE
    manifests = scene_dir / "image_tasks" / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    image_manifest = {
        "generation_id": "g1",
        "generated_at": "2026-01-01T00:00:00",
        "scene_id": "env_3",
        "engine": "airsim",
        "sample_count": len(image_samples),
        "reference_main_only": True,
        "seed": 0,
        "difficulties": ["4way", "8way"],
        "view_definitions": ["Self-Aware", "Environment-Aware"],
        "task_types": ["self_where", "self_what", "env_where", "env_how"],
        "selected_landmark_categories": ["building"],
        "samples": image_samples,
    }
    (manifests / "env_3.latest_manifest.json").write_text(json.dumps(image_manifest))
    datasets = scene_dir / "video_tasks" / "datasets"
    datasets.mkdir(parents=True, exist_ok=True)
    video_manifest = {
        "generation_id": "v1",
        "generated_at": "2026-01-01T00:00:00",
        "scene_id": "env_3",
        "engine": "airsim",
        "mode": "joint",
        "sample_count": len(video_samples_),
        "seed": 0,
        "forms": ["self_instance_recognition_joint", "env_visibility_reasoning"],
        "include_temporal_localization": True,
        "task_group": "mixed",
        "samples": video_samples_,
        "summary": {},
    }
    (datasets / "env_3.latest_manifest.json").write_text(json.dumps(video_manifest))
    for sample in image_samples + video_samples_:
        for key in ("reference_image", "reference_image_with_bbox", "target_image"):
            if isinstance(sample.get(key), str):
                _jpeg(_media_path(root, sample[key], task_root))
        for cand in sample.get("candidates") or []:
            if isinstance(cand, dict) and isinstance(cand.get("image"), str):
                _jpeg(_media_path(root, cand["image"], task_root))
        for key in ("video_path", "video_web_path"):
            if isinstance(sample.get(key), str):
                path = _media_path(root, sample[key], task_root)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"\x00\x00\x00\x18ftypmp42")
    return root


def _media_path(root: Path, written: str, task_root: str) -> Path:
    if written.startswith(TASK_ROOT):
        written = task_root + written[len(TASK_ROOT) :]
    return root / written
