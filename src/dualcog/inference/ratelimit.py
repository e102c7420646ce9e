"""Client-side rate limiting: token buckets for requests/min and tokens/min.

A caller reserves its share at once (the balance may go negative: that is a queue) and then
sleeps outside the lock until its slot, so threads are served in arrival order and the rate
never exceeds the limit by more than the burst.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any


class TokenBucket:
    def __init__(
        self,
        rate_per_s: float,
        capacity: float,
        initial: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_s <= 0 or capacity <= 0:
            raise ValueError("a token bucket needs a positive rate and capacity")
        self.rate = rate_per_s
        self.capacity = capacity
        self.clock = clock
        self.sleep = sleep
        self.lock = threading.Lock()
        # Start with one request's worth, not a full bucket: a fresh run must not burst.
        self.tokens = min(initial, capacity)
        self.updated = clock()

    def _refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def reserve(self, amount: float = 1.0) -> float:
        """Take `amount` now; return the seconds to wait before using it."""
        with self.lock:
            self._refill(self.clock())
            self.tokens -= amount
            return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def acquire(self, amount: float = 1.0) -> float:
        wait = self.reserve(amount)
        if wait > 0:
            self.sleep(wait)
        return wait

    def adjust(self, delta: float) -> None:
        """Give back (delta > 0) or charge extra (delta < 0) after the real cost is known."""
        with self.lock:
            self._refill(self.clock())
            self.tokens = min(self.capacity, self.tokens + delta)


class RateLimiter:
    """`rpm_limit` and `tpm_limit` (with `estimated_tokens_per_request`) of a model config.

    `rate_limit_reserve_ratio` keeps that fraction of each limit unused (headroom for other
    clients of the same key); `rate_limit_burst` is how many requests may go back to back.
    """

    def __init__(
        self,
        model: Mapping[str, Any],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        reserve = float(model.get("rate_limit_reserve_ratio") or 0.0)
        if not 0.0 <= reserve < 1.0:
            raise ValueError("rate_limit_reserve_ratio must be in [0, 1)")
        burst = float(model.get("rate_limit_burst") or 1.0)
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        self.estimate = 0.0
        rpm = model.get("rpm_limit")
        if rpm:
            self.requests = TokenBucket(float(rpm) * (1 - reserve) / 60.0, burst, 1.0, clock, sleep)
        tpm = model.get("tpm_limit")
        if tpm:
            estimate = model.get("estimated_tokens_per_request")
            if not estimate:
                raise ValueError("tpm_limit needs estimated_tokens_per_request")
            self.estimate = float(estimate)
            self.tokens = TokenBucket(
                float(tpm) * (1 - reserve) / 60.0,
                self.estimate * burst,
                self.estimate,
                clock,
                sleep,
            )

    def acquire(self) -> None:
        """Block until one more request may be sent."""
        if self.requests is not None:
            self.requests.acquire(1.0)
        if self.tokens is not None:
            self.tokens.acquire(self.estimate)

    def record_usage(self, total_tokens: int | None) -> None:
        """Correct the token bucket by the difference between the estimate and real usage."""
        if self.tokens is not None and total_tokens is not None:
            self.tokens.adjust(self.estimate - total_tokens)
