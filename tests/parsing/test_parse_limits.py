"""Parsing rules of docs/protocol.md that bound or settle hard inputs.

Nesting depth, number size, the reasoning-tag passes, fence info strings, and the response
length cap (docs/decisions.md). Reference implementations written straight from the rules
check the linear-time code on random texts.
"""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualcog.parsing import (
    NOT_JSON,
    first_balanced_array,
    first_balanced_object,
    first_fence_content,
    loads_json,
    parse_behavior_compatible,
    parse_behavior_modes,
    parse_behavior_strict,
    parse_image_compatible,
    parse_image_legacy,
    parse_image_modes,
    parse_image_strict,
    parse_visibility_compatible,
    parse_visibility_modes,
    parse_visibility_strict,
    remove_reasoning,
)
from dualcog.parsing.jsontext import (
    _SHALLOW_BRACKETS,
    BEYOND_EXACT_DIGITS,
    MAX_JSON_DEPTH,
    _loads_rfc,
    call_with_depth_headroom,
    int_of_any_size,
    json_depth,
)

OFFERED = ("A", "B", "C", "D")
CANON = '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,0.5,0.6]}'
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- stage 0: the reasoning passes, exactly as written ---------------------------------------

_BLOCK = re.compile(r"<(think|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_OPENER = re.compile(r"<(?:think|reasoning)>", re.IGNORECASE)
_CLOSER = re.compile(r"</(?:think|reasoning)>", re.IGNORECASE)


def reference_remove_reasoning(text: str) -> str:
    """(a) one regex substitution; (b) then (c), each on what the previous step left."""
    text = _BLOCK.sub("", text)
    opener = _OPENER.search(text)
    if opener is not None:
        text = text[: opener.start()]
    closers = list(_CLOSER.finditer(text))
    if closers:
        text = text[closers[-1].end() :]
    return text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The two worked examples: a tag that forms where a block was removed counts there.
        ("D</thi<think></think>nk>P", "P"),
        ("<think>x</thi<reasoning></reasoning>nk>y", ""),
        # (a) is one pass: blocks after an unclosed opener are removed too, then (b) cuts.
        ("a<think>b<reasoning>c</reasoning>d", "a"),
        ("<THINK>x</think>ok", "ok"),
        ("<think>x</reasoning>y", ""),
        ("pre</REASONING>post", "post"),
    ],
)
def test_reasoning_passes(text, expected):
    assert remove_reasoning(text) == expected == reference_remove_reasoning(text)


_TAG_FRAGMENTS = [
    "<think>", "</think>", "<reasoning>", "</reasoning>", "<THINK>", "</Reasoning>", "<thi",
    "nk>", "</thi", "<reas", "oning>", "</", "<", ">", "x", "{", "}", " ",
]  # fmt: skip


@FUZZ
@given(st.lists(st.sampled_from(_TAG_FRAGMENTS), max_size=30).map("".join))
def test_reasoning_removal_equals_the_single_substitution(text):
    assert remove_reasoning(text) == reference_remove_reasoning(text)


# --- stage 2: fences --------------------------------------------------------------------------

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def reference_fence(text: str) -> str | None:
    match = _FENCE.search(text)
    return None if match is None else match.group(1)


@FUZZ
@given(
    st.lists(st.sampled_from(["```", "\n", "json", "c#", "1", " ", "{}", "`", "x"])).map("".join)
)
def test_fence_equals_the_leftmost_match_of_its_definition(text):
    assert first_fence_content(text) == reference_fence(text)


@pytest.mark.parametrize(
    ("raw", "stage"),
    [
        ("```json.\n" + CANON + "\n```", "fence"),
        ("```1\n" + CANON + "\n```", "fence"),
        ("```c#\n" + CANON + "\n```", "fence"),
        ("``` \n" + CANON + "\n```", "fence"),
        ("```" + CANON + "```", "balanced"),  # no line break: not a fence
        ("~~~json\n" + CANON + "\n~~~", "balanced"),  # only backtick fences count
    ],
)
def test_fence_info_strings(raw, stage):
    result = parse_image_compatible(raw, OFFERED)
    assert result.stage == stage and result.all_valid


# --- stage 3 against a plain reference ---------------------------------------------------------


