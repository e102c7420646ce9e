"""A toy API backend, added as docs/extending.md's "Add an API backend" says: one transport.

Its API is not OpenAI-shaped: `POST {api_base}/answer` with `{"prompt": ...}` and the key in
`X-Toy-Key` answers `200 {"text": ..., "tokens": [prompt, completion]}`; `420` asks to slow
down (`Retry-In` seconds), `529` is overloaded, `400` refuses the prompt. Cache, limits,
budgets, retries and resume come from the engine; tests/inference parametrize their fault-mix,
spend-limit and kill -9 tests over it and the `openai` transport.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from dualcog.backends import Backend
from dualcog.inference.engine import AttemptFailed, Reply, Transport, transport_runner
from dualcog.routes import resolve_env_value


class ToySender:
    def __init__(self, url: str, key: str, pool: int, timeout_s: float) -> None:
        self.url, self.headers = url, {"X-Toy-Key": key, "Content-Type": "application/json"}
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        )

    async def send(self, body: bytes) -> Reply:
        try:
            async with self.session.post(self.url, data=body, headers=self.headers) as response:
                status, data, wait = response.status, await response.read(), response.headers
        except TimeoutError:  # aiohttp's timeouts (ServerTimeoutError is one too)
            raise AttemptFailed("timeout", f"timed out: POST {self.url}") from None
        except aiohttp.ClientError as error:
            raise AttemptFailed("connection", f"POST {self.url}: {error!r}") from None
        text = data[:300].decode("utf-8", "replace")
        if status == 420:  # its own "slow down": rate_limited is transient for every backend
            raise AttemptFailed("rate_limited", text, float(wait.get("Retry-In", 0)))
        if status != 200:  # 529 (overloaded) and 5xx are transient, 400 is not
            raise AttemptFailed(f"http_{status}", f"HTTP {status}: {text}")
        try:
            answer = json.loads(data)
            used = [int(n) for n in answer["tokens"]]
            return Reply(str(answer["text"]), prompt_tokens=used[0], completion_tokens=used[1],
                         total_tokens=sum(used))  # fmt: skip
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise AttemptFailed("bad_response", f"unusable answer ({error!r})") from None

    async def close(self) -> None:
        await self.session.close()


class ToyTransport(Transport):
    @property
    def secrets(self) -> list[str]:
        return [self.key]

    @property
    def key(self) -> str:
        return resolve_env_value(self.model.get("api_key"), "api_key") or ""

    def body(self, prompt: Mapping[str, Any]) -> bytes:
        return json.dumps({"prompt": str(prompt["user_text"])}).encode()

    async def connect(self, pool: int, timeout_s: float) -> ToySender:
        return ToySender(f"{self.model['api_base']}/answer", self.key, pool, timeout_s)


run_toy = transport_runner(ToyTransport)
# The one `register` call of the recipe is the test's: register(TOY).
TOY = Backend(
    "toy", f"{__name__}:run_toy", "a toy HTTP JSON API (tests)",
    counts_failures=True, reports_usage=True, samples=True,
)  # fmt: skip
