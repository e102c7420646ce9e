"""The size ladder of `qwen3.5-plus` routes (PROTOCOL §11.4): a 12 MB, 30 s video is re-encoded
under 9,500,000 bytes with the bundled ffmpeg, stored in the media store, recorded, and what is
posted is the file the record names; without an encoder nothing is sent."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from frames import arrow
from loopback_server import LoopbackServer, completion

from dualcog.config import validate_config
from dualcog.errors import DataError
from dualcog.inference import media_path, run_model
from dualcog.media.reencode import (
    VIDEO_SIZE_LIMIT,
    NoEncoder,
    encoder_arguments,
    find_encoder,
    ladder,
    target_bitrate_k,
)

BIG_VIDEO_BYTES = 12_000_000  # "a 12 MB test video"
KEY = "cd" + "4" * 62


def test_target_bitrate_and_ladder_by_hand() -> None:
    # int(9.5e6 * 8 / d / 1000 * 0.88), clamped to [220, 1200]
    assert target_bitrate_k(30) == 1200  # 2229 -> 1200
    assert target_bitrate_k(100) == 668  # 668.8
    assert target_bitrate_k(300) == 222  # 222.9
    assert target_bitrate_k(600) == 220  # 111 -> 220
    steps = ladder(100)
    assert steps[:6] == [
        (None, 668),
        (None, 567),
        (None, 480),
        (None, 420),
        (None, 320),
        (None, 260),
    ]
    assert [width for width, _ in steps[::6]] == [None, 576, 512, 448, 384] and len(steps) == 30


def test_encoder_arguments_by_hand(tmp_path: Path) -> None:
    args = encoder_arguments(tmp_path / "in.mp4", tmp_path / "out.mp4", 576, 150)
    assert args[args.index("-vf") + 1] == "scale=576:-2"
    assert args[args.index("-b:v") + 1] == "180k" and args[args.index("-maxrate") + 1] == "180k"
    assert args[args.index("-bufsize") + 1] == "360k"  # max(360, 2 * 150)
    expected = {"-profile:v": "baseline", "-level": "3.1", "-preset": "medium",
                "-pix_fmt": "yuv420p", "-movflags": "+faststart", "-c:v": "libx264"}  # fmt: skip
    for flag, value in expected.items():
        assert args[args.index(flag) + 1] == value
    assert "-an" in args
    unchanged = encoder_arguments(tmp_path / "in.mp4", tmp_path / "out.mp4", None, 1200)
    assert "-vf" not in unchanged and unchanged[unchanged.index("-bufsize") + 1] == "2400k"


@pytest.fixture(scope="module")
def big_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 30 s, 10 fps, 160x120 test pattern at a constant 3.3 Mb/s with filler data: about
    12.4 MB whose content re-encodes in a fraction of a CPU second."""
    encoder = find_encoder()
    assert encoder is not None, "imageio-ffmpeg's ffmpeg with libx264 is a dependency"
    path = tmp_path_factory.mktemp("big") / "padded.mp4"
    subprocess.run(
        [encoder, "-v", "error", "-f", "lavfi", "-i", "testsrc=s=160x120:r=10:d=30.1",
         "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3300k", "-minrate", "3300k",
         "-maxrate", "3300k", "-bufsize", "1650k", "-x264-params", "nal-hrd=cbr:filler=1",
         "-an", str(path)],
        check=True,
    )  # fmt: skip
    assert path.stat().st_size >= BIG_VIDEO_BYTES, path.stat().st_size
    return path


def answer(body: dict, count: int) -> tuple:
    return 200, completion('{"answers":[]}'), {}


def video_run(
    store: Path, big_video: Path, server: LoopbackServer, tmp_path: Path, name: str, fps=10.0
):
    path = media_path(store, KEY, "video")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(big_video.read_bytes())
    prompts = pd.DataFrame([{
        "sample_id": "env_7_m1_self_instance_recognition_joint_000001", "task": "behavior",
        "request_key": "rk-big", "system_text": "S\n", "user_text": "U",
        "media_keys": [KEY], "media_kinds": ["video"], "offered_option_ids": ["A"],
    }])  # fmt: skip
    samples = pd.DataFrame([{"sample_id": prompts.sample_id[0], "frame_count": 301, "fps": fps}])
    config = {
        "data_root": "d",
        "routes": {"qwen3.5-plus": {"api_base": server.api_base, "api_key": "EMPTY"}},
        "models": [{"name": name, "route": "qwen3.5-plus", "backend": "openai", "max_retries": 0}],
    }
    model = validate_config(config)["models"][0]
    return run_model(model, arrow(prompts), arrow(samples), store, tmp_path / "cache").to_pandas()


