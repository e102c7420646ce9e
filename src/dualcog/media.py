"""Content-addressed media store: every source image or video is prepared once, for all models.

A prepared file's key is a hash of the source bytes and the preparation settings, so the same
image referenced by many samples (or re-run by many models) is decoded and encoded once, and a
changed setting produces new keys instead of silently reusing stale files.
Layout: `<store>/<key[:2]>/<key>.<ext>` (ext `jpg` or `mp4`).
"""

from __future__ import annotations

import hashlib
import io
import logging
import shutil
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from PIL import Image

log = logging.getLogger(__name__)

IMAGE_SETTINGS_VERSION = "img-v1"
VIDEO_SETTINGS_VERSION = "vid-v1"


@dataclass(frozen=True)
class ImageSettings:
    """How images are prepared (docs/upstream_format.md §4): fit, never upscale, Lanczos, JPEG."""

    max_width: int = 640
    max_height: int = 480
    jpeg_quality: int = 80

    def tag(self) -> str:
        return f"{IMAGE_SETTINGS_VERSION}:{self.max_width}x{self.max_height}:q{self.jpeg_quality}"


def store_path(store: str | Path, key: str, ext: str) -> Path:
    return Path(store) / key[:2] / f"{key}.{ext}"


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def fit_size(width: int, height: int, max_width: int, max_height: int) -> tuple[int, int]:
    """Largest size within the bounds keeping the aspect ratio; never upscales."""
    scale = min(max_width / width, max_height / height, 1.0)
    return max(1, round(width * scale)), max(1, round(height * scale))


def encode_image(image: Image.Image, settings: ImageSettings) -> bytes:
    image = image.convert("RGB")
    size = fit_size(image.width, image.height, settings.max_width, settings.max_height)
    if size != image.size:
        image = image.resize(size, Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=settings.jpeg_quality)
    return buffer.getvalue()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique per writer: two threads may prepare identical bytes from two source paths.
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


@dataclass(frozen=True)
class PreparedImage:
    source: str
    key: str
    width: int
    height: int


def prepare_image(source: str | Path, store: str | Path, settings: ImageSettings) -> PreparedImage:
    """Prepare one image into the store (skipped when its key is already there)."""
    key = _key(file_digest(source), settings.tag())
    target = store_path(store, key, "jpg")
    if not target.exists():
        with Image.open(source) as image:
            _write_atomic(target, encode_image(image, settings))
    with Image.open(target) as prepared:
        width, height = prepared.size
    return PreparedImage(str(source), key, width, height)


def prepare_images(
    sources: Iterable[str | Path],
    store: str | Path,
    settings: ImageSettings,
    workers: int = 1,
    progress=None,
) -> list[PreparedImage]:
    """Prepare every distinct source once; Pillow releases the GIL, so threads scale."""
    unique = sorted({str(s) for s in sources})
    results: list[PreparedImage] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for i, item in enumerate(pool.map(lambda s: prepare_image(s, store, settings), unique)):
            results.append(item)
            if progress and (i + 1) % 200 == 0:
                progress(f"prepared {i + 1}/{len(unique)} images")
    return results


# -- video ----------------------------------------------------------------------------------


def video_timestamp_span(path: str | Path) -> float:
    """Span of the decoded frames' timestamps, for manifests without frame_count or fps."""
    import av

    times = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            if frame.pts is not None:
                times.append(float(frame.pts * stream.time_base))
    return (max(times) - min(times)) if times else 0.0


def prepare_video_file(source: str | Path, store: str | Path) -> str:
    """The whole MP4, byte for byte, as the authors sent it (a `video_url` data URI)."""
    key = _key(file_digest(source), VIDEO_SETTINGS_VERSION, "video_url")
    target = store_path(store, key, "mp4")
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)
    return key


def uniform_frame_times(duration: float, count: int) -> list[float]:
    """`count` timestamps spread uniformly over [0, duration], both ends included."""
    if count <= 1 or duration <= 0:
        return [0.0]
    return [duration * i / (count - 1) for i in range(count)]


@dataclass(frozen=True)
class PreparedFrames:
    source: str
    keys: list[str]
    timestamps: list[float]


def prepare_video_frames(
    source: str | Path,
    store: str | Path,
    count: int,
    settings: ImageSettings,
) -> PreparedFrames:
    """Sample `count` frames uniformly (nearest decoded frame to each target time).

    A first decoding pass reads the frame times; a second converts only the chosen frames.
    """

    base = _key(file_digest(source), VIDEO_SETTINGS_VERSION, f"frames{count}", settings.tag())
    times = _frame_times(source)
    if not times:
        raise ValueError(f"{source}: no decodable video frames")
    wanted = uniform_frame_times(times[-1], count)
    chosen = [
        min(range(len(times)), key=lambda j: (abs(times[j] - target_time), j))
        for target_time in wanted
    ]
    keys = [_key(base, str(i)) for i in range(len(chosen))]
    needed = {
        j for j, key in zip(chosen, keys, strict=True) if not store_path(store, key, "jpg").exists()
    }
    images = _decoded_images(source, needed)
    for j, key in zip(chosen, keys, strict=True):
        path = store_path(store, key, "jpg")
        if not path.exists():
            _write_atomic(path, encode_image(images[j], settings))
    return PreparedFrames(str(source), keys, [round(times[j], 3) for j in chosen])


def _frame_times(source: str | Path) -> list[float]:
    """Presentation time of every decoded frame, relative to the first one."""
    import av

    with av.open(str(source)) as container:
        stream = container.streams.video[0]
        stamps = [
            float(Fraction(frame.pts if frame.pts is not None else 0) * stream.time_base)
            for frame in container.decode(stream)
        ]
    return [t - stamps[0] for t in stamps] if stamps else []


def _decoded_images(source: str | Path, indices: set[int]) -> dict[int, Image.Image]:
    """The frames at these decode positions as images; only those are converted, and
    decoding stops after the last one (converting a frame costs ~8x decoding it)."""
    import av

    images: dict[int, Image.Image] = {}
    if not indices:
        return images
    last = max(indices)
    with av.open(str(source)) as container:
        for j, frame in enumerate(container.decode(container.streams.video[0])):
            if j in indices:
                images[j] = frame.to_image()
            if j >= last:
                break
    return images


def missing_media(store: str | Path, keys: Sequence[str], kinds: Sequence[str]) -> list[str]:
    """Keys whose prepared file is absent (the store is a cache outside Snakemake's outputs)."""
    return [
        key
        for key, kind in zip(keys, kinds, strict=True)
        if not store_path(store, key, "mp4" if kind == "video" else "jpg").exists()
    ]
