"""Fixtures shared by the `openai` backend tests: a loopback server and a small media store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_server import LoopbackServer

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
