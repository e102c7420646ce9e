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
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from math import ceil
from pathlib import Path

from PIL import Image

from dualcog import atomic
from dualcog.digests import file_digest
from dualcog.errors import DataError, DualCogError

# av (PyAV, which loads numpy) is imported by the functions that decode video: the image jobs
# and ingest, which import this module, never load it.

log = logging.getLogger(__name__)

IMAGE_SETTINGS_VERSION = "img-v1"
VIDEO_SETTINGS_VERSION = "vid-v1"


class UnreadableMedia(DataError):
    """A media file that does not decode; the caller adds the manifest, sample and field."""

    def __init__(self, source: str | Path, reason: str) -> None:
        super().__init__(reason, file=str(source))
        self.source = str(source)
        self.reason = reason

    def __reduce__(self) -> tuple:
        # Rebuilt from its own arguments when it comes back from a worker process.
        return (type(self), (self.source, self.reason))


class MediaFailures(DataError):
    """Every unreadable file of one preparation pass (the readable ones were prepared)."""

    def __init__(self, failures: Sequence[UnreadableMedia]) -> None:
        self.failures = list(failures)
        super().__init__(f"{len(self.failures)} media file(s) do not decode")


# Pillow's and PyAV's errors on bad bytes (truncated data is an OSError, av's are ValueErrors).
DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)


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


def _key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def image_key(source: str | Path, settings: ImageSettings) -> str:
    """The store key `prepare_image` gives `source`: known from its bytes, without decoding."""
    return _key(file_digest(source), settings.tag())


def video_file_key(source: str | Path) -> str:
    """The store key `prepare_video_file` gives `source` (the whole MP4, `video_url` mode)."""
    return _key(file_digest(source), VIDEO_SETTINGS_VERSION, "video_url")


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
    # Unique temporary per writer: two threads may prepare identical bytes from two sources.
    atomic.write_bytes(path, data)


@dataclass(frozen=True)
class PreparedImage:
    source: str
    key: str
    width: int
    height: int


def prepare_image(source: str | Path, store: str | Path, settings: ImageSettings) -> PreparedImage:
    """Prepare one image into the store (skipped when its key is already there)."""
    key = image_key(source, settings)
    target = store_path(store, key, "jpg")
    if not target.exists():
        try:
            with Image.open(source) as image:
                encoded = encode_image(image, settings)  # decodes every pixel
        except DECODE_ERRORS as exc:
            raise UnreadableMedia(source, f"image does not decode ({exc})") from exc
        _write_atomic(target, encoded)
    with Image.open(target) as prepared:
        width, height = prepared.size
    return PreparedImage(str(source), key, width, height)


def _remove_stale_temporaries(store: str | Path, progress) -> None:
    """Temporary files a killed run left in the store (live writers' are kept)."""
    removed = atomic.remove_stale_temporaries(store) if Path(store).is_dir() else 0
    if removed and progress:
        progress(f"removed {removed} temporary files left in {store} by an interrupted run")


def prepare_images(
    sources: Iterable[str | Path],
    store: str | Path,
    settings: ImageSettings,
    workers: int = 1,
    progress=None,
) -> list[PreparedImage]:
    """Prepare every distinct source once; Pillow releases the GIL, so threads scale.

    An unreadable source does not stop the others: all of them are prepared, then
    `MediaFailures` lists every source that failed.
    """
    unique = sorted({str(s) for s in sources})
    _remove_stale_temporaries(store, progress)

    def attempt(source: str) -> PreparedImage | UnreadableMedia:
        try:
            return prepare_image(source, store, settings)
        except UnreadableMedia as failure:
            return failure

    results: list[PreparedImage] = []
    failures: list[UnreadableMedia] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for i, item in enumerate(pool.map(attempt, unique)):
            if isinstance(item, UnreadableMedia):
                failures.append(item)
            else:
                results.append(item)
            if progress and (i + 1) % 200 == 0:
                progress(f"prepared {i + 1}/{len(unique)} images")
    if failures:
        raise MediaFailures(failures)
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


def frame_count_tolerance(expected: int) -> int:
    """Decoded frames may differ from the manifest's `frame_count` by 2% (at least 1 frame):
    encoders may drop or repeat an edge frame, while a truncated file loses far more."""
    return max(1, ceil(0.02 * expected))


