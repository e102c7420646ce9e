"""Legacy parse (image tasks only): the benchmark authors' original lenient parser.

It reproduces the seed's "Original" audit column, so it follows what the authors' evaluation
code does, quirks included, not the RFC 8259 rules of strict and compatible mode
(docs/protocol.md, "Legacy"; docs/decisions.md says why each quirk is kept):

- the text is stripped; the JSON candidate is the first `{` to the last `}`, read by Python's
  default `json.loads` (so `NaN` / `Infinity` are accepted; an integer literal over Python's
  4,300-digit guard, or nesting past the recursion limit, makes it fail);
- option: `answer_option_ids` taken as a sequence, then `answer_option_id`, each id
  `str()`-ed, stripped and upper-cased; then the `Option:` regex; then standalone letters;
- box: `bbox_xyxy_norm` taken as a sequence of exactly 4 items, each through `float()` and
  `max(0.0, min(1.0, v))`; else the `BBox:` regex; then reversed corners swapped.

No reasoning removal, no rescaling. The letters are A–D whatever the sample offers. Which
box Future Observation is compared with, and the gold id set, are scoring rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dualcog.parsing.fields import ImageParse
from dualcog.parsing.jsontext import NOT_JSON, call_with_depth_headroom, json_depth
from dualcog.parsing.scale import reorder_corners
from dualcog.parsing.strict import BOX_KEY, OPTION_KEY

LEGACY_LETTERS = frozenset("ABCD")
OPTION_LIST_KEY = "answer_option_ids"

# Python's default recursion limit is 1,000 frames and its decoder spends one per nesting
# level, so the authors' `json.loads` gave up a few levels short of 1,000; exactly where
# depended on their call stack. We fix the cut here so our result does not depend on ours.
LEGACY_MAX_DEPTH = 990
_SHALLOW_BRACKETS = 100

_OPTION_LINE = re.compile(r"Option\s*:\s*([A-D])\b", re.IGNORECASE)
_STANDALONE_LETTER = re.compile(r"\b([A-D])\b")
# No sign but `-`, digits before any point, no exponent: `+0.1`, `.1`, `1.`, `1e-1` do not
# match as written, and `0.4e-1` reads as 0.4.
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_SEP = r"\s*,\s*"
# The authors' pattern is `BBox\s*:\s*[\[\(]?\s*N,N,N,N`. Its `\s*[\[\(]?\s*` splits a
# run of whitespace between two `\s*` in every way before failing: quadratic on `BBox:` and
# a long run with no box after it. `\s*(?:[\[\(]\s*)?` is the same language with one way to
# split, and the numbers a start captures are forced (each ends where no digit or `.` follows),
# so the first match and its groups are the same (tests compare the two on random texts).
_BOX_LINE = re.compile(
    r"BBox\s*:\s*(?:[\[\(]\s*)?" + _NUMBER + _SEP + _NUMBER + _SEP + _NUMBER + _SEP + _NUMBER,
    re.IGNORECASE,
)


def _default_loads(text: str) -> Any:
    try:
        return json.loads(text)
    except Exception:  # noqa: BLE001 - every failure of their json.loads means "no candidate"
        return NOT_JSON


def legacy_loads(text: str) -> Any:
    """Python's default `json.loads`, with NOT_JSON for any failure (never raises)."""
    if text.count("[") + text.count("{") <= _SHALLOW_BRACKETS:
        return _default_loads(text)
    depth = json_depth(text)
    if depth > LEGACY_MAX_DEPTH:
        return NOT_JSON
    return call_with_depth_headroom(depth, _default_loads, text)


def legacy_candidate(raw: str) -> Any:
    """The stripped text from its first `{` to its last `}`, parsed; NOT_JSON when none."""
    text = raw.strip()
    start = text.find("{")
    end = text.rfind("}")
    if start == -1 or end < start:
        return NOT_JSON
    return legacy_loads(text[start : end + 1])


def _legacy_id(value: Any) -> str:
    # `str()` of a list or object starts with a bracket, so it is never a letter; skipping it
    # also avoids a repr as deep as the candidate (which could exhaust the stack).
    if type(value) is list or type(value) is dict:
        return ""
    return str(value).strip().upper()


def _json_letters(candidate: dict) -> list[str]:
    """Option steps 1–2 on the parsed candidate; [] sends the option to the regex steps."""
    listed = candidate.get(OPTION_LIST_KEY)
    if listed:
        try:
            items = list(listed)
        except TypeError:
            # A number or `true` cannot be iterated: their code left the JSON branch here.
            return []
        letters: list[str] = []
        for item in items:
            letter = _legacy_id(item)
            if letter in LEGACY_LETTERS and letter not in letters:
                letters.append(letter)
        if letters:
            return letters
    single = candidate.get(OPTION_KEY)
    letter = _legacy_id(single) if single else ""
    return [letter] if letter in LEGACY_LETTERS else []


def legacy_option(text: str, candidate: Any) -> list[str]:
    """Letters in the order found; each step runs only when the previous one gave none."""
    if type(candidate) is dict:
        letters = _json_letters(candidate)
        if letters:
            return letters
    match = _OPTION_LINE.search(text)
    if match is not None:
        return [match.group(1).upper()]
    return list(dict.fromkeys(_STANDALONE_LETTER.findall(text)))


def _clamp(value: Any) -> float:
    # The authors' order of min and max: NaN compares false, so it becomes 1.0.
    return max(0.0, min(1.0, float(value)))


def _json_box(candidate: dict) -> list[float] | None:
    try:
        items = list(candidate.get(BOX_KEY) or [])
        if len(items) != 4:
            return None
        return [_clamp(item) for item in items]
    except (TypeError, ValueError, OverflowError):
        # Not iterable, not convertible, or an integer too large for a double.
        return None


def legacy_box(text: str, candidate: Any) -> list[float] | None:
    """The clamped box, before corners are swapped; None when neither route finds one."""
    if type(candidate) is dict:
        box = _json_box(candidate)
        if box is not None:
            return box
    match = _BOX_LINE.search(text)
    if match is None:
        return None
    return [_clamp(group) for group in match.groups()]


def image_legacy_from_candidate(raw: str, candidate: Any) -> ImageParse:
    """Legacy result given the parsed candidate of `raw` (NOT_JSON when there is none)."""
    text = raw.strip()
    letters = legacy_option(text, candidate)
    box = legacy_box(text, candidate)
    reordered = False
    if box is not None:
        box, reordered = reorder_corners(box)
    option_valid = bool(letters)
    box_valid = box is not None
    return ImageParse(
        "legacy" if option_valid or box_valid else "invalid",
        letters,
        option_valid,
        None if option_valid else "no_letter",
        box,
        box_valid,
        None if box_valid else "no_box",
        False,
        reordered,
        None,
    )


def parse_image_legacy(raw: str) -> ImageParse:
    """Legacy parse of one image response (offered ids do not matter: letters A–D)."""
    return image_legacy_from_candidate(raw, legacy_candidate(raw))
