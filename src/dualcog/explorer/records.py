"""One display record per benchmark sample of one model run (compatible parse).

Everything shown comes from the workflow's artifacts: gold answers from the samples, the
parsed fields the scorer consumed, the scored values from the scores table (IoU, hits,
matches checked against the scorer), and the raw response text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dualcog.explorer.matches import ClassMatch, behavior_matches, check_scored, visibility_matches
from dualcog.scoring.image import SELECTED_CANDIDATE_TASK
from dualcog.tasks import IMAGE_TASKS, REQUEST_BY_TASK

DRAWN_PARSE = "compatible"
RAW_TEXT_LIMIT = 20_000  # characters of raw response kept on the page (longer: truncated)
OUTCOME_BITS = {"answer": 1, "evidence": 2}  # index outcome = answer bit | evidence bit


def _present(value: Any) -> bool:
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _flag(value: Any) -> bool | None:
    return bool(value) if _present(value) else None


def _text(value: Any) -> str | None:
    return str(value) if _present(value) else None


def _number(value: Any) -> float | None:
    return float(value) if _present(value) else None


def _items(value: Any) -> list:
    return list(value) if value is not None and not isinstance(value, float) else []


def _box(value: Any) -> list[float] | None:
    items = _items(value)
    if len(items) != 4:
        return None
    box = [float(v) for v in items]
    return box if all(math.isfinite(v) for v in box) else None


@dataclass(frozen=True)
class MediaIndex:
    """Explorer media by source path: image thumbnails, video frame grids."""

    images: Mapping[str, tuple[str, int, int]]  # source -> (file, width, height)
    videos: Mapping[str, tuple[list[str], list[float]]]  # source -> (files, times)

    @classmethod
    def from_table(cls, table: pa.Table) -> MediaIndex:
        """From the `explorer_media` rule's index (results/explorer/media.parquet)."""
        images, videos = {}, {}
        names = ["kind", "source", "files", "times", "width", "height"]
        for kind, source, files, times, width, height in zip(
            *(table.column(n).to_pylist() for n in names), strict=True
        ):
            if kind == "image":
                images[source] = (str(files[0]), int(width), int(height))
            else:
                videos[source] = ([str(f) for f in files], [float(t) for t in times])
        return cls(images, videos)

    def nearest_frame(self, source: str, time: float) -> tuple[str, float] | None:
        files, times = self.videos.get(source, ([], []))
        if not files:
            return None
        # The first nearest, as numpy's argmin picks it, without making an array per call.
        i = min(range(len(times)), key=lambda k: abs(times[k] - time))
        return files[i], times[i]


def _outcome(answer: bool | None, evidence: bool | None) -> int:
    return OUTCOME_BITS["answer"] * bool(answer) + OUTCOME_BITS["evidence"] * bool(evidence)


