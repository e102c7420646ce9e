"""`score_samples`: one model run's parsed responses against the benchmark samples."""

from __future__ import annotations

import pandas as pd

from dualcog.scoring.image import score_image_rows
from dualcog.scoring.schema import conform_scores, empty_scores
from dualcog.scoring.video import score_behavior_rows, score_visibility_rows
from dualcog.tasks import IMAGE_TASKS, PARSE_MODES, REQUEST_BY_TASK

VIDEO_PARSE_MODES = ("strict", "compatible")  # legacy exists for image tasks only (§3.4)

_PARSED_COLUMNS = (
    "stage", "all_valid", "option_ids", "option_valid", "bbox", "bbox_valid", "answers",
    "answers_valid", "visible_count", "count_valid", "visible_intervals", "intervals_valid",
)  # fmt: skip
_FLAGS = ("all_valid", "option_valid", "bbox_valid", "answers_valid", "count_valid",
          "intervals_valid")  # fmt: skip
_SAMPLE_COLUMNS = (
    "sample_id", "task", "difficulty", "options", "gold_option_id", "gold_bbox", "candidates",
    "gold_option_ids", "answer_bbox", "composite_mission", "duration_sec", "gold_items",
    "gold_visible_count", "gold_visible_intervals",
)  # fmt: skip


def parse_modes_of(task: str) -> tuple[str, ...]:
    """Parse modes a request kind is scored in."""
    return PARSE_MODES if task in IMAGE_TASKS else VIDEO_PARSE_MODES


def expected_rows(samples: pd.DataFrame, parses: tuple[str, ...] = PARSE_MODES) -> pd.DataFrame:
    """Every (sample, parse mode) the run is scored on, sample columns attached."""
    unknown = set(samples["task"]) - set(REQUEST_BY_TASK)
    if unknown:
        raise ValueError(f"samples hold unknown request kinds: {sorted(unknown)}")
    if samples["sample_id"].duplicated().any():
        raise ValueError("samples hold duplicate sample ids")
    base = samples.reindex(columns=list(_SAMPLE_COLUMNS)).reset_index(drop=True)
    parts = []
    for parse in parses:
        tasks_in_mode = [task for task in REQUEST_BY_TASK if parse in parse_modes_of(task)]
        parts.append(base[base["task"].isin(tasks_in_mode)].assign(parse=parse))
    return pd.concat(parts, ignore_index=True) if parts else base.iloc[:0].assign(parse=None)


def attach_parsed(expected: pd.DataFrame, parsed: pd.DataFrame) -> pd.DataFrame:
    """Join parsed fields onto expected rows; absent rows and stage `missing` are unanswered."""
    keys = ["sample_id", "parse"]
    if parsed.duplicated(keys).any():
        raise ValueError("parsed holds several rows for one (sample_id, parse)")
    fields = parsed.reindex(columns=keys + list(_PARSED_COLUMNS))
    merged = expected.merge(fields, on=keys, how="left", validate="one_to_one")
    stage = merged["stage"]
    merged["responded"] = (stage.notna() & (stage != "missing")).to_numpy(bool)
    for flag in _FLAGS:
        merged[flag] = merged[flag].fillna(False).astype(bool) & merged["responded"]
    return merged


def score_samples(
    samples: pd.DataFrame, parsed: pd.DataFrame, parses: tuple[str, ...] = PARSE_MODES
) -> pd.DataFrame:
    """Per-sample, per-parse score rows (schema `SCORES`) of one model run.

    Every sample of `samples` is scored in every parse mode of its modality (image: strict,
    compatible, legacy; video: strict, compatible) found in `parses`; a sample without a
    parsed row there is a missing response. Behavior samples give a composite_behavior and
    an atomic_behavior row.
    """
    rows = attach_parsed(expected_rows(samples, parses), parsed)
    parts = []
    image = rows[rows["task"].isin(IMAGE_TASKS)]
    if len(image):
        parts.append(score_image_rows(image))
    behavior = rows[rows["task"] == "behavior"]
    if len(behavior):
        parts.append(score_behavior_rows(behavior))
    visibility = rows[rows["task"] == "landmark_visibility"]
    if len(visibility):
        parts.append(score_visibility_rows(visibility))
    if not parts:
        return empty_scores()
    return conform_scores(pd.concat(parts, ignore_index=True))
