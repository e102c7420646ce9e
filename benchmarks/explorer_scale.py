"""Explorer at paper scale: page and chunk sizes, build time, and browser load time.

A synthetic run of the benchmark's size (4,096 image and 2,048 video samples, one model) with
text of realistic length (sample ids, questions, raw responses) is scored by the real scorer
and rendered by the explorer. Printed side by side with a naive single-file page (every card
inlined in one HTML file, no paging), built from the same cards:
  - bytes of the page a browser opens, of the largest chunk, and of everything;
  - Python build time (wall and CPU);
  - with Chromium installed, the time until the first page of cards is drawn.

Usage: python benchmarks/explorer_scale.py [--out /tmp/explorer-scale]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dualcog.explorer.page import render_cards, write_explorer
from dualcog.explorer.records import MediaIndex, sample_records
from dualcog.schemas import PARSED, SAMPLES, to_table
from dualcog.scoring import score_samples
from dualcog.tasks import IMAGE_TASKS

N_IMAGE, N_BEHAVIOR, N_VISIBILITY = 4096, 1024, 1024
QUESTION = (
    "Image 1 shows the Front facade of the red warehouse in the landmark-centric coordinate "
    "frame. Based on that reference, what is your position relative to the landmark in image 2?"
    " Select one option and return the normalized bounding box of the landmark in image 2. "
)
RAW = "<think>" + "Looking at the views, the landmark appears to the left. " * 5 + "</think>\n"


def _box(rng) -> list[float]:
    x, y = rng.uniform(0, 0.6, 2)
    w, h = rng.uniform(0.05, 0.4, 2)
    return [float(x), float(y), float(x + w), float(y + h)]


def _media(roles: list[str], i: int) -> list[dict]:
    return [{"role": r, "path": f"{r}/{i}.jpg", "resolved_path": f"/data/{r}/{i}.jpg"}
            for r in roles]  # fmt: skip


def synthetic_run(rng) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    samples, parsed, responses = [], [], []
    for i in range(N_IMAGE):
        task = IMAGE_TASKS[i % 4]
        sid = f"env_{i % 12}_{i // 48}_self_shared_{'4way' if i % 2 else '8way'}_{i:06d}_where"
        fo = task == "future_observation"
        candidates = [f"candidate_{o}" for o in "ABCD"]
        roles = ["reference", *candidates] if fo else ["reference", "target"]
        samples.append({
            "sample_id": sid, "task": task, "modality": "image",
            "difficulty": "4way" if i % 2 else "8way", "scene_id": f"env_{i % 12}",
            "landmark_description": "the red warehouse", "user_prompt": QUESTION,
            "media": _media(roles, i),
            "options": [{"option_id": o, "label": f"Option {o}", "level": None} for o in "ABCD"],
            "gold_option_id": "ABCD"[i % 4], "gold_bbox": _box(rng),
            "candidates": [{"option_id": o, "bbox": _box(rng), "view": "v"} for o in "ABCD"]
            if fo else None,
        })  # fmt: skip
        box = _box(rng)
        parsed.append({
            "sample_id": sid, "task": task, "parse": "compatible", "stage": "strict",
            "all_valid": True, "option_ids": ["ABCD"[int(rng.integers(4))]],
            "option_valid": True, "bbox": box, "bbox_valid": True,
        })  # fmt: skip
        responses.append((sid, task, RAW + f'{{"answer_option_id":"A","bbox_xyxy_norm":{box}}}'))
    for m in range(N_BEHAVIOR + N_VISIBILITY):
        behavior = m < N_BEHAVIOR
        task = "behavior" if behavior else "landmark_visibility"
        sid = f"env_{m % 12}_batch_env_{m % 12}_{m}_composite_0001_fill_01_{task}_{m:06d}"
        sample = {
            "sample_id": sid, "task": task, "modality": "video",
            "difficulty": ("easy", "medium", "hard")[m % 3], "scene_id": f"env_{m % 12}",
            "user_prompt": QUESTION, "media": _media(["video", "reference"], m),
            "duration_sec": 60.0,
        }  # fmt: skip
        if behavior:
            sample["options"] = [
                {"option_id": o, "label": f"Behavior {o}", "level": "composite" if o in "EF"
                 else "atomic"} for o in "ABCDEFGH"
            ]  # fmt: skip
            sample["composite_mission"] = m % 2 == 0
            sample["gold_items"] = [
                {"option_id": "A", "label": "a", "level": "atomic", "intervals": [[0.0, 10.0]]},
                {"option_id": "B", "label": "b", "level": "atomic",
                 "intervals": [[10.0, 20.0], [30.0, 40.0]]},
                {"option_id": "E", "label": "e", "level": "composite", "intervals": [[0.0, 40.0]]},
            ]  # fmt: skip
            answers = [{"option_id": o, "intervals": [[float(s), float(s) + 9.0]]}
                       for o, s in zip("ABE", rng.uniform(0, 30, 3), strict=True)]  # fmt: skip
            parsed.append({"sample_id": sid, "task": task, "parse": "compatible",
                           "stage": "fence", "all_valid": True, "answers": answers,
                           "answers_valid": True})  # fmt: skip
        else:
            sample["gold_visible_count"] = 2
            sample["gold_visible_intervals"] = [[5.0, 15.0], [30.0, 45.0]]
            parsed.append({"sample_id": sid, "task": task, "parse": "compatible",
                           "stage": "keys", "all_valid": True, "visible_count": 2,
                           "count_valid": True, "intervals_valid": True,
                           "visible_intervals": [[float(s), float(s) + 12.0]
                                                 for s in rng.uniform(0, 40, 2)]})  # fmt: skip
        samples.append(sample)
        responses.append((sid, task, RAW + '{"answers": []}'))
    samples_frame = to_table(
        pd.DataFrame([{n: r.get(n) for n in SAMPLES.names} for r in samples], dtype=object),
        SAMPLES,
    ).to_pandas()
    parsed_frame = to_table(
        pd.DataFrame([{n: r.get(n) for n in PARSED.names} for r in parsed], dtype=object),
        PARSED,
    ).to_pandas()
    response_frame = pd.DataFrame(responses, columns=["sample_id", "task", "raw_text"]).assign(
        status="ok", error_type=None
    )
    return samples_frame, parsed_frame, response_frame


def media_index(samples: pd.DataFrame) -> MediaIndex:
    images, videos = {}, {}
    for media in samples["media"]:
        for item in media:
            path = item["resolved_path"]
            if item["role"] == "video":
                videos[path] = ([f"media/frames/{i}.jpg" for i in range(48)],
                                [i * 60 / 47 for i in range(48)])  # fmt: skip
            else:
                images[path] = (f"media/{abs(hash(path)) % 10**8}.jpg", 320, 240)
    return MediaIndex(images, videos)


def naive_page(cards: list[str | None], path: Path) -> Path:
    """Every card inlined in one HTML file: what a page without paging would weigh."""
    body = "\n".join(c for c in cards if c)
    path.write_text(f"<!doctype html><meta charset=utf-8><main>{body}</main>", encoding="utf-8")
    return path


def browser_first_draw(url: str, ready: str) -> tuple[float, list[str]] | None:
    """Seconds from navigation until `ready` holds in headless Chromium, and the chunk scripts
    the page loaded (None without Chromium)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    try:
        from cdp_browser import CHROMIUM, Browser
    except ImportError:
        return None
    if not Path(CHROMIUM).is_file():
        return None
    with Browser() as browser:
        browser.open("about:blank")
        started = time.perf_counter()
        browser.call("Page.navigate", url=url)
        browser.wait_for(ready, timeout=120)
        elapsed = time.perf_counter() - started
        loaded = browser.evaluate(
            "Array.from(document.querySelectorAll('script[src]')).map(s => s.src)"
        )
        return elapsed, loaded or []