def _fields(parsed: Mapping[str, Any], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per-field validity and the parser's reason, for the fields of one request kind."""
    out = []
    for name in names:
        valid = _flag(parsed.get(f"{name}_valid"))
        out.append(
            {"name": name, "valid": bool(valid), "reason": _text(parsed.get(f"{name}_reason"))}
        )
    return out


def _image_record(sample, parsed, score, media: MediaIndex) -> dict[str, Any]:
    task = sample["task"]
    bbox_valid = bool(_flag(parsed.get("bbox_valid")))
    option_valid = bool(_flag(parsed.get("option_valid")))
    chosen = [str(o) for o in _items(parsed.get("option_ids"))] if option_valid else []
    selected = chosen[0] if len(chosen) == 1 else None
    pred_box = _box(parsed.get("bbox")) if bbox_valid else None
    gold_box = _box(sample["gold_bbox"])
    candidate_box = {c["option_id"]: _box(c["bbox"]) for c in _items(sample["candidates"])}
    gold_id = _text(sample["gold_option_id"])
    images = []
    for item in _items(sample["media"]):
        role = item["role"]
        thumb = media.images.get(item["resolved_path"])
        boxes = []
        if task == SELECTED_CANDIDATE_TASK:
            # Gold on the correct candidate; the prediction on the candidate the model chose,
            # with that candidate's own box: the one its IoU is computed against.
            option = role.removeprefix("candidate_") if role.startswith("candidate_") else None
            if option is not None and option == gold_id and gold_box:
                boxes.append({"kind": "gold", "xyxy": gold_box})
            if option is not None and option == selected:
                if option != gold_id and candidate_box.get(option):
                    boxes.append({"kind": "scored-against", "xyxy": candidate_box[option]})
                if pred_box:
                    boxes.append({"kind": "pred", "xyxy": pred_box})
        elif role == "target":
            if gold_box:
                boxes.append({"kind": "gold", "xyxy": gold_box})
            if pred_box:
                boxes.append({"kind": "pred", "xyxy": pred_box})
        images.append(
            {
                "role": role,
                "file": thumb[0] if thumb else None,
                "width": thumb[1] if thumb else 4,
                "height": thumb[2] if thumb else 3,
                "boxes": boxes,
            }
        )
    options = [
        {"id": o["option_id"], "label": o["label"], "gold": o["option_id"] == gold_id,
         "chosen": o["option_id"] in chosen}
        for o in _items(sample["options"])
    ]  # fmt: skip
    fields = _fields(parsed, ("option", "bbox"))
    fields[1]["rescaled"] = _flag(parsed.get("bbox_rescaled"))
    fields[1]["reordered"] = _flag(parsed.get("bbox_reordered"))
    return {
        "images": images,
        "options": options,
        "chosen": chosen,
        "pred_box": pred_box,
        "iou": _number(score.get("iou")),
        "option_correct": bool(score.get("option_correct")),
        "bbox_hit": bool(score.get("bbox_hit")),
        "fields": fields,
        "outcomes": {task: _outcome(score.get("semantic_ok"), score.get("evidence_ok"))},
    }


def _class_view(match: ClassMatch, names: Mapping[str, str]) -> dict[str, Any]:
    return {
        "label": match.label,
        "name": names.get(match.label, match.label),
        "gold": match.gold,
        "pred": match.pred,
        "invalid_pred": match.invalid_pred,
        "matched": match.matched,
        "missed": match.missed,
        "false_positive": match.false_positive,
        "overlap": match.overlap,
    }


def _strip(source: str | None, classes: Sequence[ClassMatch], media: MediaIndex) -> list[dict]:
    """Frames at the predicted interval starts (nearest frame of the explorer's grid)."""
    strip, seen = [], set()
    for match in classes:
        for start, _ in match.pred:
            frame = media.nearest_frame(source, start) if source else None
            if frame and (match.label, frame[0]) not in seen:
                seen.add((match.label, frame[0]))
                strip.append({"label": match.label, "start": start, "file": frame[0],
                              "time": frame[1]})  # fmt: skip
    return sorted(strip, key=lambda f: (f["start"], f["label"]))


def _video_source(sample) -> str | None:
    return next((m["resolved_path"] for m in _items(sample["media"]) if m["role"] == "video"), None)


def _behavior_record(sample, parsed, scores_by_task, media: MediaIndex) -> dict[str, Any]:
    responded = _present(parsed.get("stage")) and parsed.get("stage") != "missing"
    valid = responded and bool(_flag(parsed.get("answers_valid")))
    answers = _items(parsed.get("answers")) if valid else None
    duration = _number(sample["duration_sec"])
    levels = behavior_matches(_items(sample["options"]), _items(sample["gold_items"]), answers,
                              duration)  # fmt: skip
    names = {o["option_id"]: o["label"] for o in _items(sample["options"])}
    gold_ids = {i["option_id"] for i in _items(sample["gold_items"])}
    chosen = [a["option_id"] for a in answers] if answers else []
    out_levels, outcomes = {}, {}
    all_classes: list[ClassMatch] = []
    for level, classes in levels.items():
        task = f"{level}_behavior"
        score = scores_by_task.get(task, {})
        check_scored(classes, score, f"sample {sample['sample_id']}, {task}")
        all_classes += classes
        out_levels[level] = {
            "classes": [_class_view(c, names) for c in classes],
            "tp": _int(score.get("interval_tp")),
            "fp": _int(score.get("interval_fp")),
            "fn": _int(score.get("interval_fn")),
            "f1": _number(score.get("sample_f1_50")),
            "set_exact": _flag(score.get("set_exact")),
        }
        outcomes[task] = _outcome(score.get("semantic_ok"), score.get("evidence_ok"))
    options = [
        {"id": o["option_id"], "label": o["label"], "level": _text(o["level"]),
         "gold": o["option_id"] in gold_ids, "chosen": o["option_id"] in chosen}
        for o in _items(sample["options"])
    ]  # fmt: skip
    return {
        "duration": duration,
        "options": options,
        "levels": out_levels,
        "strip": _strip(_video_source(sample), all_classes, media),
        "fields": _fields(parsed, ("answers",)),
        "outcomes": outcomes,
    }


def _int(value: Any) -> int | None:
    return int(value) if _present(value) else None


def _visibility_record(sample, parsed, score, media: MediaIndex) -> dict[str, Any]:
    responded = _present(parsed.get("stage")) and parsed.get("stage") != "missing"
    intervals_ok = responded and bool(_flag(parsed.get("intervals_valid")))
    count_ok = responded and bool(_flag(parsed.get("count_valid")))
    duration = _number(sample["duration_sec"])
    intervals = _items(parsed.get("visible_intervals")) if intervals_ok else None
    match, _ = visibility_matches(_items(sample["gold_visible_intervals"]), intervals, duration)
    check_scored([match], score, f"sample {sample['sample_id']}, landmark_visibility")
    return {
        "duration": duration,
        "levels": {
            "visibility": {
                "classes": [_class_view(match, {"visible": "Landmark visible"})],
                "tp": _int(score.get("interval_tp")),
                "fp": _int(score.get("interval_fp")),
                "fn": _int(score.get("interval_fn")),
                "f1": _number(score.get("sample_f1_50")),
            }
        },
        "count": _int(parsed.get("visible_count")) if count_ok else None,
        "gold_count": _int(sample["gold_visible_count"]),
        "count_correct": bool(score.get("count_correct")),
        "strip": _strip(_video_source(sample), [match], media),
        "fields": _fields(parsed, ("count", "intervals")),
        "outcomes": {
            "landmark_visibility": _outcome(score.get("semantic_ok"), score.get("evidence_ok"))
        },
    }


SAMPLE_COLUMNS = (
    "sample_id", "task", "difficulty", "scene_id", "landmark_description", "user_prompt",
    "media", "options", "gold_option_id", "gold_bbox", "candidates", "duration_sec",
    "gold_items", "gold_visible_count", "gold_visible_intervals",
)  # fmt: skip
RESPONSE_COLUMNS = ("sample_id", "task", "raw_text", "status", "error_type")
# Of the parsed and scored rows, the columns a record reads (the drawn parse's rows only).
PARSED_COLUMNS = (
    "sample_id", "task", "stage", "option_ids", "option_valid", "option_reason", "bbox",
    "bbox_valid", "bbox_reason", "bbox_rescaled", "bbox_reordered", "answers", "answers_valid",
    "answers_reason", "visible_count", "count_valid", "count_reason", "visible_intervals",
    "intervals_valid", "intervals_reason",
)  # fmt: skip
SCORE_COLUMNS = (
    "sample_id", "task", "iou", "option_correct", "bbox_hit", "semantic_ok", "evidence_ok",
    "interval_tp", "interval_fp", "interval_fn", "tiou_sum", "sample_f1_50", "set_exact",
    "count_correct",
)  # fmt: skip


def _rows(
    table: pa.Table, columns: Sequence[str] | None = None, parse: str | None = None
) -> list[dict[str, Any]]:
    """Rows as dicts, built column-wise from Arrow (no pandas: a fifth of a CPU second of
    imports per job); only `columns` (those present) when given, only the rows of one
    `parse` mode when given (rows picked before any dict is made; not with Arrow's compute
    functions: their first call loads them, and a Python scalar argument loads pandas)."""
    present = table.column_names
    names = present if columns is None else [c for c in columns if c in present]
    values = [table.column(name).to_pylist() for name in names]
    if parse is not None:
        keep = [i for i, mode in enumerate(table.column("parse").to_pylist()) if mode == parse]
        values = [[column[i] for i in keep] for column in values]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def _by_sample(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["sample_id"]: row for row in rows}


def sample_records(
    samples: pa.Table,
    parsed: pa.Table,
    scores: pa.Table,
    responses: pa.Table,
    media: MediaIndex,
    outcomes: pa.Table,
) -> list[dict[str, Any] | None]:
    """One record per row of `samples` (None where the run has no request of its task).

    The workflow's tables as Arrow: SAMPLES, the run's PARSED, SCORES and RESPONSES rows, and
    its request outcome classes (REQUEST_OUTCOMES, written by the `parse` job); a sample
    without an outcome row has no response row: a request error."""
    parsed_by = _by_sample(_rows(parsed, PARSED_COLUMNS, DRAWN_PARSE))
    scores_by: dict[str, dict[str, dict]] = {}
    for row in _rows(scores, SCORE_COLUMNS, DRAWN_PARSE):
        scores_by.setdefault(row["sample_id"], {})[row["task"]] = row
    response_rows = _rows(responses, RESPONSE_COLUMNS)
    response_by = _by_sample(response_rows)  # the last row of an id wins
    result_by = {(r["sample_id"], r["task"]): r["outcome"] for r in _rows(outcomes)}
    run_tasks = {r["task"] for r in response_rows} | set(parsed.column("task").to_pylist())
    records: list[dict[str, Any] | None] = []
    for sample in _rows(samples, SAMPLE_COLUMNS):
        sid, task = sample["sample_id"], sample["task"]
        if task not in run_tasks:
            records.append(None)
            continue
        p = parsed_by.get(sid, {})
        task_scores = scores_by.get(sid, {})
        if task in IMAGE_TASKS:
            body = _image_record(sample, p, task_scores.get(task, {}), media)
        elif task == "behavior":
            body = _behavior_record(sample, p, task_scores, media)
        else:
            body = _visibility_record(sample, p, task_scores.get(task, {}), media)
        response = response_by.get(sid, {})
        raw = _text(response.get("raw_text"))
        records.append(
            {
                "id": sid,
                "task": task,
                "modality": REQUEST_BY_TASK[task].modality,
                "difficulty": _text(sample["difficulty"]),
                "scene": _text(sample["scene_id"]),
                "landmark": _text(sample["landmark_description"]),
                "question": _text(sample["user_prompt"]),
                "stage": _text(p.get("stage")) or "missing",
                "status": _text(response.get("status")) or "missing",
                "error_type": _text(response.get("error_type")),
                "raw": raw[:RAW_TEXT_LIMIT] if raw else None,
                "raw_truncated": bool(raw and len(raw) > RAW_TEXT_LIMIT),
                "result": result_by.get((sid, task), "request_error"),  # dualcog.schemas.OUTCOMES
                **body,
            }
        )
    return records
