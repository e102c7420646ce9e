"""Explorer at paper scale: page and chunk sizes, build time, and browser load time.

A synthetic run of the benchmark's size (4,096 image and 2,048 video samples, one model) with
text of realistic length (sample ids, questions, raw responses) is scored by the real scorer
and written by the explorer (the page, and chunks of records the page draws cards from):
  - bytes of the page a browser opens, of the largest chunk, and of everything;
  - Python build time (wall and CPU);
  - with Chromium installed, the time until the first page of cards is drawn.

With --before REV, one `explorer` job (a fresh interpreter running what scripts/explorer.py
runs, imports included) is timed on this tree and on revision REV side by side: process CPU
per phase, best of --repeat runs, and the chunk bytes. Where both trees write chunks of the
same kind, the two must hold the same cards (pre-rendered HTML: the same elements, attributes
and text, whitespace and attribute quoting aside; records: equal JSON values) and the same page;
across the change to records drawn in the browser (explorer-6) only the sizes and CPU compare.
Across the split into sample cards and a model's records (explorer-7) each card joined with
the record as the page joins them must equal the earlier revision's record, and the two
pages' sample indexes must be equal; a sprite sheet's frame k stands for the earlier per-frame
file (the earlier revision is given per-frame names "SHEET#k" for the same grid).
With --results DIR --model NAME that job reads a finished run's tables (e.g. the paper-scale
benchmark's) instead of the synthetic run.

Usage: python benchmarks/explorer_scale.py [--out /tmp/explorer-scale] [--before f62c403]
       [--results RUN/results --model sim-run-01-Instant] [--repeat 3] [--no-browser]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from dualcog.explorer.page import write_explorer
from dualcog.explorer.records import MediaIndex, sample_records
from dualcog.outcomes import request_outcomes
from dualcog.schemas import PARSED, RESPONSES, SAMPLES, to_table
from dualcog.scoring import SCORES, score_samples
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
                videos[path] = (f"media/frames/{abs(hash(path)) % 10**8}.jpg",
                                [i * 60 / 47 for i in range(48)], 160, 120)  # fmt: skip
            else:
                images[path] = (f"media/{abs(hash(path)) % 10**8}.jpg", 320, 240)
    return MediaIndex(images, videos)


def browser_first_draw(url: str, ready: str) -> tuple[float, list[str]] | None:
    """Seconds from navigation until `ready` holds in headless Chromium, and the chunk scripts
    the page loaded (None without Chromium)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from browser import CHROMIUM, Browser

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


