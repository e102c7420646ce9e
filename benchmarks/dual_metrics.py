"""Dual metrics at paper scale: pairs once per benchmark vs a fair per-model loop.

Samples are a paper-scale benchmark's (`results/benchmark/samples.parquet` of a run of
scripts/make_paper_scale.py, or any samples file); each of `--models` runs gets random
per-sample semantic/evidence outcomes in every parse mode. Ours pairs the samples once
(`dual_pairs`, as the workflow's `pairs` rule) and computes each run's dual metrics from
those pairs (`dual_metric_rows`). The naive loop does what a per-model job did by hand: pair
the samples with dicts, then count co-successes per family, parse and stratum over plain
lists. The values and counts must be identical.

Usage: python benchmarks/dual_metrics.py SAMPLES.parquet [--models 45] [--repeats 3]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from _timing import machine, measure, report

from dualcog.schemas import to_table
from dualcog.scoring import PAIRS, SCORES, dual_metric_rows, dual_pairs
from dualcog.scoring.dual import FAMILY_SIDES, IMAGE_PAIR_KEY, VIDEO_FAMILY
from dualcog.tasks import IMAGE_DUAL_FAMILIES, IMAGE_TASKS

COLUMNS = ["sample_id", "task", "scene_id", "landmark_id", "difficulty", "context_index",
           "context_slot", "manifest_path", "manifest_order", "mission_id"]  # fmt: skip


def random_scores(samples: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Score rows with the columns dual metrics read, behavior samples at two levels."""
    rng = np.random.default_rng(seed)
    parts = []
    for parse in ("strict", "compatible", "legacy"):
        rows = samples if parse != "legacy" else samples[samples["task"].isin(IMAGE_TASKS)]
        behavior = rows["task"] == "behavior"
        expanded = pd.concat([rows, rows[behavior]], ignore_index=True)
        n = len(expanded)
        semantic = pd.array(rng.random(n) < 0.6, dtype="boolean")
        semantic[rng.random(n) < 0.02] = pd.NA
        parts.append(pd.DataFrame({
            "sample_id": expanded["sample_id"].to_numpy(), "parse": parse,
            "request_task": expanded["task"].to_numpy(), "semantic_ok": semantic,
            "evidence_ok": pd.array(rng.random(n) < 0.5, dtype="boolean"),
        }))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def naive_pairs(s: dict) -> list[tuple[str, str, str, str]]:
    """Matched-context pairs with dicts: the k-th agent and k-th world sample of one key
    (ordered by context index, then sample id); missions by their first occurrence."""
    out = []
    n = len(s["sample_id"])
    for family, (agent, world) in IMAGE_DUAL_FAMILIES.items():
        groups: dict[tuple, dict[str, list]] = {}
        order = sorted(
            (i for i in range(n) if s["task"][i] in (agent, world)
             and all(s[k][i] is not None for k in IMAGE_PAIR_KEY)),
            key=lambda i: (s["context_index"][i] is None, s["context_index"][i] or 0,
                           s["sample_id"][i]),
        )  # fmt: skip
        rank = {i: r for r, i in enumerate(order)}  # pairs come in the agent's sorted order
        for i in order:
            key = tuple(s[k][i] for k in IMAGE_PAIR_KEY)
            groups.setdefault(key, {agent: [], world: []})[s["task"][i]].append(i)
        keyed = []
        for key, sides in groups.items():
            for a, w in zip(sides[agent], sides[world], strict=False):
                keyed.append((rank[a], (family, s["sample_id"][a], s["sample_id"][w], key[2])))
        out += [pair for _, pair in sorted(keyed, key=lambda t: t[0])]
    firsts: dict[str, dict[str, int]] = {"behavior": {}, "landmark_visibility": {}}
    order = sorted(
        (i for i in range(n) if s["task"][i] in firsts),
        key=lambda i: (s["manifest_path"][i] is None, s["manifest_path"][i] or "",
                       s["manifest_order"][i] is None, s["manifest_order"][i] or 0),
    )  # fmt: skip
    for i in order:
        if s["mission_id"][i] is not None:
            firsts[s["task"][i]].setdefault(s["mission_id"][i], i)
    for mission, b in sorted(firsts["behavior"].items(), key=lambda t: t[1]):
        v = firsts["landmark_visibility"].get(mission)
        if v is not None:
            out.append((VIDEO_FAMILY, s["sample_id"][b], s["sample_id"][v], s["difficulty"][b]))
    return out


