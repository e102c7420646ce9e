"""Per-field results and value checks shared by the strict and compatible parsers.

Reason codes (short, machine-readable) used when a field is invalid:
`missing_response`, `no_json_object` (no JSON value / candidate recovered), `not_object`
(the value is not an object, or an array that is not one object), `key_absent`, `not_string`,
`not_offered`, `not_4_numbers`, `non_finite`, `out_of_range`, `reversed_corners` (strict),
`degenerate`, `ambiguous_scale`, `not_integer`, `negative`, `not_list`, `item_not_object`,
`item_key_absent`, `option_ids_not_single`, `not_interval_pairs`, for legacy `no_letter`,
`no_box`. No reason is about length: a response of any length is parsed (§3, v2.3).

Stored values: a valid `visible_count` beyond the int64 column is stored as 2**63 - 1
(see parsing.table). `bbox` keeps the numbers as far as they were processed (scaled, reordered)
even when the box is invalid, for the audit; consumers must gate on `bbox_valid`. Answers,
counts and intervals are stored only when valid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

MISSING = "missing_response"


@dataclass(slots=True)
class ImageParse:
    """One image response in one parse mode; `bbox` is meaningful only when `bbox_valid`."""

    stage: str
    option_ids: list[str] = field(default_factory=list)
    option_valid: bool = False
    option_reason: str | None = None
    bbox: list[float] | None = None
    bbox_valid: bool = False
    bbox_reason: str | None = None
    bbox_rescaled: bool = False
    bbox_reordered: bool = False
    run_scale: str | None = None

    @property
    def all_valid(self) -> bool:
        return self.option_valid and self.bbox_valid


@dataclass(slots=True)
class BehaviorParse:
    """`answers` = [{"option_id", "intervals": [[s, e], ...]}] when `answers_valid`."""

    stage: str
    answers: list[dict] | None = None
    answers_valid: bool = False
    answers_reason: str | None = None

    @property
    def all_valid(self) -> bool:
        return self.answers_valid


@dataclass(slots=True)
class VisibilityParse:
    stage: str
    visible_count: int | None = None
    count_valid: bool = False
    count_reason: str | None = None
    visible_intervals: list[list[float]] | None = None
    intervals_valid: bool = False
    intervals_reason: str | None = None

    @property
    def all_valid(self) -> bool:
        return self.count_valid and self.intervals_valid


def missing_image(run_scale: str | None = None) -> ImageParse:
    return ImageParse("missing", [], False, MISSING, None, False, MISSING, False, False, run_scale)


def missing_behavior() -> BehaviorParse:
    return BehaviorParse("missing", None, False, MISSING)


def missing_visibility() -> VisibilityParse:
    return VisibilityParse("missing", None, False, MISSING, None, False, MISSING)


# --- offered option ids ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Offered:
    exact: frozenset[str]
    folded: dict[str, str]  # lower-cased id -> offered id


@lru_cache(maxsize=256)
def _offered_from_tuple(ids: tuple[str, ...]) -> Offered:
    folded: dict[str, str] = {}
    for option_id in ids:
        folded.setdefault(option_id.strip().lower(), option_id)
    return Offered(frozenset(ids), folded)


def offered_ids(ids: Any) -> Offered:
    """Accept any sequence of ids (list, tuple, numpy array) or an Offered; None = none."""
    if isinstance(ids, Offered):
        return ids
    if ids is None:
        return _offered_from_tuple(())
    return _offered_from_tuple(ids if type(ids) is tuple else tuple(ids))


def match_option_strict(value: Any, offered: Offered) -> tuple[str | None, str | None]:
    if type(value) is not str:
        return None, "not_string"
    if value not in offered.exact:
        return None, "not_offered"
    return value, None


def match_option_compatible(value: Any, offered: Offered) -> tuple[str | None, str | None, bool]:
    """(id, reason, normalized): whitespace stripped, case-insensitive match to offered ids."""
    if type(value) is not str:
        return None, "not_string", False
    if value in offered.exact:
        return value, None, False
    hit = offered.folded.get(value.strip().lower())
    if hit is None:
        return None, "not_offered", False
    return hit, None, True


# --- numbers --------------------------------------------------------------------------------


def as_float(value: Any) -> float | None:
    """A JSON number as float (bool is not a number; an int too large becomes ±inf)."""
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return None


def four_numbers(value: Any) -> list[float] | None:
    if type(value) is not list or len(value) != 4:
        return None
    a, b, c, d = value
    if type(a) is float and type(b) is float and type(c) is float and type(d) is float:
        return [a, b, c, d]  # the common case, without per-item calls
    out = []
    for item in value:
        number = as_float(item)
        if number is None:
            return None
        out.append(number)
    return out


def box_is_finite(box: list[float]) -> bool:
    # x - x is 0.0 for a finite float and NaN for ±inf or NaN; NaN poisons the sum.
    x1, y1, x2, y2 = box
    return (x1 - x1) + (y1 - y1) + (x2 - x2) + (y2 - y2) == 0.0


def check_strict_box(value: Any) -> tuple[list[float] | None, str | None]:
    """§3.1 box: 4 finite numbers in [0,1], x1<x2, y1<y2. Returns (numbers, reason)."""
    box = four_numbers(value)
    if box is None:
        return None, "not_4_numbers"
    if not box_is_finite(box):
        return box, "non_finite"
    x1, y1, x2, y2 = box
    if not (0.0 <= x1 <= 1.0 and 0.0 <= y1 <= 1.0 and 0.0 <= x2 <= 1.0 and 0.0 <= y2 <= 1.0):
        return box, "out_of_range"
    if x1 > x2 or y1 > y2:
        return box, "reversed_corners"
    if x1 == x2 or y1 == y2:
        return box, "degenerate"
    return box, None


# --- intervals and counts -------------------------------------------------------------------


def _pair(value: Any) -> list[float] | None:
    if type(value) is not list or len(value) != 2:
        return None
    start = as_float(value[0])
    end = as_float(value[1])
    if start is None or end is None:
        return None
    return [start, end]


def strict_intervals(value: Any) -> tuple[list[list[float]] | None, str | None]:
    """A list of 2-number pairs; values are not judged here (scoring does that, §5)."""
    if type(value) is not list:
        return None, "not_list"
    out = []
    for item in value:
        pair = _pair(item)
        if pair is None:
            return None, "not_interval_pairs"
        out.append(pair)
    return out, None


def _interval_object(value: dict) -> list[float] | None:
    for start_key, end_key in (("start_sec", "end_sec"), ("start", "end")):
        if start_key in value and end_key in value:
            start = as_float(value[start_key])
            end = as_float(value[end_key])
            if start is None or end is None:
                return None
            return [start, end]
    return None


def compatible_intervals(value: Any) -> tuple[list[list[float]] | None, str | None, bool]:
    """Strict intervals plus §3.2 stage 4: a flat pair, interval objects. (pairs, reason, keys)."""
    if type(value) is not list:
        return None, "not_list", False
    flat = _pair(value)
    if flat is not None:
        return [flat], None, True
    out = []
    normalized = False
    for item in value:
        if type(item) is dict:
            pair = _interval_object(item)
            normalized = True
        else:
            pair = _pair(item)
        if pair is None:
            return None, "not_interval_pairs", False
        out.append(pair)
    return out, None, normalized


def strict_count(value: Any) -> tuple[int | None, str | None]:
    """An integer >= 0 of any size (a huge count is valid, and wrong)."""
    if type(value) is not int:
        return None, "not_integer"
    if value < 0:
        return None, "negative"
    return value, None


def compatible_count(value: Any) -> tuple[int | None, str | None, bool]:
    """Strict count, or a float with an integral value (2.0 -> 2). (count, reason, keys)."""
    if type(value) is float and math.isfinite(value) and value.is_integer():
        count, reason = strict_count(int(value))
        return count, reason, count is not None
    count, reason = strict_count(value)
    return count, reason, False
