from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from dataset_builder import default_image_samples, write_dataset
from PIL import Image

from dualcog.errors import DataError
from dualcog.ingest import ingest
from dualcog.media.store import (
    ImageSettings,
    fit_size,
    image_key,
    prepare_image,
    prepare_images,
    prepare_video_file,
    prepare_video_frames,
    store_path,
    uniform_frame_times,
    video_file_key,
    video_timestamp_span,
)
from dualcog.prompts.render import frame_note, image_sources, render_prompts, request_key


def test_fit_size_never_upscales_and_keeps_aspect() -> None:
    assert fit_size(4096, 3072, 640, 480) == (640, 480)
    assert fit_size(1440, 1080, 640, 480) == (640, 480)
    assert fit_size(800, 400, 640, 480) == (640, 320)
    assert fit_size(300, 200, 640, 480) == (300, 200)
    assert fit_size(480, 960, 640, 480) == (240, 480)


def _jpeg(path: Path, size=(800, 600), colour=(10, 200, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path, format="JPEG")
    return path


def test_prepare_image_is_content_addressed_and_reused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    a = _jpeg(tmp_path / "a.jpg")
    b = tmp_path / "copy_of_a.jpg"
    b.write_bytes(a.read_bytes())
    c = _jpeg(tmp_path / "c.png", colour=(200, 10, 10))
    settings = ImageSettings()
    prepared = prepare_images([a, b, c, a], store, settings, workers=2)
    assert len(prepared) == 3  # distinct source paths
    keys = {Path(p.source).name: p.key for p in prepared}
    assert keys["a.jpg"] == keys["copy_of_a.jpg"]  # same bytes, same prepared file
    assert keys["a.jpg"] != keys["c.png"]
    first = store_path(store, keys["a.jpg"], "jpg")
    with Image.open(first) as image:
        assert image.size == (640, 480) and image.format == "JPEG"
    stamp = first.stat().st_mtime_ns
    again = prepare_image(a, store, settings)
    assert again.key == keys["a.jpg"] and first.stat().st_mtime_ns == stamp  # not re-encoded
    other = prepare_image(a, store, ImageSettings(jpeg_quality=50))
    assert other.key != keys["a.jpg"]  # a setting change makes a new key


def test_keys_are_known_without_preparing(tmp_path: Path) -> None:
    """Prompts carry keys computed from the sources alone: the same keys preparation gives."""
    store = tmp_path / "store"
    image = _jpeg(tmp_path / "a.jpg")
    for settings in (ImageSettings(), ImageSettings(320, 240, 50)):
        assert image_key(image, settings) == prepare_image(image, store, settings).key
    video = _mp4(tmp_path / "v.mp4")
    assert video_file_key(video) == prepare_video_file(video, store)


def _mp4(path: Path, frames: int = 21, fps: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(frames):
            array = np.full((48, 64, 3), i * 10 % 255, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(array, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def test_video_frames_and_file(tmp_path: Path) -> None:
    video = _mp4(tmp_path / "v.mp4")
    assert video_timestamp_span(video) == pytest.approx(2.0)
    store = tmp_path / "store"
    frames = prepare_video_frames(video, store, 5, ImageSettings())
    assert frames.timestamps == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert len(set(frames.keys)) == 5
    assert all(store_path(store, k, "jpg").is_file() for k in frames.keys)
    key = prepare_video_file(video, store)
    assert store_path(store, key, "mp4").read_bytes() == video.read_bytes()
    assert uniform_frame_times(0.0, 4) == [0.0]


def test_render_uses_stored_prompts_and_orders_media(tmp_path: Path) -> None:
    samples = ingest(write_dataset(tmp_path))[0].to_pandas()
    store = tmp_path / "store"
    images = {
        p.source: p.key for p in prepare_images(image_sources(samples), store, ImageSettings())
    }
    prompts = render_prompts(samples, "future_observation", images)
    row = prompts.iloc[0]
    assert row["system_text"] == "system"
    assert row["user_text"].startswith("question env_3_5_self_shared_4way_000001_what")
    assert row["media_kinds"] == ["image"] * 5
    assert row["offered_option_ids"] == ["A", "B", "C", "D"]
    expected = request_key(
        "future_observation",
        row["system_text"],
        row["user_text"],
        row["media_keys"],
        row["media_kinds"],
    )
    assert row["request_key"] == expected
    # All five tiny test images are the same colour: one prepared file serves them all.
    assert len(set(row["media_keys"])) == 1


def test_render_falls_back_to_templates(tmp_path: Path) -> None:
    images_in = default_image_samples()
    for sample in images_in:
        for key in ("prompt_text", "user_prompt", "system_prompt"):
            sample.pop(key)
    samples = ingest(write_dataset(tmp_path, image_samples=images_in))[0].to_pandas()
    images = {
        p.source: p.key
        for p in prepare_images(image_sources(samples), tmp_path / "s", ImageSettings())
    }
    prompts = render_prompts(samples, "landmark_position", images)
    user = prompts.iloc[0]["user_text"]
    assert "Front" in user and "a red-roofed tower" in user
    assert "bbox_xyxy_norm" in prompts.iloc[0]["system_text"]


def test_render_template_error_names_sample(tmp_path: Path) -> None:
    images_in = default_image_samples()
    for sample in images_in:
        sample.pop("user_prompt")
        sample.pop("prompt_text")
        sample.pop("reference_object_view")
    samples = ingest(write_dataset(tmp_path, image_samples=images_in))[0].to_pandas()
    images = {
        p.source: p.key
        for p in prepare_images(image_sources(samples), tmp_path / "s", ImageSettings())
    }
    with pytest.raises(DataError) as info:
        render_prompts(samples, "landmark_position", images)
    assert info.value.sample == images_in[0]["sample_id"]


def test_video_render_modes(tmp_path: Path) -> None:
    samples = ingest(write_dataset(tmp_path))[0].to_pandas()
    store = tmp_path / "store"
    images = {
        p.source: p.key for p in prepare_images(image_sources(samples), store, ImageSettings())
    }
    source = samples[samples["task"] == "behavior"].iloc[0]["media"][0]["resolved_path"]
    video_paths = {
        m["resolved_path"] for media in samples["media"] for m in media if m["role"] == "video"
    }
    as_file = render_prompts(samples, "behavior", images, videos={p: "k" * 32 for p in video_paths})
    assert as_file.iloc[0]["media_kinds"] == ["video", "image"]
    from dualcog.media.store import PreparedFrames

    frames = {p: PreparedFrames(p, ["f1", "f2"], [0.0, 5.0]) for p in video_paths}
    as_frames = render_prompts(samples, "landmark_visibility", images, frames=frames)
    row = as_frames.iloc[0]
    assert row["media_kinds"] == ["frames", "frames", "image"]
    assert row["user_text"].endswith(frame_note([0.0, 5.0]))
    assert "0.00s, 5.00s" in row["user_text"]
    assert source in video_paths
    # The rendering decides the request, so the two modes have different keys.
    assert (
        as_file.iloc[0]["request_key"]
        != render_prompts(samples, "behavior", images, frames=frames).iloc[0]["request_key"]
    )
