"""Property test: no value a response holds stops parsing or scoring (PROTOCOL §3 v2.3).

Adversarial JSON values in every field of every request kind go through `parse_run` and
`score_samples`; both must finish, and give the same rows when run again.
"""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from score_fixtures import behavior_sample, image_sample, samples_table, visibility_sample

from dualcog.parsing import parse_run
from dualcog.scoring import score_samples

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SAMPLES = samples_table(
    [
        image_sample("lp", "landmark_position"),
        image_sample("fo", "future_observation"),
        image_sample("sp", "self_position"),
        image_sample("ad", "action_decision"),
        behavior_sample(
            "b",
            {"A": "atomic", "E": "composite"},
            [("A", "atomic", [[0, 10]])],
            composite_mission=True,
        ),  # fmt: skip
        visibility_sample("v", 2, [[0, 10], [20, 30]]),
    ]
)
FIELDS = {
    "landmark_position": ("answer_option_id", "bbox_xyxy_norm"),
    "future_observation": ("answer_option_id", "bbox_xyxy_norm"),
    "self_position": ("answer_option_id", "bbox_xyxy_norm"),
    "action_decision": ("answer_option_id",),
    "behavior": ("answers",),
    "landmark_visibility": ("visible_count", "visible_intervals_sec"),
}
NUMBER_TOKENS = ["NaN", "-NaN", "Infinity", "-Infinity", "1e999", "-0.0", "1e-400", "1e16",
                 "1e19", "9007199254740993", "9223372036854775808", "-9223372036854775809",
                 str(10**40)]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 5e-324, 1.7976931348623157e308]),
    st.text(max_size=40),
    st.sampled_from(["A", "b", "é", "\u2212", "\ufeff", "𝔸", "x" * 5000]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["option_id", "intervals_sec", "start_sec", "end_sec", "k"]),
            inner,
            max_size=3,
        ),  # fmt: skip
    ),
    max_leaves=12,
)
deep = st.integers(min_value=1, max_value=1200).map(lambda n: "[" * n + "1" + "]" * n)


def _document(fields: tuple[str, ...], value_of: dict, tokens: dict) -> str:
    """A JSON object whose fields hold `value_of` or, for `tokens`, a raw number token."""
    parts = []
    for name in fields:
        raw = tokens.get(name) or json.dumps(value_of.get(name), ensure_ascii=False)
        parts.append(f"{json.dumps(name)}: {raw}")
    return "{" + ", ".join(parts) + "}"


def _field_values(fields):
    return st.fixed_dictionaries(
        {
            "values": st.fixed_dictionaries({name: values for name in fields}),
            "tokens": st.dictionaries(
                st.sampled_from(fields),
                st.one_of(st.sampled_from(NUMBER_TOKENS), deep),
                max_size=2,
            ),
        }
    )


responses_strategy = st.fixed_dictionaries(
    {task: _field_values(fields) for task, fields in FIELDS.items()}
)


def _responses(drawn: dict) -> pa.Table:
    raws = {}
    ids, tasks = SAMPLES["sample_id"].to_pylist(), SAMPLES["task"].to_pylist()
    for sample_id, task in zip(ids, tasks, strict=True):
        fields = FIELDS[task]
        raws[sample_id] = _document(fields, drawn[task]["values"], drawn[task]["tokens"])
    status = ["ok"] * len(raws)
    return pa.table({"sample_id": list(raws), "raw_text": list(raws.values()), "status": status})


def _score(responses: pa.Table) -> pa.Table:
    parsed, _ = parse_run(SAMPLES, responses)
    return score_samples(SAMPLES, parsed)


def _counts_example(token: str) -> dict:
    """Every field null except a visibility count written as `token`."""
    drawn = {task: {"values": {}, "tokens": {}} for task in FIELDS}
    drawn["landmark_visibility"] = {
        "values": {"visible_intervals_sec": [[0.0, 10.0], [20.0, 30.0]]},
        "tokens": {"visible_count": token},
    }
    return drawn


@SETTINGS
@given(responses_strategy)
@example(_counts_example("9007199254740993"))  # above 2**53: once a float64 cast error
@example(_counts_example("1e16"))
@example(_counts_example("9223372036854775808"))
def test_no_response_value_stops_parse_or_score(drawn) -> None:
    responses = _responses(drawn)
    first = _score(responses)
    assert set(first["sample_id"].to_pylist()) >= set(SAMPLES["sample_id"].to_pylist())
    assert first.equals(_score(responses))  # run again: the same rows
