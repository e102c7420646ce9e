"""The `explorer_media` job's work (thumbnails and video frame grids), before vs after.

Runs `dualcog.explorer.media.prepare_explorer_media` on a finished run's samples in a fresh
interpreter for a baseline revision and for this working tree, one after the other, and
prints the process CPU (imports included, worker threads and processes counted) beside the
wall time. Then compares the two trees' thumbnails of the same sources: pixel size, bytes,
and the PSNR between them, printed beside the PSNR between each thumbnail and its own pixels
before JPEG encoding (what the encoding alone changes), so "looks the same" is a number.
Video frame grids: the grid times must be equal; where one tree writes a file per frame and
the other a sprite sheet (explorer-7), each sheet cell is compared with the same frame's file
(PSNR), and the files and bytes per video are printed. --threads is the job's worker count
(threads before 2f8f546, processes since).

Usage: python benchmarks/explorer_media.py RUN_DIR [--baseline main] [--images N]
       [--videos N] [--threads 2] [--keep]
RUN_DIR holds results/benchmark/samples.parquet (scripts/make_paper_scale.py, then the
workflow up to ingest). --images/--videos keep only the first N sources of each kind.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _timing import machine
from _workflow import REPO, revision_tree
from PIL import Image

JOB = r"""
import json, resource, sys, time
start = time.perf_counter()
import pandas as pd
from dualcog.explorer.media import prepare_explorer_media
from dualcog.schemas import read_arrow
samples_path, out, images, videos, threads = sys.argv[1:6]
samples = read_arrow(samples_path).to_pandas()
def first(kind, limit):
    seen, keep = set(), []
    for i, media in enumerate(samples["media"]):
        roles = [m["role"] for m in media]
        is_video = "video" in roles
        if is_video != (kind == "video"):
            continue
        new = {m["resolved_path"] for m in media} - seen
        if new and len(seen) < limit:
            seen |= new
            keep.append(i)
    return keep
rows = sorted(first("image", int(images)) + first("video", int(videos)))
index = prepare_explorer_media(samples.iloc[rows].reset_index(drop=True), out, int(threads))
usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
index.to_parquet(f"{out}/media.parquet", index=False)
print(json.dumps({"cpu": sum(u.ru_utime + u.ru_stime for u in usage),
                  "wall": time.perf_counter() - start,
                  "images": int((index["kind"] == "image").sum()),
                  "videos": int((index["kind"] == "video").sum())}))
