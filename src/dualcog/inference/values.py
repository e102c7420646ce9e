"""Plain values: Parquet-read cells as Python values, their canonical JSON, and text that
UTF-8 files can hold."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any


def as_list(value: Any) -> list:
    """A list/tuple/numpy array (or None) from a Parquet-read cell as a plain list."""
    if value is None:
        return []
    if isinstance(value, float) and math.isnan(value):
        return []
    np = sys.modules.get("numpy")  # a numpy value exists only once numpy is loaded
    if np is not None and isinstance(value, np.ndarray):
        return value.tolist()
    return list(value)


def to_plain(value: Any) -> Any:
    """Nested numpy arrays/scalars -> plain Python lists/numbers (JSON-serialisable)."""
    np = sys.modules.get("numpy")  # a numpy value exists only once numpy is loaded
    if np is not None and isinstance(value, np.ndarray):
        return [to_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if np is not None and isinstance(value, np.generic):
        return value.item()
    return value


def canonical_json(value: Any) -> str:
    """Compact JSON as in docs/protocol.md §2's examples."""
    return json.dumps(to_plain(value), separators=(",", ":"), ensure_ascii=False)


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, float) and math.isnan(value)


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_lone_surrogates(text: str | None) -> str | None:
    """Write each lone surrogate as its JSON escape (`\\ud800`), so the text is valid UTF-8.

    A server may return any JSON string, including a half of a surrogate pair, which cannot be
    written to Parquet or UTF-8 files. The escape is the text the server sent, so nothing is
    lost and a JSON answer that held it still parses.
    """
    if text is None or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