def _reference_balanced(text: str, opener: str, closer: str):
    """Try every opener in text order: its string-aware balanced span, parsed."""
    for start in range(len(text)):
        if text[start] != opener:
            continue
        depth, position, in_string = 0, start, False
        end = -1
        while position < len(text):
            char = text[position]
            if in_string:
                if char == "\\":
                    position += 1
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == opener:
                depth += 1
            elif char == closer:
                depth -= 1
                if depth == 0:
                    end = position + 1
                    break
            position += 1
        if end != -1:
            value = loads_json(text[start:end])
            if value is not NOT_JSON:
                return value
    return NOT_JSON


_JSONISH = [
    "{", "}", "[", "]", '"', "\\", ":", ",", " ", "1", "a", '"k"', "null", "x", "-", '"{"',
    '"}"', '{"a":', '"\\"', "[1,", "]}",
]  # fmt: skip


@FUZZ
@given(st.lists(st.sampled_from(_JSONISH), max_size=40).map("".join))
def test_balanced_scan_equals_trying_every_opener(text):
    assert first_balanced_object(text) == _reference_balanced(text, "{", "}")
    assert first_balanced_array(text) == _reference_balanced(text, "[", "]")


def test_an_opener_inside_a_failed_spans_string_is_still_tried():
    # From 0 the span fails at the `a` after `"{"`; the `{` inside that string starts a
    # different tokenisation, whose span parses.
    assert first_balanced_object('{"a":"{"a":"}"}') == {"a": "}"}


def test_nested_failing_spans_still_find_an_inner_object():
    text = '{"a":' * 50 + '{"b":1}' + "x" + "}" * 50
    assert first_balanced_object(text) == {"b": 1}


# --- depth and number size --------------------------------------------------------------------


def test_json_depth_counts_brackets_outside_strings():
    assert json_depth('[{"a":"[[[["}]') == 2
    assert json_depth("]]][") == 0
    assert json_depth("[]][[") == 1
    assert json_depth("") == 0


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
def test_depth_limit_in_every_stage(depth):
    deep = "[" * (depth - 1) + "]" * (depth - 1)
    raw = '{"answer_option_id":"B","x":' + deep + "}"
    ok = depth <= MAX_JSON_DEPTH
    assert parse_image_strict(raw, OFFERED).option_valid is ok
    assert parse_image_compatible("```\n" + raw + "\n```", OFFERED).option_valid is ok
    # Stage 3 takes the object when it is shallow enough; otherwise nothing inside it parses
    # as an object with the option, so the option is invalid.
    assert parse_image_compatible("so: " + raw, OFFERED).option_valid is ok


@pytest.mark.parametrize(
    "text",
    ["[" * 200_000, "{" * 200_000, '{"a":' * 50_000, "[" * 20_000 + "]" * 20_000],
)
def test_no_depth_raises_in_any_mode(text):
    assert parse_image_modes(text, OFFERED)[0].stage == "invalid"
    parse_behavior_modes(text, OFFERED)
    parse_visibility_modes(text)
    parse_image_legacy(text)


def _depth_first_loads(text: str) -> object:
    # loads_json as it was: the depth measured first, then the parse with headroom.
    if text.count("[") + text.count("{") <= _SHALLOW_BRACKETS:
        return _loads_rfc(text)
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        return NOT_JSON
    return call_with_depth_headroom(depth, _loads_rfc, text)


def _with_room(room: int | None, func, text: str) -> object:
    """`func(text)` called with only `room` frames left under the recursion limit (None: here)."""
    if room is None:
        return func(text)
    used, frame = 0, sys._getframe()
    while frame is not None:
        used, frame = used + 1, frame.f_back
    return _down(sys.getrecursionlimit() - used - room, func, text)


def _down(frames: int, func, text: str) -> object:
    return func(text) if frames <= 0 else _down(frames - 1, func, text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 1200),
    st.sampled_from(["", "x", "]", ",1", " ", '"']),
    st.sampled_from(["[", '{"a":', '[{"b":']),
    st.sampled_from([None, 60, 400]),
)
def test_long_texts_parse_before_their_depth_is_measured(depth, junk, opener, room):
    # Parsing first gives the depth-first result at every depth, valid or not, also with
    # little room on the stack (the decoder runs out of recursion and is given headroom).
    closer = "]" if opener == "[" else ("}" if opener.startswith("{") else "}]")
    inner = "[" * depth + "1" + "]" * depth
    for text in (inner + junk, (opener + inner) * 2 + junk, junk + inner):
        assert _with_room(room, loads_json, text) == _with_room(room, _depth_first_loads, text)
    wrapped = opener + inner + closer
    assert _with_room(room, loads_json, wrapped) == _with_room(room, _depth_first_loads, wrapped)


