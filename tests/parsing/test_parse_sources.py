"""Which rows of a response source are responses (docs/protocol.md, "Response sources")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow
from test_inference_replay import replay_prompts  # one prompts builder for replay rows

from dualcog.inference import run_model
from dualcog.parsing.sources import record_is_response

TEXT = '{"answer_option_id":"A"}'


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"status": "ok", "raw_text": TEXT}, True),
        ({"status": "OK", "raw_text": TEXT}, True),  # case-insensitive
        ({"request_status": "  ok\n", "raw_text": TEXT}, True),  # trimmed
        ({"status": "ok", "request_status": "Ok", "raw_text": TEXT}, True),
        ({"raw_text": TEXT}, True),  # no status field carried
        ({"status": None, "request_status": "ok", "raw_text": TEXT}, True),  # null: not carried
        ({"status": math.nan, "raw_text": TEXT}, True),  # a table's null
        ({"status": pd.NA, "raw_text": TEXT}, True),
        ({"status": "ok", "raw_text": ""}, True),  # empty text: a response that fails to parse
        # One field saying anything else makes the row not ok, whichever field it is.
        ({"status": "ok", "request_status": "error", "raw_text": TEXT}, False),
        ({"status": "error", "request_status": "ok", "raw_text": TEXT}, False),
        ({"status": "o k", "raw_text": TEXT}, False),
        ({"status": "", "raw_text": TEXT}, False),
        # A non-string status is not ok.
        ({"status": 1, "raw_text": TEXT}, False),
        ({"status": True, "raw_text": TEXT}, False),
        ({"status": ["ok"], "raw_text": TEXT}, False),
        # A null, absent or non-string text is not a response.
        ({"status": "ok", "raw_text": None}, False),
        ({"status": "ok"}, False),
        ({"status": "ok", "raw_text": 12}, False),
        ({"raw_text": math.nan}, False),
    ],
)
def test_row_rule(record, expected):
    assert record_is_response(record) is expected


def test_replay_applies_the_row_rule(tmp_path: Path):
    lines = [
        {"sample_id": "s1", "request_status": " OK ", "raw_text": "first"},
        {"sample_id": "s1", "status": "ok", "request_status": "error", "raw_text": "late err"},
        {"sample_id": "s2", "status": 200, "raw_text": "numeric status"},
        {"sample_id": "s3", "status": None, "request_status": "ok", "raw_text": ""},
        {"sample_id": "s4", "status": "ok", "raw_text": None},
        {"sample_id": "s5", "status": "ok", "raw_text": 7},
    ]
    source = tmp_path / "responses.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    model = {"name": "Replayed", "backend": "replay", "replay": str(source)}
    prompts = replay_prompts(["s1", "s2", "s3", "s4", "s5"])
    out = run_model(model, arrow(prompts), None, Path("."), Path("."), None).to_pandas()
    out = out.set_index("sample_id")
    assert out.loc["s1", "raw_text"] == "first"
    assert out.loc["s3", "status"] == "ok" and out.loc["s3", "raw_text"] == ""
    for sample_id in ("s2", "s4", "s5"):
        assert out.loc[sample_id, "status"] == "missing"
