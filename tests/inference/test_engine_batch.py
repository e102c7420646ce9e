"""Batch mode is the engine's, not OpenAI's: the toy transport with an in-memory `Batcher` (a
provider whose batches answer each line with the echo of its prompt) gets durable records,
spending limits, first-ok-wins results, error rows for missing results and the cache, with no
batch code of its own beyond the seven calls of its batch interface."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_inference_openai import make_prompts, run
from toy_transport import TOY, ToyTransport

from dualcog import backends
from dualcog.inference.batch import RECORD_FOLDER, BatchState, Result, run_batches
from dualcog.inference.engine import AttemptFailed, Reply, transport_runner
from dualcog.inference.limits import BUDGET_EXHAUSTED


class ToyBatcher:
    """Batches kept in memory: each ends at its second poll; `drop` sample ids get no result,
    `twice` ones an error line and then an ok line."""

    def __init__(self, drop: tuple[str, ...] = (), twice: tuple[str, ...] = ()) -> None:
        self.files: dict[str, list[dict]] = {}
        self.batches: dict[str, tuple[str, int]] = {}  # batch id -> (file id, polls)
        self.drop, self.twice = drop, twice

    def line(self, custom_id: str, body: bytes) -> bytes:
        return json.dumps({"id": custom_id, "request": json.loads(body)}).encode() + b"\n"

    def upload(self, path: Path) -> str:
        file_id = f"file-{len(self.files)}"
        self.files[file_id] = [json.loads(line) for line in path.read_bytes().splitlines()]
        return file_id

    def submit(self, input_file_id: str, metadata: dict[str, str]) -> str:
        batch_id = f"batch-{len(self.batches)}"
        self.batches[batch_id] = (input_file_id, 0)
        return batch_id

    def find(self, input_file_id: str, since: float) -> str | None:
        return next((b for b, (f, _) in self.batches.items() if f == input_file_id), None)

    def poll(self, batch_id: str) -> BatchState:
        file_id, polls = self.batches[batch_id]
        self.batches[batch_id] = (file_id, polls + 1)
        ended = polls >= 1
        return BatchState(batch_id, "done" if ended else "running", ended, f"poll {polls + 1}")

    def collect(self, state: BatchState) -> Iterator[Result]:
        for number, item in enumerate(self.files[self.batches[state.batch_id][0]], start=1):
            sample = item["id"].partition(":")[2]
            if sample in self.drop:
                continue
            if sample in self.twice:
                yield f"line {number}", item["id"], AttemptFailed("http_500", "flaky")
            answer = f'{{"echo":"{item["request"]["prompt"]}"}}'
            yield f"line {number}", item["id"], Reply(answer, prompt_tokens=11,
                                                     completion_tokens=7)  # fmt: skip

    def missing(self, state: BatchState) -> AttemptFailed:
        return AttemptFailed("bad_response", f"batch {state.batch_id}: no result")


BATCHER = ToyBatcher()


class ToyBatchTransport(ToyTransport):
    def batch(self, engine, unsent) -> None:
        run_batches(engine, self, BATCHER, unsent)


run_toy_batch = transport_runner(ToyBatchTransport)


@pytest.fixture
def toy_batch(monkeypatch: pytest.MonkeyPatch) -> ToyBatcher:
    global BATCHER
    BATCHER = ToyBatcher()
    runner = f"{__name__}:run_toy_batch"
    monkeypatch.setattr(backends, "REGISTRY", {**backends.REGISTRY})
    backends.register(backends.Backend("toy-batch", runner, TOY.description, batches=True,
                                       counts_failures=True, reports_usage=True))  # fmt: skip
    return BATCHER


def model(**overrides: object) -> dict:
    return {"name": "Toy-Batch", "backend": "toy-batch", "api_base": "http://127.0.0.1:9",
            "batch": True, "batch_poll_s": 0.01, "batch_poll_max_s": 0.02, **overrides}  # fmt: skip


def test_a_toy_batch_is_answered_cached_and_not_submitted_again(toy_batch, media_store, tmp_path):
    out = run(model(), make_prompts(4), media_store, tmp_path)
    assert list(out.status) == ["ok"] * 4 and list(out.backend) == ["toy-batch"] * 4
    assert list(out.raw_text) == [f'{{"echo":"prompt {i:03d}"}}' for i in range(4)]
    assert list(out.prompt_tokens) == [11] * 4 and len(toy_batch.batches) == 1
    assert list((tmp_path / "Toy-Batch" / RECORD_FOLDER).glob("*")) == []  # record removed
    again = run(model(), make_prompts(4), media_store, tmp_path)
    assert len(toy_batch.batches) == 1 and list(again.raw_text) == list(out.raw_text)


def test_missing_and_repeated_results_and_a_token_limit(toy_batch, media_store, tmp_path):
    toy_batch.drop, toy_batch.twice = ("s001",), ("s002",)
    out = run(model(), make_prompts(3), media_store, tmp_path)
    # s001 got no result (an error row, sent again next time); s002's ok answer wins.
    assert list(out.status) == ["ok", "error", "ok"] and out.error_type[1] == "bad_response"
    toy_batch.drop = ()
    # 2 x 18 tokens spent; a limit of 80 admits two more requests (72), not three (90).
    more = run(model(token_limit=80, estimated_tokens_per_request=18), make_prompts(5),
               media_store, tmp_path)  # fmt: skip
    assert list(more.status) == ["ok"] * 4 + ["error"] and more.error_type[4] == BUDGET_EXHAUSTED
    sent = [len(toy_batch.files[file_id]) for file_id, _ in toy_batch.batches.values()]
    assert sent == [3, 2]  # s001 again and s003; s004 not sent
