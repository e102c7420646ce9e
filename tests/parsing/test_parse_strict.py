"""Strict parse (docs/protocol.md §3.1): exact keys, RFC 8259 JSON, fields judged independently."""

from __future__ import annotations

import json

import pytest
from parse_corpus import (
    BEHAVIOR_CASES,
    IMAGE_CASES,
    IMAGE_OFFERED,
    VIDEO_OFFERED,
    VISIBILITY_CASES,
)

from dualcog.parsing import (
    NOT_JSON,
    loads_json,
    parse_behavior_strict,
    parse_image_strict,
    parse_visibility_strict,
)
from dualcog.parsing.jsontext import BEYOND_EXACT_DIGITS

OFFERED = ("A", "B", "C", "D")


# --- RFC 8259 loading -----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["NaN", "[NaN]", "[Infinity]", '{"a": -Infinity}'])
def test_non_rfc_constants_are_not_json(text):
    assert loads_json(text) is NOT_JSON


def test_duplicate_keys_last_wins():
    assert loads_json('{"a": 1, "a": 2}') == {"a": 2}


def test_null_is_json_and_distinct_from_failure():
    assert loads_json("null") is None
    assert loads_json("nul") is NOT_JSON


@pytest.mark.parametrize("text", ["", "   ", '{"a":1} x', '{"a":1}{"b":2}', '"\x01"', "[1,]"])
def test_not_exactly_one_json_value(text):
    assert loads_json(text) is NOT_JSON


def test_json_whitespace_around_value_is_allowed():
    assert loads_json(' \n{"a": 1}\t\r\n') == {"a": 1}


def test_nesting_limit_is_explicit_and_independent_of_the_call_stack():
    # At 512 levels or fewer depth never makes a text invalid; deeper fails (docs/protocol.md).
    assert loads_json("[" * 512 + "]" * 512) is not NOT_JSON
    assert loads_json("[" * 513 + "]" * 513) is NOT_JSON
    assert loads_json('{"a":' * 512 + "1" + "}" * 512) is not NOT_JSON
    assert loads_json('{"a":' * 513 + "1" + "}" * 513) is NOT_JSON
    # Arrays and objects count together.
    assert loads_json('[{"a":' * 256 + "1" + "}]" * 256) is not NOT_JSON
    assert loads_json("[" + '[{"a":' * 256 + "1" + "}]" * 256 + "]") is NOT_JSON
    # Brackets inside strings do not count.
    assert loads_json(json.dumps({"note": "[" * 5000})) == {"note": "[" * 5000}


def _at_stack_depth(frames: int, func, *args):
    return func(*args) if frames == 0 else _at_stack_depth(frames - 1, func, *args)


def test_512_levels_parse_even_from_deep_in_the_call_stack():
    text = "[" * 512 + "]" * 512
    assert _at_stack_depth(700, loads_json, text) == loads_json(text)
    raw = '{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,0.5,0.5],"x":' + text + "}"
    assert _at_stack_depth(700, parse_image_strict, raw, OFFERED).stage == "invalid"
    inner = '{"answer_option_id":"A","x":' + "[" * 510 + "]" * 510 + "}"
    assert _at_stack_depth(700, parse_image_strict, inner, OFFERED).option_valid


def test_deep_nesting_and_huge_integers_do_not_raise():
    assert loads_json("[" * 100_000 + "]" * 100_000) is NOT_JSON
    assert loads_json("{" * 100_000) is NOT_JSON
    # An integer of any size is an integer (past Python's 4,300-digit guard: a same-sign
    # stand-in beyond every double, docs/decisions.md item 9).
    assert loads_json("1" * 4300) == int("1" * 4300)
    assert loads_json("1" * 5000) == BEYOND_EXACT_DIGITS
    assert loads_json("-" + "9" * 9000) == -BEYOND_EXACT_DIGITS


# --- image ----------------------------------------------------------------------------------


def test_protocol_example_1_canonical_response_is_valid():
    result = parse_image_strict(
        '{"answer_option_id":"A","bbox_xyxy_norm":[0.2,0.2,0.6,0.6]}', OFFERED
    )
    assert result.stage == "strict"
    assert result.option_ids == ["A"] and result.option_valid
    assert result.bbox == [0.2, 0.2, 0.6, 0.6] and result.bbox_valid
    assert result.all_valid
    assert not result.bbox_rescaled and not result.bbox_reordered


