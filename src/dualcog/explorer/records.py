"""One display record per benchmark sample of one model run (compatible parse).

Everything shown comes from the workflow's artifacts: gold answers from the samples, the
parsed fields the scorer consumed, the scored values from the scores table (IoU, hits,
matches checked against the scorer), and the raw response text.
"""

from __future__ import annotations

import gc
import math
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress
from typing import Any

import pyarrow as pa

from dualcog.explorer.matches import ClassMatch, behavior_matches, check_scored, visibility_matches
from dualcog.tasks import IMAGE_TASKS, REQUEST_BY_TASK, SELECTED_CANDIDATE_TASK

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
    if value is None or isinstance(value, float) or len(value) != 4:
        return None
    box = [float(v) for v in value]
    return box if all(map(math.isfinite, box)) else None


@dataclass(frozen=True)
class MediaIndex:
    """Explorer media by source path: image thumbnails, video frame grids (sprite sheets)."""

    images: Mapping[str, tuple[str, int, int]]  # source -> (file, width, height)
    # source -> (sprite sheet, grid times, frame width, frame height): frame k is the sheet's
    # k-th cell from the left
    videos: Mapping[str, tuple[str, list[float], int, int]]

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
            elif files:
                videos[source] = (str(files[0]), [float(t) for t in times], int(width), int(height))
        return cls(images, videos)

    def nearest_frame(self, source: str, time: float) -> tuple[int, float] | None:
        """(grid frame, its time) nearest `time` in the video's grid."""
        video = self.videos.get(source)
        if video is None or not video[1]:
            return None
        times = video[1]
        # The first nearest, as numpy's argmin picks it: grid times rise (the last may repeat),
        # so it is the first frame of the nearer neighbour's time, the earlier one on a tie.
        after = bisect_left(times, time)
        if after == len(times) or (after > 0 and time - times[after - 1] <= times[after] - time):
            after = bisect_left(times, times[after - 1])
        return after, times[after]


def _outcome(answer: bool | None, evidence: bool | None) -> int:
    return OUTCOME_BITS["answer"] * bool(answer) + OUTCOME_BITS["evidence"] * bool(evidence)


def _reason(parsed: Mapping[str, Any], name: str) -> str | None:
    reason = parsed.get(name)
    return None if reason is None else str(reason)


FIELD_COLUMNS = {name: (f"{name}_valid", f"{name}_reason")
                 for name in ("option", "bbox", "answers", "count", "intervals")}  # fmt: skip


