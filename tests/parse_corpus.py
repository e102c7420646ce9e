"""Realistic model outputs with hand-derived strict and compatible results (docs/protocol.md §3).

Image cases are judged with offered ids A–D and run scale `norm`; expected boxes are the
valid normalized box, or None when the box field is invalid. Run-level scale cases
(per-mille, pixel, ambiguous) live in test_parse_compatible.py because they need a run.
"""

from __future__ import annotations

import json
from typing import NamedTuple

IMAGE_OFFERED = ("A", "B", "C", "D")
BOX = [0.1, 0.2, 0.5, 0.6]
CANON = '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,0.5,0.6]}'


class ImageCase(NamedTuple):
    name: str
    raw: str
    strict_option: str | None
    strict_box: list[float] | None
    compatible_option: str | None
    compatible_box: list[float] | None
    compatible_stage: str


def _obj(**fields: object) -> str:
    return json.dumps(fields)


IMAGE_CASES: list[ImageCase] = [
    ImageCase("canonical", CANON, "B", BOX, "B", BOX, "strict"),
    ImageCase("surrounding_whitespace", "\n  " + CANON + "\n", "B", BOX, "B", BOX, "strict"),
    ImageCase(
        "pretty_printed",
        json.dumps({"answer_option_id": "B", "bbox_xyxy_norm": BOX}, indent=2),
        "B",
        BOX,
        "B",
        BOX,
        "strict",
    ),
    ImageCase("nbsp_padding", "\u00a0" + CANON + "\u00a0", "B", BOX, "B", BOX, "strict"),
    ImageCase("bom_prefix", "\ufeff" + CANON, None, None, "B", BOX, "balanced"),
    ImageCase("fence_json", "```json\n" + CANON + "\n```", None, None, "B", BOX, "fence"),
    ImageCase("fence_bare", "```\n" + CANON + "\n```", None, None, "B", BOX, "fence"),
    # A fence needs a line break after its opening backticks; stage 3 finds the object.
    ImageCase("fence_upper_inline", "```JSON " + CANON + "```", None, None, "B", BOX, "balanced"),
    ImageCase("fence_python_tag", "```python\n" + CANON + "\n```", None, None, "B", BOX, "fence"),
    ImageCase(
        "fence_with_prose",
        "Here is my answer:\n```json\n" + CANON + "\n```\nLet me know if you need more.",
        None,
        None,
        "B",
        BOX,
        "fence",
    ),
    ImageCase("unclosed_fence", "```json\n" + CANON, None, None, "B", BOX, "balanced"),
    ImageCase(
        "broken_fence_then_object",
        "```json\n{broken}\n```\nCorrected: " + CANON,
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "fenced_scalar_then_object",
        '```\n"B"\n```\n' + CANON,
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "chatty_preamble",
        "Sure! Comparing the two views, the landmark is ahead of me. " + CANON,
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "chatty_trailer",
        CANON + "\nThe landmark occupies the centre of image 2.",
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "braces_in_prose",
        'The label "{Front}" fits best: ' + CANON,
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "braces_inside_json_string",
        '{"answer_option_id":"B","note":"use } and { carefully",'
        '"bbox_xyxy_norm":[0.1,0.2,0.5,0.6]} done',
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "escaped_quote_inside_json_string",
        '{"answer_option_id":"B","note":"he said \\"}\\"","bbox_xyxy_norm":[0.1,0.2,0.5,0.6]}!',
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "first_parsing_object_is_the_candidate",
        'Draft: {"answer_option_id":"Z"} Final: ' + CANON,
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "object_inside_array_in_prose",
        "Answer: [" + CANON + "]",
        None,
        None,
        "B",
        BOX,
        "balanced",
    ),
    ImageCase(
        "think_block_with_json_inside",
        '<think>Compare facades; {"answer_option_id":"A"} looks wrong.</think>\n' + CANON,
        None,
        None,
        "B",
        BOX,
        "strict",
    ),
    ImageCase("think_mixed_case", "<THINK>hmm</Think>" + CANON, None, None, "B", BOX, "strict"),
    ImageCase(
        "reasoning_block", '<reasoning>{"x": 1}</reasoning>' + CANON, None, None, "B", BOX, "strict"
    ),
    ImageCase(
        "unclosed_think_after_answer",
        CANON + '\n<think>double-check {"answer_option_id":"C"}',
        None,
        None,
        "B",
        BOX,
        "strict",
    ),
    ImageCase(
        "unclosed_think_swallows_answer",
        "<think>So the answer is " + CANON,
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "orphan_close_think",
        'The user wants a box. {"answer_option_id":"A"} maybe.</think>\n' + CANON,
        None,
        None,
        "B",
        BOX,
        "strict",
    ),
    ImageCase(
        "orphan_closers_last_one_counts",
        "x</think>y</REASONING>\n" + CANON,
        None,
        None,
        "B",
        BOX,
        "strict",
    ),
    ImageCase(
        "tag_inside_json_string_is_still_removed",
        '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,0.5,0.6],"note":"</think>"}',
        "B",
        BOX,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "think_then_fence_with_aliases",
        '<think>I\'ll answer {"answer":"A"}</think>\n```json\n'
        '{"answer":"b","box":[0.5,0.6,0.1,0.2]}\n```',
        None,
        None,
        "B",
        BOX,
        "keys",
    ),
    ImageCase(
        "trailing_comma",
        '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,0.5,0.6],}',
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "single_quotes",
        "{'answer_option_id': 'B', 'bbox_xyxy_norm': [0.1, 0.2, 0.5, 0.6]}",
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "nested_answers_singleton",
        '{"answers":[{"answer_option_id":"b","bbox":[0.1,0.2,0.5,0.6]}]}',
        None,
        None,
        "B",
        BOX,
        "keys",
    ),
    ImageCase(
        "answers_with_two_items",
        '{"answers":[' + CANON + "," + CANON + "]}",
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "answers_with_canonical_key_outside",
        '{"answer_option_id":"C","answers":[' + CANON + "]}",
        "C",
        None,
        "C",
        None,
        "strict",
    ),
    ImageCase("top_level_singleton_array", "[" + CANON + "]", None, None, "B", BOX, "keys"),
    ImageCase(
        "top_level_array_of_two", "[" + CANON + "," + CANON + "]", None, None, None, None, "invalid"
    ),
    ImageCase(
        "nan_coordinate",
        '{"answer_option_id":"B","bbox_xyxy_norm":[NaN,0.2,0.5,0.6]}',
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "infinity_coordinate",
        '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,Infinity,0.6]}',
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "negative_infinity_coordinate",
        '{"answer_option_id":"B","bbox_xyxy_norm":[-Infinity,0.2,0.5,0.6]}',
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "overflowing_exponent",
        '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,1e999,0.6]}',
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "scientific_notation",
        '{"answer_option_id":"B","bbox_xyxy_norm":[1e-1,2E-1,5.0e-1,6e-1]}',
        "B",
        BOX,
        "B",
        BOX,
        "strict",
    ),
    ImageCase(
        "unicode_minus",
        '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,\u22120.2,0.5,0.6]}',
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "box_as_string",
        _obj(answer_option_id="B", bbox_xyxy_norm="[0.1, 0.2, 0.5, 0.6]"),
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "box_as_object",
        _obj(answer_option_id="B", bbox_xyxy_norm={"x1": 0.1, "y1": 0.2, "x2": 0.5, "y2": 0.6}),
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "box_with_bool",
        '{"answer_option_id":"B","bbox_xyxy_norm":[true,0.2,0.5,0.6]}',
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "box_five_numbers",
        _obj(answer_option_id="B", bbox_xyxy_norm=[0.1, 0.2, 0.5, 0.6, 0.7]),
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "duplicate_keys_last_wins",
        '{"answer_option_id":"A","answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,0.5,0.6]}',
        "B",
        BOX,
        "B",
        BOX,
        "strict",
    ),
    ImageCase(
        "reversed_corners",
        _obj(answer_option_id="B", bbox_xyxy_norm=[0.5, 0.6, 0.1, 0.2]),
        "B",
        None,
        "B",
        BOX,
        "strict",
    ),
    ImageCase(
        "degenerate_box",
        _obj(answer_option_id="B", bbox_xyxy_norm=[0.3, 0.2, 0.3, 0.6]),
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "negative_coordinate",
        _obj(answer_option_id="B", bbox_xyxy_norm=[-0.1, 0.2, 0.5, 0.6]),
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "per_mille_box_in_norm_run",
        _obj(answer_option_id="B", bbox_xyxy_norm=[100, 200, 500, 600]),
        "B",
        None,
        "B",
        None,
        "strict",
    ),
    ImageCase(
        "integer_unit_box",
        _obj(answer_option_id="B", bbox_xyxy_norm=[0, 0, 1, 1]),
        "B",
        [0.0, 0.0, 1.0, 1.0],
        "B",
        [0.0, 0.0, 1.0, 1.0],
        "strict",
    ),
    ImageCase(
        "extra_keys_ignored",
        _obj(answer_option_id="B", bbox_xyxy_norm=BOX, confidence=0.9, reason="facade matches"),
        "B",
        BOX,
        "B",
        BOX,
        "strict",
    ),
    ImageCase(
        "lowercase_option",
        _obj(answer_option_id="b", bbox_xyxy_norm=BOX),
        None,
        BOX,
        "B",
        BOX,
        "keys",
    ),
    ImageCase(
        "padded_option",
        _obj(answer_option_id=" B ", bbox_xyxy_norm=BOX),
        None,
        BOX,
        "B",
        BOX,
        "keys",
    ),
    ImageCase(
        "option_with_label",
        _obj(answer_option_id="B. Front", bbox_xyxy_norm=BOX),
        None,
        BOX,
        None,
        BOX,
        "strict",
    ),
    ImageCase(
        "option_in_parentheses",
        _obj(answer_option_id="(B)", bbox_xyxy_norm=BOX),
        None,
        BOX,
        None,
        BOX,
        "strict",
    ),
    ImageCase(
        "option_spelled_out",
        _obj(answer_option_id="Option B", bbox_xyxy_norm=BOX),
        None,
        BOX,
        None,
        BOX,
        "strict",
    ),
    ImageCase(
        "option_number",
        _obj(answer_option_id=2, bbox_xyxy_norm=BOX),
        None,
        BOX,
        None,
        BOX,
        "strict",
    ),
    ImageCase(
        "option_as_list",
        _obj(answer_option_id=["B"], bbox_xyxy_norm=BOX),
        None,
        BOX,
        None,
        BOX,
        "strict",
    ),
    ImageCase(
        "option_not_offered",
        _obj(answer_option_id="E", bbox_xyxy_norm=BOX),
        None,
        BOX,
        None,
        BOX,
        "strict",
    ),
    ImageCase(
        "aliases_choice_bbox_norm",
        _obj(choice="C", bbox_norm=BOX),
        None,
        None,
        "C",
        BOX,
        "keys",
    ),
    ImageCase(
        "aliases_option_bounding_box",
        _obj(option="D", bounding_box=BOX),
        None,
        None,
        "D",
        BOX,
        "keys",
    ),
    ImageCase("aliases_option_id_box", _obj(option_id="A", box=BOX), None, None, "A", BOX, "keys"),
    ImageCase(
        "canonical_key_beats_alias",
        _obj(answer_option_id="E", answer="B", bbox_xyxy_norm=BOX),
        None,
        BOX,
        None,
        BOX,
        "strict",
    ),
    ImageCase(
        "alias_order_choice_before_answer",
        _obj(answer="C", choice="D", bbox=BOX),
        None,
        None,
        "D",
        BOX,
        "keys",
    ),
    ImageCase(
        "alias_order_bbox_before_box",
        _obj(answer_option_id="B", box=[0.2, 0.2, 0.6, 0.6], bbox=BOX),
        "B",
        None,
        "B",
        BOX,
        "keys",
    ),
    ImageCase("empty_response", "", None, None, None, None, "invalid"),
    ImageCase(
        "refusal",
        "I cannot determine the landmark's position from these images.",
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "legacy_style_lines",
        "Option: B\nBBox: [0.1, 0.2, 0.5, 0.6]",
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase(
        "truncated_output",
        '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2',
        None,
        None,
        None,
        None,
        "invalid",
    ),
    ImageCase("json_scalar_string", '"B"', None, None, None, None, "invalid"),
]


VIDEO_OFFERED = ("A", "B", "C", "D", "E", "F")
BEHAVIOR_CANON = (
    '{"answers":[{"option_id":"A","intervals_sec":[[0,10]]},'
    '{"option_id":"C","intervals_sec":[[10.5,20]]}]}'
)
BEHAVIOR_ANSWERS = [
    {"option_id": "A", "intervals": [[0.0, 10.0]]},
    {"option_id": "C", "intervals": [[10.5, 20.0]]},
]
ONE_A = [{"option_id": "A", "intervals": [[0.0, 10.0]]}]


class BehaviorCase(NamedTuple):
    name: str
    raw: str
    strict_answers: list[dict] | None  # None = answers invalid
    compatible_answers: list[dict] | None
    compatible_stage: str


def _answers(*items: dict) -> str:
    return json.dumps({"answers": list(items)})


BEHAVIOR_CASES: list[BehaviorCase] = [
    BehaviorCase("canonical", BEHAVIOR_CANON, BEHAVIOR_ANSWERS, BEHAVIOR_ANSWERS, "strict"),
    BehaviorCase("empty_answers", '{"answers": []}', [], [], "strict"),
    BehaviorCase(
        "option_ids_singleton",
        _answers({"option_ids": ["A"], "intervals_sec": [[0, 10]]}),
        None,
        ONE_A,
        "keys",
    ),
    BehaviorCase(
        "option_ids_two",
        _answers({"option_ids": ["A", "C"], "intervals_sec": [[0, 10]]}),
        None,
        None,
        "invalid",
    ),
    BehaviorCase(
        "flat_pair", _answers({"option_id": "A", "intervals_sec": [0, 10]}), None, ONE_A, "keys"
    ),
    BehaviorCase(
        "interval_objects_sec",
        _answers({"option_id": "A", "intervals_sec": [{"start_sec": 0, "end_sec": 10}]}),
        None,
        ONE_A,
        "keys",
    ),
    BehaviorCase(
        "interval_objects_plain",
        _answers({"option_id": "A", "intervals_sec": [{"start": 0, "end": 10}]}),
        None,
        ONE_A,
        "keys",
    ),
    BehaviorCase(
        "lowercase_option",
        _answers({"option_id": "a", "intervals_sec": [[0, 10]]}),
        None,
        ONE_A,
        "keys",
    ),
    BehaviorCase(
        "one_bad_item_invalidates_all",
        _answers(
            {"option_id": "A", "intervals_sec": [[0, 10]]},
            {"option_id": "Z", "intervals_sec": [[10, 20]]},
        ),
        None,
        None,
        "invalid",
    ),
    BehaviorCase(
        "top_level_singleton_array", "[" + BEHAVIOR_CANON + "]", None, BEHAVIOR_ANSWERS, "keys"
    ),
    BehaviorCase(
        "top_level_array_of_items",
        '[{"option_id":"A","intervals_sec":[[0,10]]}]',
        None,
        None,
        "invalid",
    ),
    BehaviorCase(
        "think_and_fence",
        "<think>Two behaviours: {A} then {C}.</think>\n```json\n" + BEHAVIOR_CANON + "\n```",
        None,
        BEHAVIOR_ANSWERS,
        "fence",
    ),
    BehaviorCase(
        "reversed_interval_values_not_judged_here",
        _answers({"option_id": "A", "intervals_sec": [[10, 0]]}),
        [{"option_id": "A", "intervals": [[10.0, 0.0]]}],
        [{"option_id": "A", "intervals": [[10.0, 0.0]]}],
        "strict",
    ),
    BehaviorCase(
        "interval_as_string",
        _answers({"option_id": "A", "intervals_sec": "0-10"}),
        None,
        None,
        "invalid",
    ),
    BehaviorCase(
        "answers_object_not_list",
        '{"answers":{"option_id":"A","intervals_sec":[[0,10]]}}',
        None,
        None,
        "invalid",
    ),
    BehaviorCase(
        "nan_interval",
        '{"answers":[{"option_id":"A","intervals_sec":[[0,NaN]]}]}',
        None,
        None,
        "invalid",
    ),
    BehaviorCase(
        "trailing_comma_inner_object_wins",
        '{"answers":[{"option_id":"A","intervals_sec":[[0,10]]}],}',
        None,
        None,
        "invalid",
    ),
    BehaviorCase(
        "prose_wrapped",
        "The drone first ascends. " + BEHAVIOR_CANON + " Done.",
        None,
        BEHAVIOR_ANSWERS,
        "balanced",
    ),
]


class VisibilityCase(NamedTuple):
    name: str
    raw: str
    strict_count: int | None
    strict_intervals: list[list[float]] | None
    compatible_count: int | None
    compatible_intervals: list[list[float]] | None
    compatible_stage: str


TWO = [[0.0, 9.1], [17.7, 26.8]]
VISIBILITY_CANON = '{"visible_count":2,"visible_intervals_sec":[[0,9.1],[17.7,26.8]]}'

VISIBILITY_CASES: list[VisibilityCase] = [
    VisibilityCase("canonical", VISIBILITY_CANON, 2, TWO, 2, TWO, "strict"),
    VisibilityCase(
        "integral_float_count",
        '{"visible_count":2.0,"visible_intervals_sec":[[0,9.1],[17.7,26.8]]}',
        None,
        TWO,
        2,
        TWO,
        "keys",
    ),
    VisibilityCase(
        "fractional_count",
        '{"visible_count":2.5,"visible_intervals_sec":[]}',
        None,
        [],
        None,
        [],
        "strict",
    ),
    VisibilityCase(
        "count_as_string",
        '{"visible_count":"2","visible_intervals_sec":[]}',
        None,
        [],
        None,
        [],
        "strict",
    ),
    VisibilityCase(
        "count_as_bool",
        '{"visible_count":true,"visible_intervals_sec":[]}',
        None,
        [],
        None,
        [],
        "strict",
    ),
    VisibilityCase(
        "negative_count",
        '{"visible_count":-1,"visible_intervals_sec":[]}',
        None,
        [],
        None,
        [],
        "strict",
    ),
    # An integer of any size is a valid count (and a wrong one).
    VisibilityCase(
        "count_beyond_int64",
        '{"visible_count":100000000000000000000,"visible_intervals_sec":[]}',
        10**20,
        [],
        10**20,
        [],
        "strict",
    ),
    VisibilityCase(
        "interval_objects",
        '{"visible_count":2,"visible_intervals_sec":[{"start_sec":0,"end_sec":9.1},'
        '{"start_sec":17.7,"end_sec":26.8}]}',
        2,
        None,
        2,
        TWO,
        "keys",
    ),
    VisibilityCase(
        "flat_pair",
        '{"visible_count":1,"visible_intervals_sec":[0,9.1]}',
        1,
        None,
        1,
        [[0.0, 9.1]],
        "keys",
    ),
    VisibilityCase(
        "none_visible", '{"visible_count":0,"visible_intervals_sec":[]}', 0, [], 0, [], "strict"
    ),
    VisibilityCase(
        "prose_wrapped", "Visible twice: " + VISIBILITY_CANON, None, None, 2, TWO, "balanced"
    ),
    VisibilityCase("intervals_key_absent", '{"visible_count":2}', 2, None, 2, None, "strict"),
    VisibilityCase(
        "unclosed_think", "<think>count the segments {0-9}", None, None, None, None, "invalid"
    ),
]