def test_protocol_example_2_fenced_response_has_no_json_object():
    raw = '```json\n{"answer":"a","box":[0.6,0.6,0.2,0.2]}\n```'
    result = parse_image_strict(raw, OFFERED)
    assert result.stage == "invalid"
    assert (result.option_valid, result.bbox_valid) == (False, False)
    assert result.option_reason == result.bbox_reason == "no_json_object"


def test_protocol_example_3_pixel_box_invalid_option_still_valid():
    result = parse_image_strict(
        '{"answer_option_id":"A","bbox_xyxy_norm":[120,80,400,300]}', OFFERED
    )
    assert result.option_valid and result.option_ids == ["A"]
    assert not result.bbox_valid and result.bbox_reason == "out_of_range"
    assert result.stage == "strict"
    assert not result.all_valid


@pytest.mark.parametrize(
    ("box", "reason"),
    [
        ([0.1, 0.2, 0.3], "not_4_numbers"),
        ([0.1, 0.2, 0.3, "0.4"], "not_4_numbers"),
        ([0.1, 0.2, 0.3, None], "not_4_numbers"),
        ([0.1, 0.2, 0.3, False], "not_4_numbers"),
        ("0.1,0.2,0.3,0.4", "not_4_numbers"),
        ([[0.1, 0.2], [0.3, 0.4]], "not_4_numbers"),
        ([0.1, 0.2, 1.0001, 0.4], "out_of_range"),
        ([-0.0001, 0.2, 0.3, 0.4], "out_of_range"),
        ([0.3, 0.2, 0.1, 0.4], "reversed_corners"),
        ([0.1, 0.4, 0.3, 0.2], "reversed_corners"),
        ([0.1, 0.2, 0.1, 0.4], "degenerate"),
        ([0.1, 0.2, 0.3, 0.2], "degenerate"),
    ],
)
def test_box_rules(box, reason):
    raw = json.dumps({"answer_option_id": "C", "bbox_xyxy_norm": box})
    result = parse_image_strict(raw, OFFERED)
    assert not result.bbox_valid and result.bbox_reason == reason
    assert result.option_valid and result.option_ids == ["C"]


def test_box_on_the_unit_square_edges_is_valid():
    result = parse_image_strict('{"answer_option_id":"C","bbox_xyxy_norm":[0,0,1,1]}', OFFERED)
    assert result.bbox_valid and result.bbox == [0.0, 0.0, 1.0, 1.0]


def test_overflowing_number_is_non_finite():
    raw = '{"answer_option_id":"C","bbox_xyxy_norm":[0,0,1e400,1]}'
    assert parse_image_strict(raw, OFFERED).bbox_reason == "non_finite"
    raw = '{"answer_option_id":"C","bbox_xyxy_norm":[0,0,1' + "0" * 400 + ",1]}"
    assert parse_image_strict(raw, OFFERED).bbox_reason == "non_finite"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('"b"', "not_offered"),
        ('" B"', "not_offered"),
        ('"E"', "not_offered"),
        ("1", "not_string"),
        ('["B"]', "not_string"),
        ("null", "not_string"),
    ],
)
def test_option_rules(value, reason):
    raw = '{"answer_option_id":' + value + ',"bbox_xyxy_norm":[0.1,0.1,0.2,0.2]}'
    result = parse_image_strict(raw, OFFERED)
    assert not result.option_valid and result.option_reason == reason
    assert result.option_ids == []
    assert result.bbox_valid


def test_offered_ids_come_from_the_sample():
    raw = '{"answer_option_id":"H","bbox_xyxy_norm":[0.1,0.1,0.2,0.2]}'
    assert parse_image_strict(raw, list("ABCDEFGH")).option_valid
    assert not parse_image_strict(raw, OFFERED).option_valid


def test_aliases_are_not_strict_keys():
    result = parse_image_strict('{"answer":"A","bbox":[0.1,0.1,0.2,0.2]}', OFFERED)
    assert result.option_reason == result.bbox_reason == "key_absent"
    assert result.stage == "invalid"


