"""Hand-built samples and parsed frames for the scoring tests."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from dualcog.schemas import PARSED, SAMPLES, to_table

OPTION_IDS = "ABCD"


def image_sample(
    sample_id: str,
    task: str = "landmark_position",
    gold_option: str = "A",
    gold_bbox=(0.2, 0.2, 0.6, 0.6),
    candidates: dict | None = None,
    difficulty: str | None = "4way",
    scene_id: str = "scene1",
    landmark_id: str = "lm1",
    context_index: int = 1,
) -> dict:
    return {
        "sample_id": sample_id,
        "task": task,
        "modality": "image",
        "scene_id": scene_id,
        "landmark_id": landmark_id,
        "difficulty": difficulty,
        "options": [{"option_id": o, "label": f"opt {o}", "level": None} for o in OPTION_IDS],
        "context_index": context_index,
        "context_slot": (context_index - 1) // 2,
        "gold_option_id": gold_option,
        "gold_bbox": list(gold_bbox),
        "candidates": (
            None
            if candidates is None
            else [{"option_id": k, "bbox": list(v), "view": "front"} for k, v in candidates.items()]
        ),
    }


def behavior_sample(
    sample_id: str,
    options: dict[str, str],
    gold: list[tuple[str, str, list]],
    composite_mission: bool,
    duration: float | None = 60.0,
    mission_id: str | None = None,
    difficulty: str | None = "easy",
    manifest_path: str = "m1.json",
    manifest_order: int = 0,
) -> dict:
    """options: {option_id: level}; gold: [(option_id, level, intervals)]."""
    return {
        "sample_id": sample_id,
        "task": "behavior",
        "modality": "video",
        "difficulty": difficulty,
        "manifest_path": manifest_path,
        "manifest_order": manifest_order,
        "options": [{"option_id": k, "label": f"lab {k}", "level": v} for k, v in options.items()],
        "mission_id": mission_id,
        "composite_mission": composite_mission,
        "duration_sec": duration,
        "gold_items": [
            {"option_id": k, "label": f"lab {k}", "level": lv, "intervals": iv}
            for k, lv, iv in gold
        ],
    }


def visibility_sample(
    sample_id: str,
    gold_count: int,
    gold_intervals: list,
    duration: float | None = 60.0,
    mission_id: str | None = None,
    difficulty: str | None = "easy",
    manifest_path: str = "m2.json",
    manifest_order: int = 0,
) -> dict:
    return {
        "sample_id": sample_id,
        "task": "landmark_visibility",
        "modality": "video",
        "difficulty": difficulty,
        "manifest_path": manifest_path,
        "manifest_order": manifest_order,
        "mission_id": mission_id,
        "duration_sec": duration,
        "gold_visible_count": gold_count,
        "gold_visible_intervals": gold_intervals,
    }


def image_parsed(
    sample_id: str,
    parse: str = "strict",
    option_ids: list | None = None,
    bbox=None,
    option_valid: bool | None = None,
    bbox_valid: bool | None = None,
    task: str = "landmark_position",
    stage: str | None = None,
) -> dict:
    option_valid = option_ids is not None if option_valid is None else option_valid
    bbox_valid = bbox is not None if bbox_valid is None else bbox_valid
    return {
        "sample_id": sample_id,
        "task": task,
        "parse": parse,
        "stage": stage or ("legacy" if parse == "legacy" else "strict"),
        "all_valid": option_valid and bbox_valid,
        "option_ids": option_ids,
        "option_valid": option_valid,
        "bbox": None if bbox is None else list(bbox),
        "bbox_valid": bbox_valid,
    }


def behavior_parsed(
    sample_id: str, answers: list[tuple[str, list]] | None, parse: str = "strict"
) -> dict:
    valid = answers is not None
    return {
        "sample_id": sample_id,
        "task": "behavior",
        "parse": parse,
        "stage": "strict" if valid else "invalid",
        "all_valid": valid,
        "answers": None
        if answers is None
        else [{"option_id": k, "intervals": iv} for k, iv in answers],
        "answers_valid": valid,
    }


def visibility_parsed(
    sample_id: str, count: int | None, intervals: list | None, parse: str = "strict"
) -> dict:
    return {
        "sample_id": sample_id,
        "task": "landmark_visibility",
        "parse": parse,
        "stage": "strict" if count is not None or intervals is not None else "invalid",
        "all_valid": count is not None and intervals is not None,
        "visible_count": count,
        "count_valid": count is not None,
        "visible_intervals": intervals,
        "intervals_valid": intervals is not None,
    }


def missing_parsed(sample_id: str, task: str, parse: str = "strict") -> dict:
    return {"sample_id": sample_id, "task": task, "parse": parse, "stage": "missing"}


def samples_table(rows: list[dict]) -> pa.Table:
    """Samples as a SAMPLES table (absent fields null)."""
    full = [{name: row.get(name) for name in SAMPLES.names} for row in rows]
    return to_table(pd.DataFrame(full, dtype=object), SAMPLES)


def samples_frame(rows: list[dict]) -> pd.DataFrame:
    """Samples as they come back from Parquet (numpy arrays in list columns)."""
    return samples_table(rows).to_pandas()


def parsed_table(rows: list[dict]) -> pa.Table:
    full = [{name: row.get(name) for name in PARSED.names} for row in rows]
    return to_table(pd.DataFrame(full, columns=PARSED.names, dtype=object), PARSED)


def parsed_frame(rows: list[dict]) -> pd.DataFrame:
    return parsed_table(rows).to_pandas()
