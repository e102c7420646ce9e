"""Several real processes on one model: shards sharing one cache, `kill -9` and resume,
budgets (rpm, concurrency) shared by all of a model's jobs, and no `openai` import offline.
The concurrency and `kill -9` tests run over each transport of the request engine (`openai`,
the toy API)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow
from loopback_server import LoopbackServer, Reply, assert_rate_limited
from transports import Wire

from dualcog import schemas
from dualcog.inference import cache_path, media_path, run_model

# Inference jobs as separate processes against a loopback server.
pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parents[2] / "src"
HERE = Path(__file__).resolve().parent  # toy_transport.py
IMAGE_KEY = "aa" + "1" * 62

# A child process: run_model on the prompts of `prompts.parquet` whose index is in argv, with
# the toy API backend registered as a test registers it.
CHILD = """
import json, sys
from collections import Counter
from pathlib import Path
from toy_transport import TOY
from dualcog.backends import register
from dualcog.inference import run_model
from dualcog.schemas import read_arrow
register(TOY)
work = Path(sys.argv[1])
model = json.loads((work / "model.json").read_text())
prompts = read_arrow(work / "prompts.parquet")
if len(sys.argv) > 2:
    prompts = prompts.take([int(i) for i in sys.argv[2].split(",")])
out = run_model(model, prompts, None, work / "media", work / "cache")
print(json.dumps(dict(Counter(out["status"].to_pylist()))))
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = media_path(tmp_path / "media", IMAGE_KEY, "image")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xd8\xff\xe0jpeg")
    return tmp_path


def write_inputs(work: Path, model: dict, count: int, tasks: tuple[str, ...] = ("behavior",)):
    rows = [
        {
            "sample_id": f"{task}{i:03d}",
            "task": task,
            "request_key": f"rk-{task}{i:03d}",
            "system_text": "sys",
            "user_text": f"{task} prompt {i:03d}",
            "media_keys": [IMAGE_KEY],
            "media_kinds": ["image"],
            "offered_option_ids": ["A"],
        }
        for task in tasks
        for i in range(count)
    ]
    prompts = schemas.to_table(pd.DataFrame(rows), schemas.PROMPTS).to_pandas()
    prompts.to_parquet(work / "prompts.parquet")
    (work / "model.json").write_text(json.dumps(model))
    return prompts


def child(work: Path, indices: list[int] | None = None) -> subprocess.Popen:
    args = [sys.executable, "-c", CHILD, str(work)]
    if indices is not None:
        args.append(",".join(map(str, indices)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(SRC), str(HERE)))}
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def base_model(server: LoopbackServer, **extra: object) -> dict:
    return {
        "name": "shared-vlm",
        "backend": "openai",
        "api_base": server.api_base,
        "api_key": "EMPTY",
        "max_retries": 0,
        "concurrency": 4,
        **extra,
    }


def wire_model(wire: Wire, server: LoopbackServer, **extra: object) -> dict:
    """`base_model` on `wire`'s backend."""
    backend = {key: value for key, value in wire.fields.items() if value is not None}
    return base_model(server, **backend, **extra)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def test_shards_share_one_cache_and_a_new_split_resends_nothing(server, work):
    prompts = write_inputs(work, base_model(server), 30)
    shards = [list(range(i, 30, 3)) for i in range(3)]
    children = [child(work, shard) for shard in shards]
    for process in children:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()[-2000:]
    assert server.requests == 30 and len(server.per_prompt) == 30
    lines = cache_path(work / "cache", "shared-vlm", "behavior").read_text().splitlines()
    assert len(lines) == 30 and all(json.loads(line)["status"] == "ok" for line in lines)
    # Two shards now, split differently: everything is served from the cache.
    for half in (prompts.iloc[:17], prompts.iloc[17:]):
        out = run_model(base_model(server), arrow(half), None, work / "media", work / "cache")
        assert set(out["status"].to_pylist()) == {"ok"}
    assert server.requests == 30


def _cached_ids(work: Path) -> set[str]:
    path = cache_path(work / "cache", "shared-vlm", "behavior")
    if not path.exists():
        return set()
    lines = path.read_text().splitlines()
    return {json.loads(line)["sample_id"] for line in lines if line.endswith("}")}


def _sample_of(body: dict) -> str:
    return "behavior" + re.search(r"behavior prompt (\d+)", json.dumps(body))[1]


