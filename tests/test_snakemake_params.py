"""Snakemake's params handling without pandas' import (dualcog.snakemake_params)."""

from __future__ import annotations

import subprocess
import sys

# A fresh interpreter: the wrap changes Snakemake classes, and this process holds pandas.
CHECK = """
import sys
import numpy as np
from snakemake.iocontainers import Params, Snakemake
from snakemake.persistence import PersistenceBase
from dualcog.snakemake_params import skip_pandas_for_plain_params

# Stands in for a Persistence: the serializers read nothing of it but this method.
owner = type("Owner", (), {"_serialize_param_builtin": PersistenceBase._serialize_param_builtin})()
values = [None, 3, 0.5, True, "a", [1, "b"], (2,), {"k": [1, {"x": None}]}, {1, 2}, object()]
params = Params(toclone=[{"model": "m"}, ["a", 1], "x", np.arange(3), 7])
params._set_name("settings", 0)
params._set_name("arr", 3)


def stored(store):
    job = object.__new__(Snakemake)
    store(job, params)
    return (list(job._params_store), list(job._params_store._get_names()), job._params_types,
            repr(list(job.params)), job.params.settings)


def serialized():
    return [PersistenceBase._serialize_param_pandas(owner, v) for v in values]


builtin = [PersistenceBase._serialize_param_builtin(owner, v) for v in values]
original_store = Snakemake._safely_store_params
assert skip_pandas_for_plain_params() == [
    "PersistenceBase._serialize_param_pandas", "Snakemake._safely_store_params"
]
assert skip_pandas_for_plain_params() == []  # wrapped once
plain_records, plain_stored = serialized(), stored(Snakemake._safely_store_params)
assert "pandas" not in sys.modules and "polars" not in sys.modules
assert plain_records == builtin
import pandas as pd  # from here on Snakemake's own code runs: the same results
assert serialized() == builtin
assert stored(original_store) == plain_stored, (stored(original_store), plain_stored)
assert plain_stored[2] == {3: "np.ndarray"} and plain_stored[4] == {"model": "m"}
frame = pd.DataFrame({"a": [1, 2]})
assert PersistenceBase._serialize_param_pandas(owner, frame) == repr(
    pd.util.hash_pandas_object(frame).tolist()
)
print("ok")
"""


def test_params_are_handled_as_before_and_pandas_only_when_loaded() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
