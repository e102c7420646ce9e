"""Stage 3's array scanner (parsing.brackets) against the scan-per-opener it replaced.

The reference below is the previous implementation, kept verbatim: one regex tokenisation
per scan, a Python step per bracket. Both must find the same first balanced span that parses,
on random soup of brackets, quotes, backslashes and JSON pieces, short and long (long enough
for nesting past MAX_JSON_DEPTH and for many escaped quotes).
"""

from __future__ import annotations

import random
import re
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualcog.parsing import NOT_JSON, first_balanced_array, first_balanced_object, jsontext
from dualcog.parsing.brackets import balanced_spans
from dualcog.parsing.jsontext import (
    _SHALLOW_BRACKETS,
    MAX_JSON_DEPTH,
    _scan_span,
    call_with_depth_headroom,
    json_depth,
)

# --- the previous implementation, as it was -----------------------------------------------------

_STRING = r'"(?:[^"\\]+|\\.)*(?:"|\\?\Z)'
_STRING_RE = re.compile(_STRING, re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}.__getitem__
_OBJECT_TOKENS = re.compile(_STRING + r"|\{+|\}", re.DOTALL)
_ARRAY_TOKENS = re.compile(_STRING + r"|\[+|\]", re.DOTALL)
_VALUE_START = r'[-0-9"\[{tfn]'
_WS = r"[ \t\n\r]*"
_OBJECT_START = re.compile(
    r"\{(?=" + _WS + r'(?:\}|"(?:[^"\\]|\\.)*"' + _WS + ":" + _WS + _VALUE_START + "))",
    re.DOTALL,
)
_ARRAY_START = re.compile(r"\[(?=" + _WS + r"(?:\]|" + _VALUE_START + "))")


def previous_json_depth(text: str) -> int:
    brackets = _NOT_BRACKET.sub("", _STRING_RE.sub("", text))
    return max(0, max(accumulate(map(_BRACKET_STEP, brackets)), default=0))


def _closing_positions(
    text: str, start: int, tokens: re.Pattern[str], opener: str
) -> dict[int, tuple[int, int, int]]:
    spans: dict[int, tuple[int, int, int]] = {}
    stack: list[list[int]] = []
    for match in tokens.finditer(text, start):
        first = match.start()
        char = text[first]
        if char == '"':
            continue
        if char == opener:
            end = match.end()
            if end - first == 1:
                stack.append([first, 0])
            else:
                stack.extend([position, 0] for position in range(first, end))
        else:
            if not stack:
                break
            position, child_height = stack.pop()
            height = child_height + 1
            spans[position] = (match.end(), height, start)
            if not stack:
                break
            if height > stack[-1][1]:
                stack[-1][1] = height
    if stack:
        spans.update(dict.fromkeys([entry[0] for entry in stack], (-1, 0, start)))
    return spans


def previous_first_balanced(
    text: str, starts: re.Pattern[str], tokens: re.Pattern[str], opener: str
) -> Any:
    known: dict[int, tuple[int, int, int]] = {}
    failed_at = failed_scan = -1
    for match in starts.finditer(text):
        start = match.start()
        span = known.get(start)
        if span is None:
            known.update(_closing_positions(text, start, tokens, opener))
            span = known[start]
        end, height, scan = span
        if end == -1 or height > MAX_JSON_DEPTH:
            continue
        if scan == failed_scan and start < failed_at < end:
            continue
        candidate = text[start:end]
        if candidate.count("[") + candidate.count("{") <= _SHALLOW_BRACKETS:
            value, error = _scan_span(candidate)
        else:
            depth = json_depth(candidate)
            if depth > MAX_JSON_DEPTH:
                continue
            value, error = call_with_depth_headroom(depth, _scan_span, candidate)
        if value is not NOT_JSON:
            return value
        if error >= 0:
            failed_at, failed_scan = start + error, scan
    return NOT_JSON


def previous_object(text: str) -> Any:
    if "{" not in text or "}" not in text:
        return NOT_JSON
    return previous_first_balanced(text, _OBJECT_START, _OBJECT_TOKENS, "{")


def previous_array(text: str) -> Any:
    if "[" not in text or "]" not in text:
        return NOT_JSON
    return previous_first_balanced(text, _ARRAY_START, _ARRAY_TOKENS, "[")


def previous_spans(text: str, opener: str) -> list[tuple[int, int]]:
    """(start, end) of every start the previous scan would consider: closed, not too deep."""
    starts, tokens = (
        (_OBJECT_START, _OBJECT_TOKENS) if opener == "{" else (_ARRAY_START, _ARRAY_TOKENS)
    )
    # As previous_first_balanced does: one scan gives the span of every opener it pushes,
    # which is that opener's own scan (its tokens from there on are the same), so a scan per
    # opener not yet met is enough (a scan per opener is quadratic on long nests).
    known: dict[int, tuple[int, int, int]] = {}
    out = []
    for match in starts.finditer(text):
        start = match.start()
        if start not in known:
            known.update(_closing_positions(text, start, tokens, opener))
        end, height, _ = known[start]
        if end != -1 and height <= MAX_JSON_DEPTH:
            out.append((start, end))
    return out


