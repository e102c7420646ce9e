"""Throughput of the `openai` backend against a loopback server with artificial latency.

Measures requests/s achieved by `run_model` (rate limiter, thread pool, cache writes included)
and compares it with the bound each configuration sets: `rpm_limit / 60` and
`concurrency / latency`. Loopback only, bounded in count and time (about 20 s by default).

    python benchmarks/inference_throughput.py [--latency 0.05] [--requests 40]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd

from dualcog import schemas
from dualcog.inference import media_path, run_model

IMAGE_KEY = "ab" + "0" * 62


class LatencyServer:
    """POST /v1/chat/completions answering after `latency` seconds; records arrival times."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.lock:
                    server.arrivals.append(time.monotonic())
                time.sleep(server.latency)
                body = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "{}"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def make_prompts(count: int, tag: str) -> pd.DataFrame:
    rows = [
        {
            "sample_id": f"{tag}_{i:04d}",
            "task": "self_position",
            "request_key": f"{tag}_{i:04d}",
            "system_text": "system",
            "user_text": f"prompt {i}",
            "media_keys": [IMAGE_KEY],
            "media_kinds": ["image"],
            "offered_option_ids": ["A", "B", "C", "D"],
        }
        for i in range(count)
    ]
    return schemas.to_table(pd.DataFrame(rows), schemas.PROMPTS).to_pandas()


def measure(
    server: LatencyServer,
    work: Path,
    tag: str,
    requests: int,
    concurrency: int,
    rpm_limit: float | None,
) -> dict[str, object]:
    model = {
        "name": f"bench-{tag}",
        "backend": "openai",
        "api_base": server.api_base,
        "api_key": "EMPTY",
        "concurrency": concurrency,
        "max_retries": 0,
    }
    if rpm_limit:
        model["rpm_limit"] = rpm_limit
    prompts = make_prompts(requests, tag)
    with server.lock:
        server.arrivals.clear()
    started = time.monotonic()
    out = run_model(model, prompts, pd.DataFrame(), work / "media", work / "cache")
    elapsed = time.monotonic() - started
    with server.lock:
        arrivals = sorted(server.arrivals)
    if (out.status != "ok").any():
        raise RuntimeError(f"{tag}: {int((out.status != 'ok').sum())} requests failed")
    rpm_bound = rpm_limit / 60.0 if rpm_limit else float("inf")
    concurrency_bound = concurrency / server.latency
    bound = min(rpm_bound, concurrency_bound)
    # Arrival rate at the server: (n - 1) gaps between first and last request.
    span = arrivals[-1] - arrivals[0]
    arrival_rate = (len(arrivals) - 1) / span if span > 0 else float("inf")
    end_to_end = requests / elapsed
    return {
        "scenario": tag,
        "requests": requests,
        "concurrency": concurrency,
        "rpm_limit": rpm_limit or "-",
        "bound_by": "rpm" if rpm_bound <= concurrency_bound else "concurrency",
        "limit_req_s": round(bound, 2),
        "arrival_req_s": round(arrival_rate, 2),
        "end_to_end_req_s": round(end_to_end, 2),
        "arrival/limit": round(arrival_rate / bound, 3),
        "end_to_end/limit": round(end_to_end / bound, 3),
        "seconds": round(elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="server latency, seconds")
    parser.add_argument("--requests", type=int, default=40, help="requests per scenario")
    args = parser.parse_args()
    if not 1 <= args.requests <= 500 or not 0 < args.latency <= 1.0:
        parser.error("--requests must be in 1..500 and --latency in (0, 1]")
    scenarios = [
        # (tag, concurrency, rpm_limit)
        ("rpm600_c8", 8, 600),
        ("rpm1200_c8", 8, 1200),
        ("rpm300_c4", 4, 300),
        ("c1_nolimit", 1, None),
        ("c4_nolimit", 4, None),
        ("c8_nolimit", 8, None),
        ("rpm600_c1", 1, 600),  # concurrency-bound when 1/latency < 10 req/s
    ]
    server = LatencyServer(args.latency)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        image = media_path(work / "media", IMAGE_KEY, "image")
        image.parent.mkdir(parents=True)
        image.write_bytes(b"\xff\xd8" + bytes(30_000))  # the size of a 640x480 JPEG
        try:
            for tag, concurrency, rpm in scenarios:
                results.append(measure(server, work, tag, args.requests, concurrency, rpm))
        finally:
            server.close()
    print(f"loopback server latency {args.latency * 1000:.0f} ms, {args.requests} requests each")
    print(pd.DataFrame(results).to_string(index=False))


if __name__ == "__main__":
    main()
