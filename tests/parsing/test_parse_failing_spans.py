"""Stage 3's check for spans that surely fail (parsing.brackets.surely_failing).

Past the first few spans, a span the check marks is skipped unparsed. That is sound only if
no marked span parses: checked here span by span on random texts built from short failing
spans (`{"a":1x}`, `[1x]`, `{"a":1,}`...), valid ones, quotes, escapes, control characters
and whitespace; and the first balanced value found with the check applied to every span is
compared with the previous per-opener scan (tests/parsing/test_parse_brackets.py keeps it).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_parse_brackets import previous_array, previous_object

from dualcog.parsing import NOT_JSON, first_balanced_array, first_balanced_object, jsontext
from dualcog.parsing.brackets import balanced_spans, surely_failing
from dualcog.parsing.jsontext import MAX_JSON_DEPTH, _parse_span

_SHORT_SPANS = [
    '{"a":1x}', "[1x]", '{"a":[1x]}', '{"a":"b"x}', "[1,x]", '{"a":1,}', "[1,]", '{"a":}',
    "[1 2]", '{"a":1 "b":2}', "[true false]", '[1"a"]', "[1.]", "[-]", "[.5]", "[1e]", "[+1]",
    "[nul]", "[nulll]", "[ 01]", "[-01]", '[0"]', "[1E5 ]", "[1e+01, -0.5e-0, 0]",
    '{,}', "[,1]", '{"a" 1}', '{"a":1:2}', "[1]x", '{"a":"\x01"}', '["\\x"]', "[tru]", "[01]",
]  # fmt: skip
_PIECES = _SHORT_SPANS + [
    '{"a":1}', "[1]", "[]", "{}", '{"a": [1, "b"]}', '{"a":[{"b":[]}],"c":{}}',
    '[{}, [[]],{"d":-1e5}]',
    '{"k v": "a b", "e": [2E-3, 0.5e+1, false]}',
    '[0, 10, -0, 1.05, 100e01, true , null\n, false\t]', '{"n" :null,"t": true}',
    '{"n":null,"m":[null,0,-0.0,1e-07]}', " 0", "0",
    "00", ".", "+", "E", "l", "u", "s", "[\n1 ,\t2\r]", " ", "\n", "\t", "\r",
    '"', '\\"', "\\", '\\\\"', "{", "}", "[", "]", ",", ":", "x", "1", "e", "-", "\x01", "é",
    "\U0001f600", "true", "nul", "NaN", '{"a":', '"k"', '"k":', "[1,", "]}", "}]",
]  # fmt: skip
pieces = st.lists(st.sampled_from(_PIECES), max_size=60).map("".join)
# Long runs of one piece: many spans of one family, beyond the first unchecked batch.
runs = st.lists(
    st.tuples(st.sampled_from(_PIECES), st.integers(1, 200)), min_size=1, max_size=5
).map(lambda parts: "".join(piece * count for piece, count in parts))

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_marked_spans_fail(text: str) -> None:
    for opener, closer in ("{}", "[]"):
        spans = balanced_spans(text, opener, closer, MAX_JSON_DEPTH)
        failing = surely_failing(spans)
        assert failing.shape == spans.starts.shape
        for start, end, marked in zip(
            spans.starts.tolist(), spans.ends.tolist(), failing.tolist(), strict=True
        ):
            if marked:
                assert _parse_span(text[start:end])[0] is NOT_JSON, (start, end)


def _assert_checked_scan_equals_previous(text: str) -> None:
    # Every span checked, no first-opener shortcut: the check alone decides what is parsed.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsontext, "_UNCHECKED_SPANS", 0)
        patch.setattr(jsontext, "_SHORTCUT_TOKENS", 0)
        assert first_balanced_object(text) == previous_object(text)
        assert first_balanced_array(text) == previous_array(text)


@FUZZ
@given(pieces)
def test_no_marked_span_parses(text):
    _assert_marked_spans_fail(text)


@FUZZ
@given(pieces)
def test_the_checked_scan_equals_the_previous_scan(text):
    _assert_checked_scan_equals_previous(text)


@LONG
@given(runs)
def test_no_marked_span_parses_in_long_runs(text):
    _assert_marked_spans_fail(text)
    _assert_checked_scan_equals_previous(text)
    # And with the default number of unchecked spans.
    assert first_balanced_object(text) == previous_object(text)
    assert first_balanced_array(text) == previous_array(text)


_MARKED = [
    '{"a":1x}', "[1x]", '{"a":[1x]}', '{"a":"b"x}', "[1,x]", '{"a":1,}', "[1,]", '{"a":[],}',
    "[1 x]", '{"a": 1x}\n', "[ 1x ]\n", '{"a":1 ,\n}', '{"a":[1x]}\t', '{"a":"\x01"}', "[1,NaN]",
    "[1,]\r\n", "[1 2]", '{"a":1 "b":2}', "[tru]", "[01]", "[1.]", "[-]", "[1\n2]", "[fals]",
    '[1,"a" ,0 1]', "[nul]", "[null ,nul ]",
]  # fmt: skip


@pytest.mark.parametrize("unit", _MARKED)
def test_runs_of_short_failing_spans_are_all_marked(unit):
    text = unit * 200
    opener = "[" if unit.lstrip().startswith("[") else "{"
    spans = balanced_spans(text, opener, "]" if opener == "[" else "}", MAX_JSON_DEPTH)
    assert len(spans.starts) >= 200
    assert surely_failing(spans).all()
    assert first_balanced_object(text) == previous_object(text)
    assert first_balanced_array(text) == previous_array(text)


def test_a_valid_span_after_failing_ones_is_found():
    text = '{"a":1x}' * 300 + '{"a":[1, "b"], "c": {"d": null}}' + "[1x]" * 300
    assert first_balanced_object(text) == {"a": [1, "b"], "c": {"d": None}}
    spans = balanced_spans(text, "{", "}", MAX_JSON_DEPTH)
    failing = surely_failing(spans)
    assert failing.sum() == len(failing) - 2  # the valid object and its inner one


def test_spans_read_inside_a_string_are_judged_by_their_own_reading():
    # The `{` at 1 is inside the main reading's first string; its own scan reads `"a"` as a
    # key. `"\\"x"` is a string to that scan, which carries on past the escaped quote like the
    # main reading; a `y` after it, or an `x` the main reading has inside a string but that scan
    # outside, fails. The span of the test of parsing.brackets crosses the escaped quote
    # outside strings: its backslash fails.
    for text, parses in (
        ('"{"a":"x"}', True),
        ('"{"a":"\\"x"}', True),
        ('"{"a":"\\"x"y}', False),
        ('"{"a":[x,"\\"x"]}', False),
        ('"{"a":[{"b":2}]\\"{"c":3}"}}', False),
    ):
        spans = balanced_spans(text, "{", "}", MAX_JSON_DEPTH)
        at = spans.starts.tolist().index(1)
        assert spans.readings[at] > 0
        assert bool(surely_failing(spans)[at]) is not parses, text
        assert (_parse_span(text[1 : spans.ends[at]])[0] is not NOT_JSON) is parses, text
