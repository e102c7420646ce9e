"""docs/protocol.md §3.2 compatible parse: stages 0–3 (jsontext), stage 4 keys, stage 5 boxes.

Image responses are parsed in two steps because the coordinate scale is a property of the
whole run (§3.3): `recover_image_compatible` does stages 0–4 and exposes the recovered box,
`finish_image_compatible` applies the run's scale, corner reordering and the §3.1 checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dualcog.parsing.fields import (
    BehaviorParse,
    ImageParse,
    Offered,
    VisibilityParse,
    box_is_finite,
    compatible_count,
    compatible_intervals,
    four_numbers,
    match_option_compatible,
    offered_ids,
)
from dualcog.parsing.jsontext import compatible_candidate
from dualcog.parsing.scale import NORM, apply_scale, is_scale_evidence, reorder_corners
from dualcog.parsing.strict import (
    ANSWERS_KEY,
    BOX_KEY,
    COUNT_KEY,
    ITEM_INTERVALS_KEY,
    ITEM_OPTION_KEY,
    OPTION_KEY,
    VISIBLE_INTERVALS_KEY,
)

# Canonical key first, then the documented aliases in the order docs/protocol.md lists them.
OPTION_KEYS = (OPTION_KEY, "choice", "answer", "option", "option_id")
BOX_KEYS = (BOX_KEY, "bbox", "box", "bbox_norm", "bounding_box")
ITEM_OPTION_LIST_KEY = "option_ids"


def _first_present(obj: dict, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if key in obj:
            return key
    return None


def _unwrap_top_array(candidate: Any) -> tuple[dict | None, bool]:
    """A top-level array of exactly one object unwraps to it (any task)."""
    if type(candidate) is dict:
        return candidate, False
    if type(candidate) is list and len(candidate) == 1 and type(candidate[0]) is dict:
        return candidate[0], True
    return None, False


def _candidate_failure(stage: str) -> str:
    return "no_json_object" if stage == "invalid" else "not_object"


def _compatible_stage(extraction: str, any_valid: bool, valid_field_needed_keys: bool) -> str:
    if not any_valid:
        return "invalid"
    return "keys" if valid_field_needed_keys else extraction


# --- image ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ImageRecovery:
    """Stages 0–4 of one image response, before the run-level scale is known."""

    extraction: str  # strict | fence | balanced | invalid
    option_id: str | None
    option_reason: str | None
    option_keys: bool  # a stage-4 rule was needed for the option
    box: list[float] | None  # 4 numbers as recovered; None with box_reason otherwise
    box_reason: str | None
    box_keys: bool

    @property
    def scale_evidence(self) -> list[float] | None:
        """The box as §3.3 counts it (4 finite non-negative numbers), else None."""
        return self.box if is_scale_evidence(self.box) else None


def recover_image_from_candidate(
    candidate: Any, extraction: str, offered: Offered
) -> ImageRecovery:
    obj, unwrapped = _unwrap_top_array(candidate)
    if obj is None:
        reason = _candidate_failure(extraction)
        return ImageRecovery(extraction, None, reason, False, None, reason, False)
    if ANSWERS_KEY in obj and OPTION_KEY not in obj and BOX_KEY not in obj:
        inner = obj[ANSWERS_KEY]
        if type(inner) is list and len(inner) == 1 and type(inner[0]) is dict:
            obj = inner[0]
            unwrapped = True

    option_key = _first_present(obj, OPTION_KEYS)
    if option_key is None:
        option_id, option_reason, option_keys = None, "key_absent", False
    else:
        option_id, option_reason, normalized = match_option_compatible(obj[option_key], offered)
        option_keys = unwrapped or normalized or option_key != OPTION_KEY

    box_key = _first_present(obj, BOX_KEYS)
    if box_key is None:
        box, box_reason, box_keys = None, "key_absent", False
    else:
        box = four_numbers(obj[box_key])
        box_reason = "not_4_numbers" if box is None else None
        box_keys = unwrapped or box_key != BOX_KEY
    return ImageRecovery(
        extraction, option_id, option_reason, option_keys, box, box_reason, box_keys
    )


def recover_image_compatible(raw: str, offered: Any) -> ImageRecovery:
    """Stages 0–4 of §3.2 for one image response."""
    candidate, extraction = compatible_candidate(raw)
    return recover_image_from_candidate(candidate, extraction, offered_ids(offered))


def finish_image_compatible(recovery: ImageRecovery, scale: str) -> ImageParse:
    """Stage 5: the run's scale, then corner reordering, then the §3.1 box checks."""
    option_valid = recovery.option_reason is None
    box = recovery.box
    box_reason = recovery.box_reason
    rescaled = reordered = False
    if box is not None:
        if not box_is_finite(box):
            box_reason = "non_finite"
        else:
            scaled, rescaled = apply_scale(box, scale)
            if scaled is None:
                box_reason = "ambiguous_scale"
            else:
                box, reordered = reorder_corners(scaled)
                x1, y1, x2, y2 = box
                if min(box) < 0.0 or max(box) > 1.0:
                    box_reason = "out_of_range"
                elif x1 == x2 or y1 == y2:
                    box_reason = "degenerate"
    box_valid = box_reason is None
    needed_keys = (option_valid and recovery.option_keys) or (box_valid and recovery.box_keys)
    return ImageParse(
        _compatible_stage(recovery.extraction, option_valid or box_valid, needed_keys),
        [recovery.option_id] if option_valid else [],
        option_valid,
        recovery.option_reason,
        box,
        box_valid,
        box_reason,
        rescaled,
        reordered,
        scale,
    )


