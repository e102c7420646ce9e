"""A real HTTP server on loopback, for client and workflow tests: OpenAI-compatible Chat
Completions, or the toy API of tests/inference/toy_transport.py (`TOY_API`)."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dualcog.inference.budget import JITTER_GUARD_S

# status, body (a dict sent as JSON, or raw bytes sent as they are), headers
Reply = tuple[int, dict | bytes, dict]


def completion(text: str | None, **message: object) -> dict:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def request_marker(body: dict) -> str:
    """Identifies a request by its messages (two prompts may share a text, not media)."""
    return hashlib.sha1(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Api:
    """What the server speaks: the path it answers, how a 200 answer with a text looks and how
    to tell one, the prompt text of a request body, and which request a body is (`marker`)."""

    path: str
    answer: Callable[[str], dict]  # text -> the 200 payload, 11 prompt and 7 completion tokens
    is_answer: Callable[[dict], bool]
    prompt_text: Callable[[dict], str]
    marker: Callable[[dict], str]

    def answered(self, status: int, payload: dict | bytes) -> bool:
        """A complete answer: a 200 whose payload has the API's answer shape."""
        return status == 200 and isinstance(payload, dict) and self.is_answer(payload)

    def echo(self, body: dict, count: int) -> Reply:
        """200 with a text naming the prompt, so each row can be checked against its sample."""
        return 200, self.answer(f'{{"echo":"{self.prompt_text(body)}"}}'), {}


OPENAI_API = Api(
    "/v1/chat/completions",
    completion,
    lambda payload: bool(payload.get("choices")) and "message" in payload["choices"][0],
    lambda body: body["messages"][-1]["content"][0]["text"],
    request_marker,
)
echo_reply = OPENAI_API.echo  # what most openai tests' servers answer
TOY_API = Api(
    "/v1/answer",
    lambda text: {"text": text, "tokens": [11, 7]},
    lambda payload: (
        isinstance(payload.get("text"), str) and isinstance(payload.get("tokens"), list)
    ),
    lambda body: body["prompt"],
    lambda body: hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest(),
)


class LoopbackServer:
    """POST `api.path` on 127.0.0.1; `responder(body, n_for_this_prompt)` decides.

    Records every body, its headers and arrival time, and which requests (`request_marker`)
    got a complete answer
    (a 200 with a choice, fully written): `resent_after_answer` lists prompts sent again after
    that, which a client with a working cache must never do.
    """

    def __init__(
        self, responder: Callable[[dict, int], Reply] | None = None, api: Api = OPENAI_API
    ) -> None:
        self.api = api
        self.responder = responder or api.echo
        self.bodies: list[dict] = []
        self.raw_bodies: list[bytes] = []  # the bytes as they arrived (request records)
        self.headers: list[dict] = []
        self.arrivals: list[float] = []
        self.per_prompt: dict[str, int] = {}
        self.answered: set[str] = set()
        self.resent_after_answer: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                body = json.loads(raw)
                with server.lock:
                    server.arrivals.append(time.monotonic())
                    server.bodies.append(body)
                    server.raw_bodies.append(raw)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    marker = server.api.marker(body)
                    server.per_prompt[marker] = server.per_prompt.get(marker, 0) + 1
                    count = server.per_prompt[marker]
                    if marker in server.answered:
                        server.resent_after_answer.append(marker)
                if self.path != server.api.path:
                    status, payload, headers = 404, {"error": {"message": "no route"}}, {}
                else:
                    status, payload, headers = server.responder(body, count)
                if headers.get("X-Delay"):
                    threading.Event().wait(float(headers["X-Delay"]))
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        if name != "X-Delay":
                            self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client timed out and left
                if server.api.answered(status, payload) and not headers.get("X-Delay"):
                    with server.lock:
                        server.answered.add(marker)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        with self.lock:
            return len(self.bodies)

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def max_in_window(arrivals: list[float], window: float) -> int:
    """The most requests that arrived within any `window` seconds (a rate limit's check)."""
    arrivals = sorted(arrivals)
    best, start = 0, 0
    for end, when in enumerate(arrivals):
        while when - arrivals[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def assert_rate_limited(arrivals: list[float], limit: int, window: float, late_s: float = 1.0):
    """The arrivals (timestamped here, at the server) are those of a client whose budget
    clears a request every `(window + JITTER_GUARD_S) / limit` seconds (RateBudget) and whose
    requests arrive up to `late_s` after they were cleared (a loaded CPU, a first connection).

    That allows at most `1 + (window + late_s) / spacing` arrivals in one `window`, and the
    first and last arrival are at least `(n - 1) * spacing - late_s` apart: a budget not
    shared by the jobs, or twice too generous, fails the second check.
    """
    spacing = (window + JITTER_GUARD_S) / limit
    arrivals = sorted(arrivals)
    most = 1 + math.floor((window + late_s) / spacing)
    assert max_in_window(arrivals, window) <= most, (max_in_window(arrivals, window), most)
    span, least = arrivals[-1] - arrivals[0], (len(arrivals) - 1) * spacing - late_s
    assert span >= least, f"{len(arrivals)} requests in {span:.2f} s, not in {least:.2f} s"
