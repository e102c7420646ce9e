"""Explorer media: small thumbnails of every still image and a frame grid of every video.

A video's grid frames are one sprite sheet (one JPEG, the frames side by side in time order):
one encode and one file per video instead of one per frame; the page shows frame k as the
sheet's k-th FRAME_SIZE cell.

Made once for all models (the per-model pages only reference them), from the source images
and videos: a run whose models send no media prepares none (a backend's `sends_media` in
dualcog.backends), so the explorer does not wait on the media store. Files live under
`results/explorer/media/` so the pages load them lazily by relative path and work offline.
"""

from __future__ import annotations

import hashlib
import io
import math
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from PIL import Image

from dualcog import atomic
from dualcog.atomic import DiskFull
from dualcog.media.store import (
    DECODE_ERRORS,
    MediaFailures,
    UnreadableMedia,
    fit_size,
    video_timestamp_span,
)

# av (PyAV, which loads numpy) is imported by the functions that decode video: image-only
# explorer jobs never load it.

THUMB_SIZE = (320, 240)
# Images the cards only ever show small, never with a box (records.py draws boxes on targets
# and candidates only; explorer.css shows a view without boxes at 200 x 150): made at that size,
# which the JPEG decoder's draft mode gives a 4x larger source with no resize at all.
PLAIN_THUMB_SIZE = (200, 150)
UNBOXED_ROLES = frozenset({"reference"})
FRAME_SIZE = (160, 120)
THUMB_QUALITY = 78
FRAME_STEP_SEC = 0.5  # frame grid step, widened so that a video keeps at most MAX_FRAMES
MAX_FRAMES = 48
# Bilinear (Pillow's antialiased triangle filter when shrinking), not Lanczos: a paper-scale
# source decodes in draft mode to 400 x 300, and the last 1.25x step to 320 x 240 cost 60 % of
# a thumbnail with Lanczos. The two thumbnails differ by less than the JPEG encoding itself
# (PSNR about 45 dB between them, 38 dB between a thumbnail and its unencoded pixels);
# docs/performance.md, "`explorer_media`: thumbnails and sprite sheets".
THUMB_FILTER = Image.Resampling.BILINEAR
# Draft mode decodes a JPEG at the smallest 1/2, 1/4 or 1/8 scale still at least the size
# asked. Within DRAFT_SLACK of it on each side (an 800 x 600 source: 400 x 300 for 320 x 240)
# that decode is the thumbnail as it is: the page scales it the rest of the way, and the
# bilinear step cost a third of a thumbnail's CPU (docs/performance.md, "`explorer_media`:
# thumbnails and sprite sheets").
DRAFT_SLACK = 1.25
# H.264 decoded without the in-loop deblocking filter on all but keyframes: a sixth of a
# grid's CPU, and a cell differs from the filtered decode by less than its JPEG encoding
# changes it (PSNR and CPU: docs/performance.md, "`explorer_media`: thumbnails and sprite
# sheets"). Every frame is still decoded, so which frame a cell shows does not change.
DECODER_OPTIONS = {"skip_loop_filter": "nokey"}

MEDIA_COLUMNS = ["kind", "source", "files", "times", "width", "height"]


@dataclass(frozen=True)
class MediaRow:
    kind: str  # image | video
    source: str  # resolved source path, as in samples.media
    files: list[str]  # paths relative to the explorer folder: the thumbnail, or the sprite sheet
    times: list[float]  # video: seconds of each grid frame (frame k: the sheet's cell k)
    width: int  # thumbnail (image) or one frame's (video) size in pixels
    height: int


def _encoded(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=THUMB_QUALITY)
    return buffer.getvalue()


def _jpeg(image: Image.Image, size: tuple[int, int]) -> tuple[bytes, tuple[int, int]]:
    image = image.convert("RGB")
    fitted = fit_size(image.width, image.height, *size)
    if fitted != image.size:
        image = image.resize(fitted, THUMB_FILTER)
    return _encoded(image), image.size


