"""The configured model comparisons, checked when the workflow is parsed.

Apart from `compare.py` (numpy, pandas) so that the Snakefile, which every Snakemake start-up
(each cluster job's too) reads, imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping

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
        if (model_a, model_b) not in pairs:
            pairs.append((model_a, model_b))
    return pairs
