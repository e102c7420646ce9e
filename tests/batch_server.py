"""A real OpenAI Batch API server on loopback (files and batches), for batch-mode tests.

`POST /v1/files` (multipart upload), `GET /v1/files/<id>/content`, `POST /v1/batches`,
`GET /v1/batches/<id>` and `GET /v1/batches` (newest first, `after`/`limit`). A batch is
processed when it is first polled while `hold` is clear: each input line is answered by
`responder(body, n_for_this_prompt)` as the chat server (`loopback_server`) answers it;
200 replies go to the output file, others to the error file. `expire` (request markers)
leaves requests unrun: the batch then ends `expired` with `batch_expired` error lines.
`final_status` forces how a processed batch ends (e.g. "failed"), without results;
`retrieve_status` (e.g. 500) makes every poll fail with that status, echoing the key;
`content_failures` downloads fail with a 500 before they work again; `junk` lines are added
to every output file; `rewrite(output, errors)` changes the result lines before they are
written (duplicated or conflicting lines).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from loopback_server import Reply, echo_reply, request_marker


def _multipart(content_type: str, data: bytes) -> dict[str, bytes]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + data
    )
    parts = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        parts[str(name)] = part.get_payload(decode=True)
    return parts


class BatchServer:
    def __init__(self, responder: Callable[[dict, int], Reply] = echo_reply) -> None:
        self.responder = responder
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.order: list[str] = []  # batch ids, oldest first
        self.creates = self.uploads = self.retrieves = self.lists = 0
        self.inputs: list[list[dict]] = []  # the parsed lines of each uploaded input file
        self.per_prompt: dict[str, int] = {}
        self.hold = threading.Event()  # set: batches stay in_progress
        self.expire: set[str] = set()
        self.final_status: str | None = None
        self.errors: dict | None = None
        self.retrieve_status: int | None = None
        self.content_failures = 0
        self.junk: list[bytes] = []
        self.rewrite: Callable[[list, list], tuple[list, list]] | None = None
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, payload: dict | bytes) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.lock:
                    if self.path == "/v1/files":
                        status, payload = server.upload(self.headers["Content-Type"], data)
                    elif self.path == "/v1/batches":
                        status, payload = server.create(json.loads(data))
                    else:
                        status, payload = 404, {"error": {"message": "no route"}}
                self._send(status, payload)

            def do_GET(self) -> None:  # noqa: N802
                url = urlsplit(self.path)
                parts = url.path.strip("/").split("/")
                with server.lock:
                    if parts[:2] == ["v1", "files"] and server.content_failures:
                        server.content_failures -= 1
                        status, payload = 500, {"error": {"message": "try again"}}
                    elif parts[:2] == ["v1", "files"] and len(parts) == 4:
                        found = server.files.get(parts[2])
                        status, payload = (200, found) if found is not None else (404, {})
                    elif parts == ["v1", "batches"]:
                        status, payload = server.listing(parse_qs(url.query))
                    elif parts[:2] == ["v1", "batches"] and len(parts) == 3:
                        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                        status, payload = server.retrieve(parts[2], key)
                    else:
                        status, payload = 404, {"error": {"message": "no route"}}
                self._send(status, payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _new_file(self, data: bytes, purpose: str, name: str) -> dict:
        file_id = f"file-{next(self.ids)}"
        self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    def upload(self, content_type: str, data: bytes) -> tuple[int, dict]:
        parts = _multipart(content_type, data)
        if parts.get("purpose") != b"batch":
            return 400, {"error": {"message": "purpose must be batch"}}
        self.uploads += 1
        self.inputs.append([json.loads(line) for line in parts["file"].splitlines()])
        return 200, self._new_file(parts["file"], "batch", "input.jsonl")

    def create(self, request: dict) -> tuple[int, dict]:
        if request.get("input_file_id") not in self.files:
            return 404, {"error": {"message": "no such file"}}
        assert request["endpoint"] == "/v1/chat/completions"
        assert request["completion_window"] == "24h"
        self.creates += 1
        lines = self.files[request["input_file_id"]].splitlines()
        batch = {
            "id": f"batch_{next(self.ids)}",
            "object": "batch",
            "endpoint": request["endpoint"],
            "input_file_id": request["input_file_id"],
            "completion_window": "24h",
            "status": "in_progress",
            "created_at": int(time.time()),
            "metadata": request.get("metadata"),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        self.batches[batch["id"]] = batch
        self.order.append(batch["id"])
        return 200, batch

    def _process(self, batch: dict) -> None:
        output, errors = [], []
        for line in self.files[batch["input_file_id"]].splitlines():
            item = json.loads(line)
            assert item["method"] == "POST" and item["url"] == "/v1/chat/completions"
            marker = request_marker(item["body"])
            if marker in self.expire:
                errors.append({
                    "id": f"req_{next(self.ids)}", "custom_id": item["custom_id"],
                    "response": None,
                    "error": {"code": "batch_expired", "message": "not run in the window"},
                })  # fmt: skip
                continue
            self.per_prompt[marker] = self.per_prompt.get(marker, 0) + 1
            status, payload, _ = self.responder(item["body"], self.per_prompt[marker])
            result = {
                "id": f"req_{next(self.ids)}",
                "custom_id": item["custom_id"],
                "response": {"status_code": status, "request_id": "r", "body": payload},
                "error": None,
            }
            (output if status == 200 else errors).append(result)
        if self.rewrite is not None:
            output, errors = self.rewrite(output, errors)
        counts = batch["request_counts"]
        counts["completed"], counts["failed"] = len(output), len(errors)
        for field, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                data = "".join(json.dumps(line) + "\n" for line in lines).encode()
                if field == "output_file_id":
                    data += b"".join(junk + b"\n" for junk in self.junk)
                batch[field] = self._new_file(data, "batch_output", "out.jsonl")["id"]
        batch["status"] = "expired" if self.expire else "completed"
        if self.final_status is not None:
            batch["status"] = self.final_status
            batch.pop("output_file_id", None)
            batch.pop("error_file_id", None)
            counts["completed"] = counts["failed"] = 0
            batch["errors"] = self.errors

    def retrieve(self, batch_id: str, key: str) -> tuple[int, dict]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, {"error": {"message": "no such batch"}}
        self.retrieves += 1
        if self.retrieve_status is not None:
            return self.retrieve_status, {"error": {"message": f"poll refused, key {key}"}}
        if batch["status"] == "in_progress" and not self.hold.is_set():
            self._process(batch)
        return 200, batch

    def listing(self, query: dict[str, list[str]]) -> tuple[int, dict]:
        self.lists += 1
        newest = list(reversed(self.order))
        after = query.get("after", [None])[0]
        if after in newest:
            newest = newest[newest.index(after) + 1 :]
        limit = int(query.get("limit", ["20"])[0])
        page = [self.batches[batch_id] for batch_id in newest[:limit]]
        return 200, {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(newest) > limit,
        }

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> BatchServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
