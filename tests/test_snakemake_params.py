"""Snakemake's params records without pandas' import (dualcog.snakemake_params)."""

from __future__ import annotations

import subprocess
import sys

# A fresh interpreter: the wrap changes a Snakemake class, and this process may hold pandas.
CHECK = """
import sys
from snakemake.persistence import PersistenceBase
from dualcog.snakemake_params import record_params_without_pandas

# Stands in for a Persistence: the serializers read nothing of it but this method.
owner = type("Owner", (), {"_serialize_param_builtin": PersistenceBase._serialize_param_builtin})()
values = [None, 3, 0.5, True, "a", [1, "b"], (2,), {"k": [1, {"x": None}]}, {1, 2}, object()]
builtin = [PersistenceBase._serialize_param_builtin(owner, v) for v in values]
assert record_params_without_pandas() is True
assert record_params_without_pandas() is False  # wrapped once
wrapped = [PersistenceBase._serialize_param_pandas(owner, v) for v in values]
assert wrapped == builtin, (wrapped, builtin)
assert "pandas" not in sys.modules
import pandas as pd  # once pandas is in the process, its objects are recorded as before
frame = pd.DataFrame({"a": [1, 2]})
assert PersistenceBase._serialize_param_pandas(owner, frame) == repr(
    pd.util.hash_pandas_object(frame).tolist()
)
assert [PersistenceBase._serialize_param_pandas(owner, v) for v in values] == builtin
print("ok")
"""


def test_params_are_recorded_as_before_and_pandas_only_when_loaded() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
