"""One display record per benchmark sample of one model run (compatible parse).

Everything shown comes from the workflow's artifacts: gold answers from the samples, the
parsed fields the scorer consumed, the scored values from the scores table (IoU, hits,
matches checked against the scorer), and the raw response text.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

import pyarrow as pa

from dualcog.explorer.matches import (
    SCORED_COUNTS,
    ClassMatch,
    check_scored,
    option_matches,
    visibility_matches,
)
from dualcog.schemas import RECORD_FIELDS
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


FIELD_COLUMNS = {name: (f"{name}_valid", f"{name}_reason")
                 for name in ("option", "bbox", "answers", "count", "intervals")}  # fmt: skip


def _fields(parsed: Columns, at: int, names: Sequence[str]) -> list[dict[str, Any]]:
    """Per-field validity and the parser's reason, for the fields of one request kind."""
    out = []
    for name in names:
        valid, reason = FIELD_COLUMNS[name]
        text = parsed[reason][at]
        out.append({"name": name, "valid": parsed[valid][at] is True,
                    "reason": None if text is None else str(text)})  # fmt: skip
    return out


def _image_record(
    samples: Columns, i: int, roles: Sequence[str], parsed: Columns, p: int, scores: Columns, c: int
) -> dict[str, Any]:
    """What one model did with image sample `i` (its images' `roles`, its compatible parse at
    `p`, its scores at `c`); the sample's own parts (its images, options, gold) are its card
    (`sample_cards`): the page draws `boxes[k]` on the card's image k."""
    task = samples["task"][i]
    chosen = []
    if parsed["option_valid"][p]:
        chosen = [str(o) for o in _items(parsed["option_ids"][p])]
    selected = chosen[0] if len(chosen) == 1 else None
    pred_box = _box(parsed["bbox"][p]) if parsed["bbox_valid"][p] else None
    gold_box = _box(samples["gold_bbox"][i])
    gold_id = _text(samples["gold_option_id"][i])
    per_image = []
    if task == SELECTED_CANDIDATE_TASK:
        # Gold on the correct candidate; the prediction on the candidate the model chose,
        # with that candidate's own box: the one its IoU is computed against.
        candidate_box = None
        if selected is not None and selected != gold_id:
            for candidate in _items(samples["candidates"][i]):  # the last of an id, as a dict
                if candidate["option_id"] == selected:
                    candidate_box = _box(candidate["bbox"])
        for role in roles:
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
        per_image = [target if role == "target" else [] for role in roles]
    iou = scores["iou"][c]
    fields = _fields(parsed, p, ("option", "bbox"))
    fields[1]["rescaled"] = _flag(parsed["bbox_rescaled"][p])
    fields[1]["reordered"] = _flag(parsed["bbox_reordered"][p])
    return {
        "boxes": per_image,
        "chosen": chosen,
        "pred_box": pred_box,
        "iou": float(iou) if _present(iou) else None,
        "option_correct": bool(scores["option_correct"][c]),
        "bbox_hit": bool(scores["bbox_hit"][c]),
        "fields": fields,
        "outcomes": {task: _outcome(scores["semantic_ok"][c], scores["evidence_ok"][c])},
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


def _video_source(roles: Sequence[str], paths: Sequence[str]) -> str | None:
    return next((path for role, path in zip(roles, paths, strict=True) if role == "video"), None)


def _scored(scores: Columns, c: int) -> dict[str, Any]:
    """The interval counts of scores row `c`, as `check_scored` holds them."""
    return {name: scores[name][c] for name in SCORED_COUNTS}


def _level_view(classes, names, scores: Columns, c: int) -> dict[str, Any]:
    return {
        "classes": [_class_view(match, names) for match in classes],
        "tp": _int(scores["interval_tp"][c]),
        "fp": _int(scores["interval_fp"][c]),
        "fn": _int(scores["interval_fn"][c]),
        "f1": _number(scores["sample_f1_50"][c]),
    }


def _behavior_record(
    samples: Columns,
    i: int,
    options: Sequence[Sequence[str]],
    source: str | None,
    parsed: Columns,
    p: int,
    scores: Columns,
    score_at: Mapping[tuple[str, str], int],
    media: MediaIndex,
) -> dict[str, Any]:
    sid = samples["sample_id"][i]
    responded = parsed["stage"][p] not in (None, "missing")
    answers = _items(parsed["answers"][p]) if responded and parsed["answers_valid"][p] else None
    duration = _number(samples["duration_sec"][i])
    option_ids, labels, option_levels = options
    levels = option_matches(
        dict(zip(option_ids, option_levels, strict=True)),
        _items(samples["gold_items"][i]),
        answers,
        duration,
    )
    names = dict(zip(option_ids, labels, strict=True))
    out_levels, outcomes = {}, {}
    all_classes: list[ClassMatch] = []
    for level, classes in levels.items():
        task = f"{level}_behavior"
        c = score_at.get((sid, task), NO_ROW)
        check_scored(classes, _scored(scores, c), f"sample {sid}, {task}")
        all_classes += classes
        out_levels[level] = _level_view(classes, names, scores, c)
        out_levels[level]["set_exact"] = _flag(scores["set_exact"][c])
        outcomes[task] = _outcome(scores["semantic_ok"][c], scores["evidence_ok"][c])
    return {
        "levels": out_levels,
        "chosen": [a["option_id"] for a in answers] if answers else [],
        "strip": _strip(source, all_classes, media),
        "fields": _fields(parsed, p, ("answers",)),
        "outcomes": outcomes,
    }


def _int(value: Any) -> int | None:
    return int(value) if _present(value) else None


def _visibility_record(
    samples: Columns,
    i: int,
    source: str | None,
    parsed: Columns,
    p: int,
    scores: Columns,
    c: int,
    media: MediaIndex,
) -> dict[str, Any]:
    responded = parsed["stage"][p] not in (None, "missing")
    duration = _number(samples["duration_sec"][i])
    intervals_ok = responded and parsed["intervals_valid"][p] is True
    intervals = _items(parsed["visible_intervals"][p]) if intervals_ok else None
    gold = _items(samples["gold_visible_intervals"][i])
    match, _ = visibility_matches(gold, intervals, duration)
    check_scored([match], _scored(scores, c), f"sample {samples['sample_id'][i]}, {VISIBILITY}")
    count_ok = responded and parsed["count_valid"][p] is True
    return {
        "levels": {"visibility": _level_view([match], VISIBLE_NAMES, scores, c)},
        "count": _int(parsed["visible_count"][p]) if count_ok else None,
        "count_correct": bool(scores["count_correct"][c]),
        "strip": _strip(source, [match], media),
        "fields": _fields(parsed, p, ("count", "intervals")),
        "outcomes": {VISIBILITY: _outcome(scores["semantic_ok"][c], scores["evidence_ok"][c])},
    }


VISIBILITY = "landmark_visibility"
VISIBLE_NAMES = {"visible": "Landmark visible"}


def sample_cards(samples: pa.Table, media: MediaIndex) -> list[dict[str, Any]]:
    """What a card shows of each sample whatever the model (its id, question, images, options
    and gold), one per row of `samples`: written once beside all pages (`write_sample_cards`);
    each model's page adds its own record (`sample_records`) to the same position."""
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
# Of those, the lists of structs read field by field (`_nested`), and the fields read.
NESTED_COLUMNS = {"media": ("role", "resolved_path"), "options": ("option_id", "label", "level")}
CARD_COLUMNS = (
    "sample_id", "task", "difficulty", "user_prompt", "media", "options", "gold_option_id",
    "duration_sec", "gold_items", "gold_visible_count",
)  # fmt: skip
RESPONSE_COLUMNS = ("sample_id", "task", "raw_text", "status", "error_type", *RECORD_FIELDS)
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


def _rows(table: pa.Table, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows as dicts, built column-wise from Arrow (no pandas: a fifth of a CPU second of
    imports per job); only `columns` (those present) when given. For the sample cards, made
    once per run; a model's records read columns (`_columns`)."""
    present = table.column_names
    names = present if columns is None else [c for c in columns if c in present]
    values = [table.column(name).to_pylist() for name in names]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def _nested(column: pa.ChunkedArray, fields: Sequence[str]) -> tuple[list[int], Columns]:
    """A list-of-structs column read field by field: the rows' offsets (row i's items are
    positions offsets[i] to offsets[i + 1]) and each of `fields` over all items as one Python
    list, not a dict per item (which made these the costliest columns to read). A null row
    has no items (Arrow's null list slots span nothing), as `_items` reads it."""
    array = column.combine_chunks()
    items = array.values  # unsliced: the offsets index into it
    return array.offsets.to_pylist(), {name: items.field(name).to_pylist() for name in fields}


Columns = Mapping[str, list]  # a table's columns by name, as `_columns` makes them
NO_ROW = -1  # the position every such column holds None at: a row the table lacks


def _request_record(columns: Columns, r: int) -> dict[str, Any] | None:
    """What was posted for a sample (PROTOCOL §11.5), for its card; None where nothing was
    (built-in backends, replayed answers, a request not sent)."""
    if columns["request_sha256"][r] is None:
        return None
    switch = columns["request_switch"][r]
    reencoded = columns["request_reencoded"][r]
    return {
        "sha256": columns["request_sha256"][r],
        "temperature": columns["request_temperature"][r],
        "max_tokens": columns["request_max_tokens"][r],
        "switch": json.loads(switch) if switch else None,
        "prefill": columns["request_prefill"][r],
        "reencoded": json.loads(reencoded) if reencoded else None,
    }


def _columns(table: pa.Table, names: Sequence[str], parse: str | None = None) -> Columns:
    """The `names` columns of `table` as Python lists (one `to_pylist` each; a column the
    table lacks is None in every row), only the rows of one `parse` mode when given (picked
    from the converted lists; not with Arrow's compute functions: their first call
    loads them and numpy, and a Python scalar argument loads pandas). Each list ends with one
    more None, at position NO_ROW: a row a table lacks reads as all None."""
    present = set(table.column_names)
    keep = None if parse is None else [mode == parse for mode in table.column("parse").to_pylist()]
    rows = table.num_rows if keep is None else sum(keep)
    columns = {}
    for name in names:
        if name not in present:
            values = [None] * rows
        elif keep is None:
            values = table.column(name).to_pylist()
        else:
            values = list(compress(table.column(name).to_pylist(), keep))
        values.append(None)
        columns[name] = values
    return columns


def _positions(keys: Iterable, rows: int) -> dict[Any, int]:
    """Each key's row among the first `rows` (a `_columns` list's length less its closing
    None); the last row of a key wins."""
    return dict(zip(keys, range(rows), strict=False))  # the keys run on to the closing None


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
    its request outcome classes (REQUEST_OUTCOMES, written by its scoring job); a sample
    without an outcome row has no response row: a request error."""
    # Column-wise: one Python list per column read, and each table's rows found by position
    # (no dict per row of four tables: building those was a third of the records' CPU).
    sample_columns = _columns(samples, [c for c in SAMPLE_COLUMNS if c not in NESTED_COLUMNS])
    media_at, media_fields = _nested(samples.column("media"), NESTED_COLUMNS["media"])
    roles, paths = media_fields["role"], media_fields["resolved_path"]
    option_at, option_fields = _nested(samples.column("options"), NESTED_COLUMNS["options"])
    option_columns = [option_fields[name] for name in NESTED_COLUMNS["options"]]
    parsed_columns = _columns(parsed, PARSED_COLUMNS, DRAWN_PARSE)
    score_columns = _columns(scores, SCORE_COLUMNS, DRAWN_PARSE)
    response_columns = _columns(responses, RESPONSE_COLUMNS)
    parsed_ids, score_ids = parsed_columns["sample_id"], score_columns["sample_id"]
    parsed_at = _positions(parsed_ids, len(parsed_ids) - 1)
    score_keys = zip(score_ids, score_columns["task"], strict=True)
    score_at = _positions(score_keys, len(score_ids) - 1)
    response_ids = response_columns["sample_id"]
    response_at = _positions(response_ids, len(response_ids) - 1)  # the last row of an id wins
    ids, tasks, classes = (outcomes.column(n).to_pylist() for n in ("sample_id", "task", "outcome"))
    result_by = dict(zip(zip(ids, tasks, strict=True), classes, strict=True))
    run_tasks = set(response_columns["task"][:NO_ROW]) | set(parsed.column("task").to_pylist())
    raw_texts, statuses = response_columns["raw_text"], response_columns["status"]
    error_types, stages = response_columns["error_type"], parsed_columns["stage"]
    records: list[dict[str, Any] | None] = []
    sample_ids, sample_tasks = sample_columns["sample_id"], sample_columns["task"]
    for i in range(samples.num_rows):
        sid, task = sample_ids[i], sample_tasks[i]
        if task not in run_tasks:
            records.append(None)
            continue
        p = parsed_at.get(sid, NO_ROW)
        first, end = media_at[i], media_at[i + 1]
        if task in IMAGE_TASKS:
            c = score_at.get((sid, task), NO_ROW)
            body = _image_record(
                sample_columns, i, roles[first:end], parsed_columns, p, score_columns, c
            )
        else:
            source = _video_source(roles[first:end], paths[first:end])
            if task == "behavior":
                options = [values[option_at[i] : option_at[i + 1]] for values in option_columns]
                body = _behavior_record(
                    sample_columns, i, options, source, parsed_columns, p, score_columns,
                    score_at, media,
                )  # fmt: skip
            else:
                c = score_at.get((sid, task), NO_ROW)
                body = _visibility_record(
                    sample_columns, i, source, parsed_columns, p, score_columns, c, media
                )
        r = response_at.get(sid, NO_ROW)
        raw = raw_texts[r]
        stage, status = stages[p], statuses[r]
        record = {
            "id": sid,
            "task": task,
            "difficulty": sample_columns["difficulty"][i],
            "stage": stage if stage else "missing",
            "status": status if status else "missing",
            "error_type": error_types[r],
            "raw": raw[:RAW_TEXT_LIMIT] if raw else None,
            "raw_truncated": bool(raw and len(raw) > RAW_TEXT_LIMIT),
            "result": result_by.get((sid, task), "request_error"),  # dualcog.schemas.OUTCOMES
            "request": _request_record(response_columns, r),
        }
        record.update(body)
        records.append(record)
    return records