def test_a_big_video_is_reencoded_recorded_and_sent_as_recorded(big_video, tmp_path) -> None:
    store = tmp_path / "media"
    with LoopbackServer(answer) as server:
        out = video_run(store, big_video, server, tmp_path, "Qwen3.5-Plus-Instant")
        (body,) = server.bodies
        (raw,) = server.raw_bodies
    assert list(out.status) == ["ok"]
    (made,) = json.loads(out.request_reencoded[0])
    assert made["source"] == KEY and made["bytes_before"] == big_video.stat().st_size
    assert made["bytes_after"] < VIDEO_SIZE_LIMIT and made["width"] is None
    assert made["bitrate_k"] == 1200  # the first try, at 30 s
    stored = media_path(store, made["sent"], "video")
    assert stored.stat().st_size == made["bytes_after"]
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == made["sent_sha256"]
    # What arrived is the stored re-encoded file, and the record names the posted bytes.
    url = body["messages"][1]["content"][1]["video_url"]["url"]
    sent = base64.b64decode(url.removeprefix("data:video/mp4;base64,"))
    assert hashlib.sha256(sent).hexdigest() == made["sent_sha256"]
    assert out.request_sha256[0] == hashlib.sha256(raw).hexdigest()
    # A rerun of another run name on the same store reuses the file (same key, no new try).
    before = stored.stat().st_mtime_ns
    with LoopbackServer(answer) as server:
        again = video_run(store, big_video, server, tmp_path / "2", "Qwen3.5-Plus-Thinking")
    assert json.loads(again.request_reencoded[0]) == [made]
    assert stored.stat().st_mtime_ns == before


def test_other_routes_send_the_original(big_video, tmp_path) -> None:
    with LoopbackServer(answer) as server:
        config_name = "Qwen3.6-Plus-Instant"  # not size-limited
        store = tmp_path / "media"
        path = media_path(store, KEY, "video")
        path.parent.mkdir(parents=True)
        path.write_bytes(big_video.read_bytes())
        prompts = pd.DataFrame([{
            "sample_id": "s", "task": "behavior", "request_key": "rk", "system_text": "S",
            "user_text": "U", "media_keys": [KEY], "media_kinds": ["video"],
            "offered_option_ids": ["A"],
        }])  # fmt: skip
        config = {
            "data_root": "d",
            "models": [{"name": config_name, "backend": "openai", "api_base": server.api_base}],
        }
        out = run_model(
            validate_config(config)["models"][0], arrow(prompts), None, store, tmp_path / "c"
        ).to_pandas()
        url = server.bodies[0]["messages"][1]["content"][1]["video_url"]["url"]
    assert pd.isna(out.request_reencoded[0])
    assert base64.b64decode(url.split(",", 1)[1]) == big_video.read_bytes()


def test_without_an_encoder_nothing_is_sent_and_the_samples_are_named(
    big_video, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(tmp_path / "no-ffmpeg"))
    with LoopbackServer(answer) as server:
        with pytest.raises(NoEncoder) as info:
            video_run(tmp_path / "media", big_video, server, tmp_path, "Qwen3.5-Plus-Instant")
        assert server.bodies == []
    message = str(info.value)
    assert "no ffmpeg with libx264" in message and "nothing was sent" in message
    assert "env_7_m1_self_instance_recognition_joint_000001" in message


def test_a_sample_without_its_duration_stops_the_job_naming_it(big_video, tmp_path) -> None:
    with LoopbackServer(answer) as server:
        with pytest.raises(DataError) as info:
            video_run(tmp_path / "m", big_video, server, tmp_path, "Qwen3.5-Plus-Instant", None)
        assert server.bodies == []
    message = str(info.value)
    assert "sample env_7_m1_self_instance_recognition_joint_000001" in message
    assert "field 'frame_count, fps'" in message
