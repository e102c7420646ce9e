"""Parse one model run into the PARSED table (schemas.PARSED), plus its run-level audit info.

Row layout: image samples get three rows (strict, compatible, legacy), video samples two
(strict, compatible). A sample without an `ok` response gets stage `missing` in every mode.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from dualcog.parsing.compatible import finish_image_compatible
from dualcog.parsing.fields import (
    BehaviorParse,
    ImageParse,
    VisibilityParse,
    missing_behavior,
    missing_image,
    missing_visibility,
    offered_ids,
)
from dualcog.parsing.modes import (
    parse_behavior_modes,
    parse_visibility_modes,
    recover_image_modes,
)
from dualcog.parsing.scale import CONFIGURABLE_SCALES, over_one, resolve_run_scale
from dualcog.parsing.sources import STATUS_FIELDS, is_response
from dualcog.schemas import PARSED, table_from_columns
from dualcog.tasks import IMAGE_TASKS

BEHAVIOR_TASK = "behavior"
VISIBILITY_TASK = "landmark_visibility"
_IMAGE_TASKS = frozenset(IMAGE_TASKS)

STORED_COUNT_MAX = 2**63 - 1  # the PARSED `visible_count` column is int64

_BOOL_COLUMNS = (
    "all_valid",
    "option_valid",
    "bbox_valid",
    "bbox_rescaled",
    "bbox_reordered",
    "answers_valid",
    "count_valid",
    "intervals_valid",
)


def latest_ok_responses(responses: pa.Table | None) -> dict[str, str]:
    """sample_id -> raw text of its last row that is a response (parsing.sources)."""
    texts: dict[str, str] = {}
    if responses is None or responses.num_rows == 0:
        return texts
    # Whole columns as lists: iterating Arrow string columns element by element is slow.
    names = responses.column_names
    status_columns = [_values(responses, field) for field in STATUS_FIELDS if field in names]
    for sample_id, raw, *statuses in zip(
        _values(responses, "sample_id"),
        _values(responses, "raw_text"),
        *status_columns,
        strict=True,
    ):
        if is_response(tuple(statuses), raw):
            texts[sample_id] = raw
    return texts


def offered_option_ids(options: Any) -> tuple[str, ...]:
    """Option ids of a samples `options` cell (list / numpy array of dicts, or null)."""
    if options is None or isinstance(options, float):
        return ()
    return tuple(option["option_id"] for option in options)


class _Rows:
    """Row tuples in PARSED column order, turned into columns once."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def image(self, sample_id: str, task: str, parse: str, r: ImageParse) -> None:
        # One tuple display rather than a sum of tuples: three rows per image sample.
        self.rows.append(
            (
                sample_id, task, parse, r.stage, r.option_valid and r.bbox_valid,
                r.option_ids, r.option_valid, r.option_reason,
                r.bbox, r.bbox_valid, r.bbox_reason, r.bbox_rescaled, r.bbox_reordered,
                r.run_scale,
                *_NO_BEHAVIOR,
                *_NO_VISIBILITY,
            )
        )  # fmt: skip

    def behavior(self, sample_id: str, task: str, parse: str, r: BehaviorParse) -> None:
        self.rows.append(
            (sample_id, task, parse, r.stage, r.answers_valid)
            + _NO_IMAGE
            + (r.answers, r.answers_valid, r.answers_reason)
            + _NO_VISIBILITY
        )

    def visibility(self, sample_id: str, task: str, parse: str, r: VisibilityParse) -> None:
        count = r.visible_count
        if count is not None and count > STORED_COUNT_MAX:
            # Valid (any integer is) but beyond the int64 column; gold counts are small, so
            # the saturated value is as wrong as the real one (docs/decisions.md).
            count = STORED_COUNT_MAX
        self.rows.append(
            (sample_id, task, parse, r.stage, r.count_valid and r.intervals_valid)
            + _NO_IMAGE
            + _NO_BEHAVIOR
            + (count, r.count_valid, r.count_reason)
            + (r.visible_intervals, r.intervals_valid, r.intervals_reason)
        )

    def table(self) -> pa.Table:
        """The rows as a PARSED Arrow table: a NaN (e.g. a box coordinate parsed from `NaN`)
        becomes a null."""
        columns = list(zip(*self.rows, strict=True)) if self.rows else [()] * len(PARSED)
        return table_from_columns(columns, PARSED)

    def stage_counts(self) -> dict[str, dict[str, int]]:
        """Rows per stage in each parse mode (modes in a fixed order, stages sorted)."""
        counts: dict[str, Counter] = {m: Counter() for m in ("strict", "compatible", "legacy")}
        for row in self.rows:
            counts[row[_PARSE]][row[_STAGE]] += 1
        return {mode: dict(sorted(c.items())) for mode, c in counts.items()}

    def image_compatible_stages(self) -> dict[str, int]:
        """Image samples per compatible-parse stage (stages sorted): the audit table's counts,
        so that the tables need not read every parsed file again."""
        counts = Counter(
            row[_STAGE]
            for row in self.rows
            if row[_PARSE] == "compatible" and row[_TASK] in _IMAGE_TASKS
        )
        return dict(sorted(counts.items()))


