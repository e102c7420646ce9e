"""Prices of a model's tokens (`prices:` on the model or its route): USD per million tokens."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Prices:
    """USD per million tokens: prompt (input), completion (output) and, when the provider
    bills them apart, cached prompt tokens (`cached_input`; None: priced as input)."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(
        self, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0.0
    ) -> float:
        """USD; `cached_tokens` are part of `prompt_tokens` (the OpenAI usage convention)."""
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (
            (prompt_tokens - cached_tokens) * self.input
            + cached_tokens * cached_price
            + completion_tokens * self.output
        ) / 1e6


def model_prices(model: Mapping[str, Any]) -> Prices | None:
    """The `prices` of a model entry (set on the model or its route), None when not given."""
    prices = model.get("prices")
    if not prices:
        return None
    cached = prices.get("cached_input")
    return Prices(
        float(prices["input"]), float(prices["output"]), None if cached is None else float(cached)
    )
