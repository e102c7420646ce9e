"""Which rows of a response source are responses (docs/protocol.md, "Response sources").

A row is a response when every status field it carries (`status`, `request_status`) reads
`ok` once trimmed, in any letter case, and its `raw_text` is a string (the empty string
included: it is a response that fails to parse). A status field that is null counts as not
carried; any other non-string value is not ok. A null or absent `raw_text` is not a response.
Pure functions over plain values, shared by the replay backend and `parse_run`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

STATUS_FIELDS = ("status", "request_status")


def is_null(value: Any) -> bool:
    """None, and the nulls a table column hands back (pandas NA, float NaN)."""
    return value is None or (type(value) is float and math.isnan(value)) or _is_pandas_na(value)


def _is_pandas_na(value: Any) -> bool:
    # A pandas NA exists only once pandas is loaded: jobs that never load it do not pay for it.
    pandas = sys.modules.get("pandas")
    return pandas is not None and value is pandas.NA


def status_allows(value: Any) -> bool:
    """One status field's verdict: True for a null (not carried) or an `ok` string."""
    # The two usual values first (not carried, exactly `ok`): asked for every row of a run.
    if value is None or (type(value) is str and value == "ok") or is_null(value):
        return True
    return isinstance(value, str) and value.strip().lower() == "ok"


def is_response(statuses: tuple[Any, ...], raw_text: Any) -> bool:
    """The row rule, given the values of the status fields it carries and its text."""
    if not isinstance(raw_text, str):
        return False
    for value in statuses:  # noqa: SIM110 (a loop: no generator per row)
        if not status_allows(value):
            return False
    return True


def record_is_response(record: Mapping[str, Any]) -> bool:
    """The row rule for one record (a replayed JSON line or Parquet row)."""
    if not isinstance(record.get("raw_text"), str):
        return False
    for field in STATUS_FIELDS:  # noqa: SIM110 (a loop: no generator per row)
        if not status_allows(record.get(field)):
            return False
    return True
