"""`replay` backend: our files and the authors' responses.jsonl (docs/protocol.md §10)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow

from dualcog import schemas
from dualcog.errors import DataError
from dualcog.inference import run_model, run_per_model
from dualcog.inference.replay import read_source


def replay_prompts(sample_ids: list[str]) -> pd.DataFrame:
    rows = [
        {
            "sample_id": sid,
            "task": "self_position",
            "request_key": f"rk-{sid}",
            "system_text": "s",
            "user_text": "u",
            "media_keys": [],
            "media_kinds": [],
            "offered_option_ids": ["A", "B", "C", "D"],
        }
        for sid in sample_ids
    ]
    return schemas.to_table(pd.DataFrame(rows), schemas.PROMPTS).to_pandas()


def _authors_line(sample_id: str, status: str, text: str | None, **raw: object) -> str:
    return json.dumps(
        {
            "run_id": "run_20250101",
            "sample_id": sample_id,
            "request_status": status,
            "latency_ms": 812.5,
            "raw_text": text,
            "raw_response": {
                "finish_reason": "stop",
                "usage": {"prompt_tokens": 1200, "completion_tokens": 40},
                "request_retry_attempts": 0,
                **raw,
            },
        }
    )


def _replay(path: Path | list[Path], prompts: pd.DataFrame, progress=None) -> pd.DataFrame:
    paths = [str(p) for p in path] if isinstance(path, list) else str(path)
    model = {"name": "Authors-Run-Instant", "backend": "replay", "replay": paths}
    out = run_model(model, arrow(prompts), None, Path("."), Path("."), progress).to_pandas()
    schemas.to_table(out, schemas.RESPONSES)
    return out


def test_authors_format_last_ok_row_wins(tmp_path):
    source = tmp_path / "responses.jsonl"
    source.write_text(
        "\n".join(
            [
                _authors_line("s1", "ok", '{"answer_option_id":"A"}'),
                _authors_line("s2", "error", None, request_retry_errors=["429"]),
                _authors_line("s1", "ok", '{"answer_option_id":"B"}'),  # resumed run appended
                _authors_line("s3", "ok", ""),  # empty content is still a response
                _authors_line("s1", "error", None),  # a later error does not replace an ok
                _authors_line("zz_other_task", "ok", "{}"),
                "",
            ]
        )
        + "\n"
    )
    lines: list[str] = []
    out = _replay(source, replay_prompts(["s1", "s2", "s3", "s4"]), lines.append).set_index(
        "sample_id"
    )
    assert out.loc["s1", "raw_text"] == '{"answer_option_id":"B"}'
    assert out.loc["s1", "status"] == "ok"
    assert out.loc["s1", "latency_ms"] == 812.5
    assert out.loc["s1", "prompt_tokens"] == 1200 and out.loc["s1", "completion_tokens"] == 40
    assert out.loc["s1", "finish_reason"] == "stop"
    assert out.loc["s3", "status"] == "ok" and out.loc["s3", "raw_text"] == ""
    for missing in ("s2", "s4"):
        assert out.loc[missing, "status"] == "missing"
        assert out.loc[missing, "error_type"] == "no_response_in_source"
        assert pd.isna(out.loc[missing, "raw_text"])
    assert (out["backend"] == "replay").all() and (out["model"] == "Authors-Run-Instant").all()
    assert any("ignored 1 rows for 1 sample ids" in line for line in lines)


def test_several_files_are_read_in_order(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(_authors_line("s1", "ok", "old") + "\n")
    second.write_text(_authors_line("s1", "ok", "new") + "\n")
    assert _replay([first, second], replay_prompts(["s1"])).raw_text.iloc[0] == "new"
    assert _replay([second, first], replay_prompts(["s1"])).raw_text.iloc[0] == "old"


def test_parquet_source_with_our_columns(tmp_path):
    source = tmp_path / "responses.parquet"
    pd.DataFrame(
        {
            "sample_id": ["s1", "s2", "s2"],
            "raw_text": ['{"a":1}', None, "late"],
            "status": ["ok", "error", "ok"],
            "attempts": [2, 1, 1],
        }
    ).to_parquet(source)
    out = _replay(source, replay_prompts(["s1", "s2"]))
    assert list(out.raw_text) == ['{"a":1}', "late"]
    assert list(out.attempts) == [2, 1]


def test_plain_jsonl_without_status_counts_rows_with_text(tmp_path):
    source = tmp_path / "plain.jsonl"
    source.write_text(
        json.dumps({"sample_id": "s1", "raw_text": "x"})
        + "\n"
        + json.dumps({"sample_id": "s2", "raw_text": None})
        + "\n"
    )
    out = _replay(source, replay_prompts(["s1", "s2"]))
    assert list(out.status) == ["ok", "missing"]


def test_malformed_line_names_file_and_line(tmp_path):
    source = tmp_path / "responses.jsonl"
    source.write_text(_authors_line("s1", "ok", "x") + "\n\n" + '{"sample_id": "s2", "raw_te\n')
    with pytest.raises(DataError, match=r"responses\.jsonl: line 3: malformed JSON") as info:
        _replay(source, replay_prompts(["s1"]))
    assert info.value.file == str(source)
    source.write_text(json.dumps({"raw_text": "no id"}) + "\n")
    with pytest.raises(DataError, match=r"responses\.jsonl, field 'sample_id': row 1 has no"):
        _replay(source, replay_prompts(["s1"]))


@pytest.mark.parametrize("nesting", ["[" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000])
def test_a_line_nested_thousands_deep_names_file_and_line(tmp_path, nesting):
    source = tmp_path / "deep.jsonl"
    source.write_text('{"sample_id": "s1", "raw_text": "A"}\n' + nesting + "\n")
    with pytest.raises(DataError, match=r"line 2: JSON nested too deeply") as info:
        read_source(source)
    assert str(source) in str(info.value) and "\n" not in str(info.value)


def test_missing_source_and_missing_setting(tmp_path):
    with pytest.raises(DataError, match="nope.jsonl: replay source not found"):
        _replay(tmp_path / "nope.jsonl", replay_prompts(["s1"]))
    with pytest.raises(ValueError, match="needs `replay`"):
        run_model(
            {"name": "r", "backend": "replay"},
            arrow(replay_prompts(["s1"])),
            None,
            tmp_path,
            tmp_path,
        )


def test_one_replay_of_several_tasks_equals_a_replay_per_task(tmp_path):
    """The `replay` rule answers all of a run's tasks in one job, reading its files once."""
    source = tmp_path / "responses.jsonl"
    lines = [
        _authors_line("a1", "ok", "first"),
        _authors_line("b1", "ok", "b-answer"),
        _authors_line("a1", "ok", "second"),  # resumed run: the last ok row wins
        _authors_line("b2", "error", None),
    ]
    source.write_text("\n".join(lines) + "\n")
    by_task = {
        "self_position": replay_prompts(["a1", "a2"]),
        "behavior": replay_prompts(["b1", "b2"]).assign(task="behavior"),
    }
    model = {"name": "Authors-Run-Instant", "backend": "replay", "replay": str(source)}
    together = run_per_model(model, {task: arrow(frame) for task, frame in by_task.items()})
    together = {task: table.to_pandas() for task, table in together.items()}
    assert list(together) == ["self_position", "behavior"]
    for task, prompts in by_task.items():
        alone = _replay(source, prompts)
        pd.testing.assert_frame_equal(together[task], alone)
    assert together["self_position"]["raw_text"].tolist()[0] == "second"
    assert together["behavior"]["status"].tolist() == ["ok", "missing"]