def test_numbers_beyond_the_double_range_are_non_finite():
    for big in ("1e400", "-1e400", "1" + "0" * 400, "9" * 5000):
        raw = '{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,' + big + ",0.5]}"
        for result in (parse_image_strict(raw, OFFERED), parse_image_compatible(raw, OFFERED)):
            assert result.option_valid and result.bbox_reason == "non_finite"
        visibility = parse_visibility_strict(
            '{"visible_count":1,"visible_intervals_sec":[[0,' + big + "]]}"
        )
        assert visibility.intervals_valid  # an invalid value, judged at scoring
        assert abs(visibility.visible_intervals[0][1]) == float("inf")


def test_counts_of_any_size_are_valid():
    """PROTOCOL §3: "An integer of any size is an integer ... a huge `visible_count` is valid,
    and wrong". Up to Python's 4,300-digit guard the reading is exact; past it a stand-in of
    the same sign beyond every double and int64 (so every outcome is the exact value's)."""
    for digits in (20, 4300):
        raw = '{"visible_count":' + "7" * digits + ',"visible_intervals_sec":[]}'
        for result in (parse_visibility_strict(raw), parse_visibility_compatible(raw)):
            assert result.count_valid and result.visible_count == int("7" * digits)
    for digits in (4301, 10_000, 2_000_000):
        raw = '{"visible_count":' + "7" * digits + ',"visible_intervals_sec":[]}'
        for result in (parse_visibility_strict(raw), parse_visibility_compatible(raw)):
            assert result.count_valid and result.visible_count == BEYOND_EXACT_DIGITS
        negative = '{"visible_count":-' + "7" * digits + ',"visible_intervals_sec":[]}'
        assert not parse_visibility_strict(negative).count_valid
    assert int_of_any_size("-" + "7" * 9000) == -BEYOND_EXACT_DIGITS
    assert int_of_any_size("-" + "7" * 4300) == -int("7" * 4300)
    assert BEYOND_EXACT_DIGITS > 2**63 and int(sys.float_info.max) < BEYOND_EXACT_DIGITS


# --- no length limit ----------------------------------------------------------------------


def test_long_canonical_answers_parse_like_short_ones():
    """PROTOCOL §3 (v2.3): "no length limit: a response of any length is parsed in all three
    modes by the rules below"."""
    padded = CANON + " " * (262_301 - len(CANON))
    assert len(padded) == 262_301
    short = (
        parse_image_strict(CANON, OFFERED),
        parse_image_compatible(CANON, OFFERED),
        parse_image_legacy(CANON),
    )
    assert all(result.all_valid for result in short)
    assert parse_image_modes(padded, OFFERED) == short
    assert (
        parse_image_strict(padded, OFFERED),
        parse_image_compatible(padded, OFFERED),
        parse_image_legacy(padded),
    ) == short
    video = '{"answers":[],"visible_count":3,"visible_intervals_sec":[]}'
    long_video = " " * 300_000 + video
    assert parse_behavior_modes(long_video, OFFERED) == parse_behavior_modes(video, OFFERED)
    assert parse_visibility_modes(long_video) == parse_visibility_modes(video)
    assert parse_behavior_strict(long_video, OFFERED).all_valid
    assert parse_behavior_compatible(long_video, OFFERED).all_valid
    for result in (parse_visibility_strict(long_video), parse_visibility_compatible(long_video)):
        assert result.all_valid and result.visible_count == 3


_HEAVY = [
    "{a}", '{"a"}', '{"a":', "[", "]", "{", "}", '"', "\\", "<think>", "</think>", "```", "\n",
    "1", ",", "BBox: 0.1,", "Option: ", "A ", "9" * 50, "NaN", '{"answer_option_id":"B"}',
]  # fmt: skip


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_HEAVY), st.integers(1, 1500)), max_size=8))
def test_large_adversarial_texts_never_raise_and_are_deterministic(pieces):
    raw = "".join(fragment * count for fragment, count in pieces)
    image = parse_image_modes(raw, OFFERED)
    assert image == parse_image_modes(raw, OFFERED)
    assert image == (
        parse_image_strict(raw, OFFERED),
        parse_image_compatible(raw, OFFERED),
        parse_image_legacy(raw),
    )
    behavior = parse_behavior_modes(raw, OFFERED)
    assert behavior == parse_behavior_modes(raw, OFFERED)
    visibility = parse_visibility_modes(raw)
    assert visibility == parse_visibility_modes(raw)