@pytest.mark.parametrize("raw", ["[1, 2]", '"A"', "3", "null", "true"])
def test_json_that_is_not_an_object(raw):
    result = parse_image_strict(raw, OFFERED)
    assert result.option_reason == "not_object" and result.stage == "invalid"


@pytest.mark.parametrize("case", IMAGE_CASES, ids=[case.name for case in IMAGE_CASES])
def test_image_corpus_strict(case):
    result = parse_image_strict(case.raw, IMAGE_OFFERED)
    assert result.option_valid == (case.strict_option is not None)
    assert result.option_ids == ([case.strict_option] if case.strict_option else [])
    assert result.bbox_valid == (case.strict_box is not None)
    if case.strict_box is not None:
        assert result.bbox == pytest.approx(case.strict_box)
    valid_any = result.option_valid or result.bbox_valid
    assert result.stage == ("strict" if valid_any else "invalid")


# --- behavior -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", BEHAVIOR_CASES, ids=[case.name for case in BEHAVIOR_CASES])
def test_behavior_corpus_strict(case):
    result = parse_behavior_strict(case.raw, VIDEO_OFFERED)
    assert result.answers_valid == (case.strict_answers is not None)
    if case.strict_answers is not None:
        assert result.answers == case.strict_answers
        assert result.stage == "strict"
    else:
        assert result.answers is None and result.stage == "invalid"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"answer":[]}', "key_absent"),
        ('{"answers":"A"}', "not_list"),
        ('{"answers":["A"]}', "item_not_object"),
        ('{"answers":[{"option_id":"A"}]}', "item_key_absent"),
        ('{"answers":[{"intervals_sec":[[0,1]]}]}', "item_key_absent"),
        ('{"answers":[{"option_id":"a","intervals_sec":[[0,1]]}]}', "not_offered"),
        ('{"answers":[{"option_id":1,"intervals_sec":[[0,1]]}]}', "not_string"),
        ('{"answers":[{"option_id":"A","intervals_sec":[[0,1,2]]}]}', "not_interval_pairs"),
        ('{"answers":[{"option_id":"A","intervals_sec":[[0,"1"]]}]}', "not_interval_pairs"),
        ('{"answers":[{"option_id":"A","intervals_sec":[0,1]}]}', "not_interval_pairs"),
        ('{"answers":[{"option_id":"A","intervals_sec":[[true,1]]}]}', "not_interval_pairs"),
    ],
)
def test_behavior_structure_reasons(raw, reason):
    result = parse_behavior_strict(raw, VIDEO_OFFERED)
    assert not result.answers_valid and result.answers_reason == reason


def test_behavior_interval_values_are_kept_for_scoring():
    raw = '{"answers":[{"option_id":"A","intervals_sec":[[-5,1e999],[3,3]]}]}'
    result = parse_behavior_strict(raw, VIDEO_OFFERED)
    assert result.answers_valid
    assert result.answers == [{"option_id": "A", "intervals": [[-5.0, float("inf")], [3.0, 3.0]]}]


# --- visibility -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", VISIBILITY_CASES, ids=[case.name for case in VISIBILITY_CASES])
def test_visibility_corpus_strict(case):
    result = parse_visibility_strict(case.raw)
    assert result.count_valid == (case.strict_count is not None)
    assert result.intervals_valid == (case.strict_intervals is not None)
    if case.strict_count is not None:
        assert result.visible_count == case.strict_count
    if case.strict_intervals is not None:
        assert result.visible_intervals == case.strict_intervals


def test_visibility_fields_are_independent():
    result = parse_visibility_strict('{"visible_count":2.0,"visible_intervals_sec":[[0,1]]}')
    assert (result.count_valid, result.count_reason) == (False, "not_integer")
    assert result.intervals_valid and result.visible_intervals == [[0.0, 1.0]]
    assert result.stage == "strict" and not result.all_valid


def test_visibility_reasons():
    assert parse_visibility_strict('{"visible_count":-1}').count_reason == "negative"
    assert parse_visibility_strict('{"visible_count":true}').count_reason == "not_integer"
    assert parse_visibility_strict("{}").count_reason == "key_absent"
    assert parse_visibility_strict("{}").intervals_reason == "key_absent"
    raw = '{"visible_count":1,"visible_intervals_sec":{"start_sec":0,"end_sec":1}}'
    assert parse_visibility_strict(raw).intervals_reason == "not_list"