def _write(path: Path, data: bytes) -> None:
    """Write one media file in place. Every file's name is its own source's (and frame's), so
    no two writers of a job share one, and the media folder is a Snakemake `directory()`
    output, removed whole when the job fails: no temporary file and rename per file (a third
    of a frame's cost). A failed write removes the file; a full disk is one DiskFull message."""
    try:
        try:
            path.write_bytes(data)
        except FileNotFoundError:  # the first file of its folder
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    except BaseException as error:
        path.unlink(missing_ok=True)
        if atomic.is_disk_full(error):
            raise atomic.disk_full(path, error) from None  # type: ignore[arg-type]
        raise


def image_thumbnail(source: str, folder: Path, size: tuple[int, int] = THUMB_SIZE) -> MediaRow:
    """Thumbnail of the source image within `size` (raises `UnreadableMedia` when it does not
    decode)."""
    name = hashlib.sha256(f"explorer-thumb-2\x1f{source}".encode()).hexdigest()[:32]
    relative = f"media/{name[:2]}/{name}.jpg"
    try:
        with Image.open(source) as image:
            image.draft("RGB", size)  # JPEG decode at reduced scale: much less work
            if image.width <= size[0] * DRAFT_SLACK and image.height <= size[1] * DRAFT_SLACK:
                size = image.size
            data, size = _jpeg(image, size)
    except DECODE_ERRORS as exc:
        raise UnreadableMedia(source, f"image does not decode ({exc})") from exc
    _write(folder / relative, data)
    return MediaRow("image", source, [relative], [], *size)


def grid_times(duration: float) -> list[float]:
    """Frame grid: every FRAME_STEP_SEC seconds, at most MAX_FRAMES frames over the video."""
    if duration <= 0:
        return [0.0]
    step = max(FRAME_STEP_SEC, duration / (MAX_FRAMES - 1))
    count = int(duration / step + 1e-9) + 1
    return [round(i * step, 3) for i in range(count)]


def _small(frame, size: tuple[int, int], reformatter) -> Image.Image:
    """Scale in the decoder (swscale) before making a Pillow image: cheap for big frames.

    One reformatter per video keeps its scaling context (`frame.reformat` builds a new one
    per call, most of the cost for small frames); the pixels are the same."""
    width, height = fit_size(frame.width, frame.height, *size)
    return reformatter.reformat(frame, width=width, height=height, format="rgb24").to_image()


def video_frames(source: str, duration: float | None, folder: Path) -> MediaRow:
    """One streaming decode of `source`; the frame nearest each grid time becomes a cell of
    the video's sprite sheet.

    Only the previous decoded frame and the small cells are held, so memory does not grow
    with the video's length. Raises `UnreadableMedia` when the video does not open or decode.
    """
    import av

    try:
        return _video_frames(source, duration, folder)
    except DiskFull:
        raise
    except (*DECODE_ERRORS, IndexError, av.error.FFmpegError) as exc:  # IndexError: no stream
        raise UnreadableMedia(source, f"video does not decode ({exc})") from exc


def _video_frames(source: str, duration: float | None, folder: Path) -> MediaRow:
    import av
    from av.video.reformatter import VideoReformatter

    if duration is None or math.isnan(duration) or duration <= 0:  # unknown
        duration = video_timestamp_span(source)
    targets = grid_times(float(duration))
    name = hashlib.sha256(f"explorer-frames-2\x1f{source}".encode()).hexdigest()[:24]
    cells: list[Image.Image] = []
    stamps: list[float] = []
    reformatter = VideoReformatter()

    def keep(frame, time: float) -> None:
        cells.append(_small(frame, FRAME_SIZE, reformatter))
        stamps.append(round(time, 3))

    with av.open(source) as container:
        # Default (no frame threads): the rule already runs one video per worker thread, and
        # frame threading cost ~30 % more CPU per video at the benchmark's frame size.
        stream = container.streams.video[0]
        stream.codec_context.options = dict(DECODER_OPTIONS)
        # pts * num / den: float(Fraction(pts) * time_base) exactly (both correctly rounded).
        num, den = stream.time_base.numerator, stream.time_base.denominator
        previous = None  # (time, frame)
        start = None
        for frame in container.decode(stream):
            pts = frame.pts if frame.pts is not None else 0
            time = pts * num / den
            start = time if start is None else start
            time -= start
            # Times rise, so a target's nearest frame is the last one before the distance grows.
            while previous and len(cells) < len(targets):
                target = targets[len(cells)]
                if abs(time - target) < abs(previous[0] - target):
                    break
                keep(previous[1], previous[0])
            if len(cells) == len(targets):
                break
            previous = (time, frame)
        if previous is None:
            raise UnreadableMedia(source, "video has no decodable frames")
        while len(cells) < len(targets):  # targets past the last frame: the last frame
            keep(previous[1], previous[0])
    width, height = cells[0].size  # every frame of a stream scales to the same size
    sheet = Image.new("RGB", (width * len(cells), height))
    for k, cell in enumerate(cells):
        sheet.paste(cell, (k * width, 0))
    relative = f"media/frames/{name[:2]}/{name}.jpg"
    _write(folder / relative, _encoded(sheet))
    return MediaRow("video", source, [relative], stamps, width, height)


