"""Spending limits (`cost_limit`, `token_limit`), cached-input prices and refusal texts: the
ledger and reservation arithmetic on hand-computed cases, then a real loopback server, for each
transport of the request engine (transports.py)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from loopback_server import LoopbackServer, Reply, completion
from test_inference_openai import api_key_env, make_model, make_prompts, run  # noqa: F401

from dualcog.config import validate_config
from dualcog.errors import ConfigError
from dualcog.inference import cache_path
from dualcog.inference.cache import cache_line
from dualcog.inference.limits import CacheLedger, Refusal, Spend, SpendLimit, Tally
from dualcog.inference.outcome import BUDGET_EXHAUSTED, assess, record_outcome
from dualcog.outcomes import request_outcomes
from dualcog.prices import Prices, model_prices

# $1,000 / $3,000 per million tokens: one loopback reply (11 prompt + 7 completion tokens)
# costs 11 x 0.001 + 7 x 0.003 = $0.032.
PRICES = {"input": 1000.0, "output": 3000.0}
REPLY_COST = 0.032


def limit_of(tmp_path: Path, task: str = "behavior", **model: object) -> SpendLimit:
    return SpendLimit({"name": "m", **model}, tmp_path / "m", task)


def append(path: Path, *entries: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        for number, entry in enumerate(entries):
            handle.write(cache_line(f"k{number}", f"s{number}", {"status": "ok", **entry}))


# -- prices -----------------------------------------------------------------------------------


def test_cached_input_price_applies_to_the_cached_part_of_the_prompt():
    prices = model_prices({"prices": {"input": 2.0, "output": 8.0, "cached_input": 0.5}})
    # (1000 - 400) x 2 + 400 x 0.5 + 100 x 8 = 1200 + 200 + 800 = 2200 per million
    assert prices.cost(1000, 100, 400) == pytest.approx(0.0022)
    # Without a cached-input price cached tokens cost as input: 1000 x 2 + 100 x 8 = 2800.
    assert Prices(2.0, 8.0).cost(1000, 100, 400) == pytest.approx(0.0028)


# -- the ledger: usage read from the cache files ---------------------------------------------


def test_ledger_reads_every_cache_file_of_the_model_incrementally(tmp_path):
    folder = tmp_path / "m"
    append(folder / "behavior.jsonl", {"prompt_tokens": 10, "completion_tokens": 5},
           {"prompt_tokens": 20, "completion_tokens": 5, "cached_tokens": 8})  # fmt: skip
    append(folder / "self_position.jsonl", {"prompt_tokens": 100, "completion_tokens": 50},
           {"raw_text": "no usage reported"},
           {"status": "error", "error_type": "http_500"})  # fmt: skip
    ledger = CacheLedger(folder)
    ledger.refresh()
    assert ledger.task("behavior") == Tally(2, 30, 10, 8, 0)
    assert ledger.total() == Tally(3, 130, 60, 8, 1)  # the error line counts for nothing
    # An appended line is read once; a line still being written (no newline) waits.
    path = folder / "behavior.jsonl"
    with path.open("ab") as handle:
        line = cache_line("k9", "s9", {"status": "ok", "prompt_tokens": 1, "completion_tokens": 2})
        handle.write(line[:-1])
    ledger.refresh()
    assert ledger.task("behavior").replies == 2
    with path.open("ab") as handle:
        handle.write(b"\n")
    ledger.refresh()
    ledger.refresh()
    assert ledger.task("behavior") == Tally(3, 31, 12, 8, 0)


def test_spent_and_estimate_hand_computed(tmp_path):
    limit = limit_of(tmp_path, cost_limit=1.0, prices=PRICES, max_tokens=500)
    task, other = Tally(2, 30, 10, 0, 0), Tally(1, 100, 50, 0, 0)
    model = task.merged(other)
    # Spent: 130 x 0.001 + 60 x 0.003 = 0.31 USD, 190 tokens.
    assert limit.spent(model) == Spend(190, pytest.approx(0.31))
    # The task's mean first: 15 prompt + 5 completion tokens = 0.015 + 0.015 USD.
    assert limit.estimate(task, model) == Spend(20, pytest.approx(0.03))
    # No reply of this task yet: the model's mean, (130 + 60) / 3 tokens.
    estimate = limit.estimate(Tally(), model)
    assert estimate.tokens == pytest.approx(190 / 3) and estimate.cost == pytest.approx(0.31 / 3)
    assert limit.estimate(Tally(), Tally()) is None
    # A configured estimate wins, priced at the dearer price: 40 x 0.003 USD.
    fixed = limit_of(tmp_path, cost_limit=1.0, prices=PRICES, estimated_tokens_per_request=40)
    assert fixed.estimate(task, model) == Spend(40, pytest.approx(0.12))
    # An ok reply without usage counts as one estimate: the model mean, else max_tokens.
    assert limit.spent(model.merged(Tally(0, 0, 0, 0, 2))).tokens == pytest.approx(190 * 5 / 3)
    assert limit.spent(Tally(0, 0, 0, 0, 2)) == Spend(1000, pytest.approx(3.0))


def test_decide_sends_waits_or_refuses():
    limit = SpendLimit({"name": "m", "token_limit": 100}, Path("unused"), "t")
    each = Spend(20, 0)
    assert limit.decide(Spend(60, 0), Spend(), each) == each  # 60 + 20 <= 100
    assert limit.decide(Spend(60, 0), Spend(20, 0), each) == each  # 60 + 20 + 20 = 100
    assert limit.decide(Spend(60, 0), Spend(40, 0), each) is None  # in flight may settle lower
    refused = limit.decide(Spend(81, 0), Spend(), each)  # 81 + 20 > 100: never
    assert isinstance(refused, Refusal) and refused.limit == "token_limit"
    assert refused.text == (
        "not sent: the next request (~20 tokens) would pass token_limit 100 tokens of model m "
        "(81 tokens spent)"
    )
    # Nothing known: the request goes alone and reserves what is left.
    assert limit.decide(Spend(30, 0), Spend(), None) == Spend(70, 0)
    assert limit.decide(Spend(30, 0), Spend(5, 0), None) is None
    assert isinstance(limit.decide(Spend(100, 0), Spend(), None), Refusal)
    # Both limits: either one refuses.
    both = SpendLimit(
        {"name": "m", "token_limit": 1000, "cost_limit": 0.05, "prices": PRICES}, Path("u"), "t"
    )
    refused = both.decide(Spend(100, 0.04), Spend(), Spend(18, REPLY_COST))
    assert isinstance(refused, Refusal) and refused.limit == "cost_limit"
    assert "would pass cost_limit $0.0500 of model m ($0.0400 spent)" in refused.text


def test_reservations_are_shared_through_hold_files_and_a_dead_holder_frees_them(tmp_path):
    first = limit_of(tmp_path, token_limit=100, estimated_tokens_per_request=30)
    second = limit_of(tmp_path, token_limit=100, estimated_tokens_per_request=30)
    first.open()
    second.open()
    try:
        assert first.try_reserve() == Spend(30, 0)
        assert first.try_reserve() == Spend(30, 0)
        assert second.try_reserve() == Spend(30, 0)  # 90 reserved
        assert second.try_reserve() is None  # 120 > 100: waits for the others to settle
        first.settle(Spend(30, 0))
        assert second.try_reserve() == Spend(30, 0)
        # A holder that died leaves a file nobody locks: its reservation is dropped.
        stale = first.folder / "hold-999999-dead.bin"
        stale.write_bytes(b"\x00" * 16)
        assert second.try_reserve() is None and not stale.exists()
    finally:
        first.close()
        second.close()
    assert list(first.folder.glob("hold-*.bin")) == []


def test_cost_limit_needs_prices_at_validation():
    def config(**model: object) -> dict:
        base = {"name": "m", "backend": "openai", "api_base": "http://x"}
        return {"data_root": "data", "models": [{**base, **model}]}

    with pytest.raises(ConfigError, match=r"models \(m\)\.cost_limit needs prices"):
        validate_config(config(cost_limit=5))
    validate_config(config(cost_limit=5, prices={"input": 1, "output": 2, "cached_input": 0.5}))
    validate_config(config(token_limit=1000))
    # On the route like the prices: the check runs after routes are merged.
    routed = config(cost_limit=5)
    routed["routes"] = {"m": {"prices": {"input": 1, "output": 2}}}
    assert validate_config(routed)["models"][0]["cost_limit"] == 5
    with pytest.raises(ConfigError, match="token_limit"):
        validate_config(config(token_limit=0))


# -- a real server ----------------------------------------------------------------------------


def test_cost_limit_stops_the_run_fails_the_job_and_a_raised_limit_resumes(
    wire, wire_server, media_store, tmp_path
):
    server, cache = wire_server, tmp_path / "cache"
    prompts = make_prompts(6)
    # No estimate configured: the first request goes alone, the next ones at the mean.
    model = wire.model(server, prices=PRICES, cost_limit=0.1, concurrency=2)
    out = run(model, prompts, media_store, cache)
    # First request alone (nothing known), then $0.032 each: 3 x 0.032 = 0.096 <= 0.1 and a
    # fourth would make 0.128.
    assert server.requests == 3
    # Which three were sent depends on which worker was waiting; three were.
    sent, unsent = out[out.status == "ok"], out[out.status == "error"]
    assert len(sent) == 3 and list(unsent.error_type) == [BUDGET_EXHAUSTED] * 3
    assert list(unsent.attempts) == [0] * 3
    assert set(unsent.error_message) == {
        "not sent: the next request (~$0.0320) would pass cost_limit $0.1000 of model "
        "Qwen3-VL-8B-Instant ($0.0960 spent)"
    }
    # Nothing unsent goes to the cache.
    lines = cache_path(cache, model["name"], "behavior").read_text().splitlines()
    assert len(lines) == 3
    outcome = record_outcome(model, "behavior", out, cache)
    assert outcome is not None and outcome.failed
    message = outcome.failure_message()
    assert message == (
        "Qwen3-VL-8B-Instant/behavior: spending limit reached (cost_limit $0.1000: $0.0960 "
        "spent): 3 of 6 requests not sent (error_type budget_exhausted); the answers received "
        "are cached. To continue, raise `cost_limit` / `token_limit` for model "
        "'Qwen3-VL-8B-Instant' (or its route) in your config and run the same snakemake "
        "command again: only the requests not yet answered are sent"
    )
    # The run's final summary says the same (read back from the outcome file).
    from dualcog.inference.outcome import outcome_path, read_outcome

    saved = read_outcome(outcome_path(cache, model["name"], "behavior"))
    assert saved is not None and saved.lines() == [
        "Qwen3-VL-8B-Instant/behavior: 3/6 ok; errors budget_exhausted: 3",
        f"  {message}",
    ]
    # max_error_rate does not excuse a limit.
    assert assess({**model, "max_error_rate": 1.0}, "t", out.status, out.error_type).failed
    # Raised: the rest goes, nothing answered is sent again.
    resumed = run({**model, "cost_limit": 0.2}, prompts, media_store, cache)
    assert list(resumed.status) == ["ok"] * 6
    assert server.requests == 6 and server.resent_after_answer == []
    assert list(resumed.raw_text[sent.index]) == list(sent.raw_text)  # from the cache


def test_token_limit_with_an_estimate_and_the_spend_of_earlier_runs(
    wire, wire_server, media_store, tmp_path
):
    server, cache = wire_server, tmp_path / "cache"
    model = wire.model(server, token_limit=80, estimated_tokens_per_request=18, concurrency=4)
    # 3 x 18 = 54 tokens.
    out = run(model, make_prompts(3), media_store, cache)
    assert server.requests == 3 and (out.status == "ok").all()
    # Another task of the model, a later run: the 54 tokens spent count, one more fits
    # (54 + 18 = 72 <= 80; a second would make 90).
    more = run(model, make_prompts(4, task="self_position"), media_store, cache)
    assert server.requests == 4
    assert sorted(more.status) == ["error", "error", "error", "ok"]


def test_two_runners_of_one_model_at_once_share_the_limit(wire, media_store, tmp_path):
    import threading
    import time

    def slow(body: dict, count: int) -> Reply:
        time.sleep(0.05)
        return 200, wire.api.answer("A"), {}

    cache = tmp_path / "cache"
    outs: dict[str, pd.DataFrame] = {}
    with wire.server(slow) as server:
        model = wire.model(server, token_limit=90, estimated_tokens_per_request=18)

        def job(task: str) -> None:
            outs[task] = run(model, make_prompts(6, task=task), media_store, cache)

        threads = [threading.Thread(target=job, args=(t,)) for t in ("behavior", "self_position")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # 5 x 18 = 90: five requests between the two jobs, never five each.
        assert server.requests == 5
    statuses = pd.concat([outs["behavior"].status, outs["self_position"].status])
    assert (statuses == "ok").sum() == 5 and (statuses == "error").sum() == 7


def test_refusal_text_and_cached_tokens_are_stored_replayed_and_classified(media_store, tmp_path):
    def refusing(body: dict, count: int) -> Reply:
        reply = completion(None, refusal="I can't help with that.")
        reply["usage"]["prompt_tokens_details"] = {"cached_tokens": 5}
        return 200, reply, {}

    cache = tmp_path / "cache"
    with LoopbackServer(refusing) as server:
        out = run(make_model(server), make_prompts(2), media_store, cache)
    assert list(out.status) == ["ok", "ok"] and list(out.raw_text) == ["", ""]
    assert list(out.refusal) == ["I can't help with that."] * 2
    assert list(out.cached_tokens) == [5, 5]
    with LoopbackServer() as server:  # from the cache: nothing sent, the same rows
        again = run(make_model(server), make_prompts(2), media_store, cache)
        assert server.requests == 0
    pd.testing.assert_frame_equal(out, again)
    path = tmp_path / "responses.parquet"
    from dualcog.schemas import RESPONSES, write_table

    write_table(out, RESPONSES, path)
    classes = request_outcomes(pq.read_table(path), None).column("outcome").to_pylist()
    assert classes == ["refused", "refused"]


def test_replay_carries_cached_tokens_and_refusals(tmp_path):
    from dualcog.inference.replay import replay_rows

    source = tmp_path / "responses.jsonl"
    records = [
        {"sample_id": "s000", "request_status": "ok", "raw_text": "A",
         "raw_response": {"usage": {"prompt_tokens": 9, "completion_tokens": 1,
                                    "prompt_tokens_details": {"cached_tokens": 4}}}},
        {"sample_id": "s001", "request_status": "ok", "raw_text": "",
         "refusal": "declined", "raw_response": {"usage": {"prompt_tokens": 9}}},
    ]  # fmt: skip
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    prompts = make_prompts(2).to_dict(orient="records")
    rows = replay_rows({"name": "r", "backend": "replay", "replay": str(source)}, prompts)
    assert [r["cached_tokens"] for r in rows] == [4, None]
    assert [r["refusal"] for r in rows] == [None, "declined"]


def answer(tmp_path: Path, key: str, sample: str, tokens: int) -> None:
    """The cache line of request (key, sample) with `tokens` prompt tokens."""
    with (tmp_path / "m" / "behavior.jsonl").open("ab") as handle:
        handle.write(cache_line(key, sample, {"status": "ok", "prompt_tokens": tokens}))


def _killed_holder(tmp_path: Path, answer_first: bool) -> None:
    """A real process reserves request `k1` (40 tokens) and is killed with `kill -9`; with
    `answer_first`, its cache line was written before the kill."""
    import subprocess
    import sys

    code = (
        "import sys, time; from pathlib import Path; from dualcog.inference.limits import "
        "SpendLimit; s = SpendLimit({'name': 'm', 'token_limit': 100, "
        "'estimated_tokens_per_request': 40}, Path(sys.argv[1]), 'behavior'); s.open(); "
        "print(s.try_reserve('k1', 's1'), flush=True); time.sleep(60)"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "m")], env=env, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout.readline().startswith(b"Spend(tokens=40")
        limit = limit_of(tmp_path, token_limit=100, estimated_tokens_per_request=40)
        limit.open()
        assert limit.try_reserve() == Spend(40, 0)
        assert limit.try_reserve() is None  # 40 + 40 + 40 > 100 while the holder lives
        limit.settle(Spend(40, 0))
        if answer_first:
            answer(tmp_path, "k1", "s1", 30)
    finally:
        holder.kill()
        holder.wait()
    return limit


@pytest.mark.integration
def test_a_request_in_flight_at_a_kill_counts_at_its_reservation(tmp_path):
    """The killed holder's request may have been billed: its 40 tokens move to the lost
    ledger and count as spent (40 + 40 <= 100 sends; 80 + 40 > 100 is refused)."""
    limit = _killed_holder(tmp_path, answer_first=False)
    assert asyncio.run(limit.reserve("k2", "s2")) == Spend(40, 0)
    folder = tmp_path / "m" / ".budget"
    assert [json.loads(line)["cache_key"] for line in (folder / "lost.jsonl").open()] == ["k1"]
    assert limit.lost() == Spend(40, 0) and limit.spent_now() == Spend(40, 0)
    limit.settle(Spend(40, 0), "k2", "s2")
    answer(tmp_path, "k2", "s2", 40)
    refused = asyncio.run(limit.reserve("k3", "s3"))
    assert isinstance(refused, Refusal) and "(80 tokens spent)" in refused.text
    assert "40 tokens, $0.0000 reserved by requests in flight at a crash" in limit.state_text()
    limit.close()
    assert list(folder.glob("hold-*.bin")) == []


@pytest.mark.integration
def test_a_request_answered_before_the_kill_is_counted_once_from_the_cache(tmp_path):
    limit = _killed_holder(tmp_path, answer_first=True)
    assert asyncio.run(limit.reserve()) == Spend(40, 0)  # 30 spent + 40 <= 100
    assert not (tmp_path / "m" / ".budget" / "lost.jsonl").exists()
    assert limit.spent_now() == Spend(30, 0)
    limit.close()


def test_a_process_that_ends_with_requests_unsettled_leaves_them_counted(tmp_path):
    """Ctrl-C, an error or a full cache after sending: the reservation is not dropped."""
    limit = limit_of(tmp_path, token_limit=100, estimated_tokens_per_request=40)
    limit.open()
    assert limit.try_reserve("k1", "s1") == Spend(40, 0)
    limit.close()
    again = limit_of(tmp_path, token_limit=100, estimated_tokens_per_request=40)
    assert again.spent_now() == Spend(40, 0)
    lost = tmp_path / "m" / ".budget" / "lost.jsonl"
    lost.write_text(lost.read_text() * 2 + "not json\n")  # recorded twice: counted once
    assert again.spent_now() == Spend(40, 0)
