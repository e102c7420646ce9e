"""A stand-in for `vllm serve`, started by the workflow exactly like the real one.

    python fake_vllm.py MODEL --host H --port P --served-model-name NAME [options]

Serves GET /health, GET /version, GET /v1/models and POST /v1/chat/completions (a valid answer
for image and video tasks). --version-answer picks the /version answer: `ok` (vLLM's
{"version": FAKE_VERSION}) or a hostile one (`html`, `huge`, `not-json`, `not-text`, `absent`).
--requests-file gets one JSON line per chat request: its model, the SHA-256 of each image block's
bytes, in order, and the frame timestamps its text states.
Like vLLM, `--api-key` or else VLLM_API_KEY makes every /v1/ path answer 401 without
`Authorization: Bearer <key>`. It appends "start <pid> <child pid> <model>" to --starts-file
and starts one worker process in the server's process group (as vLLM does), so tests can
check that both are gone.
With --ignore-term both the server and its worker ignore SIGTERM. With --leader-ignores-term
only the server does, and it exits when its worker exits (as vLLM's API server does when its
engine dies): it outlives a job killed with SIGKILL (its PDEATHSIG is SIGTERM, and no signal
reaches the worker), and stops as soon as a SIGTERM to its group ends the worker.
--hold-after N answers the first N chat requests and never the later ones: a test that stops
the job once it has seen an answer finds it still running, however late it looks.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IMAGE_ANSWER = '{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.1,0.6,0.6]}'
BEHAVIOR_ANSWER = '{"answers":[{"option_id":"A","intervals_sec":[[0.0,1.0]]}]}'
VISIBILITY_ANSWER = '{"visible_count":1,"visible_intervals_sec":[[0.0,1.0]]}'
FAKE_VERSION = "0.11.0+fake"
HOSTILE_VERSION = '<script>alert("v")</script><b>0.1'
VERSION_ANSWERS = {
    "ok": json.dumps({"version": FAKE_VERSION}).encode(),
    "html": json.dumps({"version": HOSTILE_VERSION}).encode(),
    "huge": json.dumps({"version": "9" * 2_000_000}).encode(),
    "not-json": b"<html><body>version <i>unknown</i></body></html>",
    "not-text": json.dumps({"version": {"major": 0}}).encode(),
}
# The note the rendered prompt ends with in frames mode (dualcog.prompts.render.frame_note).
FRAME_NOTE = re.compile(r"at these timestamps: ([\d.s, ]+?)\. Give intervals")


def record_request(path: str, body: dict) -> None:
    """What the request showed the model: image blocks and the frame timestamps in its text."""
    content = body["messages"][-1]["content"]
    if body["messages"][-1]["role"] != "user":
        content = body["messages"][-2]["content"]
    text = " ".join(b["text"] for b in content if b.get("type") == "text")
    note = FRAME_NOTE.search(text)
    stamps = [float(t.rstrip("s")) for t in note.group(1).split(", ")] if note else []
    images = [
        hashlib.sha256(base64.b64decode(b["image_url"]["url"].split(",", 1)[1])).hexdigest()
        for b in content
        if b.get("type") == "image_url"
    ]
    record = {"model": body["model"], "images": images, "timestamps": stamps}
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--starts-file", required=True)
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--never-healthy", action="store_true")
    parser.add_argument("--reply-delay", type=float, default=0.0)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--leader-ignores-term", action="store_true")
    parser.add_argument("--hold-after", type=int)
    parser.add_argument("--api-key", default=os.environ.get("VLLM_API_KEY"))
    parser.add_argument("--version-answer", default="ok", choices=[*VERSION_ANSWERS, "absent"])
    parser.add_argument("--requests-file")
    parser.add_argument("--chat-template")  # accepted like vLLM's, not applied
    args = parser.parse_args()

    worker = "import signal, time\n"
    if args.ignore_term:
        worker += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    child = subprocess.Popen([sys.executable, "-c", worker + "time.sleep(3600)"])
    with open(args.starts_file, "a", encoding="utf-8") as handle:
        handle.write(f"start {os.getpid()} {child.pid} {args.model}\n")
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif args.leader_ignores_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        threading.Thread(target=lambda: (child.wait(), os._exit(0)), daemon=True).start()
    print(f"loading {args.model} as {args.served_model_name}", flush=True)
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}", flush=True)
    time.sleep(args.startup_delay)
    ready = not args.never_healthy

    print_lock = threading.Lock()
    answered = [0]  # chat requests answered (under print_lock)

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            """vLLM's rule: with a key, /v1/ paths need `Authorization: Bearer <key>`."""
            if not args.api_key or not self.path.startswith("/v1"):
                return False
            if self.headers.get("Authorization") == f"Bearer {args.api_key}":
                return False
            self._send(401, {"error": "Unauthorized"})
            return True

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if self._refused():
                return
            if self.path == "/v1/models":
                model = {"id": args.served_model_name, "object": "model", "root": args.model}
                self._send(200, {"object": "list", "data": [model]})
            elif self.path == "/health":
                self._send(200 if ready else 503, {})
            elif self.path == "/version" and args.version_answer != "absent":
                data = VERSION_ANSWERS[args.version_answer]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._send(404, {})

        def do_POST(self) -> None:  # noqa: N802
            if self._refused():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if body.get("model") != args.served_model_name:
                self._send(404, {"error": {"message": f"no model {body.get('model')}"}})
                return
            time.sleep(args.reply_delay)
            system = body["messages"][0]["content"]
            if "visible_count" in system:
                text = VISIBILITY_ANSWER
            elif '"answers"' in system:
                text = BEHAVIOR_ANSWER
            else:
                text = IMAGE_ANSWER
            with print_lock:  # one whole line per request, even from concurrent threads
                held = args.hold_after is not None and answered[0] >= args.hold_after
                answered[0] += not held
            if held:
                threading.Event().wait()  # until the process is stopped
            with print_lock:
                print("request", body["model"], flush=True)
                if args.requests_file:
                    record_request(args.requests_file, body)
            message = {"role": "assistant", "content": text}
            usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [choice],
                    "usage": usage,
                },
            )

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"serving on {args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
