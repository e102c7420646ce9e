"""PROTOCOL revision 2.3 readings of the parser: tag-name case folding (§3.2 stage 0), the
legacy `BBox:` matcher (§3.4), the legacy nesting cut (§3.4) and counts of any size (§3)."""

from __future__ import annotations

import random
import re
import string

import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dualcog.parsing import (
    NOT_JSON,
    parse_image_compatible,
    parse_image_modes,
    parse_run,
    parse_visibility_modes,
)
from dualcog.parsing.jsontext import remove_reasoning
from dualcog.parsing.legacy import _BOX_LINE, legacy_candidate

OFFERED = ("A", "B", "C", "D")

# --- §3.2 stage 0, written plainly ------------------------------------------------------------

_ASCII_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_NAMES = ("think", "reasoning")


def _first_opener(folded: str, start: int) -> tuple[int, str] | None:
    hits = [(folded.find(f"<{name}>", start), name) for name in _NAMES]
    hits = [hit for hit in hits if hit[0] != -1]
    return min(hits) if hits else None


def reference_stage0(text: str) -> str:
    """(a) left to right: an opener with a closer of its name removes through that closer; an
    opener without one stays and the scan goes on after its `<`. (b) cut at the first opener
    left. (c) drop through the last closer left. Names fold ASCII letters only."""
    kept, position, scan = [], 0, 0
    while (hit := _first_opener(text.translate(_ASCII_FOLD), scan)) is not None:
        start, name = hit
        close = text.translate(_ASCII_FOLD).find(f"</{name}>", start + len(name) + 2)
        if close == -1:
            scan = start + 1
            continue
        kept.append(text[position:start])
        position = scan = close + len(name) + 3
    text = "".join(kept) + text[position:]
    hit = _first_opener(text.translate(_ASCII_FOLD), 0)
    if hit is not None:
        text = text[: hit[0]]
    folded = text.translate(_ASCII_FOLD)
    ends = [folded.rfind(f"</{name}>") + len(name) + 3 for name in _NAMES if f"</{name}>" in folded]
    return text[max(ends) :] if ends else text


# Letters Unicode case-insensitive matching folds onto ASCII ones: dotless ı, dotted İ, long ſ,
# the Kelvin sign K.
_TAG_SOUP = [
    "<think>", "</think>", "<reasoning>", "</reasoning>", "<THINK>", "</Think>", "<ReAsOnInG>",
    "</REASONING>", "<thınk>", "</thınk>", "<THİNK>", "</THİNK>", "<reaſoning>", "</reaſoning>",
    "<thin\u212a>", "</thin\u212a>", "<", ">", "/", "</", "thi", "nk>", "ı", "İ", "ſ", "\u212a",
    "x", "{", "}", "\n",
]  # fmt: skip


def _stage0_is_the_reference_and_never_raises(text: str) -> None:
    assert remove_reasoning(text) == reference_stage0(text), text
    parse_image_modes(text, OFFERED)
    parse_visibility_modes(text)


# Hypothesis explores (and shrinks) the soup; the seeded loop below adds the volume, at a
# tenth of a Hypothesis example's cost per text.
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TAG_SOUP), max_size=30).map("".join))
def test_reasoning_tags_fold_ascii_only_and_never_raise(text):
    """§3.2 stage 0 (v2.3): "case-insensitive tag names — decision, v2.3: ASCII case folding
    only, so `<THINK>` is a tag and `<thınk>`, `<reaſoning>` are not"."""
    _stage0_is_the_reference_and_never_raises(text)


def test_reasoning_tags_on_seeded_random_texts():
    """§3.2 stage 0 (v2.3), as above, on 3,000 seeded random texts of the same soup."""
    rng = random.Random(23)
    for _ in range(3000):
        pieces = [rng.choice(_TAG_SOUP) for _ in range(rng.randrange(0, 31))]
        _stage0_is_the_reference_and_never_raises("".join(pieces))


def test_tags_with_non_ascii_letters_are_plain_text():
    """§3.2 stage 0 (v2.3): ASCII case folding only."""
    answer = '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,0.5,0.6]}'
    assert remove_reasoning("<THINK>x</THINK>" + answer) == answer
    for opener in ("<thınk>", "<THİNK>", "<reaſoning>", "<thin\u212a>"):
        assert remove_reasoning(opener + answer) == opener + answer
        assert parse_image_compatible(opener + answer, OFFERED).all_valid  # stage 3 finds it


# --- §3.4 the legacy `BBox:` matcher ----------------------------------------------------------

_N = r"(-?\d+(?:\.\d+)?)"
# §3.4 as written: `BBox\s*:\s*[\[\(]?\s*N\s*,\s*N\s*,\s*N\s*,\s*N`, case-insensitive.
_AUTHORS_BOX = re.compile(
    r"BBox\s*:\s*[\[\(]?\s*" + _N + r"\s*,\s*" + _N + r"\s*,\s*" + _N + r"\s*,\s*" + _N,
    re.IGNORECASE,
)
_BOX_ALPHABET = "BbOoXx:[( ,.-0123456789\n\t\u00a0\u0663"
_BOX_PIECES = ["BBox", "bbox:", "BBox:", "BBox: [", "0.5", "-1", ", ", "  ", "\n", "1.", ".5"]


