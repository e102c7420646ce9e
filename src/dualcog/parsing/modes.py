"""All parse modes of one response at once, sharing the single `json.loads` of the fast path.

Most responses are strict-valid JSON: the strict parse of `raw.strip()` is then also the
compatible stage-1 parse (when no reasoning tag changed the text) and the legacy candidate
(the first `{` to the last `}` of such a text is the whole stripped text).
"""

from __future__ import annotations

import re
from typing import Any

from dualcog.parsing.compatible import (
    ImageRecovery,
    behavior_from_candidate,
    finish_image_compatible,
    recover_image_from_candidate,
    visibility_from_candidate,
)
from dualcog.parsing.fields import (
    BehaviorParse,
    ImageParse,
    VisibilityParse,
    offered_ids,
)
from dualcog.parsing.jsontext import candidate_with_parsed_stage1, loads_json
from dualcog.parsing.legacy import (
    LEGACY_LETTERS,
    OPTION_LIST_KEY,
    image_legacy_from_candidate,
    legacy_candidate,
)
from dualcog.parsing.scale import NORM
from dualcog.parsing.strict import (
    behavior_strict_from_value,
    image_strict_from_value,
    visibility_strict_from_value,
)


def recover_image_modes(raw: str, offered: Any) -> tuple[ImageParse, ImageRecovery, ImageParse]:
    """(strict, compatible stages 0–4, legacy) for one image response."""
    offered = offered_ids(offered)
    parsed = loads_json(raw.strip())
    strict = image_strict_from_value(parsed, offered)
    if strict.all_valid and "<" not in raw:
        return strict, *_shortcut_strict_valid(raw, strict, parsed)
    candidate, extraction = candidate_with_parsed_stage1(raw, parsed)
    recovery = recover_image_from_candidate(candidate, extraction, offered)
    legacy_value = parsed if _legacy_reads_the_same(raw, parsed) else legacy_candidate(raw)
    legacy = image_legacy_from_candidate(raw, legacy_value)
    return strict, recovery, legacy


# An integer literal past Python's 4,300-digit guard parses in strict mode but fails legacy's
# plain `json.loads`. The look-behind starts a try only at the first digit of a run (linear).
_GUARDED_DIGITS = re.compile(r"(?<![0-9])[0-9]{4301}")


def _legacy_reads_the_same(raw: str, parsed: Any) -> bool:
    """Whether legacy's candidate is `parsed`, the RFC parse of the whole stripped text.

    When that parse is an object, the stripped text runs from its first `{` to its last `}`,
    and the default decoder reads it alike, except for integers past the digit guard.
    """
    if type(parsed) is not dict:
        return False
    return len(raw) <= 4300 or _GUARDED_DIGITS.search(raw) is None


def _shortcut_strict_valid(
    raw: str, strict: ImageParse, parsed: dict
) -> tuple[ImageRecovery, ImageParse]:
    """Compatible recovery and legacy result of a strict-valid response without tags.

    Stage 0 leaves the text unchanged, so stage 1 yields the same object with canonical keys
    and exactly offered id: compatible stages 0–4 recover the strict option and box. Legacy
    reads the same object; its box is already in [0,1] and ordered.
    """
    option = strict.option_ids[0]
    box = strict.bbox
    recovery = ImageRecovery("strict", option, None, False, list(box), None, False)
    if not _legacy_reads_the_same(raw, parsed):
        legacy = image_legacy_from_candidate(raw, legacy_candidate(raw))
    elif OPTION_LIST_KEY not in parsed and option in LEGACY_LETTERS:
        # Clamping a box already in [0,1] only turns -0.0 into 0.0.
        clamped = [max(0.0, min(1.0, c)) for c in box]
        legacy = ImageParse("legacy", [option], True, None, clamped, True, None, False, False)
    else:
        legacy = image_legacy_from_candidate(raw, parsed)
    return recovery, legacy


def parse_image_modes(
    raw: str, offered: Any, scale: str = NORM
) -> tuple[ImageParse, ImageParse, ImageParse]:
    """(strict, compatible, legacy) for one image response under a given run scale."""
    strict, recovery, legacy = recover_image_modes(raw, offered)
    return strict, finish_image_compatible(recovery, scale), legacy


def parse_behavior_modes(raw: str, offered: Any) -> tuple[BehaviorParse, BehaviorParse]:
    offered = offered_ids(offered)
    parsed = loads_json(raw.strip())
    candidate, extraction = candidate_with_parsed_stage1(raw, parsed)
    return (
        behavior_strict_from_value(parsed, offered),
        behavior_from_candidate(candidate, extraction, offered),
    )


def parse_visibility_modes(raw: str) -> tuple[VisibilityParse, VisibilityParse]:
    parsed = loads_json(raw.strip())
    candidate, extraction = candidate_with_parsed_stage1(raw, parsed)
    return visibility_strict_from_value(parsed), visibility_from_candidate(candidate, extraction)
