"""Compatible parse (docs/protocol.md §3.2, §3.3) and the run-level `parse_run` table."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from parse_corpus import (
    BEHAVIOR_CASES,
    IMAGE_CASES,
    IMAGE_OFFERED,
    VIDEO_OFFERED,
    VISIBILITY_CASES,
)

from dualcog.parsing import (
    compatible_candidate,
    first_balanced_array,
    first_balanced_object,
    first_fence_content,
    parse_behavior_compatible,
    parse_image_compatible,
    parse_run,
    parse_visibility_compatible,
    remove_reasoning,
    resolve_run_scale,
)
from dualcog.schemas import PARSED, read_arrow, to_table, write_table

OFFERED = ("A", "B", "C", "D")
OPTIONS = [{"option_id": o, "label": f"label {o}", "level": None} for o in OFFERED]


# --- stage 0: reasoning removal -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no tags here", "no tags here"),
        ("a<think>x</think>b<reasoning>y</reasoning>c", "abc"),
        ("<Reasoning>x</REASONING>y", "y"),
        # A block ends at the first closing tag of its own name.
        ("<think>a</reasoning>b</think>c", "c"),
        # No nesting: the inner closer ends the block, the outer closer is an orphan (c).
        ("<think>a<think>b</think>c</think>d", "d"),
        # (b) an unclosed opener removes everything after it.
        ('x<think>unclosed {"a": 1}', "x"),
        ("<think>a</think>keep<reasoning>open", "keep"),
        # (c) orphan closers: drop through the last one.
        ("pre</think>mid</reasoning>post", "post"),
        # Tags with attributes are not tags; the plain closer is then an orphan.
        ("<think mode='x'>a</think>b", "b"),
        # Not JSON-aware: a tag inside a JSON string counts.
        ('{"note":"<think>"} tail', '{"note":"'),
    ],
)
def test_remove_reasoning(text, expected):
    assert remove_reasoning(text) == expected


def test_remove_reasoning_order_closed_blocks_before_orphans():
    # (a) first removes the closed block, then (c) sees the orphan before it.
    assert remove_reasoning("A</think>B<think>C</think>D") == "BD"


# --- stages 1–3 -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ('```json\n{"a":1}\n```', '{"a":1}\n'),
        ('```\n{"a":1}\n```', '{"a":1}\n'),
        # The info string is the rest of the opening line, whatever its characters.
        ('```json.\n{"a":1}```', '{"a":1}'),
        ('```1\n{"a":1}\n```', '{"a":1}\n'),
        ('```c#\r\n{"a":1}\n```', '{"a":1}\n'),
        ('``` {"a":0} ``` x\n{"a":1}\n```', '{"a":1}\n'),
        # Without a line break after the opening backticks there is no fence.
        ('```JSON {"a":1}```', None),
        ('```json{"a":1}```', None),
        ('```{"a":1}```', None),
        ('```{"a":1}``` and ```', None),
        ("x ```json\n[1]\n``` y ```json\n[2]\n```", "[1]\n"),
        ('```json\n{"a":1}', None),
        ("~~~json\n{}\n~~~", None),
        ("no fence", None),
    ],
)
def test_first_fence_content(text, content):
    assert first_fence_content(text) == content


def test_balanced_object_respects_strings_and_escapes():
    text = 'pre {"a": "}", "b": "\\"{"} post {"c": 2}'
    assert first_balanced_object(text) == {"a": "}", "b": '"{'}


def test_balanced_object_skips_spans_that_do_not_parse():
    assert first_balanced_object('{not json} {also {bad}} {"ok": 1}') == {"ok": 1}


def test_balanced_object_nested_start_can_parse_when_outer_does_not():
    assert first_balanced_object('{answer: {"x": 1}}') == {"x": 1}


def test_over_deep_spans_are_skipped_for_the_first_that_parses():
    nested = first_balanced_array("x " + "[" * 600 + "]" * 600)
    depth = 0
    while isinstance(nested, list) and nested:
        nested, depth = nested[0], depth + 1
    assert depth == 511  # the outermost span of 512 levels or fewer; the innermost is []
    nested = first_balanced_object("x " + '{"a":' * 600 + "1" + "}" * 600)
    depth = 0
    while isinstance(nested, dict):
        nested, depth = nested["a"], depth + 1
    assert (depth, nested) == (512, 1)


def test_repeated_unclosed_tags():
    assert remove_reasoning("<think>" * 1000 + '{"a": 1}') == ""
    assert remove_reasoning("ok " + "<think></reasoning>" * 1000) == "ok "


def test_array_only_when_no_object_parses():
    assert compatible_candidate('[1, 2] then {"a": 1}') == ({"a": 1}, "balanced")
    assert compatible_candidate("list: [1, 2] and {bad}") == ([1, 2], "balanced")
    assert first_balanced_array("[oops] [3]") == [3]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', ({"a": 1}, "strict")),
        ("  [1]  ", ([1], "strict")),
        ('```json\n{"a": 1}\n```', ({"a": 1}, "fence")),
        ('x {"a": 1} y', ({"a": 1}, "balanced")),
        ('"just a string"', (None, "invalid")),
        ("```\n42\n```", (None, "invalid")),
        ('```\n"s"\n``` {"a": 1}', ({"a": 1}, "balanced")),
        ("", (None, "invalid")),
        ('<think>{"a": 1}</think>', (None, "invalid")),
    ],
)
def test_compatible_candidate_stages(raw, expected):
    assert compatible_candidate(raw) == expected


def test_fence_candidate_wins_over_an_earlier_bare_object():
    raw = 'Draft {"answer":"A"}\n```json\n{"answer":"B"}\n```'
    assert compatible_candidate(raw) == ({"answer": "B"}, "fence")


# --- worked examples of docs/protocol.md ----------------------------------------------------------


def test_protocol_example_2_fence_keys_reorder():
    raw = '```json\n{"answer":"a","box":[0.6,0.6,0.2,0.2]}\n```'
    result = parse_image_compatible(raw, OFFERED)
    assert result.option_ids == ["A"] and result.option_valid
    assert result.bbox == [0.2, 0.2, 0.6, 0.6] and result.bbox_valid
    assert result.bbox_reordered and not result.bbox_rescaled
    assert result.stage == "keys"


def test_protocol_example_3_pixel_like_box_in_a_norm_run():
    result = parse_image_compatible(
        '{"answer_option_id":"A","bbox_xyxy_norm":[120,80,400,300]}', OFFERED
    )
    assert result.option_valid and not result.bbox_valid
    assert result.bbox_reason == "out_of_range" and result.stage == "strict"


# --- stage-4 keys and stage labels ----------------------------------------------------------


def test_keys_label_needs_a_valid_field_that_used_a_rule():
    # The alias led to an invalid option; the valid box used no rule.
    result = parse_image_compatible('{"answer":"Z","bbox_xyxy_norm":[0.1,0.1,0.2,0.2]}', OFFERED)
    assert result.stage == "strict" and not result.option_valid and result.bbox_valid
    result = parse_image_compatible('{"answer_option_id":"B","box":"bad"}', OFFERED)
    assert result.stage == "strict" and result.option_valid and not result.bbox_valid


def test_answers_wrapper_only_unwraps_without_canonical_keys():
    raw = '{"bbox_xyxy_norm":[0.1,0.1,0.2,0.2],"answers":[{"answer_option_id":"C"}]}'
    result = parse_image_compatible(raw, OFFERED)
    assert not result.option_valid and result.option_reason == "key_absent"
    assert result.bbox_valid and result.stage == "strict"


def test_answers_wrapper_with_alias_outside_still_unwraps():
    raw = '{"answer":"D","answers":[{"answer_option_id":"C","bbox_xyxy_norm":[0.1,0.1,0.2,0.2]}]}'
    result = parse_image_compatible(raw, OFFERED)
    assert result.option_ids == ["C"] and result.stage == "keys"


def test_option_match_is_case_insensitive_against_offered_ids():
    result = parse_image_compatible('{"answer_option_id":"h"}', list("ABCDEFGH"))
    assert result.option_ids == ["H"]
    assert not parse_image_compatible('{"answer_option_id":"h"}', OFFERED).option_valid


@pytest.mark.parametrize("case", IMAGE_CASES, ids=[case.name for case in IMAGE_CASES])
def test_image_corpus_compatible(case):
    result = parse_image_compatible(case.raw, IMAGE_OFFERED)
    assert result.option_valid == (case.compatible_option is not None)
    assert result.option_ids == ([case.compatible_option] if case.compatible_option else [])
    assert result.bbox_valid == (case.compatible_box is not None)
    if case.compatible_box is not None:
        assert result.bbox == pytest.approx(case.compatible_box)
    assert result.stage == case.compatible_stage
    assert result.run_scale == "norm"


@pytest.mark.parametrize("case", BEHAVIOR_CASES, ids=[case.name for case in BEHAVIOR_CASES])
def test_behavior_corpus_compatible(case):
    result = parse_behavior_compatible(case.raw, VIDEO_OFFERED)
    assert result.answers_valid == (case.compatible_answers is not None)
    assert result.answers == case.compatible_answers
    assert result.stage == case.compatible_stage


@pytest.mark.parametrize("case", VISIBILITY_CASES, ids=[case.name for case in VISIBILITY_CASES])
def test_visibility_corpus_compatible(case):
    result = parse_visibility_compatible(case.raw)
    assert result.count_valid == (case.compatible_count is not None)
    assert result.intervals_valid == (case.compatible_intervals is not None)
    if case.compatible_count is not None:
        assert result.visible_count == case.compatible_count
    if case.compatible_intervals is not None:
        assert result.visible_intervals == case.compatible_intervals
    assert result.stage == case.compatible_stage


def test_behavior_canonical_option_id_wins_over_option_ids():
    raw = '{"answers":[{"option_id":"Z","option_ids":["A"],"intervals_sec":[[0,1]]}]}'
    result = parse_behavior_compatible(raw, VIDEO_OFFERED)
    assert not result.answers_valid and result.answers_reason == "not_offered"


def test_interval_object_keys_prefer_sec_names():
    interval = {"start": 5, "end": 6, "start_sec": 0, "end_sec": 1}
    raw = json.dumps({"visible_count": 1, "visible_intervals_sec": [interval]})
    assert parse_visibility_compatible(raw).visible_intervals == [[0.0, 1.0]]


# --- §3.3 run-level scale -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("boxes", "scale"),
    [
        ([], "norm"),
        ([[0.1, 0.1, 0.5, 0.5]], "norm"),
        # |M| = 1 < N/2 = 1.5 -> norm.
        ([[0.1, 0.1, 0.5, 0.5], [0.2, 0.2, 0.4, 0.4], [120, 80, 400, 300]], "norm"),
        # |M| = 1 = N/2 is not < N/2 -> inspect M.
        ([[0.1, 0.1, 0.5, 0.5], [120, 80, 400, 300]], "pixel640x480"),
        ([[120, 80, 400, 300], [0, 0, 640, 480]], "pixel640x480"),
        # y 600 > 480 rules out pixels (a worked example of docs/protocol.md §3.3).
        ([[200, 200, 600, 600], [100, 100, 300, 300]], "per_mille"),
        ([[700, 10, 900, 20]], "per_mille"),
        ([[0, 0, 1000, 1000]], "per_mille"),
        ([[100, 100, 1200, 500], [200, 200, 600, 600]], "ambiguous"),
        ([[1.5, 0.1, 0.2, 0.3]], "pixel640x480"),
    ],
)
def test_resolve_run_scale(boxes, scale):
    assert resolve_run_scale(boxes) == scale


def _parse(samples: pd.DataFrame, responses: pd.DataFrame | None, bbox_scale: str | None = None):
    """`parse_run` of frames as Arrow tables; its PARSED rows back as a frame."""
    table, info = parse_run(_arrow(samples), _arrow(responses), bbox_scale)
    return table.to_pandas(), info


def _arrow(frame: pd.DataFrame | None) -> pa.Table | None:
    return None if frame is None else pa.Table.from_pandas(frame, preserve_index=False)


def _image_frames(raws: list[str | None], task: str = "landmark_position"):
    ids = [f"img{i:03d}" for i in range(len(raws))]
    samples = pd.DataFrame({"sample_id": ids, "task": task, "options": [OPTIONS] * len(ids)})
    rows = [(sid, raw) for sid, raw in zip(ids, raws, strict=True) if raw is not None]
    responses = pd.DataFrame(
        {
            "sample_id": [sid for sid, _ in rows],
            "raw_text": [raw for _, raw in rows],
            "status": "ok",
        }
    )
    return samples, responses


def _compatible(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["parse"] == "compatible"].reset_index(drop=True)


def _answer(option: str, box: list[float]) -> str:
    return json.dumps({"answer_option_id": option, "bbox_xyxy_norm": box})


def test_protocol_example_4_per_mille_run():
    raws = [
        _answer("A", [200, 200, 600, 600]),
        _answer("B", [100, 150, 300, 700]),
        _answer("C", [900, 900, 100, 100]),
        _answer("D", [0.2, 0.2, 0.6, 0.6]),  # one scale per run: becomes tiny
    ]
    frame, info = _parse(*_image_frames(raws))
    assert info["scale"] == "per_mille" and info["scale_source"] == "inferred"
    assert (info["n_boxes"], info["n_over_one"]) == (4, 3)
    rows = _compatible(frame)
    assert list(rows["bbox"][0]) == pytest.approx([0.2, 0.2, 0.6, 0.6])
    assert list(rows["bbox"][1]) == pytest.approx([0.1, 0.15, 0.3, 0.7])
    assert list(rows["bbox"][2]) == pytest.approx([0.1, 0.1, 0.9, 0.9])
    assert list(rows["bbox"][3]) == pytest.approx([0.0002, 0.0002, 0.0006, 0.0006])
    assert rows["bbox_valid"].tolist() == [True] * 4
    assert rows["bbox_rescaled"].tolist() == [True] * 4
    assert rows["bbox_reordered"].tolist() == [False, False, True, False]
    # Rescaling and reordering are stage 5, not stage-4 key rules.
    assert rows["stage"].tolist() == ["strict"] * 4
    assert rows["run_scale"].tolist() == ["per_mille"] * 4
    strict_rows = frame[frame["parse"] == "strict"]
    assert strict_rows["bbox_valid"].tolist() == [False, False, False, True]


def test_pixel_run_converts_with_640x480():
    raws = [_answer("A", [64, 48, 320, 240]), _answer("B", [640, 480, 320, 240])]
    frame, info = _parse(*_image_frames(raws))
    assert info["scale"] == "pixel640x480"
    rows = _compatible(frame)
    assert list(rows["bbox"][0]) == pytest.approx([0.1, 0.1, 0.5, 0.5])
    assert list(rows["bbox"][1]) == pytest.approx([0.5, 0.5, 1.0, 1.0])
    assert rows["bbox_reordered"].tolist() == [False, True]


def test_ambiguous_run_invalidates_large_boxes_only():
    raws = [
        _answer("A", [100, 100, 1200, 500]),
        _answer("B", [50, 50, 2000, 900]),
        _answer("C", [0.1, 0.1, 0.2, 0.2]),
    ]
    frame, info = _parse(*_image_frames(raws))
    assert info["scale"] == "ambiguous" and info["n_over_one"] == 2
    rows = _compatible(frame)
    assert rows["bbox_valid"].tolist() == [False, False, True]
    assert rows["bbox_reason"].tolist()[:2] == ["ambiguous_scale", "ambiguous_scale"]
    assert list(rows["bbox"][2]) == [0.1, 0.1, 0.2, 0.2]
    assert rows["option_valid"].tolist() == [True, True, True]


def test_scale_evidence_ignores_option_validity_and_bad_boxes():
    raws = [
        _answer("Z", [120, 80, 400, 300]),  # invalid option: its box still counts
        _answer("A", [0.1, 0.1, 0.2, 0.2]),
        _answer("A", [-1, 100, 300, 400]),  # negative: not evidence
        '{"answer_option_id":"A","bbox_xyxy_norm":[0,0,1e999,1]}',  # non-finite: not evidence
        '{"answer_option_id":"A","bbox_xyxy_norm":"0,0,1,1"}',  # not 4 numbers
        '{"choice":"A","bounding_box":[100,100,200,200]}',  # alias: counts (stage 4)
        "Option: A BBox: [1, 2, 3, 4]",  # nothing recovered by stages 0-4 as an object
        None,  # missing response
    ]
    frame, info = _parse(*_image_frames(raws))
    assert (info["n_boxes"], info["n_over_one"]) == (3, 2)
    assert info["scale"] == "pixel640x480"
    rows = _compatible(frame)
    assert rows["bbox_reason"][2] == "out_of_range"
    assert rows["bbox_reason"][3] == "non_finite"
    assert rows["stage"][7] == "missing"


def test_config_scale_overrides_inference():
    raws = [_answer("A", [0.2, 0.2, 0.6, 0.6]), _answer("B", [200, 200, 600, 600])]
    frame, info = _parse(*_image_frames(raws), bbox_scale="per_mille")
    assert info["scale"] == "per_mille" and info["scale_source"] == "config"
    assert (info["n_boxes"], info["n_over_one"]) == (2, 1)
    rows = _compatible(frame)
    assert list(rows["bbox"][1]) == pytest.approx([0.2, 0.2, 0.6, 0.6])
    frame, info = _parse(*_image_frames(raws), bbox_scale="norm")
    assert _compatible(frame)["bbox_valid"].tolist() == [True, False]
    with pytest.raises(ValueError, match="bbox_scale"):
        _parse(*_image_frames(raws), bbox_scale="ambiguous")


# --- parse_run table ------------------------------------------------------------------------


def _mixed_run():
    behavior_options = [{"option_id": o, "label": o, "level": "atomic"} for o in "ABCDEF"]
    samples = pd.DataFrame(
        {
            "sample_id": ["i1", "i2", "b1", "v1", "v2"],
            "task": [
                "future_observation",
                "self_position",
                "behavior",
                "landmark_visibility",
                "landmark_visibility",
            ],
            # As read back from Parquet: numpy arrays of dicts, None for visibility.
            "options": [
                np.array(OPTIONS, dtype=object),
                np.array(OPTIONS, dtype=object),
                np.array(behavior_options, dtype=object),
                None,
                None,
            ],
        }
    )
    responses = pd.DataFrame(
        {
            "sample_id": ["i1", "i1", "i2", "b1", "v1", "v1", "v2"],
            "status": ["ok", "error", "error", "ok", "ok", "ok", "missing"],
            "raw_text": [
                '```json\n{"answer":"b","box":[0.5,0.5,0.1,0.1]}\n```',
                None,
                None,
                '{"answers":[{"option_ids":["c"],"intervals_sec":[1,2]}]}',
                '{"visible_count":9,"visible_intervals_sec":[]}',
                '{"visible_count":1,"visible_intervals_sec":[[0,1]]}',
                None,
            ],
        }
    )
    return samples, responses


def test_parse_run_rows_and_missing():
    table, info = parse_run(*map(_arrow, _mixed_run()))
    frame = table.to_pandas()
    assert list(frame.columns) == PARSED.names
    assert frame[["sample_id", "parse"]].values.tolist() == [
        ["i1", "strict"],
        ["i1", "compatible"],
        ["i1", "legacy"],
        ["i2", "strict"],
        ["i2", "compatible"],
        ["i2", "legacy"],
        ["b1", "strict"],
        ["b1", "compatible"],
        ["v1", "strict"],
        ["v1", "compatible"],
        ["v2", "strict"],
        ["v2", "compatible"],
    ]
    assert frame["stage"].tolist() == [
        "invalid", "keys", "invalid",
        "missing", "missing", "missing",
        "invalid", "keys",
        "strict", "strict",
        "missing", "missing",
    ]  # fmt: skip
    i1 = frame.iloc[1]
    assert list(i1["option_ids"]) == ["B"] and list(i1["bbox"]) == [0.1, 0.1, 0.5, 0.5]
    assert bool(i1["bbox_reordered"]) and bool(i1["all_valid"])
    missing = frame[frame["stage"] == "missing"]
    for column in ("option_reason", "bbox_reason"):
        assert set(missing.loc[missing["task"] != "landmark_visibility", column]) == {
            "missing_response"
        }
    assert missing["all_valid"].tolist() == [False] * 5
    assert frame.iloc[4]["run_scale"] == "norm"  # compatible image rows carry the run scale
    assert pd.isna(frame.iloc[3]["run_scale"])
    b1 = frame.iloc[7]
    assert table["answers"][7].as_py() == [{"option_id": "C", "intervals": [[1.0, 2.0]]}]
    assert pd.isna(b1["option_valid"]) and pd.isna(b1["visible_count"])
    # The last ok row is the response.
    assert frame.iloc[8]["visible_count"] == 1
    v2 = frame.iloc[11]
    assert (v2["count_reason"], v2["intervals_reason"]) == ("missing_response", "missing_response")
    assert info["n_boxes"] == 1 and info["scale"] == "norm"
    assert info["stage_counts"]["compatible"] == {"keys": 2, "missing": 2, "strict": 1}


def test_parse_run_conforms_to_the_parsed_schema(tmp_path):
    table, _ = parse_run(*map(_arrow, _mixed_run()))
    assert table.schema.equals(PARSED)
    path = tmp_path / "parsed.parquet"
    write_table(table, PARSED, path)
    back = read_arrow(path)
    assert back.equals(table)
    assert back["answers"][7].as_py()[0]["intervals"][0] == [1.0, 2.0]


def test_parse_run_null_text_is_no_response_and_empty_text_is_one():
    samples, _ = _image_frames(["x", "y"])
    responses = pd.DataFrame(
        {"sample_id": ["img000", "img001"], "raw_text": [None, ""], "status": ["ok", "ok"]}
    )
    frame, _ = _parse(samples, responses)
    assert frame["stage"].tolist() == ["missing"] * 3 + ["invalid"] * 3
    assert frame["option_reason"].tolist()[3:5] == ["no_json_object", "no_json_object"]


@pytest.mark.parametrize(
    ("status", "request_status", "is_response"),
    [
        ("ok", None, True),
        (" OK\n", None, True),
        ("Ok", "ok", True),
        (None, "ok", True),
        (None, None, True),  # neither field carried
        ("ok", "error", False),
        ("error", "ok", False),
        ("okay", None, False),
        ("", None, False),
        (1, None, False),
        (True, None, False),
    ],
)
def test_parse_run_reads_every_status_field(status, request_status, is_response):
    samples, _ = _image_frames(["x"])
    responses = pd.DataFrame(
        {
            "sample_id": ["img000"],
            "raw_text": ['{"answer_option_id":"A"}'],
            "status": pd.Series([status], dtype=object),
            "request_status": pd.Series([request_status], dtype=object),
        }
    )
    frame, _ = _parse(samples, responses)
    assert (frame["stage"].iloc[0] != "missing") == is_response


def test_parse_run_large_count_is_stored_saturated():
    samples = pd.DataFrame({"sample_id": ["v"], "task": "landmark_visibility", "options": [None]})
    raw = '{"visible_count":' + "9" * 30 + ',"visible_intervals_sec":[]}'
    responses = pd.DataFrame({"sample_id": ["v"], "raw_text": [raw], "status": ["ok"]})
    frame, _ = _parse(samples, responses)
    assert frame["count_valid"].tolist() == [True, True]
    assert frame["visible_count"].tolist() == [2**63 - 1] * 2
    assert to_table(frame, PARSED).num_rows == 2


def test_parse_run_without_responses_and_unknown_tasks():
    samples, _ = _image_frames(["x", "y"])
    frame, info = _parse(samples, None)
    assert set(frame["stage"]) == {"missing"} and info["n_boxes"] == 0
    bad = pd.DataFrame({"sample_id": ["s"], "task": ["nope"], "options": [None]})
    with pytest.raises(ValueError, match="unknown task"):
        _parse(bad, None)


def test_parse_run_empty_samples():
    samples = pd.DataFrame({"sample_id": [], "task": [], "options": []})
    frame, info = _parse(samples, None)
    assert len(frame) == 0 and list(frame.columns) == PARSED.names
    assert to_table(frame, PARSED).num_rows == 0
    assert info["scale"] == "norm"
