"""Property tests: the parsers never raise, are deterministic, and agree where they must."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualcog.parsing import (
    compatible_candidate,
    parse_behavior_compatible,
    parse_behavior_modes,
    parse_behavior_strict,
    parse_image_compatible,
    parse_image_legacy,
    parse_image_modes,
    parse_image_strict,
    parse_run,
    parse_visibility_compatible,
    parse_visibility_modes,
    parse_visibility_strict,
)
from dualcog.schemas import PARSE_STAGES

OFFERED = ("A", "B", "C", "D")
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FUZZ_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# Fragments that exercise every branch: tags, fences, brackets, strings, escapes, constants.
FRAGMENTS = [
    "{", "}", "[", "]", '"', "\\", ":", ",", " ", "\n", "<think>", "</think>", "<reasoning>",
    "</REASONING>", "```", "```json\n", "json", "NaN", "Infinity", "-", "1e999", "0.5", "2",
    "600", "true", "null", '"answer_option_id"', '"bbox_xyxy_norm"', '"answer"', '"box"',
    '"answers"', '"option_id"', '"option_ids"', '"intervals_sec"', '"visible_count"',
    '"visible_intervals_sec"', '"start_sec"', '"end_sec"', '"A"', '"b"', "B", "Option: C",
    "BBox: [", "\u2212", "\ufeff", "é",
]  # fmt: skip
jsonish_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=300), jsonish_text)


def _check_image(result, parse_mode: str) -> None:
    assert result.stage in PARSE_STAGES
    assert isinstance(result.option_ids, list)
    assert (result.option_reason is None) == result.option_valid
    assert (result.bbox_reason is None) == result.bbox_valid
    if parse_mode != "legacy":
        assert len(result.option_ids) == (1 if result.option_valid else 0)
    if result.bbox_valid:
        x1, y1, x2, y2 = result.bbox
        assert 0.0 <= x1 <= x2 <= 1.0 and 0.0 <= y1 <= y2 <= 1.0
        if parse_mode != "legacy":
            assert x1 < x2 and y1 < y2
    any_valid = result.option_valid or result.bbox_valid
    assert (result.stage == "invalid") == (not any_valid)


@FUZZ_SETTINGS
@given(any_text)
def test_image_parsers_never_raise_and_are_consistent(raw):
    strict, compatible, legacy = parse_image_modes(raw, OFFERED)
    _check_image(strict, "strict")
    _check_image(compatible, "compatible")
    _check_image(legacy, "legacy")
    # The shared fast path equals the standalone per-mode functions.
    assert strict == parse_image_strict(raw, OFFERED)
    assert compatible == parse_image_compatible(raw, OFFERED)
    assert legacy == parse_image_legacy(raw)
    # Deterministic.
    assert parse_image_modes(raw, OFFERED) == (strict, compatible, legacy)
    for scale in ("per_mille", "pixel640x480", "ambiguous"):
        _check_image(parse_image_compatible(raw, OFFERED, scale), "compatible")


@FUZZ_SETTINGS
@given(any_text)
def test_video_parsers_never_raise_and_are_deterministic(raw):
    behavior = parse_behavior_modes(raw, "ABCDEF")
    assert behavior == (
        parse_behavior_strict(raw, "ABCDEF"),
        parse_behavior_compatible(raw, "ABCDEF"),
    )
    assert parse_behavior_modes(raw, "ABCDEF") == behavior
    for result in behavior:
        assert result.stage in PARSE_STAGES
        assert (result.answers_reason is None) == result.answers_valid
        assert (result.answers is not None) == result.answers_valid
    visibility = parse_visibility_modes(raw)
    assert visibility == (parse_visibility_strict(raw), parse_visibility_compatible(raw))
    assert parse_visibility_modes(raw) == visibility
    for result in visibility:
        assert result.stage in PARSE_STAGES
        assert (result.count_reason is None) == result.count_valid
        assert result.visible_count is None or result.visible_count >= 0


# --- strict-valid responses -----------------------------------------------------------------

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
# No "<" (stage 0 is not JSON-aware) and no "`" (a fence is not JSON-aware either).
safe_text = st.text(
    alphabet=st.characters(blacklist_characters="<`", blacklist_categories=("Cs",)), max_size=20
)
extra_value = st.one_of(safe_text, st.integers(), st.floats(allow_nan=False, allow_infinity=False))
extra_keys = st.dictionaries(
    safe_text.filter(
        lambda k: (
            k
            not in {
                "answer_option_id",
                "bbox_xyxy_norm",
                "answers",
                "visible_count",
                "visible_intervals_sec",
            }
        )
    ),
    extra_value,
    max_size=3,
)
padding = st.sampled_from(["", " ", "\n", "\t\n  ", "\r\n"])
layout = st.sampled_from([{}, {"indent": 2}, {"separators": (",", ":")}, {"sort_keys": True}])


@st.composite
def valid_boxes(draw):
    xs = sorted(draw(st.lists(unit, min_size=2, max_size=2, unique=True)))
    ys = sorted(draw(st.lists(unit, min_size=2, max_size=2, unique=True)))
    return [xs[0], ys[0], xs[1], ys[1]]


@st.composite
def strict_valid_image(draw):
    body = dict(draw(extra_keys))
    body["answer_option_id"] = draw(st.sampled_from(OFFERED))
    body["bbox_xyxy_norm"] = draw(valid_boxes())
    return draw(padding) + json.dumps(body, **draw(layout)) + draw(padding)


@SETTINGS
@given(strict_valid_image())
def test_strict_valid_image_gives_identical_compatible_result(raw):
    strict, compatible, _ = parse_image_modes(raw, OFFERED)
    assert strict.all_valid
    assert compatible.stage == strict.stage == "strict"
    assert compatible.option_ids == strict.option_ids
    assert compatible.bbox == strict.bbox
    assert compatible.all_valid
    assert not compatible.bbox_rescaled and not compatible.bbox_reordered


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(strict_valid_image(), min_size=1, max_size=8))
def test_strict_valid_run_gives_identical_compatible_rows(raws):
    ids = [f"s{i}" for i in range(len(raws))]
    options = [{"option_id": o, "label": o, "level": None} for o in OFFERED]
    samples = pd.DataFrame(
        {"sample_id": ids, "task": "self_position", "options": [options] * len(ids)}
    )
    responses = pd.DataFrame({"sample_id": ids, "raw_text": raws, "status": "ok"})
    table, info = parse_run(
        pa.Table.from_pandas(samples, preserve_index=False),
        pa.Table.from_pandas(responses, preserve_index=False),
    )
    frame = table.to_pandas()
    assert info["scale"] == "norm" and info["n_over_one"] == 0
    columns = ["stage", "all_valid", "option_valid", "bbox_valid", "bbox_reordered"]
    strict = frame[frame["parse"] == "strict"].reset_index(drop=True)
    compatible = frame[frame["parse"] == "compatible"].reset_index(drop=True)
    assert strict[columns].equals(compatible[columns])
    assert [list(b) for b in strict["bbox"]] == [list(b) for b in compatible["bbox"]]
    assert [list(o) for o in strict["option_ids"]] == [list(o) for o in compatible["option_ids"]]


interval = st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=2, max_size=2)


@SETTINGS
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "option_id": st.sampled_from("ABCDEF"),
                "intervals_sec": st.lists(interval, max_size=3),
            }
        ),
        max_size=4,
    ),
    padding,
)
def test_strict_valid_behavior_gives_identical_compatible_result(items, pad):
    raw = pad + json.dumps({"answers": items}) + pad
    strict, compatible = parse_behavior_modes(raw, "ABCDEF")
    assert strict.answers_valid
    assert compatible == strict


@SETTINGS
@given(st.integers(min_value=0), st.lists(interval, max_size=4), padding)
def test_strict_valid_visibility_gives_identical_compatible_result(count, intervals, pad):
    raw = pad + json.dumps({"visible_count": count, "visible_intervals_sec": intervals}) + pad
    strict, compatible = parse_visibility_modes(raw)
    assert strict.all_valid
    assert compatible == strict


# --- extraction -----------------------------------------------------------------------------

prose = st.text(
    alphabet=st.characters(blacklist_characters='{}[]"<`\\', blacklist_categories=("Cs",)),
    max_size=60,
)


@SETTINGS
@given(prose, strict_valid_image(), prose)
def test_object_wrapped_in_prose_is_recovered(before, raw, after):
    text = before + raw.strip() + after
    candidate, stage = compatible_candidate(text)
    assert candidate == json.loads(raw)
    assert stage in ("strict", "balanced")
    assert parse_image_compatible(text, OFFERED).all_valid


@SETTINGS
@given(prose, strict_valid_image(), st.sampled_from(["json", "JSON", "", "jsonc"]))
def test_fenced_object_is_recovered(before, raw, lang):
    text = f"{before}```{lang}\n{raw.strip()}\n```"
    assert compatible_candidate(text) == (json.loads(raw), "fence")
