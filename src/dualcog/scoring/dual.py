"""Matched-context dual metrics (docs/protocol.md §6): pairing samples, then paired co-success.

Pairing is `dualcog.scoring.pairing` (plain Python); the metrics (`dual_metric_rows`) work on
Arrow tables and numpy.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dualcog.schemas import column_array
from dualcog.scoring.columns import encoded, first_seen, flags, string_codes
from dualcog.scoring.pairing import (  # noqa: F401  (re-exported: one pairing for all)
    FAMILY_SIDES,
    IMAGE_PAIR_KEY,
    PAIR_COLUMNS,
    VIDEO_FAMILY,
    VIDEO_SIDES,
)


def pair_codes(scores: pa.Table, pairs: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One integer code per sample id, shared by the score rows and both sides of every pair:
    (score codes, agent-side codes, world-side codes, number of codes)."""
    score_code, agent_code, world_code = string_codes(
        scores["sample_id"], pairs["agent_sample_id"], pairs["world_sample_id"]
    )
    n_codes = 1 + max((int(c.max()) for c in (score_code, agent_code, world_code) if len(c)),
                      default=-1)  # fmt: skip
    return score_code, agent_code, world_code, n_codes


def _families_of(tasks: Iterable) -> list[str]:
    chosen = set(tasks)
    return [f for f, sides in FAMILY_SIDES.items() if set(sides) <= chosen]


def pairs_for_tasks(pairs: pa.Table, tasks: Iterable) -> pa.Table:
    """The pairs (PAIRS rows) of the families whose two sides are both among `tasks`.

    A family's pairs depend only on the samples of its two tasks, so this equals
    `dual_pairs` of the samples restricted to `tasks`: the benchmark's pairs are computed
    once and every run, whatever tasks it ran, reads its own from them.
    """
    families = column_array(_families_of(tasks), pa.string())
    return pairs.filter(pc.is_in(pairs["family"], value_set=families))


def _success_by_sample(codes: np.ndarray, flag: np.ndarray, n_codes: int) -> np.ndarray:
    """Per sample code: it has a score row and every one of its rows succeeded (a behavior
    side needs both of its levels; a null flag counts as a failure)."""
    present = np.bincount(codes, minlength=n_codes) > 0
    failed = np.bincount(codes[~flag], minlength=n_codes) > 0
    return present & ~failed


def dual_metric_rows(scores: pa.Table, pairs: pa.Table) -> list[tuple]:
    """dual_semantic_acc / dual_evidence_acc rows (task = family) per parse mode and stratum,
    as (task, parse, stratum, metric, value, n), from a SCORES table and the PAIRS to use.

    Parse modes are those in which the family's agent-state task was scored, in order of
    appearance. A side without a score row in that mode (not scored, or no response) fails.
    """
    score_code, agent_code, world_code, n_codes = pair_codes(scores, pairs)
    parse, parse_names = encoded(scores["parse"])
    request, request_names = encoded(scores["request_task"])
    semantic, evidence = flags(scores["semantic_ok"]), flags(scores["evidence_ok"])
    family_of, family_names = encoded(pairs["family"])
    stratum_of, stratum_names = encoded(pairs["stratum"])
    rows = []
    for family, (agent_task, _) in FAMILY_SIDES.items():
        in_family = family_of == (family_names.index(family) if family in family_names else -2)
        if not in_family.any():
            continue
        agent, world = agent_code[in_family], world_code[in_family]
        strata = stratum_of[in_family]
        present = sorted(stratum_names[c] for c in np.unique(strata[strata >= 0]))
        masks = [("all", np.ones(len(agent), bool))] + [
            (stratum, strata == stratum_names.index(stratum)) for stratum in present
        ]
        agent_request = request_names.index(agent_task) if agent_task in request_names else -2
        for mode in first_seen(parse[request == agent_request]):
            if mode < 0:
                continue
            in_mode = (parse == mode) & (score_code >= 0)
            success = {}
            for metric, flag in (("dual_semantic_acc", semantic), ("dual_evidence_acc", evidence)):
                ok = _success_by_sample(score_code[in_mode], flag[in_mode], n_codes)
                success[metric] = (ok[agent] & ok[world]).astype(float)
            for stratum, mask in masks:
                n = int(mask.sum())
                if n == 0:
                    continue
                for metric, both in success.items():
                    rows.append((family, parse_names[mode], stratum, metric, both[mask].mean(), n))
    return rows
