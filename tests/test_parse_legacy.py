"""Legacy parse (PROTOCOL §3.4): the authors' original lenient image parser."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from parse_corpus import IMAGE_CASES, IMAGE_OFFERED

from dualcog.parsing import parse_image_legacy, parse_image_modes, parse_run


def test_protocol_example_legacy_clamps_pixel_box():
    raw = 'I choose B. {"answer_option_id":"B","bbox_xyxy_norm":[200,100,600,500]}'
    result = parse_image_legacy(raw)
    assert result.option_ids == ["B"] and result.option_valid
    assert result.bbox == [1.0, 1.0, 1.0, 1.0] and result.bbox_valid
    assert result.stage == "legacy"
    assert not result.bbox_rescaled


@pytest.mark.parametrize(
    ("raw", "letters"),
    [
        # answer_option_ids: upper-cased, kept if A-D, de-duplicated in order.
        ('{"answer_option_ids":["b","X","B","a"]}', ["B", "A"]),
        # An empty list result falls through to answer_option_id.
        ('{"answer_option_ids":["E"],"answer_option_id":"c"}', ["C"]),
        ('{"answer_option_ids":"B","answer_option_id":"d"}', ["D"]),
        # answer_option_id is not stripped; the letter fallbacks then find nothing here.
        ('{"answer_option_id":"E"}', []),
        # ... but a padded id is still found by the standalone-letter regex.
        ('{"answer_option_id":" B"}', ["B"]),
        ("Option: c\nbecause", ["C"]),
        ("option : D, since A is wrong", ["D"]),
        ("Between A and C, I pick C.", ["A", "C"]),
        ("i pick a", []),
        ("ABCD", []),
        ('{"answer":"B","bbox":[0.1,0.2,0.3,0.4]}', ["B"]),
        ("", []),
    ],
)
def test_legacy_option(raw, letters):
    result = parse_image_legacy(raw)
    assert result.option_ids == letters
    assert result.option_valid == bool(letters)
    assert result.option_reason == (None if letters else "no_letter")


def test_legacy_does_not_remove_reasoning():
    box = [0.1, 0.2, 0.5, 0.6]
    raw = "<think>B seems right</think>" + json.dumps(
        {"answer_option_id": "C", "bbox_xyxy_norm": box}
    )
    assert parse_image_legacy(raw).option_ids == ["C"]
    # First `{` to last `}` spans both objects and fails; the letters come from the text.
    raw = '<think>{"answer_option_id":"A"}</think>{"answer_option_id":"C"}'
    assert parse_image_legacy(raw).option_ids == ["A", "C"]


@pytest.mark.parametrize(
    ("raw", "box", "reordered"),
    [
        ("BBox: [0.1, 0.2, 0.5, 0.6]", [0.1, 0.2, 0.5, 0.6], False),
        ("bbox:(0.1,0.2,0.5,0.6)", [0.1, 0.2, 0.5, 0.6], False),
        ("BBox : 1e-1, .2, +0.5, 6E-1", [0.1, 0.2, 0.5, 0.6], False),
        ("BBox: [-0.2, 0.2, 1.5, 0.6]", [0.0, 0.2, 1.0, 0.6], False),
        ("BBox: [0.6, 0.5, 0.2, 0.1]", [0.2, 0.1, 0.6, 0.5], True),
        # Clamp first, then swap: [1.2, 0.5, 0.4, -3] -> [1, 0.5, 0.4, 0] -> swapped.
        ("BBox: [1.2, 0.5, 0.4, -3]", [0.4, 0.0, 1.0, 0.5], True),
        ('{"bbox_xyxy_norm":[0.3,0.3,0.3,0.3]}', [0.3, 0.3, 0.3, 0.3], False),
        ('{"bbox_xyxy_norm":[0,0,1e999,1]}', [0.0, 0.0, 1.0, 1.0], False),
        ('{"bbox_xyxy_norm":"x"} BBox: [0.1,0.2,0.3,0.4]', [0.1, 0.2, 0.3, 0.4], False),
        # The candidate's box wins over a BBox line.
        (
            'BBox: [0.1,0.2,0.3,0.4] {"bbox_xyxy_norm":[0.5,0.5,0.7,0.7]}',
            [0.5, 0.5, 0.7, 0.7],
            False,
        ),
    ],
)
def test_legacy_box(raw, box, reordered):
    result = parse_image_legacy(raw)
    assert result.bbox_valid and result.bbox == pytest.approx(box)
    assert result.bbox_reordered == reordered
    assert result.stage == "legacy"


@pytest.mark.parametrize(
    "raw",
    [
        '{"answer_option_id":"B","bbox_xyxy_norm":[NaN,0,1,1]}',  # not RFC JSON, no BBox line
        '{"bbox":[0.1,0.2,0.3,0.4]}',  # aliases are not legacy keys
        "BBox: [0.1, 0.2, 0.3]",
        '{"bbox_xyxy_norm":[0.1,0.2,0.3,true]}',
    ],
)
def test_legacy_box_absent(raw):
    result = parse_image_legacy(raw)
    assert not result.bbox_valid and result.bbox is None and result.bbox_reason == "no_box"


def test_legacy_nothing_found_is_invalid():
    result = parse_image_legacy("I am not sure.")
    assert result.stage == "invalid"
    assert (result.option_reason, result.bbox_reason) == ("no_letter", "no_box")


def test_legacy_letters_are_a_to_d_whatever_is_offered():
    raw = '{"answer_option_id":"E","bbox_xyxy_norm":[0.1,0.1,0.2,0.2]}'
    strict, _, legacy = parse_image_modes(raw, list("ABCDEFGH"))
    assert strict.all_valid
    assert not legacy.option_valid and legacy.bbox_valid and legacy.stage == "legacy"


@pytest.mark.parametrize("case", IMAGE_CASES, ids=[case.name for case in IMAGE_CASES])
def test_shared_fast_path_gives_the_standalone_legacy_result(case):
    assert parse_image_modes(case.raw, IMAGE_OFFERED)[2] == parse_image_legacy(case.raw)


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
    frame, info = parse_run(samples, responses)
    assert info["scale"] == "per_mille"
    legacy = frame[frame["parse"] == "legacy"]
    assert [list(box) for box in legacy["bbox"]] == [[1.0, 1.0, 1.0, 1.0]] * 2
    assert legacy["bbox_rescaled"].tolist() == [False, False]
    assert legacy["run_scale"].isna().all()
    assert legacy["stage"].tolist() == ["legacy", "legacy"]