def test_a_sample_in_two_tasks_prompts_is_refused(tmp_path):
    model = {"name": "r", "backend": "replay", "replay": str(tmp_path / "x.jsonl")}
    prompts = replay_prompts(["a1"])
    with pytest.raises(ValueError, match="sample 'a1' more than once"):
        run_per_model(model, {"self_position": arrow(prompts), "behavior": arrow(prompts)})


def test_run_model_refuses_a_sample_twice(tmp_path):
    prompts = pd.concat([replay_prompts(["a1", "a2"]), replay_prompts(["a2"])], ignore_index=True)
    with pytest.raises(ValueError, match="sample 'a2' more than once"):
        _replay(tmp_path / "x.jsonl", prompts)


def test_untrusted_metadata_is_null_with_one_warning_per_file_and_text_kept(tmp_path, caplog):
    import io

    import pyarrow.parquet as pq

    source = tmp_path / "responses.jsonl"
    lines = [
        # A lone surrogate escaped in the JSON: kept as its escape, like the response cache.
        '{"sample_id": "s1", "raw_text": "{\\"answer_option_id\\": \\"A\\ud800\\"}", '
        '"finish_reason": 7}',
        json.dumps({"sample_id": "s2", "raw_text": "B", "finish_reason": {"why": "stop"}}),
        '{"sample_id": "s3", "raw_text": "C", "prompt_tokens": 1e30, "latency_ms": 1e999}',
        _authors_line("s4", "ok", "D", usage={"prompt_tokens": 1200, "completion_tokens": 10**30}),
        _authors_line("s5", "ok", "E", finish_reason=["stop"]),
    ]
    source.write_text("\n".join(lines) + "\n")
    messages: list[str] = []
    with caplog.at_level("WARNING", logger="dualcog.inference.replay"):
        out = _replay(source, replay_prompts(["s1", "s2", "s3", "s4", "s5"]), messages.append)
    pq.write_table(schemas.to_table(out, schemas.RESPONSES), io.BytesIO())  # no encoding error
    assert list(out.status) == ["ok"] * 5
    assert out.raw_text.iloc[0] == '{"answer_option_id": "A\\ud800"}'
    assert json.loads(out.raw_text.iloc[0]) == {"answer_option_id": "A\ud800"}
    assert list(out.finish_reason.isna()) == [True, True, True, False, True]
    assert pd.isna(out.prompt_tokens.iloc[2]) and pd.isna(out.completion_tokens.iloc[3])
    assert out.prompt_tokens.iloc[3] == 1200  # the valid fields of a row are kept
    [warning] = [r.getMessage() for r in caplog.records]
    assert str(source) in warning
    assert "finish_reason: 3 (first at line 1)" in warning
    assert "prompt_tokens: 1 (first at line 3)" in warning
    assert "completion_tokens: 1 (first at line 4)" in warning
    assert "latency_ms: 1 (first at line 3)" in warning
    assert warning in messages


