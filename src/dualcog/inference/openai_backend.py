"""`openai` backend: OpenAI-compatible Chat Completions (cloud APIs, local vLLM servers), the
request engine's first transport (`dualcog.inference.engine`).

The transport builds each body (`dualcog.inference.request`, PROTOCOL §11), with the videos a
size-limited route needs re-encoded first (§11.4), records what shaped it (§11.5), and sends
it with `dualcog.inference.client.ChatClient`, the wire and the decoding of replies (the only
module importing `openai`, imported when a job first sends). `batch: true` goes through the
OpenAI Batch API instead: batch mode (`dualcog.inference.batch`) with `client.BatchClient` as
its batcher. Cache, limits, budgets, retries and progress are the engine's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dualcog.errors import DataError
from dualcog.inference.batch import run_batches
from dualcog.inference.engine import Engine, Sender, Transport, Unsent, transport_runner
from dualcog.inference.media import NotMemoized, media_path, memoized_data_uri
from dualcog.inference.request import encode_request_body, request_body, request_settings
from dualcog.inference.values import as_list
from dualcog.media.reencode import VIDEO_SIZE_LIMIT, NoEncoder, find_encoder, reencode_video

# Bodies whose memoized media pass this size (videos) are still encoded in a thread: copying
# them takes milliseconds that the event loop would stall for.
INLINE_MEDIA_CHARS = 4 * 1024 * 1024


class OpenAITransport(Transport):
    """Chat Completions bodies of one model run, sent to its endpoint."""

    def __init__(self, model: Mapping[str, Any], media_store: Path) -> None:
        super().__init__(model, media_store)
        self.settings = request_settings(model)
        self.request_record = self.settings.record()  # PROTOCOL §11.5, the same for every request
        # Stored video key -> its re-encoded stand-in (PROTOCOL §11.4), filled by `prepare`.
        self.reencoded: dict[str, Any] = {}

    @property
    def secrets(self) -> list[str]:
        return [self.settings.api_key]

    def outgoing(self, prompt: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
        """The prompt as sent (re-encoded videos in place of the stored ones) and the JSON
        record of those substitutions (None when there are none)."""
        if not self.reencoded:
            return prompt, None
        keys = [str(k) for k in as_list(prompt.get("media_keys"))]
        swapped = [self.reencoded[k] for k in keys if k in self.reencoded]
        if not swapped:
            return prompt, None
        sent = [self.reencoded[k].sent_key if k in self.reencoded else k for k in keys]
        described = json.dumps([made.describe() for made in swapped], sort_keys=True)
        return {**prompt, "media_keys": sent}, described

    def record(self, prompt: Mapping[str, Any], body: bytes) -> dict[str, Any]:
        """The record of one posted body: its SHA-256 and the settings that shaped it."""
        return {
            **self.request_record,
            "request_sha256": hashlib.sha256(body).hexdigest(),
            "request_reencoded": self.outgoing(prompt)[1],
        }

    def body(self, prompt: Mapping[str, Any]) -> bytes:
        sent = self.outgoing(prompt)[0]
        return encode_request_body(request_body(sent, self.settings, self.media_store))

    def inline_body(self, prompt: Mapping[str, Any]) -> bytes | None:
        """The body when every medium of `prompt` is in the media memo (no file to read) and
        they are small enough to encode on the event loop; None otherwise."""
        size = 0

        def data_uri(store: Path, key: str, kind: str) -> str:
            nonlocal size
            uri = memoized_data_uri(store, key, kind)
            size += len(uri)
            if size > INLINE_MEDIA_CHARS:
                raise NotMemoized(key)
            return uri

        try:
            body = request_body(self.outgoing(prompt)[0], self.settings, self.media_store, data_uri)
        except NotMemoized:
            return None
        return encode_request_body(body)

    async def connect(self, pool: int, timeout_s: float) -> Sender:
        # here: the client loads openai and aiohttp, not needed by a run its cache answers in full
        from dualcog.inference.client import ChatClient

        await ChatClient.warm_up()
        return ChatClient(self.settings.api_base, self.settings.api_key, timeout_s, pool)

    def batch(self, engine: Engine, unsent: Unsent) -> None:
        # here: the client loads openai and aiohttp (see `connect`)
        from dualcog.inference.client import BatchClient

        request, send = self.settings, engine.settings
        client = BatchClient(request.api_base, request.api_key, send.timeout_s, send.max_retries)
        try:
            run_batches(engine, self, client, unsent)
        finally:
            client.close()

    def prepare(
        self, prompts: list[Mapping[str, Any]], samples: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Re-encode the videos over the size limit of a size-limited route (PROTOCOL §11.4)
        into the media store, once; raises, naming the samples, when there is no encoder."""

        if not self.settings.size_limited:
            return
        large: dict[str, tuple[Path, float]] = {}
        named: dict[str, list[str]] = {}
        for prompt in prompts:
            kinds = [str(kind) for kind in as_list(prompt.get("media_kinds"))]
            for key, kind in zip(as_list(prompt.get("media_keys")), kinds, strict=True):
                path = media_path(self.media_store, str(key), kind)
                if kind != "video" or key in self.reencoded or not path.is_file():
                    continue
                if path.stat().st_size <= VIDEO_SIZE_LIMIT:
                    continue
                sample = samples.get(str(prompt["sample_id"])) or {}
                frames, fps = sample.get("frame_count"), sample.get("fps")
                if not frames or not fps:
                    raise DataError(
                        f"its video is over {VIDEO_SIZE_LIMIT} bytes and must be re-encoded "
                        f"for {self.settings.run_name}, which needs its duration; no SAMPLES "
                        "row gives it",
                        sample=str(prompt["sample_id"]),
                        field="frame_count, fps",
                    )
                large[str(key)] = (path, max(1.0, (int(frames) - 1) / float(fps)))
                named.setdefault(str(key), []).append(str(prompt["sample_id"]))
        if not large:
            return
        encoder = find_encoder()
        if encoder is None:
            samples_text = ", ".join(sorted({s for ids in named.values() for s in ids}))
            raise NoEncoder(
                f"{self.settings.run_name}: {len(large)} video(s) over {VIDEO_SIZE_LIMIT} bytes "
                f"must be re-encoded before they are sent (PROTOCOL §11.4), but no ffmpeg "
                f"with libx264 was found (the imageio-ffmpeg package, or IMAGEIO_FFMPEG_EXE); "
                f"nothing was sent. Samples: {samples_text}"
            )
        for key, (path, duration) in large.items():
            made = reencode_video(self.media_store, key, path, duration, encoder)
            if made is not None:  # nothing fits: the original goes, as the authors' code does
                self.reencoded[key] = made


run_openai = transport_runner(OpenAITransport)  # the registry's runner (dualcog.backends)
