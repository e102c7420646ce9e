"""The video size ladder of routes that refuse large data-URI videos (PROTOCOL §11.4).

A `qwen3.5-plus` route (DashScope) refuses data-URI videos over 10 MiB, so a stored video over
`VIDEO_SIZE_LIMIT` bytes is re-encoded by the authors' ladder (`UPSTREAM_FORMAT.md` §4) before
it is sent: widths [unchanged, 576, 512, 448, 384] (outer) x bitrates [t, 0.85 t, 0.72 t, 420,
320, 260] (inner), H.264 baseline 3.1; the first result at or under the limit is sent.

The encoder is the ffmpeg binary that the `imageio-ffmpeg` wheel ships (a project dependency;
`IMAGEIO_FFMPEG_EXE` points it elsewhere), checked for libx264. The result is stored in the
media store under a key derived from the source key and the ladder's inputs, with a JSON
sidecar that records how it was made, so every run and rerun sends the same file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualcog import atomic
from dualcog.digests import file_digest
from dualcog.errors import DataError, DualCogError

VIDEO_SIZE_LIMIT = 9_500_000
LADDER_VERSION = "reencode-v1"
LADDER_WIDTHS: tuple[int | None, ...] = (None, 576, 512, 448, 384)
ENCODE_TIMEOUT_S = 900.0


class NoEncoder(DualCogError, RuntimeError):
    """No ffmpeg with libx264 to re-encode with: the job stops before sending."""


@dataclass(frozen=True)
class Reencoded:
    """One re-encoded video: what was sent instead of the stored one."""

    source_key: str
    sent_key: str
    bytes_before: int
    bytes_after: int
    width: int | None  # None: unchanged
    bitrate_k: int
    sent_sha256: str

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source_key,
            "sent": self.sent_key,
            "sent_sha256": self.sent_sha256,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "width": self.width,
            "bitrate_k": self.bitrate_k,
        }


def target_bitrate_k(duration_s: float, limit: int = VIDEO_SIZE_LIMIT) -> int:
    """`clamp(int(limit * 8 / duration / 1000 * 0.88), 220, 1200)` kb/s."""
    return max(220, min(1200, int(limit * 8 / duration_s / 1000 * 0.88)))


def ladder(duration_s: float) -> list[tuple[int | None, int]]:
    """(width or None, bitrate in kb/s) in the order tried."""
    t = target_bitrate_k(duration_s)
    bitrates = (t, int(0.85 * t), int(0.72 * t), 420, 320, 260)
    return [(width, rate) for width in LADDER_WIDTHS for rate in bitrates]


def encoder_arguments(source: Path, target: Path, width: int | None, bitrate_k: int) -> list[str]:
    """The ffmpeg arguments (after the binary) of one try of the ladder."""
    rate = max(180, bitrate_k)
    args = ["-y", "-v", "error", "-i", str(source), "-an"]
    if width is not None:
        args += ["-vf", f"scale={width}:-2"]
    args += [
        "-c:v", "libx264", "-profile:v", "baseline", "-level", "3.1", "-preset", "medium",
        "-pix_fmt", "yuv420p", "-movflags", "+faststart",
        "-b:v", f"{rate}k", "-maxrate", f"{rate}k", "-bufsize", f"{max(360, 2 * bitrate_k)}k",
        str(target),
    ]  # fmt: skip
    return args


@functools.lru_cache(maxsize=4)
def _checked(candidate: str) -> bool:
    try:
        done = subprocess.run(
            [candidate, "-hide_banner", "-encoders"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and " libx264 " in done.stdout


def find_encoder() -> str | None:
    """The ffmpeg binary to re-encode with (one that has libx264), or None."""
    override = os.environ.get("IMAGEIO_FFMPEG_EXE")
    if override is not None:
        return override if _checked(override) else None
    try:  # here: imageio-ffmpeg is optional; without it the caller sends the video as it is
        import imageio_ffmpeg

        candidate = imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        return None
    return candidate if _checked(candidate) else None


def reencoded_key(source_key: str, duration_s: float) -> str:
    """The media-store key of the ladder's result for a source video and duration."""
    text = f"{LADDER_VERSION}\n{source_key}\n{duration_s!r}\n{VIDEO_SIZE_LIMIT}"
    return hashlib.sha256(text.encode()).hexdigest()


def _sidecar(video: Path) -> Path:
    return video.with_suffix(".reencode.json")


def reencode_video(
    store: Path, source_key: str, source: Path, duration_s: float, encoder: str
) -> Reencoded | None:
    """The ladder's result for `source` (stored under `reencoded_key`), made once and reused;
    None when no try fits under the limit (the original is then sent, as their code does)."""
    key = reencoded_key(source_key, duration_s)
    target = store / key[:2] / f"{key}.mp4"
    sidecar = _sidecar(target)
    if target.is_file() and sidecar.is_file():
        try:
            record = json.loads(sidecar.read_text())
            if record.get("sent_sha256") == file_digest(target):
                return Reencoded(**{**record, "source_key": source_key, "sent_key": key})
        except (ValueError, TypeError, OSError):
            pass  # an unreadable sidecar: made again
    before = source.stat().st_size
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        attempt = Path(scratch) / "try.mp4"
        for width, rate in ladder(max(1.0, duration_s)):
            done = subprocess.run(
                [encoder, *encoder_arguments(source, attempt, width, rate)],
                capture_output=True,
                text=True,
                timeout=ENCODE_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                raise DataError(
                    f"ffmpeg could not re-encode it (width {width}, {rate}k): "
                    f"{done.stderr.strip()[-500:]}",
                    file=str(source),
                )
            size = attempt.stat().st_size
            if size <= VIDEO_SIZE_LIMIT:
                digest = file_digest(attempt)
                os.replace(attempt, target)
                made = Reencoded(source_key, key, before, size, width, rate, digest)
                record = {
                    "bytes_before": before,
                    "bytes_after": size,
                    "width": width,
                    "bitrate_k": rate,
                    "sent_sha256": digest,
                }
                atomic.write_text(sidecar, json.dumps(record, sort_keys=True))
                return made
    return None
