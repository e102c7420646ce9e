"""Bad media (corrupt JPEG, truncated JPEG, truncated MP4) are DataErrors naming the manifest,
the sample, the field and the file; all are reported together and nothing good is lost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dataset_builder import default_image_samples, default_video_samples, write_dataset
from workflow_runner import REPO, run_snakemake, write_config

from dualcog.errors import DataError
from dualcog.explorer.media import prepare_explorer_media
from dualcog.ingest import ingest
from dualcog.media.problems import bad_media_error, video_frame_counts
from dualcog.media.store import (
    ImageSettings,
    MediaFailures,
    frame_count_tolerance,
    prepare_images,
    prepare_videos,
    store_path,
)
from dualcog.prompts.render import image_sources, video_sources

DEMO = REPO / "resources" / "demo"
DEMO_JPEG = DEMO / "scene_data/airsim_env_12/landmarks_raw/rgb_views/17/view_00_front.jpg"
DEMO_MP4 = next(DEMO.rglob("batch_env_12_3_atomic_0002_fill_01/final_task/task_rgb_web.mp4"))
DEMO_MP4_FRAMES = 41


def _dataset(root: Path) -> Path:
    """The builder's dataset with real demo MP4s (41 frames) in place of its stub bytes."""
    videos = default_video_samples()
    for sample in videos:
        sample["frame_count"] = DEMO_MP4_FRAMES
    data_root = write_dataset(root, default_image_samples(), videos)
    for path in data_root.rglob("*.mp4"):
        shutil.copyfile(DEMO_MP4, path)
    return data_root


def _media_file(samples, sample_id: str, role: str) -> Path:
    row = samples[samples["sample_id"] == sample_id].iloc[0]
    return Path(next(m["resolved_path"] for m in row["media"] if m["role"] == role))


