"""Throughput of the `openai` backend at high concurrency against a loopback server.

The server runs in its own process (asyncio, HTTP/1.1 keep-alive) and answers every request
after `--latency` seconds, so `concurrency / latency` requests/s is the ceiling no client can
pass. Side by side in one run, on the same prompts (two real JPEGs per request, as image tasks
send), each with its wall-clock rate and its own process's CPU time per request:

- `ours`: `run_model` as a job runs it (request bodies, budgets, retries bookkeeping, response
  cache written by the background writer, the responses frame);
- `wire`: the same wire path alone (`dualcog.inference.client.ChatClient`: our body posted
  with the SDK's `DefaultAioHttpClient`, our decoding) in a bare asyncio loop;
- `sdk_typed`: `AsyncOpenAI.chat.completions.create` (the SDK's typed request transformation
  and pydantic reply), the path the engine does not use;
- `minimal_aiohttp`: a minimal aiohttp client (one session, `json` in and out), the yardstick
  for the CPU per request;
- `minimal`: a minimal asyncio client (raw keep-alive sockets, `json` in and out).

All clients must return the same answer texts (checked). `server_cpu_ms_per_req` is the
loopback server's own CPU per request during each client's run: where `1000 /` it is below
the ceiling (on one core, shared with the client), the server, not the client, bounds the
rate. A rate limit scenario (`--rpm`) checks that the budget spaces requests at the limit.

    python benchmarks/inference_throughput.py [--requests 1280] [--latency 0.2] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import multiprocessing
import os
import random
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
from PIL import Image

from dualcog import schemas
from dualcog.inference import media_data_uri, media_path, run_model
from dualcog.inference.request import encode_request_body, request_body, request_settings

IMAGE_KEYS = ["ab" + "0" * 62, "cd" + "1" * 62]


# --- the server (own process) -------------------------------------------------------------


def _completion(text: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


async def _serve(latency: float, port_out: multiprocessing.Queue) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = json.loads(await reader.readexactly(length))
                await asyncio.sleep(latency)
                text = json.dumps({"echo": body["messages"][-1]["content"][0]["text"]})
                payload = _completion(text)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port_out.put(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def _server_main(latency: float, port_out: multiprocessing.Queue) -> None:
    asyncio.run(_serve(latency, port_out))


# --- the inputs --------------------------------------------------------------------------


def write_images(store: Path) -> None:
    rng = random.Random(0)
    for key in IMAGE_KEYS:
        image = Image.new("RGB", (640, 480))
        image.putdata(
            [
                (x // 3 + rng.randrange(40), y // 2 + rng.randrange(40), (x + y) % 256)
                for y in range(480)
                for x in range(640)
            ]
        )
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=80)
        path = media_path(store, key, "image")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(buffer.getvalue())


def make_prompts(count: int, tag: str) -> pd.DataFrame:
    rows = [
        {
            "sample_id": f"{tag}_{i:05d}",
            "task": "self_position",
            "request_key": f"{tag}_{i:05d}",
            "system_text": "You are a UAV.",
            "user_text": f"prompt {tag} {i}",
            "media_keys": IMAGE_KEYS,
            "media_kinds": ["image", "image"],
            "offered_option_ids": ["A", "B", "C", "D"],
        }
        for i in range(count)
    ]
    return schemas.to_table(pd.DataFrame(rows), schemas.PROMPTS).to_pandas()


def model_config(api_base: str, concurrency: int, **extra: object) -> dict:
    return {
        "name": "bench",
        "backend": "openai",
        "api_base": api_base,
        "api_key": "EMPTY",
        "concurrency": concurrency,
        "max_retries": 0,
        "timeout": 60,
        **extra,
    }


# --- the clients -------------------------------------------------------------------------


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of another process (Linux `/proc`); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(label: str, requests: int, fn, server_pid: int) -> tuple[dict, list[str]]:
    server_cpu = process_cpu_s(server_pid)
    cpu, wall = time.process_time(), time.perf_counter()
    texts = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server_after = process_cpu_s(server_pid)
    if len(texts) != requests:
        raise RuntimeError(f"{label}: {len(texts)} answers for {requests} requests")
    row = {
        "client": label,
        "requests": requests,
        "wall_s": round(wall, 2),
        "req_s": round(requests / wall, 1),
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_req": round(cpu / requests * 1000, 2),
    }
    if server_cpu is not None and server_after is not None:
        # The loopback server's own CPU: what it needs per request bounds the rate it can
        # serve on this machine, whatever the client.
        row["server_cpu_ms_per_req"] = round((server_after - server_cpu) / requests * 1000, 2)
    return row, texts


def run_ours(model: dict, prompts: pd.DataFrame, work: Path, tag: str) -> list[str]:
    table = pa.Table.from_pandas(prompts, preserve_index=False)
    out = run_model(model, table, None, work / "media", work / f"cache-{tag}")
    failed = sum(status != "ok" for status in out["status"].to_pylist())
    if failed:
        raise RuntimeError(f"{failed} requests failed")
    return out["raw_text"].to_pylist()


def run_wire(model: dict, prompts: pd.DataFrame, store: Path, concurrency: int) -> list[str]:
    from dualcog.inference.client import ChatClient
    from dualcog.inference.engine import send_settings

    settings = request_settings(model)
    rows = prompts.to_dict("records")

    async def main() -> list[str]:
        timeout_s = send_settings(model).timeout_s
        client = ChatClient(settings.api_base, settings.api_key, timeout_s, concurrency)
        texts: list[str] = [""] * len(rows)
        queue = iter(range(len(rows)))

        async def worker() -> None:
            for i in queue:
                body = encode_request_body(request_body(rows[i], settings, store))
                texts[i] = (await client.send(body)).content

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        await client.close()
        return texts

    return asyncio.run(main())


def run_sdk_typed(model: dict, prompts: pd.DataFrame, store: Path, concurrency: int) -> list[str]:
    import httpx2
    import openai

    settings = request_settings(model)
    rows = prompts.to_dict("records")

    async def main() -> list[str]:
        client = openai.AsyncOpenAI(
            api_key="EMPTY",
            base_url=settings.api_base,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(
                limits=httpx2.Limits(
                    max_connections=concurrency, max_keepalive_connections=concurrency
                )
            ),
        )
        texts: list[str] = [""] * len(rows)
        queue = iter(range(len(rows)))

        async def worker() -> None:
            for i in queue:
                body = request_body(rows[i], settings, store)
                completion = await client.chat.completions.create(**body)
                texts[i] = completion.choices[0].message.content

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        await client.close()
        return texts

    return asyncio.run(main())


def minimal_body(store: Path, row: dict) -> bytes:
    """The request body the minimal clients send: the same JSON as ours, built plainly."""
    content = [{"type": "text", "text": row["user_text"]}]
    for key in row["media_keys"]:
        uri = media_data_uri(store, key, "image")
        content.append({"type": "image_url", "image_url": {"url": uri}})
    messages = [
        {"role": "system", "content": row["system_text"]},
        {"role": "user", "content": content},
    ]
    return json.dumps(
        {"model": "bench", "messages": messages, "temperature": 0.0, "max_tokens": 2048}
    ).encode()


def run_minimal_aiohttp(
    port: int, prompts: pd.DataFrame, store: Path, concurrency: int
) -> list[str]:
    """A minimal aiohttp client: one `ClientSession`, a pool of `concurrency` connections,
    the same JSON body per request, `json.loads` of the reply."""
    import aiohttp

    rows = prompts.to_dict("records")
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    headers = {"Authorization": "Bearer EMPTY", "Content-Type": "application/json"}

    async def main() -> list[str]:
        texts: list[str] = [""] * len(rows)
        queue = iter(range(len(rows)))
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def worker() -> None:
                for i in queue:
                    body = minimal_body(store, rows[i])
                    async with session.post(url, data=body, headers=headers) as response:
                        reply = json.loads(await response.read())
                    texts[i] = reply["choices"][0]["message"]["content"]

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return texts

    return asyncio.run(main())


def run_minimal(port: int, prompts: pd.DataFrame, store: Path, concurrency: int) -> list[str]:
    """Keep-alive sockets, the same JSON body per request, `json.loads` of the reply."""
    rows = prompts.to_dict("records")

    async def main() -> list[str]:
        texts: list[str] = [""] * len(rows)
        queue = iter(range(len(rows)))

        async def worker() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for i in queue:
                body = minimal_body(store, rows[i])
                writer.write(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Authorization: Bearer EMPTY\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                )
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                reply = json.loads(await reader.readexactly(length))
                texts[i] = reply["choices"][0]["message"]["content"]
            writer.close()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return texts

    return asyncio.run(main())


def rate_check(api_base: str, work: Path, rpm: float, requests: int) -> dict:
    model = model_config(api_base, 8, rpm_limit=rpm, name="bench-rpm")
    prompts = make_prompts(requests, "rpm")
    started = time.perf_counter()
    run_ours(model, prompts, work, "rpm")
    elapsed = time.perf_counter() - started
    # n requests at rate r need (n - 1) / r seconds after the first.
    bound = rpm / 60.0
    achieved = (requests - 1) / elapsed
    return {
        "rpm_limit": rpm,
        "requests": requests,
        "limit_req_s": round(bound, 2),
        "achieved_req_s": round(achieved, 2),
        "achieved/limit": round(achieved / bound, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1280)
    parser.add_argument("--latency", type=float, default=0.2, help="server latency, seconds")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rpm", type=float, default=1200, help="rate-limit scenario (0: skip)")
    args = parser.parse_args()
    if not 1 <= args.requests <= 20000 or not 0 < args.latency <= 2.0:
        parser.error("--requests must be in 1..20000 and --latency in (0, 2]")
    ports: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=_server_main, args=(args.latency, ports), daemon=True)
    server.start()
    port = ports.get(timeout=30)
    api_base = f"http://127.0.0.1:{port}/v1"
    ceiling = args.concurrency / args.latency
    load_before = os.getloadavg()[0]
    results, answers = [], {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            store = work / "media"
            write_images(store)
            image_kb = sum(media_path(store, k, "image").stat().st_size for k in IMAGE_KEYS) / 1024
            prompts = make_prompts(args.requests, "t")
            model = model_config(api_base, args.concurrency)
            c = args.concurrency
            media_data_uri(store, IMAGE_KEYS[0], "image")  # every client reads media warm
            media_data_uri(store, IMAGE_KEYS[1], "image")
            # Each client (a function of its prompts and a tag) is timed at its steady state:
            # a job pays its imports and first connections once, so every client first runs
            # one untimed round of `c` other requests (the first also warms the server).
            clients = [
                ("ours", lambda p, tag: run_ours(model, p, work, tag)),
                ("wire", lambda p, tag: run_wire(model, p, store, c)),
                ("sdk_typed", lambda p, tag: run_sdk_typed(model, p, store, c)),
                ("minimal_aiohttp", lambda p, tag: run_minimal_aiohttp(port, p, store, c)),
                ("minimal", lambda p, tag: run_minimal(port, p, store, c)),
            ]
            for label, client in clients:
                client(make_prompts(c, f"warm-{label}"), f"warm-{label}")
                fn = lambda client=client, label=label: client(prompts, label)  # noqa: E731
                row, answers[label] = measure(label, args.requests, fn, server.pid)
                row["of_ceiling"] = round(row["req_s"] / ceiling, 3)
                results.append(row)
            reference = answers["minimal"]
            for label, texts in answers.items():
                if texts != reference:
                    raise AssertionError(f"{label} answers differ from the minimal client's")
            rate = rate_check(api_base, work, args.rpm, 60) if args.rpm else None
    finally:
        server.terminate()
        server.join()
    print(
        f"loopback server latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}: "
        f"ceiling {ceiling:.0f} req/s; {args.requests} requests of 2 JPEGs "
        f"({image_kb:.0f} KiB, {image_kb * 4 / 3:.0f} KiB as base64) per client; "
        "answers identical across clients; "
        f"1-min load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    print(pd.DataFrame(results).to_string(index=False))
    if rate:
        print("\nrate limit (concurrency 8):")
        print(pd.DataFrame([rate]).to_string(index=False))


if __name__ == "__main__":
    main()