def naive_dual(pairs: list, sc: dict) -> dict[tuple, tuple[float, int]]:
    ok: dict[tuple, list[bool]] = {}
    for sid, parse, semantic, evidence in zip(
        sc["sample_id"], sc["parse"], sc["semantic_ok"], sc["evidence_ok"], strict=True
    ):
        both = ok.setdefault((sid, parse), [True, True])
        both[0] = both[0] and bool(semantic) if semantic is not None else False
        both[1] = both[1] and bool(evidence) if evidence is not None else False
    out = {}
    for family, (agent_task, _) in FAMILY_SIDES.items():
        family_pairs = [p for p in pairs if p[0] == family]
        modes = list(
            dict.fromkeys(
                p for p, t in zip(sc["parse"], sc["request_task"], strict=True) if t == agent_task
            )
        )
        for parse in modes:
            counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
            for _, a, w, stratum in family_pairs:
                sa, ea = ok.get((a, parse), (False, False))
                sw, ew = ok.get((w, parse), (False, False))
                for key in ("all", stratum) if stratum is not None else ("all",):
                    c = counts[key]
                    c[0] += 1
                    c[1] += sa and sw
                    c[2] += ea and ew
            for stratum, (n, sem, evi) in counts.items():
                out[(family, parse, stratum, "dual_semantic_acc")] = (sem / n, n)
                out[(family, parse, stratum, "dual_evidence_acc")] = (evi / n, n)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples")
    parser.add_argument("--models", type=int, default=45)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    table = pq.read_table(args.samples, columns=COLUMNS)
    samples = table.to_pandas()
    runs = [random_scores(samples, seed) for seed in range(args.models)]
    run_tables = [to_table(scores, SCORES) for scores in runs]
    s = {c: samples[c].astype(object).where(samples[c].notna(), None).tolist() for c in COLUMNS}
    plain = [{c: r[c].astype(object).where(r[c].notna(), None).tolist() for c in r.columns}
             for r in runs]  # fmt: skip

    def ours():
        pairs, _ = dual_pairs(table)
        return [dual_metric_rows(scores, pairs) for scores in run_tables]

    def per_model():  # pairs rebuilt per model
        return [dual_metric_rows(scores, dual_pairs(table)[0]) for scores in run_tables]

    def naive():
        return [naive_dual(naive_pairs(s), sc) for sc in plain]

    ours_t, ours_out = measure(ours, args.repeats)
    per_model_t, per_model_out = measure(per_model, args.repeats)
    naive_t, naive_out = measure(naive, args.repeats)
    pairs, _ = dual_pairs(table)
    pair_rows = list(zip(*(pairs[name].to_pylist() for name in PAIRS.names), strict=True))
    assert pair_rows == naive_pairs(s), "pairs differ"
    for rows, other, expected in zip(ours_out, per_model_out, naive_out, strict=True):
        assert rows == other
        got = {tuple(row[:4]): (row[4], row[5]) for row in rows}
        assert got == expected, "dual metrics differ"
    label = f"dual metrics, {args.models} runs x {len(samples):,} samples"
    report(label, args.models, "runs", ours_t, naive_t)
    print(f"  pairs rebuilt per run (before): wall {per_model_t.wall_s:.3f} s, "
          f"CPU {per_model_t.cpu_s:.3f} s")  # fmt: skip


if __name__ == "__main__":
    main()