def _fields(parsed: Mapping[str, Any], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per-field validity and the parser's reason, for the fields of one request kind."""
    out = []
    for name in names:
        valid, reason = FIELD_COLUMNS[name]
        out.append({"name": name, "valid": parsed.get(valid) is True,
                    "reason": _reason(parsed, reason)})  # fmt: skip
    return out


def _image_record(sample, parsed, score) -> dict[str, Any]:
    """What one model did with one image sample; the sample's own parts (its images, options,
    gold) are its card (`sample_cards`): the page draws `boxes[i]` on the card's image i."""
    task = sample["task"]
    chosen = []
    if parsed.get("option_valid"):
        chosen = [str(o) for o in _items(parsed.get("option_ids"))]
    selected = chosen[0] if len(chosen) == 1 else None
    pred_box = _box(parsed.get("bbox")) if parsed.get("bbox_valid") else None
    gold_box = _box(sample["gold_bbox"])
    gold_id = _text(sample["gold_option_id"])
    per_image = []
    if task == SELECTED_CANDIDATE_TASK:
        # Gold on the correct candidate; the prediction on the candidate the model chose,
        # with that candidate's own box: the one its IoU is computed against.
        candidate_box = None
        if selected is not None and selected != gold_id:
            for candidate in _items(sample["candidates"]):  # the last of an id, as a dict keeps
                if candidate["option_id"] == selected:
                    candidate_box = _box(candidate["bbox"])
        for item in _items(sample["media"]):
            role = item["role"]
            option = role[len("candidate_") :] if role.startswith("candidate_") else None
            boxes = []
            if option is not None and option == gold_id and gold_box:
                boxes.append({"kind": "gold", "xyxy": gold_box})
            if option is not None and option == selected:
                if candidate_box:
                    boxes.append({"kind": "scored-against", "xyxy": candidate_box})
                if pred_box:
                    boxes.append({"kind": "pred", "xyxy": pred_box})
            per_image.append(boxes)
    else:
        target = []
        if gold_box:
            target.append({"kind": "gold", "xyxy": gold_box})
        if pred_box:
            target.append({"kind": "pred", "xyxy": pred_box})
        per_image = [target if item["role"] == "target" else [] for item in _items(sample["media"])]
    iou = score.get("iou")
    fields = _fields(parsed, ("option", "bbox"))
    fields[1]["rescaled"] = _flag(parsed.get("bbox_rescaled"))
    fields[1]["reordered"] = _flag(parsed.get("bbox_reordered"))
    return {
        "boxes": per_image,
        "chosen": chosen,
        "pred_box": pred_box,
        "iou": float(iou) if _present(iou) else None,
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
    """Frames at the predicted interval starts (nearest frame of the explorer's grid): cell
    `frame` of the sprite sheet `file`, `frames` cells of `width` x `height`."""
    if source is None or not any(match.pred for match in classes):
        return []
    video = media.videos.get(source)
    strip, seen = [], set()
    for match in classes:
        for start, _ in match.pred:
            frame = media.nearest_frame(source, start)
            if frame and (match.label, frame[0]) not in seen:
                seen.add((match.label, frame[0]))
                strip.append({"label": match.label, "start": start, "file": video[0],
                              "frame": frame[0], "frames": len(video[1]), "width": video[2],
                              "height": video[3], "time": frame[1]})  # fmt: skip
    return sorted(strip, key=lambda f: (f["start"], f["label"]))


def _video_source(sample) -> str | None:
    return next((m["resolved_path"] for m in _items(sample["media"]) if m["role"] == "video"), None)


def _level_view(classes, names, score) -> dict[str, Any]:
    return {
        "classes": [_class_view(c, names) for c in classes],
        "tp": _int(score.get("interval_tp")),
        "fp": _int(score.get("interval_fp")),
        "fn": _int(score.get("interval_fn")),
        "f1": _number(score.get("sample_f1_50")),
    }


def _behavior_record(sample, parsed, scores_by_task, media: MediaIndex) -> dict[str, Any]:
    responded = parsed.get("stage") not in (None, "missing")
    answers = _items(parsed.get("answers")) if responded and parsed.get("answers_valid") else None
    duration = _number(sample["duration_sec"])
    options = _items(sample["options"])
    levels = behavior_matches(options, _items(sample["gold_items"]), answers, duration)
    names = {o["option_id"]: o["label"] for o in options}
    out_levels, outcomes = {}, {}
    all_classes: list[ClassMatch] = []
    for level, classes in levels.items():
        task = f"{level}_behavior"
        score = scores_by_task.get(task, {})
        check_scored(classes, score, f"sample {sample['sample_id']}, {task}")
        all_classes += classes
        out_levels[level] = _level_view(classes, names, score)
        out_levels[level]["set_exact"] = _flag(score.get("set_exact"))
        outcomes[task] = _outcome(score.get("semantic_ok"), score.get("evidence_ok"))
    return {
        "levels": out_levels,
        "chosen": [a["option_id"] for a in answers] if answers else [],
        "strip": _strip(_video_source(sample), all_classes, media),
        "fields": _fields(parsed, ("answers",)),
        "outcomes": outcomes,
    }


def _int(value: Any) -> int | None:
    return int(value) if _present(value) else None


def _visibility_record(sample, parsed, score, media: MediaIndex) -> dict[str, Any]:
    responded = parsed.get("stage") not in (None, "missing")
    duration = _number(sample["duration_sec"])
    intervals_ok = responded and parsed.get("intervals_valid") is True
    intervals = _items(parsed.get("visible_intervals")) if intervals_ok else None
    match, _ = visibility_matches(_items(sample["gold_visible_intervals"]), intervals, duration)
    check_scored([match], score, f"sample {sample['sample_id']}, landmark_visibility")
    count_ok = responded and parsed.get("count_valid") is True
    return {
        "levels": {"visibility": _level_view([match], VISIBLE_NAMES, score)},
        "count": _int(parsed.get("visible_count")) if count_ok else None,
        "count_correct": bool(score.get("count_correct")),
        "strip": _strip(_video_source(sample), [match], media),
        "fields": _fields(parsed, ("count", "intervals")),
        "outcomes": {
            "landmark_visibility": _outcome(score.get("semantic_ok"), score.get("evidence_ok"))
        },
    }


VISIBLE_NAMES = {"visible": "Landmark visible"}


def sample_cards(samples: pa.Table, media: MediaIndex) -> list[dict[str, Any]]:
    """What a card shows of each sample whatever the model (its id, question, images, options
    and gold), one per row of `samples`: written once beside all pages (`write_sample_cards`);
    each model's page adds its own record (`sample_records`) to the same position."""
    with without_cyclic_gc():
        return [_card(sample, media) for sample in _rows(samples, CARD_COLUMNS)]


def _card(sample: Mapping[str, Any], media: MediaIndex) -> dict[str, Any]:
    task = sample["task"]
    card: dict[str, Any] = {
        "id": sample["sample_id"],
        "task": task,
        "modality": REQUEST_BY_TASK[task].modality,
        "difficulty": _text(sample["difficulty"]),
        "question": _text(sample["user_prompt"]),
    }
    if task in IMAGE_TASKS:
        images = []
        for item in _items(sample["media"]):
            thumb = media.images.get(item["resolved_path"])
            images.append({"role": item["role"], "file": thumb[0] if thumb else None,
                           "width": thumb[1] if thumb else 4,
                           "height": thumb[2] if thumb else 3})  # fmt: skip
        gold_id = _text(sample["gold_option_id"])
        card["images"] = images
        card["options"] = [
            {"id": o["option_id"], "label": o["label"], "gold": o["option_id"] == gold_id}
            for o in _items(sample["options"])
        ]
    elif task == "behavior":
        gold_ids = {i["option_id"] for i in _items(sample["gold_items"])}
        card["duration"] = _number(sample["duration_sec"])
        card["options"] = [
            {"id": o["option_id"], "label": o["label"], "level": _text(o["level"]),
             "gold": o["option_id"] in gold_ids}
            for o in _items(sample["options"])
        ]  # fmt: skip
    else:
        card["duration"] = _number(sample["duration_sec"])
        card["gold_count"] = _int(sample["gold_visible_count"])
    return card


# Of the samples, the columns a model's records read, and those its cards show.
SAMPLE_COLUMNS = (
    "sample_id", "task", "difficulty", "media", "options", "gold_option_id", "gold_bbox",
    "candidates", "duration_sec", "gold_items", "gold_visible_intervals",
)  # fmt: skip
CARD_COLUMNS = (
    "sample_id", "task", "difficulty", "user_prompt", "media", "options", "gold_option_id",
    "duration_sec", "gold_items", "gold_visible_count",
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
        keep = [mode == parse for mode in table.column("parse").to_pylist()]
        values = [list(compress(column, keep)) for column in values]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def _by_sample(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["sample_id"]: row for row in rows}


@contextmanager
def without_cyclic_gc() -> Iterator[None]:
    """Records are trees of fresh lists and dicts, freed by reference counting; the cyclic
    collector's passes over the growing heap were a third of their build (docs/performance.md,
    "Explorer"). Restored on the way out."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def sample_records(
    samples: pa.Table,
    parsed: pa.Table,
    scores: pa.Table,
    responses: pa.Table,
    media: MediaIndex,
    outcomes: pa.Table,
) -> list[dict[str, Any] | None]:
    """One model's record per row of `samples` (None where the run has no request of its
    task): what the model answered, how it parsed and scored; the sample's own parts are its
    card (`sample_cards`). `id`, `task` and `difficulty` are there for the page's index.

    The workflow's tables as Arrow: SAMPLES, the run's PARSED, SCORES and RESPONSES rows, and
    its request outcome classes (REQUEST_OUTCOMES, written by the `parse` job); a sample
    without an outcome row has no response row: a request error."""
    with without_cyclic_gc():
        return _sample_records(samples, parsed, scores, responses, media, outcomes)


def _sample_records(samples, parsed, scores, responses, media, outcomes):
    parsed_by = _by_sample(_rows(parsed, PARSED_COLUMNS, DRAWN_PARSE))
    scores_by: dict[str, dict[str, dict]] = {}
    for row in _rows(scores, SCORE_COLUMNS, DRAWN_PARSE):
        scores_by.setdefault(row["sample_id"], {})[row["task"]] = row
    response_rows = _rows(responses, RESPONSE_COLUMNS)
    response_by = _by_sample(response_rows)  # the last row of an id wins
    ids, tasks, classes = (outcomes.column(n).to_pylist() for n in ("sample_id", "task", "outcome"))
    result_by = dict(zip(zip(ids, tasks, strict=True), classes, strict=True))
    run_tasks = {r["task"] for r in response_rows} | set(parsed.column("task").to_pylist())
    no_row: dict[str, Any] = {}
    records: list[dict[str, Any] | None] = []
    for sample in _rows(samples, SAMPLE_COLUMNS):
        sid, task = sample["sample_id"], sample["task"]
        if task not in run_tasks:
            records.append(None)
            continue
        p = parsed_by.get(sid, no_row)
        task_scores = scores_by.get(sid, no_row)
        if task in IMAGE_TASKS:
            body = _image_record(sample, p, task_scores.get(task, no_row))
        elif task == "behavior":
            body = _behavior_record(sample, p, task_scores, media)
        else:
            body = _visibility_record(sample, p, task_scores.get(task, no_row), media)
        response = response_by.get(sid, no_row)
        raw = response.get("raw_text")
        stage, status = p.get("stage"), response.get("status")
        records.append(
            {
                "id": sid,
                "task": task,
                "difficulty": sample["difficulty"],
                "stage": stage if stage else "missing",
                "status": status if status else "missing",
                "error_type": response.get("error_type"),
                "raw": raw[:RAW_TEXT_LIMIT] if raw else None,
                "raw_truncated": bool(raw and len(raw) > RAW_TEXT_LIMIT),
                "result": result_by.get((sid, task), "request_error"),  # dualcog.schemas.OUTCOMES
                **body,
            }
        )
    return records
