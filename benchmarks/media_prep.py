"""Media preparation: once for every model (content-addressed store) vs per model, and
`frames` sampling that converts only the frames it keeps vs converting every frame.

1. Images: the workflow prepares each distinct source once into the shared store, whatever
   the number of models; a per-model preparation (each model its own store) costs that once
   per model. Both are measured for real for each model count on `--sources` images.
2. Frames: `prepare_video_frames` against the former rule (decode and convert every frame,
   keep N) on `--videos` videos; keys, timestamps and JPEG bytes must be identical.

Usage: python benchmarks/media_prep.py BENCHMARK_DIR [--sources 200] [--videos 40]
       [--models 1 5 10] [--frames 8]
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import tempfile
from fractions import Fraction
from pathlib import Path

import av
from _timing import machine, measure, report

from dualcog.media.store import VIDEO_SETTINGS_VERSION as VIDEO_VERSION
from dualcog.media.store import (
    ImageSettings,
    PreparedFrames,
    _key,
    _write_atomic,
    encode_image,
    file_digest,
    prepare_images,
    prepare_video_frames,
    store_path,
    uniform_frame_times,
)


def convert_every_frame(source, store, count: int, settings: ImageSettings) -> PreparedFrames:
    """The former rule: every decoded frame becomes an image, N of them are kept."""
    base = _key(file_digest(source), VIDEO_VERSION, f"frames{count}", settings.tag())
    with av.open(str(source)) as container:
        stream = container.streams.video[0]
        decoded = [
            (float(Fraction(f.pts if f.pts is not None else 0) * stream.time_base), f.to_image())
            for f in container.decode(stream)
        ]
    times = [t - decoded[0][0] for t, _ in decoded]
    keys, stamps = [], []
    for i, target in enumerate(uniform_frame_times(times[-1], count)):
        nearest = min(range(len(times)), key=lambda j: (abs(times[j] - target), j))
        key = _key(base, str(i))
        path = store_path(store, key, "jpg")
        if not path.exists():
            _write_atomic(path, encode_image(decoded[nearest][1], settings))
        keys.append(key)
        stamps.append(round(times[nearest], 3))
    return PreparedFrames(str(source), keys, stamps)


def fresh_store() -> Path:
    return Path(tempfile.mkdtemp(prefix="dualcog-store-"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", type=Path)
    parser.add_argument("--sources", type=int, default=200)
    parser.add_argument("--videos", type=int, default=40)
    parser.add_argument("--models", type=int, nargs="+", default=[1, 5, 10])
    parser.add_argument("--frames", type=int, default=8)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    settings = ImageSettings()
    images = sorted((args.benchmark / "data").rglob("*.jpg"))[: args.sources]
    videos = sorted((args.benchmark / "data").rglob("task_rgb.mp4"))[: args.videos]

    print(f"images: {len(images)} distinct sources, 2 threads")
    for models in args.models:

        def once():
            store = fresh_store()
            prepare_images(images, store, settings, 2)
            shutil.rmtree(store)

        def per_model(models=models):
            for _ in range(models):
                once()

        ours, _ = measure(once, 1)
        naive, _ = measure(per_model, 1)
        report(f"  {models} models: shared store vs per-model preparation", models, "models",
               ours, naive, rate=False)  # fmt: skip

    ours_store, naive_store = fresh_store(), fresh_store()
    ours_t, ours = measure(
        lambda: [prepare_video_frames(v, ours_store, args.frames, settings) for v in videos], 1
    )
    naive_t, naive = measure(
        lambda: [convert_every_frame(v, naive_store, args.frames, settings) for v in videos], 1
    )
    assert [(p.keys, p.timestamps) for p in ours] == [(p.keys, p.timestamps) for p in naive]
    for prepared in ours:
        for key in prepared.keys:
            assert filecmp.cmp(store_path(ours_store, key, "jpg"),
                               store_path(naive_store, key, "jpg"), shallow=False)  # fmt: skip
    report(f"frames{args.frames}: convert kept frames vs convert every frame", len(videos),
           "videos", ours_t, naive_t)  # fmt: skip
    shutil.rmtree(ours_store)
    shutil.rmtree(naive_store)


if __name__ == "__main__":
    main()