def _break_images(samples) -> tuple[dict, dict]:
    """A corrupt and a truncated JPEG, as the targets of two image samples."""
    images = samples[samples["modality"] == "image"]
    corrupt, truncated = images.iloc[0], images.iloc[2]
    _media_file(samples, corrupt["sample_id"], "target").write_bytes(b"not a jpeg \x00\xff" * 64)
    data = DEMO_JPEG.read_bytes()
    _media_file(samples, truncated["sample_id"], "target").write_bytes(data[: len(data) // 2])
    return corrupt, truncated


def _truncate_video(samples) -> dict:
    videos = samples[samples["modality"] == "video"]
    victim = videos.iloc[-1]  # the atomic mission: its own video file
    data = DEMO_MP4.read_bytes()
    _media_file(samples, victim["sample_id"], "video").write_bytes(data[: len(data) // 2])
    return victim


def _assert_names(message: str, row, field: str, media_file: Path) -> None:
    lines = [line for line in message.splitlines() if line.lstrip().startswith("- ")]
    line = next(line for line in lines if row["sample_id"] in line)
    assert f"manifest {row['manifest_path']}" in line
    assert f"field {field!r}" in line
    assert str(media_file) in line


def test_bad_images_are_reported_together_and_good_ones_kept(tmp_path: Path) -> None:
    samples = ingest(_dataset(tmp_path / "data"))[0].to_pandas()
    corrupt, truncated = _break_images(samples)
    store = tmp_path / "store"
    with pytest.raises(MediaFailures) as caught:
        prepare_images(image_sources(samples), store, ImageSettings(), workers=2)
    assert len(caught.value.failures) == 2
    error = bad_media_error(samples, caught.value.failures)
    assert isinstance(error, DataError)
    message = str(error)
    for row in (corrupt, truncated):
        _assert_names(
            message, row, "target_image", _media_file(samples, row["sample_id"], "target")
        )
    assert "does not decode" in message
    both = ", ".join(sorted([corrupt["sample_id"], truncated["sample_id"]]))
    assert f"exclude_samples: [{both}]" in message
    # every other image was prepared: preparing the good ones again adds nothing to the store
    stored = set(store.rglob("*.jpg"))
    bad = {str(_media_file(samples, r["sample_id"], "target")) for r in (corrupt, truncated)}
    good = [s for s in image_sources(samples) if s not in bad]
    prepared = prepare_images(good, store, ImageSettings())
    assert stored and set(store.rglob("*.jpg")) == stored
    assert {store_path(store, p.key, "jpg") for p in prepared} == stored


@pytest.mark.parametrize("frames", [None, 4], ids=["video_url", "frames4"])
def test_truncated_video_is_caught_in_both_modes(tmp_path: Path, frames: int | None) -> None:
    # one video task, so each video serves exactly one sample
    samples = ingest(_dataset(tmp_path / "data"), ["landmark_visibility"])[0].to_pandas()
    victim = _truncate_video(samples)
    bad_file = _media_file(samples, victim["sample_id"], "video")
    store = tmp_path / "store"
    with pytest.raises(MediaFailures) as caught:
        prepare_videos(
            video_sources(samples), store, frames, ImageSettings(), video_frame_counts(samples)
        )
    assert [f.source for f in caught.value.failures] == [str(bad_file)]
    error = bad_media_error(samples, caught.value.failures)
    # one bad file used by one sample: the error's own fields name it too
    assert (error.file, error.sample) == (victim["manifest_path"], victim["sample_id"])
    assert error.field == "video_web_path (else video_path)"
    _assert_names(str(error), victim, error.field, bad_file)
    assert f"exclude_samples: [{victim['sample_id']}]" in str(error)
    # both tasks: the bad file is reported once per sample using it
    everything = ingest(tmp_path / "data")[0].to_pandas()
    users = everything[everything["media"].map(lambda m: str(bad_file) in str(m))]
    assert len(users) == 2
    message = str(bad_media_error(everything, caught.value.failures))
    for _, row in users.iterrows():
        _assert_names(message, row, "video_web_path (else video_path)", bad_file)
    # the good video was prepared (the truncated one never reached the store)
    assert list(store.rglob("*.mp4" if frames is None else "*.jpg"))


def test_a_video_shorter_than_its_manifest_says_is_refused(tmp_path: Path) -> None:
    """A file that decodes cleanly but has too few frames (cut at a frame boundary)."""
    samples = ingest(_dataset(tmp_path / "data"))[0].to_pandas()
    source = video_sources(samples)[0]
    expected = DEMO_MP4_FRAMES + frame_count_tolerance(DEMO_MP4_FRAMES) + 1
    with pytest.raises(MediaFailures) as caught:
        prepare_videos([source], tmp_path / "store", None, ImageSettings(), {source: expected})
    assert f"decoded {DEMO_MP4_FRAMES} video frames" in caught.value.failures[0].reason
    within = DEMO_MP4_FRAMES + frame_count_tolerance(DEMO_MP4_FRAMES)
    rows = prepare_videos([source], tmp_path / "store", None, ImageSettings(), {source: within})
    assert store_path(tmp_path / "store", rows[0]["keys"][0], "mp4").read_bytes() == (
        DEMO_MP4.read_bytes()
    )


def test_excluded_samples_are_dropped_at_ingest(tmp_path: Path) -> None:
    data_root = _dataset(tmp_path / "data")
    everything, _ = ingest(data_root)
    ids = everything["sample_id"].to_pylist()
    left_out = sorted([ids[0], ids[-1]])
    samples, dropped = ingest(data_root, None, [*left_out, "no_such_sample"])
    assert dropped == left_out
    assert samples.num_rows == everything.num_rows - 2
    assert not set(left_out) & set(samples["sample_id"].to_pylist())
    kept = everything.filter(pc.invert(pc.is_in(everything["sample_id"], pa.array(left_out))))
    assert samples.equals(kept)  # the others read exactly as before


def test_explorer_thumbnails_report_bad_images_together(tmp_path: Path) -> None:
    """A run whose models send no media prepares none: the explorer, reading the source
    images, is then where a bad one is found, and it is reported like preparation's."""
    samples = ingest(_dataset(tmp_path / "data"))[0].to_pandas()
    samples = samples[samples["modality"] == "image"].reset_index(drop=True)
    corrupt, truncated = _break_images(samples)
    with pytest.raises(MediaFailures) as caught:
        prepare_explorer_media(samples, tmp_path / "explorer", workers=2)
    message = str(bad_media_error(samples, caught.value.failures))
    for row in (corrupt, truncated):
        _assert_names(
            message, row, "target_image", _media_file(samples, row["sample_id"], "target")
        )
    assert len(list((tmp_path / "explorer").rglob("*.jpg"))) == len(image_sources(samples)) - 2


@pytest.mark.workflow
def test_workflow_fails_naming_bad_video_then_completes_with_exclusion(tmp_path: Path) -> None:
    data_root = _dataset(tmp_path / "data")
    samples = ingest(data_root, ["landmark_visibility"])[0].to_pandas()
    victim = _truncate_video(samples)
    workdir = tmp_path / "run"
    config = {
        "data_root": str(data_root),
        "tasks": ["landmark_visibility"],
        "tables": {"formats": ["csv"]},
        "models": [{"name": "oracle", "backend": "oracle", "group": "baseline"}],
    }
    write_config(workdir, config)
    failed = run_snakemake(workdir, check=False)
    assert failed.returncode != 0
    # No model is sent the video, so nothing is prepared: the explorer's frame grid finds it.
    assert not list((workdir / "results/logs").glob("prepare_*.log"))
    log = (workdir / "results/logs/explorer_media.log").read_text()
    _assert_names(
        log,
        victim,
        "video_web_path (else video_path)",
        _media_file(samples, victim["sample_id"], "video"),
    )
    assert f"exclude_samples: [{victim['sample_id']}]" in log

    write_config(workdir, {**config, "exclude_samples": [victim["sample_id"]]})
    # Completes up to the tables and the explorer page (the job that failed above is upstream
    # of it); the leaderboard and plots read nothing of the media.
    run_snakemake(workdir, "tables", "results/explorer/oracle.html")
    record = json.loads((workdir / "results/benchmark/excluded.json").read_text())
    assert record == {"count": 1, "excluded": [victim["sample_id"]], "not_found": []}
    assert victim["sample_id"] in (workdir / "results/logs/ingest.log").read_text()
    assert list((workdir / "results/tables").glob("*.csv"))
