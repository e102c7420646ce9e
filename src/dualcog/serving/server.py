"""Local model servers managed by the workflow: start `vllm serve`, wait until healthy, stop.

A model (or its route) with a `serve:` block is served by the workflow itself: one job per
served model starts the server on a free port, sends all of that model's requests through the
ordinary `openai` backend, and stops the server whatever happens (success, error, Ctrl-C,
SIGTERM). The server runs in its own process group, so stopping it stops its workers too
(SIGTERM, then SIGKILL after a grace period); on Linux it is also told to exit if the job dies.

Requests go only to the server this job started: each launch gets a random API key (passed as
VLLM_API_KEY, so it is in no command line or log), and before the first request the job checks
that its process is alive, that /v1/models refuses a request without the key (401), and that
it lists the served name with it. A listener that took the port fails this at once.

A job killed with SIGKILL cannot stop its server, and PR_SET_PDEATHSIG reaches only the leader
(which may ignore it) and not its workers. So each server gets a random token in its
environment (`DUALCOG_SERVER_ID`, inherited by every process it starts, whatever their process
group, and fixed for a process's life in /proc/PID/environ) and a pidfile naming the token and
the owning job, written before the server is launched. The next served job reaps every
process carrying the token of a pidfile whose owner is gone. A command line is never used: a
launcher (`#!/usr/bin/env python3`) changes it after the start.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from dualcog.backends import is_served
from dualcog.errors import DualCogError
from dualcog.routes import route_key_of
from dualcog.serving.facts import VERSION_REPLY_LIMIT, checked_version

DEFAULT_COMMAND = ("vllm", "serve")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_HEALTH_TIMEOUT_S = 1800.0  # loading a large checkpoint from a network disk is slow
LOG_TAIL_LINES = 40
PR_SET_PDEATHSIG = 1
GPU_POOL_VARIABLE = "DUALCOG_GPUS"  # e.g. "0,1,2,3": the devices managed servers may share
GPU_WAIT_S = 600.0


class ServeError(DualCogError):
    """A managed server did not start, did not become healthy, or died while in use."""


@dataclass(frozen=True)
class ServeSpec:
    """How to start one model's server."""

    model: str
    served_name: str
    args: tuple[str, ...] = ()
    gpus: int = 1
    command: tuple[str, ...] = DEFAULT_COMMAND
    host: str = DEFAULT_HOST
    health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, port: int | str) -> list[str]:
        """The command line; `port` may be a placeholder (the served facts record no port)."""
        return [
            *self.command,
            self.model,
            "--host",
            self.host,
            "--port",
            str(port),
            "--served-model-name",
            self.served_name,
            *self.args,
        ]


def serve_spec(model: Mapping[str, Any]) -> ServeSpec:
    """The server of a model config that has a `serve:` block."""
    serve = model.get("serve")
    if not isinstance(serve, Mapping) or not serve.get("model"):
        raise ServeError(f"model {model['name']}: no serve block with a `model` to serve")
    served_name = serve.get("served_name") or model.get("request_model") or route_key_of(model)
    return ServeSpec(
        model=str(serve["model"]),
        served_name=str(served_name),
        args=tuple(str(a) for a in serve.get("args") or ()),
        gpus=int(serve.get("gpus", 1)),
        command=tuple(str(c) for c in serve.get("command") or DEFAULT_COMMAND),
        host=str(serve.get("host") or DEFAULT_HOST),
        health_timeout_s=float(serve.get("health_timeout_s", DEFAULT_HEALTH_TIMEOUT_S)),
        env={str(k): str(v) for k, v in (serve.get("env") or {}).items()},
    )


@dataclass(frozen=True)
class ServedGroup:
    """Runs that share one server (e.g. a model's -Instant and -Thinking runs)."""

    key: str
    runs: tuple[str, ...]
    gpus: int

    @property
    def rule_name(self) -> str:
        return "infer_served_" + re.sub(r"\W", "_", self.key)