_IMAGE_COLUMNS = (
    "option_ids",
    "option_valid",
    "option_reason",
    "bbox",
    "bbox_valid",
    "bbox_reason",
    "bbox_rescaled",
    "bbox_reordered",
    "run_scale",
)
_BEHAVIOR_COLUMNS = ("answers", "answers_valid", "answers_reason")
_VISIBILITY_COLUMNS = (
    "visible_count",
    "count_valid",
    "count_reason",
    "visible_intervals",
    "intervals_valid",
    "intervals_reason",
)
_TASK, _PARSE, _STAGE = (PARSED.names.index(n) for n in ("task", "parse", "stage"))
_NO_IMAGE = (None,) * len(_IMAGE_COLUMNS)
_NO_BEHAVIOR = (None,) * len(_BEHAVIOR_COLUMNS)
_NO_VISIBILITY = (None,) * len(_VISIBILITY_COLUMNS)


def parse_run(
    samples: pa.Table, responses: pa.Table | None, bbox_scale: str | None = None
) -> tuple[pa.Table, dict]:
    """Parse one model run in every mode.

    `samples`: the SAMPLES rows of the tasks this run answered (at least sample_id, task,
    options); `responses`: RESPONSES rows (at least sample_id, raw_text and the status
    fields present; a sample without an `ok` row is missing); `bbox_scale`: the model
    config's declared scale (norm | per_mille | pixel640x480), skipping the §3.3 inference.
    Returns (PARSED table, run info: scale, scale_source, n_boxes, n_over_one, stage_counts
    per parse mode, image_compatible_stages).
    """
    rows, info = _parse_rows(samples, responses, bbox_scale)
    return rows.table(), info


def _values(table: pa.Table, name: str) -> list:
    """A column as a Python list."""
    return table.column(name).to_pylist()


def _parse_rows(
    samples: pa.Table,
    responses: pa.Table | None,
    bbox_scale: str | None,
) -> tuple[_Rows, dict]:
    if bbox_scale is not None and bbox_scale not in CONFIGURABLE_SCALES:
        raise ValueError(f"bbox_scale must be one of {CONFIGURABLE_SCALES}, got {bbox_scale!r}")
    texts = latest_ok_responses(responses)

    # Pass 1: everything but the compatible image boxes, which wait for the run's scale.
    parsed: list[tuple[str, str, Any]] = []
    evidence: list[list[float]] = []
    for sample_id, task, options in zip(
        _values(samples, "sample_id"),
        _values(samples, "task"),
        _values(samples, "options"),
        strict=True,
    ):
        raw = texts.get(sample_id)
        if task in _IMAGE_TASKS:
            if raw is None:
                modes: Any = None
            else:
                modes = recover_image_modes(raw, offered_ids(offered_option_ids(options)))
                box = modes[1].scale_evidence
                if box is not None:
                    evidence.append(box)
        elif task == BEHAVIOR_TASK:
            if raw is None:
                modes = (missing_behavior(), missing_behavior())
            else:
                modes = parse_behavior_modes(raw, offered_option_ids(options))
        elif task == VISIBILITY_TASK:
            modes = (
                (missing_visibility(), missing_visibility())
                if raw is None
                else parse_visibility_modes(raw)
            )
        else:
            raise ValueError(f"sample {sample_id!r}: unknown task {task!r}")
        parsed.append((sample_id, task, modes))

    n_over_one = len(over_one(evidence))
    if bbox_scale is None:
        scale, scale_source = resolve_run_scale(evidence), "inferred"
    else:
        scale, scale_source = bbox_scale, "config"

    # Pass 2: rows in sample order.
    columns = _Rows()
    for sample_id, task, modes in parsed:
        if task in _IMAGE_TASKS:
            if modes is None:
                strict, compatible, legacy = missing_image(), missing_image(scale), missing_image()
            else:
                strict, recovery, legacy = modes
                compatible = finish_image_compatible(recovery, scale)
            columns.image(sample_id, task, "strict", strict)
            columns.image(sample_id, task, "compatible", compatible)
            columns.image(sample_id, task, "legacy", legacy)
        elif task == BEHAVIOR_TASK:
            columns.behavior(sample_id, task, "strict", modes[0])
            columns.behavior(sample_id, task, "compatible", modes[1])
        else:
            columns.visibility(sample_id, task, "strict", modes[0])
            columns.visibility(sample_id, task, "compatible", modes[1])

    info = {
        "scale": scale,
        "scale_source": scale_source,
        "n_boxes": len(evidence),
        "n_over_one": n_over_one,
        "stage_counts": columns.stage_counts(),
        "image_compatible_stages": columns.image_compatible_stages(),
    }
    return columns, info