def _loaded_bytes(page: Path, scripts: list[str]) -> int:
    from urllib.parse import unquote, urlparse

    return page.stat().st_size + sum(Path(unquote(urlparse(s).path)).stat().st_size
                                     for s in scripts)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="explorer-scale-"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    samples, parsed, responses = synthetic_run(np.random.default_rng(0))
    scores = score_samples(samples, parsed, ("compatible",))
    wall, cpu = time.perf_counter(), time.process_time()
    records = sample_records(samples, parsed, scores, responses, media_index(samples))
    records_wall, records_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    files = write_explorer("paper-model", records, out / "paper-model.html",
                           out / "data" / "paper-model", all_models=["paper-model"],
                           stamp=None)  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    sizes = files.sizes()
    naive_wall, naive_cpu = time.perf_counter(), time.process_time()
    naive = naive_page(render_cards(records, "paper-model"), out / "naive.html")
    naive_wall, naive_cpu = time.perf_counter() - naive_wall, time.process_time() - naive_cpu
    n = sum(r is not None for r in records)
    print(f"samples: {n} ({N_IMAGE} image, {N_BEHAVIOR + N_VISIBILITY} video)")
    print(f"{'':34}{'explorer (paged)':>20}{'naive single file':>20}")
    print(f"{'page opened (bytes)':34}{sizes['page_bytes']:>20,}{naive.stat().st_size:>20,}")
    print(f"{'largest chunk (bytes)':34}{sizes['largest_chunk_bytes']:>20,}{'-':>20}")
    print(f"{'chunks':34}{sizes['chunks']:>20}{'-':>20}")
    print(f"{'all files (bytes)':34}{sizes['page_bytes'] + sizes['total_chunk_bytes']:>20,}"
          f"{naive.stat().st_size:>20,}")  # fmt: skip
    print(f"records (both): {records_wall:.2f} s wall / {records_cpu:.2f} s CPU")
    print(f"{'write pages wall / CPU (s)':34}{f'{wall:.2f} / {cpu:.2f}':>20}"
          f"{f'{naive_wall:.2f} / {naive_cpu:.2f}':>20}")  # fmt: skip
    ready = "document.body && document.body.dataset.rendered"
    paged = browser_first_draw(files.page.as_uri(), ready)
    if paged is not None:
        flat = browser_first_draw(naive.as_uri(), "document.readyState === 'complete'")
        print(f"{'browser: first cards drawn (s)':34}{paged[0]:>20.2f}{flat[0]:>20.2f}")
        print(f"{'browser: bytes read, first view':34}"
              f"{_loaded_bytes(files.page, paged[1]):>20,}{naive.stat().st_size:>20,}")  # fmt: skip
        for view in ("#task=landmark_position&outcome=answer", "#difficulty=hard"):
            filtered = browser_first_draw(files.page.as_uri() + view, ready)
            print(
                f"browser: {view}: drawn in {filtered[0]:.2f} s, "
                f"{len(filtered[1])} chunks, {_loaded_bytes(files.page, filtered[1]):,} bytes"
            )
    print(f"files under {out}")


if __name__ == "__main__":
    main()
