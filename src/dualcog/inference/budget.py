"""Request budgets of one model, shared by all its jobs running at once on one machine.

A model's `rpm_limit`, `tpm_limit` and `concurrency` bound the model, not one job: its six
task jobs (or N shards of one task) draw from one budget kept in files under
`<cache_dir>/<model>/.budget/`, guarded by `flock` (released by the kernel when a process
dies, so a killed job never holds budget):

- `concurrency`: `slot-<i>.lock` files; a request in flight holds one slot's lock.
- `rpm_limit` / `tpm_limit`: token buckets whose state (balance, time) lives in `rate.bin`.
  A request reserves its share at once (the balance may go negative: that is a queue) and
  waits outside the lock until its turn, so requests are spaced at the limit's rate whatever
  process sends them. Limits are per `rate_limit_window_s` (default 60 s, i.e. per minute).

The clock is `CLOCK_MONOTONIC`, common to all processes of one machine. Jobs on other
machines share the budget only if the cache folder is on a filesystem whose `flock` works
across machines (NFSv4 does; see docs/cluster.md for the cluster mechanism).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import struct
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dualcog.inference.locks import flock

DEFAULT_WINDOW_S = 60.0
# Requests are spaced as if the window were this much longer, so that a request delayed on its
# way (a first connection or TLS handshake, scheduling) cannot put one request too many into
# the server's window: at most `limit` arrivals in any window while delays differ by less.
JITTER_GUARD_S = 0.5
SLOT_POLL_S = 0.005
_STATE = struct.Struct("<4d")  # requests balance, requests time, tokens balance, tokens time


class RateBudget:
    """`rpm_limit` and `tpm_limit` of a model config as token buckets in a shared state file.

    `rate_limit_reserve_ratio` keeps that fraction of each limit unused (headroom for other
    clients of the same key); `rate_limit_burst` is how many requests may go back to back.
    `state_path=None` keeps the state in this process only.
    """

    def __init__(
        self,
        model: Mapping[str, Any],
        state_path: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        reserve = float(model.get("rate_limit_reserve_ratio") or 0.0)
        if not 0.0 <= reserve < 1.0:
            raise ValueError("rate_limit_reserve_ratio must be in [0, 1)")
        window = float(model.get("rate_limit_window_s") or DEFAULT_WINDOW_S)
        burst = float(model.get("rate_limit_burst") or 1.0)
        usable = (1.0 - reserve) / (window + JITTER_GUARD_S)
        self.clock = clock
        self.request_rate = self.token_rate = 0.0
        self.request_capacity = burst
        self.estimate = 0.0
        rpm = model.get("rpm_limit")
        if rpm:
            self.request_rate = float(rpm) * usable
        tpm = model.get("tpm_limit")
        if tpm:
            estimate = model.get("estimated_tokens_per_request")
            if not estimate:
                raise ValueError("tpm_limit needs estimated_tokens_per_request")
            self.estimate = float(estimate)
            self.token_rate = float(tpm) * usable
        self.token_capacity = self.estimate * burst
        self.active = bool(self.request_rate or self.token_rate)
        self.fd = -1
        self.local = self._fresh(clock())
        if self.active and state_path is not None:
            state_path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(state_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.path = state_path

    def _fresh(self, now: float) -> list[float]:
        # One request's worth, not a full bucket: a fresh run must not burst.
        return [min(1.0, self.request_capacity), now, self.estimate, now]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _update(self, requests: float, tokens: float) -> float:
        """Take `requests` and `tokens` (negative: give back); seconds until they may be used."""
        now = self.clock()
        if self.fd >= 0:
            flock(self.fd, fcntl.LOCK_EX, self.path)
            try:
                data = os.pread(self.fd, _STATE.size, 0)
                state = list(_STATE.unpack(data)) if len(data) == _STATE.size else None
                # A state from before a reboot carries a future time: start afresh.
                if state is None or state[1] > now or state[3] > now:
                    state = self._fresh(now)
                wait = self._apply(state, now, requests, tokens)
                os.pwrite(self.fd, _STATE.pack(*state), 0)
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            return wait
        return self._apply(self.local, now, requests, tokens)

    def _apply(self, state: list[float], now: float, requests: float, tokens: float) -> float:
        wait = 0.0
        if self.request_rate:
            balance = min(self.request_capacity, state[0] + (now - state[1]) * self.request_rate)
            state[0], state[1] = balance - requests, now
            if requests > 0 and state[0] < 0:
                wait = -state[0] / self.request_rate
        if self.token_rate:
            balance = min(self.token_capacity, state[2] + (now - state[3]) * self.token_rate)
            state[2], state[3] = balance - tokens, now
            if tokens > 0 and state[2] < 0:
                wait = max(wait, -state[2] / self.token_rate)
        return wait

    def reserve(self) -> float:
        """Reserve one request (and its estimated tokens); seconds to wait before sending."""
        if not self.active:
            return 0.0
        return self._update(1.0, self.estimate)

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)

    def record_usage(self, total_tokens: int | None) -> None:
        """Correct the token bucket by the difference between the estimate and real usage."""
        if self.token_rate and total_tokens is not None:
            self._update(0.0, total_tokens - self.estimate)


class ConcurrencySlots:
    """At most `size` requests in flight across every process using `folder`."""

    def __init__(self, size: int, folder: Path | None) -> None:
        self.size = size
        self.fds: list[int] = []
        self.free = list(range(size))  # slots this process does not hold
        self.local = asyncio.Semaphore(size)
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            self.fds = [
                os.open(folder / f"slot-{i}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                for i in range(size)
            ]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def _try_take(self) -> int | None:
        for position, slot in enumerate(self.free):
            try:
                flock(self.fds[slot], fcntl.LOCK_EX | fcntl.LOCK_NB, self.folder)
            except BlockingIOError:
                continue
            del self.free[position]
            return slot
        return None

    async def acquire(self) -> int:
        await self.local.acquire()
        if not self.fds:
            return self.free.pop()
        delay = SLOT_POLL_S
        while (slot := self._try_take()) is None:
            # Every slot is held by other jobs of this model: wait for one to finish.
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.2)
        return slot

    def release(self, slot: int) -> None:
        if self.fds:
            fcntl.flock(self.fds[slot], fcntl.LOCK_UN)
        self.free.append(slot)
        self.local.release()


def budget_folder(model_cache_dir: Path) -> Path:
    return model_cache_dir / ".budget"