def checked_frame_times(source: str | Path, expected_frames: int | None = None) -> list[float]:
    """Decode the whole video (raises `UnreadableMedia` when it does not decode end to end,
    has no frame, or its frame count is off the manifest's beyond `frame_count_tolerance`)."""
    try:
        times = _frame_times(source)
    except (*DECODE_ERRORS, IndexError) as exc:  # IndexError: no video stream
        raise UnreadableMedia(source, f"video does not decode ({exc})") from exc
    if not times:
        raise UnreadableMedia(source, "video has no decodable frames")
    off = None if expected_frames is None else abs(len(times) - expected_frames)
    if off is not None and off > frame_count_tolerance(expected_frames):
        raise UnreadableMedia(
            source,
            f"decoded {len(times)} video frames, the manifest's frame_count is "
            f"{expected_frames} (truncated or wrong file?)",
        )
    return times


def prepare_video_file(
    source: str | Path, store: str | Path, expected_frames: int | None = None
) -> str:
    """The whole MP4, byte for byte, as the authors sent it (a `video_url` data URI).

    Checked to decode end to end first, so a truncated file is never sent to a model.
    """
    checked_frame_times(source, expected_frames)
    key = video_file_key(source)
    target = store_path(store, key, "mp4")
    if not target.exists():
        atomic.write_with(target, lambda tmp: shutil.copyfile(source, tmp))
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
    expected_frames: int | None = None,
) -> PreparedFrames:
    """Sample `count` frames uniformly (nearest decoded frame to each target time).

    A first decoding pass reads the frame times; a second converts only the chosen frames.
    """

    base = _key(file_digest(source), VIDEO_SETTINGS_VERSION, f"frames{count}", settings.tag())
    times = checked_frame_times(source, expected_frames)
    wanted = uniform_frame_times(times[-1], count)
    chosen = [
        min(range(len(times)), key=lambda j: (abs(times[j] - target_time), j))
        for target_time in wanted
    ]
    keys = [_key(base, str(i)) for i in range(len(chosen))]
    needed = {
        j for j, key in zip(chosen, keys, strict=True) if not store_path(store, key, "jpg").exists()
    }
    try:
        images = _decoded_images(source, needed)
    except DECODE_ERRORS as exc:
        raise UnreadableMedia(source, f"video does not decode ({exc})") from exc
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


def prepare_videos(
    sources: Sequence[str],
    store: str | Path,
    frames: int | None,
    settings: ImageSettings,
    frame_counts: dict[str, int | None] | None = None,
    progress=None,
) -> list[dict]:
    """Prepare every video, as the whole file (`frames=None`, video_url mode) or as `frames`
    sampled frames; each is decoded end to end first. Rows: source, keys, timestamps.

    An unreadable video does not stop the others: all good ones are prepared, then
    `MediaFailures` lists every bad one.
    """
    counts = frame_counts or {}
    _remove_stale_temporaries(store, progress)
    rows: list[dict] = []
    failures: list[UnreadableMedia] = []
    for i, source in enumerate(sources, 1):
        try:
            if frames is None:
                key = prepare_video_file(source, store, counts.get(source))
                rows.append({"source": source, "keys": [key], "timestamps": None})
            else:
                done = prepare_video_frames(source, store, frames, settings, counts.get(source))
                rows.append({"source": source, "keys": done.keys, "timestamps": done.timestamps})
        except UnreadableMedia as failure:
            failures.append(failure)
        if progress and i % 20 == 0:
            progress(f"{i}/{len(sources)}")
    if failures:
        raise MediaFailures(failures)
    return rows


def require_prepared(store: str | Path, keys: Sequence[str], kinds: Sequence[str]) -> None:
    """The store is a cache beside Snakemake's outputs: a missing file says how to refill it."""
    missing = missing_media(store, keys, kinds)
    if missing:
        raise DualCogError(
            f"{len(missing)} prepared media files are missing from {store} (e.g. {missing[0]}); "
            "refill the store with: snakemake --cores N --forcerun prepare_images prepare_videos"
        )


def missing_media(store: str | Path, keys: Sequence[str], kinds: Sequence[str]) -> list[str]:
    """Keys whose prepared file is absent (the store is a cache outside Snakemake's outputs)."""
    return [
        key
        for key, kind in zip(keys, kinds, strict=True)
        if not store_path(store, key, "mp4" if kind == "video" else "jpg").exists()
    ]