# --- random soup ---------------------------------------------------------------------------------

_SOUP = [
    "{", "}", "[", "]", '"', "\\", '\\"', '\\\\"', ":", ",", " ", "\n", "1", "a", "-", "t",
    '"k"', '"k":', '{"a":', '{"a":1', "[1,", "]}", "}]", "{}", "[]", '"{"', '"}"', "null",
    "é", "\U0001f600",
]  # fmt: skip
soup = st.lists(st.sampled_from(_SOUP), max_size=60).map("".join)
# Runs of one piece: deep nesting, long escape chains, many openers of one reading.
long_soup = st.lists(
    st.tuples(st.sampled_from(_SOUP), st.integers(1, 700)), min_size=1, max_size=6
).map(lambda pieces: "".join(piece * count for piece, count in pieces))

# Hypothesis explores (and shrinks) the soup; test_seeded_soups adds the volume: a Hypothesis
# example costs more than these checks of a short text.
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same_value_as_previous(text: str) -> None:
    assert first_balanced_object(text) == previous_object(text), text
    assert first_balanced_array(text) == previous_array(text), text
    assert json_depth(text) == previous_json_depth(text), text


def _whole_text_scan_alone_as_previous(text: str) -> None:
    # Without the first-opener shortcut every span comes from parsing.brackets.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsontext, "_SHORTCUT_TOKENS", 0)
        assert first_balanced_object(text) == previous_object(text), text
        assert first_balanced_array(text) == previous_array(text), text


def _same_spans_as_previous(text: str) -> None:
    for opener, closer in ("{}", "[]"):
        spans = balanced_spans(text, opener, closer, MAX_JSON_DEPTH)
        assert list(zip(spans.starts.tolist(), spans.ends.tolist(), strict=True)) == previous_spans(
            text, opener
        ), text


@FUZZ
@given(soup)
def test_array_scanner_equals_the_previous_scan_on_soup(text):
    _same_value_as_previous(text)


@FUZZ
@given(soup)
def test_the_whole_text_scan_alone_equals_the_previous_scan(text):
    _whole_text_scan_alone_as_previous(text)


@FUZZ
@given(soup)
def test_every_span_equals_the_previous_scans(text):
    _same_spans_as_previous(text)


def test_seeded_soups():
    """The three checks above on 400 seeded random texts of the same soup."""
    rng = random.Random(3)
    for _ in range(400):
        text = "".join(rng.choice(_SOUP) for _ in range(rng.randrange(0, 61)))
        _same_value_as_previous(text)
        _whole_text_scan_alone_as_previous(text)
        _same_spans_as_previous(text)


@LONG
@given(long_soup)
def test_array_scanner_equals_the_previous_scan_on_long_runs(text):
    assert first_balanced_object(text) == previous_object(text)
    assert first_balanced_array(text) == previous_array(text)
    assert json_depth(text) == previous_json_depth(text)
    for opener, closer in ("{}", "[]"):
        spans = balanced_spans(text, opener, closer, MAX_JSON_DEPTH)
        assert list(zip(spans.starts.tolist(), spans.ends.tolist(), strict=True)) == previous_spans(
            text, opener
        )


def test_depth_cut_is_exact_in_both_readings():
    for depth in (MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1):
        nest = "[" * depth + "]" * depth
        for text in (nest, '"' + nest, '"\\"' + nest, 'x"' + nest + '"' + nest):
            assert first_balanced_array(text) == previous_array(text)
            spans = balanced_spans(text, "[", "]", MAX_JSON_DEPTH)
            assert spans.starts.tolist() == [s for s, _ in previous_spans(text, "[")]


def test_a_span_read_inside_a_string_carries_past_an_escaped_quote():
    # From the `{` at 1 (inside the first string), the scan reads `"a"` as a key and opens a
    # string at the escaped quote, where every reading agrees from then on; its span ends at
    # the next-to-last `}`, as the per-opener scan found.
    text = '"{"a":[{"b":2}]\\"{"c":3}"}}'
    spans = balanced_spans(text, "{", "}", MAX_JSON_DEPTH)
    assert list(zip(spans.starts.tolist(), spans.ends.tolist(), strict=True)) == previous_spans(
        text, "{"
    )
    assert spans.readings[0] == 1 and spans.ends[0] == len(text) - 1
    assert first_balanced_object(text) == previous_object(text) == {"b": 2}
