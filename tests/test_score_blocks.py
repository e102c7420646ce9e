"""The scorers work in cache-sized blocks of rows and pairs: the block size changes no value."""

from __future__ import annotations

import random

from score_fixtures import (
    behavior_parsed,
    behavior_sample,
    image_parsed,
    image_sample,
    parsed_frame,
    samples_frame,
    visibility_parsed,
    visibility_sample,
)

from dualcog.scoring import interval_batch, score_samples


def _intervals(rng: random.Random, k: int) -> list:
    cuts = sorted(rng.choice([0.0, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 9.0]) for _ in range(2 * k))
    return [[cuts[2 * i], cuts[2 * i + 1]] for i in range(k)]


def _cases(seed: int = 0):
    rng = random.Random(seed)
    samples, parsed = [], []
    for i in range(40):
        box = sorted(rng.choice([0.1, 0.2, 0.4, 0.5, 0.7]) for _ in range(4))
        samples.append(image_sample(f"i{i}", gold_bbox=(box[0], box[1], box[2], box[3])))
        guess = sorted(rng.choice([0.1, 0.2, 0.4, 0.5, 0.7]) for _ in range(4))
        parsed.append(image_parsed(f"i{i}", option_ids=[rng.choice("AB")], bbox=guess))
        options = {"A": "atomic", "B": "atomic", "C": "composite"}
        gold = [(o, options[o], _intervals(rng, rng.randint(1, 3))) for o in rng.sample("ABC", 2)]
        samples.append(behavior_sample(f"b{i}", options, gold, composite_mission=i % 2 == 0))
        answers = [(o, _intervals(rng, rng.randint(1, 4))) for o in rng.sample("ABC", 2)]
        parsed.append(behavior_parsed(f"b{i}", answers))
        samples.append(visibility_sample(f"v{i}", 2, _intervals(rng, rng.randint(0, 3))))
        parsed.append(visibility_parsed(f"v{i}", 2, _intervals(rng, rng.randint(0, 4))))
    return samples_frame(samples), parsed_frame(parsed)


def test_block_size_changes_no_score(monkeypatch) -> None:
    samples, parsed = _cases()
    whole = score_samples(samples, parsed)
    monkeypatch.setattr(interval_batch, "_BLOCK", 3)
    blocked = score_samples(samples, parsed)
    assert whole["iou"].gt(0).any() and whole["tiou_sum"].gt(0).any()  # not vacuous
    assert blocked.equals(whole)
