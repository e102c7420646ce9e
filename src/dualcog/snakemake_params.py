"""Snakemake's handling of job params without importing pandas where none can be in them.

Snakemake 9 imports pandas (and tries polars) in two places only to ask whether a param is a
pandas (or polars) object: when it records or compares a job's params (the `params` rerun
trigger, `PersistenceBase._serialize_param_pandas`), and when it hands a script job its params
(`iocontainers.Snakemake._safely_store_params`, which stores such objects as plain data). In a
process that has imported neither library no value can be such an object, and both methods
then do what they do for plain values. The import costs about half a CPU second in every
Snakemake process that records params or starts a script job: each run, each dry run of a
finished run, each cluster job. This workflow's params are plain values.

`skip_pandas_for_plain_params` wraps both methods once, in the process reading the Snakefile;
where pandas or polars is loaded, or a Snakemake lacks these methods, Snakemake's own code
runs unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

_MARK = "_dualcog_plain_params"


def _frames_possible() -> bool:
    """A param can be a pandas or polars object only once that library is loaded."""
    return "pandas" in sys.modules or "polars" in sys.modules


def _wrap(cls: type, name: str, plain: Any) -> bool:
    original = getattr(cls, name, None)
    if original is None or getattr(original, _MARK, False):
        return False

    def method(self: Any, value: Any) -> Any:
        if _frames_possible():
            return original(self, value)
        return plain(self, value)

    setattr(method, _MARK, True)
    setattr(cls, name, method)
    return True


def _store_plain_params(self: Any, params: Any) -> None:
    """`_safely_store_params` where no param can be a pandas or polars object: numpy arrays
    (numpy may be loaded) are stored as lists and typed, as Snakemake stores them; the rest
    as they are."""
    from snakemake.iocontainers import Params

    numpy = sys.modules.get("numpy")
    store = Params(toclone=list(params))
    types = {}
    if numpy is not None:
        for i, value in enumerate(params):
            if isinstance(value, numpy.ndarray):
                store[i] = value.tolist()
                types[i] = "np.ndarray"
    store._take_names(params._get_names())
    self._params_store = store
    self._params_types = types


def skip_pandas_for_plain_params() -> list[str]:
    """Wrap Snakemake's two pandas-aware params methods; the names of those wrapped now."""
    wrapped = []
    try:
        from snakemake.iocontainers import Snakemake
        from snakemake.persistence import PersistenceBase
    except ImportError:
        return wrapped
    builtin = getattr(PersistenceBase, "_serialize_param_builtin", None)
    if builtin is not None and _wrap(PersistenceBase, "_serialize_param_pandas", builtin):
        wrapped.append("PersistenceBase._serialize_param_pandas")
    if _wrap(Snakemake, "_safely_store_params", _store_plain_params):
        wrapped.append("Snakemake._safely_store_params")
    return wrapped
