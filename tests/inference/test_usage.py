"""Usage, cost, outcome classes, the mode check and the estimate, on hand-computed cases."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dualcog.errors import DataError
from dualcog.estimate import estimate, estimate_lines
from dualcog.inference.cache import ResponseCache, answer_settings_json, cache_key, cache_path
from dualcog.outcomes import request_outcomes, response_facts_table
from dualcog.schemas import REQUEST_OUTCOMES, RESPONSE_FACTS, RESPONSES, write_table
from dualcog.tables import to_csv, to_markdown
from dualcog.tables.inputs import read_request_outcomes
from dualcog.tables.usage import build_usage, outcome_shares, usage_by_task, usage_totals
from dualcog.usage import (
    mode_flags,
    model_totals,
    read_facts,
    read_response_facts,
    run_usage_lines,
    usage_records,
)

PRICED = {"name": "api-Instant", "backend": "openai", "prices": {"input": 2.0, "output": 8.0}}
UNPRICED = {"name": "free-Instant", "backend": "replay"}
ORACLE = {"name": "oracle", "backend": "oracle"}


def rows(model: str, *specs: dict) -> list[dict]:
    out = []
    for number, spec in enumerate(specs):
        row = {"sample_id": f"s{number}", "task": "landmark_position", "model": model,
               "status": "ok", "raw_text": '{"answer_option_id": "A"}'}  # fmt: skip
        out.append({**row, **spec})
    return out


def table_of(records: list[dict]) -> pa.Table:
    return pa.Table.from_pandas(pd.DataFrame(records), preserve_index=False)


def facts_of(records: list[dict]) -> pa.Table:
    return response_facts_table(table_of(records))


def test_tokens_and_cost_are_summed_over_reported_rows() -> None:
    facts = facts_of(
        rows(
            "api-Instant",
            {"prompt_tokens": 1000, "completion_tokens": 250, "reasoning_tokens": 50},
            {"prompt_tokens": 3000, "completion_tokens": 750},
            {},  # an ok answer whose server reported no usage
            {"status": "error", "raw_text": None, "error_type": "http_500"},
            {"status": "missing", "raw_text": None},  # never sent: not a request
        )
        + rows("free-Instant", {"prompt_tokens": 10, "completion_tokens": 5})
        + rows("oracle", {})
    )
    usage = usage_by_task(facts, [PRICED, UNPRICED, ORACLE]).set_index("model")
    api = usage.loc["api-Instant"]
    assert (api["requests"], api["reported"]) == (4, 2)
    assert (api["prompt_tokens"], api["completion_tokens"], api["reasoning_tokens"]) == (
        4000,
        1000,
        50,
    )
    # (4000 x $2 + 1000 x $8) per million tokens
    assert api["cost_usd"] == pytest.approx(0.016)
    free = usage.loc["free-Instant"]
    assert free["prompt_tokens"] == 10 and math.isnan(free["cost_usd"])  # no prices
    assert math.isnan(free["reasoning_tokens"])  # nobody reported any: not 0
    assert usage.loc["oracle", ["requests", "prompt_tokens", "cost_usd"]].isna().all()
    totals = usage_totals(usage.reset_index())
    assert totals.loc["api-Instant", "cost_usd"] == pytest.approx(0.016)
    # The summary lines' sums, without pandas: the same numbers, None for NaN.
    plain = model_totals(usage_records(facts, [PRICED, UNPRICED, ORACLE]))
    assert list(plain) == ["api-Instant", "free-Instant", "oracle"]
    for model, row in plain.items():
        expected = totals.loc[model].astype(object).where(totals.loc[model].notna(), None)
        assert row == pytest.approx(expected.to_dict(), nan_ok=False), model


def test_usage_records_equal_a_plain_loop_whatever_the_row_order() -> None:
    # Sums run over runs of equal (model, task): rows of a key split into several runs, a
    # null key or status and keys in any order must give the sums of a row-by-row loop.
    import random

    generator = random.Random(7)
    models = [PRICED, UNPRICED, dict(PRICED, name="b-Instant"), ORACLE]
    records = []
    for number in range(400):
        count = lambda: generator.choice([None, 0, 1, 7, 1000])  # noqa: E731
        records.append({
            "sample_id": f"s{number}", "model": generator.choice([m["name"] for m in models]),
            "task": generator.choice(["behavior", "landmark_position", None]),
            "status": generator.choice(["ok", "ok", "error", "missing", None]),
            "raw_text": "A", "prompt_tokens": count(), "completion_tokens": count(),
            "reasoning_tokens": count(), "cached_tokens": count(),
        })  # fmt: skip
    records.sort(key=lambda r: (r["model"], str(r["task"])) if generator.random() < 0.7 else ("",))
    facts = facts_of(records)
    expected: dict[tuple, dict] = {}
    for row in records:
        key = (row["model"], str(row["task"]))
        entry = expected.setdefault(key, {"model": key[0], "task": key[1]})
        backend = next(m["backend"] for m in models if m["name"] == row["model"])
        if backend == "oracle":
            continue
        entry.setdefault("requests", 0)
        entry.setdefault("reported", 0)
        if row["status"] not in ("ok", "error"):
            continue
        entry["requests"] += 1
        entry["reported"] += (
            row["prompt_tokens"] is not None or row["completion_tokens"] is not None
        )
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            if row[name] is not None:
                entry[name] = entry.get(name, 0) + row[name]
    got = {(r["model"], r["task"]): r for r in usage_records(facts, models)}
    assert set(got) == set(expected)
    for key, entry in expected.items():
        record = {name: value for name, value in got[key].items() if name != "cost_usd"}
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            if "requests" in entry:
                entry.setdefault(name, None)
        assert record == entry, key
        if key[0] == "api-Instant" and entry["reported"]:  # $2 / $8 per million tokens
            cost = ((entry["prompt_tokens"] or 0) * 2 + (entry["completion_tokens"] or 0) * 8) / 1e6
            assert got[key]["cost_usd"] == pytest.approx(cost)


def test_usage_table_shows_a_dash_for_built_ins_never_zero() -> None:
    facts = facts_of(
        rows("api-Instant", {"prompt_tokens": 1000, "completion_tokens": 250}) + rows("oracle", {})
    )
    table = build_usage(facts, [PRICED, ORACLE])
    markdown = to_markdown(table)
    oracle_line = next(line for line in markdown.splitlines() if line.startswith("| oracle |"))
    assert oracle_line.count("–") == 7 and " 0 " not in oracle_line
    assert "| api-Instant | all | 1 | 1 | 1,000 | 250 | – | – | 0.0040 |" in markdown
    assert "| api-Instant | landmark_position | 1 |" in markdown
    assert not any(line.startswith("| oracle | landmark") for line in markdown.splitlines())
    csv = to_csv(table).splitlines()
    assert csv[1].startswith("api-Instant,") and ",1000,250,,,0.004" in csv[1]
    assert any(line.startswith("oracle,baseline,oracle,all,,,,,,,") for line in csv)
    # Flags of one kind share one note that names the runs (45 runs must not give 45 notes).
    kind = "-Instant run with reasoning"
    flags = {"api-Instant": f"{kind}: 1 of its 1 answers", "oracle": f"{kind}: 2 of its 2"}
    flagged = to_markdown(build_usage(facts, [PRICED, ORACLE], mode_flags=flags))
    assert flagged.count("Mode check") == 1
    assert f"Mode check, {kind} (did the thinking switch take effect?): api-Instant, oracle." in (
        flagged
    )


def test_outcome_classes_first_match_wins(tmp_path: Path) -> None:
    records = (
        rows(
            "api-Instant",
            {},  # s0 answered
            {"finish_reason": "length"},  # s1 truncated
            {"finish_reason": "content_filter", "raw_text": ""},  # s2 refused
            {"status": "error", "raw_text": None, "error_type": "http_400",
             "error_message": "The response was filtered (content_filter)"},  # s3 refused
            {"status": "error", "raw_text": None, "error_type": "timeout"},  # s4 request error
            {"status": "missing", "raw_text": None},  # s5 request error (none recorded)
            {"raw_text": "  \n"},  # s6 empty
            {"raw_text": "I think it is A."},  # s7 unparsable (per the parsed table)
            {"raw_text": "", "finish_reason": "length"},  # s8 truncated before empty
        )
    )  # fmt: skip
    parsed = pa.table(
        {
            "sample_id": ["s0", "s7", "s7", "s5"],
            "task": ["landmark_position"] * 4,
            "parse": ["compatible", "compatible", "strict", "compatible"],
            "stage": ["strict", "invalid", "invalid", "missing"],
            "all_valid": [True, False, False, False],
        }
    )
    # What the parse job writes: one class per sample, read back per model for the shares.
    table = request_outcomes(table_of(records), parsed)
    got = table.column("outcome").to_pylist()
    assert got == [
        "answered", "truncated", "refused", "refused", "request_error", "request_error",
        "empty", "unparsable", "truncated",
    ]  # fmt: skip
    # Without the parsed table nothing is unparsable.
    assert request_outcomes(table_of(records), None).column("outcome")[7].as_py() == "answered"
    write_table(table, REQUEST_OUTCOMES, tmp_path / "api-Instant.outcomes.parquet")
    classes = read_request_outcomes({"api-Instant": tmp_path / "api-Instant.outcomes.parquet"})
    shares = outcome_shares(classes).loc["api-Instant"]
    assert shares["samples"] == 9
    assert shares["truncated"] == pytest.approx(2 / 9)
    assert shares["request_error"] == pytest.approx(2 / 9)
    assert shares["answered"] == pytest.approx(1 / 9)


def test_request_outcomes_keep_each_samples_last_row(tmp_path: Path) -> None:
    # s0 failed, then was answered when the run resumed; s1 was answered, then failed. Only
    # the columns a responses file must have: no finish_reason, no error texts.
    responses = pa.table(
        {
            "sample_id": ["s0", "s1", "s0", "s1"],
            "task": ["behavior"] * 4,
            "status": ["error", "ok", "ok", "error"],
            "raw_text": [None, "A", "B", None],
        }
    )
    parsed = pa.table(
        {
            "sample_id": ["s0", "s1"],
            "task": ["behavior"] * 2,
            "parse": ["compatible"] * 2,
            "stage": ["strict"] * 2,
            "all_valid": [True, True],
        }
    )
    table = request_outcomes(responses, parsed)
    assert table.schema.equals(REQUEST_OUTCOMES)
    ids, classes = table.column("sample_id").to_pylist(), table.column("outcome").to_pylist()
    got = dict(zip(ids, classes, strict=True))
    assert got == {"s0": "answered", "s1": "request_error"}
    bad = tmp_path / "m.outcomes.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(DataError, match="m.outcomes.parquet"):
        read_request_outcomes({"m": bad})
    pq.write_table(responses, bad)  # a table without the outcome column
    with pytest.raises(DataError, match="field outcome|outcome"):
        read_request_outcomes({"m": bad})


def test_mode_check_flags_a_switch_that_did_not_take() -> None:
    models = [
        {"name": "a-Thinking", "backend": "openai"},
        {"name": "b-Thinking", "backend": "openai"},
        {"name": "c-Instant", "backend": "openai"},
        {"name": "d-Instant", "backend": "openai"},
        {"name": "sim-Thinking", "backend": "simulated"},
    ]
    facts = facts_of(
        rows("a-Thinking", {"reasoning_text": None}, {"reasoning_text": "  "})
        + rows("b-Thinking", {"reasoning_tokens": 12}, {})
        + rows("c-Instant", {}, {"reasoning_text": "Let me look at the image."})
        + rows("d-Instant", {"reasoning_tokens": 0})
        + rows("sim-Thinking", {})
    )
    flags = mode_flags(facts, models)
    assert set(flags) == {"a-Thinking", "c-Instant"}
    assert "none of its 2 answers" in flags["a-Thinking"]
    assert "1 of its 2 answers" in flags["c-Instant"]


def write_responses(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(pd.DataFrame(records), RESPONSES, path)


def test_run_usage_lines_read_the_results_folder(tmp_path: Path) -> None:
    config = {"tasks": ["landmark_position"], "models": [PRICED, ORACLE]}
    assert run_usage_lines(config, tmp_path) == []
    write_responses(
        tmp_path / "responses" / "api-Instant" / "landmark_position.parquet",
        rows("api-Instant", {"prompt_tokens": 1000, "completion_tokens": 250}),
    )
    # 400 uncached prompt tokens at $2 and 600 cached at $0.5 per million: $0.0011
    cached = dict(PRICED, name="cache-Instant", prices={"input": 2.0, "output": 8.0,
                                                        "cached_input": 0.5})  # fmt: skip
    write_responses(
        tmp_path / "responses" / "cache-Instant" / "landmark_position.parquet",
        rows(
            "cache-Instant", {"prompt_tokens": 1000, "completion_tokens": 0, "cached_tokens": 600}
        ),
    )
    config["models"].append(cached)
    write_responses(tmp_path / "responses" / "oracle" / "landmark_position.parquet",
                    rows("oracle", {}))  # fmt: skip
    lines = run_usage_lines(config, tmp_path)
    assert lines[1] == (
        "  api-Instant: 1 requests, 1,000 prompt + 250 completion tokens (– reasoning), $0.0040"
    )
    assert lines[2] == (
        "  cache-Instant: 1 requests, 1,000 prompt + 0 completion tokens (– reasoning, 600 of the"
        " prompt cached), $0.0011"
    )
    assert not any("oracle" in line for line in lines)  # a built-in sends nothing
    assert lines[-1].startswith("  total: 2 requests") and "$0.0051" in lines[-1]
    facts = read_response_facts(sorted((tmp_path / "responses").rglob("*.parquet")))
    assert facts.num_rows == 3


def test_the_parse_jobs_facts_equal_the_facts_read_from_the_responses(tmp_path: Path) -> None:
    records = rows(
        "api-Thinking",
        {"prompt_tokens": 1000, "completion_tokens": 250, "reasoning_tokens": 50},
        {"reasoning_text": "  \n ", "raw_text": " \t"},  # blank texts: empty, no reasoning
        {"reasoning_text": "because", "finish_reason": "stop"},
        {"status": "error", "raw_text": None, "error_type": "http_500", "error_message": "x"},
        {"refusal": "I cannot help with that", "raw_text": None, "cached_tokens": 3},
        {"status": "missing", "raw_text": None},
    )
    responses = tmp_path / "responses.parquet"
    write_responses(responses, records)
    facts_path = tmp_path / "api-Thinking.facts.parquet"
    write_table(response_facts_table(pq.read_table(responses)), RESPONSE_FACTS, facts_path)
    from_facts = read_facts([facts_path])
    assert from_facts.equals(read_response_facts([responses]))
    assert from_facts.column("empty").to_pylist() == [False, True, False, True, True, True]
    assert from_facts.column("refused").to_pylist() == [False, False, False, False, True, False]
    assert from_facts.column("has_reasoning").to_pylist() == [
        True, False, True, False, False, False,
    ]  # fmt: skip
    empty = read_facts([])
    assert empty.schema.equals(from_facts.schema) and empty.num_rows == 0
    write_table(pd.DataFrame(records), RESPONSES, tmp_path / "not-facts.parquet")
    with pytest.raises(DataError, match="lacks a column") as raised:
        read_facts([tmp_path / "not-facts.parquet"])
    assert "not-facts.parquet" in str(raised.value) and "empty" in str(raised.value)


def test_run_usage_lines_read_the_facts_only_when_newer_than_the_responses(
    tmp_path: Path,
) -> None:
    config = {"tasks": ["landmark_position"], "models": [PRICED]}
    answers = tmp_path / "responses" / "api-Instant" / "landmark_position.parquet"
    write_responses(answers, rows("api-Instant", {"prompt_tokens": 1000, "completion_tokens": 250}))
    facts = tmp_path / "parsed" / "api-Instant.facts.parquet"
    facts.parent.mkdir(parents=True)
    # Facts that say otherwise (two requests), to tell which file was read.
    two = rows("api-Instant", {"prompt_tokens": 10, "completion_tokens": 1}, {"prompt_tokens": 10})
    write_table(response_facts_table(pa.Table.from_pylist(two)), RESPONSE_FACTS, facts)
    os.utime(answers, (1_000_000, 1_000_000))
    os.utime(facts, (2_000_000, 2_000_000))
    assert run_usage_lines(config, tmp_path)[1].startswith("  api-Instant: 2 requests, 20 prompt")
    os.utime(answers, (3_000_000, 3_000_000))  # answered again after the parse: not summed yet
    assert run_usage_lines(config, tmp_path)[1].startswith("  api-Instant: 1 requests, 1,000")


def test_estimate_subtracts_the_cache_and_uses_its_mean(tmp_path: Path) -> None:
    model = {"name": "api-Instant", "backend": "openai", "temperature": 0.0,
             "prices": {"input": 1.0, "output": 4.0}}  # fmt: skip
    configured = {"name": "new-Instant", "backend": "openai", "estimated_tokens_per_request": 1000,
                  "prices": {"input": 1.0, "output": 4.0}}  # fmt: skip
    prompts = pd.DataFrame({"sample_id": [f"s{i}" for i in range(5)],
                            "request_key": [f"k{i}" for i in range(5)]})  # fmt: skip
    with ResponseCache(cache_path(tmp_path, "api-Instant", "landmark_position")) as cache:
        fingerprint = answer_settings_json(model)
        for i, (p, c) in enumerate([(100, 20), (300, 40)]):
            cache.append(cache_key(f"k{i}", fingerprint), f"s{i}",
                         {"status": "ok", "raw_text": "{}", "prompt_tokens": p,
                          "completion_tokens": c})  # fmt: skip
        # An error entry and an entry of another sample are not answers for these prompts.
        cache.append(cache_key("k2", fingerprint), "s2", {"status": "error"})
        cache.append(cache_key("k3", fingerprint), "other", {"status": "ok", "raw_text": "{}"})
    plan = {
        "api-Instant": {"landmark_position": prompts, "future_observation": prompts.head(2)},
        "new-Instant": {"landmark_position": prompts.head(4)},
        "oracle": {"landmark_position": prompts},
    }
    frame = estimate([model, configured, ORACLE], plan, tmp_path).set_index(["model", "task"])
    lp = frame.loc[("api-Instant", "landmark_position")]
    assert (lp["requests"], lp["cached"], lp["to_send"]) == (5, 2, 3)
    # mean 200 prompt + 30 completion tokens per request, 3 requests
    assert lp["tokens"] == pytest.approx(690)
    assert lp["cost_usd_low"] == lp["cost_usd_high"] == pytest.approx((600 * 1 + 90 * 4) / 1e6)
    fo = frame.loc[("api-Instant", "future_observation")]
    assert fo["to_send"] == 2 and "other tasks" in fo["source"]
    assert fo["tokens"] == pytest.approx(460)
    new = frame.loc[("new-Instant", "landmark_position")]
    assert new["source"] == "estimated_tokens_per_request" and new["tokens"] == 4000
    assert (new["cost_usd_low"], new["cost_usd_high"]) == pytest.approx((0.004, 0.016))
    assert frame.loc[("oracle", "landmark_position"), "to_send"] == 0
    # Nothing is created for a model with no cache yet.
    assert not cache_path(tmp_path, "new-Instant", "landmark_position").exists()
    lines = estimate_lines(frame.reset_index())
    assert lines[1].startswith("  api-Instant: 5 of 7 requests to send (2 cached), ~1,150 tokens")
    assert "new-Instant: 4 of 4 requests to send (0 cached), ~4,000 tokens, $0.00–0.02" in lines[2]
    assert lines[-1].startswith("  total: 9 requests to send")


def test_estimate_prices_cached_tokens_and_names_a_limit_it_would_pass(tmp_path: Path) -> None:
    model = {"name": "api-Instant", "backend": "openai", "temperature": 0.0,
             "prices": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
             "cost_limit": 0.01, "token_limit": 100_000}  # fmt: skip
    prompts = pd.DataFrame({"sample_id": [f"s{i}" for i in range(10)],
                            "request_key": [f"k{i}" for i in range(10)]})  # fmt: skip
    with ResponseCache(cache_path(tmp_path, "api-Instant", "landmark_position")) as cache:
        fingerprint = answer_settings_json(model)
        for i in range(2):  # each: 1,000 prompt tokens of which 400 cached, 100 completion
            cache.append(cache_key(f"k{i}", fingerprint), f"s{i}",
                         {"status": "ok", "raw_text": "{}", "prompt_tokens": 1000,
                          "completion_tokens": 100, "cached_tokens": 400})  # fmt: skip
    frame = estimate([model], {"api-Instant": {"landmark_position": prompts}}, tmp_path)
    (row,) = frame.to_dict(orient="records")
    each = (600 * 2.0 + 400 * 0.5 + 100 * 8.0) / 1e6  # $0.0022 per request
    assert row["to_send"] == 8
    assert row["cost_usd_low"] == row["cost_usd_high"] == pytest.approx(8 * each)
    assert row["spent_usd"] == pytest.approx(2 * each) and row["spent_tokens"] == 2200
    (line,) = [line for line in estimate_lines(frame) if "api-Instant" in line]
    # $0.0044 spent + $0.0176 planned = $0.022 > $0.01; tokens 2,200 + 8,800 < 100,000
    assert "cost_limit $0.01: $0.00 spent, the estimate passes it by $0.01" in line
    assert "token_limit 100,000: 2,200 spent, the estimate stays within it" in line


def test_response_facts_of_several_files_equal_those_of_each_file(tmp_path: Path) -> None:
    # Files of one schema are converted together, files whose columns differ one by one:
    # either way the facts are those of each file, in the order given.
    first = rows("api-Instant", {"prompt_tokens": 10, "reasoning_text": "hmm"}, {"raw_text": " "})
    second = rows("api-Instant", {"status": "error", "error_type": "timeout", "raw_text": None})
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    write_responses(paths[0], first)
    write_responses(paths[1], second)
    expected = pa.concat_tables([response_facts_table(pq.read_table(p)) for p in paths])
    same = read_response_facts(paths)
    assert same.equals(expected)
    assert same.column("has_reasoning").to_pylist() == [True, False, False]
    assert same.column("empty").to_pylist() == [False, True, True]
    # A file without the reasoning column: a different schema.
    table = pq.read_table(paths[1])
    pq.write_table(table.drop_columns(["reasoning_text"]), tmp_path / "c.parquet")
    mixed = read_response_facts([paths[0], tmp_path / "c.parquet"])
    assert mixed.equals(same)
