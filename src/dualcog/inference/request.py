"""Request bodies for OpenAI-compatible Chat Completions, built from a model config.

Requests follow the upstream request format: one system message, one user message holding the
text and then the media blocks; the run name's mode suffix (`-Instant`, `-Thinking`,
`-Reasoning`) becomes the provider family's switch in the body. Nothing here talks to a
server, so building and inspecting bodies needs no client library.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dualcog.inference.media import media_data_uri
from dualcog.inference.values import as_list, is_missing
from dualcog.routes import resolve_env_value, route_key_of
from dualcog.switches import (
    CONFIG_FAMILIES,
    DEFAULT_THINKING_BUDGET,
    QWEN_SIZE_LIMITED,
    Switch,
    SwitchError,
    effective_family,
    internvl_system_text,
    mode_switch,
    split_mode,
)
from dualcog.tasks import VIDEO_TASKS

# PROTOCOL §11.1: 0.2 unless configured (a configured 0 is sent as 0); 2,048 output tokens
# unless configured (`max_tokens: null` sends none).
DEFAULT_TEMPERATURE = 0.2
DEFAULT_MAX_TOKENS = 2048


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` wins; nested dicts are merged key by key."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass(frozen=True)
class RequestSettings:
    """Everything about a request's body and endpoint that comes from the model config (how
    requests are sent, timed and retried: `dualcog.inference.engine.SendSettings`)."""

    run_name: str
    base_name: str  # the route key: what the family rules and the size limit look at
    request_model: str
    mode: str | None
    family: str | None
    switch: Switch
    extra_body: dict[str, Any]
    system_prefix: str | None
    temperature: float
    max_tokens: int | None
    api_base: str | None
    api_key: str = field(repr=False)

    @property
    def assistant_prefill(self) -> str | None:
        return self.switch.prefill

    @property
    def size_limited(self) -> bool:
        """Whether videos over the limit are re-encoded before sending (PROTOCOL §11.4)."""
        return QWEN_SIZE_LIMITED in self.base_name.lower()

    def record(self) -> dict[str, Any]:
        """The settings that shaped every request of this run (PROTOCOL §11.5)."""
        return {
            "request_temperature": self.temperature,
            "request_max_tokens": self.max_tokens,
            "request_switch": json.dumps(
                {"mode": self.mode, "family": self.family, **self.switch.describe()},
                sort_keys=True,
                separators=(",", ":"),
            ),
            "request_prefill": self.switch.prefill,
        }


def request_settings(model: Mapping[str, Any]) -> RequestSettings:
    """Resolve a model config (mode suffix, family switch, `${VAR}` values, defaults).

    The family is the one configuration decided (`dualcog.routes.decide_family`): the authors'
    rules on the base name, else the configured one. Raises ValueError naming the model for a
    switch its route cannot send and for an InternVL Thinking run without its prefix."""
    run_name = str(model["name"])
    mode = split_mode(run_name)[1]
    base_name = route_key_of(model)
    override = bool(model.get("override_family"))
    family, by_name = effective_family(base_name, model.get("family"), override)
    if family is not None and family not in CONFIG_FAMILIES:
        raise ValueError(
            f"model {run_name!r}: unknown family {family!r} (one of {', '.join(CONFIG_FAMILIES)})"
        )
    if mode is not None and family is None:
        raise ValueError(
            f"model {run_name!r} has mode suffix -{mode} but no `family` to say how to "
            f"switch it (one of {', '.join(CONFIG_FAMILIES)})"
        )
    effort = model.get("reasoning_effort") or ("low" if model.get("reasoning_only") else None)
    try:
        switch = mode_switch(
            base_name,
            family,
            mode,
            by_name=by_name,
            thinking_budget=model.get("thinking_budget", DEFAULT_THINKING_BUDGET),
            effort=effort,
        )
    except SwitchError as error:
        raise ValueError(f"model {run_name!r}: {error}") from None
    system_prefix = None
    if switch.system_prefix:
        system_prefix = model.get("thinking_system_prefix")
        if not system_prefix:
            raise ValueError(
                f"model {run_name!r}: InternVL thinking needs `thinking_system_prefix` "
                "(the think-protocol text put before the system prompt)"
            )
    user_body = model.get("extra_body") or {}
    if not isinstance(user_body, Mapping):
        raise ValueError(f"model {run_name!r}: extra_body must be a mapping")
    max_tokens = model.get("max_tokens", DEFAULT_MAX_TOKENS)
    temperature = model.get("temperature")
    api_key = resolve_env_value(model.get("api_key", model.get("key")), "api_key") or "EMPTY"
    api_base = resolve_env_value(model.get("api_base", model.get("base_url")), "api_base")
    return RequestSettings(
        run_name=run_name,
        base_name=base_name,
        request_model=str(model.get("request_model") or base_name),
        mode=mode,
        family=family,
        switch=switch,
        extra_body=deep_merge(switch.body, user_body),
        system_prefix=str(system_prefix) if system_prefix else None,
        temperature=DEFAULT_TEMPERATURE if temperature is None else float(temperature),
        max_tokens=None if max_tokens is None else int(max_tokens),
        api_base=api_base,
        api_key=api_key,
    )


MediaReader = Callable[[Path, str, str], str]  # (store, key, kind) -> data URI


def build_messages(
    prompt: Mapping[str, Any],
    settings: RequestSettings,
    media_store: Path,
    data_uri: MediaReader = media_data_uri,
) -> list[dict[str, Any]]:
    """System message, then a user message: text block followed by media blocks in order."""
    keys = [str(k) for k in as_list(prompt.get("media_keys"))]
    kinds = [str(k) for k in as_list(prompt.get("media_kinds"))]
    if len(keys) != len(kinds):
        raise ValueError(
            f"sample {prompt['sample_id']}: media_keys and media_kinds differ in length"
        )
    user_text = prompt.get("user_text")
    if is_missing(user_text):
        raise ValueError(f"sample {prompt['sample_id']}: no user_text to send")
    content: list[dict[str, Any]] = [{"type": "text", "text": str(user_text)}]
    for key, kind in zip(keys, kinds, strict=True):
        uri = data_uri(media_store, key, kind)
        if kind == "video":
            content.append({"type": "video_url", "video_url": {"url": uri}})
        else:
            content.append({"type": "image_url", "image_url": {"url": uri}})
    messages: list[dict[str, Any]] = []
    system_text = prompt.get("system_text")
    # Parquet-read string columns hold NaN (not None) for a missing system prompt.
    system_text = None if is_missing(system_text) else str(system_text)
    if system_text is not None and prompt["task"] in VIDEO_TASKS:
        # PROTOCOL §11.1: the generator stores it with a trailing newline, stripped when sent.
        system_text = system_text.strip()
    if settings.system_prefix:
        block = {"type": "text", "text": internvl_system_text(settings.system_prefix, system_text)}
        messages.append({"role": "system", "content": [block]})
    elif system_text is not None:
        messages.append({"role": "system", "content": system_text})
    messages.append({"role": "user", "content": content})
    if settings.assistant_prefill is not None:
        messages.append({"role": "assistant", "content": settings.assistant_prefill})
    return messages


def request_body(
    prompt: Mapping[str, Any],
    settings: RequestSettings,
    media_store: Path,
    data_uri: MediaReader = media_data_uri,
) -> dict[str, Any]:
    """The JSON body sent for one prompt: model, messages, sampling, then `extra_body` on top
    (as the OpenAI SDK merges `extra_body`: its top-level keys win). `data_uri` reads each
    medium (`media_data_uri`; `memoized_data_uri` touches no file)."""
    body: dict[str, Any] = {
        "model": settings.request_model,
        "messages": build_messages(prompt, settings, media_store, data_uri),
        "temperature": settings.temperature,
    }
    if settings.max_tokens is not None:
        body["max_tokens"] = settings.max_tokens
    body.update(settings.extra_body)
    return body


_MEDIA_MARK = f"\x00dualcog-media-{uuid.uuid4().hex}-"
_JSON_UNSAFE = re.compile(r'["\\\x00-\x1f]')


@functools.lru_cache(maxsize=32)
def _needs_no_escaping(url: str) -> bool:
    # Memoized: the media memo hands out the same string objects, whose hash is cached, so a
    # repeated medium costs a lookup instead of a scan.
    return url.isascii() and not _JSON_UNSAFE.search(url)


def encode_request_body(body: Mapping[str, Any]) -> bytes:
    """`json.dumps(body).encode()`, byte for byte, without re-escaping the media data URIs.

    The base64 data URIs are most of a request (hundreds of KB) and need no JSON escaping, so
    they are spliced into the encoded skeleton instead of being scanned by the encoder on every
    request (the largest client CPU cost per request otherwise).
    """
    uris: list[str] = []

    def mark(content: Any) -> Any:
        if not isinstance(content, list):
            return content
        blocks = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            url = block.get(kind, {}).get("url") if kind in ("image_url", "video_url") else None
            if isinstance(url, str) and len(url) > 256 and _needs_no_escaping(url):
                blocks.append({**block, kind: {**block[kind], "url": f"{_MEDIA_MARK}{len(uris)}"}})
                uris.append(url)
            else:
                blocks.append(block)
        return blocks

    messages = [
        {**message, "content": mark(message.get("content"))} for message in body["messages"]
    ]
    text = json.dumps({**body, "messages": messages})
    if not uris:
        return text.encode()
    escaped_mark = json.dumps(_MEDIA_MARK)[1:-1]
    pieces = text.split(escaped_mark)
    out = [pieces[0].encode()]
    for piece in pieces[1:]:
        number, _, rest = piece.partition('"')
        out.append(uris[int(number)].encode("ascii"))
        out.append(b'"' + rest.encode())
    return b"".join(out)
