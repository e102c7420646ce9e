"""Snakemake's params records without importing pandas where no value can be a pandas object.

Snakemake 9 records and compares each job's params (the `params` rerun trigger) through
`PersistenceBase._serialize_param_pandas` whenever pandas is installed. That method imports
pandas only to ask whether a value is a DataFrame, Series or Index, and otherwise returns what
`_serialize_param_builtin` returns. In a process that has not imported pandas no value can be a
pandas object, so the builtin answer is the same string without the import, which costs about
half a CPU second in every Snakemake process that records or compares params: each run, each
dry run of a finished run, each cluster job (this workflow's params are plain values).

`record_params_without_pandas` wraps the method once, in the process that reads the
Snakefile; a Snakemake without that method is left as it is.
"""

from __future__ import annotations

import sys
from typing import Any

_MARK = "_dualcog_without_pandas"


def record_params_without_pandas() -> bool:
    """Wrap Snakemake's pandas-aware params serializer; True when it was wrapped now."""
    try:
        from snakemake.persistence import PersistenceBase
    except ImportError:
        return False
    original = getattr(PersistenceBase, "_serialize_param_pandas", None)
    builtin = getattr(PersistenceBase, "_serialize_param_builtin", None)
    if original is None or builtin is None or getattr(original, _MARK, False):
        return False

    def serialize(self: Any, value: Any) -> Any:
        if "pandas" not in sys.modules:  # then `value` cannot be a pandas object
            return builtin(self, value)
        return original(self, value)

    setattr(serialize, _MARK, True)
    PersistenceBase._serialize_param_pandas = serialize
    return True