def shown_images(samples: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """The still images the cards show, each with its thumbnail size: an image card shows all
    of its sample's images; a video card none (only its frame grid)."""
    sizes: dict[str, tuple[int, int]] = {}
    for media in samples["media"]:
        if any(item["role"] == "video" for item in media):
            continue
        for item in media:
            source = item["resolved_path"]
            if item["role"] not in UNBOXED_ROLES or sizes.get(source) == THUMB_SIZE:
                sizes[source] = THUMB_SIZE
            else:
                sizes[source] = PLAIN_THUMB_SIZE
    return dict(sorted(sizes.items()))


# One task: ("image", source, thumbnail size) or ("video", source, duration or NaN).
MediaTask = tuple[str, str, object]
# Tasks a worker process takes at a time: few round trips, and the last chunks still even
# out the workers' ends (a video costs about ten thumbnails).
CHUNK = 32


def _prepare(folder: Path, task: MediaTask) -> MediaRow | UnreadableMedia:
    kind, source, detail = task
    try:
        if kind == "image":
            return image_thumbnail(source, folder, detail)  # type: ignore[arg-type]
        return video_frames(source, detail, folder)  # type: ignore[arg-type]
    except UnreadableMedia as failure:
        return failure


def _prepare_all(
    tasks: list[MediaTask], folder: Path, workers: int
) -> Iterator[MediaRow | UnreadableMedia]:
    """Each task's row or failure, in task order.

    More than one worker: processes, not threads. Threads spend their time handing the GIL
    over between the decoders' short Python steps: at the paper's scale two threads cost 31
    CPU-s for 20 s of wall, two processes 23 CPU-s for 17 s, one thread 26 CPU-s for 25 s
    (docs/performance.md, "`explorer_media`: worker processes"). Forked where the platform
    allows it, so a worker starts with this process's imports.
    """
    if workers <= 1:
        yield from (_prepare(folder, task) for task in tasks)
        return
    method = "fork" if sys.platform == "linux" else "spawn"
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        yield from pool.map(_prepare, [folder] * len(tasks), tasks, chunksize=CHUNK)


def prepare_explorer_media(
    samples: pd.DataFrame,
    folder: str | Path,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Thumbnails of the still images the cards show and frame grids of every video.

    Returns the media index (MEDIA_COLUMNS), one row per distinct source. Every file is
    tried; `MediaFailures` then lists each one that does not decode.
    """
    folder = Path(folder)
    durations: dict[str, float] = {}
    for media, duration in zip(samples["media"], samples["duration_sec"], strict=True):
        for item in media:
            if item["role"] == "video" and not math.isnan(duration):
                source = item["resolved_path"]
                durations[source] = max(durations.get(source, 0.0), float(duration))
            elif item["role"] == "video":
                durations.setdefault(item["resolved_path"], math.nan)
    tasks: list[MediaTask] = [("image", s, size) for s, size in shown_images(samples).items()]
    tasks += [("video", source, durations[source]) for source in sorted(durations)]
    rows: list[MediaRow] = []
    failures: list[UnreadableMedia] = []
    for i, row in enumerate(_prepare_all(tasks, folder, max(1, workers))):
        (failures if isinstance(row, UnreadableMedia) else rows).append(row)
        if progress and (i + 1) % 500 == 0:
            progress(f"{i + 1}/{len(tasks)} media files")
    if failures:
        raise MediaFailures(failures)
    return media_frame(rows)


def media_frame(rows: Iterable[MediaRow]) -> pd.DataFrame:
    return pd.DataFrame([vars(r) for r in rows], columns=MEDIA_COLUMNS)
