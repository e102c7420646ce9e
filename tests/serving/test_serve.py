"""Managed local servers: started, health awaited, used, and stopped with their workers.

The server is tests/fake_vllm.py, a real HTTP process started through the same code path as
`vllm serve` (only `serve.command` differs). Process checks are by PID, via /proc.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from fake_vllm import FAKE_VERSION, HOSTILE_VERSION
from frames import arrow

from dualcog import schemas
from dualcog.config import validate_config
from dualcog.digests import file_digest
from dualcog.explorer.page import write_explorer
from dualcog.inference import media_path, run_model
from dualcog.serving import facts as served_facts
from dualcog.serving import server as serving
from dualcog.serving.server import (
    GpuClaim,
    ManagedServer,
    ServeError,
    gpu_pool,
    serve_spec,
    served_groups,
)
from dualcog.stamp import build_stamp, model_entry

# (Fake) vLLM server processes.
pytestmark = pytest.mark.integration

FAKE = Path(__file__).parents[1] / "fake_vllm.py"
IMAGE = "cd" + "4" * 62


def alive(pid: int) -> bool:
    """True while `pid` is a live process (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def started(starts: Path) -> list[tuple[int, int]]:
    """(server pid, worker pid) of every start the fake server recorded."""
    if not starts.exists():
        return []
    return [
        (int(parts[1]), int(parts[2]))
        for parts in (line.split() for line in starts.read_text().splitlines())
    ]


def fake_model(starts: Path, *args: str, **serve: object) -> dict:
    return {
        "name": "Local-VLM-Instant",
        "backend": "openai",
        "family": "qwen_vllm",
        "max_retries": 0,
        "serve": {
            "model": "/models/local-vlm",
            "served_name": "local-vlm",
            "command": [sys.executable, str(FAKE)],
            "args": ["--starts-file", str(starts), *args],
            "gpus": 0,
            "health_timeout_s": 20,
            **serve,
        },
    }


def one_prompt(tmp_path: Path) -> tuple[pd.DataFrame, Path]:
    store = tmp_path / "media"
    path = media_path(store, IMAGE, "image")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xd8\xff\xe0jpeg")
    row = {
        "sample_id": "s1",
        "task": "landmark_position",
        "request_key": "rk1",
        "system_text": "Answer in JSON.",
        "user_text": "where?",
        "media_keys": [IMAGE],
        "media_kinds": ["image"],
        "offered_option_ids": ["A"],
    }
    return schemas.to_table(pd.DataFrame([row]), schemas.PROMPTS).to_pandas(), store


def test_serves_requests_then_stops_with_its_workers(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    model = fake_model(starts, "--startup-delay", "0.5")
    log = tmp_path / "logs" / "serve.log"
    with ManagedServer(serve_spec(model), log) as server:
        [(pid, worker)] = started(starts)
        assert server.pid == pid and alive(pid) and alive(worker)
        frame, store = one_prompt(tmp_path)
        served = {**model, "api_base": server.api_base, "request_model": "local-vlm"}
        keyless = run_model(served, arrow(frame), None, store, tmp_path / "cache0").to_pandas()
        assert list(keyless.status) == ["error"]  # the server accepts only its own key
        served["api_key"] = server.api_key
        out = run_model(served, arrow(frame), None, store, tmp_path / "cache").to_pandas()
        assert list(out.status) == ["ok"]
    assert not alive(pid) and not alive(worker)
    text = log.read_text()
    assert "--served-model-name local-vlm" in text and "request local-vlm" in text
    stored = [p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    stored += [p.read_bytes() for p in (tmp_path / "cache0").rglob("*") if p.is_file()]
    assert stored and not any(server.api_key.encode() in data for data in stored)
    assert server.api_key not in text and server.api_key not in out.to_json()


VERSION_CASES = {
    # /version answer of the fake: (version kept, source, what the page must not hold)
    "ok": (FAKE_VERSION, "server", None),
    "html": (HOSTILE_VERSION, "server", "<script>alert"),
    "huge": (None, "unknown", "9" * 200),
    "not-json": (None, "unknown", "<i>unknown"),
    "not-text": (None, "unknown", "major"),
    "absent": (None, "unknown", None),
}


@pytest.mark.parametrize("answer", list(VERSION_CASES))
def test_the_servers_version_reaches_stamp_and_page_only_as_safe_text(tmp_path, answer) -> None:
    """Whatever /version answers, the job goes on, and the page shows escaped text only."""
    kept, source, absent = VERSION_CASES[answer]
    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    model = fake_model(tmp_path / "starts.txt", "--version-answer", answer,
                       "--chat-template", str(template))  # fmt: skip
    spec = serve_spec(model)
    with ManagedServer(spec, tmp_path / "serve.log") as server:
        reported, problem = server.reported_version()
        server.check_alive()  # the answer harmed nothing
        facts = served_facts.run_facts(
            {**validate_config({"data_root": str(tmp_path), "models": [model]})["models"][0],
             "request_model": spec.served_name},
            spec.argv(served_facts.PORT_PLACEHOLDER), spec.args, spec.env,
            served_facts.version_fact(reported, problem, None),
            video_tasks=False, rows=[], base=tmp_path,
        )  # fmt: skip
        key = server.api_key
    path = tmp_path / served_facts.facts_path(model["name"])
    served_facts.write_facts(facts, path)
    assert path.stat().st_size < 4096 and key not in path.read_text()
    config = validate_config({"data_root": str(tmp_path), "models": [model]})
    stamp = build_stamp({model["name"]: model_entry(config["models"][0])}, [], tmp_path,
                        base=tmp_path)  # fmt: skip
    served = stamp["models"][model["name"]]["served"]
    assert (served["vllm_version"], served["vllm_version_source"]) == (kept, source)
    assert (served["version_note"] is None) == (kept is not None)
    assert served["chat_template"] == {"source": "file", "path": str(template),
                                       "sha256": file_digest(template)}  # fmt: skip
    assert "--served-model-name" in served["launch_args"] and "<port>" in served["launch_args"]
    page = write_explorer(model["name"], [], tmp_path / "p.html", tmp_path / "d",
                          all_models=[model["name"]], stamp=stamp).page.read_text()  # fmt: skip
    assert key not in page and file_digest(template) in page
    if absent:
        assert absent not in page
    if answer == "html":
        assert "&lt;script&gt;alert(&#34;v&#34;)&lt;/script&gt;&lt;b&gt;0.1 (server)" in page


class Impostor(ThreadingHTTPServer):
    """Another program on the port: answers /health 200 and counts every other request."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def reply(self) -> None:
                if self.path != "/health":
                    owner.requests.append(f"{self.command} {self.path}")
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = reply  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True


def test_an_impostor_on_the_port_gets_no_request_and_a_clear_error(tmp_path, monkeypatch):
    impostor = Impostor()
    port = impostor.server_address[1]
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    monkeypatch.setattr(serving, "free_port", lambda host: port)  # the port is taken meanwhile
    starts = tmp_path / "starts.txt"
    server = ManagedServer(serve_spec(fake_model(starts)), tmp_path / "serve.log")
    try:
        with pytest.raises(ServeError, match=f"port {port}") as info, server:
            pytest.fail("the impostor must not be used")
    finally:
        impostor.shutdown()
        impostor.server_close()
    # Either our server exited for want of the port or the identity check refused the impostor.
    assert "another program" in str(info.value).lower()
    assert not [r for r in impostor.requests if r.startswith("POST")]
    assert server.process is not None and not alive(server.process.pid)
    assert all(not alive(pid) and not alive(worker) for pid, worker in started(starts))


@pytest.mark.parametrize("answer", ["huge", "short"])
def test_a_models_listing_of_a_gigabyte_or_cut_short_is_capped_and_named(tmp_path, answer):
    """GET /v1/models with the key answers 1 GiB (streamed: at most the cap is read) or
    promises more than it sends: a clear identity error, no hang, no uncaught exception."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if "Authorization" not in self.headers:
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 30 if answer == "huge" else 1000))
            self.end_headers()
            if answer == "short":
                self.wfile.write(b'{"data": [')
                return  # the connection closes 990 bytes short
            chunk = b" " * 65536
            with contextlib.suppress(OSError):
                for _ in range((1 << 30) // len(chunk)):
                    self.wfile.write(chunk)

        def log_message(self, *args: object) -> None:
            pass

    listener = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    listener.daemon_threads = True
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    server = ManagedServer(serve_spec(fake_model(tmp_path / "s.txt")), tmp_path / "s.log")
    server.port, server.api_key = listener.server_address[1], "k" * 16
    try:
        with pytest.raises(ServeError) as info:
            server.check_identity()
    finally:
        listener.shutdown()
        listener.server_close()
    expected = {"huge": "a reply over 1024 KiB, not read", "short": "cut short: 10 of 1000 bytes"}
    expected = expected[answer]
    assert expected in str(info.value) and "401 without its per-launch key" in str(info.value)


def test_identity_needs_401_without_the_key_and_the_served_name(tmp_path, monkeypatch):
    """A real vLLM-like server on the port but started without our key is refused too."""
    starts = tmp_path / "other.txt"
    other = ManagedServer(serve_spec(fake_model(starts)), tmp_path / "other.log")
    with other:
        monkeypatch.setattr(serving, "free_port", lambda host: other.port)
        ours = ManagedServer(serve_spec(fake_model(tmp_path / "s.txt")), tmp_path / "ours.log")
        with pytest.raises(ServeError, match=f"port {other.port}"), ours:
            pytest.fail("another job's server must not be used")
    assert other.api_key not in (tmp_path / "other.log").read_text()


def test_health_timeout_reports_the_log_tail_and_leaves_nothing(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    model = fake_model(starts, "--never-healthy", health_timeout_s=1.5)
    server = ManagedServer(serve_spec(model), tmp_path / "serve.log")
    with pytest.raises(ServeError) as info, server:
        pytest.fail("a server that is never healthy must not be used")
    message = str(info.value)
    assert "not healthy after 1.5 s" in message and "loading /models/local-vlm" in message
    [(pid, worker)] = started(starts)
    assert not alive(pid) and not alive(worker)


def test_a_server_that_exits_at_start_is_reported_at_once(tmp_path: Path) -> None:
    model = fake_model(tmp_path / "starts.txt", "--no-such-option")
    began = time.monotonic()
    server = ManagedServer(serve_spec(model), tmp_path / "serve.log")
    with pytest.raises(ServeError, match=r"(?s)exited with code 2.*unrecognized arguments"), server:
        pass
    assert time.monotonic() - began < 15


def test_a_missing_server_command_says_how_to_install_it(tmp_path: Path) -> None:
    model = fake_model(tmp_path / "s.txt", command=["no-such-vllm-binary", "serve"])
    with pytest.raises(ServeError, match="not found.*envs/vllm.yaml"):
        ManagedServer(serve_spec(model), tmp_path / "serve.log").start()


def test_a_server_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    model = fake_model(starts, "--ignore-term")
    server = ManagedServer(serve_spec(model), tmp_path / "serve.log", stop_grace_s=1.0)
    with server:
        [(pid, worker)] = started(starts)
    assert not alive(pid) and not alive(worker)


def test_sigterm_to_the_job_process_stops_the_server(tmp_path: Path) -> None:
    """A job killed by the scheduler (SIGTERM) still stops its server."""
    starts = tmp_path / "starts.txt"
    model = fake_model(starts)
    script = (
        "import sys, time\n"
        "from dualcog.serving.server import ManagedServer, exit_on_signals, serve_spec\n"
        f"model = {model!r}\n"
        "with exit_on_signals(), ManagedServer(serve_spec(model), sys.argv[1]):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
    )
    job = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "serve.log")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert job.stdout is not None and job.stdout.readline().strip() == "ready"
    [(pid, worker)] = started(starts)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) == 128 + signal.SIGTERM
    assert not alive(pid) and not alive(worker)


def test_runs_sharing_a_served_route_share_one_server() -> None:
    serve = {"model": "/m", "gpus": 2}
    models = [
        {"name": "Q-Instant", "backend": "openai", "serve": serve},
        {"name": "Q-Thinking", "backend": "openai", "serve": serve},
        {"name": "R-Instant", "backend": "openai", "serve": {"model": "/r", "gpus": 1}},
        {"name": "API-Instant", "backend": "openai", "api_base": "http://x/v1"},
        {"name": "Q-Fast", "backend": "openai", "route": "Q", "serve": {"model": "/q2"}},
    ]
    groups = served_groups(models)
    assert [(g.key, g.runs, g.gpus) for g in groups] == [
        ("Q", ("Q-Instant", "Q-Thinking"), 2),
        ("R", ("R-Instant",), 1),
        ("Q-2", ("Q-Fast",), 1),
    ]
    assert groups[2].rule_name == "infer_served_Q_2"


def test_gpu_pool_comes_from_the_job_or_the_machine(monkeypatch) -> None:
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "3"}) is None  # SLURM chose: keep it
    assert gpu_pool({"DUALCOG_GPUS": "0, 1,2"}) == ["0", "1", "2"]
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: leave the choice alone
    assert gpu_pool({}) is None


