"""Remove API keys from any text we store or print, also when a server echoes them encoded.

A server's error body may echo the credential it got: as sent, percent-encoded, base64-encoded
(alone, as `Bearer <key>` or as `<user>:<key>` of Basic auth, standard or URL-safe alphabet,
with or without padding) or masked as its first and last characters (`sk-abcde…wxyz`). Each
form is replaced by `***`, as are key-shaped tokens that are not the configured key.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from functools import lru_cache

REDACTED = "***"
# Keys like "EMPTY" for local servers are not secret; very short ones would shred text.
MIN_SECRET_LENGTH = 6
# Token-like strings scrubbed from any error text even when they are not the configured key.
SECRET_PATTERNS = (
    re.compile(r"sk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.=]{8,}"),
)
# The middle of a masked key (`sk-abcde…wxyz`): an ellipsis, dots or stars.
_MASK_GAP = re.compile(r"…|\.{2,}|\*{2,}")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# The base64 of a key at a 3-byte boundary holds a core that does not depend on what is around
# it; shorter cores would match ordinary text.
_MIN_CORE_BYTES = 6


def _hex(byte: int) -> str:
    return "%" + "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{byte:02x}")


@lru_cache(maxsize=64)
def _percent_encoded(secret: str) -> re.Pattern[str]:
    """Each character as itself or as its `%XX` bytes (hex in any case): any URL-encoding."""
    parts = []
    for char in secret:
        alternatives = [re.escape(char), "".join(_hex(b) for b in char.encode("utf-8", "replace"))]
        if char == " ":
            alternatives.append(r"\+")
        parts.append(f"(?:{'|'.join(alternatives)})")
    return re.compile("".join(parts))


@lru_cache(maxsize=64)
def _base64(secret: str) -> re.Pattern[str]:
    """The base64 texts that give the secret away, longest first.

    The whole encoding of the key and of `Bearer <key>`; then, for each of the three offsets
    the key can start at within a longer encoded text (`<user>:<key>`), the part of the
    encoding made of the key's bytes alone.
    """
    data = secret.encode("utf-8", "replace")
    raws = [data, b"Bearer " + data]
    for skip in range(3):
        core = data[skip:]
        core = core[: len(core) - len(core) % 3]
        if len(core) >= _MIN_CORE_BYTES:
            raws.append(core)
    forms = set()
    for raw in raws:
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(raw).decode("ascii")
            forms.update((text, text.rstrip("=")))
    return re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))


_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")


def _without_base64(text: str, secret: str) -> str:
    """Each base64 token holding a form of the secret replaced whole: its first and last
    characters, which encode the key's bytes together with their neighbours', go too."""
    pieces = []
    end = 0
    for match in _base64(secret).finditer(text):
        start, stop = match.start(), match.end()
        if start < end:
            continue  # inside the token already replaced
        while start > end and text[start - 1] in _BASE64_CHARS:
            start -= 1
        while stop < len(text) and text[stop] in _BASE64_CHARS:
            stop += 1
        pieces += [text[end:start], REDACTED]
        end = stop
    return "".join([*pieces, text[end:]]) if pieces else text


def _unmask(text: str, secret: str) -> str:
    """Replace `<first chars>…<last chars>` of the secret (`…`, `...` or `***` between).

    Found from each gap outwards (linear time; a regex with a greedy head backtracks
    quadratically over a long run of key characters).
    """
    pieces = []
    end = 0
    chars = _KEY_CHARS | frozenset(secret)  # a key may hold `=`, `+`, `/` (base64 alphabet)
    for gap in _MASK_GAP.finditer(text):
        start, stop = gap.start(), gap.end()
        if start < end:
            continue
        while start > end and text[start - 1] in chars:
            start -= 1
        while stop < len(text) and text[stop] in chars:
            stop += 1
        head, tail = text[start : gap.start()], text[gap.end() : stop]
        if len(head) >= 3 and len(tail) >= 2 and secret.startswith(head) and secret.endswith(tail):
            pieces += [text[end:start], REDACTED]
            end = stop
    return "".join([*pieces, text[end:]]) if pieces else text


def scrub(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """`text` with every configured secret, in any of the forms above, and every key-shaped
    token replaced by `***`."""
    if text is None:
        return None
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_LENGTH:
            text = _unmask(text, secret)
            text = _percent_encoded(secret).sub(REDACTED, text)
            text = _without_base64(text, secret)
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text
