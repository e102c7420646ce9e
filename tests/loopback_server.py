"""A real OpenAI-compatible HTTP server on loopback, for client and workflow tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Reply = tuple[int, dict, dict]  # status, JSON body, headers


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


def echo_reply(body: dict, count: int) -> Reply:
    """200 with a text naming the prompt, so each row can be checked against its sample."""
    user_text = body["messages"][-1]["content"][0]["text"]
    return 200, completion(f'{{"echo":"{user_text}"}}'), {}


class LoopbackServer:
    """POST /v1/chat/completions on 127.0.0.1; `responder(body, n_for_this_prompt)` decides."""

    def __init__(self, responder: Callable[[dict, int], Reply] = echo_reply) -> None:
        self.responder = responder
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.per_prompt: dict[str, int] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                with server.lock:
                    server.bodies.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    prompt = body["messages"][-1]["content"]
                    marker = prompt[0]["text"] if isinstance(prompt, list) else str(prompt)
                    server.per_prompt[marker] = server.per_prompt.get(marker, 0) + 1
                    count = server.per_prompt[marker]
                if self.path != "/v1/chat/completions":
                    status, payload, headers = 404, {"error": {"message": "no route"}}, {}
                else:
                    status, payload, headers = server.responder(body, count)
                if headers.get("X-Delay"):
                    threading.Event().wait(float(headers["X-Delay"]))
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

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
