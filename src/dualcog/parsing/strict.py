"""docs/protocol.md §3.1 strict parse: `json.loads(raw.strip())` must give an object; exact keys."""

from __future__ import annotations

from typing import Any

from dualcog.parsing.fields import (
    BehaviorParse,
    ImageParse,
    Offered,
    VisibilityParse,
    check_strict_box,
    match_option_strict,
    offered_ids,
    strict_count,
    strict_intervals,
)
from dualcog.parsing.jsontext import NOT_JSON, loads_json

OPTION_KEY = "answer_option_id"
BOX_KEY = "bbox_xyxy_norm"
ANSWERS_KEY = "answers"
ITEM_OPTION_KEY = "option_id"
ITEM_INTERVALS_KEY = "intervals_sec"
COUNT_KEY = "visible_count"
VISIBLE_INTERVALS_KEY = "visible_intervals_sec"


def object_failure(value: Any) -> str:
    """Reason code for a strict-mode value that is not a JSON object."""
    return "no_json_object" if value is NOT_JSON else "not_object"


def stage_from_validity(any_valid: bool) -> str:
    # Strict has one extraction route; the row is `invalid` only when no field survived.
    return "strict" if any_valid else "invalid"


def image_strict_from_value(value: Any, offered: Offered) -> ImageParse:
    if type(value) is not dict:
        reason = object_failure(value)
        return ImageParse("invalid", [], False, reason, None, False, reason)
    if OPTION_KEY in value:
        option, option_reason = match_option_strict(value[OPTION_KEY], offered)
    else:
        option, option_reason = None, "key_absent"
    if BOX_KEY in value:
        box, box_reason = check_strict_box(value[BOX_KEY])
    else:
        box, box_reason = None, "key_absent"
    option_valid = option_reason is None
    box_valid = box_reason is None
    return ImageParse(
        stage_from_validity(option_valid or box_valid),
        [option] if option_valid else [],
        option_valid,
        option_reason,
        box,
        box_valid,
        box_reason,
    )


def parse_image_strict(raw: str, offered: Any) -> ImageParse:
    """Strict image parse of one response; `offered` = the sample's option ids."""
    return image_strict_from_value(loads_json(raw.strip()), offered_ids(offered))


def behavior_answers_strict(value: Any, offered: Offered) -> tuple[list[dict] | None, str | None]:
    """The §2 behavior structure with exact keys; any bad item invalidates the whole answer."""
    if ANSWERS_KEY not in value:
        return None, "key_absent"
    answers = value[ANSWERS_KEY]
    if type(answers) is not list:
        return None, "not_list"
    items = []
    for item in answers:
        if type(item) is not dict:
            return None, "item_not_object"
        if ITEM_OPTION_KEY not in item or ITEM_INTERVALS_KEY not in item:
            return None, "item_key_absent"
        option, reason = match_option_strict(item[ITEM_OPTION_KEY], offered)
        if reason is not None:
            return None, reason
        intervals, reason = strict_intervals(item[ITEM_INTERVALS_KEY])
        if reason is not None:
            return None, "not_interval_pairs"
        items.append({"option_id": option, "intervals": intervals})
    return items, None


def behavior_strict_from_value(value: Any, offered: Offered) -> BehaviorParse:
    if type(value) is not dict:
        return BehaviorParse("invalid", None, False, object_failure(value))
    answers, reason = behavior_answers_strict(value, offered)
    valid = reason is None
    return BehaviorParse(stage_from_validity(valid), answers, valid, reason)


def parse_behavior_strict(raw: str, offered: Any) -> BehaviorParse:
    return behavior_strict_from_value(loads_json(raw.strip()), offered_ids(offered))


def visibility_strict_from_value(value: Any) -> VisibilityParse:
    if type(value) is not dict:
        reason = object_failure(value)
        return VisibilityParse("invalid", None, False, reason, None, False, reason)
    if COUNT_KEY in value:
        count, count_reason = strict_count(value[COUNT_KEY])
    else:
        count, count_reason = None, "key_absent"
    if VISIBLE_INTERVALS_KEY in value:
        intervals, intervals_reason = strict_intervals(value[VISIBLE_INTERVALS_KEY])
    else:
        intervals, intervals_reason = None, "key_absent"
    count_valid = count_reason is None
    intervals_valid = intervals_reason is None
    return VisibilityParse(
        stage_from_validity(count_valid or intervals_valid),
        count,
        count_valid,
        count_reason,
        intervals,
        intervals_valid,
        intervals_reason,
    )


def parse_visibility_strict(raw: str) -> VisibilityParse:
    return visibility_strict_from_value(loads_json(raw.strip()))