def test_kill_9_and_resume_resends_no_answered_request(wire, work):
    """No request whose answer reached the cache is sent again after a kill -9.

    Timing-free: each kill waits until the cache holds a couple of waves more (an event, not a
    clock), and the check is against what the cache held when the process died. A request the
    server answered but the killed process had not written yet may be sent again (its answer
    was lost with the process); only those."""

    def slow(body: dict, count: int) -> Reply:
        time.sleep(0.3)
        return wire.api.echo(body, count)

    with wire.server(slow) as server:
        write_inputs(work, wire_model(wire, server), 24)
        lost: set[str] = set()  # answered by the server, not in the cache when killed
        for kill in range(3):
            process = child(work)
            target = 4 * (kill + 1) + 4 * kill  # a couple of waves more each time
            deadline = time.monotonic() + 120
            while len(_cached_ids(work)) < target and time.monotonic() < deadline:
                time.sleep(0.01)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            cached = _cached_ids(work)
            assert len(cached) >= target, f"kill {kill}: only {len(cached)} answers cached"
            with server.lock:
                markers = {wire.api.marker(b): _sample_of(b) for b in server.bodies}
                answered = {markers[m] for m in server.answered}
            lost |= answered - cached
        process = child(work)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()[-2000:]
        assert json.loads(out.decode().strip().splitlines()[-1]) == {"ok": 24}
        assert len(server.answered) == 24
        resent = {markers[m] for m in server.resent_after_answer if m in markers}
        assert len(resent) == len(server.resent_after_answer)
        assert resent <= lost, f"sent again although cached: {sorted(resent - lost)}"


TASKS = ("behavior", "visibility", "self_position")


def run_task_processes(work: Path, model: dict, per_task: int) -> None:
    """One process per task, all at once, as a model's task jobs run."""
    write_inputs(work, model, per_task, TASKS)
    children = [child(work, [i + per_task * t for i in range(per_task)]) for t in range(len(TASKS))]
    for process in children:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()[-2000:]


def test_rpm_limit_holds_across_a_models_jobs(work):
    with LoopbackServer() as server:
        # 8 requests per 2 s window for the model (4/s), three task processes at once.
        model = base_model(server, rpm_limit=8, rate_limit_window_s=2, concurrency=4)
        run_task_processes(work, model, 6)
        arrivals = sorted(server.arrivals)
    assert len(arrivals) == 18
    # One budget for the three jobs: 17 gaps at the model's spacing, not three budgets' worth.
    assert_rate_limited(arrivals, 8, 2.0)


def test_concurrency_holds_across_a_models_jobs(wire, work):
    in_flight = [0, 0]  # now, peak
    lock = threading.Lock()

    def counting(body: dict, count: int) -> Reply:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        time.sleep(0.15)
        with lock:
            in_flight[0] -= 1
        return wire.api.echo(body, count)

    with wire.server(counting) as server:
        run_task_processes(work, wire_model(wire, server, concurrency=2), 6)
        assert server.requests == 18
    assert in_flight[1] == 2  # never the 6 that three separate budgets would allow


def test_offline_and_replay_jobs_never_import_openai(tmp_path):
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"sample_id": "s0", "raw_text": "{}", "status": "ok"}) + "\n")
    code = f"""
import sys
import pandas as pd
from dualcog import schemas
from dualcog.inference import run_model
from dualcog.inference.outcome import run_summary
prompts = schemas.to_table(pd.DataFrame([{{
    "sample_id": "s0", "task": "behavior", "request_key": "k", "user_text": "u",
    "media_keys": [], "media_kinds": [], "offered_option_ids": ["A"]}}]),
    schemas.PROMPTS)
run_model({{"name": "r", "backend": "replay", "replay": {str(replay)!r}}}, prompts,
          None, "m", "c")
print("openai" in sys.modules, "httpx2" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "False"]


def test_spend_limits_hold_through_kill_9_at_five_random_points(wire, work):
    """A request in flight at a `kill -9` may have been billed: it counts against the limits
    at its reservation (the lost ledger), so the server never bills past either limit."""
    import random

    billed = {"tokens": 0, "cost": 0.0}
    prices = {"input": 10.0, "output": 30.0}
    each_cost = (11 * 10.0 + 7 * 30.0) / 1e6  # an answer: 11 prompt, 7 completion tokens

    def billing(body: dict, count: int) -> Reply:
        with lock:  # billed on arrival: the provider charges whether or not the answer lands
            billed["tokens"] += 18
            billed["cost"] += each_cost
        time.sleep(0.15)
        return wire.api.echo(body, count)

    lock = threading.Lock()
    seed = random.randrange(1 << 30)
    pick = random.Random(seed)
    note = f"seed {seed}"
    with wire.server(billing) as server:
        model = wire_model(wire, server, token_limit=400, cost_limit=0.0085, prices=prices,
                           estimated_tokens_per_request=18)  # fmt: skip
        write_inputs(work, model, 40)
        for _ in range(5):
            # A random point of the sending: after 1 to 6 more requests reached the server
            # (each answered 0.15 s later, so up to four are in flight), or the job's end.
            target = server.requests + pick.randint(1, 6)
            process = child(work)
            deadline = time.monotonic() + 60
            while server.requests < target and process.poll() is None:
                assert time.monotonic() < deadline, note
                time.sleep(pick.uniform(0.0, 0.02))
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        process = child(work)
        process.communicate(timeout=120)
        lost = work / "cache" / "shared-vlm" / ".budget" / "lost.jsonl"
        note += f", {server.requests} requests, lost ledger: {lost.exists()}"
        assert billed["tokens"] <= 400, note
        assert billed["cost"] <= 0.0085 + 1e-12, note
        assert server.requests >= 10, note  # the limits, not the kills, stopped the sending