class _Flat(HTMLParser):
    """Elements, attributes (class tokens sorted) and text as a browser reads them; whitespace
    runs collapsed outside <pre>, whitespace-only text dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[tuple] = []
        self.pre = 0

    def handle_starttag(self, tag, attrs) -> None:
        attributes = {k: " ".join(sorted((v or "").split())) if k == "class" else v
                      for k, v in attrs}  # fmt: skip
        self.items.append(("<", tag, tuple(sorted(attributes.items()))))
        self.pre += tag == "pre"

    def handle_endtag(self, tag) -> None:
        self.items.append((">", tag))
        self.pre -= tag == "pre"

    def handle_data(self, data) -> None:
        text = data if self.pre else re.sub(r"\s+", " ", data).strip()
        if text:
            self.items.append(("text", text))


def same_dom(a: str, b: str) -> bool:
    flat = []
    for html in (a, b):
        parser = _Flat()
        parser.feed(html)
        parser.close()
        flat.append(parser.items)
    return flat[0] == flat[1]


def sample_cards_job(inputs: dict, folder: Path) -> None:
    """The `explorer_samples` job's cards of the inputs' samples (once for all models)."""
    from dualcog.explorer.page import write_sample_cards
    from dualcog.explorer.records import CARD_COLUMNS, MediaIndex, sample_cards
    from dualcog.schemas import read_arrow

    cards = sample_cards(read_arrow(inputs["samples"], columns=list(CARD_COLUMNS)),
                         MediaIndex.from_table(read_arrow(inputs["media"])))  # fmt: skip
    write_sample_cards(cards, folder)


def _chunk_cards(data_dir: Path) -> dict[str, list]:
    """The JSON array of each chunk file (a model's records or the sample cards)."""
    out = {}
    for path in sorted(data_dir.glob("c*.js")):
        text = path.read_text(encoding="utf-8")
        out[path.name] = json.loads(text[text.index(",[") + 1 : -len(");\n")])
    return out


def synthetic_outcomes(responses: pd.DataFrame, parsed: pd.DataFrame) -> pd.DataFrame:
    """The outcome classes the `parse` job would write for the synthetic run."""
    return request_outcomes(to_table(responses, RESPONSES), to_table(parsed, PARSED)).to_pandas()


def synthetic_records(samples, parsed, scores, responses) -> list:
    """`sample_records` of the synthetic run, on typed Arrow tables as the job reads them."""
    outcomes = pa.Table.from_pandas(synthetic_outcomes(responses, parsed), preserve_index=False)
    return sample_records(to_table(samples, SAMPLES), to_table(parsed, PARSED),
                          to_table(scores, SCORES), to_table(responses, RESPONSES),
                          media_index(samples), outcomes)  # fmt: skip


def synthetic_inputs(folder: Path) -> dict:
    """The synthetic run as the parquet files an explorer job reads."""
    from dualcog.explorer.media import MEDIA_COLUMNS

    folder.mkdir(parents=True, exist_ok=True)
    samples, parsed, responses = synthetic_run(np.random.default_rng(0))
    scores = score_samples(to_table(samples, SAMPLES), to_table(parsed, PARSED), ("compatible",))
    scores = scores.to_pandas()
    index = media_index(samples)
    media = pd.DataFrame(
        [("image", s, [f], [], w, h) for s, (f, w, h) in index.images.items()]
        + [("video", s, [f], times, w, h) for s, (f, times, w, h) in index.videos.items()],
        columns=MEDIA_COLUMNS,
    )
    outcomes = synthetic_outcomes(responses, parsed)
    for name, frame in (("samples", samples), ("parsed", parsed), ("scores", scores),
                        ("responses", responses), ("media", media),
                        ("outcomes", outcomes)):  # fmt: skip
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    paths = {n: str(folder / f"{n}.parquet")
             for n in ("samples", "parsed", "scores", "media", "outcomes")}  # fmt: skip
    return {"model": "paper-model", "all_models": ["paper-model"],
            "responses": [str(folder / "responses.parquet")], **paths}  # fmt: skip


def run_inputs(results: Path, model: str) -> dict:
    """A finished run's tables of one model."""
    # One run file per model (the parsed folder also holds outcomes and facts files).
    models = sorted(p.name.removesuffix(".run.json")
                    for p in (results / "parsed").glob("*.run.json"))  # fmt: skip
    responses = sorted((results / "responses" / model).glob("*.parquet"))
    return {"model": model, "all_models": models, "responses": [str(p) for p in responses],
            "samples": str(results / "benchmark" / "samples.parquet"),
            "parsed": str(results / "parsed" / f"{model}.parquet"),
            "scores": str(results / "scores" / f"{model}.parquet"),
            "outcomes": str(results / "parsed" / f"{model}.outcomes.parquet"),
            "media": str(results / "explorer" / "media.parquet")}  # fmt: skip


def joined(card: dict, record: dict) -> dict:
    """A sample card and a model's record as the page's script joins them (explorer.js
    `joined`), in the earlier layout: boxes on the images, options marked chosen, a strip
    frame named "SHEET#k"."""
    out = {**card, **record}
    if "images" in card:
        out["images"] = [{**im, "boxes": record["boxes"][i]} for i, im in enumerate(card["images"])]
    if "options" in card:
        out["options"] = [{**o, "chosen": o["id"] in record["chosen"]} for o in card["options"]]
    if out.get("strip"):
        out["strip"] = [{"label": f["label"], "start": f["start"],
                         "file": f"{f['file']}#{f['frame']}", "time": f["time"]}
                        for f in out["strip"]]  # fmt: skip
    for key in ("boxes", "chosen"):
        out.pop(key, None)
    return out


def per_frame_media(inputs: dict, folder: Path) -> dict:
    """The inputs with a media index in the per-frame layout of revisions before sprite sheets:
    a video's files "SHEET#0", "SHEET#1", ... for its grid times."""
    import pandas as pd

    media = pd.read_parquet(inputs["media"])
    media["files"] = [
        [f"{files[0]}#{k}" for k in range(len(times))] if kind == "video" else list(files)
        for kind, files, times in zip(media["kind"], media["files"], media["times"], strict=True)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    media.to_parquet(folder / "media-per-frame.parquet", index=False)
    return {**inputs, "media": str(folder / "media-per-frame.parquet")}


def _page_index(page: Path) -> dict:
    html = page.read_text(encoding="utf-8")
    found = re.search(r'id="explorer-index" type="application/json">(.*?)</script>', html)
    index = json.loads(found.group(1))
    index.pop("samples", None)
    return index


def explorer_job(src: Path, inputs: Path, out: Path, repeat: int) -> dict:
    """Best (least process CPU) of `repeat` explorer jobs, each in a fresh interpreter."""
    script = Path(__file__).with_name("_explorer_job.py")
    env = {**os.environ, "PYTHONPATH": str(src)}
    best = None
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        done = subprocess.run([sys.executable, str(script), str(inputs), str(out)], env=env,
                              capture_output=True, text=True, check=True)  # fmt: skip
        result = json.loads(done.stdout.splitlines()[-1])
        if best is None or result["process_cpu"] < best["process_cpu"]:
            best = result
    return best


def before_after(before: str, inputs: dict, out: Path, repeat: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _workflow import REPO, revision_tree

    out.mkdir(parents=True, exist_ok=True)
    path = out / "inputs.json"
    path.write_text(json.dumps(inputs))
    tree = revision_tree(before)
    sheets = not (tree / "scripts" / "explorer_samples.py").is_file()  # before sample cards
    old_path = path
    if sheets:
        old_path = out / "inputs-per-frame.json"
        old_path.write_text(json.dumps(per_frame_media(inputs, out)))
    try:
        old = explorer_job(tree / "src", old_path, out / "before", repeat)
        new = explorer_job(REPO / "src", path, out / "after", repeat)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    model = inputs["model"]
    old_cards = _chunk_cards(out / "before" / "data" / model)
    new_cards = _chunk_cards(out / "after" / "data" / model)
    if sheets:
        sample_cards_job(inputs, out / "after" / "samples")
        cards = _chunk_cards(out / "after" / "samples")
        new_cards = {name: [None if r is None else joined(cards[name][i], r)
                            for i, r in enumerate(records)]
                     for name, records in new_cards.items()}  # fmt: skip
    assert old_cards.keys() == new_cards.keys(), "different chunk files"
    kinds = {type(c) for cards in (*old_cards.values(), *new_cards.values()) for c in cards} - {
        type(None)
    }
    compared = len(kinds) == 1
    for name, cards in old_cards.items():
        for a, b in zip(cards, new_cards[name], strict=True):
            assert (a is None) == (b is None), name
            if compared and a is not None:
                assert same_dom(a, b) if isinstance(a, str) else a == b, name
    if compared and sheets:
        same_index = _page_index(Path(old["page"])) == _page_index(Path(new["page"]))
        assert same_index, "different sample indexes"
    elif compared:
        old_page = Path(old["page"]).read_text(encoding="utf-8")
        assert old_page == Path(new["page"]).read_text(encoding="utf-8"), "different pages"
    n = sum(c is not None for cards in new_cards.values() for c in cards)
    same = "the same cards and page"
    if sheets:
        same = "the same cards (sample card + record) and sample index"
    if not compared:
        same = "HTML cards before, records after: the same samples in the same chunks"
    print(f"one explorer job, {model}: {n} cards, process CPU (best of {repeat}) "
          f"of revision {before} vs this tree; {same}")  # fmt: skip
    print(f"{'':30}{'before':>14}{'after':>14}")
    for phase in old["phases"]:
        print(f"{phase + ' (CPU s)':30}{old['phases'][phase]:>14.2f}{new['phases'][phase]:>14.2f}")
    print(f"{'job process CPU (s)':30}{old['process_cpu']:>14.2f}{new['process_cpu']:>14.2f}")
    for key in ("page_bytes", "largest_chunk_bytes", "total_chunk_bytes", "chunks"):
        print(f"{key:30}{old['sizes'][key]:>14,}{new['sizes'][key]:>14,}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--before", help="a git revision to time one explorer job against")
    parser.add_argument("--results", type=Path, help="a finished run's results/ (with --before)")
    parser.add_argument("--model", help="the model of --results")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="explorer-scale-"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if args.before:
        inputs = (run_inputs(args.results, args.model) if args.results
                  else synthetic_inputs(out / "inputs"))  # fmt: skip
        before_after(args.before, inputs, out / "job", args.repeat)
        if args.results:
            return
    samples, parsed, responses = synthetic_run(np.random.default_rng(0))
    scores = score_samples(to_table(samples, SAMPLES), to_table(parsed, PARSED), ("compatible",))
    scores = scores.to_pandas()
    wall, cpu = time.perf_counter(), time.process_time()
    records = synthetic_records(samples, parsed, scores, responses)
    records_wall, records_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    files = write_explorer("paper-model", records, out / "paper-model.html",
                           out / "data" / "paper-model", all_models=["paper-model"],
                           stamp=None)  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    sizes = files.sizes()
    n = sum(r is not None for r in records)
    print(f"samples: {n} ({N_IMAGE} image, {N_BEHAVIOR + N_VISIBILITY} video)")
    print(f"{'page opened (bytes)':34}{sizes['page_bytes']:>20,}")
    print(f"{'largest chunk (bytes)':34}{sizes['largest_chunk_bytes']:>20,}")
    print(f"{'chunks':34}{sizes['chunks']:>20}")
    print(f"{'all files (bytes)':34}{sizes['page_bytes'] + sizes['total_chunk_bytes']:>20,}")
    print(f"records: {records_wall:.2f} s wall / {records_cpu:.2f} s CPU")
    print(f"{'write page and chunks wall / CPU (s)':34}{f'{wall:.2f} / {cpu:.2f}':>20}")
    ready = "document.body && document.body.dataset.rendered"
    paged = None if args.no_browser else browser_first_draw(files.page.as_uri(), ready)
    if paged is not None:
        print(f"{'browser: first cards drawn (s)':34}{paged[0]:>20.2f}")
        print(f"{'browser: bytes read, first view':34}{_loaded_bytes(files.page, paged[1]):>20,}")
        for view in ("#task=landmark_position&outcome=answer", "#difficulty=hard"):
            filtered = browser_first_draw(files.page.as_uri() + view, ready)
            print(
                f"browser: {view}: drawn in {filtered[0]:.2f} s, "
                f"{len(filtered[1])} chunks, {_loaded_bytes(files.page, filtered[1]):,} bytes"
            )
    print(f"files under {out}")


if __name__ == "__main__":
    main()
