"""The outcome-share columns that the audit and usage tables add: each outcome class's
percentage of a model's samples (`tables.usage.outcome_shares` counts them)."""

from __future__ import annotations

import pandas as pd

from dualcog.schemas import OUTCOME_TITLES, OUTCOMES

OUTCOME_NOTE = (
    "Outcome shares: percent of the model's samples, first match wins: request error (no "
    "answer after retries, or none recorded), refused (content filter, refusal), truncated "
    "(the reply stopped at its length limit), empty (no text), unparsable (the compatible "
    "parse cannot read every field), answered."
)


def share_header(outcome: str) -> str:
    return f"{OUTCOME_TITLES[outcome]} %"


def add_outcome_shares(frame: pd.DataFrame, shares: pd.DataFrame | None) -> dict[str, str]:
    """Add one `<class> %` column per outcome class (percent of the model's samples) to a
    frame indexed by run name; returns their number formats."""
    formats = {}
    for outcome in OUTCOMES:
        header = share_header(outcome)
        values = shares[outcome] if shares is not None and outcome in shares else pd.Series()
        frame[header] = [values.get(model, float("nan")) * 100 for model in frame.index]
        formats[header] = ".1f"
    return formats
