"""Legacy parse: the authors' original lenient image parser, quirks included.

Every expected value below was worked out by hand from the written legacy rules
(docs/protocol.md, "Legacy"): strip; first `{` to last `}` through Python's default
`json.loads`; ids `str()`-ed, stripped, upper-cased; values taken as sequences; `float()` and
`max(0, min(1, v))` on coordinates; the narrow `BBox:` number pattern; then corner swaps.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from dataset_builder import default_image_samples, write_dataset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parse_corpus import IMAGE_CASES, IMAGE_OFFERED
from score_fixtures import image_parsed, image_sample, parsed_table, samples_table

from dualcog.errors import DataError
from dualcog.ingest import _gold_id_set, _SampleReader, ingest
from dualcog.parsing import (
    NOT_JSON,
    parse_image_legacy,
    parse_image_modes,
    parse_image_strict,
    parse_run,
)
from dualcog.parsing.legacy import LEGACY_MAX_DEPTH, legacy_candidate
from dualcog.scoring import score_samples

BOX = [0.1, 0.2, 0.5, 0.6]


def test_protocol_example_legacy_clamps_pixel_box():
    raw = 'I choose B. {"answer_option_id":"B","bbox_xyxy_norm":[200,100,600,500]}'
    result = parse_image_legacy(raw)
    assert result.option_ids == ["B"] and result.option_valid
    assert result.bbox == [1.0, 1.0, 1.0, 1.0] and result.bbox_valid
    assert result.stage == "legacy"
    assert not result.bbox_rescaled


# --- option -----------------------------------------------------------------------------------

OPTION_TABLE = [
    # Step 1, answer_option_ids: str(), stripped, upper-cased, kept if A-D, de-duplicated.
    ('{"answer_option_ids":["b","X","B","a"]}', ["B", "A"]),
    ('{"answer_option_ids":[" b ","\\tc\\n"]}', ["B", "C"]),
    # Taken as a sequence: a string gives its characters, an object its keys.
    ('{"answer_option_ids":"AB"}', ["A", "B"]),
    ('{"answer_option_ids":"B","answer_option_id":"d"}', ["B"]),
    ('{"answer_option_ids":{"c":1,"A":2}}', ["C", "A"]),
    # Items through str(): null is "NONE", true "TRUE", 1 "1" - none is a letter.
    ('{"answer_option_ids":[1,null,true,["B"],"d"]}', ["D"]),
    # No letter in step 1 (or a falsy value): step 2.
    ('{"answer_option_ids":["E"],"answer_option_id":"c"}', ["C"]),
    ('{"answer_option_ids":[],"answer_option_id":"c"}', ["C"]),
    ('{"answer_option_ids":0,"answer_option_id":"c"}', ["C"]),
    ('{"answer_option_ids":"","answer_option_id":"c"}', ["C"]),
    # A value that cannot be taken as a sequence ends the JSON steps: the regexes follow.
    ('Option: D {"answer_option_ids":2,"answer_option_id":"C"}', ["D"]),
    ('Option: D {"answer_option_ids":true,"answer_option_id":"C"}', ["D"]),
    ('{"answer_option_ids":2.5,"answer_option_id":"c"}', []),
    # Step 2, answer_option_id: stripped and upper-cased.
    ('{"answer_option_id":" b "}', ["B"]),
    ('{"answer_option_id":"d"}', ["D"]),
    ('{"answer_option_id":"E"}', []),
    ('{"answer_option_id":"b. front"}', []),
    ('{"answer_option_id":""} Option: a', ["A"]),
    ('{"answer_option_id":0} so C', ["C"]),
    # Step 3, `Option:` (case-insensitive) on the whole text.
    ("Option: c\nbecause", ["C"]),
    ("option : D, since A is wrong", ["D"]),
    ("OPTION:b", ["B"]),
    ("Option: E. A or B", ["A", "B"]),
    ("Option: Ab", []),
    # Step 4, standalone upper-case letters, de-duplicated in order.
    ("Between A and C, I pick C.", ["A", "C"]),
    ("(B)", ["B"]),
    ("i pick a", []),
    ("ABCD", []),
    ("", []),
    # Aliases are not legacy keys; the letter is still found as a standalone letter.
    ('{"answer":"B","bbox":[0.1,0.2,0.3,0.4]}', ["B"]),
    # The candidate spans both objects and fails to parse: letters come from the text.
    ('{"answer_option_id":"A"} {"answer_option_id":"C"}', ["A", "C"]),
    ('{"answer_option_id":"a",}', []),
    # No reasoning removal.
    ('<think>B seems right</think>{"answer_option_id":"c"}', ["C"]),
    ('<think>{"answer_option_id":"a"}</think>{"answer_option_id":"c"}', []),
]


@pytest.mark.parametrize(("raw", "letters"), OPTION_TABLE)
def test_legacy_option(raw, letters):
    result = parse_image_legacy(raw)
    assert result.option_ids == letters
    assert result.option_valid == bool(letters)
    assert result.option_reason == (None if letters else "no_letter")


# --- box --------------------------------------------------------------------------------------

_HUGE_INT = "1" + "0" * 400

BOX_TABLE = [
    # Python's default json.loads accepts NaN / Infinity; the clamp max(0, min(1, v)) sends
    # NaN and Infinity to 1.0 and -Infinity to 0.0; then reversed corners are swapped.
    ('{"bbox_xyxy_norm":[NaN,0.2,0.5,0.6]}', [0.5, 0.2, 1.0, 0.6], True),
    ('{"bbox_xyxy_norm":[0.1,0.2,Infinity,0.6]}', [0.1, 0.2, 1.0, 0.6], False),
    ('{"bbox_xyxy_norm":[-Infinity,0.2,0.5,0.6]}', [0.0, 0.2, 0.5, 0.6], False),
    ('{"bbox_xyxy_norm":[0,0,1e999,1]}', [0.0, 0.0, 1.0, 1.0], False),
    # float(): numeric strings and booleans pass.
    ('{"bbox_xyxy_norm":["0.1","0.2"," 0.5 ","6e-1"]}', BOX, False),
    ('{"bbox_xyxy_norm":[0.1,0.2,0.3,true]}', [0.1, 0.2, 0.3, 1.0], False),
    ('{"bbox_xyxy_norm":[false,0,true,1]}', [0.0, 0.0, 1.0, 1.0], False),
    # Taken as a sequence: "0123" is four one-character strings; an object gives its keys.
    ('{"bbox_xyxy_norm":"0123"}', [0.0, 1.0, 1.0, 1.0], False),
    ('{"bbox_xyxy_norm":{"0.1":0,"0.2":0,"0.5":0,"0.6":0}}', BOX, False),
    # Clamped, never rescaled.
    ('{"bbox_xyxy_norm":[200,100,600,500]}', [1.0, 1.0, 1.0, 1.0], False),
    ('{"bbox_xyxy_norm":[0.3,0.3,0.3,0.3]}', [0.3, 0.3, 0.3, 0.3], False),
    # Not 4 items, a failed conversion, or not a sequence: the BBox: regex instead.
    ('{"bbox_xyxy_norm":[0.5,0.5,0.7]} BBox: [0.1,0.2,0.5,0.6]', BOX, False),
    ('{"bbox_xyxy_norm":[0.5,"x",0.7,0.8]} BBox: [0.1,0.2,0.5,0.6]', BOX, False),
    ('{"bbox_xyxy_norm":[0.5,null,0.7,0.8]} BBox: [0.1,0.2,0.5,0.6]', BOX, False),
    ('{"bbox_xyxy_norm":5} BBox: [0.1,0.2,0.5,0.6]', BOX, False),
    ('{"bbox_xyxy_norm":"x"} BBox: [0.1,0.2,0.5,0.6]', BOX, False),
    # An integer literal too large for a double makes float() fail: the regex.
    ('{"bbox_xyxy_norm":[' + _HUGE_INT + ",0,1,1]} BBox: (0.1,0.2,0.5,0.6)", BOX, False),
    # ... while 1e400 as a float literal is infinity, clamped to 1.0.
    ('{"bbox_xyxy_norm":[1e400,0,1,1]} BBox: (0.1,0.2,0.5,0.6)', [1.0, 0.0, 1.0, 1.0], False),
    # The candidate's box wins over a BBox line.
    ('BBox: [0.1,0.2,0.3,0.4] {"bbox_xyxy_norm":[0.5,0.5,0.7,0.7]}', [0.5, 0.5, 0.7, 0.7], False),
    # The BBox: regex: case-insensitive, optional [ or (, clamped, then swapped.
    ("BBox: [0.1, 0.2, 0.5, 0.6]", BOX, False),
    ("bbox:(0.1,0.2,0.5,0.6)", BOX, False),
    ("BBOX : 0.1 , 0.2 , 0.5 , 0.6", BOX, False),
    ("BBox: [-0.2, 0.2, 1.5, 0.6]", [0.0, 0.2, 1.0, 0.6], False),
    ("BBox: [0.6, 0.5, 0.2, 0.1]", [0.2, 0.1, 0.6, 0.5], True),
    # Clamp first, then swap: [1.2, 0.5, 0.4, -3] -> [1, 0.5, 0.4, 0] -> swapped.
    ("BBox: [1.2, 0.5, 0.4, -3]", [0.4, 0.0, 1.0, 0.5], True),
    ("BBox: [0, 0, 1, 1]", [0.0, 0.0, 1.0, 1.0], False),
    # Its number is -?\d+(\.\d+)?: in the last place it reads a prefix of 0.4e-1, 1e-1, 1.
    ("BBox: [0.1, 0.2, 0.5, 0.4e-1]", [0.1, 0.2, 0.5, 0.4], False),
    ("BBox: [0.1, 0.2, 0.5, 1e-1]", [0.1, 0.2, 0.5, 1.0], False),
    ("BBox: [0.1, 0.2, 0.5, 1.]", [0.1, 0.2, 0.5, 1.0], False),
    # Python's \d is any Unicode decimal digit, and float() reads them.
    ("BBox: \u0660.\u0661, 0.2, 0.5, 0.6", BOX, False),
]


@pytest.mark.parametrize(("raw", "box", "reordered"), BOX_TABLE)
def test_legacy_box(raw, box, reordered):
    result = parse_image_legacy(raw)
    assert result.bbox_valid and result.bbox == pytest.approx(box)
    assert result.bbox_reordered == reordered
    assert result.stage == "legacy"


@pytest.mark.parametrize(
    "raw",
    [
        # Elsewhere than the last place, +0.1, .1, 1., 1e-1 and 0.4e-1 stop the regex.
        "BBox: [+0.1, 0.2, 0.5, 0.6]",
        "BBox: [.1, 0.2, 0.5, 0.6]",
        "BBox: [1., 0.2, 0.5, 0.6]",
        "BBox: [1e-1, 0.2, 0.5, 0.6]",
        "BBox: [0.4e-1, 0.2, 0.5, 0.6]",
        "BBox: [0.1, 0.2, 0.5, +0.6]",
        "BBox: [0.1, 0.2, 0.5, .6]",
        "BBox: [0.1, 0.2, 0.3]",
        "BBox = [0.1, 0.2, 0.5, 0.6]",
        '{"bbox":[0.1,0.2,0.3,0.4]}',  # aliases are not legacy keys
        '{"bbox_xyxy_norm":[0.1,0.2,null,0.4]}',
        '{"bbox_xyxy_norm":0}',
        '{"bbox_xyxy_norm":[[0.1],[0.2],[0.3],[0.4]]}',
        "[0.1, 0.2, 0.5, 0.6]",
    ],
)
def test_legacy_box_absent(raw):
    result = parse_image_legacy(raw)
    assert not result.bbox_valid and result.bbox is None and result.bbox_reason == "no_box"


# --- the JSON candidate -----------------------------------------------------------------------


def test_text_is_stripped_first():
    body = '{"answer_option_id":"b","bbox_xyxy_norm":[0.1,0.2,0.5,0.6]}'
    for raw in (body, "  \n" + body + "\t ", "\u00a0" + body + "\u2003"):
        result = parse_image_legacy(raw)
        assert (result.option_ids, result.bbox) == (["B"], BOX)


def test_candidate_runs_from_the_first_open_to_the_last_close_brace():
    assert legacy_candidate('x {"a": {"b": 1}} y') == {"a": {"b": 1}}
    assert legacy_candidate('} {"a": 1}') == {"a": 1}
    assert legacy_candidate("} no open") is NOT_JSON
    assert legacy_candidate("{ no close") is NOT_JSON


def _with_digits(n: int) -> str:
    return '{"answer_option_id":"a","bbox_xyxy_norm":[0.1,0.2,0.5,0.6],"n":' + "7" * n + "}"


def test_integer_literal_past_pythons_digit_guard_fails_the_candidate():
    # 4,300 digits parse; 4,301 make their json.loads raise: both fields go to the regexes.
    parsed = parse_image_legacy(_with_digits(4300))
    assert (parsed.option_ids, parsed.bbox) == (["A"], BOX)
    failed = parse_image_legacy(_with_digits(4301))
    assert failed.stage == "invalid" and failed.option_ids == [] and failed.bbox is None
    # Strict and compatible have no such limit.
    assert parse_image_strict(_with_digits(4301), IMAGE_OFFERED).bbox_valid


def _nested(depth: int) -> str:
    return '{"answer_option_id":"a","x":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def _at_stack_depth(frames: int, func, *args):
    return func(*args) if frames == 0 else _at_stack_depth(frames - 1, func, *args)


def test_nesting_limit_is_pythons_recursion_limit_not_512():
    assert parse_image_legacy(_nested(600)).option_ids == ["A"]
    assert not parse_image_strict(_nested(600), IMAGE_OFFERED).option_valid
    assert parse_image_legacy(_nested(LEGACY_MAX_DEPTH)).option_ids == ["A"]
    assert parse_image_legacy(_nested(LEGACY_MAX_DEPTH + 1)).option_ids == []
    # Fixed, whatever our own call stack holds, and never a RecursionError.
    deep = _at_stack_depth(600, parse_image_legacy, _nested(LEGACY_MAX_DEPTH))
    assert deep.option_ids == ["A"]
    assert parse_image_legacy("{" * 100_000 + "}" * 100_000).stage == "invalid"


def test_letters_are_a_to_d_whatever_is_offered():
    raw = '{"answer_option_id":"E","bbox_xyxy_norm":[0.1,0.1,0.2,0.2]}'
    strict, _, legacy = parse_image_modes(raw, list("ABCDEFGH"))
    assert strict.all_valid
    assert not legacy.option_valid and legacy.bbox_valid and legacy.stage == "legacy"


def test_nothing_found_is_invalid():
    result = parse_image_legacy("I am not sure.")
    assert result.stage == "invalid"
    assert (result.option_reason, result.bbox_reason) == ("no_letter", "no_box")


@pytest.mark.parametrize("case", IMAGE_CASES, ids=[case.name for case in IMAGE_CASES])
def test_shared_fast_path_gives_the_standalone_legacy_result(case):
    assert parse_image_modes(case.raw, IMAGE_OFFERED)[2] == parse_image_legacy(case.raw)


@pytest.mark.parametrize(("raw", "_letters"), OPTION_TABLE)
def test_shared_fast_path_on_the_option_table(raw, _letters):
    assert parse_image_modes(raw, IMAGE_OFFERED)[2] == parse_image_legacy(raw)


def test_fast_path_clamps_negative_zero():
    raw = '{"answer_option_id":"A","bbox_xyxy_norm":[-0.0,0.2,0.5,0.6]}'
    box = parse_image_modes(raw, IMAGE_OFFERED)[2].bbox
    assert box == [0.0, 0.2, 0.5, 0.6] and str(box[0]) == "0.0"


_LEGACY_FUZZ = [
    "{", "}", "[", "]", '"', ",", ":", " ", "\n", "NaN", "Infinity", "-Infinity", "1e400",
    "0.5", "-", "true", "null", "0123", '"0.1"', '"answer_option_ids"', '"answer_option_id"',
    '"bbox_xyxy_norm"', '"A"', '" b "', '"AB"', "B", "Option: C", "BBox: [", "BBox:",
    "0.4e-1", "+0.1", ".1", "1.", "\u0663", "7" * 4301, "[" * 300,
]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(_LEGACY_FUZZ)).map("".join)))
def test_legacy_never_raises_and_is_deterministic(raw):
    result = parse_image_legacy(raw)
    assert result == parse_image_legacy(raw)
    assert result == parse_image_modes(raw, IMAGE_OFFERED)[2]
    assert set(result.option_ids) <= set("ABCD")
    assert len(set(result.option_ids)) == len(result.option_ids)
    if result.bbox is not None:
        x1, y1, x2, y2 = result.bbox
        assert 0.0 <= x1 <= x2 <= 1.0 and 0.0 <= y1 <= y2 <= 1.0


def test_legacy_rows_in_a_per_mille_run_are_not_rescaled():
    raws = [
        '{"answer_option_id":"A","bbox_xyxy_norm":[200,200,600,600]}',
        '{"answer_option_id":"A","bbox_xyxy_norm":[100,100,300,300]}',
    ]
    options = [{"option_id": o, "label": o, "level": None} for o in "ABCD"]
    samples = pd.DataFrame(
        {"sample_id": ["a", "b"], "task": "action_decision", "options": [options, options]}
    )
    responses = pd.DataFrame({"sample_id": ["a", "b"], "raw_text": raws, "status": "ok"})
    table, info = parse_run(
        pa.Table.from_pandas(samples, preserve_index=False),
        pa.Table.from_pandas(responses, preserve_index=False),
    )
    frame = table.to_pandas()
    assert info["scale"] == "per_mille"
    legacy = frame[frame["parse"] == "legacy"]
    assert [list(box) for box in legacy["bbox"]] == [[1.0, 1.0, 1.0, 1.0]] * 2
    assert legacy["bbox_rescaled"].tolist() == [False, False]
    assert legacy["run_scale"].isna().all()
    assert legacy["stage"].tolist() == ["legacy", "legacy"]


# --- legacy scoring: gold id set, Future Observation box ---------------------------------------


def _legacy_score(sample: dict, letters: list[str], bbox=None) -> pd.Series:
    parsed = image_parsed(sample["sample_id"], "legacy", option_ids=letters, bbox=bbox,
                          task=sample["task"])  # fmt: skip
    scores = score_samples(samples_table([sample]), parsed_table([parsed])).to_pandas()
    return scores[scores["parse"] == "legacy"].iloc[0]


@pytest.mark.parametrize(
    ("gold_ids", "letters", "correct"),
    [
        (["B"], ["B"], True),
        (["B"], ["B", "C"], False),
        (["B", "C"], ["C", "B"], True),
        (["B", "C"], ["B"], False),
        (None, ["B"], True),  # no stored set: {gold_option_id}
    ],
)
def test_legacy_option_is_correct_iff_letters_equal_the_gold_id_set(gold_ids, letters, correct):
    sample = image_sample("s", gold_option="B")
    sample["gold_option_ids"] = gold_ids
    assert bool(_legacy_score(sample, letters)["option_correct"]) is correct


def test_legacy_future_observation_box_is_scored_against_the_released_answer_box():
    candidates = {"A": (0.2, 0.2, 0.6, 0.6), "B": (0.0, 0.0, 0.5, 0.5)}
    sample = image_sample("s", task="future_observation", candidates=candidates)
    sample["answer_bbox"] = [0.5, 0.5, 0.9, 0.9]  # differs from the correct candidate's box
    assert _legacy_score(sample, ["A"], [0.5, 0.5, 0.9, 0.9])["iou"] == 1.0
    assert _legacy_score(sample, ["B"], [0.5, 0.5, 0.9, 0.9])["iou"] == 1.0
    # Strict keeps the selected candidate's box.
    strict = image_parsed(
        "s", option_ids=["B"], bbox=[0.0, 0.0, 0.5, 0.5], task="future_observation"
    )
    scores = score_samples(samples_table([sample]), parsed_table([strict])).to_pandas()
    assert scores.loc[scores["parse"] == "strict", "iou"].iloc[0] == 1.0


@pytest.mark.parametrize("digits", [4300, 4301, 9000])
def test_shared_fast_path_with_integers_past_the_digit_guard(digits):
    strict_valid = '{"answer_option_id":"B","bbox_xyxy_norm":[0.1,0.2,0.5,0.6],"n":'
    other = '{"answer_option_id":"b","bbox_xyxy_norm":[0.1,0.2,0.5,0.6],"n":'
    for head in (strict_valid, other):
        raw = head + "7" * digits + "}"
        strict, _, legacy = parse_image_modes(raw, IMAGE_OFFERED)
        assert legacy == parse_image_legacy(raw)
        # The candidate fails past the guard: the box has no BBox line to fall back on.
        assert legacy.bbox_valid is (digits <= 4300)
    assert parse_image_modes(strict_valid + "7" * 9000 + "}", IMAGE_OFFERED)[0].all_valid


# --- what ingestion stores for legacy scoring -------------------------------------------------


def _ingested(tmp_path, images):
    samples = ingest(write_dataset(tmp_path, image_samples=images))[0].to_pandas()
    return {row["sample_id"]: row for row in samples.to_dict("records")}


@pytest.mark.parametrize(
    ("listed", "gold_set"),
    [(["B"], ["B"]), ([" C ", "", "B", "C"], ["C", "B"]), (["", " "], ["A"]), (None, ["A"])],
)
def test_gold_id_set(listed, gold_set):
    raw = {"sample_id": "s", "answer_option_id": "A"}
    if listed is not None:
        raw["answer_option_ids"] = listed
    assert _gold_id_set(_SampleReader(raw, Path("m.json"), 0), "A") == gold_set


def test_ingest_stores_the_gold_id_set_and_the_released_answer_box(tmp_path):
    images = default_image_samples()
    what = next(s for s in images if s["task_type"] == "self_what")
    what["answer_option_ids"] = [" B ", ""]
    what["answer_bbox_xyxy_norm"] = [0.3, 0.3, 0.7, 0.7]  # not the correct candidate's box
    rows = _ingested(tmp_path, images)
    row = rows[what["sample_id"]]
    assert list(row["gold_option_ids"]) == ["B"]
    assert list(row["gold_bbox"]) == [0.2, 0.2, 0.6, 0.6]  # candidate B's box
    assert list(row["answer_bbox"]) == [0.3, 0.3, 0.7, 0.7]
    where = next(s for s in images if s["task_type"] == "self_where")
    assert list(rows[where["sample_id"]]["gold_option_ids"]) == ["B"]
    assert list(rows[where["sample_id"]]["answer_bbox"]) == where["answer_bbox_xyxy_norm"]


@pytest.mark.parametrize("listed", ["B", [1], {"B": 1}])
def test_ingest_rejects_a_gold_id_set_that_is_not_a_list_of_strings(listed):
    raw = {"sample_id": "s", "answer_option_ids": listed}
    with pytest.raises(DataError) as info:
        _gold_id_set(_SampleReader(raw, Path("m.json"), 0), "A")
    assert (info.value.field, info.value.sample, info.value.file) == (
        "answer_option_ids",
        "s",
        "m.json",
    )
