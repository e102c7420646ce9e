"""PROTOCOL §3.4 legacy parse (image tasks only): the authors' original lenient parser.

Reproduces the seed's "Original" audit column: no reasoning removal, first `{` to last `}`,
regex fallbacks, coordinates clamped to [0,1] then swapped, never rescaled. Which box the
Future Observation prediction is compared with is a scoring rule, not a parsing one.
"""

from __future__ import annotations

import re
from typing import Any

from dualcog.parsing.fields import ImageParse, four_numbers
from dualcog.parsing.jsontext import NOT_JSON, loads_json
from dualcog.parsing.scale import reorder_corners
from dualcog.parsing.strict import BOX_KEY, OPTION_KEY

LEGACY_LETTERS = frozenset("ABCD")
OPTION_LIST_KEY = "answer_option_ids"

_OPTION_LINE = re.compile(r"Option\s*:\s*([A-D])\b", re.IGNORECASE)
_STANDALONE_LETTER = re.compile(r"\b[A-D]\b")
_NUMBER = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_SEP = r"\s*,\s*"
_BOX_LINE = re.compile(
    r"BBox\s*:\s*[\[(]?\s*" + _NUMBER + _SEP + _NUMBER + _SEP + _NUMBER + _SEP + _NUMBER,
    re.IGNORECASE,
)


def legacy_candidate(raw: str) -> Any:
    """The text from the first `{` to the last `}`, parsed; NOT_JSON when there is none."""
    start = raw.find("{")
    end = raw.rfind("}")
    if start == -1 or end < start:
        return NOT_JSON
    return loads_json(raw[start : end + 1])


def _dedupe(letters: list[str]) -> list[str]:
    return list(dict.fromkeys(letters))


def legacy_option(raw: str, candidate: Any) -> list[str]:
    """Letters in the order found; each fallback runs only when the previous gave none."""
    if type(candidate) is dict:
        listed = candidate.get(OPTION_LIST_KEY)
        if type(listed) is list:
            letters = [
                item.upper()
                for item in listed
                if type(item) is str and item.upper() in LEGACY_LETTERS
            ]
            if letters:
                return _dedupe(letters)
        single = candidate.get(OPTION_KEY)
        if type(single) is str and single.upper() in LEGACY_LETTERS:
            return [single.upper()]
    match = _OPTION_LINE.search(raw)
    if match is not None:
        return [match.group(1).upper()]
    return _dedupe(_STANDALONE_LETTER.findall(raw))


def legacy_box(raw: str, candidate: Any) -> list[float] | None:
    box = None
    if type(candidate) is dict and BOX_KEY in candidate:
        box = four_numbers(candidate[BOX_KEY])
    if box is None:
        match = _BOX_LINE.search(raw)
        if match is not None:
            box = [float(group) for group in match.groups()]
    return box


def image_legacy_from_candidate(raw: str, candidate: Any) -> ImageParse:
    letters = legacy_option(raw, candidate)
    box = legacy_box(raw, candidate)
    reordered = False
    if box is not None:
        # Clamp each coordinate into [0,1] (±inf included), then swap reversed corners.
        box, reordered = reorder_corners([min(max(c, 0.0), 1.0) for c in box])
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