@pytest.mark.parametrize("bad", [b"\xff\xfe not utf-8", b"\x00\x01\x89PNG\r\n"])
def test_invalid_utf8_line_names_file_and_line(tmp_path, bad):
    source = tmp_path / "responses.jsonl"
    source.write_bytes(_authors_line("s1", "ok", "x").encode() + b"\n" + bad + b"\n")
    with pytest.raises(DataError, match=r"responses\.jsonl: line 2: not valid UTF-8") as info:
        _replay(source, replay_prompts(["s1"]))
    assert info.value.file == str(source)


@pytest.mark.parametrize(
    "content",
    [
        '{"sample_id": "a", "raw_text": "x\\u2028y \u2028 \u0085"}\r\n\r\n \t\n{"sample_id": "b"}',
        '\n\n{"sample_id": "a", "raw_text": "\u00e9\u4e2d\U0001f600"}\n\x1c\n{"sample_id": "b"}\n',
        '\ufeff{"sample_id": "a"}\n',  # a BOM: malformed, as json.loads says
        '{"sample_id": "a"}\n[1, 2]\n',
        '{"sample_id": "a"}\n{"sample_id": \n',
    ],
)
def test_whole_file_reading_equals_reading_line_by_line(tmp_path, content):
    from dualcog.inference.replay import _jsonl_records, _jsonl_records_by_line

    source = tmp_path / "responses.jsonl"
    source.write_bytes(content.encode("utf-8"))
    outcomes = []
    for read in (_jsonl_records, _jsonl_records_by_line):
        try:
            outcomes.append(read(source))
        except DataError as error:
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]