"""


def run_job(src: Path, samples: Path, out: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", JOB, str(samples), str(out), str(args.images), str(args.videos),
         str(args.threads)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    error = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if error == 0 else float(10 * np.log10(255**2 / error))


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def compare_thumbnails(before: Path, after: Path, limit: int = 300) -> None:
    """PSNR and mean absolute difference between the two trees' thumbnails of the same
    sources (a smaller one against the other scaled to its size), and PSNR of each
    after-thumbnail against its own pixels before JPEG encoding."""
    import pandas as pd

    from dualcog.explorer.media import THUMB_FILTER
    from dualcog.media.store import fit_size

    old = pd.read_parquet(before / "media.parquet").set_index("source")
    new = pd.read_parquet(after / "media.parquet").set_index("source")
    images = [s for s in new.index if new.at[s, "kind"] == "image" and s in old.index]
    resized = [s for s in images if new.at[s, "width"] != old.at[s, "width"]]
    same = [s for s in images if new.at[s, "width"] == old.at[s, "width"]]
    images = same[: limit // 2] + resized[: limit - min(len(same), limit // 2)]  # both kinds
    between, mad, encoding, sizes = [], [], [], {}
    bytes_old = bytes_new = 0
    for source in images:
        a = (before / old.at[source, "files"][0]).read_bytes()
        b = (after / new.at[source, "files"][0]).read_bytes()
        bytes_old, bytes_new = bytes_old + len(a), bytes_new + len(b)
        pa, pb = pixels(a), pixels(b)
        key = (pa.shape[1], pa.shape[0], pb.shape[1], pb.shape[0])
        sizes[key] = sizes.get(key, 0) + 1
        if pa.shape != pb.shape:  # the larger one scaled down to the other's size
            big, small = (pa, pb) if pa.size > pb.size else (pb, pa)
            big = np.asarray(Image.fromarray(big).resize(small.shape[1::-1], THUMB_FILTER))
            pa, pb = (big, small) if pa.size > pb.size else (small, big)
        between.append(psnr(pa, pb))
        mad.append(float(np.mean(np.abs(pa.astype(np.int16) - pb.astype(np.int16)))))
        target = (int(new.at[source, "width"]), int(new.at[source, "height"]))
        with Image.open(source) as image:  # this tree's thumbnail before JPEG encoding
            image.draft("RGB", target)
            image = image.convert("RGB")
            size = fit_size(image.width, image.height, *target)
            exact = np.asarray(image.resize(size, THUMB_FILTER) if size != image.size else image)
        encoding.append(psnr(exact, pixels(b)))
    print(f"thumbnails compared: {len(images)}; sizes (before w, h, after w, h): count {sizes}")
    print(f"bytes per thumbnail: before {bytes_old / len(images):,.0f}, "
          f"after {bytes_new / len(images):,.0f}")  # fmt: skip
    print(f"PSNR before vs after: median {np.median(between):.1f} dB, min {min(between):.1f} dB;"
          f" mean absolute difference (0-255): median {np.median(mad):.2f}, max {max(mad):.2f};"
          f" the JPEG encoding alone: median {np.median(encoding):.1f} dB, "
          f"min {min(encoding):.1f} dB (higher: closer)")  # fmt: skip


def _frames(folder: Path, files: list, times: list, width: int) -> list[np.ndarray]:
    """A video's grid frames as pixels: its per-frame files, or its sprite sheet's cells."""
    if len(files) == len(times) and len(times) > 1:
        return [pixels((folder / f).read_bytes()) for f in files]
    sheet = pixels((folder / files[0]).read_bytes())
    return [sheet[:, k * width : (k + 1) * width] for k in range(len(times))]


def compare_frames(before: Path, after: Path, limit: int = 100) -> None:
    """Grid times equal; each frame of the two trees compared (PSNR); files and bytes."""
    import pandas as pd

    old = pd.read_parquet(before / "media.parquet").set_index("source")
    new = pd.read_parquet(after / "media.parquet").set_index("source")
    videos = [s for s in new.index if new.at[s, "kind"] == "video"]
    for source in videos:
        assert list(old.at[source, "times"]) == list(new.at[source, "times"]), source
    between, counts, sizes = [], [0, 0], [0, 0]
    for source in videos[:limit]:
        sides = []
        for i, (table, folder) in enumerate(((old, before), (new, after))):
            files, times = list(table.at[source, "files"]), list(table.at[source, "times"])
            counts[i] += len(files)
            sizes[i] += sum((folder / f).stat().st_size for f in files)
            sides.append(_frames(folder, files, times, int(table.at[source, "width"])))
        between += [psnr(a, b) for a, b in zip(*sides, strict=True)]
    n = min(limit, len(videos))
    print(f"videos: grid times equal for all {len(videos)}; compared {n} videos, "
          f"{len(between)} frames")  # fmt: skip
    print(f"files per video: before {counts[0] / n:.1f}, after {counts[1] / n:.1f}; "
          f"bytes per video: before {sizes[0] / n:,.0f}, after {sizes[1] / n:,.0f}")  # fmt: skip
    print(f"frame PSNR before vs after: median {np.median(between):.1f} dB, "
          f"min {min(between):.1f} dB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--images", type=int, default=10**9)
    parser.add_argument("--videos", type=int, default=10**9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    samples = args.run / "results" / "benchmark" / "samples.parquet"
    print(f"machine: {machine()}")
    tree = revision_tree(args.baseline)
    out = Path(tempfile.mkdtemp(prefix="explorer-media-"))
    try:
        before = run_job(tree / "src", samples, out / "before", args)
        after = run_job(REPO / "src", samples, out / "after", args)
        assert before["videos"] == after["videos"]
        n, v = after["images"], after["videos"]
        print(f"images: {before['images']} before, {n} after; {v} videos, {args.threads} threads")
        print(f"{'':16}{'CPU s':>10}{'wall s':>10}")
        for side, result in ((f"before ({args.baseline})", before), ("after", after)):
            print(f"{side:16}{result['cpu']:10.1f}{result['wall']:10.1f}")
        if n:
            compare_thumbnails(out / "before", out / "after")
        if v:
            compare_frames(out / "before", out / "after")
    finally:
        shutil.rmtree(tree, ignore_errors=True)
        if args.keep:
            print(f"kept {out}")
        else:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