def _same_match(text: str) -> None:
    ours, theirs = _BOX_LINE.search(text), _AUTHORS_BOX.search(text)
    assert (ours is None) == (theirs is None), text
    if ours is not None:
        assert (ours.span(), ours.groups()) == (theirs.span(), theirs.groups()), text


# Hypothesis explores (and shrinks); the seeded test below adds the volume (20,000 texts).
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(_BOX_PIECES), st.text(alphabet=_BOX_ALPHABET, max_size=6)),
        max_size=25,
    ).map("".join)
)
def test_bbox_matcher_finds_what_the_authors_pattern_finds(text):
    """§3.4: "`BBox\\s*:\\s*[\\[\\(]?\\s*N\\s*,\\s*N\\s*,\\s*N\\s*,\\s*N` with `N` =
    `(-?\\d+(?:\\.\\d+)?)`": the first match and its captures are the pattern's."""
    _same_match(text)


def test_bbox_matcher_on_seeded_random_texts():
    """§3.4: the same first match as the authors' pattern, on 20,000 seeded random texts and
    5,000 built near the pattern."""
    rng = random.Random(23)
    for _ in range(20_000):
        pieces = [
            rng.choice(_BOX_PIECES) if rng.random() < 0.4 else rng.choice(_BOX_ALPHABET)
            for _ in range(rng.randrange(1, 40))
        ]
        _same_match("".join(pieces))

    # Texts of random pieces almost never hold a whole match: these are `BBox`, a colon, a
    # bracket and numbers, each part sometimes spaced otherwise or broken.
    def part(good: list[str], broken: list[str]) -> str:
        return rng.choice(good if rng.random() < 0.9 else broken)

    spaces = ["", "", " ", "  ", "\n", "\t", "\u00a0"]
    numbers = ["0", "0.5", "-1", "12.75", "\u0663", "3\u0663.5"]
    matched = 0
    for _ in range(5000):
        parts = [rng.choice(["", "x ", "BBox: "]), part(["BBox", "bbox", "BBOX"], ["BBo", "B Box"])]
        parts += [rng.choice(spaces), part([":"], [";", "::"]), rng.choice(spaces)]
        parts += [part(["", "[", "("], ["{", "[(", "(["]), rng.choice(spaces)]
        for k in range(rng.choice([3, 4, 4, 4, 5])):
            if k:
                parts += [rng.choice(spaces), part([","], [";", ",,"]), rng.choice(spaces)]
            parts.append(part(numbers, ["1.", ".5", "-", "--1", "1e3"]))
        text = "".join(parts) + rng.choice(["", "]", " x"])
        _same_match(text)
        matched += _AUTHORS_BOX.search(text) is not None
    assert matched > 500  # not vacuous


# --- §3.4 the legacy nesting cut -------------------------------------------------------------


def _nested_candidate(depth: int) -> str:
    # The object is one level, each array one more.
    return '{"answer_option_id":"B","x":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def _recurse(levels: int, func):
    return func() if levels == 0 else _recurse(levels - 1, func)


def test_legacy_candidate_fails_past_990_levels_whatever_the_call_stack():
    """§3.4 (v2.3): "nesting deeper than 990 levels ... makes the candidate fail to parse
    (decision, v2.3: a fixed cut near Python's default recursion limit of 1,000, so the
    result does not depend on the call stack)"."""
    for depth, parses in ((989, True), (990, True), (991, False), (994, False)):
        text = _nested_candidate(depth)
        for stack in (0, 500):
            value = _recurse(stack, lambda text=text: legacy_candidate(text))
            assert (value is not NOT_JSON) == parses, (depth, stack)
            if parses:
                assert value["answer_option_id"] == "B"


# --- §3 counts of any size -------------------------------------------------------------------

_COUNT_LITERALS = {
    "9007199254740993": 9007199254740993,
    "1e16": 10**16,
    "1e19": 10**19,
    "9223372036854775807": 2**63 - 1,
    "9223372036854775808": 2**63,
    "1" + "0" * 400: 10**400,
    "-9223372036854775809": None,
    "-" + "9" * 400: None,
    "1e400": None,
    "-1e400": None,
    "-0.0": 0,
    "0.0": 0,
    "-1e19": None,
    "2.5": None,
}


def test_counts_of_any_size_never_stop_the_parse():
    """§3: "An integer of any size is an integer (no 64-bit cap: a huge `visible_count` is
    valid, and wrong)"; v2.3: "no value a response can hold may stop a job"."""
    ids = [f"v{i}" for i in range(len(_COUNT_LITERALS))]
    texts = [
        '{"visible_count":' + literal + ',"visible_intervals_sec":[]}'
        for literal in _COUNT_LITERALS
    ]
    samples = pd.DataFrame(
        {"sample_id": ids, "task": "landmark_visibility", "options": [[]] * len(ids)}
    )
    responses = pd.DataFrame({"sample_id": ids, "raw_text": texts, "status": "ok"})
    table, _ = parse_run(
        pa.Table.from_pandas(samples, preserve_index=False),
        pa.Table.from_pandas(responses, preserve_index=False),
    )
    assert table.schema.field("visible_count").type == pa.int64()
    rows = table.to_pandas()
    for sample_id, expected in zip(ids, _COUNT_LITERALS.values(), strict=True):
        compatible = rows[(rows.sample_id == sample_id) & (rows.parse == "compatible")].iloc[0]
        assert bool(compatible.count_valid) == (expected is not None), sample_id
        if expected is not None:
            assert compatible.visible_count == min(expected, 2**63 - 1)