def served_groups(models: list[Mapping[str, Any]]) -> list[ServedGroup]:
    """Served runs grouped by route key and identical serve block, in config order."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for model in models:
        if is_served(model):
            block = json.dumps(model["serve"], sort_keys=True, default=str)
            groups.setdefault((route_key_of(model), block), []).append(model)
    result = []
    used: set[str] = set()
    for (key, _), members in groups.items():
        name = key
        suffix = 2
        while name in used:  # one route served two ways: keep the rule names apart
            name, suffix = f"{key}-{suffix}", suffix + 1
        used.add(name)
        spec = serve_spec(members[0])
        result.append(ServedGroup(name, tuple(str(m["name"]) for m in members), spec.gpus))
    return result


def vllm_available(model: Mapping[str, Any]) -> str | None:
    """None if the served model's server command can be started here, else what to do."""
    spec = serve_spec(model)
    program = spec.command[0]
    where = f"model {model['name']}: serve.command {list(spec.command)}"
    if shutil.which(program) is None:
        return (
            f"{where}: {program!r} is not on PATH. Install vLLM (`pip install vllm`, or "
            "envs/vllm.yaml with --sdm conda), or set serve.command to the python that has "
            "it, e.g. [/path/to/python, -m, vllm.entrypoints.cli.main, serve]"
        )
    if len(spec.command) >= 3 and spec.command[1] == "-m" and spec.command[2].startswith("vllm"):
        probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
        try:
            found = subprocess.run([program, "-c", probe], timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            found = False
        if not found:
            return f"{where}: {program} cannot import vllm; `{program} -m pip install vllm`"
    return None


def free_port(host: str = DEFAULT_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    """Child side of Popen (Linux): get SIGTERM if the job process dies without cleaning up."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def group_members(group: int) -> list[int]:
    """Live (non-zombie) processes of a process group; via /proc where there is one."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [group]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def process_start(pid: int) -> int | None:
    """Start time of a live process in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


KILL_WAIT_S = 10.0


def kill_group(group: int, grace_s: float) -> None:
    """SIGTERM to a process group, SIGKILL to what is left of it after `grace_s`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_members(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: on a loaded machine a worker can still be running
    # for a moment. Return only once the group is gone (bounded: an unkillable process in
    # uninterruptible sleep must not hang the job).
    deadline = time.monotonic() + KILL_WAIT_S
    while group_members(group) and time.monotonic() < deadline:
        time.sleep(0.02)


SERVER_ID_VARIABLE = "DUALCOG_SERVER_ID"
MODELS_REPLY_LIMIT = 1 << 20  # bytes of a /v1/models answer read: a listing is far smaller
ORPHAN_GRACE_S = 5.0  # an orphan serves nobody: a short SIGTERM grace before SIGKILL


def token_members(token: str) -> list[int]:
    """Live processes whose environment (as started) carries `SERVER_ID_VARIABLE=token`."""
    needle = f"{SERVER_ID_VARIABLE}={token}".encode()
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's: not ours
            continue
        if needle in environ.split(b"\0") and process_start(int(entry.name)) is not None:
            members.append(int(entry.name))
    return members


def kill_token(token: str, grace_s: float) -> list[int]:
    """SIGTERM to every process carrying `token` (and its group), SIGKILL to the rest after
    `grace_s`; returns once they are gone (bounded, as `kill_group`)."""
    found = token_members(token)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while token_members(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    deadline = time.monotonic() + KILL_WAIT_S
    while (left := token_members(token)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    return found


def write_pidfile(path: Path, token: str, pid: int | None = None) -> None:
    """The pidfile of a server: written before its launch (token and owner), again after it
    (its pid, for people reading it)."""
    record = {
        "token": token,
        "pid": pid,
        "owner_pid": os.getpid(),
        "owner_start": process_start(os.getpid()),
        "host": socket.gethostname(),  # pids mean nothing on another node of a cluster
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(record))
    partial.replace(path)


def reap_orphans(pid_dir: str | Path, grace_s: float = ORPHAN_GRACE_S) -> list[int]:
    """Stop the servers of pidfiles in `pid_dir` whose owning job is gone: every process that
    carries the pidfile's token, whatever its command line or process group now. Returns
    the pids stopped."""
    stopped: list[int] = []
    for path in sorted(Path(pid_dir).glob("*.pid")):
        try:
            record = json.loads(path.read_text())
            token = str(record["token"])
            owner, owner_start = int(record["owner_pid"]), record["owner_start"]
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # unreadable or of an older layout: names nothing
            continue
        if record.get("host", socket.gethostname()) != socket.gethostname():
            continue  # reaped by a run on its own machine
        if owner_start is not None and process_start(owner) == owner_start:
            continue  # its job still runs (another served job of this workflow)
        if len(token) >= 16:  # a token too short to be ours could match a stranger
            stopped += kill_token(token, grace_s)
        path.unlink(missing_ok=True)
    return stopped


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, secret: str | None = None) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no server log)"
    if secret:
        text = text.replace(secret, "***")
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(the server log is empty)"


def gpu_pool(environ: Mapping[str, str]) -> list[str] | None:
    """Devices to share out among servers on this machine, or None to leave the choice alone.

    A job that already has CUDA_VISIBLE_DEVICES (SLURM sets it per job) keeps it; otherwise the
    pool is DUALCOG_GPUS, else every GPU `nvidia-smi -L` lists.
    """
    if environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return None
    if environ.get(GPU_POOL_VARIABLE):
        return [d.strip() for d in environ[GPU_POOL_VARIABLE].split(",") if d.strip()]
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith("GPU ")]


class GpuClaim:
    """Exclusive use of `count` devices of the pool, by lock files held while the server runs.

    The locks are released when the claim is, or when the process holding them dies, so a
    crashed job never keeps a device. Snakemake's `--resources gpu=N` keeps the total within
    the pool; a claim that cannot be met waits, then fails with a message.
    """

    def __init__(
        self,
        count: int,
        pool: list[str],
        lock_dir: str | Path | None = None,
        wait_s: float = GPU_WAIT_S,
        poll_s: float = 0.5,
    ) -> None:
        if count > len(pool):
            raise ServeError(f"the server needs {count} GPUs; the pool has {len(pool)}: {pool}")
        self.count = count
        self.pool = pool
        self.lock_dir = Path(lock_dir or Path(tempfile.gettempdir()) / "dualcog-gpu-locks")
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.devices: list[str] = []
        self._handles: list[IO[bytes]] = []

    def acquire(self) -> list[str]:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.wait_s
        while True:
            for device in self.pool:
                if len(self.devices) == self.count:
                    return self.devices
                if device in self.devices:
                    continue
                handle = open(self.lock_dir / f"gpu-{device}.lock", "ab")  # noqa: SIM115
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    handle.close()
                    continue
                self.devices.append(device)
                self._handles.append(handle)
            if len(self.devices) == self.count:
                return self.devices
            if time.monotonic() >= deadline:
                held = list(self.devices)
                self.release()
                raise ServeError(
                    f"no {self.count} free GPUs in {self.pool} after {self.wait_s:g} s "
                    f"(held {held}); other servers hold the rest: lower --resources gpu="
                )
            time.sleep(self.poll_s)

    def release(self) -> None:
        for handle in self._handles:
            handle.close()
        self._handles.clear()
        self.devices = []


class ManagedServer:
    """One server process group: `with ManagedServer(spec, log) as server: ... server.api_base`."""

    def __init__(
        self,
        spec: ServeSpec,
        log_path: str | Path,
        stop_grace_s: float = 30.0,
        poll_s: float = 0.25,
        label: str | None = None,
        pid_dir: str | Path | None = None,
    ) -> None:
        self.spec = spec
        self.pid_dir = None if pid_dir is None else Path(pid_dir)
        self.api_key = ""
        self.log_path = Path(log_path)
        self.stop_grace_s = stop_grace_s
        self.poll_s = poll_s
        self.label = label or spec.served_name
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.gpus: GpuClaim | None = None
        self.token = ""

    @property
    def api_base(self) -> str:
        return f"http://{self.spec.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def pidfile(self) -> Path | None:
        if self.pid_dir is None:
            return None
        return self.pid_dir / (re.sub(r"[^\w.-]", "_", self.label) + ".pid")

    def start(self) -> None:
        if self.pid_dir is not None:
            reap_orphans(self.pid_dir, min(self.stop_grace_s, ORPHAN_GRACE_S))
        self.port = free_port(self.spec.host)
        argv = self.spec.argv(self.port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.api_key = secrets.token_urlsafe(24)
        # vLLM reads VLLM_API_KEY like --api-key; the environment keeps it out of `ps` and logs.
        env = {**os.environ, **self.spec.env, "VLLM_API_KEY": self.api_key}
        self.token = env[SERVER_ID_VARIABLE] = secrets.token_hex(16)
        if self.pidfile is not None:  # before the launch: a kill right after it leaves none
            write_pidfile(self.pidfile, self.token)
        pool = gpu_pool(env) if self.spec.gpus > 0 else None
        if pool is not None:
            self.gpus = GpuClaim(self.spec.gpus, pool)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus.acquire())
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(argv)}\n".encode())
            log.flush()
            try:
                self.process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # own process group: stopped as a whole
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                )
            except FileNotFoundError:
                self._release_gpus()
                if self.pidfile is not None:
                    self.pidfile.unlink(missing_ok=True)
                raise ServeError(
                    f"{self.label}: server command {argv[0]!r} not found (install vLLM: "
                    "envs/vllm.yaml, or run with --sdm conda)"
                ) from None
        if self.pidfile is not None:
            write_pidfile(self.pidfile, self.token, self.process.pid)

    def wait_healthy(self) -> None:
        """Return once GET /health answers 200; raise with the log's tail otherwise."""
        deadline = time.monotonic() + self.spec.health_timeout_s
        url = f"http://{self.spec.host}:{self.port}/health"
        while True:
            self.check_alive()
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    healthy = reply.status == 200
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                healthy = False
            if healthy:
                self.check_identity()
                return
            if time.monotonic() >= deadline:
                raise ServeError(
                    f"{self.label}: the server was not healthy after "
                    f"{self.spec.health_timeout_s:g} s ({url}); last lines of "
                    f"{self.log_path}:\n{log_tail(self.log_path, secret=self.api_key)}"
                )
            time.sleep(self.poll_s)

    def _models_status(self, with_key: bool) -> tuple[int, Any, str]:
        """Status, parsed listing and what went wrong reading GET /v1/models (untrusted: at
        most MODELS_REPLY_LIMIT bytes are read)."""
        request = urllib.request.Request(f"http://{self.spec.host}:{self.port}/v1/models")
        if with_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                body = reply.read(MODELS_REPLY_LIMIT + 1)
                status = reply.status
                promised = reply.length  # what the Content-Length still owes, if any
        except urllib.error.HTTPError as error:
            return error.code, None, ""
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
            # IncompleteRead (a short read), a connection reset, a timeout, a garbled header
            return 0, None, f"{type(error).__name__} reading the reply"
        if len(body) > MODELS_REPLY_LIMIT:
            return status, None, f"a reply over {MODELS_REPLY_LIMIT // 1024} KiB, not read"
        if promised:
            return status, None, f"a reply cut short: {len(body)} of {len(body) + promised} bytes"
        try:
            return status, json.loads(body), ""
        except (ValueError, RecursionError):
            return status, None, "a reply that is not JSON"

    def check_identity(self) -> None:
        """Fail unless the listener on our port is the server this job started (module doc)."""
        self.check_alive()
        without_status, _, _ = self._models_status(with_key=False)
        with_status, listing, problem = self._models_status(with_key=True)
        names = []
        if isinstance(listing, dict) and isinstance(listing.get("data"), list):
            names = [m.get("id") for m in listing["data"] if isinstance(m, dict)]
        self.check_alive()
        if without_status == 401 and with_status == 200 and self.spec.served_name in names:
            return
        problem = f" ({problem})" if problem else ""
        raise ServeError(
            f"{self.label}: port {self.port} on {self.spec.host} answers /health, but not as "
            f"the server this job started (GET /v1/models: {without_status} without its "
            f"per-launch key, {with_status} with it{problem}, models {names[:5]}; expected "
            f"401, 200 and {self.spec.served_name!r}). Another program listens on port "
            f"{self.port}: stop it (`ss -ltnp` names it) and rerun; no request was sent"
        )

    def reported_version(self) -> tuple[str | None, str | None]:
        """The vLLM version the server reports on GET /version, or (None, why not).

        The answer is untrusted: at most VERSION_REPLY_LIMIT bytes are read, and any failure
        is a reason to record, never an error of the job.
        """

        url = f"http://{self.spec.host}:{self.port}/version"
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                body = reply.read(VERSION_REPLY_LIMIT + 1)
        except urllib.error.HTTPError as error:
            return None, f"the server answered /version with HTTP {error.code}"
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
            return None, "the server did not answer /version with a readable HTTP reply"
        return checked_version(body)

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            taken = ""
            if self.port is not None:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                    try:
                        probe.bind((self.spec.host, self.port))
                    except OSError:
                        taken = (
                            f" (port {self.port} on {self.spec.host} is held by another "
                            "program: stop it, or rerun to get another free port)"
                        )
            raise ServeError(
                f"{self.label}: the server exited with code {self.process.returncode}{taken}; "
                f"last lines of {self.log_path}:\n{log_tail(self.log_path, secret=self.api_key)}"
            )

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL after the grace period."""
        process = self.process
        if process is None:
            self._release_gpus()
            return
        # Workers may outlive the leader: the whole group is waited for, then killed.
        kill_group(process.pid, self.stop_grace_s)  # start_new_session: pid is the group id
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        # A worker that left the group (its own session) still carries the token.
        if Path("/proc").is_dir():
            kill_token(self.token, self.stop_grace_s)
        if self.pidfile is not None and not group_members(process.pid):
            self.pidfile.unlink(missing_ok=True)
        self._release_gpus()

    def _release_gpus(self) -> None:
        if self.gpus is not None:
            self.gpus.release()

    def __enter__(self) -> ManagedServer:
        self.start()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def exit_on_signals(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into SystemExit so that `finally` blocks (server stop) run."""

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