def test_gpu_claims_share_the_pool_without_overlap(tmp_path: Path) -> None:
    first = GpuClaim(1, ["0", "1", "2"], tmp_path)
    second = GpuClaim(2, ["0", "1", "2"], tmp_path)
    assert first.acquire() == ["0"] and second.acquire() == ["1", "2"]
    third = GpuClaim(1, ["0", "1", "2"], tmp_path, wait_s=0.3, poll_s=0.05)
    with pytest.raises(ServeError, match=r"no 1 free GPUs in \['0', '1', '2'\] after 0.3 s"):
        third.acquire()
    first.release()
    assert third.acquire() == ["0"]
    with pytest.raises(ServeError, match="needs 4 GPUs; the pool has 3"):
        GpuClaim(4, ["0", "1", "2"], tmp_path)


def test_two_servers_get_different_devices(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("DUALCOG_GPUS", "4,5")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a lock folder of this test's own
    monkeypatch.setattr(tempfile, "tempdir", None)
    starts = tmp_path / "starts.txt"
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    model = fake_model(starts, gpus=1)
    with ManagedServer(serve_spec(model), logs[0]), ManagedServer(serve_spec(model), logs[1]):
        seen = sorted(
            line for log in logs for line in log.read_text().splitlines()
            if line.startswith("CUDA_VISIBLE_DEVICES=")
        )  # fmt: skip
    assert seen == ["CUDA_VISIBLE_DEVICES=4", "CUDA_VISIBLE_DEVICES=5"]
    # Released with the servers: both devices are free again.
    assert GpuClaim(2, ["4", "5"], tmp_path / "dualcog-gpu-locks", wait_s=0).acquire() == ["4", "5"]


def wait_gone(pids: list[int], limit_s: float = 60.0) -> bool:
    """True once no pid in `pids` is alive; a generous bound, not a timing check."""
    deadline = time.monotonic() + limit_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_server_left_by_a_killed_job_is_reaped_by_the_next(tmp_path: Path) -> None:
    """kill -9 of the job: the leader ignores SIGTERM (its PDEATHSIG), the worker is not told;
    the next server start in the same pidfile folder stops both."""
    starts = tmp_path / "starts.txt"
    pids = tmp_path / "pids"
    model = fake_model(starts, "--ignore-term")
    script = (
        "import sys, time\n"
        "from dualcog.serving.server import ManagedServer, serve_spec\n"
        f"model = {model!r}\n"
        f"with ManagedServer(serve_spec(model), sys.argv[1], pid_dir={str(pids)!r}):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(600)\n"
    )
    job = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "serve.log")], stdout=subprocess.PIPE
    )
    assert job.stdout is not None and job.stdout.readline().strip() == b"ready"
    [(pid, worker)] = started(starts)
    assert len(list(pids.glob("*.pid"))) == 1
    job.kill()
    job.wait(timeout=30)
    time.sleep(1.0)  # time for PDEATHSIG to arrive: ignored, so both must still be alive
    assert alive(pid) and alive(worker)
    try:
        nxt = ManagedServer(
            serve_spec(fake_model(tmp_path / "next.txt")), tmp_path / "next.log",
            stop_grace_s=1.0, pid_dir=pids,
        )  # fmt: skip
        with nxt:
            assert wait_gone([pid, worker])
        assert not list(pids.glob("*.pid"))  # the next server's own pidfile went at its stop
    finally:
        for leftover in (pid, worker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)