def parse_image_compatible(raw: str, offered: Any, scale: str = NORM) -> ImageParse:
    """Compatible image parse of one response under a given run scale (default `norm`)."""
    return finish_image_compatible(recover_image_compatible(raw, offered), scale)


# --- behavior -------------------------------------------------------------------------------


def _behavior_item(item: Any, offered: Offered) -> tuple[dict | None, str | None, bool]:
    if type(item) is not dict:
        return None, "item_not_object", False
    keys = False
    if ITEM_OPTION_KEY in item:
        option_value = item[ITEM_OPTION_KEY]
    elif ITEM_OPTION_LIST_KEY in item:
        listed = item[ITEM_OPTION_LIST_KEY]
        if type(listed) is not list or len(listed) != 1:
            return None, "option_ids_not_single", False
        option_value = listed[0]
        keys = True
    else:
        return None, "item_key_absent", False
    option, reason, normalized = match_option_compatible(option_value, offered)
    if reason is not None:
        return None, reason, False
    if ITEM_INTERVALS_KEY not in item:
        return None, "item_key_absent", False
    intervals, reason, interval_keys = compatible_intervals(item[ITEM_INTERVALS_KEY])
    if reason is not None:
        return None, "not_interval_pairs", False
    return {"option_id": option, "intervals": intervals}, None, keys or normalized or interval_keys


def behavior_from_candidate(candidate: Any, extraction: str, offered: Offered) -> BehaviorParse:
    obj, unwrapped = _unwrap_top_array(candidate)
    if obj is None:
        return BehaviorParse("invalid", None, False, _candidate_failure(extraction))
    if ANSWERS_KEY not in obj:
        return BehaviorParse("invalid", None, False, "key_absent")
    answers = obj[ANSWERS_KEY]
    if type(answers) is not list:
        return BehaviorParse("invalid", None, False, "not_list")
    items = []
    keys = unwrapped
    for raw_item in answers:
        item, reason, item_keys = _behavior_item(raw_item, offered)
        if reason is not None:
            return BehaviorParse("invalid", None, False, reason)
        items.append(item)
        keys = keys or item_keys
    return BehaviorParse(_compatible_stage(extraction, True, keys), items, True, None)


def parse_behavior_compatible(raw: str, offered: Any) -> BehaviorParse:
    candidate, extraction = compatible_candidate(raw)
    return behavior_from_candidate(candidate, extraction, offered_ids(offered))


# --- visibility -----------------------------------------------------------------------------


def visibility_from_candidate(candidate: Any, extraction: str) -> VisibilityParse:
    obj, unwrapped = _unwrap_top_array(candidate)
    if obj is None:
        reason = _candidate_failure(extraction)
        return VisibilityParse("invalid", None, False, reason, None, False, reason)
    if COUNT_KEY in obj:
        count, count_reason, count_keys = compatible_count(obj[COUNT_KEY])
    else:
        count, count_reason, count_keys = None, "key_absent", False
    if VISIBLE_INTERVALS_KEY in obj:
        intervals, intervals_reason, interval_keys = compatible_intervals(
            obj[VISIBLE_INTERVALS_KEY]
        )
    else:
        intervals, intervals_reason, interval_keys = None, "key_absent", False
    count_valid = count_reason is None
    intervals_valid = intervals_reason is None
    needed_keys = (count_valid and (unwrapped or count_keys)) or (
        intervals_valid and (unwrapped or interval_keys)
    )
    return VisibilityParse(
        _compatible_stage(extraction, count_valid or intervals_valid, needed_keys),
        count,
        count_valid,
        count_reason,
        intervals,
        intervals_valid,
        intervals_reason,
    )


def parse_visibility_compatible(raw: str) -> VisibilityParse:
    candidate, extraction = compatible_candidate(raw)
    return visibility_from_candidate(candidate, extraction)
