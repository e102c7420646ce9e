"""The transports the request engine's tests run over: `openai` (Chat Completions) and the toy
API of toy_transport.py, each against its own loopback server. A test parametrized over
`TRANSPORTS` (or taking the `wire` fixture of inference_fixtures.py) checks that a transport
gets cache, limits, retries and resume from the engine; each entry says how its API answers,
fails and refuses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from loopback_server import OPENAI_API, TOY_API, Api, LoopbackServer, Reply


@dataclass(frozen=True)
class Wire:
    name: str
    api: Api
    fields: dict  # config fields of this backend over `make_model`'s (None: left out)
    slow_down: Callable[[float], Reply]  # "retry in n seconds"
    refusal: Callable[[str], Reply]  # a permanent failure whose message is the text
    refusal_type: str
    transient: dict[str, Reply]  # named failures the next attempt may not repeat
    bad_200: dict[str, bytes] = field(default_factory=dict)  # 200s that are no answer

    def server(self, responder: Callable[[dict, int], Reply] | None = None) -> LoopbackServer:
        return LoopbackServer(responder, self.api)

    def model(self, server: LoopbackServer, **overrides: object) -> dict:
        """`make_model`'s run (its name, key, retries) on this backend."""
        from test_inference_openai import make_model  # whose module imports the fixtures

        model = make_model(server, **self.fields, **overrides)
        return {key: value for key, value in model.items() if value is not None}


BAD_200_BODIES = {
    "not_json": b"<html>502 Bad Gateway</html>",
    "invalid_utf8": b'{"choices": [{"message": {"content": "\xff\xfe"}}]}',
    "truncated": b'{"id": "x", "choices": [{"mess',
    "json_list": b"[1, 2]",
}
OPENAI = Wire(
    "openai",
    OPENAI_API,
    {"backend": "openai", "family": "qwen_vllm"},
    lambda s: (429, {"error": {"message": "slow down"}}, {"Retry-After": f"{s:g}"}),
    lambda text: (401, {"error": {"message": text}}, {}),
    "http_401",
    {
        "429": (429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}),
        "500": (500, {"error": {"message": "boom"}}, {}),
        "503": (503, {"error": {"message": "overloaded"}}, {}),
        "408": (408, {"error": {"message": "timeout"}}, {}),
        "empty_choices": (200, {"id": "x", "choices": []}, {}),
        "no_message": (200, {"id": "x", "choices": [{"index": 0}]}, {}),
    },
    BAD_200_BODIES,
)
TOY = Wire(
    "toy",
    TOY_API,
    {"backend": "toy", "family": None},
    lambda s: (420, {"calm": "down"}, {"Retry-In": f"{s:g}"}),
    lambda text: (400, {"refused": text}, {}),
    "http_400",
    {
        "420": (420, {"calm": "down"}, {"Retry-In": "0"}),
        "529": (529, {"overloaded": True}, {}),
        "500": (500, b"oops", {}),
        "no_text": (200, {"tokens": [1, 1]}, {}),
        "bad_tokens": (200, {"text": "A", "tokens": "many"}, {}),
    },
    BAD_200_BODIES,
)
TRANSPORTS = {wire.name: wire for wire in (OPENAI, TOY)}