def pidfile_for(path: Path, token: str, **changes: object) -> None:
    """A pidfile naming `token` as written for it, whose owner job is gone, with `changes`."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone_start = serving.process_start(gone.pid)
    gone.wait()
    record = {"token": token, "pid": None, "owner_pid": gone.pid, "owner_start": gone_start}
    path.write_text(json.dumps({**record, **changes}))


TOKEN = "0123456789abcdef" * 2


def with_token(token: str = TOKEN) -> dict[str, str]:
    return {**os.environ, serving.SERVER_ID_VARIABLE: token}


@pytest.mark.parametrize(
    ("changes", "reaped"),
    [
        ({}, True),
        ({"token": "f" * 32}, False),  # another server's token: this process is not named
        ({"token": "0123"}, False),  # too short to name anything
        ({"owner_pid": os.getpid(), "owner_start": None}, None),  # filled in below
    ],
)
def test_the_reaper_kills_only_the_processes_carrying_the_token(tmp_path, changes, reaped):
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], env=with_token()
    )
    try:
        if reaped is None:  # the owning job still runs: its server is no orphan
            changes = {"owner_pid": os.getpid(), "owner_start": serving.process_start(os.getpid())}
        pidfile_for(tmp_path / "x.pid", **{"token": TOKEN, **changes})
        stopped = serving.reap_orphans(tmp_path, grace_s=1.0)
        assert (stopped == [other.pid]) is bool(reaped)
        assert wait_gone([other.pid]) if reaped else alive(other.pid)
        assert (tmp_path / "x.pid").exists() is (reaped is None)
    finally:
        other.kill()
        other.wait()


def test_a_launcher_script_ignoring_sigterm_never_outlives_five_killed_jobs(tmp_path) -> None:
    """A server started through `#!/usr/bin/env python3` (its command line changes after the
    start) that ignores SIGTERM, its job killed with SIGKILL five times: each next start reaps
    what the killed job left, and once the last one stops, no server process is alive."""
    launcher = tmp_path / "serve-launcher"
    launcher.write_text(
        "#!/usr/bin/env python3\n"
        "import runpy, sys\n"
        f"sys.argv[0] = {str(FAKE)!r}\n"
        f"runpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    launcher.chmod(0o755)
    starts, pids = tmp_path / "starts.txt", tmp_path / "pids"
    model = fake_model(starts, "--ignore-term", command=[str(launcher)])
    script = (
        "import sys, time\n"
        "from dualcog.serving.server import ManagedServer, serve_spec\n"
        f"spec = serve_spec({model!r})\n"
        "server = ManagedServer(spec, sys.argv[1], stop_grace_s=0.3, pid_dir=sys.argv[2])\n"
        "with server:\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(600)\n"
    )
    try:
        for round_ in range(5):
            job = subprocess.Popen(
                [sys.executable, "-c", script, str(tmp_path / "serve.log"), str(pids)],
                stdout=subprocess.PIPE,
            )
            assert job.stdout is not None and job.stdout.readline().strip() == b"ready"
            job.kill()
            job.wait(timeout=30)
            assert len(started(starts)) == round_ + 1
            # Every earlier server was reaped by this round's start; this one lives on.
            assert [alive(p) or alive(w) for p, w in started(starts)] == [False] * round_ + [True]
        with ManagedServer(serve_spec(fake_model(tmp_path / "next.txt")), tmp_path / "next.log",
                           stop_grace_s=0.3, pid_dir=pids):  # fmt: skip
            pass
        everything = [
            pid for pair in started(starts) + started(tmp_path / "next.txt") for pid in pair
        ]
        assert wait_gone(everything, 5.0) and not list(pids.glob("*.pid"))
    finally:
        for pid in [pid for pair in started(starts) for pid in pair]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_reaper_stops_workers_whose_leader_has_exited(tmp_path: Path) -> None:
    leader_code = (
        "import subprocess, sys\n"
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print(w.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", leader_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=with_token(),
    )
    assert leader.stdout is not None and leader.stdin is not None
    worker = int(leader.stdout.readline())
    try:
        pidfile_for(tmp_path / "x.pid", TOKEN)
        leader.stdin.close()
        leader.wait(timeout=30)
        assert alive(worker)
        assert serving.reap_orphans(tmp_path, grace_s=1.0) == [worker]
        assert wait_gone([worker])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)


def test_vllm_available_names_the_model_and_how_to_install(tmp_path: Path) -> None:
    starts = tmp_path / "s.txt"
    assert serving.vllm_available(fake_model(starts)) is None  # the command exists
    missing = serving.vllm_available(fake_model(starts, command=["no-such-vllm", "serve"]))
    assert missing is not None
    assert "Local-VLM-Instant" in missing and "pip install vllm" in missing
    python = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]
    no_module = serving.vllm_available(fake_model(starts, command=python))
    importable = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True)
    if importable.returncode != 0:  # the configured python is named as the one lacking it
        assert no_module is not None and f"{sys.executable} cannot import vllm" in no_module
    else:
        assert no_module is None


def test_the_reaper_leaves_pidfiles_of_other_machines_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], env=with_token()
    )
    try:
        pidfile_for(tmp_path / "x.pid", TOKEN, host="another-node")
        assert serving.reap_orphans(tmp_path, grace_s=1.0) == []
        assert alive(other.pid) and (tmp_path / "x.pid").exists()
    finally:
        other.kill()
        other.wait()
