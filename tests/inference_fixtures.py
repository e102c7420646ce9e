"""Fixtures shared by the inference tests: a loopback server and a small media store; the toy API
backend registered, and each transport of the request engine in turn (`wire`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_server import LoopbackServer
from transports import TRANSPORTS, Wire

from dualcog.inference import media_path

IMAGE_BYTES = b"\xff\xd8\xff\xe0fake-jpeg"
VIDEO_BYTES = b"\x00\x00\x00\x18ftypmp42fake"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


@pytest.fixture
def media_store(tmp_path: Path) -> Path:
    """One image and one video under the keys `make_prompts` refers to."""
    store = tmp_path / "media"
    for key, kind, data in (
        ("aa" + "1" * 62, "image", IMAGE_BYTES),
        ("bb" + "2" * 62, "video", VIDEO_BYTES),
    ):
        path = media_path(store, key, kind)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return store


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy API backend (tests/inference/toy_transport.py) in the registry, for this test."""
    from toy_transport import TOY

    from dualcog import backends

    monkeypatch.setattr(backends, "REGISTRY", {**backends.REGISTRY})
    backends.register(TOY)


@pytest.fixture(params=list(TRANSPORTS))
def wire(request: pytest.FixtureRequest, toy_registered: None) -> Wire:
    """Each transport in turn: `openai`, then the toy API (tests/inference/transports.py)."""
    return TRANSPORTS[request.param]


@pytest.fixture
def wire_server(wire: Wire) -> Iterator[LoopbackServer]:
    """A loopback server of `wire`'s API, answering every prompt with its echo."""
    with wire.server() as running:
        yield running
