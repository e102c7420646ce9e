"""The names of a failed request's `error_type` and which of them are worth sending again.

One place for the decision that both the request engine's retry loop (an attempt is retried)
and the job-outcome rules (a job with such failures fails, so a rerun sends them again) make:
`dualcog.inference.engine` and `dualcog.inference.outcome` read it. A transport classifies its
API's failures into these names: `http_<status>` for an HTTP status, `rate_limited` for an
API's own "slow down" that is not a 429.
"""

from __future__ import annotations

import re

TRANSIENT_TYPES = frozenset({"timeout", "connection", "bad_response", "rate_limited"})
BUDGET_EXHAUSTED = "budget_exhausted"  # a request a spending limit kept from being sent
TRANSIENT_STATUS = frozenset({408, 409, 429})  # and every 5xx
_HTTP = re.compile(r"^http_(\d{3})$")


def is_transient_status(status: int) -> bool:
    """An HTTP status the server may answer differently next time."""
    return status in TRANSIENT_STATUS or status >= 500


def is_transient(error_type: str | None) -> bool:
    """An `error_type` (`timeout`, `http_429`, ...) the server may answer differently next time."""
    if error_type in TRANSIENT_TYPES:
        return True
    match = _HTTP.match(error_type or "")
    return match is not None and is_transient_status(int(match.group(1)))
