"""Media store access: content-addressed files turned into data URIs, memoized per process."""

from __future__ import annotations

import base64
import functools
import threading
from collections import OrderedDict
from pathlib import Path

MEDIA_EXTENSIONS = {"image": "jpg", "frames": "jpg", "video": "mp4"}
MEDIA_MIME = {"image": "image/jpeg", "frames": "image/jpeg", "video": "video/mp4"}
# Data URIs of videos are large; bound the memo by size rather than count.
MEMO_BUDGET_BYTES = 512 * 1024 * 1024


def media_path(store: Path | str, key: str, kind: str) -> Path:
    """`<store>/<key[:2]>/<key>.<ext>` (jpg for image/frames, mp4 for video)."""
    if kind not in MEDIA_EXTENSIONS:
        raise ValueError(
            f"unknown media kind {kind!r} (expected one of {sorted(MEDIA_EXTENSIONS)})"
        )
    return Path(store) / key[:2] / f"{key}.{MEDIA_EXTENSIONS[kind]}"


class _SizeBoundedMemo:
    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self.items: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> str | None:
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    def put(self, key: tuple[str, str, str], value: str) -> None:
        with self.lock:
            if key in self.items or len(value) > self.budget:
                return
            self.items[key] = value
            self.size += len(value)
            while self.size > self.budget:
                _, dropped = self.items.popitem(last=False)
                self.size -= len(dropped)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.size = 0


_MEMO = _SizeBoundedMemo(MEMO_BUDGET_BYTES)


@functools.lru_cache(maxsize=64)
def _resolved(store: str) -> str:
    # Resolving walks the path with a syscall per part: once per store, not per request.
    return str(Path(store).resolve())


def media_data_uri(store: Path | str, key: str, kind: str) -> str:
    """`data:image/jpeg;base64,...` or `data:video/mp4;base64,...` for one stored medium."""
    memo_key = (_resolved(str(store)), key, kind)
    cached = _MEMO.get(memo_key)
    if cached is not None:
        return cached
    path = media_path(store, key, kind)
    if not path.is_file():
        raise FileNotFoundError(f"media {kind} {key} not in the media store: {path}")
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    uri = f"data:{MEDIA_MIME[kind]};base64,{encoded}"
    _MEMO.put(memo_key, uri)
    return uri


class NotMemoized(LookupError):
    """A medium that `memoized_data_uri` would have to read from disk."""


def memoized_data_uri(store: Path | str, key: str, kind: str) -> str:
    """`media_data_uri` when the medium is in the memo; `NotMemoized` otherwise (no file is
    touched: safe on an event loop)."""
    cached = _MEMO.get((_resolved(str(store)), key, kind))
    if cached is None:
        raise NotMemoized(key)
    return cached


def clear_media_memo() -> None:
    _MEMO.clear()
    _resolved.cache_clear()
