"""The configured model comparisons, checked when the workflow is parsed.

Apart from `compare.py` (numpy, pandas) so that the Snakefile, which every Snakemake start-up
(each cluster job's too) reads, imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping

from dualcog.atomic import TEMPORARY_NAME_EXTRA
from dualcog.config import NAME_MAX
from dualcog.errors import ConfigError


def comparison_pairs(config: Mapping) -> list[tuple[str, str]]:
    """The configured `compare` entries, checked against the configured models; a repeat
    set is named as configured (its runs are compared as one, dualcog.stats.compare)."""
    names = {m["name"] for m in config["models"]}
    names |= {m["repeat_of"] for m in config["models"] if m.get("repeat_of")}
    pairs = []
    for entry in config.get("compare") or []:
        model_a, model_b = entry
        for name in (model_a, model_b):
            if name not in names:
                raise ConfigError(f"compare entry {entry!r}: no model named {name!r}")
        if model_a == model_b:
            raise ConfigError(f"compare entry {entry!r}: a model is compared with itself")
        _check_pair_name(model_a, model_b)
        if (model_a, model_b) not in pairs:
            pairs.append((model_a, model_b))
    return pairs


# rules/stats.smk: results/compare/<a>__vs__<b>.parquet (and .md), the longest of a pair's files
PAIR_FILE = "{a}__vs__{b}.parquet"


def _check_pair_name(model_a: str, model_b: str) -> None:
    """Both names in one file name: written through a temporary name, within NAME_MAX."""

    name = PAIR_FILE.format(a=model_a, b=model_b)
    if len(name) + TEMPORARY_NAME_EXTRA > NAME_MAX:
        raise ConfigError(
            f"compare entry {[model_a[:40], model_b[:40]]}: results/compare/{name[:40]}... "
            f"would be {len(name)} characters, at most {NAME_MAX - TEMPORARY_NAME_EXTRA} "
            "(both run names are in one file name): compare runs with shorter names"
        )
